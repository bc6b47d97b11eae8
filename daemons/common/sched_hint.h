// Scheduling hints for the daemons' helper threads.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>

namespace bcs {

// Asks the kernel to give thread `tid` (0: the caller) a short time slice
// (EEVDF's custom slice, Linux 6.12 and later: sched_setattr's
// sched_runtime for SCHED_OTHER). A thread with a shorter slice gets an
// earlier deadline, so when it wakes it may preempt a rank that has been
// computing instead of queueing behind it, and when it runs long it yields
// sooner. False if the kernel refused (an older kernel ignores the field
// and says yes: then nothing changes).
bool sched_prefer_short_slice(std::chrono::nanoseconds slice, pid_t tid = 0);
// What the helper threads ask for when they cannot have real time: the
// shortest slice the kernel grants (it clamps to 0.1-100 ms).
inline constexpr std::chrono::nanoseconds kHelperSlice{100'000};

// Puts thread `tid` (0: the caller) at SCHED_FIFO, the lowest real-time
// priority, reset on fork (a rank forked from it, or a thread it starts
// by fork-and-exec, runs at normal priority). False if refused: no
// CAP_SYS_NICE and no RLIMIT_RTPRIO, as for a daemon run by a user.
// Only for threads that never spin: a thread that spins at real-time
// priority holds its CPU against every normal thread until the kernel's
// RT throttling stops it (stalls of 26-90 ms here, NOTES.md).
bool sched_prefer_realtime(pid_t tid = 0);

// The threads that carry a slice's wake-ups: the strobe sender, the node
// manager's strobe receiver and doorbell, and UCX's async thread, which
// takes every message from the network first and wakes the thread waiting
// for it. They wake on cores the ranks compute on. At SCHED_FIFO a woken
// thread preempts the rank at once; with only the short slice it waited
// behind a computing rank for most of its step (`perf sched`: 0.14-0.18 ms
// on average, up to 1.8 ms, on bench/strobe.sh's communicating job).
// Real time when `realtime` and permitted, else the short slice. True if
// the thread is now at real-time priority (it must then not spin).
//
// UCX's async thread is always given `realtime` false. It is not ours and
// it spins: while a worker thread holds UCX's async lock, it loops on
// sched_yield over the event it cannot dispatch. At SCHED_FIFO that loop
// took the real-time runtime of both CPUs (the kernel lends one CPU's to
// the other), and the strobe sender, at SCHED_FIFO too and holding that
// lock inside an shmat of a new endpoint, never ran again: the manager
// stopped answering, and a job's --timeout ended it (about 1 job in 90
// under three busy loops; none in 450 with the async thread at normal
// priority, docs/architecture.md, Defaults).
bool sched_join_wake_path(bool realtime, pid_t tid = 0);

// When a thread that wakes on the ranks' CPUs should be at real-time
// priority: the node manager's strobe receiver (Nic::pick_priority). From
// the first look that finds a rank computing until none has for kRelaxNs,
// so a rank that goes on computing between short waits keeps it there.
// And never while the thread works more than half the time: a job that
// keeps it busy (it only works for the job's slices) must not take a CPU
// from everything else on the host, so it then drops to normal priority
// for kBenchNs. Only the decision; the caller applies it.
class RealtimeGate {
 public:
  static constexpr uint64_t kRelaxNs = 20'000'000;
  static constexpr uint64_t kWindowNs = 10'000'000;  // CPU use measured per window
  static constexpr uint64_t kBenchNs = 100'000'000;
  // `computes`: a rank computes now; `cpu_ns()`: the thread's CPU time so
  // far (called at most once per window while real time). True: be at
  // real-time priority.
  template <typename CpuNs>
  bool want(bool computes, uint64_t now_ns, CpuNs&& cpu_ns);
  // What the caller applied (false: it could not raise the thread).
  void applied(bool realtime) { rt_ = realtime; }
  bool realtime() const { return rt_; }

 private:
  bool rt_ = false;
  uint64_t computed_at_ = 0;
  uint64_t window_at_ = 0, window_cpu_ = 0;
  uint64_t benched_until_ = 0;
};

// One rank as the strobe receiver sees it (NmJob::a_rank_computes): it
// computes once two looks at least `min_ns` apart found it out of MPI
// (not waiting, not finalized) with its ring head unchanged. A rank that
// waits or posts starts over, so ranks that only pass between two calls,
// as a ping-pong's do, never count. `head` is rank-written and only
// compared.
struct ComputeWatch {
  uint64_t head = 0;
  uint64_t since_ns = 0;  // first seen out of MPI at this head; 0: not
  bool look(bool in_mpi, uint64_t head_now, uint64_t now_ns, uint64_t min_ns) {
    if (in_mpi) {
      since_ns = 0;
      return false;
    }
    if (since_ns == 0 || head_now != head) {
      head = head_now;
      since_ns = now_ns;
      return false;
    }
    return now_ns - since_ns >= min_ns;
  }
};

template <typename CpuNs>
bool RealtimeGate::want(bool computes, uint64_t now_ns, CpuNs&& cpu_ns) {
  if (computes) computed_at_ = now_ns;
  if (now_ns < benched_until_) return false;
  if (rt_ && now_ns - window_at_ >= kWindowNs) {
    const uint64_t cpu = cpu_ns();
    if ((cpu - window_cpu_) * 2 > now_ns - window_at_) {
      benched_until_ = now_ns + kBenchNs;
      return false;
    }
    window_at_ = now_ns;
    window_cpu_ = cpu;
  }
  const bool w = computes || (rt_ && now_ns - computed_at_ < kRelaxNs);
  if (w && !rt_) {
    window_at_ = now_ns;
    window_cpu_ = cpu_ns();
  }
  return w;
}

}  // namespace bcs
