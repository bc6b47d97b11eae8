// MMDS (the paper's "Main MDS", §5.1): per-rank statistics of the MPI
// primitives a program calls, and the two distributions of §5.1.1:
//   - computation granularity: from the return of one blocking call to the
//     entry of the next (the time the rank computed, non-blocking calls
//     included);
//   - communication overhead: the time inside a blocking call.
// Together they cover the rank's run time from MPI_Init's return to
// MPI_Finalize's entry, which is the paper's sum check (§5.4).
//
// The rank records (mpi-shim/src/mmds.cc), one report per rank goes to a
// job directory as JSON at MPI_Finalize, and `bcs run` / `bcs stats DIR`
// print the summary in the shape of the paper's Table 5.3. This header is
// what both sides share: the statistics, the configuration read from the
// environment, the JSON form and the table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bcs::monitor {

// A histogram on a logarithmic scale: `res` bins per power of two (the
// resolution: 1, 2, 4, 8 or 16), so its relative precision is the same for
// a 100 ns and a 100 ms call. Bin 0 holds 0; bin 1 + k*res + j holds the
// values in [2^k (1 + j/res), 2^k (1 + (j+1)/res)), clipped to integers.
// Bins grow as values arrive: an unused histogram costs nothing.
class LogHistogram {
 public:
  static constexpr uint32_t kMaxRes = 16;
  LogHistogram() : LogHistogram(4) {}
  explicit LogHistogram(uint32_t res);
  void add(uint64_t v, uint64_t n = 1);
  void merge(const LogHistogram& o);  // same resolution (throws otherwise)
  uint32_t res() const { return res_; }
  uint64_t count() const { return count_; }
  const std::vector<uint64_t>& bins() const { return bins_; }
  // Replaces the bins (a histogram read back from a file).
  void set_bins(std::vector<uint64_t> bins);
  static uint32_t bin_of(uint64_t v, uint32_t res);
  static uint64_t lower_bound(uint32_t bin, uint32_t res);  // smallest value in `bin`
  static bool valid_res(uint32_t res);

 private:
  uint32_t res_;
  uint64_t count_ = 0;
  std::vector<uint64_t> bins_;
};

// Count, min, max, total and average of one primitive's latency (ns), and
// the bytes it was given.
struct PrimitiveStats {
  uint64_t count = 0;
  uint64_t total_ns = 0;
  uint64_t min_ns = 0;  // meaningful when count > 0
  uint64_t max_ns = 0;
  uint64_t bytes = 0;
  void add(uint64_t ns, uint64_t nbytes) {
    if (count == 0 || ns < min_ns) min_ns = ns;
    if (ns > max_ns) max_ns = ns;
    ++count;
    total_ns += ns;
    bytes += nbytes;
  }
  void merge(const PrimitiveStats& o);
  double avg_ns() const { return count ? static_cast<double>(total_ns) / static_cast<double>(count) : 0.0; }
};

// What to record, from the environment (no rebuild, no relink):
//   BCS_MDS        unset/"" or "off": nothing (one branch per call);
//                  "summary": per-primitive summary and the two
//                  distributions; "all": that plus latency and size
//                  histograms of every primitive;
//   BCS_MDS_RANKS  which ranks record: "0,2-5" (default: all);
//   BCS_MDS_CALLS  with "all": the primitives that get histograms,
//                  "MPI_Send,MPI_Allreduce" (default: every one);
//   BCS_MDS_RES    histogram bins per power of two: 1, 2, 4 (default), 8, 16;
//   BCS_MDS_EVENTS with "all": how many call intervals (and as many
//                  message ends) each rank keeps for bcs trace (default
//                  100000; 0: none).
struct MmdsConfig {
  bool enabled = false;
  bool histograms = false;
  // With "all": each call's interval, up to this many per rank
  // (BCS_MDS_EVENTS, default 100000; 0: none), for bcs trace.
  uint64_t max_events = 0;
  std::vector<std::pair<int, int>> ranks;  // inclusive ranges; empty = every rank
  std::vector<std::string> calls;          // empty = every call
  uint32_t res = 4;
  bool rank_selected(int rank) const;
  bool call_histogram(std::string_view name) const;
};
// Parses the four variables (null = unset). Returns "" or what is wrong,
// naming the variable.
std::string mmds_parse_config(const char* mds, const char* ranks, const char* calls,
                              const char* res, MmdsConfig* out, const char* events = nullptr);

struct CallReport {
  std::string name;  // "MPI_Send"
  bool blocking = false;
  bool sized = false;  // given a (count, datatype): bytes and sizes mean something
  PrimitiveStats stats;
  bool has_histograms = false;
  LogHistogram latency;  // ns
  LogHistogram size;     // bytes (sized calls)
};

// One call as it happened (CLOCK_MONOTONIC ns): `call` indexes
// RankReport::event_calls.
struct CallEvent {
  uint32_t call = 0;
  uint64_t start_ns = 0;
  uint64_t dur_ns = 0;
};

// One end of a point-to-point message (BCS_MDS=all): a send when posted, a
// receive when the program took its completed request back. A send from A
// to B and the receive at B from A with the same `seq` (the n-th send of A
// to B) are the same message: bcs trace draws them as one flow.
struct MsgEvent {
  uint64_t at_ns = 0;
  int32_t peer = 0;  // world rank: the destination of a send, the source of a receive
  bool send = false;
  uint64_t seq = 0;
  uint64_t bytes = 0;
};

struct RankReport {
  int rank = 0;
  int size = 0;
  std::string host;
  uint64_t run_ns = 0;  // MPI_Init's return to MPI_Finalize's entry
  // From the rank's own report (MPI_Finalize): distributions and events.
  // False: counters only (its node manager read them from the segment
  // after it died).
  bool full = false;
  uint32_t res = 4;
  std::vector<CallReport> calls;  // the primitives called at least once
  PrimitiveStats granularity, overhead;
  LogHistogram granularity_hist, overhead_hist;
  std::vector<std::string> event_calls;  // names the events refer to
  std::vector<CallEvent> events;          // in order; the first max_events calls
  uint64_t events_dropped = 0;            // calls past max_events
  std::vector<MsgEvent> messages;         // in order; the first max_events
  uint64_t messages_dropped = 0;
};

}  // namespace bcs::monitor

namespace bcs {
struct MmdsArea;
}

namespace bcs::monitor {

// The summary a rank left in its segment (bcs/segment.h MmdsArea), as its
// node manager reads it: every name and counter checked (the rank may have
// died mid-update or scribbled over it). False with `why` when the area
// says the MMDS was off (why empty) or holds something invalid.
bool mmds_from_segment(const MmdsArea& area, RankReport* out, std::string* why);
// The whole report the rank left in the block after its area at
// MPI_Finalize (`block`: kMmdsReportMax bytes), parsed and checked, for
// world rank `rank` of `size`. False with `why` when there is none (why
// empty) or it is not valid.
bool mmds_report_from_segment(const MmdsArea& area, const char* block, int rank, int size,
                              RankReport* out, std::string* why);

// The file of one rank in a job directory.
std::string mmds_rank_file(int rank);
std::string mmds_to_json(const RankReport& r);
// Throws std::runtime_error saying what is wrong with `text`.
RankReport mmds_from_json(std::string_view text);
// Reads every rank's file in `dir` (sorted by rank). Throws
// std::runtime_error naming the file that cannot be read or parsed; none at
// all is an error too.
std::vector<RankReport> mmds_read_dir(const std::string& dir);

// Table 5.3: per primitive min, max, total, count, average (µs), the bytes,
// then the Comp Granularity and Comm Overhead rows and the sum check. Over
// all ranks, then (per_rank) one table per rank.
std::string mmds_table(const std::vector<RankReport>& ranks, bool per_rank);
// The reports of `ranks` as one JSON document (bcs stats --json).
std::string mmds_job_json(const std::vector<RankReport>& ranks);

}  // namespace bcs::monitor
