// Every refusal of the manager reaches the person refused (issue 42): each
// `bcs` command that talks to a manager exits non-zero, saying the manager's
// reason, on each kind of error the manager returns; and a unix-socket
// manager's refusal of the connection (its session cap) is said too. The
// real bcs executable runs against an in-process fake manager.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bcs.grpc.pb.h"
#include "peer.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
namespace pb = bcs::v1;
using namespace std::chrono_literals;

// Bound for a bcs child: never hang (no timing assertion).
constexpr auto kBound = 60s;

std::string find_bcs() {
  if (const char* p = std::getenv("BCS_CLI_PATH")) return p;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return {};
  const fs::path dir = fs::path(std::string(self, static_cast<size_t>(n))).parent_path();
  for (auto cand : {dir / "bcs", dir / "bin" / "bcs"})
    if (::access(cand.c_str(), X_OK) == 0) return cand;
  return {};
}

struct Result {
  int status = -1;  // exit status, or 128+signal
  std::string out, err;
};

// Runs bcs with `args` (BCS_TOKEN unset: plain TCP, no proof), its output
// read to EOF within kBound, else killed.
Result run_bcs(const std::string& exe, std::vector<std::string> args) {
  Result r;
  int o[2], e[2];
  if (::pipe2(o, O_CLOEXEC) || ::pipe2(e, O_CLOEXEC)) return r;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, o[1], 1);
  posix_spawn_file_actions_adddup2(&fa, e[1], 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  args.insert(args.begin(), exe);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (char** p = environ; *p; ++p)
    if (std::string_view(*p).rfind("BCS_TOKEN=", 0) != 0) envp.push_back(*p);
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(o[1]);
  ::close(e[1]);
  if (rc == 0) {
    bool open[2] = {true, true};
    const auto until = std::chrono::steady_clock::now() + kBound;
    while (open[0] || open[1]) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            until - std::chrono::steady_clock::now())
                            .count();
      pollfd fds[2] = {{open[0] ? o[0] : -1, POLLIN, 0}, {open[1] ? e[0] : -1, POLLIN, 0}};
      if (left <= 0 || ::poll(fds, 2, static_cast<int>(left)) <= 0) {
        ADD_FAILURE() << "bcs did not finish within the bound; stderr: " << r.err;
        ::kill(pid, SIGKILL);
        break;
      }
      for (int i = 0; i < 2; ++i) {
        if (!open[i] || !fds[i].revents) continue;
        char buf[4096];
        const ssize_t n = ::read(i == 0 ? o[0] : e[0], buf, sizeof buf);
        if (n <= 0)
          open[i] = false;
        else
          (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  ::close(o[0]);
  ::close(e[0]);
  return r;
}

// A manager that refuses every call about a job with `refusal` while its
// slice window answers (slices of job 3): a command that ignored the
// refusal would go on and succeed on those. With `slices_refused`, the
// window's calls are refused too.
class RefusingManager final : public pb::Jobs::Service, public pb::Monitor::Service {
 public:
  grpc::Status refusal;
  bool slices_refused = false;

  grpc::Status Launch(grpc::ServerContext*, const pb::LaunchRequest*, pb::LaunchReply*) override {
    return refusal;
  }
  grpc::Status Attach(grpc::ServerContext*, const pb::AttachRequest*,
                      grpc::ServerWriter<pb::JobEvent>*) override {
    return refusal;
  }
  grpc::Status Kill(grpc::ServerContext*, const pb::KillRequest*, pb::KillReply*) override {
    return refusal;
  }
  grpc::Status List(grpc::ServerContext*, const pb::ListRequest*, pb::ListReply*) override {
    return refusal;
  }
  grpc::Status JobStats(grpc::ServerContext*, const pb::JobStatsRequest*,
                        pb::JobStatsReply*) override {
    return refusal;
  }
  grpc::Status Follow(grpc::ServerContext*, const pb::FollowRequest*,
                      grpc::ServerWriter<pb::FollowEvent>*) override {
    return refusal;
  }
  grpc::Status Slices(grpc::ServerContext*, const pb::SlicesRequest*, pb::SlicesReply* rep) override {
    if (slices_refused) return refusal;
    for (uint64_t i = 1; i <= 3; ++i) {
      auto* s = rep->add_slices();
      s->set_slice(i);
      s->set_job_id(3);
      s->set_start_ns(i * 1'000'000);
      s->set_period_ns(1'000'000);
    }
    rep->set_total_slices(3);
    return grpc::Status::OK;
  }
  grpc::Status NodeSlices(grpc::ServerContext*, const pb::NodeSlicesRequest* req,
                          pb::NodeSlicesReply* rep) override {
    if (slices_refused) return refusal;
    rep->set_node(req->node());
    return grpc::Status::OK;
  }
};

struct Case {
  grpc::StatusCode code;
  const char* message;
};

class ManagerErrorTest : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    exe_ = find_bcs();
    if (exe_.empty()) GTEST_SKIP() << "bcs executable not built next to the test";
    mgr_.refusal = grpc::Status(GetParam().code, GetParam().message);
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(static_cast<pb::Jobs::Service*>(&mgr_));
    b.RegisterService(static_cast<pb::Monitor::Service*>(&mgr_));
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
    addr_ = "127.0.0.1:" + std::to_string(port);
    dir_ = fs::temp_directory_path() / ("bcs-errors-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 5s);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Runs `bcs WORDS --manager ADDR ...` and checks it exits 1 saying the
  // manager's message.
  void expect_refused(std::vector<std::string> words) {
    std::string line;
    for (const auto& w : words) line += w + " ";
    words.insert(words.begin() + 1, {"--manager", addr_});
    const Result r = run_bcs(exe_, words);
    EXPECT_EQ(r.status, 1) << "bcs " << line << "\nstdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find(GetParam().message), std::string::npos)
        << "bcs " << line << "\nstderr: " << r.err;
  }

  std::string exe_, addr_;
  RefusingManager mgr_;
  std::unique_ptr<grpc::Server> server_;
  fs::path dir_;
};

TEST_P(ManagerErrorTest, EveryJobCommandExitsNonZeroWithTheReason) {
  expect_refused({"run", "-n", "1", "prog"});
  expect_refused({"run", "--detach", "-n", "1", "prog"});
  expect_refused({"jobs"});
  expect_refused({"kill", "3"});
  expect_refused({"attach", "3"});
  expect_refused({"stats", "3"});
  expect_refused({"monitor", "--count", "1"});
  expect_refused({"monitor", "3"});
}

// Issue 42: `bcs trace` of another user's job printed PERMISSION_DENIED,
// then wrote that job's slices and exited 0.
TEST_P(ManagerErrorTest, TraceAndPlotOfARefusedJobWriteNothing) {
  const std::string trace = (dir_ / "t.json").string(), plot = (dir_ / "p.svg").string();
  expect_refused({"trace", "3", "-o", trace});
  expect_refused({"plot", "3", "-o", plot});
  EXPECT_FALSE(fs::exists(trace));
  EXPECT_FALSE(fs::exists(plot));
}

TEST_P(ManagerErrorTest, TheSliceWindowsRefusalToo) {
  mgr_.slices_refused = true;
  expect_refused({"stats"});
  expect_refused({"stats", "--node", "n1"});
}

INSTANTIATE_TEST_SUITE_P(
    EachError, ManagerErrorTest,
    testing::Values(Case{grpc::StatusCode::PERMISSION_DENIED, "job 3 belongs to root"},
                    Case{grpc::StatusCode::NOT_FOUND, "no job 3"},
                    Case{grpc::StatusCode::INVALID_ARGUMENT, "nranks must be at least 1"},
                    Case{grpc::StatusCode::FAILED_PRECONDITION, "only 0 node manager(s) registered"},
                    Case{grpc::StatusCode::UNAUTHENTICATED, "this manager needs the cluster token"},
                    Case{grpc::StatusCode::RESOURCE_EXHAUSTED, "too many jobs queued"},
                    Case{grpc::StatusCode::INTERNAL, "the manager broke"}),
    [](const testing::TestParamInfo<Case>& i) {
      std::string n;
      for (const char* p = i.param.message; *p; ++p)
        if (std::isalnum(static_cast<unsigned char>(*p))) n += *p;
      return n;
    });

// The manager's unix socket refuses a user over its session cap
// (UnixSessions::kPerUser) with a refusal preamble: bcs says the reason and
// exits 1 instead of "the manager closed the connection" (issue 42).
TEST(SessionCap, TheRefusalReachesTheClientsStderr) {
  const std::string exe = find_bcs();
  if (exe.empty()) GTEST_SKIP() << "bcs executable not built next to the test";
  const fs::path dir = fs::temp_directory_path() / ("bcs-cap-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string sock = (dir / "mm.sock").string();
  bcs::UnixListener l;
  std::string why;
  ASSERT_TRUE(l.open(sock, &why)) << why;
  const std::string reason =
      "alice already has 64 connections open to this manager, the most one user may have (64)";
  std::thread server([&] {
    pollfd p{l.fd(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kBound).count())), 1);
    bcs::UniqueFd c(::accept4(l.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(c);
    const std::string no = bcs::refusal_preamble(reason);
    ASSERT_EQ(::write(c.get(), no.data(), no.size()), static_cast<ssize_t>(no.size()));
  });
  const Result r = run_bcs(exe, {"jobs", "--manager", "unix:" + sock});
  server.join();
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("refused the connection: " + reason), std::string::npos) << r.err;
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
