// EMDS (the paper's "Elan MDS"): per-slice statistics gathered by the strobe
// sender (global figures: GTDEM, GTMSM, ... GETTS) and kept in bounded
// rings so that the Monitor service and `bcs stats` can read them: one of
// every job's slices as they ran (several jobs run at once, their records
// interleaved) and one per job.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <utility>
#include <deque>
#include <list>
#include <map>
#include <string>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace bcs::monitor {

struct SliceRecord {
  uint64_t slice = 0;
  // The job it ran. Jobs on disjoint node managers run at once, under one
  // strobe: their records interleave, and each job numbers its own slices
  // (`slice` strictly increases within a job; other jobs' numbers may be
  // lower, higher or the same). (job, slice) names a record.
  uint64_t job = 0;
  uint64_t start_ns = 0;      // strobe time (CLOCK_MONOTONIC)
  uint64_t period_ns = 0;     // since the job's previous slice; 0 for its first
  uint64_t late_ns = 0;       // strobe time minus its scheduled time (the clock's own error)
  uint64_t phase_ns[5] = {};  // DEM, MSM, P2P, BBM, RM: global time to complete
  uint64_t retries[5] = {};   // unsuccessful synchronisation retries (USR*)
  uint32_t descriptors = 0;
  uint32_t chunks = 0;
  uint64_t bytes = 0;
  uint32_t coll_descriptors = 0;  // of `descriptors`, how many were collectives
  uint32_t collectives = 0;  // collectives completed (summed over nodes) in BBM and RM
  uint64_t coll_bytes = 0;   // bytes written into ranks by collectives
  uint64_t skipped = 0;      // periods skipped (strobe parked) before this slice
  uint32_t held = 0;         // sends held in their rings (receivers at --max-unexpected)
  bool early = false;        // started before its period (every rank blocked)
  bool leased = false;       // run by a one-node job's node on its lease, without a strobe
  uint32_t bells = 0;        // doorbell messages the strobe sender took before this slice
  bool dem_ahead = false;    // its DEM ran on the nodes at the end of the slice before (no DEM strobe)
  // Gang scheduling: the job's switches (suspended or resumed) since its
  // slice before, and what they cost its node managers (per switch the
  // slowest node's time to stop or continue its ranks, summed).
  uint32_t switches = 0;
  uint64_t switch_ns = 0;
};

struct PeriodSummary {
  uint64_t count = 0;
  uint64_t p50_ns = 0, p99_ns = 0, max_ns = 0;
};

class EmdsRecorder {
 public:
  // The paper's window: statistics of the last 10,000 slices.
  static constexpr size_t kDefaultWindow = 10000;
  // Jobs whose own window is kept: the most recently recorded ones (the
  // manager keeps the last 1000 finished jobs too).
  static constexpr size_t kKeptJobs = 1000;
  // Records kept in the jobs' windows together, in windows: memory stays
  // bounded (1000 full windows would be 1.7 GB) when many long jobs ran.
  // Past it the window of the job recorded least recently goes whole; a job
  // recording now never loses its own slices to another job's.
  static constexpr size_t kJobWindows = 16;
  // `capacity`: the global window and each job's; `kept_jobs`, `job_records`
  // (0: kJobWindows windows): the bounds above.
  explicit EmdsRecorder(size_t capacity = kDefaultWindow, size_t kept_jobs = kKeptJobs,
                        size_t job_records = 0)
      : cap_(capacity ? capacity : 1),
        kept_jobs_(kept_jobs ? kept_jobs : 1),
        job_records_cap_(job_records ? job_records : cap_ * kJobWindows) {}
  void record(const SliceRecord& r);
  // The last n records, every job's, in the order they were recorded.
  std::vector<SliceRecord> last(size_t n) const;
  // The job's last n (its own window: other jobs' slices do not push them out).
  std::vector<SliceRecord> last_of(uint64_t job, size_t n) const;
  uint64_t total() const;
  // Records of the job so far (0: none, or its window is no longer kept).
  uint64_t total_of(uint64_t job) const;
  size_t window() const { return cap_; }
  // The kept records numbered first..last (inclusive), every job's, in the
  // order they were recorded. False when the range reaches outside what is
  // kept; `kept` then holds the lowest and highest slice numbers kept (0, 0
  // when nothing is). The ring is not sorted by slice (jobs interleave):
  // lowest and highest, not first and last.
  bool range(uint64_t first, uint64_t last, std::vector<SliceRecord>* out,
             std::pair<uint64_t, uint64_t>* kept) const;
  // As range, over the job's own window.
  bool range_of(uint64_t job, uint64_t first, uint64_t last, std::vector<SliceRecord>* out,
                std::pair<uint64_t, uint64_t>* kept) const;
  // Follow: the records after the `seq`-th (records are numbered 1, 2, ...
  // as recorded; seq 0 = before the first), waiting until there is one or
  // `timeout` passes. Returns the new sequence number; `missed` counts
  // records dropped from the window before they could be returned.
  uint64_t wait_after(uint64_t seq, std::chrono::milliseconds timeout, std::vector<SliceRecord>* out,
                      uint64_t* missed) const;
  // Wakes every wait_after (the manager is stopping).
  void wake_all() const;
  // Percentiles of period_ns over the job's kept slices that the clock
  // started (a period, not early, not after a park).
  PeriodSummary periods(uint64_t job) const;
  // The same for every job kept, by job. Never one distribution of all:
  // each job has its own slice length and its own pacing (its period is
  // measured from its own previous slice), so mixing them would describe no
  // job (a 1 ms job beside a 10 ms one: p50 of neither).
  std::map<uint64_t, PeriodSummary> periods_by_job() const;

 private:
  struct JobWindow {
    std::deque<SliceRecord> ring;
    uint64_t total = 0;
    std::list<uint64_t>::iterator lru;  // its place in lru_
  };
  // Drops the windows recorded least recently while over a bound (never
  // the one recorded last).
  void bound_jobs_locked();
  mutable std::mutex mu_;
  mutable std::condition_variable grown_;
  size_t cap_;
  size_t kept_jobs_;
  size_t job_records_cap_;
  std::deque<SliceRecord> ring_;
  uint64_t total_ = 0;
  std::unordered_map<uint64_t, JobWindow> jobs_;
  std::list<uint64_t> lru_;  // job ids, least recently recorded first
  size_t job_records_ = 0;   // records in every JobWindow::ring together
};

PeriodSummary summarize_periods(std::vector<uint64_t> periods);

// The paper's local EMDS metrics (Table 5.2): what one node did in one
// slice, measured by its node manager.
struct LocalSliceRecord {
  uint64_t slice = 0;
  // The job the node ran it for (0: a node manager from before jobs ran
  // side by side, which did not say). Each job's numbers only grow; jobs
  // gang-scheduled on one node interleave their slices there, each with
  // numbers of its own, so a node's window is kept by (slice, job).
  uint64_t job = 0;
  // When this node began the slice's first microphase (the NM's
  // CLOCK_MONOTONIC), and when it began each microphase, from start_ns (0
  // and phase_ns 0: not run here). LETTS is the difference of two
  // consecutive start_ns; LTTS the sum of phase_ns.
  uint64_t start_ns = 0;
  uint64_t phase_at_ns[5] = {};
  uint64_t phase_ns[5] = {};   // LTDEM, LTMSM, LTP2P, LTBBM, LTRM: this node's time in each
  uint32_t descriptors = 0;    // descriptors drained from the local rings (DEM), collectives included
  uint32_t coll_descriptors = 0;
  uint32_t matches = 0;        // point-to-point matches made (MSM)
  uint32_t chunks = 0;         // DMA chunks scheduled (MSM)
  uint64_t bytes = 0;          // moved into local receivers (P2P) and written by collectives
  uint64_t sender_bytes = 0;   // of `bytes`, written by their local senders (shared copy orders)
  uint64_t second_thread_bytes = 0;  // of `bytes`, copied by the receivers' second threads (split orders)
  uint32_t collectives = 0;    // collectives completed here (BBM, RM)
  uint32_t blocked = 0;        // local ranks blocked at the end of the slice's last microphase
  uint32_t nlocal = 0;         // local ranks of the job
};

// The node manager's side: the strobe receiver notes each microphase it ran
// (cheap: a lock and a few adds), a flusher thread takes finished slices in
// batches and sends them to the manager off the strobe path. Bounded: when
// nobody takes them the oldest go.
class LocalRecorder {
 public:
  explicit LocalRecorder(size_t capacity = EmdsRecorder::kDefaultWindow) : cap_(capacity) {}
  // Adds one microphase (0..4) of `slice` of job `add.job`, begun at
  // `at_ns` and lasting `ns`, to the current record; a note for another
  // slice (or another job) closes the current one.
  void note(uint64_t slice, int phase, uint64_t at_ns, uint64_t ns, const LocalSliceRecord& add);
  // Sleeps until there are finished slices (or stop()), then waits `batch`
  // more to gather others, and returns them. The current slice is closed
  // too when nothing was noted for `batch`: a job's last slice is sent.
  std::vector<LocalSliceRecord> take(std::chrono::milliseconds batch);
  // Everything now, the current slice closed, without waiting (a job's end).
  std::vector<LocalSliceRecord> take_now();
  void stop();
  bool stopped() const;

 private:
  // The finished slices (and the current one, if `close_current`), taken.
  std::vector<LocalSliceRecord> drain_locked(bool close_current);
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t cap_;
  std::deque<LocalSliceRecord> done_;
  LocalSliceRecord cur_;
  bool have_cur_ = false;
  uint64_t noted_ = 0;  // notes so far: tells take() whether the current slice still grows
  bool flusher_idle_ = false;  // take() sleeps until there is something (notify only then)
  bool stop_ = false;
};

// The manager's side: a window of local records per node.
class NodeSeries {
 public:
  explicit NodeSeries(size_t window = EmdsRecorder::kDefaultWindow) : cap_(window ? window : 1) {}
  void record(const std::string& node, const std::vector<LocalSliceRecord>& recs);
  bool known(const std::string& node) const;
  std::vector<LocalSliceRecord> last(const std::string& node, size_t n) const;
  // As EmdsRecorder::range, for one node.
  bool range(const std::string& node, uint64_t first, uint64_t last, std::vector<LocalSliceRecord>* out,
             std::pair<uint64_t, uint64_t>* kept) const;
  size_t window() const { return cap_; }

 private:
  mutable std::mutex mu_;
  size_t cap_;
  std::map<std::string, std::deque<LocalSliceRecord>> nodes_;
};

}  // namespace bcs::monitor
