// Which process a rank's messages are in: process_runs_below accepts a
// process of the job's user below the one the node manager started (a
// wrapper's child), and nothing else.
#include "process_tree.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
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

}  // namespace
}  // namespace bcs::nm
