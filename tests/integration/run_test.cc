// Integration tests: real `bcs run` jobs on the embedded default (a private
// machine manager and K node managers on this host, talking UCX), running
// real MPI programs from tests/programs. Each story checks what a user sees
// (output, exit status, the message naming a failed rank) and that nothing
// is left behind (processes, /dev/shm entries).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <set>

#include "harness.h"
#include "story.h"
#include "two_hosts.h"

using namespace std::chrono_literals;
using bcs::test::bcs_run;
using bcs::test::prog;
using bcs::test::describe;
using bcs::test::RunResult;
using testing::HasSubstr;

namespace {


// Every test: no process of ours survives the command, no /dev/shm entry appears.
using bcs::test::Story;

// Parameter: the number of node managers.
class OnNodes : public Story, public testing::WithParamInterface<int> {
 protected:
  std::vector<std::string> with_nodes(int n, std::vector<std::string> rest) {
    std::vector<std::string> a{"-n", std::to_string(n), "--nodes", std::to_string(GetParam())};
    a.insert(a.end(), rest.begin(), rest.end());
    return a;
  }
  // Runs a test program on n ranks; it must exit 0 and print `ok_line`.
  void expect_passes(int n, const std::string& program, const std::string& ok_line) {
    auto r = bcs_run(with_nodes(n, {prog(program)}));
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_THAT(r.out, HasSubstr(ok_line));
  }
};

}  // namespace

TEST_P(OnNodes, TokenTravelsAroundTheRing) {
  auto r = bcs_run(with_nodes(4, {prog("prog_ring")}));
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("ring ok"));
  expect_nothing_left_now();
}

TEST_P(OnNodes, PingPongFromZeroBytesTo16MiBArrivesIntact) {
  expect_passes(2, "prog_pingpong", "pingpong ok");
}

TEST_P(OnNodes, AnySourceFanInReceivesEverySenderInOrder) {
  expect_passes(4, "prog_fanin", "fanin ok");
}

TEST_P(OnNodes, ProbeThenReceiveGetsTheProbedMessage) {
  expect_passes(3, "prog_probe", "probe ok");
}

TEST_P(OnNodes, TruncationIsReportedAsMpiErrTruncate) {
  expect_passes(2, "prog_truncate", "truncate ok");
}

TEST_P(OnNodes, SynchronousSendsCompleteOnlyOnceMatched) {
  expect_passes(2, "prog_ssend", "ssend ok");
}

TEST_P(OnNodes, NonBlockingCallsAndBarriersWork) {
  expect_passes(4, "prog_nonblocking", "nonblocking ok");
  expect_passes(4, "prog_barrier", "barrier ok");
  expect_passes(4, "prog_sendrecv", "sendrecv ok");
}

TEST_P(OnNodes, ARankExitingWithThreeEndsTheJobWithThree) {
  // Rank 1 exits 3 right after MPI_Init while the others wait for it.
  auto r = bcs_run(with_nodes(4, {prog("prog_exit"), "1", "3"}));
  EXPECT_EQ(r.status, 3) << describe(r);
  EXPECT_FALSE(r.timed_out);
  EXPECT_THAT(r.err, HasSubstr("rank 1"));
  EXPECT_THAT(r.err, HasSubstr("exited with status 3"));
  expect_nothing_left_now();
}

TEST_P(OnNodes, ARankKilledBySigkillEndsTheJobAndIsNamed) {
  auto r = bcs_run(with_nodes(4, {prog("prog_kill"), "2"}));
  EXPECT_EQ(r.status, 128 + SIGKILL) << describe(r);
  EXPECT_FALSE(r.timed_out);
  EXPECT_THAT(r.err, HasSubstr("rank 2"));
  EXPECT_THAT(r.err, HasSubstr("signal 9"));
  expect_nothing_left_now();
}

INSTANTIATE_TEST_SUITE_P(NodeManagers, OnNodes, testing::Values(1, 2, 4),
                         [](const auto& info) { return std::to_string(info.param) + "nm"; });

// ---------------------------------------------------------------------------
TEST_F(Story, TheNetworkPathAloneCarriesAPingPong) {
  // Force UCX between the node managers onto TCP (as between real hosts).
  auto r = bcs_run({"-n", "2", "--nodes", "2", prog("prog_pingpong")}, 90s, {{"UCX_TLS", "tcp"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("pingpong ok"));
}

TEST_F(Story, EnvOptionsReachEveryRankOnEveryNode) {
  // --env sets a variable for the ranks only; -x asserts one is passed.
  auto r = bcs_run({"-n", "3", "--nodes", "2", "-l", "--env", "BCS_TEST_GREETING=hello there",
                    "-x", "BCS_TEST_FROM_CLI", "/bin/sh", "-c",
                    "echo \"$BCS_TEST_GREETING/$BCS_TEST_FROM_CLI\""},
                   60s, {{"BCS_TEST_FROM_CLI", "cli"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  for (int i = 0; i < 3; ++i)
    EXPECT_THAT(r.out, HasSubstr("[" + std::to_string(i) + "] hello there/cli")) << describe(r);
  expect_nothing_left_now();
}

TEST_F(Story, MpiAbortEndsTheJobWithItsCodeAndNamesTheRank) {
  auto r = bcs_run({"-n", "3", "--nodes", "2", prog("prog_abort")});
  EXPECT_EQ(r.status, 7) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("MPI_Abort"));
  expect_nothing_left_now();
}

TEST_F(Story, AFatalMpiErrorNamesTheRankAndTheCall) {
  auto r = bcs_run({"-n", "2", prog("prog_truncate"), "fatal"});
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("MPI_Recv"));
  EXPECT_THAT(r.err, HasSubstr("MPI_ERR_TRUNCATE"));
  EXPECT_THAT(r.err, HasSubstr("rank 1"));
}

TEST_F(Story, AnOutsideSigkillOfABlockedRankEndsTheJob) {
  // Every rank of prog_block announces its pid, then waits forever in
  // MPI_Recv. Kill rank 1 by that pid from outside, as an OOM killer would.
  bool killed = false;
  auto r = bcs_run({"-n", "2", "--nodes", "2", bcs::test::blocker()}, 60s, {},
                   [&](const std::string& out) {
                     if (!killed) killed = bcs::test::kill_announced_rank(out, 1, SIGKILL);
                   });
  EXPECT_TRUE(killed);
  EXPECT_EQ(r.status, 128 + SIGKILL) << describe(r);
  EXPECT_FALSE(r.timed_out);
  EXPECT_THAT(r.err, HasSubstr("rank 1"));
  EXPECT_THAT(r.err, HasSubstr("signal 9"));
  expect_nothing_left_now();
}

// Blame is exact: a rank killed in the middle of a ring is named every
// time, never a rank that only noticed it was gone (rank 0's send to rank 1
// fails and its error handler ends the job, often before rank 1's death is
// reported from the other node).
TEST_F(Story, TheKilledRankIsNamedEveryTimeNeverARankThatNoticedIt) {
  for (int run = 0; run < 20; ++run) {
    bool killed = false;
    auto r = bcs_run({"-n", "3", "--nodes", "2", prog("prog_ring"), "100000000", "announce"}, 60s,
                     {}, [&](const std::string& out) {
                       if (!killed && out.find("ring started") != std::string::npos)
                         killed = bcs::test::kill_announced_rank(out, 1, SIGKILL);
                     });
    ASSERT_TRUE(killed) << "run " << run << ": " << describe(r);
    EXPECT_EQ(r.status, 128 + SIGKILL) << "run " << run << ": " << describe(r);
    EXPECT_THAT(r.err, HasSubstr("rank 1 (")) << "run " << run << ": " << describe(r);
    EXPECT_THAT(r.err, HasSubstr("was killed by signal 9")) << "run " << run << ": " << describe(r);
    EXPECT_THAT(r.err, testing::Not(HasSubstr("called MPI_Abort"))) << "run " << run;
    EXPECT_THAT(r.err, testing::Not(HasSubstr("lost contact"))) << "run " << run;
    expect_nothing_left_now();
  }
}

TEST_F(Story, LabelsPrefixEveryLineWithTheRank) {
  auto r = bcs_run({"-n", "3", "-l", "/bin/echo", "hi"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("[0] hi\n"));
  EXPECT_THAT(r.out, HasSubstr("[1] hi\n"));
  EXPECT_THAT(r.out, HasSubstr("[2] hi\n"));
}

// The manager drops output as soon as the client has it (it used to keep a
// running job's whole output): 2 x 40 MB through it, every byte arrives.
// Then a client that reads nothing for 3 s: the node managers stop reading
// the ranks' pipes once the manager holds 8 MiB (the ranks block in write)
// and resume when the client catches up; 2 x 100 MB arrive, none dropped.
TEST_F(Story, LargeOutputArrivesWholeAndIsNotKeptByTheManager) {
  auto r = bcs_run({"-n", "2", "/bin/sh", "-c", "head -c 40000000 /dev/zero | tr '\\0' x"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.size(), 80000000u);
  EXPECT_EQ(r.out.find_first_not_of('x'), std::string::npos);
  const std::string job = bcs::test::bin("bcs") +
                          " run --timeout 120s -n 2 /bin/sh -c "
                          "\"head -c 100000000 /dev/zero | tr '\\\\0' x\" | (sleep 3; wc -c)";
  auto slow = bcs::test::run({"/bin/sh", "-c", job}, 180s);
  ASSERT_EQ(slow.status, 0) << slow.err;
  EXPECT_EQ(slow.out, "200000000\n");
  EXPECT_THAT(slow.err, testing::Not(HasSubstr("dropped")));
  expect_nothing_left_now();
}

TEST_F(Story, AMissingProgramIsAClearError) {
  auto r = bcs_run({"-n", "2", "./does-not-exist-anywhere"});
  EXPECT_EQ(r.status, 127) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("does-not-exist-anywhere"));
}

TEST_F(Story, ATimeoutEndsAHungJobAndLeavesNothing) {
  // Both ranks wait for a message from a rank that never sends.
  std::vector<std::string> argv{bcs::test::bin("bcs"), "run", "--timeout", "2s", "-n", "2",
                                bcs::test::blocker()};
  auto r = bcs::test::run(argv, 60s);
  EXPECT_EQ(r.status, 124) << describe(r);
  EXPECT_FALSE(r.timed_out);
  // It says what the job was doing: both ranks still there, waiting in
  // MPI, while the strobe ran on (a deadlock in the program, not a
  // runtime that stopped).
  EXPECT_THAT(r.err, HasSubstr("timed out after 2s: ranks still running: 0 (pid ")) << r.err;
  EXPECT_THAT(r.err, HasSubstr("), 1 (pid ")) << r.err;
  EXPECT_THAT(r.err, testing::ContainsRegex(" slices, the last [0-9.]+ m?s ago")) << r.err;
  EXPECT_THAT(r.err, HasSubstr("every rank waited in MPI")) << r.err;
  expect_nothing_left_now();
}

// What a hung job's report shows of the daemons (Standing::run appends it
// after a timeout): every thread by name, its state and scheduling, and,
// where gdb is installed, its stack.
TEST_F(Story, AHungJobsReportSaysWhatEveryDaemonThreadWasDoing) {
  bcs::test::Background mm(
      {bcs::test::bin("bcs-mm"), "--listen", "127.0.0.1:0", "--ready-fd", "3"});
  ASSERT_FALSE(mm.ready_line(30s).empty()) << "bcs-mm did not come up";
  const std::string t = bcs::test::threads_of({mm.pid()});
  EXPECT_THAT(t, HasSubstr("process " + std::to_string(mm.pid()) + " (bcs-mm)")) << t;
  // The strobe sender, asleep until a job comes.
  EXPECT_THAT(t, testing::ContainsRegex("[0-9]+ bcs-ss state S policy [0-9]+ rt_prio [0-9]+ wchan "))
      << t;
  if (access("/usr/bin/gdb", X_OK) == 0) {
    EXPECT_THAT(t, HasSubstr("#0 ")) << t;
  }
  EXPECT_EQ(mm.stop(), 0);
  EXPECT_THAT(bcs::test::threads_of({mm.pid()}), HasSubstr("gone"));
}

TEST_F(Story, ARunningClusterTakesJobsOneAfterAnother) {
  bcs::test::Background mm(
      {bcs::test::bin("bcs-mm"), "--listen", "127.0.0.1:0", "--ready-fd", "3"});
  std::string port = mm.ready_line(30s);
  ASSERT_FALSE(port.empty()) << "bcs-mm did not come up";
  const std::string addr = "127.0.0.1:" + port;
  bcs::test::Background nm1({bcs::test::bin("bcs-nm"), "--manager", addr, "--name", "a"});
  bcs::test::Background nm2({bcs::test::bin("bcs-nm"), "--manager", addr, "--name", "b"});
  for (int i = 0; i < 2; ++i) {
    auto r = bcs_run({"--manager", addr, "-n", "4", "--nodes", "2", prog("prog_ring")});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_THAT(r.out, HasSubstr("ring ok"));
  }
  auto j = bcs::test::run({bcs::test::bin("bcs"), "jobs", "--manager", addr}, 30s);
  EXPECT_EQ(j.status, 0) << describe(j);
  EXPECT_EQ(nm1.stop(), 0);
  EXPECT_EQ(nm2.stop(), 0);
  EXPECT_EQ(mm.stop(), 0);
}

namespace {
// A standing cluster on loopback: a manager and node managers a and b.
// lose_b() runs a two-node job and SIGKILLs b once `now` says so.
struct TwoNodeManagers {
  bcs::test::Background mm{{bcs::test::bin("bcs-mm"), "--listen", "127.0.0.1:0", "--ready-fd", "3"}};
  std::string addr;
  std::unique_ptr<bcs::test::Background> a, b;
  bool up() {
    const std::string port = mm.ready_line(30s);
    if (port.empty()) return false;
    addr = "127.0.0.1:" + port;
    a = std::make_unique<bcs::test::Background>(
        std::vector<std::string>{bcs::test::bin("bcs-nm"), "--manager", addr, "--name", "a"});
    b = std::make_unique<bcs::test::Background>(
        std::vector<std::string>{bcs::test::bin("bcs-nm"), "--manager", addr, "--name", "b"});
    return true;
  }
  RunResult lose_b(std::vector<std::string> job, const std::function<bool(const std::string&)>& now,
                   bool* killed) {
    job.insert(job.begin(), {"--manager", addr, "-n", "2", "--nodes", "2"});
    return bcs_run(job, 60s, {}, [&](const std::string& out) {
      if (!*killed && now(out)) {
        kill(b->pid(), SIGKILL);
        *killed = true;
      }
    });
  }
};
}  // namespace

TEST_F(Story, ADeadNodeManagerEndsTheJobPromptly) {
  TwoNodeManagers c;
  ASSERT_TRUE(c.up());
  // Once both ranks are blocked, SIGKILL node manager b: its rank dies with
  // it, the job must end with a message naming the node.
  bool killed = false;
  auto r = c.lose_b({bcs::test::blocker()},
                    [](const std::string& out) { return bcs::test::count(out, "blocking") == 2; },
                    &killed);
  EXPECT_TRUE(killed);
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_FALSE(r.timed_out);
  EXPECT_THAT(r.err, HasSubstr("was lost"));
  EXPECT_EQ(c.b->wait(10s), 128 + SIGKILL);
  EXPECT_EQ(c.a->stop(), 0);
  EXPECT_EQ(c.mm.stop(), 0);
}

// Node manager b dies while 64 MiB messages cross between the nodes: node
// manager a, stuck in the transfer, finishes its microphase after the job
// ended and reports it (with the next slice's DEM it runs ahead). The next
// job on a alone must not take that late report for its own (it did: one
// run in three failed with "microphases out of order").
TEST_F(Story, TheSurvivorOfALostNodeManagerRunsTheNextJob) {
  TwoNodeManagers c;
  ASSERT_TRUE(c.up());
  bool killed = false;
  // The 8-byte line is printed when the 64 MiB round trips begin.
  auto r = c.lose_b({prog("prog_pingpong"), "--bench", "400", "8", "64m"},
                    [](const std::string& out) {
                      return out.rfind("8 ", 0) == 0 || out.find("\n8 ") != std::string::npos;
                    },
                    &killed);
  ASSERT_TRUE(killed) << describe(r);
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("was lost"));
  EXPECT_EQ(c.b->wait(10s), 128 + SIGKILL);
  for (int i = 0; i < 2; ++i) {
    auto next = bcs_run({"--manager", c.addr, "-n", "2", prog("prog_ring")}, 60s);
    EXPECT_EQ(next.status, 0) << describe(next);
    EXPECT_THAT(next.out, HasSubstr("ring ok"));
  }
  EXPECT_EQ(c.a->stop(), 0);
  EXPECT_EQ(c.mm.stop(), 0);
}

// ---------------------------------------------------------------------------

TEST_F(Story, NodeManagersOnTwoHostsTalkOverTheNetwork) {
  if (geteuid() != 0) GTEST_SKIP() << "network namespaces need root";
  bcs::test::TwoHosts hosts;
  ASSERT_TRUE(hosts.ok()) << "could not create the test network namespaces";
  const std::map<std::string, std::string> env{{"UCX_TLS", "tcp"}, {"UCX_NET_DEVICES", "bcs0"}};
  // The token reaches every process through the environment, never argv.
  std::map<std::string, std::string> with_token = env;
  with_token["BCS_TOKEN"] = "it-" + bcs::test::marker();
  bcs::test::Background mm(
      hosts.on(true, {bcs::test::bin("bcs-mm"), "--listen", hosts.addr_a() + ":0", "--ready-fd",
                      "3"}),
      with_token);
  std::string port = mm.ready_line(30s);
  ASSERT_FALSE(port.empty()) << "bcs-mm did not come up";
  const std::string addr = hosts.addr_a() + ":" + port;
  bcs::test::Background nma(
      hosts.on(true, {bcs::test::bin("bcs-nm"), "--manager", addr, "--name", "hostA"}), with_token);
  bcs::test::Background nmb(
      hosts.on(false, {bcs::test::bin("bcs-nm"), "--manager", addr, "--name", "hostB"}),
      with_token);

  // Without the token the manager refuses the job.
  auto denied = bcs::test::run(
      hosts.on(true, {bcs::test::bin("bcs"), "run", "--manager", addr, "-n", "1", "/bin/true"}),
      60s, env);
  EXPECT_NE(denied.status, 0) << describe(denied);

  auto run_on_a = [&](std::vector<std::string> args) {
    std::vector<std::string> argv{bcs::test::bin("bcs"), "run", "--timeout", "60s", "--manager",
                                  addr};
    argv.insert(argv.end(), args.begin(), args.end());
    return bcs::test::run(hosts.on(true, argv), 90s, with_token);
  };
  auto where = run_on_a({"-n", "2", "--nodes", "2", "-l", "/bin/sh", "-c", "echo on $BCS_NODE"});
  ASSERT_EQ(where.status, 0) << describe(where);
  EXPECT_THAT(where.out, HasSubstr("on hostA"));
  EXPECT_THAT(where.out, HasSubstr("on hostB"));

  auto pp = run_on_a({"-n", "2", "--nodes", "2", prog("prog_pingpong")});
  ASSERT_EQ(pp.status, 0) << describe(pp);
  EXPECT_THAT(pp.out, HasSubstr("pingpong ok"));
  auto ring = run_on_a({"-n", "4", "--nodes", "2", prog("prog_ring")});
  ASSERT_EQ(ring.status, 0) << describe(ring);
  EXPECT_THAT(ring.out, HasSubstr("ring ok"));

  EXPECT_EQ(nma.stop(), 0);
  EXPECT_EQ(nmb.stop(), 0);
  EXPECT_EQ(mm.stop(), 0);
}

TEST_F(Story, ADeadMachineManagerEndsEverythingPromptly) {
  auto mm = std::make_unique<bcs::test::Background>(std::vector<std::string>{
      bcs::test::bin("bcs-mm"), "--listen", "127.0.0.1:0", "--ready-fd", "3"});
  std::string port = mm->ready_line(30s);
  ASSERT_FALSE(port.empty());
  const std::string addr = "127.0.0.1:" + port;
  bcs::test::Background nm1({bcs::test::bin("bcs-nm"), "--manager", addr, "--name", "a"});
  bcs::test::Background nm2({bcs::test::bin("bcs-nm"), "--manager", addr, "--name", "b"});
  // Once both ranks are blocked, SIGKILL the manager: the client must say
  // so, and the node managers must kill their ranks and exit.
  bool killed = false;
  auto r = bcs_run({"--manager", addr, "-n", "2", "--nodes", "2", bcs::test::blocker()}, 60s, {},
                   [&](const std::string& out) {
                     if (!killed && bcs::test::count(out, "blocking") == 2) {
                       kill(mm->pid(), SIGKILL);
                       killed = true;
                     }
                   });
  EXPECT_TRUE(killed);
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_FALSE(r.timed_out);
  EXPECT_THAT(r.err, HasSubstr("lost the machine manager"));
  EXPECT_EQ(mm->wait(10s), 128 + SIGKILL);
  // A node manager that lost its manager exits non-zero, after its ranks.
  EXPECT_EQ(nm1.wait(30s), 1);
  EXPECT_EQ(nm2.wait(30s), 1);
}
