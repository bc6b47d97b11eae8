// Which process a rank's messages are in: process_runs_below accepts a
// process of the job's user below the one the node manager started (a
// wrapper's child), and nothing else.
#include "process_tree.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace bcs::nm {
namespace {

// A child that runs `setup`, tells us through a pipe, and waits to be
// killed. Killed and reaped by its destructor.
class Child {
 public:
  template <typename F>
  explicit Child(F setup) {
    int p[2];
    if (::pipe(p) != 0) std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(p[0]);
      setup();
      char c = 1;
      if (::write(p[1], &c, 1) != 1) ::_exit(1);
      for (;;) ::pause();
    }
    ::close(p[1]);
    char c = 0;
    ok_ = ::read(p[0], &c, 1) == 1;
    ::close(p[0]);
  }
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  bool ready() const { return ok_; }

 private:
  pid_t pid_ = -1;
  bool ok_ = false;
};

TEST(ProcessTree, AChildAndAGrandchildOfTheJobsUserAreBelow) {
  Child c([] {});
  ASSERT_TRUE(c.ready());
  std::string why;
  EXPECT_TRUE(process_runs_below(c.pid(), ::getpid(), ::getuid(), ::getgid(), &why)) << why;
  // A grandchild: the wrapper's child. Its pid comes back through a pipe.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  Child wrapper([&] {
    ::close(p[0]);
    const pid_t g = ::fork();
    if (g == 0) {
      for (;;) ::pause();
    }
    // The grandchild dies with the wrapper (killed by the test below).
    if (::write(p[1], &g, sizeof g) != sizeof g) ::_exit(1);
  });
  ::close(p[1]);
  pid_t grandchild = 0;
  ASSERT_EQ(::read(p[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  ::close(p[0]);
  EXPECT_TRUE(process_runs_below(grandchild, wrapper.pid(), ::getuid(), ::getgid(), &why)) << why;
  EXPECT_TRUE(process_runs_below(grandchild, ::getpid(), ::getuid(), ::getgid(), &why)) << why;
  // Not below a sibling.
  EXPECT_FALSE(process_runs_below(grandchild, c.pid(), ::getuid(), ::getgid(), &why));
  EXPECT_NE(why.find("not a process below"), std::string::npos) << why;
  ::kill(grandchild, SIGKILL);
}

TEST(ProcessTree, AProcessNotBelowIsRefused) {
  std::string why;
  // Our parent, init and ourselves are not below us.
  EXPECT_FALSE(process_runs_below(::getppid(), ::getpid(), ::getuid(), ::getgid(), &why));
  EXPECT_FALSE(process_runs_below(1, ::getpid(), ::getuid(), ::getgid(), &why));
  EXPECT_FALSE(process_runs_below(::getpid(), ::getpid(), ::getuid(), ::getgid(), &why));
  // A pid nobody has.
  EXPECT_FALSE(process_runs_below(4 << 22, ::getpid(), ::getuid(), ::getgid(), &why));
}

TEST(ProcessTree, AChildOfAnotherUserOrNotDumpableIsRefused) {
  std::string why;
  // Not dumpable (as after a setuid exec): its /proc entries belong to root.
  Child hidden([] { ::prctl(PR_SET_DUMPABLE, 0); });
  ASSERT_TRUE(hidden.ready());
  if (::getuid() != 0) {
    EXPECT_FALSE(process_runs_below(hidden.pid(), ::getpid(), ::getuid(), ::getgid(), &why));
    EXPECT_NE(why.find("dumpable"), std::string::npos) << why;
    GTEST_SKIP() << "switching a child to another user needs root";
  }
  // As root, a non-dumpable root process still belongs to root: the test
  // asks as if the job ran as nobody instead.
  EXPECT_FALSE(process_runs_below(hidden.pid(), ::getpid(), 65534, 65534, &why));
  // A child that becomes nobody. Changing ids makes a process non-dumpable
  // until it execs; a rank has exec'd, so `dumpable` says it is again.
  const auto as_nobody = [](int dumpable) {
    return [dumpable] {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(1);
      ::prctl(PR_SET_DUMPABLE, dumpable);
    };
  };
  // Another user's child, and one whose ids are mixed (effective differs).
  Child other(as_nobody(1));
  ASSERT_TRUE(other.ready());
  EXPECT_FALSE(process_runs_below(other.pid(), ::getpid(), 0, 0, &why));
  EXPECT_NE(why.find("wholly"), std::string::npos) << why;
  EXPECT_TRUE(process_runs_below(other.pid(), ::getpid(), 65534, 65534, &why)) << why;
  Child mixed([] {
    if (::setresgid(65534, 65534, 0) != 0 || ::setresuid(65534, 65534, 0) != 0) ::_exit(1);
  });
  ASSERT_TRUE(mixed.ready());
  EXPECT_FALSE(process_runs_below(mixed.pid(), ::getpid(), 65534, 65534, &why));
  // The job's user, but not dumpable: refused.
  Child nondump(as_nobody(0));
  ASSERT_TRUE(nondump.ready());
  EXPECT_FALSE(process_runs_below(nondump.pid(), ::getpid(), 65534, 65534, &why));
  EXPECT_NE(why.find("dumpable"), std::string::npos) << why;
}

// --- Per-job process ownership (kill_job_tree), played in a child of the
// test that acts as the node manager: a subreaper whose ranks are forked
// with fork_rank, so the test's own process keeps no orphans. It reports
// what went wrong through a pipe ("" when all held).

// Whether `pid` is a live process (not a zombie).
bool alive(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return false;
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const char* rp = n ? std::strrchr(buf, ')') : nullptr;
  return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

// Waits until `pid` (a child of this process, or one of its orphans that
// will be) has died, and reaps it. Bounded only so that a failure fails
// instead of hanging: the kill is what ends it.
bool reaped(pid_t pid) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return false;
  pollfd p{fd, POLLIN, 0};
  const bool died = ::poll(&p, 1, 20'000) == 1;
  ::close(fd);
  return died && ::waitpid(pid, nullptr, 0) == pid;
}

// In a rank: forks a grandchild that leaves the session through a child
// that exits (a daemon's double fork), and once that child is gone (so
// nothing else is left to count) writes the grandchild's pid to `out`.
void detach_grandchild(int out) {
  int q[2];
  if (::pipe(q) != 0) ::_exit(1);
  const pid_t c = ::fork();
  if (c == 0) {
    const pid_t g = ::fork();
    if (g == 0) {
      ::setsid();
      const pid_t me = ::getpid();
      if (::write(q[1], &me, sizeof me) != sizeof me) ::_exit(1);
      for (;;) ::pause();
    }
    ::_exit(0);  // the grandchild is orphaned
  }
  ::waitpid(c, nullptr, 0);
  pid_t g = 0;
  if (::read(q[0], &g, sizeof g) != sizeof g || ::write(out, &g, sizeof g) != sizeof g) ::_exit(1);
  ::close(q[0]);
  ::close(q[1]);
}

// A rank of a co-scheduled job (a child subreaper, its own group), which
// forks a grandchild that leaves the session through a child that exits
// (a daemon's double fork), writes the grandchild's pid to `out` and then
// waits. With `leave`, the rank instead hands its detached child to the
// NM by exiting.
pid_t start_rank(uint64_t job, int out, bool leave) {
  return fork_rank(job, [out, leave] {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    ::setpgid(0, 0);
    detach_grandchild(out);
    if (leave) ::_exit(0);
    for (;;) ::pause();
  });
}

std::string two_jobs_one_killed() {
  if (!become_subreaper()) return "cannot become a subreaper";
  int p[2];
  if (::pipe(p) != 0) return "pipe";
  auto grandchild = [&] {
    pid_t g = 0;
    return ::read(p[0], &g, sizeof g) == sizeof g ? g : pid_t{0};
  };
  std::string bad;
  const pid_t a = start_rank(1, p[1], false);
  const pid_t ga = grandchild();
  const pid_t a2 = start_rank(1, p[1], true);  // exits, leaving its daemon to the NM
  const pid_t da = grandchild();
  const pid_t b = start_rank(2, p[1], false);
  const pid_t gb = grandchild();
  if (!a || !ga || !a2 || !da || !b || !gb) return "a process did not start";
  // a2's exit, as the node manager sees it (its pidfd), and its reaping,
  // which places the daemon it left as job 1's first.
  {
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, a2, 0));
    pollfd pf{fd, POLLIN, 0};
    if (fd < 0 || ::poll(&pf, 1, 20'000) != 1) return "rank a2 did not exit";
    ::close(fd);
    place_orphans();
    ::waitpid(a2, nullptr, 0);
    forget_rank(a2);
  }
  if (count_job_processes(1) != 3) bad += "job 1 should have 3 processes; ";
  if (count_job_processes(2) != 2) bad += "job 2 should have 2 processes; ";
  if (kill_job_tree(1) < 3) bad += "fewer than 3 of job 1's processes killed; ";
  // Job 1's rank, its detached grandchild (inherited by the NM once the
  // rank died) and the daemon its other rank left: dead.
  if (!reaped(a)) bad += "job 1's rank lives; ";
  forget_rank(a);
  if (!reaped(ga)) bad += "job 1's detached grandchild lives; ";
  if (!reaped(da)) bad += "the daemon job 1's rank left lives; ";
  // Job 2's: untouched.
  if (!alive(b)) bad += "job 2's rank was killed; ";
  if (!alive(gb)) bad += "job 2's detached grandchild was killed; ";
  if (count_job_processes(2) != 2) bad += "job 2 lost processes; ";
  if (count_job_processes(1) != 0) bad += "job 1 still has processes; ";
  kill_job_tree(2);
  if (!reaped(b)) bad += "job 2's rank lives after its own kill; ";
  forget_rank(b);
  if (!reaped(gb)) bad += "job 2's grandchild lives after its own kill; ";
  return bad;
}

TEST(ProcessTree, KillingOneJobLeavesAnotherJobsProcessesAlive) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const pid_t nm = ::fork();
  ASSERT_GE(nm, 0);
  if (nm == 0) {
    ::close(p[0]);
    const std::string bad = two_jobs_one_killed();
    if (::write(p[1], bad.data(), bad.size()) < 0) ::_exit(2);
    ::_exit(0);
  }
  ::close(p[1]);
  std::string bad;
  char buf[256];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) bad.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(nm, &status, 0), nm);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(bad, "");
}

// A job alone on its node (its ranks not subreapers): whatever its ranks
// detach reaches the NM with nothing to say whose it is, and dies with the
// job, as before jobs were held side by side.
std::string one_job_alone() {
  if (!become_subreaper()) return "cannot become a subreaper";
  int p[2];
  if (::pipe(p) != 0) return "pipe";
  const pid_t a = fork_rank(7, [&] {
    ::setpgid(0, 0);
    detach_grandchild(p[1]);
    for (;;) ::pause();
  });
  pid_t g = 0;
  if (::read(p[0], &g, sizeof g) != sizeof g) return "no grandchild";
  std::string bad;
  reap_orphans();  // a SIGCHLD's look: the grandchild is the NM's, placed as job 7's
  if (!alive(g)) bad += "the grandchild died early; ";
  kill_job_tree(7);
  if (!reaped(a)) bad += "the rank lives; ";
  forget_rank(a);
  if (!reaped(g)) bad += "the grandchild lives; ";
  return bad;
}

TEST(ProcessTree, AJobAloneTakesEverythingItsRanksDetached) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const pid_t nm = ::fork();
  ASSERT_GE(nm, 0);
  if (nm == 0) {
    ::close(p[0]);
    const std::string bad = one_job_alone();
    if (::write(p[1], bad.data(), bad.size()) < 0) ::_exit(2);
    ::_exit(0);
  }
  ::close(p[1]);
  std::string bad;
  char buf[256];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) bad.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(nm, &status, 0), nm);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(bad, "");
}

}  // namespace
}  // namespace bcs::nm
