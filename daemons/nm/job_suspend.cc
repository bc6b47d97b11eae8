// Gang scheduling on a node manager: a job's ranks stopped and continued
// at a slice boundary the manager chose (SuspendJob). See
// docs/architecture.md, "Gang scheduling".
//
// Why SIGSTOP: the ranks are the node manager's children, each leading its
// own process group, so one kill(2) per rank stops it and every process it
// started, at any point of its code, with nothing for the rank to do (a
// rank computing outside MPI is stopped too, which a wait rule inside the
// MPI library could not do) and nothing to set up (the cgroup freezer
// needs a writable cgroup per job, which containers do not give). A
// stopped rank uses no CPU; SIGKILL still ends it at once, and its exit
// still reaches the node manager (waitpid without WUNTRACED does not
// report stops), so a suspended job fails as promptly as a running one.
#include <signal.h>
#include <sched.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "job.h"

namespace bcs::nm {

std::string NmJob::suspend(bool stop, bool background, uint64_t* cost_ns, bool* backgrounded) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto cost = [&] {
    *cost_ns = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0).count());
  };
  *backgrounded = false;
  // Buffered coscheduling's background policy: one write to the job's
  // cpu group. Nothing to confirm: the scheduler applies it at its next
  // decision on each CPU, and a rank that runs a little longer at normal
  // priority takes nothing the active row is waiting for (it wakes them
  // on its own CPU ahead of an idle-priority task).
  if (stop && background && cpu_group_.valid() && !stopped_) {
    std::string err = cpu_group_.set_idle(true);
    idle_ = err.empty();
    *backgrounded = idle_;
    cost();
    if (idle_) return "";
    // Could not: stopped below instead.
  }
  // Resumed: a rank that runs already was continued from outside during
  // the suspension (counted; the kMaxContinued-th time ends the job).
  if (!stop && stopped_) check_suspended(false);
  if (!stop && idle_) {
    std::string err = cpu_group_.set_idle(false);
    idle_ = !err.empty();
    cost();
    return err;
  }
  stopped_ = stop;
  std::string err;
  // Each rank signalled, with its own copy of the rank's pidfd: the rank may
  // be reaped (and its pidfd closed) while we look.
  std::vector<std::pair<pid_t, UniqueFd>> sent;
  {
    std::lock_guard lk(copy_mu_);  // a rank marked dead is not signalled (its pid may be reused)
    for (auto& r : ranks_) {
      if (r->pid <= 0 || r->dead) continue;
      const int sig = stop ? SIGSTOP : SIGCONT;
      // The rank leads its own process group: its children go with it.
      if (::kill(-r->pid, sig) != 0 && ::kill(r->pid, sig) != 0) {
        err += (err.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r->world_rank) +
               ": " + std::strerror(errno);
        continue;
      }
      sent.emplace_back(r->pid, UniqueFd(r->pidfd ? ::fcntl(r->pidfd.get(), F_DUPFD_CLOEXEC, 0) : -1));
    }
  }
  if (stop) {
    // Stopped once the kernel says so: until then a rank may still run a
    // little (SIGSTOP takes effect when it next enters the kernel or is
    // preempted). waitid on its pidfd with WNOWAIT looks without taking
    // the stop (or an exit) from the rank's owner, who does not ask for
    // stops; between looks this thread sleeps, so that on two CPUs it does
    // not take the one the rank needs to stop (polling /proc with
    // sched_yield cost 0.1-1.3 ms per switch here). Bounded: a rank stuck
    // in the kernel stops later, and its job's next switch says so.
    const auto deadline = t0 + std::chrono::seconds(1);
    for (const auto& [pid, fd] : sent) {
      for (;;) {
        siginfo_t si{};
        if (!fd ||
            ::waitid(P_PIDFD, static_cast<id_t>(fd.get()), &si,
                     WSTOPPED | WEXITED | WNOHANG | WNOWAIT) != 0 ||
            si.si_pid != 0)
          break;  // stopped, exited, or not ours to ask: nothing to wait for
        if (clock::now() > deadline) {
          err += (err.empty() ? "" : "; ") + std::string("pid ") + std::to_string(pid) +
                 " not stopped within 1 s";
          break;
        }
        const timespec pause{0, 20'000};
        ::nanosleep(&pause, nullptr);
      }
    }
  }
  cost();
  return err;
}

int NmJob::check_suspended(bool restop) {
  if (!stopped_) return 0;  // (suspend and this run on the control thread alone)
  int running = 0;
  std::vector<int32_t> to_end;
  {
    std::lock_guard lk(copy_mu_);  // a rank marked dead is not signalled (its pid may be reused)
    for (auto& r : ranks_) {
      if (r->pid <= 0 || r->dead || !r->pidfd) continue;
      siginfo_t si{};
      // Stopped (or exited: its reaping follows) is reported without being
      // taken; nothing reported is a rank that runs.
      if (::waitid(P_PIDFD, static_cast<id_t>(r->pidfd.get()), &si,
                   WSTOPPED | WEXITED | WNOHANG | WNOWAIT) != 0 ||
          si.si_pid != 0)
        continue;
      ++running;
      if (++continued_ >= kMaxContinued) {
        to_end.push_back(r->world_rank);
        continue;
      }
      spdlog::warn("job {}: rank {} was continued from outside while suspended{}", spec_.id,
                   r->world_rank, restop ? ": stopped again" : "");
      if (restop && ::kill(-r->pid, SIGSTOP) != 0) ::kill(r->pid, SIGSTOP);
    }
  }
  for (int32_t rank : to_end)
    end_corrupt(rank, "was continued from outside (SIGCONT) " + std::to_string(continued_) +
                          " times while its job was suspended by gang scheduling");
  return running;
}

}  // namespace bcs::nm
