// MMDS in the rank (mmds.h): per-call statistics, and the computation
// granularity / communication overhead distributions of the paper's
// §5.1.1, kept in the rank's own memory (calls never overlap: MPI_THREAD_
// SERIALIZED at most) and written as JSON at MPI_Finalize.
#include "mmds.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "bcs/bcs.h"
#include "bcs/mmds.h"
#include "bcs/segment.h"

namespace bcs::shim::mmds {

bool g_on = false;

namespace {

using monitor::LogHistogram;
using monitor::PrimitiveStats;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The summary counters live in the segment when the rank runs under bcs
// (its node manager reads them even if the rank dies), else here.
static_assert(sizeof(PrimitiveStats) == sizeof(MmdsCounter) &&
              offsetof(PrimitiveStats, bytes) == offsetof(MmdsCounter, bytes));
struct PerCall {
  PrimitiveStats* stats = nullptr;
  bool hist = false;
  LogHistogram latency, size;
};

struct State {
  monitor::MmdsConfig cfg;
  int rank = 0, size = 1;
  int depth = 0;          // nesting of instrumented calls
  uint64_t t_init = 0;    // MPI_Init's return
  uint64_t last_wake = 0; // return of the last blocking call (or t_init)
  std::vector<PerCall> calls;
  std::vector<PrimitiveStats> own;  // the counters when there is no segment
  PrimitiveStats *gran = nullptr, *ovh = nullptr;
  MmdsArea* area = nullptr;
  LogHistogram gran_hist, ovh_hist;
  std::vector<monitor::CallEvent> events;  // with "all": the first max_events calls
  uint64_t events_dropped = 0;
  std::vector<monitor::MsgEvent> messages;  // and the first max_events message ends
  uint64_t messages_dropped = 0;
};

State& st() {
  static State s;
  return s;
}

// The directory the reports go to: the job's (bcs run sets BCS_JOB_DIR for
// a monitored run), else the working directory.
std::string job_dir() {
  const char* d = std::getenv("BCS_JOB_DIR");
  return d && *d ? d : ".";
}

bool write_file(const std::string& path, const std::string& text, std::string* err) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    *err = tmp + ": " + std::strerror(errno);
    return false;
  }
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *err = tmp + ": " + std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return false;
    }
    off += static_cast<size_t>(n);
  }
  ::close(fd);
  // Whole or not at all: a reader never sees half a report.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    *err = path + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

// libbcs tells us of every send posted and receive taken back (BCS_MDS=all
// with events): the two ends of each message, for bcs trace's flows.
void on_message(int is_send, int32_t peer, uint64_t seq, uint64_t bytes) {
  State& s = st();
  if (!g_on) return;
  if (s.messages.size() >= s.cfg.max_events) {
    ++s.messages_dropped;
    return;
  }
  s.messages.push_back({now_ns(), peer, is_send != 0, seq, bytes});
}

// The report for the node manager (and through it the manager's Monitor
// service), in the segment's report block: whole if it fits, else without
// its events, else without the calls' histograms too.
void leave_in_segment(MmdsArea* area, const monitor::RankReport& r, const std::string& full) {
  char* block = bcs_mmds_report();
  if (!block) return;
  std::string text;
  if (full.size() <= kMmdsReportMax) {
    text = full;
  } else {
    monitor::RankReport cut = r;
    cut.events_dropped += cut.events.size();
    cut.events.clear();
    cut.messages_dropped += cut.messages.size();
    cut.messages.clear();
    text = monitor::mmds_to_json(cut);
    if (text.size() > kMmdsReportMax) {
      for (auto& c : cut.calls) c.has_histograms = false;
      text = monitor::mmds_to_json(cut);
    }
    if (text.size() > kMmdsReportMax) return;
  }
  std::memcpy(block, text.data(), text.size());
  area->report_len.store(text.size(), std::memory_order_release);
}

}  // namespace

void start(int rank, int size) {
  State& s = st();
  const std::string err = monitor::mmds_parse_config(
      std::getenv("BCS_MDS"), std::getenv("BCS_MDS_RANKS"), std::getenv("BCS_MDS_CALLS"),
      std::getenv("BCS_MDS_RES"), &s.cfg, std::getenv("BCS_MDS_EVENTS"));
  if (!err.empty()) {
    // Statistics are not worth ending a job for; say once why there are none.
    if (rank == 0) std::fprintf(stderr, "bcs: rank 0: MMDS off: %s\n", err.c_str());
    return;
  }
  if (!s.cfg.enabled || !s.cfg.rank_selected(rank)) return;
  s.rank = rank;
  s.size = size;
  s.calls.assign(static_cast<size_t>(bcs_mds_count), PerCall{});
  s.area = static_cast<MmdsArea*>(bcs_mmds_area());
  if (s.area && static_cast<uint32_t>(bcs_mds_count) > kMmdsMaxCalls) s.area = nullptr;
  if (!s.area) s.own.assign(static_cast<size_t>(bcs_mds_count) + 2, PrimitiveStats{});
  auto counter = [&](size_t i) {
    return s.area ? reinterpret_cast<PrimitiveStats*>(&s.area->calls[i]) : &s.own[i];
  };
  for (int i = 0; i < bcs_mds_count; ++i) {
    auto& c = s.calls[static_cast<size_t>(i)];
    c.stats = counter(static_cast<size_t>(i));
    *c.stats = PrimitiveStats{};
    c.hist = s.cfg.call_histogram(bcs_mds_names[i]);
    c.latency = c.size = LogHistogram(s.cfg.res);
    if (s.area) {
      std::snprintf(s.area->names[i], kMmdsNameLen, "%s", bcs_mds_names[i]);
      s.area->flags[i] = static_cast<uint8_t>((bcs_mds_blocking[i] ? kMmdsBlocking : 0) |
                                              (bcs_mds_sized[i] ? kMmdsSized : 0));
    }
  }
  s.gran = s.area ? reinterpret_cast<PrimitiveStats*>(&s.area->granularity) : &s.own[s.calls.size()];
  s.ovh = s.area ? reinterpret_cast<PrimitiveStats*>(&s.area->overhead) : &s.own[s.calls.size() + 1];
  *s.gran = *s.ovh = PrimitiveStats{};
  // Names first, then the count that makes them valid to the node manager.
  if (s.area) s.area->ncalls.store(static_cast<uint32_t>(bcs_mds_count), std::memory_order_release);
  s.gran_hist = s.ovh_hist = LogHistogram(s.cfg.res);
  s.t_init = s.last_wake = now_ns();
  if (s.cfg.max_events) bcs_set_msg_observer(on_message);
  g_on = true;
}

Call::Call(int id, uint64_t bytes) : id_(id), bytes_(bytes) {
  State& s = st();
  if (s.depth++ != 0) return;
  active_ = true;
  t0_ = now_ns();
  if (bcs_mds_blocking[id]) {
    const uint64_t g = t0_ - s.last_wake;
    s.gran->add(g, 0);
    s.gran_hist.add(g);
  }
}

int Call::done(int rc) {
  State& s = st();
  --s.depth;
  if (!active_) return rc;
  const uint64_t t1 = now_ns(), dt = t1 - t0_;
  PerCall& c = s.calls[static_cast<size_t>(id_)];
  c.stats->add(dt, bytes_ == kNoSize ? 0 : bytes_);
  if (c.hist) {
    c.latency.add(dt);
    if (bytes_ != kNoSize) c.size.add(bytes_);
  }
  if (s.cfg.max_events) {
    if (s.events.size() < s.cfg.max_events)
      s.events.push_back({static_cast<uint32_t>(id_), t0_, dt});
    else
      ++s.events_dropped;
  }
  if (bcs_mds_blocking[id_]) {
    s.ovh->add(dt, 0);
    s.ovh_hist.add(dt);
    s.last_wake = t1;
  }
  return rc;
}

void stop() {
  if (!g_on) return;
  g_on = false;
  bcs_set_msg_observer(nullptr);
  State& s = st();
  const uint64_t t = now_ns();
  // MPI_Finalize is the last blocking call: the computation before it.
  s.gran->add(t - s.last_wake, 0);
  s.gran_hist.add(t - s.last_wake);
  if (s.area) s.area->run_ns = t - s.t_init;
  monitor::RankReport r;
  r.rank = s.rank;
  r.size = s.size;
  // The node manager's name (what the manager, bcs stats --node and the
  // job directory's node-NAME.csv call the node), else the host's.
  if (const char* node = std::getenv("BCS_NODE"); node && *node) {
    r.host = node;
  } else {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    r.host = host;
  }
  r.run_ns = t - s.t_init;
  r.res = s.cfg.res;
  for (int i = 0; i < bcs_mds_count; ++i) {
    auto& c = s.calls[static_cast<size_t>(i)];
    if (c.stats->count == 0) continue;
    r.calls.push_back({bcs_mds_names[i], bcs_mds_blocking[i], bcs_mds_sized[i], *c.stats, c.hist,
                       c.latency, c.size});
  }
  r.granularity = *s.gran;
  r.overhead = *s.ovh;
  r.granularity_hist = s.gran_hist;
  r.overhead_hist = s.ovh_hist;
  if (s.cfg.max_events) {
    r.event_calls.assign(bcs_mds_names, bcs_mds_names + bcs_mds_count);
    r.events = std::move(s.events);
    r.events_dropped = s.events_dropped;
    r.messages = std::move(s.messages);
    r.messages_dropped = s.messages_dropped;
  }
  const std::string text = monitor::mmds_to_json(r);
  if (s.area) leave_in_segment(s.area, r, text);
  // The file: unless this run has no job directory and the report reached
  // the node manager (a standing cluster keeps it; bcs stats JOB reads it).
  const char* dir = std::getenv("BCS_JOB_DIR");
  if (s.area && s.area->report_len.load(std::memory_order_relaxed) && !(dir && *dir)) return;
  const std::string path = job_dir() + "/" + monitor::mmds_rank_file(s.rank);
  std::string err;
  if (!write_file(path, text, &err))
    std::fprintf(stderr, "bcs: rank %d: cannot write its MMDS report: %s\n", s.rank, err.c_str());
}

}  // namespace bcs::shim::mmds
