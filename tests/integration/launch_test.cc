// Integration stories for what a launch asks of the machine manager: the
// ranks' environment (`--env`, `-x`) and hosts (`--host`, `--hostfile`)
// mapped onto node managers by name. The manager trusts no client: a request
// made directly over gRPC (not through `bcs`, which checks the same things
// first) with a bad environment or host list is refused with a reason.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bcs.grpc.pb.h"
#include "harness.h"
#include "story.h"

using namespace std::chrono_literals;
using bcs::test::bcs_run;
using bcs::test::bin;
using bcs::test::describe;
using testing::HasSubstr;

namespace {

namespace pb = bcs::v1;
using LaunchStory = bcs::test::Story;

// Prints "R NODE VALUE" for every rank: where it runs, and what it sees of
// the variable BCS_TEST_VAR.
const std::vector<std::string> kWhere{"/bin/sh", "-c",
                                      "echo \"$BCS_RANK $BCS_NODE ${BCS_TEST_VAR-unset}\""};

std::vector<std::string> args(std::vector<std::string> head) {
  head.insert(head.end(), kWhere.begin(), kWhere.end());
  return head;
}

// A machine manager of our own, with `names` node managers registered.
class Cluster {
 public:
  explicit Cluster(const std::vector<std::string>& names) {
    mm_ = std::make_unique<bcs::test::Background>(
        std::vector<std::string>{bin("bcs-mm"), "--listen", "127.0.0.1:0", "--ready-fd", "3"});
    const std::string port = mm_->ready_line(30s);
    EXPECT_FALSE(port.empty()) << "bcs-mm did not come up";
    addr_ = "127.0.0.1:" + port;
    for (const auto& n : names)
      nms_.push_back(std::make_unique<bcs::test::Background>(
          std::vector<std::string>{bin("bcs-nm"), "--manager", addr_, "--name", n}));
  }
  ~Cluster() {
    for (auto& n : nms_) EXPECT_EQ(n->stop(), 0);
    EXPECT_EQ(mm_->stop(), 0);
  }
  const std::string& addr() const { return addr_; }

  // Launch made directly, as any gRPC client could.
  grpc::Status launch(const pb::LaunchRequest& req) {
    auto stub = pb::Jobs::NewStub(grpc::CreateChannel(addr_, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    pb::LaunchReply rep;
    return stub->Launch(&ctx, req, &rep);
  }

 private:
  std::unique_ptr<bcs::test::Background> mm_;
  std::vector<std::unique_ptr<bcs::test::Background>> nms_;
  std::string addr_;
};

pb::LaunchRequest request() {
  pb::LaunchRequest req;
  req.set_program("/bin/true");
  req.set_nranks(1);
  req.add_env("PATH=/usr/bin:/bin");
  req.set_wait_nodes_ms(1);  // a refusal must not depend on waiting
  return req;
}

}  // namespace

TEST_F(LaunchStory, EnvironmentSettingsReachEveryRankAndOverrideInOrder) {
  // BCS_TEST_VAR is inherited, replaced by -x NAME=VALUE, then by --env.
  auto r = bcs_run(args({"-n", "3", "--nodes", "2", "-x", "BCS_TEST_VAR=x", "--env",
                         "BCS_TEST_VAR=from --env"}),
                   60s, {{"BCS_TEST_VAR", "inherited"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  // Cyclic placement: ranks 0 and 2 on one node manager, 1 on the other
  // (which one registered first varies).
  int zero_found = 0;
  for (const char* node : {"node1", "node2"}) {
    const std::string n(node), other(n == "node1" ? "node2" : "node1");
    if (r.out.find("0 " + n + " from --env\n") == std::string::npos) continue;
    ++zero_found;
    EXPECT_THAT(r.out, HasSubstr("1 " + other + " from --env\n")) << describe(r);
    EXPECT_THAT(r.out, HasSubstr("2 " + n + " from --env\n")) << describe(r);
  }
  EXPECT_EQ(zero_found, 1) << describe(r);
  r = bcs_run(args({"-n", "1"}), 60s, {{"BCS_TEST_VAR", "inherited"}});
  EXPECT_THAT(r.out, HasSubstr("0 node1 inherited")) << describe(r);
  expect_nothing_left_now();
}

// Ranks are bound to CPUs of their own (the k-th local rank to the k-th CPU
// the node manager may use) when a node's ranks do not outnumber those
// CPUs, as Open MPI does; left alone otherwise; `--bind-to core|none` says
// so outright. Each rank prints the CPUs the kernel lets it run on.
namespace {
std::vector<int> cpu_list(const std::string& text) {  // "0-2,5" -> {0, 1, 2, 5}
  std::vector<int> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    int a = -1, b = -1;
    if (std::sscanf(part.c_str(), "%d-%d", &a, &b) == 2)
      for (int c = a; c <= b; ++c) out.push_back(c);
    else if (std::sscanf(part.c_str(), "%d", &a) == 1)
      out.push_back(a);
  }
  return out;
}
// Rank -> the CPUs it may run on, from the ranks' output.
std::map<int, std::vector<int>> rank_cpus_of(const std::string& out) {
  std::map<int, std::vector<int>> m;
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line)) {
    int rank = -1;
    char list[256] = {};
    if (std::sscanf(line.c_str(), "cpus %d %255s", &rank, list) == 2) m[rank] = cpu_list(list);
  }
  return m;
}
}  // namespace

TEST_F(LaunchStory, RanksAreBoundToCPUsOfTheirOwnUnlessTheyOutnumberThem) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  std::vector<int> mine;  // the node manager's, which it inherits from us
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) mine.push_back(c);
  const int ncpus = static_cast<int>(mine.size());
  const std::vector<std::string> where{
      "/bin/sh", "-c", "echo \"cpus $BCS_RANK $(grep Cpus_allowed_list /proc/$$/status | cut -f2)\""};
  auto run_with = [&](int n, std::vector<std::string> opts) {
    opts.insert(opts.begin(), {"-n", std::to_string(n)});
    opts.insert(opts.end(), where.begin(), where.end());
    auto r = bcs_run(opts, 60s);
    EXPECT_EQ(r.status, 0) << describe(r);
    auto m = rank_cpus_of(r.out);
    EXPECT_EQ(m.size(), static_cast<size_t>(n)) << describe(r);
    return m;
  };
  // As many ranks as CPUs: bound by default,
  // each to a CPU of its own; --bind-to none leaves them all.
  const int fit = std::max(ncpus, 1);
  for (auto& [rank, cpus] : run_with(fit, {}))
    EXPECT_EQ(cpus, std::vector<int>{mine[static_cast<size_t>(rank % ncpus)]}) << "rank " << rank;
  for (auto& [rank, cpus] : run_with(fit, {"--bind-to", "none"}))
    EXPECT_EQ(cpus, mine) << "rank " << rank;
  // Two node managers of this host count each other's ranks.
  if (fit >= 2) {
    for (auto& [rank, cpus] : run_with(fit, {"--nodes", "2"})) {
      EXPECT_EQ(cpus, std::vector<int>{mine[static_cast<size_t>(rank % ncpus)]}) << "rank " << rank;
    }
  }
  // One rank more than CPUs: left alone by default, bound round-robin when
  // asked.
  for (auto& [rank, cpus] : run_with(ncpus + 1, {}))
    EXPECT_EQ(cpus, mine) << "rank " << rank;
  for (auto& [rank, cpus] : run_with(ncpus + 1, {"--bind-to", "core"}))
    EXPECT_EQ(cpus, std::vector<int>{mine[static_cast<size_t>(rank % ncpus)]}) << "rank " << rank;
  expect_nothing_left_now();
}

TEST_F(LaunchStory, RanksStartedThroughAWrapperThatForksStillMoveLargeMessages) {
  // `bcs run time ./prog`, `bcs run strace ./prog`, a script that runs the
  // program without exec: the process in MPI is a child of the one the
  // node manager started. Its messages are in that child's memory, which
  // the node managers and the ranks (single copy, on one node manager and
  // across two of this host) copy from and into. Sizes: inline, copied by
  // the node, read by the receiving rank, over several slices.
  const std::string wrapped = bin("prog_pingpong") + " 1K 64K 256K 4M; exit $?";
  for (const char* nodes : {"1", "2"}) {
    auto r = bcs_run({"-n", "2", "--nodes", nodes, "/bin/sh", "-c", wrapped}, 120s);
    EXPECT_EQ(r.status, 0) << "--nodes " << nodes << ": " << describe(r);
    EXPECT_THAT(r.out, HasSubstr("pingpong ok")) << describe(r);
  }
  expect_nothing_left_now();
}

TEST_F(LaunchStory, Rank0ReadsWhatIsPipedIntoBcsRun) {
  // As with mpiexec: `producer | bcs run ...` and `bcs run ... < file`
  // feed rank 0's stdin; the other ranks read nothing.
  const std::string bcs = bin("bcs") + " run --timeout 60s";
  auto sh = [](const std::string& line) { return bcs::test::run({"/bin/sh", "-c", line}, 90s); };
  auto r = sh("printf 'hello\\n' | " + bcs + " -n 2 sh -c 'read x; echo \"$BCS_RANK [$x]\"'");
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("0 [hello]")) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("1 []")) << describe(r);
  // 8 MiB, more than the manager lets wait for rank 0 (kInputWindow), with
  // 3 ranks on 2 node managers: held back while rank 0 does not read,
  // nothing lost or reordered (the checksums agree).
  auto big = sh("f=$(mktemp) && head -c 8388608 /dev/urandom > $f && cksum < $f && " + bcs +
                " -n 3 --nodes 2 sh -c 'if [ $BCS_RANK = 0 ]; then cksum; fi' < $f;"
                " rc=$?; rm -f $f; exit $rc");
  ASSERT_EQ(big.status, 0) << describe(big);
  const auto nl = big.out.find('\n');
  ASSERT_NE(nl, std::string::npos) << describe(big);
  EXPECT_NE(big.out.find(big.out.substr(0, nl), nl), std::string::npos)
      << "rank 0 read another stream: " << describe(big);
  // A rank 0 that never reads: the job still ends (its input is dropped).
  auto unread = sh("head -c 8388608 /dev/zero | " + bcs + " -n 2 true");
  EXPECT_EQ(unread.status, 0) << describe(unread);
  // --stdin none: /dev/null for everybody.
  auto none = sh("echo hello | " + bcs + " --stdin none -n 1 sh -c 'read x; echo \"[$x]\"'");
  EXPECT_EQ(none.status, 0) << describe(none);
  EXPECT_THAT(none.out, HasSubstr("[]")) << describe(none);
  expect_nothing_left_now();
}

TEST_F(LaunchStory, RanksDoNotInheritTheNodeManagersIgnoredSigpipe) {
  // The node manager ignores SIGPIPE, and execve keeps an ignored signal
  // ignored: a rank writing into a closed pipe would get EPIPE instead of
  // dying as it would under any other launcher. SigIgn is a hex mask;
  // SIGPIPE (13) is bit 12.
  auto r = bcs_run({"-n", "1", "/bin/sh", "-c", "grep SigIgn /proc/self/status"}, 60s);
  ASSERT_EQ(r.status, 0) << describe(r);
  const auto at = r.out.find("SigIgn:");
  ASSERT_NE(at, std::string::npos) << describe(r);
  const unsigned long long mask = std::stoull(r.out.substr(at + 7), nullptr, 16);
  EXPECT_EQ(mask & (1ull << (SIGPIPE - 1)), 0u) << describe(r);
  expect_nothing_left_now();
}

TEST_F(LaunchStory, AnOversizedEnvironmentIsRefusedByTheManager) {
  // 10 x 110 KiB: bcs itself starts (execve allows 2 MiB), the manager
  // refuses more than 1 MiB for the ranks, with the reason.
  std::map<std::string, std::string> env;
  for (int i = 0; i < 10; ++i) env["BCS_TEST_BIG" + std::to_string(i)] = std::string(110 * 1024, 'x');
  auto r = bcs_run(args({"-n", "1"}), 60s, env);
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("the environment is larger than 1 MiB")) << describe(r);
  expect_nothing_left_now();
}

TEST_F(LaunchStory, HostsMapOntoNodeManagersNamedAfterThem) {
  // Embedded: one node manager per host that gets a rank, named after it;
  // the ranks fill the slots host by host and wrap around.
  auto r = bcs_run(args({"-n", "5", "--host", "alpha:2,beta", "--host", "gamma"}));
  ASSERT_EQ(r.status, 0) << describe(r);
  for (const char* line : {"0 alpha", "1 alpha", "2 beta", "3 gamma", "4 alpha"})
    EXPECT_THAT(r.out, HasSubstr(line)) << describe(r);
  expect_nothing_left_now();

  const std::string file = testing::TempDir() + "bcs_hosts_" + std::to_string(getpid());
  std::ofstream(file) << "# two hosts\nb slots=1\na slots=2 max_slots=4\n";
  r = bcs_run(args({"--hostfile", file}));  // -n: the 3 slots
  std::remove(file.c_str());
  ASSERT_EQ(r.status, 0) << describe(r);
  for (const char* line : {"0 b", "1 a", "2 a"}) EXPECT_THAT(r.out, HasSubstr(line)) << describe(r);
  EXPECT_THAT(r.out, testing::Not(HasSubstr("3 "))) << describe(r);
  expect_nothing_left_now();
}

TEST_F(LaunchStory, HostsSelectRegisteredNodeManagersByName) {
  Cluster c({"a", "b"});
  // Host order, not registration order: rank 0 on b.
  auto r = bcs_run(args({"--manager", c.addr(), "-n", "3", "--host", "b,a"}));
  ASSERT_EQ(r.status, 0) << describe(r);
  for (const char* line : {"0 b", "1 a", "2 b"}) EXPECT_THAT(r.out, HasSubstr(line)) << describe(r);
  // Only used hosts must exist: "nope" gets no rank of 2 on a:2.
  r = bcs_run(args({"--manager", c.addr(), "-n", "2", "--host", "a:2,nope"}));
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("1 a")) << describe(r);
  // A host no node manager is called: named in the error, with the known ones.
  r = bcs_run(args({"--manager", c.addr(), "-n", "2", "--host", "a,nope"}));
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("no node manager named 'nope' is registered (registered: a, b)"))
      << describe(r);
}

TEST_F(LaunchStory, TwoNodeManagersOfOneNameAreNotGuessedBetween) {
  Cluster c({"twin", "twin"});
  // Both registered and ready: a 2-node job runs on them.
  auto r = bcs_run(args({"--manager", c.addr(), "-n", "2", "--nodes", "2"}));
  ASSERT_EQ(r.status, 0) << describe(r);
  r = bcs_run(args({"--manager", c.addr(), "-n", "2", "--host", "twin"}));
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("two node managers are named 'twin'")) << describe(r);
}

TEST_F(LaunchStory, TheManagerRefusesBadRequestsFromAnyClient) {
  Cluster c(std::vector<std::string>{});
  struct Case {
    const char* what;
    std::function<void(pb::LaunchRequest&)> edit;
    const char* says;
  };
  const std::vector<Case> cases{
      {"runtime variable", [](auto& q) { q.add_env_set("BCS_RANK=7"); }, "set by bcs itself"},
      {"segment variable", [](auto& q) { q.add_env_set("BCS_SEGMENT_FD=0"); }, "set by bcs itself"},
      {"bad name", [](auto& q) { q.add_env_set("1A=1"); }, "valid variable name"},
      {"no value", [](auto& q) { q.add_env_set("A"); }, "NAME=VALUE"},
      {"inherited without '='", [](auto& q) { q.add_env("NOEQUALS"); }, "not NAME=VALUE"},
      {"NUL byte", [](auto& q) { q.add_env(std::string("A=x\0y", 5)); }, "NUL"},
      {"long entry",
       [](auto& q) { q.add_env("A=" + std::string(200 * 1024, 'x')); }, "longer than 128 KiB"},
      {"too large",
       [](auto& q) {
         for (int i = 0; i < 12; ++i) q.add_env("A" + std::to_string(i) + "=" + std::string(100000, 'x'));
       },
       "larger than 1 MiB"},
      {"host name",
       [](auto& q) {
         auto* h = q.add_hosts();
         h->set_name("a b");
         h->set_slots(1);
       },
       "not a valid host name"},
      {"zero slots",
       [](auto& q) {
         auto* h = q.add_hosts();
         h->set_name("a");
         h->set_slots(0);
       },
       "0 slots"},
      {"host twice",
       [](auto& q) {
         for (int i = 0; i < 2; ++i) {
           auto* h = q.add_hosts();
           h->set_name("a");
           h->set_slots(1);
         }
       },
       "listed twice"},
      {"hosts and nodes",
       [](auto& q) {
         auto* h = q.add_hosts();
         h->set_name("a");
         h->set_slots(1);
         q.set_nodes(2);
       },
       "cannot be combined"},
  };
  for (const auto& k : cases) {
    pb::LaunchRequest req = request();
    k.edit(req);
    const grpc::Status st = c.launch(req);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << k.what << ": " << st.error_message();
    EXPECT_THAT(st.error_message(), HasSubstr(k.says)) << k.what;
  }
}
