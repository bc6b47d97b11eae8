// libbcs/core across processes: a forked peer, and the whole suite re-run
// over TCP only and over shared memory + CMA only.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace bcs::core::test {
namespace {

// Child process with a bounded wait for its exit (pidfd + poll, no sleeps).
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // Exit status, or -1 if it did not exit in time (it is then killed).
  int wait(std::chrono::milliseconds timeout) {
    int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(timeout.count()));
      ::close(pidfd);
    }
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r != pid_) return -1;  // destructor kills and reaps
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_;
};

struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) == 0) {
      r = fds[0];
      w = fds[1];
    }
  }
  ~Pipe() {
    if (r >= 0) ::close(r);
    if (w >= 0) ::close(w);
  }
};

bool write_all(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (n) {
    ssize_t k = ::write(fd, b, n);
    if (k <= 0) return false;
    b += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool read_all(int fd, void* p, size_t n, int timeout_ms) {
  auto* b = static_cast<uint8_t*>(p);
  while (n) {
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, timeout_ms) <= 0) return false;
    ssize_t k = ::read(fd, b, n);
    if (k <= 0) return false;
    b += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

bool send_blob(int fd, const std::vector<uint8_t>& v) {
  uint32_t n = static_cast<uint32_t>(v.size());
  return write_all(fd, &n, sizeof n) && write_all(fd, v.data(), v.size());
}

bool recv_blob(int fd, std::vector<uint8_t>* v) {
  uint32_t n = 0;
  if (!read_all(fd, &n, sizeof n, 10000) || n > (1u << 20)) return false;
  v->resize(n);
  return read_all(fd, v->data(), n, 10000);
}

constexpr EventId kPing = 1, kPong = 2;
constexpr const char* kDoneMark = "__done__";  // no pattern() block equals it

// The child: echoes every kPing back as kPong until the done mark. Returns its exit code.
int child_main(int to_parent, int from_parent) {
  std::string err;
  FabricConfig cfg;
  cfg.self = 2;
  auto f = Fabric::create(cfg, &err);
  if (!f) return 10;
  std::vector<uint8_t> peer;
  if (!send_blob(to_parent, f->address()) || !recv_blob(from_parent, &peer)) return 11;
  if (f->connect(1, peer) != Status::ok) return 12;
  for (;;) {
    Message m;
    if (f->test_event(kPing, &m, kWait) != Status::ok) return 13;
    if (m.data == bytes(kDoneMark)) break;
    if (f->xfer_and_signal(1, kPong, m.data) != Status::ok) return 14;
  }
  f.reset();  // tear UCX down before _exit
  return 0;
}

TEST(CoreProcesses, ForkedPeerEchoesAllSizes) {
  Pipe c2p, p2c;
  ASSERT_GE(c2p.r, 0);
  ASSERT_GE(p2c.r, 0);
  // Fork before this process creates its own UCX objects for the test.
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(child_main(c2p.w, p2c.r));
  Child child(pid);

  auto f = make_fabric(1);
  ASSERT_TRUE(f);
  std::vector<uint8_t> peer;
  ASSERT_TRUE(recv_blob(c2p.r, &peer));
  ASSERT_TRUE(send_blob(p2c.w, f->address()));
  ASSERT_EQ(f->connect(2, peer), Status::ok);

  const std::vector<size_t> sizes = {8, 0, 64u << 10, 4u << 20, 1, 4u << 20, 10};
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto data = pattern(sizes[i], static_cast<uint32_t>(i));
    ASSERT_EQ(f->xfer_and_signal(2, kPing, data), Status::ok) << i << ": " << f->last_error();
    Message m;
    ASSERT_EQ(f->test_event(kPong, &m, kWait), Status::ok) << i;
    EXPECT_EQ(m.from, 2u);
    EXPECT_TRUE(m.data == data) << "size " << sizes[i];
  }
  // Pipelined: several in flight, replies in order.
  for (size_t i = 0; i < sizes.size(); ++i)
    ASSERT_EQ(f->xfer_and_signal(2, kPing, pattern(sizes[i], 100 + i)), Status::ok) << i;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Message m;
    ASSERT_EQ(f->test_event(kPong, &m, kWait), Status::ok) << i;
    EXPECT_TRUE(m.data == pattern(sizes[i], 100 + i)) << i;
  }
  ASSERT_EQ(f->xfer_and_signal(2, kPing, bytes(kDoneMark)), Status::ok);
  EXPECT_EQ(child.wait(std::chrono::milliseconds(20000)), 0);
}

// A peer stopped (SIGSTOP: a debugger, a VM pause) while a large message
// to it is in flight. With a limit longer than the stall, the send rides it
// out and completes once the peer runs again, even past the default 5 s;
// a caller that no longer needs the send ends it at once with give_up.
// The sender's own give_up calls (about one per 100 ms) resume the peer
// once the stall is long enough, so no test thread sleeps.
class StoppedPeer : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(c2p.r, 0);
    ASSERT_GE(p2c.r, 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(child_main(c2p.w, p2c.r));
    child = std::make_unique<Child>(pid);
    pid_ = pid;
    f = make_fabric(1);
    ASSERT_TRUE(f);
    std::vector<uint8_t> peer;
    ASSERT_TRUE(recv_blob(c2p.r, &peer));
    ASSERT_TRUE(send_blob(p2c.w, f->address()));
    ASSERT_EQ(f->connect(2, peer), Status::ok);
    // One round trip first, so the connection is up before the stop.
    ASSERT_EQ(f->xfer_and_signal(2, kPing, pattern(8, 1)), Status::ok);
    Message m;
    ASSERT_EQ(f->test_event(kPong, &m, kWait), Status::ok);
  }
  // Large enough that no transport can take it without the peer's help
  // (socket buffers, a rendezvous).
  const std::vector<uint8_t> big = pattern(64u << 20, 3);
  Pipe c2p, p2c;
  std::unique_ptr<Child> child;
  pid_t pid_ = -1;
  std::unique_ptr<Fabric> f;
};

TEST_F(StoppedPeer, ASendRidesOutAStallLongerThanTheDefaultTimeout) {
  ASSERT_EQ(::kill(pid_, SIGSTOP), 0);
  int asked = 0;
  bool resumed = false;
  const auto stopped = std::chrono::steady_clock::now();
  const SendLimit limit{std::chrono::seconds(60), [&] {
                          // The stall under test: past the default 5 s.
                          ++asked;
                          if (!resumed && std::chrono::steady_clock::now() - stopped >
                                              std::chrono::milliseconds(5500))
                            resumed = ::kill(pid_, SIGCONT) == 0;
                          return false;
                        }};
  const auto s = f->xfer_and_signal(2, kPing, big, limit);
  if (!resumed) ::kill(pid_, SIGCONT);
  ASSERT_EQ(s, Status::ok) << f->last_error();
  EXPECT_TRUE(resumed) << "the send completed while the peer was stopped (asked " << asked << ")";
  Message m;
  ASSERT_EQ(f->test_event(kPong, &m, kWait), Status::ok);
  EXPECT_TRUE(m.data == big);
  ASSERT_EQ(f->xfer_and_signal(2, kPing, bytes(kDoneMark)), Status::ok);
  EXPECT_EQ(child->wait(std::chrono::milliseconds(20000)), 0);
}

TEST_F(StoppedPeer, ASendItsCallerGivesUpOnEndsAtOnce) {
  ASSERT_EQ(::kill(pid_, SIGSTOP), 0);
  int asked = 0;
  const SendLimit limit{std::chrono::seconds(60), [&] { return ++asked == 3; }};
  EXPECT_EQ(f->xfer_and_signal(2, kPing, big, limit), Status::io_error);
  EXPECT_EQ(asked, 3);
  EXPECT_FALSE(f->connected(2));  // the endpoint is closed: nothing references `big`
  // ~Child kills the stopped peer and reaps it.
}

// Re-runs every other core test in a fresh process with another transport
// setup, so the same assertions cover each path:
//  - tcp: UCX_TLS=tcp, the network path between hosts;
//  - shm: BCS_CORE_ERR_MODE=none with shared memory + CMA only (UCX 1.13
//    offers those transports only to endpoints without peer error handling).
struct Rerun {
  const char* name;
  std::vector<std::pair<const char*, const char*>> env;
};

class CoreTransports : public ::testing::TestWithParam<Rerun> {};

TEST_P(CoreTransports, WholeSuitePasses) {
  if (std::getenv("BCS_CORE_TEST_CHILD")) GTEST_SKIP() << "already a re-run";
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  ASSERT_GT(n, 0);
  exe[n] = '\0';
  std::string how;
  for (auto& [k, v] : GetParam().env) how += std::string(k) + "=" + v + " ";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    for (auto& [k, v] : GetParam().env) ::setenv(k, v, 1);
    ::setenv("BCS_CORE_TEST_CHILD", "1", 1);
    int devnull = ::open("/dev/null", O_WRONLY);
    if (devnull >= 0 && !std::getenv("BCS_CORE_TEST_VERBOSE")) ::dup2(devnull, 1);
    const char* argv[] = {exe, "--gtest_filter=-*CoreTransports*", nullptr};
    ::execv(exe, const_cast<char* const*>(argv));
    _exit(127);
  }
  Child child(pid);
  EXPECT_EQ(child.wait(std::chrono::milliseconds(100000)), 0) << "rerun with: " << how << exe;
}

INSTANTIATE_TEST_SUITE_P(
    Rerun, CoreTransports,
    ::testing::Values(Rerun{"tcp", {{"UCX_TLS", "tcp"}}},
                      Rerun{"shm", {{"UCX_TLS", "self,sm"}, {"BCS_CORE_ERR_MODE", "none"}}}),
    [](const ::testing::TestParamInfo<Rerun>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace bcs::core::test
