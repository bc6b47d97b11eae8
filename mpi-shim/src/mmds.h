// MMDS in the rank (the paper's §5.1): every communication call's PMPI_x
// (generated, checks.cc) times its body through mmds::Call when recording is
// on; off, the cost is one predictable branch. What is recorded and where
// it goes: monitor/include/bcs/mmds.h and docs/architecture.md ("MMDS").
#pragma once

#include <cstdint>

namespace bcs::shim {

// Generated with checks.cc: the instrumented calls' names, by id.
extern const char* const bcs_mds_names[];
extern const bool bcs_mds_blocking[];
extern const bool bcs_mds_sized[];  // has a (count, datatype)
extern const int bcs_mds_count;

namespace mmds {

// Recording (BCS_MDS on, this rank selected), between MPI_Init's return
// and MPI_Finalize's entry.
extern bool g_on;
constexpr uint64_t kNoSize = ~0ull;  // the call has no (count, datatype)

// At the end of MPI_Init: reads BCS_MDS*, starts the clocks.
void start(int rank, int size);
// At MPI_Finalize's entry: closes the last computation interval and writes
// the rank's report into the job directory.
void stop();

// One call: constructed before the body, done() after it. Calls made by
// calls (the outermost one is what the program called) are not counted.
class Call {
 public:
  Call(int id, uint64_t bytes);
  int done(int rc);

 private:
  int id_;
  uint64_t bytes_;
  uint64_t t0_ = 0;
  bool active_ = false;
};

}  // namespace mmds
}  // namespace bcs::shim
