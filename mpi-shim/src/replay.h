// Record and replay in the rank (issue 10; docs/architecture.md, "Record
// and replay"). Under `bcs run --record DIR` (BCS_RECORD) each rank writes
// what it observed that another run could change: which send each wildcard
// receive matched, what each test and non-blocking probe returned, which
// requests a wait-any/some completed. Under `bcs replay DIR` (BCS_REPLAY)
// the same calls are made to return the same: a wildcard receive is posted
// for the source and tag it matched, a test that said "not yet" says it
// again without looking, one that completed waits for the same request.
// Off, each hook is one branch on g_mode.
#pragma once

#include <cstdint>
#include <string>

#include "bcs/record.h"

namespace bcs::shim {
namespace record = bcs::record;
}

namespace bcs::shim::replay {

enum class Mode { off, record, replay };
extern Mode g_mode;
// MPI_Wtime readings are recorded / replayed (bcs run --record-wtime).
extern bool g_wtime;
// A reading `t` of MPI_Wtime: recorded, or replaced by the recorded one.
double wtime(double t);

// At the end of MPI_Init (BCS_RECORD / BCS_REPLAY / BCS_UNTIL_SLICE read
// here); at
// MPI_Finalize's entry (the recording written out; a replay checks that
// the program did everything it recorded).
// `threads`: the program may call MPI from several threads (it asked for
// MPI_THREAD_SERIALIZED), which a recording in call order does not cover.
void start(int rank, int size, bool threads);
void stop();

// A receive posted with MPI_ANY_SOURCE or MPI_ANY_TAG: its number (1, 2,
// ... in post order; 0 for a receive without a wildcard). Replaying, the
// source and tag become what it matched when recorded.
uint64_t recv_posted(const char* fn, int* source, int* tag);
// Receive `number` completed from (source, tag), the sender's send `seq`
// (0: unknown), in job slice `slice`. Recorded once per receive; replaying,
// checked (not the slice).
void recv_matched(const char* fn, uint64_t number, int source, int tag, uint64_t seq,
                  uint64_t slice);

// The sequential events (tests, probes, wait-any/some), in program order.
void record(const record::Event& e);
// Replaying: the next recorded event, which must be of kind `k` (the
// program called `fn`); anything else ends the job naming both.
record::Event next(record::Kind k, const char* fn);
// A call whose outcome can change from run to run and is not recorded yet
// (docs/architecture.md lists them): recording or replaying, says so once
// per call name, so that a replay that goes another way is not a mystery.
void not_covered(const char* fn);
// Ends the job: the program did `observed` where the recording has `recorded`.
[[noreturn]] void diverge(const char* fn, const std::string& recorded, const std::string& observed);

}  // namespace bcs::shim::replay
