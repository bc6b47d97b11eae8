#include "cluster.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "fd.h"
#include "output.h"

namespace bcs::cli {
namespace {

using Clock = std::chrono::steady_clock;

using Fd = UniqueFd;  // daemons/common/fd.h

std::pair<Fd, Fd> make_pipe() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0)
    throw ClusterError(std::string("pipe: ") + std::strerror(errno));
  return {Fd(p[0]), Fd(p[1])};
}

bool is_executable(const std::string& path) {
  return !path.empty() && ::access(path.c_str(), X_OK) == 0;
}

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

// Only async-signal-safe calls between fork and exec: the parent may have
// other threads (gRPC) holding locks.
[[noreturn]] void child_fail(int err_fd, int err) {
  int e = err;
  ssize_t r = ::write(err_fd, &e, sizeof e);
  (void)r;
  ::_exit(127);
}

}  // namespace

std::string find_daemon(const std::string& name, const char* env_var) {
  if (const char* p = std::getenv(env_var); p && *p) {
    if (is_executable(p)) return p;
    throw ClusterError(std::string("$") + env_var + "=" + p + " is not an executable file");
  }
  std::string looked;
  char self[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir.erase(dir.find_last_of('/') + 1);
    std::string cand = dir + name;
    if (is_executable(cand)) return cand;
    looked = dir;
  }
  if (const char* path = std::getenv("PATH")) {
    std::string_view rest(path);
    while (true) {
      size_t colon = rest.find(':');
      std::string dir(rest.substr(0, colon));
      if (dir.empty()) dir = ".";
      std::string cand = dir + "/" + name;
      if (is_executable(cand)) return cand;
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  throw ClusterError("cannot find " + name + " (looked in " +
                     (looked.empty() ? std::string("the directory of bcs") : looked) +
                     " and in $PATH; set " + env_var + " to its path)");
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* d = ::sigdescr_np(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (d ? d : "?") + ")";
  }
  return "changed state (" + std::to_string(status) + ")";
}

pid_t spawn(const std::vector<std::string>& argv, int keep_fd) {
  // Everything the child needs is prepared before fork: after it, the child
  // may only make async-signal-safe calls.
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  Fd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (devnull.get() < 0) throw ClusterError(std::string("/dev/null: ") + std::strerror(errno));
  auto [err_r, err_w] = make_pipe();
  const pid_t parent = ::getpid();
  rlimit nofile{};
  const int max_fd = ::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < (1u << 20)
                         ? static_cast<int>(nofile.rlim_cur)
                         : (1 << 20);

  pid_t pid = ::fork();
  if (pid < 0) throw ClusterError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(err_w.get(), errno);
    // bcs died between fork and prctl: the signal will never come.
    if (::getppid() != parent) ::_exit(1);
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGPIPE, &dfl, nullptr);  // ignored dispositions survive exec
    if (::dup2(devnull.get(), 0) < 0 || ::dup2(2, 1) < 0) child_fail(err_w.get(), errno);
    if (keep_fd >= 0) {
      int fl = ::fcntl(keep_fd, F_GETFD);
      if (fl < 0 || ::fcntl(keep_fd, F_SETFD, fl & ~FD_CLOEXEC) < 0) child_fail(err_w.get(), errno);
    }
    // A daemon starts with stdio, its ready pipe and nothing else of ours
    // (the error pipe is close-on-exec and still needed until exec).
    const int keep[2] = {keep_fd, err_w.get()};
    close_fds_except(keep, 2, max_fd);
    ::execv(cargv[0], cargv.data());
    child_fail(err_w.get(), errno);
  }
  err_w.reset();
  int child_errno = 0;
  ssize_t r;
  do {
    r = ::read(err_r.get(), &child_errno, sizeof child_errno);
  } while (r < 0 && errno == EINTR);
  if (r == static_cast<ssize_t>(sizeof child_errno)) {
    int st;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    throw ClusterError("cannot execute " + argv[0] + ": " + std::strerror(child_errno));
  }
  return pid;  // EOF: exec succeeded
}

void EmbeddedCluster::start(const ClusterConfig& cfg) {
  verbose_ = cfg.verbose;
  const std::string mm = find_daemon("bcs-mm", "BCS_MM_PATH");
  const std::string nm = find_daemon("bcs-nm", "BCS_NM_PATH");

  auto [ready_r, ready_w] = make_pipe();
  std::vector<std::string> argv{mm, "--listen", "127.0.0.1:0", "--ready-fd",
                                std::to_string(ready_w.get())};
  if (!cfg.slice.empty()) argv.insert(argv.end(), {"--slice", cfg.slice});
  if (!cfg.chunk.empty()) argv.insert(argv.end(), {"--chunk", cfg.chunk});
  if (!cfg.liveness.empty()) argv.insert(argv.end(), {"--liveness-timeout", cfg.liveness});
  if (!cfg.token_file.empty()) argv.insert(argv.end(), {"--token-file", cfg.token_file});
  if (cfg.verbose) argv.insert(argv.end(), {"--log-level", "debug"});
  pid_t mm_pid = spawn(argv, ready_w.get());
  children_.push_back(Child{"bcs-mm", mm_pid});
  // Our copy of the write end must go, or EOF never comes if the MM dies.
  ready_w.reset();

  // Read "PORT\n", bounded, and give up early on EOF or an interrupt.
  std::string line;
  const auto deadline = Clock::now() + std::chrono::milliseconds(cfg.ready_timeout_ms);
  while (line.find('\n') == std::string::npos) {
    pollfd fds[2] = {{ready_r.get(), POLLIN, 0}, {cfg.interrupt_fd, POLLIN, 0}};
    int nfds = cfg.interrupt_fd >= 0 ? 2 : 1;
    int ms = remaining_ms(deadline);
    int rc = ::poll(fds, static_cast<nfds_t>(nfds), ms);
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw ClusterError(std::string("poll: ") + std::strerror(errno));
    }
    if (nfds == 2 && (fds[1].revents & POLLIN)) throw StartInterrupted{};
    if (rc == 0)
      throw ClusterError("bcs-mm (pid " + std::to_string(mm_pid) + ") did not report its port within " +
                         std::to_string(cfg.ready_timeout_ms / 1000.0).substr(0, 4) + " s");
    char buf[64];
    ssize_t n = ::read(ready_r.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw ClusterError(std::string("reading the port of bcs-mm: ") + std::strerror(errno));
    }
    if (n == 0) {
      std::string why = "closed its ready pipe without reporting a port";
      int st;
      if (::waitpid(mm_pid, &st, WNOHANG) == mm_pid) {
        children_.back().reaped = true;
        children_.back().wait_status = st;
        why = describe_wait_status(st) + " before it was ready";
      }
      throw ClusterError("bcs-mm (pid " + std::to_string(mm_pid) + ") " + why);
    }
    line.append(buf, static_cast<size_t>(n));
  }
  line.erase(line.find('\n'));
  char* end = nullptr;
  unsigned long port = std::strtoul(line.c_str(), &end, 10);
  if (line.empty() || *end != '\0' || port == 0 || port > 65535)
    throw ClusterError("bcs-mm reported a bad port: '" + line + "'");
  port_ = static_cast<uint16_t>(port);
  if (verbose_) {
    std::string msg = "bcs: started bcs-mm (pid " + std::to_string(mm_pid) + ") on " + address() + "\n";
    write_all(2, msg);
  }

  for (uint32_t i = 1; i <= cfg.nodes; ++i) {
    std::string name = i <= cfg.names.size() ? cfg.names[i - 1] : "node" + std::to_string(i);
    names_.push_back(name);
    std::vector<std::string> nargv{nm, "--manager", address(), "--name", name};
    if (!cfg.token_file.empty()) nargv.insert(nargv.end(), {"--token-file", cfg.token_file});
    if (!cfg.liveness.empty()) nargv.insert(nargv.end(), {"--liveness-timeout", cfg.liveness});
    if (cfg.verbose) nargv.insert(nargv.end(), {"--log-level", "debug"});
    pid_t pid = spawn(nargv, -1);
    children_.push_back(Child{"bcs-nm " + name, pid});
    if (verbose_) {
      std::string msg = "bcs: started bcs-nm " + name + " (pid " + std::to_string(pid) + ")\n";
      write_all(2, msg);
    }
  }
}

void EmbeddedCluster::teardown(int grace_ms) {
  if (torn_down_) return;
  torn_down_ = true;
  auto report = [&](const Child& c, bool before) {
    if (!before && !verbose_) return;
    std::string msg = "bcs: " + c.name + " (pid " + std::to_string(c.pid) + ") " +
                      describe_wait_status(c.wait_status) +
                      (before ? " before the job was over\n" : "\n");
    write_all(2, msg);
  };
  auto try_reap = [](Child& c) {
    int st = 0;
    pid_t r = ::waitpid(c.pid, &st, WNOHANG);
    if (r == c.pid || (r < 0 && errno == ECHILD)) {
      c.reaped = true;
      c.wait_status = st;
    }
    return c.reaped;
  };

  // Who died on their own explains a lost manager: say so.
  std::vector<bool> died_before(children_.size(), false);
  for (size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    if (!c.reaped && try_reap(c)) {
      report(c, true);
      died_before[i] = true;
    }
  }
  // Wait for children [from, to) to be reaped, bounded by `deadline`. A
  // pidfd per child lets poll() sleep until one exits.
  auto wait_for = [&](size_t from, size_t to, Clock::time_point deadline) {
    while (true) {
      std::vector<pollfd> fds;
      std::vector<Fd> owned;
      bool all = true;
      for (size_t i = from; i < to; ++i) {
        Child& c = children_[i];
        if (c.reaped || try_reap(c)) continue;
        all = false;
        int pfd = static_cast<int>(::syscall(SYS_pidfd_open, c.pid, 0));
        if (pfd < 0) continue;  // very old kernel: fall back to a short nap
        owned.emplace_back(pfd);
        fds.push_back({pfd, POLLIN, 0});
      }
      if (all) return;
      int ms = remaining_ms(deadline);
      if (ms == 0) return;
      if (fds.empty()) {
        timespec ts{0, 10'000'000};
        ::nanosleep(&ts, nullptr);
      } else {
        ::poll(fds.data(), fds.size(), ms);
      }
    }
  };

  // The manager first: on SIGTERM it kills the running job through the node
  // managers, which must still be there to do it. Then the node managers
  // (they may already be leaving, having lost their manager). One deadline
  // bounds both phases.
  const auto deadline = Clock::now() + std::chrono::milliseconds(grace_ms);
  const size_t n_mm = children_.empty() ? 0 : 1;
  for (size_t i = 0; i < n_mm; ++i)
    if (!children_[i].reaped) ::kill(children_[i].pid, SIGTERM);
  wait_for(0, n_mm, deadline);
  for (size_t i = n_mm; i < children_.size(); ++i)
    if (!children_[i].reaped) ::kill(children_[i].pid, SIGTERM);
  wait_for(0, children_.size(), deadline);

  for (size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    if (c.reaped) {
      if (!died_before[i]) report(c, false);
      continue;
    }
    std::string msg = "bcs: " + c.name + " (pid " + std::to_string(c.pid) +
                      ") did not stop on SIGTERM; sending SIGKILL\n";
    write_all(2, msg);
    ::kill(c.pid, SIGKILL);
    int st = 0;
    while (::waitpid(c.pid, &st, 0) < 0 && errno == EINTR) {
    }
    c.reaped = true;
    c.wait_status = st;
  }
}

}  // namespace bcs::cli
