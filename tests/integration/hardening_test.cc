// Stories of issue 7, part A: who runs what. Each one tries what a local
// attacker (or a careless program) would, and checks that the daemons keep
// to themselves: they listen only where they were told, ranks inherit none
// of their fds, nothing a rank forks outlives the job, and bad arguments are
// refused up front. Who a job runs as (users, credentials): identity_test.cc.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "harness.h"
#include "standing.h"
#include "story.h"

using namespace std::chrono_literals;
using bcs::test::bcs_run;
using bcs::test::bin;
using bcs::test::describe;
using bcs::test::it_prog;
using bcs::test::prog;
using bcs::test::Standing;
using bcs::test::Story;
using testing::HasSubstr;

using bcs::test::it_prog;

namespace {

// True once `pid` has exited (or never existed), waiting on a pidfd at most
// `limit`: a bound against hangs, not a timing assertion.
bool gone_within(pid_t pid, std::chrono::seconds limit) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  int n = poll(&p, 1, static_cast<int>(std::chrono::milliseconds(limit).count()));
  close(fd);
  return n == 1;
}

std::vector<pid_t> escapees(const std::string& out) {
  std::vector<pid_t> v;
  for (size_t p = out.find("escapee "); p != std::string::npos; p = out.find("escapee ", p + 1))
    v.push_back(static_cast<pid_t>(std::stol(out.substr(p + 8))));
  return v;
}

std::string show(const std::vector<bcs::test::Listener>& ls) {
  std::string s;
  for (auto& l : ls) s += " pid " + std::to_string(l.pid) + " " + l.ip + ":" + std::to_string(l.port);
  return s;
}

}  // namespace

// ------------------------------------------------------------ listeners
TEST_F(Story, ALoopbackStandingClusterListensOnLoopbackOnly) {
  Standing c(2);
  ASSERT_TRUE(c.up());
  // A job across both node managers: every fabric endpoint is in use.
  auto r = c.run({"-n", "2", "--nodes", "2", prog("prog_ring")});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto ls = bcs::test::tcp_listeners_of(c.pids());
  // gRPC of the manager, and the UCX TCP transport of all three.
  EXPECT_GE(ls.size(), 4u) << show(ls);
  for (auto& l : ls) EXPECT_TRUE(l.loopback) << "listening on " << l.ip << ":" << l.port;
  c.expect_alive_then_stop();
}

TEST_F(Story, TheEmbeddedClusterListensOnLoopbackOnly) {
  // The ranks wait on a FIFO until the test has looked at the daemons.
  const auto dir = std::filesystem::temp_directory_path() / ("bcs-it-fifo-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string fifo = (dir / "go").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::vector<bcs::test::Listener> ls;
  size_t daemons = 0;
  bool released = false;
  auto r = bcs_run({"-n", "2", "--nodes", "2", "/bin/sh", "-c", "echo up; read x < " + fifo},
                   90s, {}, [&](const std::string& out) {
                     if (released || bcs::test::count(out, "up") < 2) return;
                     auto pids = bcs::test::marked_running(bin("bcs-mm"));
                     auto nms = bcs::test::marked_running(bin("bcs-nm"));
                     pids.insert(pids.end(), nms.begin(), nms.end());
                     daemons = pids.size();
                     ls = bcs::test::tcp_listeners_of(pids);
                     // Opening the write end meets both readers; closing it is EOF.
                     int fd = open(fifo.c_str(), O_WRONLY);
                     if (fd >= 0) {
                       [[maybe_unused]] auto n = write(fd, "go\ngo\n", 6);
                       close(fd);
                     }
                     released = true;
                   });
  std::filesystem::remove_all(dir);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(daemons, 3u);
  EXPECT_GE(ls.size(), 4u) << show(ls);
  for (auto& l : ls) EXPECT_TRUE(l.loopback) << "listening on " << l.ip << ":" << l.port;
}

TEST_F(Story, APortOutOfRangeIsRefusedNotWrapped) {
  // 70000 would silently become 4464 if it were cast to 16 bits.
  auto r = bcs::test::run({bin("bcs-mm"), "--listen", "127.0.0.1:70000"}, 30s);
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("0 to 65535"));
  auto n = bcs::test::run({bin("bcs-nm"), "--manager", "127.0.0.1:70000"}, 30s);
  EXPECT_EQ(n.status, 2) << describe(n);
  EXPECT_THAT(n.err, HasSubstr("0 to 65535"));
}

// ------------------------------------------------------------------- fds
TEST_F(Story, ARankGetsNoDaemonFdAndJunkOnTheDaemonsPortsHarmsNothing) {
  Standing c(2);
  ASSERT_TRUE(c.up());
  std::vector<std::string> args{"-n", "2", "--nodes", "2", it_prog("it_intruder")};
  for (pid_t p : c.pids()) args.push_back(std::to_string(p));
  auto r = c.run(args);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("intruder done"));
  EXPECT_THAT(r.out, HasSubstr("rank 0: 0 foreign fds"));
  EXPECT_THAT(r.out, HasSubstr("rank 1: 0 foreign fds"));
  EXPECT_THAT(r.out, testing::Not(HasSubstr("foreign fd ")));
  // The junk did reach the daemons' listeners (gRPC and the fabric's).
  EXPECT_THAT(r.out, testing::ContainsRegex("rank 0: 0 foreign fds, [3-9][0-9]* ports hit"));
  // The daemons are still up and the next job runs.
  auto ring = c.run({"-n", "4", "--nodes", "2", prog("prog_ring")});
  ASSERT_EQ(ring.status, 0) << describe(ring);
  EXPECT_THAT(ring.out, HasSubstr("ring ok"));
  c.expect_alive_then_stop();
}

// A service may give the node manager the right to real-time priority for
// its own threads (deploy/systemd: LimitRTPRIO=1, sched_hint.h). Its ranks
// do not inherit it: a rank at SCHED_FIFO could hold a CPU against everyone.
TEST_F(Story, ARankDoesNotInheritTheNodeManagersRightToRealTime) {
  const std::string limit = "Max realtime priority +([0-9]+) +([0-9]+)";
  auto self = bcs::test::run({"prlimit", "--rtprio=1:1", "grep", "realtime", "/proc/self/limits"}, 30s);
  if (self.status != 0 || self.out.find("realtime") == std::string::npos)
    GTEST_SKIP() << "cannot raise RLIMIT_RTPRIO here (no CAP_SYS_RESOURCE): " << describe(self);
  ASSERT_THAT(self.out, testing::ContainsRegex("Max realtime priority +1 +1"))
      << "prlimit did not give the right: the story would prove nothing";
  auto r = bcs::test::run({"prlimit", "--rtprio=1:1", bin("bcs"), "run", "--timeout", "60s", "-n",
                           "2", "grep", "realtime", "/proc/self/limits"},
                          90s);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, testing::ContainsRegex(limit));
  EXPECT_THAT(r.out, testing::Not(testing::ContainsRegex("Max realtime priority +[1-9]")));
}

// ----------------------------------------------------------- process tree
TEST_F(Story, ADetachedGrandchildOfARankDiesWithTheJob) {
  auto r = bcs_run({"-n", "2", it_prog("it_escape")});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto pids = escapees(r.out);
  ASSERT_EQ(pids.size(), 2u) << describe(r);
  for (pid_t p : pids) EXPECT_TRUE(gone_within(p, 30s)) << "escapee " << p << " survived the job";
}

TEST_F(Story, OnAStandingClusterTheGrandchildDiesAtJobEndNotAtShutdown) {
  Standing c(2);
  ASSERT_TRUE(c.up());
  auto r = c.run({"-n", "4", "--nodes", "2", it_prog("it_escape")});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto pids = escapees(r.out);
  ASSERT_EQ(pids.size(), 4u) << describe(r);
  // The node managers are still running: the job's end killed them.
  for (pid_t p : pids) EXPECT_TRUE(gone_within(p, 30s)) << "escapee " << p << " survived the job";
  auto ring = c.run({"-n", "2", "--nodes", "2", prog("prog_ring")});
  EXPECT_EQ(ring.status, 0) << describe(ring);
  c.expect_alive_then_stop();
}

// ------------------------------------------------------- smaller items
TEST_F(Story, WithTenSecondSlicesSigtermStopsTheManagerWithinTheSlice) {
  Standing c(1, {"--slice", "10s"});
  ASSERT_TRUE(c.up());
  bool termed = false;
  auto r = c.run({"-n", "1", "/bin/sh", "-c", "echo up; exec sleep 600"},
                 [&](const std::string& out) {
                   if (!termed && out.find("up") != std::string::npos) {
                     kill(c.mm->pid(), SIGTERM);
                     termed = true;
                   }
                 });
  ASSERT_TRUE(termed) << describe(r);
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("shutting down"));
  // The strobe sender was asleep in a 10 s slice. The bound is half a
  // slice: a manager that waits for the slice to run out cannot meet it,
  // one that is woken needs milliseconds.
  EXPECT_EQ(c.mm->wait(5s), 0) << "bcs-mm did not stop within half a slice of SIGTERM";
  EXPECT_EQ(c.nms[0]->wait(30s), 0);
}

// The test above fails only when the kernel happens to hand SIGTERM to a
// thread that does not block it; this one looks at every thread's mask.
// gRPC starts threads (executors, timers) at its first use, so a daemon
// that blocks the signals after touching gRPC leaves those threads open,
// and a SIGTERM delivered there kills it with the default action.
TEST_F(Story, EveryDaemonThreadButTheSignalTakerBlocksTheTerminationSignals) {
  Standing c(1);
  ASSERT_TRUE(c.up());
  // A job first, so that the threads a job starts are looked at too.
  auto r = c.run({"-n", "2", prog("prog_ring")});
  ASSERT_EQ(r.status, 0) << describe(r);
  const uint64_t want = (1ull << (SIGTERM - 1)) | (1ull << (SIGINT - 1)) | (1ull << (SIGHUP - 1));
  auto check = [&](pid_t pid, bool skip_main, const char* who) {
    int looked = 0;
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
      // The manager's main thread takes the signals in sigwait, which
      // unblocks them while it waits.
      if (skip_main && t.path().filename() == std::to_string(pid)) continue;
      std::ifstream st(t.path() / "status");
      std::string line, name;
      uint64_t blocked = 0;
      bool found = false;
      while (std::getline(st, line)) {
        if (line.rfind("Name:\t", 0) == 0) name = line.substr(6);
        if (line.rfind("SigBlk:", 0) == 0) {
          blocked = std::stoull(line.substr(7), nullptr, 16);
          found = true;
        }
      }
      if (!found) continue;  // the thread ended while we looked
      ++looked;
      EXPECT_EQ(blocked & want, want)
          << who << " thread " << t.path().filename() << " (" << name << ") leaves SIGTERM, "
          << "SIGINT or SIGHUP unblocked: SigBlk " << std::hex << blocked;
    }
    EXPECT_GT(looked, 2) << who << ": too few threads looked at to prove anything";
  };
  check(c.mm->pid(), true, "bcs-mm");
  check(c.nms[0]->pid(), false, "bcs-nm");
  c.expect_alive_then_stop();
}

TEST_F(Story, AHundredThousandRanksAreRefusedUpFront) {
  auto r = bcs_run({"-n", "100000", "/bin/true"}, 60s);
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("-n 100000"));
  EXPECT_THAT(r.err, HasSubstr("at most 65536"));
  // Nothing was started (the Story fixture also checks nothing is left).
  EXPECT_THAT(r.err, testing::Not(HasSubstr("bcs-mm")));
  auto per_node = bcs_run({"-n", "3000", "--nodes", "2", "/bin/true"}, 60s);
  EXPECT_EQ(per_node.status, 2) << describe(per_node);
  EXPECT_THAT(per_node.err, HasSubstr("at most 1024 ranks"));
}

TEST_F(Story, TheManagerRefusesAJobTooLargeForItsNodes) {
  // The CLI cannot know how many node managers a standing cluster has.
  Standing c(1);
  ASSERT_TRUE(c.up());
  auto r = c.run({"-n", "1500", "/bin/true"});
  EXPECT_EQ(r.status, 1) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("at most 1024 ranks"));
  auto ok = c.run({"-n", "2", prog("prog_ring")});
  EXPECT_EQ(ok.status, 0) << describe(ok);
  c.expect_alive_then_stop();
}

TEST_F(Story, TheTokenComesFromAFileOrTheEnvironmentNeverFromArgv) {
  for (const auto& daemon : {bin("bcs-mm"), bin("bcs-nm")}) {
    auto r = bcs::test::run({daemon, "--token", "s3cret"}, 30s);
    EXPECT_EQ(r.status, 2) << describe(r);
    EXPECT_THAT(r.err, HasSubstr("--token-file"));
  }
  const auto dir = std::filesystem::temp_directory_path() / ("bcs-it-tok-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "token").string();
  {
    int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "it-secret\n", 10), 10);
    close(fd);
  }
  // The daemons take it from the file; a client with the same token in
  // its environment gets in, one without does not.
  Standing c(1, {"--token-file", file}, {});
  ASSERT_TRUE(c.up());
  c.nms.clear();  // the default node manager has no token: replace it
  c.nms.push_back(std::make_unique<bcs::test::Background>(
      std::vector<std::string>{bin("bcs-nm"), "--manager", c.addr, "--name", "n1", "--token-file",
                               file}));
  auto denied = c.run({"-n", "1", "/bin/true"});
  EXPECT_EQ(denied.status, 1) << describe(denied);
  EXPECT_THAT(denied.err, HasSubstr("UNAUTHENTICATED"));
  auto ok = bcs_run({"--manager", c.addr, "--token-file", file, "-n", "2", prog("prog_ring")});
  EXPECT_EQ(ok.status, 0) << describe(ok);
  auto env = bcs_run({"--manager", c.addr, "-n", "1", "/usr/bin/env"}, 90s,
                     {{"BCS_TOKEN", "it-secret"}});
  EXPECT_EQ(env.status, 0) << describe(env);
  // The ranks never see the token, though bcs had it in its environment.
  EXPECT_THAT(env.out, HasSubstr("BCS_RANK=0"));
  EXPECT_THAT(env.out, testing::Not(HasSubstr("it-secret")));
  c.expect_alive_then_stop();
  std::filesystem::remove_all(dir);
}

// The control plane over TLS: a manager with a certificate serves node
// managers and clients that hold its CA ($BCS_TLS_CA); a client without it
// is not served (plain TCP to a TLS port fails at once, clearly).
TEST_F(Story, AManagerWithACertificateServesOnlyTlsClients) {
  const auto dir = std::filesystem::temp_directory_path() / ("bcs-it-tls-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string key = (dir / "key.pem").string(), cert = (dir / "cert.pem").string();
  auto gen = bcs::test::run({"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                             key, "-out", cert, "-days", "2", "-subj", "/CN=bcs-it",
                             "-addext", "subjectAltName=IP:127.0.0.1"},
                            60s);
  ASSERT_EQ(gen.status, 0) << describe(gen);
  Standing c(1, {"--tls-cert", cert, "--tls-key", key}, {{"BCS_TLS_CA", cert}});
  ASSERT_TRUE(c.up());
  auto ok = bcs_run({"--manager", c.addr, "-n", "2", prog("prog_ring")}, 90s,
                    {{"BCS_TLS_CA", cert}});
  EXPECT_EQ(ok.status, 0) << describe(ok);
  EXPECT_THAT(ok.out, HasSubstr("ring ok"));
  auto plain = c.run({"-n", "1", "/bin/true"});
  EXPECT_EQ(plain.status, 1) << describe(plain);
  EXPECT_THAT(plain.err, HasSubstr("UNAVAILABLE"));
  // A key without its certificate is refused at start.
  auto half = bcs::test::run({bin("bcs-mm"), "--listen", "127.0.0.1:0", "--tls-key", key}, 30s);
  EXPECT_EQ(half.status, 2) << describe(half);
  EXPECT_THAT(half.err, HasSubstr("--tls-cert and --tls-key go together"));
  c.expect_alive_then_stop();
  std::filesystem::remove_all(dir);
}

// ------------------------------------------------------- errors flow up
// A node manager that loses work in a microphase (here by the test-only
// BCS_TEST_FAULT injection in its buffer sender) ends the job at once with
// the node, the microphase and the cause, instead of leaving the ranks to
// wait for messages that will never come.
// An output hook that, once the job prints `cue`, stops process `pid`
// (SIGSTOP) for `how_long` and lets it go on (SIGCONT); *stopped says it did.
bcs::test::OutputHook stall_when(std::string cue, pid_t pid, std::chrono::seconds how_long,
                                 bool* stopped) {
  return [=](const std::string& out) {
    if (*stopped || out.find(cue) == std::string::npos) return;
    *stopped = true;
    ASSERT_EQ(kill(pid, SIGSTOP), 0);
    std::this_thread::sleep_for(how_long);  // the stall under test, not a synchronisation
    ASSERT_EQ(kill(pid, SIGCONT), 0);
  };
}

// Stalls are not deaths: a node manager stopped for 15 s (a debugger, a VM
// pause) in the middle of a job only delays it; the job then completes and
// every daemon is still up. (The liveness timeout, 60 s by default, is what
// separates a stall from a loss.)
TEST_F(Story, ANodeManagerStoppedForFifteenSecondsOnlyDelaysTheJob) {
  Standing c(2);
  ASSERT_TRUE(c.up());
  bool stopped = false;
  auto r = c.run({"-n", "2", prog("prog_ring"), "4000", "announce"},
                 stall_when("ring started", c.nms[1]->pid(), 15s, &stopped));
  EXPECT_TRUE(stopped) << describe(r);
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("ring ok (2 ranks, 4000 laps)")) << describe(r);
  c.expect_alive_then_stop();
}

// A hung job killed while a node manager is stopped says why: the strobe
// waits for that node to complete a microphase (the runtime stalled, not
// the program). Once the ring runs, node 2 is stopped; 2 s into the stop
// `bcs kill` prints the manager's report (the one a timed-out `bcs run`
// prints). The kill starts from the cue, not from a clock, so a slow
// machine cannot kill the job before the stop. The job then ends when the
// node goes on, and every daemon is still up.
TEST_F(Story, AJobKilledWhileANodeIsStoppedSaysTheStrobeWaitedForIt) {
  Standing c(2);
  ASSERT_TRUE(c.up());
  bool stopped = false;
  bcs::test::RunResult k;
  auto r = c.run({"-n", "2", "--nodes", "2", prog("prog_ring"), "100000", "announce"},
                 [&](const std::string& out) {
                   if (stopped || out.find("ring started") == std::string::npos) return;
                   stopped = true;
                   const pid_t nm2 = c.nms[1]->pid();
                   ASSERT_EQ(kill(nm2, SIGSTOP), 0);
                   std::this_thread::sleep_for(2s);  // the stall under test, not a synchronisation
                   k = c.kill_job(1);  // the cluster is fresh: its first job
                   ASSERT_EQ(kill(nm2, SIGCONT), 0);
                 });
  ASSERT_TRUE(stopped) << describe(r);
  EXPECT_EQ(k.status, 0) << describe(k);
  EXPECT_THAT(k.out, HasSubstr("job 1: ranks still running: 0 (pid ")) << describe(k);
  EXPECT_THAT(k.out, testing::ContainsRegex("the strobe had waited [0-9.]+ s for every node to "
                                            "complete (DEM|MSM|P2P|BBM|RM) of slice [0-9]+"))
      << describe(k);
  // Asked what its ranks wait for, the stopped node cannot answer.
  EXPECT_THAT(k.out, HasSubstr("; n2 did not say what its ranks wait for")) << describe(k);
  EXPECT_EQ(r.status, 143) << describe(r);  // killed with `bcs kill`
  EXPECT_FALSE(r.timed_out) << describe(r);
  c.expect_alive_then_stop();
}

// A deadlocked program, killed, is named by what its ranks wait for: the
// manager asks each node manager (DescribeJob), which reads its matching
// state. Rank 0 waits for tag 8 from rank 1, rank 1 for tag 9 from rank 0
// and holds rank 0's tag 7 that no receive took, rank 2 waits in a
// barrier. The kill comes once every rank printed its line, after a
// barrier that each one's receive was posted before. On one node manager
// (its strobe receiver runs leases, and answers between them) and on two
// (ranks 0 and 2 on one node manager, rank 1 on the other).
class KilledDeadlock : public Story, public testing::WithParamInterface<int> {};

TEST_P(KilledDeadlock, SaysWhatEachRankWaitsFor) {
  Standing c(GetParam());
  ASSERT_TRUE(c.up());
  bool killed = false;
  bcs::test::RunResult k;
  std::string seen;
  auto r = c.run({"-n", "3", "--nodes", std::to_string(GetParam()), it_prog("it_deadlock")},
                 [&](const std::string& out) {
                   seen += out;
                   if (killed) return;
                   for (const char* rank : {"rank 0 deadlocked", "rank 1 deadlocked",
                                            "rank 2 deadlocked"})
                     if (seen.find(rank) == std::string::npos) return;
                   killed = true;
                   k = c.kill_job(1);
                 });
  ASSERT_TRUE(killed) << describe(r);
  EXPECT_EQ(k.status, 0) << describe(k);
  EXPECT_THAT(k.out, testing::ContainsRegex("(on n[12]: |; )rank 0 [^;]*unmatched: a receive from "
                                            "rank 1 tag 8 \\(MPI_COMM_WORLD, posted in slice"))
      << describe(k);
  EXPECT_THAT(k.out, testing::ContainsRegex("(on n[12]: |; )rank 1 [^;]*unmatched: a receive from "
                                            "rank 0 tag 9 \\(MPI_COMM_WORLD, posted in slice "
                                            "[0-9]+\\), 1 message\\(s\\) for it no receive "
                                            "took"))
      << describe(k);
  // Rank 2's second barrier may still be in its ring when the kill comes;
  // once posted, the local members that have not posted it are named.
  EXPECT_THAT(k.out, testing::ContainsRegex("rank 2 (waited in MPI, in a barrier \\(collective "
                                            "[0-9]+ of MPI_COMM_WORLD; not posted here by rank "
                                            "0|was not in an MPI wait|waited in MPI, for no)"))
      << describe(k);
  EXPECT_EQ(r.status, 143) << describe(r);  // killed with `bcs kill`
  c.expect_alive_then_stop();
}

INSTANTIATE_TEST_SUITE_P(NodeManagers, KilledDeadlock, testing::Values(1, 2),
                         [](const auto& info) { return std::to_string(info.param) + "nm"; });

// The same on a one-node job's lease, stopped for longer than a lease may
// skip periods (kMaxLeaseSkipped, 10,000: 5 s of 500 us slices), while
// its ranks compute 3 ms between barriers, so that the lease's earlier
// waits have skipped periods too. The node wakes to find every period
// gone and counts at most what the lease has left; counting each wait up
// to the limit made the lease's total too many, and the manager failed
// the job ("malformed report: more periods skipped than a lease may").
TEST_F(Story, ANodeManagerStoppedLongerThanALeaseMaySkipOnlyDelaysTheJob) {
  Standing c(1);
  ASSERT_TRUE(c.up());
  bool stopped = false;
  auto r = c.run({"-n", "2", it_prog("it_idle"), "0.003", "1000", "compute", "announce"},
                 stall_when("idle started", c.nms[0]->pid(), 6s, &stopped));
  EXPECT_TRUE(stopped) << describe(r);
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("idle ok")) << describe(r);
  c.expect_alive_then_stop();
}

TEST_F(Story, ADescriptorBatchThatDoesNotDecodeEndsTheJobNamingNodeAndMicrophase) {
  auto r = bcs_run({"-n", "2", "--nodes", "2", prog("prog_pingpong")}, 90s,
                   {{"BCS_TEST_FAULT", "bad-batch"}});
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_FALSE(r.timed_out) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("microphase MSM of slice"));
  EXPECT_THAT(r.err, HasSubstr("did not decode"));
  EXPECT_THAT(r.err, testing::ContainsRegex("node node[12]"));
}

// A node whose DEM hides sends that will move data (BCS_TEST_FAULT
// "hide-moving": Report::moving 0) makes the manager end the slice with
// its MSM, and that node's MSM then schedules chunks for a P2P: the job
// ends at once, naming the node and the microphase.
TEST_F(Story, ANodeThatHidesDataToMoveEndsTheJobNamingIt) {
  auto r = bcs_run({"-n", "2", "--nodes", "2", prog("prog_pingpong"), "--bench", "20", "65536"},
                   90s, {{"BCS_TEST_FAULT", "hide-moving"}});
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_FALSE(r.timed_out) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("microphase MSM of slice")) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("chunks scheduled after a DEM that announced none")) << describe(r);
}

TEST_F(Story, ADescriptorBatchThatNeverComesEndsTheJobInsteadOfAHang) {
  // The receiving node waits for the batch up to the liveness timeout (a
  // stalled sender would only delay the job), here 5 s.
  auto r = bcs_run({"--liveness-timeout", "5s", "-n", "2", "--nodes", "2", prog("prog_pingpong")},
                   90s,
                   {{"BCS_TEST_FAULT", "lose-batch"}});
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_FALSE(r.timed_out) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("microphase MSM of slice"));
  EXPECT_THAT(r.err, HasSubstr("never came"));
}

// A node manager whose endpoint to the manager is gone when it reports a
// microphase (the fabric gives an endpoint up when a send does not complete
// in time; BCS_TEST_FAULT "report-endpoint-lost" drops it before the job's
// fifth report) connects again and sends the report on the new endpoint:
// the job completes. Before, the report was dropped without a word and the
// job hung until its timeout (once in CI).
TEST_F(Story, AReportWhoseEndpointWasLostGoesOnANewOneAndTheJobCompletes) {
  auto r = bcs_run({"-n", "2", "--nodes", "2", prog("prog_pingpong")}, 90s,
                   {{"BCS_TEST_FAULT", "report-endpoint-lost"}});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_FALSE(r.timed_out) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("pingpong ok")) << describe(r);
}

// When it cannot connect again ("report-lost"), the manager hears it on the
// control stream and ends the job at once, naming the node manager and the
// report; no hang until the phase watchdog.
TEST_F(Story, AReportThatCannotReachTheManagerEndsTheJobNamingTheNode) {
  auto r = bcs_run({"-n", "2", "--nodes", "2", prog("prog_pingpong")}, 90s,
                   {{"BCS_TEST_FAULT", "report-lost"}});
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_FALSE(r.timed_out) << describe(r);
  EXPECT_THAT(r.err, testing::ContainsRegex("node manager node[12] \\(pid [0-9]+\\): its report "
                                            "of [A-Z0-9]+ of slice [0-9]+ did not reach the "
                                            "manager"))
      << describe(r);
}

// A report that answers another microstrobe than the one waited for, with
// a phase value past it (BCS_TEST_FAULT "report-ahead": the fifth report
// claims a slice 1000 later), is never taken for the one waited for: the
// job ends at once, naming the node. Before, such a report (another job's,
// on the job's row variable) satisfied the wait and the slice went on
// without that node's descriptors: the job hung with a send lost.
TEST_F(Story, AReportThatAnswersAnotherMicrostrobeEndsTheJobNamingTheNode) {
  auto r = bcs_run({"-n", "2", "--nodes", "2", prog("prog_pingpong")}, 90s,
                   {{"BCS_TEST_FAULT", "report-ahead"}});
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_FALSE(r.timed_out) << describe(r);
  EXPECT_THAT(r.err, testing::ContainsRegex("node node[12]: microphase [A-Z0-9]+ of slice [0-9]+ "
                                            "failed: malformed report"))
      << describe(r);
}

// The fabric gives an endpoint up when a send on it does not complete in
// time; its peer may well be alive. The next job connects it again, on the
// manager and on every node manager: BCS_TEST_FAULT "endpoints-lost" makes
// every daemon drop its endpoints to the job's nodes as each job ends, and
// three jobs in a row still run. Before, the second job failed ("node
// manager n1 (pid ...) was lost (fabric error)"), and so did every job
// after it until a node manager joined or left.
TEST_F(Story, AnEndpointGivenUpInOneJobIsConnectedAgainForTheNext) {
  Standing c(2, {}, {{"BCS_TEST_FAULT", "endpoints-lost"}});
  ASSERT_TRUE(c.up());
  for (int job = 1; job <= 3; ++job) {
    auto r = c.run({"-n", "2", "--nodes", "2", prog("prog_pingpong")});
    EXPECT_EQ(r.status, 0) << "job " << job << ": " << describe(r);
    EXPECT_THAT(r.out, HasSubstr("pingpong ok")) << "job " << job << ": " << describe(r);
  }
  c.expect_alive_then_stop();
}

// ------------------------------------------------ a rank that scribbles
// A rank writes garbage into its part of the job segment (it_scribble): its
// node manager ends it and names it with the cause, the rest of the job
// ends, the node manager stays up and runs the next job. Garbage in the
// segment header's sizes is never believed: that job runs normally.
TEST_F(Story, ARankThatCorruptsItsSegmentIsEndedAndNamedAndTheNodeManagerRunsTheNextJob) {
  Standing c(1);
  ASSERT_TRUE(c.up());
  const std::pair<const char*, const char*> cases[] = {
      {"head", "is not within a ring of tail"},
      {"request", "it corrupted its descriptor ring: request index 1073741824 out of range"},
      {"span", "ends within an eager send"},
  };
  for (const auto& [mode, why] : cases) {
    auto r = c.run({"-n", "3", it_prog("it_scribble"), mode});
    EXPECT_NE(r.status, 0) << mode << ": " << describe(r);
    EXPECT_FALSE(r.timed_out) << describe(r);
    EXPECT_THAT(r.err, testing::ContainsRegex("rank 1 \\(pid [0-9]+ on [^)]*\\) was ended by its "
                                              "node manager"))
        << describe(r);
    EXPECT_THAT(r.err, HasSubstr(why)) << describe(r);
  }
  // Issue 42: before MPI_Init the whole segment overwritten with a junk
  // word was read back as "called MPI_Abort with error code 1718986775".
  auto before = c.run({"-n", "2", it_prog("it_scribble"), "before-init"});
  EXPECT_NE(before.status, 0) << describe(before);
  EXPECT_THAT(before.err, testing::ContainsRegex("rank [01] \\(pid [0-9]+ on [^)]*\\) corrupted its "
                                                 "part of the job segment \\(its MPI state word "
                                                 "holds 0x6675a817\\)"))
      << describe(before);
  EXPECT_THAT(before.err, testing::Not(HasSubstr("MPI_Abort"))) << describe(before);
  auto layout = c.run({"-n", "3", it_prog("it_scribble"), "layout"});
  ASSERT_EQ(layout.status, 0) << describe(layout);
  EXPECT_THAT(layout.out, HasSubstr("scribble done"));
  auto ring = c.run({"-n", "3", prog("prog_ring")});
  ASSERT_EQ(ring.status, 0) << describe(ring);
  EXPECT_THAT(ring.out, HasSubstr("ring ok"));
  c.expect_alive_then_stop();
}
