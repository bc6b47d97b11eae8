// `bcs run` / `bcs jobs` / `bcs kill` end to end against an in-process fake
// machine manager (a gRPC Jobs service scripted per test). The real bcs
// executable runs as a child process; for the embedded mode it starts fake
// daemon scripts whose "bcs-mm" reports the fake server's port.
#include <dirent.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bcs.grpc.pb.h"
#include "proof.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
namespace pb = bcs::v1;
using namespace std::chrono_literals;

// Generous bound for anything the test waits on: never hang, never a
// timing assertion.
constexpr auto kBound = 60s;

pb::JobEvent output(uint32_t rank, pb::Stream s, std::string data) {
  pb::JobEvent ev;
  ev.mutable_output()->set_job_id(7);
  ev.mutable_output()->set_rank(rank);
  ev.mutable_output()->set_stream(s);
  ev.mutable_output()->set_data(std::move(data));
  return ev;
}

class FakeJobs final : public pb::Jobs::Service {
 public:
  enum class End { kExit, kWaitForKill, kBreak };

  // Script (set before the server is used).
  std::vector<pb::JobEvent> events;
  End end = End::kExit;
  pb::JobExit exit;
  grpc::Status launch_status = grpc::Status::OK;
  // What List says of job 7 (a manager from before JobEvent.started names
  // no nodes).
  std::string list_state = "running";
  std::vector<std::string> list_nodes;
  uint64_t list_slices = 0;
  // > 0: Attach waits (after `events`) until List was asked this many
  // times, then the job "starts": List says running on n1 and the stream
  // says `started`. Unless a Kill came first.
  int start_after_lists = 0;

  // Observations.
  std::mutex mu;
  std::condition_variable cv;
  std::optional<pb::LaunchRequest> launch;
  std::string token, proof, peer;
  bool attached = false;
  std::optional<std::string> kill_reason;
  uint64_t kill_job = 0;
  int list_calls = 0;
  bool started_sent = false;
  bool killed_before_started = false;

  grpc::Status Launch(grpc::ServerContext* ctx, const pb::LaunchRequest* req,
                      pb::LaunchReply* rep) override {
    std::lock_guard lk(mu);
    launch = *req;
    auto it = ctx->client_metadata().find("bcs-token");
    if (it != ctx->client_metadata().end()) token.assign(it->second.data(), it->second.size());
    it = ctx->client_metadata().find("bcs-proof");
    if (it != ctx->client_metadata().end()) proof.assign(it->second.data(), it->second.size());
    peer = ctx->peer();
    if (!launch_status.ok()) return launch_status;
    rep->set_job_id(7);
    return grpc::Status::OK;
  }

  grpc::Status Attach(grpc::ServerContext*, const pb::AttachRequest* req,
                      grpc::ServerWriter<pb::JobEvent>* w) override {
    if (req->job_id() != 7) return {grpc::StatusCode::NOT_FOUND, "no such job"};
    for (const auto& ev : events) w->Write(ev);
    std::unique_lock lk(mu);
    attached = true;
    cv.notify_all();
    if (start_after_lists > 0) {
      if (!cv.wait_for(lk, kBound, [&] { return list_calls >= start_after_lists || kill_reason; }))
        return {grpc::StatusCode::DEADLINE_EXCEEDED, "test: List was not asked"};
      if (!kill_reason) {
        list_state = "running";
        list_nodes = {"n1"};
        started_sent = true;
        pb::JobEvent ev;
        ev.mutable_started()->set_start_ns(123);
        ev.mutable_started()->add_nodes("n1");
        lk.unlock();
        w->Write(ev);
        lk.lock();
      }
    }
    if (end == End::kBreak) return {grpc::StatusCode::UNAVAILABLE, "boom"};
    pb::JobEvent ev;
    if (end == End::kWaitForKill) {
      if (!cv.wait_for(lk, kBound, [&] { return kill_reason.has_value(); }))
        return {grpc::StatusCode::DEADLINE_EXCEEDED, "test: no Kill came"};
      ev.mutable_exit()->set_status(143);
      ev.mutable_exit()->set_message("job 7 killed: " + *kill_reason);
    } else {
      *ev.mutable_exit() = exit;
    }
    lk.unlock();
    w->Write(ev);
    return grpc::Status::OK;
  }

  grpc::Status Kill(grpc::ServerContext*, const pb::KillRequest* req, pb::KillReply* rep) override {
    std::lock_guard lk(mu);
    rep->set_state("ranks still running: 0 (pid 42 on n1)");
    kill_reason = req->reason();
    kill_job = req->job_id();
    killed_before_started = !started_sent;
    cv.notify_all();
    return grpc::Status::OK;
  }

  grpc::Status List(grpc::ServerContext*, const pb::ListRequest*, pb::ListReply* rep) override {
    std::lock_guard lk(mu);
    ++list_calls;
    cv.notify_all();
    auto* j = rep->add_jobs();
    j->set_job_id(7);
    j->set_program("a.out");
    j->set_nranks(4);
    j->set_state(list_state);
    for (const auto& n : list_nodes) j->add_nodes(n);
    j->set_slices(list_slices);
    return grpc::Status::OK;
  }

  bool wait_attached() {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, kBound, [&] { return attached; });
  }
};

struct Result {
  int status = -1;  // exit status, or 128+signal
  std::string out, err;
};

std::string find_bcs() {
  if (const char* p = std::getenv("BCS_CLI_PATH")) return p;
  char self[4096];
  ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return {};
  fs::path dir = fs::path(std::string(self, static_cast<size_t>(n))).parent_path();
  for (auto cand : {dir / "bcs", dir / "bin" / "bcs"})
    if (::access(cand.c_str(), X_OK) == 0) return cand;
  return {};
}

// A running `bcs` child with its stdout/stderr captured.
class Bcs {
 public:
  Bcs(const std::string& exe, std::vector<std::string> args, std::vector<std::string> extra_env = {}) {
    int o[2], e[2];
    EXPECT_EQ(::pipe2(o, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(e, O_CLOEXEC), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, o[1], 1);
    posix_spawn_file_actions_adddup2(&fa, e[1], 2);
    args.insert(args.begin(), exe);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_s;
    for (char** p = environ; *p; ++p) env_s.emplace_back(*p);
    for (auto& x : extra_env) env_s.push_back(x);
    std::vector<char*> envp;
    for (auto& x : env_s) envp.push_back(x.data());
    envp.push_back(nullptr);
    EXPECT_EQ(::posix_spawn(&pid_, exe.c_str(), &fa, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&fa);
    ::close(o[1]);
    ::close(e[1]);
    out_fd_ = o[0];
    err_fd_ = e[0];
  }
  ~Bcs() {
    if (pid_ > 0) {  // a failed test: do not leave it behind
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
    if (err_fd_ >= 0) ::close(err_fd_);
  }
  pid_t pid() const { return pid_; }

  // Reads both pipes to EOF (bounded), then reaps bcs.
  Result finish() {
    Result r;
    bool open[2] = {true, true};
    while (open[0] || open[1]) {
      pollfd fds[2] = {{open[0] ? out_fd_ : -1, POLLIN, 0}, {open[1] ? err_fd_ : -1, POLLIN, 0}};
      int rc = ::poll(fds, 2, static_cast<int>(std::chrono::milliseconds(kBound).count()));
      if (rc <= 0) {
        ADD_FAILURE() << "bcs did not finish; stderr so far: " << r.err;
        return r;
      }
      for (int i = 0; i < 2; ++i) {
        if (!open[i] || !fds[i].revents) continue;
        char buf[4096];
        ssize_t n = ::read(i == 0 ? out_fd_ : err_fd_, buf, sizeof buf);
        if (n <= 0) open[i] = false;
        else (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
  }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
};

// Our children that are still alive or unreaped (pids from /proc).
std::vector<pid_t> children_of_us() {
  std::vector<pid_t> kids;
  DIR* d = ::opendir("/proc");
  if (!d) return kids;
  while (dirent* e = ::readdir(d)) {
    pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream f("/proc/" + std::string(e->d_name) + "/stat");
    std::string s((std::istreambuf_iterator<char>(f)), {});
    auto rp = s.rfind(')');
    if (rp == std::string::npos) continue;
    char state;
    int ppid;
    if (std::sscanf(s.c_str() + rp + 1, " %c %d", &state, &ppid) == 2 && ppid == ::getpid())
      kids.push_back(pid);
  }
  ::closedir(d);
  return kids;
}

// The manager's side of the proof of the token, as bcs-mm answers it.
class FakeAuth final : public pb::Auth::Service {
 public:
  std::string token = "sekrit";
  grpc::Status Prove(grpc::ServerContext* ctx, const pb::ProveRequest* req,
                     pb::ProveReply* rep) override {
    std::string why;
    auto p = bcs::answer_prove(token, req->nonce(), ctx->peer(), &why);
    if (!p) return {grpc::StatusCode::INVALID_ARGUMENT, why};
    rep->set_cookie(p->cookie);
    rep->set_seen(p->seen);
    rep->set_proof(p->proof);
    return grpc::Status::OK;
  }
};

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    exe_ = find_bcs();
    if (exe_.empty()) GTEST_SKIP() << "bcs executable not built next to the test";
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&jobs_);
    b.RegisterService(&auth_);
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
    ASSERT_GT(port_, 0);
    addr_ = "127.0.0.1:" + std::to_string(port_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + 5s);
  }
  std::vector<std::string> run_args(std::vector<std::string> tail) {
    std::vector<std::string> a{"run", "--manager", addr_};
    a.insert(a.end(), tail.begin(), tail.end());
    return a;
  }

  std::string exe_;
  FakeJobs jobs_;
  FakeAuth auth_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string addr_;
};

TEST_F(RunTest, ForwardsLabelledOutputAndExitStatus) {
  jobs_.events = {output(0, pb::STDOUT, "hel"), output(1, pb::STDOUT, "x\ny"),
                  output(0, pb::STDOUT, "lo\n"), output(1, pb::STDERR, "warn\n")};
  jobs_.exit.set_status(3);
  jobs_.exit.set_message("rank 1 (pid 1234 on node1) exited with status 3");
  Bcs b(exe_, run_args({"-n", "2", "-l", "prog", "-l", "--foo"}),
        {"BCS_TEST_MARKER=xyz", "BCS_TOKEN=sekrit"});
  Result r = b.finish();
  EXPECT_EQ(r.status, 3) << r.err;
  EXPECT_EQ(r.out, "[1] x\n[0] hello\n[1] y\n");
  EXPECT_NE(r.err.find("[1] warn\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bcs: rank 1 (pid 1234 on node1) exited with status 3\n"), std::string::npos)
      << r.err;

  std::lock_guard lk(jobs_.mu);
  ASSERT_TRUE(jobs_.launch);
  const auto& l = *jobs_.launch;
  EXPECT_EQ(l.program(), "prog");
  ASSERT_EQ(l.args_size(), 2);
  EXPECT_EQ(l.args(0), "-l");
  EXPECT_EQ(l.args(1), "--foo");
  EXPECT_EQ(l.nranks(), 2u);
  EXPECT_EQ(l.nodes(), 0u);  // --manager without --nodes: every node
  EXPECT_EQ(l.wait_nodes_ms(), 10000u);
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  EXPECT_EQ(l.cwd(), cwd);
  EXPECT_NE(std::find(l.env().begin(), l.env().end(), "BCS_TEST_MARKER=xyz"), l.env().end());
  // The token never travels: not in the ranks' environment, not as
  // metadata (plain TCP); the client proves it holds it instead.
  EXPECT_TRUE(jobs_.token.empty()) << jobs_.token;
  EXPECT_TRUE(bcs::proof_accepted("sekrit", jobs_.proof, jobs_.peer)) << jobs_.proof;
  for (const auto& e : l.env()) EXPECT_NE(e.rfind("BCS_TOKEN=", 0), 0u) << e;
}

// A "manager" that answers at the address but does not hold the token (a
// local user's fake one) gets no Launch: not the program, not the token.
TEST_F(RunTest, AManagerThatCannotProveTheTokenGetsNothing) {
  auth_.token = "not-the-clusters";
  Bcs b(exe_, run_args({"-n", "2", "prog"}), {"BCS_TOKEN=sekrit"});
  Result r = b.finish();
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("refusing the manager at " + addr_ +
                       ": it does not prove that it holds the cluster's token"),
            std::string::npos)
      << r.err;
  std::lock_guard lk(jobs_.mu);
  EXPECT_FALSE(jobs_.launch);
}

TEST_F(RunTest, UnlabelledOutputIsPassedThroughUnchanged) {
  jobs_.events = {output(0, pb::STDOUT, "ab"), output(1, pb::STDOUT, "c"),
                  output(0, pb::STDERR, "e")};
  jobs_.exit.set_status(0);
  Bcs b(exe_, run_args({"-n", "2", "--nodes", "5", "--slice", "2ms", "--chunk", "64KiB", "p"}));
  Result r = b.finish();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "abc");
  EXPECT_EQ(r.err, "e");
  std::lock_guard lk(jobs_.mu);
  EXPECT_EQ(jobs_.launch->nodes(), 2u);  // min(K, N)
  EXPECT_EQ(jobs_.launch->slice_ns(), 2'000'000u);
  EXPECT_EQ(jobs_.launch->chunk_bytes(), 65536u);
  EXPECT_TRUE(jobs_.token.empty());
}

TEST_F(RunTest, SendsEnvironmentSettingsAndHostsForTheManagerToCheck) {
  jobs_.exit.set_status(0);
  Bcs b(exe_,
        run_args({"--host", "b:2,a", "--env", "A=1", "-x", "BCS_TEST_X", "--env", "BCS_TEST_X=2",
                  "p"}),
        {"BCS_TEST_X=from bcs", "A=inherited"});
  Result r = b.finish();
  EXPECT_EQ(r.status, 0) << r.err;
  std::lock_guard lk(jobs_.mu);
  ASSERT_TRUE(jobs_.launch);
  const auto& l = *jobs_.launch;
  // The environment goes as it is, the settings apart (-x first): the
  // manager applies and checks them.
  EXPECT_NE(std::find(l.env().begin(), l.env().end(), "A=inherited"), l.env().end());
  EXPECT_EQ(std::vector<std::string>(l.env_set().begin(), l.env_set().end()),
            (std::vector<std::string>{"BCS_TEST_X=from bcs", "A=1", "BCS_TEST_X=2"}));
  ASSERT_EQ(l.hosts_size(), 2);
  EXPECT_EQ(l.hosts(0).name(), "b");
  EXPECT_EQ(l.hosts(0).slots(), 2u);
  EXPECT_EQ(l.hosts(1).name(), "a");
  EXPECT_EQ(l.hosts(1).slots(), 1u);
  EXPECT_EQ(l.nranks(), 3u);
  EXPECT_EQ(l.nodes(), 0u);
  EXPECT_EQ(l.ranks_per_node(), 0u);
}

TEST_F(RunTest, TimeoutKillsTheJobAndExits124) {
  jobs_.end = FakeJobs::End::kWaitForKill;
  Bcs b(exe_, run_args({"-n", "1", "--timeout", "50ms", "p"}));
  Result r = b.finish();
  EXPECT_EQ(r.status, 124) << r.err;
  // With what the manager said the job was doing.
  EXPECT_NE(r.err.find("bcs: job 7 timed out after 50ms: ranks still running: 0 (pid 42 on n1)\n"),
            std::string::npos)
      << r.err;
  std::lock_guard lk(jobs_.mu);
  EXPECT_EQ(jobs_.kill_job, 7u);
  EXPECT_EQ(jobs_.kill_reason.value_or(""), "timeout after 50ms");
  // This manager never said `started` and names no nodes (one from before
  // it): asked, it counted from Launch, as such a manager always did.
  EXPECT_GE(jobs_.list_calls, 1);
}

// On a busy cluster a job waits for free node managers first: --timeout
// counts from JobEvent.started, not from Launch. The job stays queued
// until bcs has asked twice (past --timeout after Launch each time), then
// starts; the kill comes only after that.
TEST_F(RunTest, TimeoutCountsFromWhenTheJobStartsNotWhileItIsQueued) {
  jobs_.end = FakeJobs::End::kWaitForKill;
  jobs_.list_state = "queued";
  jobs_.start_after_lists = 2;
  Bcs b(exe_, run_args({"-n", "1", "--timeout", "50ms", "p"}));
  Result r = b.finish();
  EXPECT_EQ(r.status, 124) << r.err;
  EXPECT_NE(r.err.find("bcs: job 7 timed out after 50ms"), std::string::npos) << r.err;
  std::lock_guard lk(jobs_.mu);
  EXPECT_TRUE(jobs_.started_sent);
  EXPECT_FALSE(jobs_.killed_before_started);
  EXPECT_EQ(jobs_.kill_reason.value_or(""), "timeout after 50ms");
  EXPECT_GE(jobs_.list_calls, 2);
}

// A job that says `started` at once is killed --timeout after it (had bcs
// asked List first, this manager names the job's nodes: it waits for
// `started` all the same).
TEST_F(RunTest, TimeoutArmedByStartedKillsTheJob) {
  pb::JobEvent started;
  started.mutable_started()->set_start_ns(5);
  started.mutable_started()->add_nodes("n1");
  jobs_.events = {started, output(0, pb::STDOUT, "up\n")};
  jobs_.end = FakeJobs::End::kWaitForKill;
  jobs_.list_state = "running";
  jobs_.list_nodes = {"n1"};  // a manager that says `started`
  Bcs b(exe_, run_args({"-n", "1", "--timeout", "50ms", "p"}));
  Result r = b.finish();
  EXPECT_EQ(r.status, 124) << r.err;
  EXPECT_EQ(r.out, "up\n");
  std::lock_guard lk(jobs_.mu);
  EXPECT_EQ(jobs_.kill_reason.value_or(""), "timeout after 50ms");
}

// A manager that lists the job running on its nodes but whose stream never
// says `started`: seen running on two checks, it is timed out all the same.
TEST_F(RunTest, AJobListedRunningWhoseStreamNeverSaysStartedStillTimesOut) {
  jobs_.end = FakeJobs::End::kWaitForKill;
  jobs_.list_state = "running";
  jobs_.list_nodes = {"n1"};
  Bcs b(exe_, run_args({"-n", "1", "--timeout", "50ms", "p"}));
  Result r = b.finish();
  EXPECT_EQ(r.status, 124) << r.err;
  std::lock_guard lk(jobs_.mu);
  EXPECT_EQ(jobs_.kill_reason.value_or(""), "timeout after 50ms");
  EXPECT_GE(jobs_.list_calls, 2);
}

TEST_F(RunTest, HelpSaysTheTimeoutCountsFromTheStart) {
  Result r = Bcs(exe_, {"run", "--help"}).finish();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("counts from when the job starts"), std::string::npos) << r.out;
}

class RunSignalTest : public RunTest, public ::testing::WithParamInterface<int> {};

TEST_P(RunSignalTest, SignalKillsTheJob) {
  jobs_.end = FakeJobs::End::kWaitForKill;
  Bcs b(exe_, run_args({"-n", "1", "p"}));
  ASSERT_TRUE(jobs_.wait_attached());
  ::kill(b.pid(), GetParam());
  Result r = b.finish();
  EXPECT_EQ(r.status, 128 + GetParam()) << r.err;
  std::lock_guard lk(jobs_.mu);
  EXPECT_EQ(jobs_.kill_reason.value_or(""), "interrupted");
}

INSTANTIATE_TEST_SUITE_P(IntTerm, RunSignalTest, ::testing::Values(SIGINT, SIGTERM));

TEST_F(RunTest, LostManagerIsReported) {
  jobs_.events = {output(0, pb::STDOUT, "partial")};
  jobs_.end = FakeJobs::End::kBreak;
  Bcs b(exe_, run_args({"-n", "1", "p"}));
  Result r = b.finish();
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "partial");
  EXPECT_NE(r.err.find("bcs: lost the machine manager: UNAVAILABLE: boom"), std::string::npos)
      << r.err;
}

TEST_F(RunTest, LaunchRefusalIsReported) {
  jobs_.launch_status = {grpc::StatusCode::FAILED_PRECONDITION,
                         "only 0 of 2 node managers registered within 10000 ms"};
  Bcs b(exe_, run_args({"-n", "2", "--nodes", "2", "p"}));
  Result r = b.finish();
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("only 0 of 2 node managers registered"), std::string::npos) << r.err;
}

TEST_F(RunTest, JobsAndKill) {
  jobs_.list_nodes = {"n1", "n2"};
  jobs_.list_slices = 4321;
  Result r = Bcs(exe_, {"jobs", "--manager", addr_}).finish();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("a.out"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("running"), std::string::npos) << r.out;
  // SLICES and NODES, then the gang matrix's ROW, QUANTA and SHARE, the
  // switch costs and the ranks' CPU time, after the columns that were
  // there before them.
  EXPECT_NE(r.out.find("PROGRAM  SLICES  NODES  ROW  QUANTA  SHARE  SW_P50_US  SW_P99_US  CPU_S\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  a.out  4321  n1,n2  0  0  0.00  -  -  0.000\n"), std::string::npos) << r.out;
  r = Bcs(exe_, {"kill", "9", "--manager", addr_}).finish();
  EXPECT_EQ(r.status, 0) << r.err;
  // With what the manager said the job was doing.
  EXPECT_EQ(r.out, "job 9: ranks still running: 0 (pid 42 on n1)\n");
  std::lock_guard lk(jobs_.mu);
  EXPECT_EQ(jobs_.kill_job, 9u);
}

TEST_F(RunTest, UnreachableManagerIsAClearError) {
  // Port 1 on loopback: nothing listens there.
  Result r = Bcs(exe_, {"run", "--manager", "127.0.0.1:1", "-n", "1", "p"}).finish();
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("bcs: cannot launch the job on the machine manager at 127.0.0.1:1"),
            std::string::npos)
      << r.err;
  r = Bcs(exe_, {"jobs", "--manager", "127.0.0.1:1"}).finish();
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("127.0.0.1:1"), std::string::npos) << r.err;
}

// Embedded mode with fake daemons: the fake bcs-mm reports the port of the
// in-process fake manager. Afterwards no daemon may be left: this process is
// made a child subreaper, so anything bcs leaked would show up as our child.
class EmbeddedTest : public RunTest {
 protected:
  void SetUp() override {
    RunTest::SetUp();
    if (IsSkipped()) return;
    char tmpl[] = "/tmp/bcs-cli-run-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ / "mm") << "#!/bin/bash\n"
                                  "while [ $# -gt 0 ]; do case \"$1\" in --ready-fd) fd=$2; shift;; esac; shift; done\n"
                                  "echo \"$FAKE_PORT\" >&$fd\n"
                                  "eval \"exec $fd>&-\"\n"
                                  "exec sleep 1000\n";
    std::ofstream(dir_ / "nm") << "#!/bin/bash\nexec sleep 1000\n";
    fs::permissions(dir_ / "mm", fs::perms::owner_all);
    fs::permissions(dir_ / "nm", fs::perms::owner_all);
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  }
  void TearDown() override {
    ::prctl(PR_SET_CHILD_SUBREAPER, 0);
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
    RunTest::TearDown();
  }
  std::vector<std::string> env() {
    return {"BCS_MM_PATH=" + (dir_ / "mm").string(), "BCS_NM_PATH=" + (dir_ / "nm").string(),
            "FAKE_PORT=" + std::to_string(port_)};
  }
  void expect_nothing_left() {
    auto kids = children_of_us();
    EXPECT_TRUE(kids.empty()) << "left behind: " << testing::PrintToString(kids);
    for (pid_t k : kids) {  // clean up after a failure
      ::kill(k, SIGKILL);
      ::waitpid(k, nullptr, 0);
    }
  }
  fs::path dir_;
};

TEST_F(EmbeddedTest, RunsOnAPrivateClusterAndTearsItDown) {
  jobs_.events = {output(0, pb::STDOUT, "hi\n")};
  jobs_.exit.set_status(5);
  Result r = Bcs(exe_, {"run", "-v", "-n", "3", "--nodes", "2", "p"}, env()).finish();
  EXPECT_EQ(r.status, 5) << r.err;
  EXPECT_EQ(r.out, "hi\n");
  EXPECT_NE(r.err.find("started bcs-nm node2"), std::string::npos) << r.err;
  {
    std::lock_guard lk(jobs_.mu);
    ASSERT_TRUE(jobs_.launch);
    EXPECT_EQ(jobs_.launch->nodes(), 2u);
  }
  expect_nothing_left();
}

TEST_F(EmbeddedTest, HostsBecomeNodeManagersNamedAfterThem) {
  jobs_.exit.set_status(0);
  // 3 ranks on x:2,y:2,z: only x and y get ranks, so only they are started.
  Result r = Bcs(exe_, {"run", "-v", "-n", "3", "--host", "x:2,y:2,z", "p"}, env()).finish();
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("started bcs-nm x "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("started bcs-nm y "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("started bcs-nm z "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("started bcs-nm node"), std::string::npos) << r.err;
  expect_nothing_left();
}

TEST_F(EmbeddedTest, TimeoutTearsDownToo) {
  jobs_.end = FakeJobs::End::kWaitForKill;
  Result r = Bcs(exe_, {"run", "-n", "1", "--timeout", "10ms", "p"}, env()).finish();
  EXPECT_EQ(r.status, 124) << r.err;
  expect_nothing_left();
}

TEST_F(EmbeddedTest, FailedLaunchTearsDownToo) {
  Result r = Bcs(exe_, {"run", "-n", "1", "p"},
                 {"BCS_MM_PATH=" + (dir_ / "mm").string(), "BCS_NM_PATH=" + (dir_ / "nm").string(),
                  "FAKE_PORT=1"})
                 .finish();
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cannot launch the job"), std::string::npos) << r.err;
  expect_nothing_left();
}

TEST_F(EmbeddedTest, MissingDaemonIsAClearError) {
  Result r = Bcs(exe_, {"run", "-n", "1", "p"}, {"BCS_MM_PATH=" + (dir_ / "none").string()}).finish();
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("bcs: cannot start the private cluster"), std::string::npos) << r.err;
  expect_nothing_left();
}

}  // namespace
