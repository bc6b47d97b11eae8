// Embedded-cluster process management (daemons/cli/cluster.h) with fake
// daemons: small bash scripts written to a temporary directory at run time
// and selected through BCS_MM_PATH / BCS_NM_PATH.
#include "cluster.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <string>

namespace bcs::cli {
namespace {

namespace fs = std::filesystem;

// The fake bcs-mm behaves according to $FAKE_MODE; both fakes append their
// command line to the FIFO $FAKE_DIR/args so the test can read them without
// polling the file system.
constexpr const char* kFakeMm = R"(#!/bin/bash
fd=
args="$*"
while [ $# -gt 0 ]; do case "$1" in --ready-fd) fd=$2; shift;; esac; shift; done
echo "mm $args" > "$FAKE_DIR/args"
case "$FAKE_MODE" in
  exit3)    exit 3 ;;
  close)    eval "exec $fd>&-"; exec sleep 1000 ;;
  badport)  echo abc >&$fd; exec sleep 1000 ;;
  silent)   exec sleep 1000 ;;
  stubborn) trap '' TERM; echo 4242 >&$fd; eval "exec $fd>&-"; exec sleep 1000 ;;
  *)        echo 4242 >&$fd; eval "exec $fd>&-"; exec sleep 1000 ;;
esac
)";
constexpr const char* kFakeNm = R"(#!/bin/bash
echo "nm $*" > "$FAKE_DIR/args"
exec sleep 1000
)";

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/bcs-cli-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    write_script("fake-mm", kFakeMm);
    write_script("fake-nm", kFakeNm);
    ASSERT_EQ(::mkfifo((dir_ / "args").c_str(), 0600), 0);
    // Non-blocking reader opened first, so that the fakes' open() for
    // writing never blocks; we keep it open for the whole test.
    args_fd_ = ::open((dir_ / "args").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(args_fd_, 0);
    // Our own idle writer: without it, the FIFO reports POLLHUP between two
    // fakes and poll() would return at once instead of sleeping.
    args_wfd_ = ::open((dir_ / "args").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(args_wfd_, 0);
    ::setenv("BCS_MM_PATH", (dir_ / "fake-mm").c_str(), 1);
    ::setenv("BCS_NM_PATH", (dir_ / "fake-nm").c_str(), 1);
    ::setenv("FAKE_DIR", dir_.c_str(), 1);
    ::setenv("FAKE_MODE", "ok", 1);
  }
  void TearDown() override {
    if (args_fd_ >= 0) ::close(args_fd_);
    if (args_wfd_ >= 0) ::close(args_wfd_);
    ::unsetenv("BCS_MM_PATH");
    ::unsetenv("BCS_NM_PATH");
    ::unsetenv("FAKE_MODE");
    ::unsetenv("FAKE_DIR");
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void write_script(const std::string& name, const char* text) {
    std::ofstream(dir_ / name) << text;
    fs::permissions(dir_ / name, fs::perms::owner_all);
  }
  // Reads `lines` lines of fake command lines (bounded: 30 s per read).
  std::string read_args(int lines) {
    std::string got;
    while (std::count(got.begin(), got.end(), '\n') < lines) {
      pollfd p{args_fd_, POLLIN, 0};
      int rc = ::poll(&p, 1, 30000);
      if (rc <= 0) break;
      char buf[512];
      ssize_t n = ::read(args_fd_, buf, sizeof buf);
      if (n > 0) got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }
  static bool gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

  fs::path dir_;
  int args_fd_ = -1;
  int args_wfd_ = -1;
};

TEST_F(ClusterTest, StartsDaemonsAndTearsThemDown) {
  EmbeddedCluster c;
  ClusterConfig cfg;
  cfg.nodes = 2;
  cfg.slice = "2ms";
  cfg.token_file = "tok";
  c.start(cfg);
  EXPECT_EQ(c.port(), 4242);
  EXPECT_EQ(c.address(), "127.0.0.1:4242");
  ASSERT_EQ(c.children().size(), 3u);
  for (const auto& ch : c.children()) {
    EXPECT_FALSE(gone(ch.pid)) << ch.name;
    // Own process group: a terminal's Ctrl-C reaches only bcs.
    EXPECT_EQ(::getpgid(ch.pid), ch.pid) << ch.name;
  }
  std::string args = read_args(3);
  EXPECT_NE(args.find("mm --listen 127.0.0.1:0 --ready-fd "), std::string::npos) << args;
  EXPECT_NE(args.find("--slice 2ms"), std::string::npos) << args;
  EXPECT_NE(args.find("nm --manager 127.0.0.1:4242 --name node1 --token-file tok"), std::string::npos)
      << args;
  EXPECT_NE(args.find("nm --manager 127.0.0.1:4242 --name node2 --token-file tok"), std::string::npos)
      << args;

  c.teardown();
  for (const auto& ch : c.children()) {
    EXPECT_TRUE(ch.reaped) << ch.name;
    EXPECT_TRUE(WIFSIGNALED(ch.wait_status) && WTERMSIG(ch.wait_status) == SIGTERM) << ch.name;
    EXPECT_TRUE(gone(ch.pid)) << ch.name;
  }
}

TEST_F(ClusterTest, DestructorTearsDown) {
  pid_t pids[2];
  {
    EmbeddedCluster c;
    ClusterConfig cfg;
    c.start(cfg);
    ASSERT_EQ(c.children().size(), 2u);
    pids[0] = c.children()[0].pid;
    pids[1] = c.children()[1].pid;
  }
  EXPECT_TRUE(gone(pids[0]));
  EXPECT_TRUE(gone(pids[1]));
}

TEST_F(ClusterTest, StubbornDaemonGetsSigkill) {
  ::setenv("FAKE_MODE", "stubborn", 1);
  EmbeddedCluster c;
  ClusterConfig cfg;
  cfg.nodes = 1;
  c.start(cfg);
  read_args(2);  // both fakes are past their setup (the trap is in place)
  c.teardown(/*grace_ms=*/100);
  const Child& mm = c.children()[0];
  EXPECT_TRUE(mm.reaped);
  EXPECT_TRUE(WIFSIGNALED(mm.wait_status) && WTERMSIG(mm.wait_status) == SIGKILL);
  EXPECT_TRUE(gone(mm.pid));
  const Child& nm = c.children()[1];
  EXPECT_TRUE(WIFSIGNALED(nm.wait_status) && WTERMSIG(nm.wait_status) == SIGTERM);
}

TEST_F(ClusterTest, ManagerExitingBeforeReadyIsAClearError) {
  ::setenv("FAKE_MODE", "exit3", 1);
  EmbeddedCluster c;
  try {
    c.start(ClusterConfig{});
    FAIL() << "start() should throw";
  } catch (const ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("bcs-mm"), std::string::npos) << e.what();
  }
  c.teardown();
  ASSERT_EQ(c.children().size(), 1u);  // no NM was started
  EXPECT_TRUE(c.children()[0].reaped);
  EXPECT_TRUE(WIFEXITED(c.children()[0].wait_status));
  EXPECT_EQ(WEXITSTATUS(c.children()[0].wait_status), 3);
}

TEST_F(ClusterTest, ManagerClosingThePipeIsAClearError) {
  ::setenv("FAKE_MODE", "close", 1);
  EmbeddedCluster c;
  try {
    c.start(ClusterConfig{});
    FAIL() << "start() should throw";
  } catch (const ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("without reporting a port"), std::string::npos)
        << e.what();
  }
  pid_t pid = c.children().at(0).pid;
  c.teardown();
  EXPECT_TRUE(gone(pid));
}

TEST_F(ClusterTest, BadPortIsAClearError) {
  ::setenv("FAKE_MODE", "badport", 1);
  EmbeddedCluster c;
  try {
    c.start(ClusterConfig{});
    FAIL() << "start() should throw";
  } catch (const ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("bad port: 'abc'"), std::string::npos) << e.what();
  }
}

TEST_F(ClusterTest, InterruptWhileWaitingForTheManager) {
  ::setenv("FAKE_MODE", "silent", 1);
  int efd = ::eventfd(1, EFD_CLOEXEC);  // already readable: "a signal arrived"
  ASSERT_GE(efd, 0);
  EmbeddedCluster c;
  ClusterConfig cfg;
  cfg.interrupt_fd = efd;
  EXPECT_THROW(c.start(cfg), StartInterrupted);
  pid_t pid = c.children().at(0).pid;
  c.teardown();
  EXPECT_TRUE(gone(pid));
  ::close(efd);
}

TEST_F(ClusterTest, MissingDaemonsAreNamed) {
  ::setenv("BCS_MM_PATH", (dir_ / "nope").c_str(), 1);
  EmbeddedCluster c;
  try {
    c.start(ClusterConfig{});
    FAIL() << "start() should throw";
  } catch (const ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("BCS_MM_PATH"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(c.children().empty());

  ::unsetenv("BCS_NOT_SET_ANYWHERE");
  try {
    find_daemon("bcs-no-such-daemon-xyz", "BCS_NOT_SET_ANYWHERE");
    FAIL() << "find_daemon should throw";
  } catch (const ClusterError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot find bcs-no-such-daemon-xyz"), std::string::npos);
  }
}

TEST_F(ClusterTest, ExecFailureIsReported) {
  std::ofstream(dir_ / "not-exec") << "";
  fs::permissions(dir_ / "not-exec", fs::perms::owner_read);
  EXPECT_THROW(spawn({(dir_ / "not-exec").string()}, -1), ClusterError);
}

TEST(WaitStatus, Describe) {
  EXPECT_EQ(describe_wait_status(3 << 8), "exited with status 3");
  EXPECT_EQ(describe_wait_status(SIGKILL), "was killed by signal 9 (Killed)");
}

}  // namespace
}  // namespace bcs::cli
