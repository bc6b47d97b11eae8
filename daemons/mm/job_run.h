// JobRun: what the strobe sender keeps for one job it drives (strobe
// thread only). Several jobs whose node sets do not overlap run at once,
// each in its own JobRun: its own slice numbers, pacing, waits and
// failures. See strobe_sender.cc for the loop that resumes them.
#pragma once

#include <algorithm>
#include <coroutine>
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <vector>

#include <time.h>

#include "bcs/core.h"
#include "task.h"

namespace bcs::mm {

inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct Job;

// Pacing between a job's slices (the three ways a slice starts are
// described in strobe_sender.cc).
struct Pacing {
  uint64_t next = 0;  // when the next slice starts by the period
  uint64_t spin_ns = 0;
  bool adaptive = false;
  bool parked = false;
  uint64_t parked_at = 0;
  bool rung = false;  // parked, and a node rang for work
  uint32_t bells = 0;  // bells of this job taken since the last slice began
  uint64_t skipped_carry = 0;  // periods a lease skipped after its last slice
  uint32_t empty_run = 0;  // consecutive slices with nothing to do
  // Blocked since the last microphase of the previous slice (phase value
  // `end_value`), per node of the job: from its report or a later bell.
  int64_t end_value = 0;
  std::set<uint32_t> blocked;
  bool all_blocked(const std::vector<uint32_t>& nodes) const {
    return std::all_of(nodes.begin(), nodes.end(), [&](uint32_t n) { return blocked.count(n); });
  }
};

struct JobRun {
  std::shared_ptr<Job> job;
  // Where its code waits (null while it runs, and once it has ended), and
  // the latest time it must look again; it also looks whenever the strobe
  // sender wakes for anything (a report, a bell, a local wake).
  std::coroutine_handle<> resume;
  uint64_t wake_at = 0;
  // Its nodes' bells, taken off kEvBell by the strobe sender.
  std::deque<core::Message> bells;
  bool woken = false;   // wake_strobe_sender() since it last looked
  bool closed = false;  // the fabric is closed: the manager is going away
  // Its last slice number. A job's numbers strictly increase and start
  // above every number its nodes may still report from an earlier job.
  uint64_t slice = 0;
  Task<bool> task;  // start_job, then run_slices

  // Gang scheduling (the matrix, strobe_sender.cc). `allowed`: it may start
  // a slice now (it is in this quantum's runnable set and no job sharing a
  // node with it is in a slice). `quantum_end`: it starts no slice after
  // it, and no hold, next DEM or lease reaches past it (UINT64_MAX: no
  // other job shares its nodes, it runs on). `quiet`: it waits between
  // slices, or has not begun one: nothing of it is in flight, and a job
  // sharing its nodes may run.
  bool allowed = true;
  uint64_t quantum_end = UINT64_MAX;
  bool quiet = true;
  // Allowed again after a turn of others: a parked strobe starts a slice
  // at once (the node managers cleared their park when they switched).
  bool back = false;

  // co_await run.until(t): suspends the job's code until the strobe
  // sender's next pass that is at or after `t`, or sooner if anything
  // happened. The code then looks again at what it waits for.
  struct Until {
    JobRun& run;
    uint64_t at;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) noexcept {
      run.resume = h;
      run.wake_at = at;
    }
    void await_resume() const noexcept {}
  };
  Until until(uint64_t at_ns) { return Until{*this, at_ns}; }
};

}  // namespace bcs::mm
