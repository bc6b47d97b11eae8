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
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "job.h"

namespace bcs::nm {

namespace {
// The state letter of /proc/PID/stat ('T' stopped), '?' if gone.
char proc_state(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string st;
  std::getline(f, st);
  const auto close = st.rfind(')');
  return close != std::string::npos && close + 2 < st.size() ? st[close + 2] : '?';
}
}  // namespace

std::string NmJob::suspend(bool stop, uint64_t* cost_ns) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  std::string err;
  std::vector<pid_t> sent;
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
      sent.push_back(r->pid);
    }
  }
  if (stop) {
    // Stopped once the kernel says so: until then a rank may still run a
    // little (SIGSTOP is delivered when it next enters the kernel or is
    // preempted). Bounded: a rank that exits meanwhile reads '?' or 'Z'.
    const auto deadline = t0 + std::chrono::seconds(1);
    for (pid_t pid : sent)
      for (char s = proc_state(pid); s != 'T' && s != 't' && s != 'Z' && s != '?';
           s = proc_state(pid)) {
        if (clock::now() > deadline) {
          err += (err.empty() ? "" : "; ") + std::string("pid ") + std::to_string(pid) +
                 " not stopped within 1 s (state " + s + ")";
          break;
        }
        sched_yield();
      }
  }
  *cost_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0).count());
  return err;
}

}  // namespace bcs::nm
