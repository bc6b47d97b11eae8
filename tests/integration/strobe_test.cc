// Stories of issue 8: how the strobe paces slices. The daemons' work is
// counted in slices actually strobed (each one at least a round trip to
// every node manager), read from the manager's Monitor service, never in
// wall-clock time.
//
// - A job whose ranks compute (sleep, outside MPI) parks the strobe: the
//   periods pass without a single round trip, and the statistics say how
//   many were skipped. With --strobe fixed (the paper's) every period is a
//   slice: the same count that shows parking, shows its absence.
// - A one-node job whose ranks compute for a few periods between barriers
//   lets those periods pass on its node's lease, without slices.
// - When every rank is blocked in MPI the next slice starts at once
//   ("early"); with --strobe fixed none does. A one-node job's node runs
//   those slices itself, on the lease its strobe grants ("leased": no round
//   trip to the manager); a job on two node managers never does, but its
//   nodes hold the report of a slice's last microphase until their ranks
//   block, so those slices start without a doorbell message, and then run
//   the next slice's DEM themselves ("ahead": no DEM strobe).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <dirent.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <string>
#include <vector>

#include "bcs.grpc.pb.h"
#include "harness.h"
#include "standing.h"
#include "slice_plan.h"
#include "story.h"

using namespace std::chrono_literals;
using bcs::test::describe;
using bcs::test::it_prog;
using bcs::test::prog;
using bcs::test::Standing;
namespace pb = bcs::v1;

namespace {

// These stories count every slice a fresh cluster ran: keep them all.
const char* const kWindow = "1000000";

// What the manager recorded: slices run, started early, run on a node's
// lease, periods skipped.
struct Pace {
  uint64_t strobed = 0, early = 0, leased = 0, skipped = 0, bells = 0, ahead = 0;
  uint64_t early_after_skip = 0;  // early, after periods skipped with nothing to do
};

// Every slice the manager recorded (the stories' window holds them all).
pb::SlicesReply slices_of(const Standing& c) {
  auto stub = pb::Monitor::NewStub(grpc::CreateChannel(c.addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  pb::SlicesRequest req;
  req.set_last(1000000);
  pb::SlicesReply rep;
  const auto st = stub->Slices(&ctx, req, &rep);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return rep;
}

Pace pace_of(const Standing& c) {
  const pb::SlicesReply rep = slices_of(c);
  // A fresh cluster: every slice it ever strobed is in the window.
  EXPECT_EQ(static_cast<uint64_t>(rep.slices_size()), rep.total_slices());
  Pace p;
  for (const auto& s : rep.slices()) {
    p.strobed++;
    p.skipped += s.skipped();
    p.early += s.early() && !s.skipped();
    p.early_after_skip += s.early() && s.skipped();
    p.leased += s.leased();
    p.bells += s.bells();
    p.ahead += s.dem_ahead();
  }
  return p;
}

// The manager's jobs (all users': the stories run as the cluster's user).
std::vector<pb::JobInfo> jobs_of(const Standing& c) {
  auto stub = pb::Jobs::NewStub(grpc::CreateChannel(c.addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  pb::ListReply rep;
  const auto st = stub->List(&ctx, pb::ListRequest{}, &rep);
  EXPECT_TRUE(st.ok()) << st.error_message();
  return {rep.jobs().begin(), rep.jobs().end()};
}

// The most bytes (point-to-point and collective) any recorded slice moved.
uint64_t busiest_slice_bytes(const Standing& c) {
  uint64_t most = 0;
  const pb::SlicesReply rep = slices_of(c);
  for (const auto& s : rep.slices()) most = std::max(most, s.bytes() + s.coll_bytes());
  return most;
}

// How many times node manager `nm`'s strobe receiver (its thread "bcs-sr")
// was put on a CPU: each wake-up is one (the third field of schedstat).
uint64_t strobe_receiver_runs(pid_t nm) {
  const std::string dir = "/proc/" + std::to_string(nm) + "/task";
  DIR* d = opendir(dir.c_str());
  if (!d) return 0;
  uint64_t runs = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream comm(dir + "/" + e->d_name + "/comm");
    std::string name;
    if (!std::getline(comm, name) || name != "bcs-sr") continue;
    std::ifstream stat(dir + "/" + e->d_name + "/schedstat");
    uint64_t on_cpu = 0, waited = 0, n = 0;
    if (stat >> on_cpu >> waited >> n) runs += n;
  }
  closedir(d);
  return runs;
}

// Parameter: how many node managers (1: fused slices; 2: microphase by
// microphase).
class StrobeStory : public bcs::test::Story, public testing::WithParamInterface<int> {
 protected:
  std::string nodes() const { return std::to_string(GetParam()); }
};

TEST_P(StrobeStory, RanksThatComputeLeaveTheDaemonsIdle) {
  Standing c(GetParam(), {"--emds-window", kWindow});
  ASSERT_TRUE(c.up());
  // Two seconds of computing: 4,000 periods of 500 us.
  auto r = c.run({"-n", "2", "--nodes", nodes(), it_prog("it_idle"), "2"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.out.find("idle ok"), std::string::npos);
  const Pace p = pace_of(c);
  // Parked: a few slices for MPI_Init, the barriers and MPI_Finalize, and
  // one every 100 ms while parked (the re-check against a lost bell).
  EXPECT_GT(p.skipped, 10 * p.strobed) << p.strobed << " slices strobed, " << p.skipped
                                        << " periods skipped";
  c.expect_alive_then_stop();
}

TEST_P(StrobeStory, ShortComputeGapsCostNoSlices) {
  Standing c(GetParam(), {"--emds-window", kWindow});
  ASSERT_TRUE(c.up());
  // 100 rounds of 3 ms of computing (sleep), each ended by a barrier: six
  // periods of 500 us per gap, fewer than the strobe waits before parking.
  auto r = c.run({"-n", "2", "--nodes", nodes(), it_prog("it_idle"), "0.003", "100"});
  ASSERT_EQ(r.status, 0) << describe(r);
  const Pace p = pace_of(c);
  if (GetParam() == 1) {
    // The barrier's slice leaves the node on a lease, which lets the empty
    // periods of each gap pass without a slice (where the manager would
    // strobe five or six slices with nothing to do).
    EXPECT_GT(p.skipped, 100u) << p.strobed << " slices strobed";
  } else {
    // Two node managers have no lease: the manager strobes those periods
    // (the gap is too short to park).
    EXPECT_EQ(p.leased, 0u);
  }
  c.expect_alive_then_stop();
}

// ... and without waking for them: a node with nothing to do sleeps
// through the periods until a rank rings (kNmBellOnWork), where it used to
// wake at each period's end to find nothing posted. Rank 1 computes 10 ms
// (20 periods) before each of its 20 sends to rank 0, which waits for it.
// Each period the node woke for would be one run of its strobe receiver;
// the story counts the runs over the job and asks for fewer than half the
// periods skipped. (With BCS_IDLE_SLEEP=off in the node manager's
// environment it fails: 424-432 runs for 368-376 periods skipped, in three
// runs, against 80-83 runs for 375-377 with it.)
TEST_P(StrobeStory, ANodeWithNothingToDoSleepsThroughThePeriods) {
  if (GetParam() != 1) GTEST_SKIP() << "a node's own pacing: one node manager";
  Standing c(1, {"--emds-window", kWindow});
  ASSERT_TRUE(c.up());
  const pid_t nm = c.pids().at(1);
  const uint64_t runs_before = strobe_receiver_runs(nm);
  auto r = c.run({"-n", "2", it_prog("it_idle"), "0.01", "20", "post"});
  ASSERT_EQ(r.status, 0) << describe(r);
  const uint64_t runs = strobe_receiver_runs(nm) - runs_before;
  const Pace p = pace_of(c);
  EXPECT_GT(p.skipped, 200u) << p.strobed << " slices strobed";
  EXPECT_LT(2 * runs, p.skipped) << runs << " runs of the strobe receiver, " << p.skipped
                                 << " periods skipped, " << p.strobed << " slices";
  c.expect_alive_then_stop();
}

// What a period's slice did for a node that has nothing else to do, it
// still does while the node sleeps through the periods: the ranks ring for
// it. With 20 ms slices, (a) rank 1 posts a 256 KiB MPI_Irecv and computes,
// rank 0 posts the MPI_Isend 6 ms later and computes 60 ms: the message
// moves at the period's end (the send rang), and rank 1's first MPI_Test
// finds it; (b) rank 0 polls an MPI_Irecv with MPI_Test while rank 1 sends
// and goes on computing: the poll rang, and the message comes in before
// rank 1 stops. Without those rings (checked, three runs of each) 5 of 10
// rounds are served so, those where the node's lease ends (every 100 ms)
// and the manager's strobe comes at the period's end instead; with them,
// 10 of 10.
TEST_P(StrobeStory, WorkPostedWhileTheNodeSleepsIsDoneAtThePeriodsEnd) {
  if (GetParam() != 1) GTEST_SKIP() << "a node's own pacing: one node manager";
  Standing c(1, {"--emds-window", kWindow});
  ASSERT_TRUE(c.up());
  const int rounds = 10;
  for (const std::string mode : {"large", "poll"}) {
    SCOPED_TRACE(mode);
    auto r = c.run({"--slice", "20ms", "-n", "2", it_prog("it_idle"), "0.06",
                    std::to_string(rounds), mode});
    ASSERT_EQ(r.status, 0) << describe(r);
    const std::string what =
        mode == "large" ? "moved while computing: " : "polled in while computing: ";
    const auto at = r.out.find(what);
    ASSERT_NE(at, std::string::npos) << describe(r);
    int n = -1, of = -1;
    ASSERT_EQ(std::sscanf(r.out.c_str() + at + what.size(), "%d of %d", &n, &of), 2);
    EXPECT_EQ(of, rounds);
    EXPECT_GE(n, rounds - 2) << describe(r);
  }
  c.expect_alive_then_stop();
}

TEST_P(StrobeStory, TheFixedStrobeStrobesEveryPeriod) {
  Standing c(GetParam(), {"--strobe", "fixed", "--emds-window", kWindow});
  ASSERT_TRUE(c.up());
  auto r = c.run({"-n", "2", "--nodes", nodes(), it_prog("it_idle"), "0.5"});
  ASSERT_EQ(r.status, 0) << describe(r);
  const Pace p = pace_of(c);
  EXPECT_EQ(p.skipped, 0u);
  EXPECT_EQ(p.early, 0u);
  // 0.5 s of computing alone is 1,000 periods.
  EXPECT_GT(p.strobed, 500u);
  c.expect_alive_then_stop();
}

TEST_P(StrobeStory, WhenEveryRankIsBlockedTheNextSliceStartsAtOnce) {
  Standing c(GetParam(), {"--emds-window", kWindow});
  ASSERT_TRUE(c.up());
  // 8-byte ping-pong: each rank blocks in MPI_Recv while the other's
  // message is on its way. 5 ms slices: a loaded machine's microphases
  // never fill the period, so the early starts are the strobe's doing.
  auto r = c.run({"--slice", "5ms", "-n", "2", "--nodes", nodes(), prog("prog_pingpong"), "--bench",
                  "200", "8"});
  ASSERT_EQ(r.status, 0) << describe(r);
  const Pace p = pace_of(c);
  // 400 messages: most slices that carried one started early.
  EXPECT_GT(p.early, 200u) << p.strobed << " slices strobed";
  if (GetParam() == 1) {
    // Each message's slice follows one that did work with every rank
    // blocked: the node runs it on its lease, and most of the 400 need no
    // strobe at all.
    EXPECT_GT(p.leased, 200u) << p.strobed << " slices, " << p.early << " early";
  } else {
    EXPECT_EQ(p.leased, 0u) << "a job on two node managers has no lease";
    // Each message's last microphase (its MSM: 8 bytes are delivered
    // there, DmaHelper::deliver_inline) lets the nodes hold their
    // reports until their ranks block (up to the period's end, ~5 ms): the
    // reports say "all blocked" themselves, and most slices start with no
    // doorbell message at all.
    EXPECT_LT(p.bells, p.early / 2) << p.strobed << " slices, " << p.early << " early";
    // And when the hold ends the nodes run the next slice's DEM themselves:
    // most of those slices need no DEM strobe either.
    EXPECT_GT(p.ahead, p.early / 2) << p.strobed << " slices, " << p.early << " early";
  }
  c.expect_alive_then_stop();
}

// One node manager paces its own slices between strobes (its lease), and
// starts the next one at once when a rank posts while another waits in
// MPI: rank 1 sends a message every 2 ms and goes on computing (never
// blocked), rank 0 waits for each. Without that rule neither rank being
// blocked would leave each message to the period's end (not early);
// with it most message slices start early. (Two node managers keep the
// strobe's rules: every rank blocked, or the period.)
TEST_P(StrobeStory, ARankPostingWhileAnotherWaitsStartsTheNextSliceAtOnce) {
  if (GetParam() != 1) GTEST_SKIP() << "a node's own pacing: one node manager";
  Standing c(1, {"--emds-window", kWindow});
  ASSERT_TRUE(c.up());
  const int rounds = 40;
  auto r = c.run({"-n", "2", it_prog("it_idle"), "0.002", std::to_string(rounds), "post"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.out.find("idle ok"), std::string::npos);
  const Pace p = pace_of(c);
  // Each message's slice comes after the periods of rank 1's computing
  // passed with nothing to do (skipped). A lease ends after 100 ms or 256
  // slices, so now and then a message meets a fresh strobe instead, whose
  // start follows the manager's rules.
  EXPECT_GE(p.early_after_skip, static_cast<uint64_t>(rounds / 2))
      << p.strobed << " slices, " << p.early_after_skip << " early after skipped periods, "
      << p.leased << " leased";
  c.expect_alive_then_stop();
}

// ... and when the last local member of a collective posts it. With 50 ms
// slices, every rank sleeps 5 ms, posts an MPI_Iallreduce, sleeps (computes)
// another 5 ms, then tests it. Neither rank is blocked when the collective
// could run, so without that rule its slice waits for the period's end and
// the tests find it pending (but in the rounds whose period happens to end
// in those 5 ms); with it the slice starts at the last post, and at least
// the last member's test finds it done (5 ms is for a loaded machine: the
// slice takes microseconds). The program counts the rounds in which some
// rank's test did: the ranks drift apart by milliseconds, and the first
// member's test then often comes before the last post (rank 0's alone found
// it done in 14-26 of 40 rounds in a third of the runs). With --strobe fixed
// it counts 0. (A node cannot tell that for a collective whose members are
// on other nodes too: two node managers keep the strobe's rules.)
TEST_P(StrobeStory, TheLastLocalMemberOfACollectiveStartsItsSlice) {
  if (GetParam() != 1) GTEST_SKIP() << "a node's own pacing: one node manager";
  Standing c(1, {"--emds-window", kWindow});
  ASSERT_TRUE(c.up());
  const int rounds = 40;
  auto r = c.run({"--slice", "50ms", "-n", "2", it_prog("it_idle"), "0.005",
                  std::to_string(rounds), "coll"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.out.find("idle ok"), std::string::npos);
  int done = -1, of = -1;
  const auto at = r.out.find("coll done before the wait: ");
  ASSERT_NE(at, std::string::npos) << describe(r);
  ASSERT_EQ(std::sscanf(r.out.c_str() + at, "coll done before the wait: %d of %d", &done, &of), 2);
  EXPECT_EQ(of, rounds);
  EXPECT_GE(done, rounds / 2) << describe(r);
  c.expect_alive_then_stop();
}

TEST_P(StrobeStory, PerJobFixedStrobeNeverStartsEarly) {
  Standing c(GetParam(), {"--emds-window", kWindow});
  ASSERT_TRUE(c.up());
  auto r = c.run({"--strobe", "fixed", "--slice", "5ms", "-n", "2", "--nodes", nodes(),
                  prog("prog_pingpong"), "--bench", "20", "8"});
  ASSERT_EQ(r.status, 0) << describe(r);
  const Pace p = pace_of(c);
  EXPECT_EQ(p.early, 0u);
  EXPECT_EQ(p.skipped, 0u);
  c.expect_alive_then_stop();
}

// A slice whose matches are all inline messages (up to kInlineMax bytes,
// which travel inside their descriptors) or eager ones (up to
// kInlineSpanMax, in the ring slots after them) ends with its MSM: the
// receiving node delivers them there, and no P2P runs, so two node managers
// save a round trip per message. Larger messages still move in a P2P.
TEST_P(StrobeStory, ASliceThatMatchesOnlyInlineMessagesEndsWithItsMsm) {
  Standing c(GetParam(), {"--emds-window", kWindow});
  ASSERT_TRUE(c.up());
  // Slices that moved messages, and of them those that ran a P2P.
  struct Moved {
    uint64_t slices = 0, p2p = 0;
  };
  auto moved_since = [&](uint64_t after) {
    Moved m;
    const pb::SlicesReply rep = slices_of(c);
    for (const auto& s : rep.slices())
      if (s.slice() > after && s.chunks() > 0) {
        m.slices++;
        m.p2p += s.p2p_ns() > 0;
      }
    return m;
  };
  auto last_slice = [&] {
    uint64_t last = 0;
    const pb::SlicesReply rep = slices_of(c);
    for (const auto& s : rep.slices()) last = std::max<uint64_t>(last, s.slice());
    return last;
  };
  auto r = c.run({"-n", "2", "--nodes", nodes(), prog("prog_pingpong"), "--bench", "100", "8"});
  ASSERT_EQ(r.status, 0) << describe(r);
  const Moved small = moved_since(0);
  // 200 messages of 8 bytes (and the ping-pong's own few).
  EXPECT_GE(small.slices, 100u);
  EXPECT_EQ(small.p2p, 0u) << small.slices << " slices moved messages";
  uint64_t before = last_slice();
  r = c.run({"-n", "2", "--nodes", nodes(), prog("prog_pingpong"), "--bench", "100", "4096"});
  ASSERT_EQ(r.status, 0) << describe(r);
  const Moved eager = moved_since(before);
  EXPECT_GE(eager.slices, 100u);
  EXPECT_EQ(eager.p2p, 0u) << eager.slices << " slices moved 4 KiB messages";
  for (const char* bytes : {"4097", "65536"}) {
    SCOPED_TRACE(std::string(bytes) + " bytes");
    before = last_slice();
    r = c.run({"-n", "2", "--nodes", nodes(), prog("prog_pingpong"), "--bench", "50", bytes});
    ASSERT_EQ(r.status, 0) << describe(r);
    const Moved large = moved_since(before);
    EXPECT_GE(large.p2p, 100u) << large.slices << " slices moved messages";
  }
  c.expect_alive_then_stop();
}

// Without --chunk a job's per-slice budget is one slice of copying at the
// rate its slowest node manager measured when it started; --chunk still
// names it. Either way a 64 MiB message moves in slices of exactly that
// budget (and the last, smaller one).
TEST_P(StrobeStory, AJobsChunkBudgetIsOneSliceOfCopyingUnlessChunkNamesIt) {
  for (const std::string chunk : {"", "1MiB"}) {
    SCOPED_TRACE(chunk.empty() ? "derived budget" : "--chunk " + chunk);
    Standing c(GetParam(), {"--emds-window", kWindow});
    ASSERT_TRUE(c.up());
    std::vector<std::string> args{"-n", "2", "--nodes", nodes(), "--slice", "500us"};
    if (!chunk.empty()) args.insert(args.end(), {"--chunk", chunk});
    args.insert(args.end(), {prog("prog_pingpong"), "--bench", "1", "67108864"});
    auto r = c.run(args);
    ASSERT_EQ(r.status, 0) << describe(r);
    const auto jobs = jobs_of(c);
    ASSERT_EQ(jobs.size(), 1u);
    const pb::JobInfo& j = jobs[0];
    EXPECT_EQ(j.slice_ns(), 500'000u);
    if (chunk.empty()) {
      EXPECT_GT(j.copy_rate(), 0u) << "every node manager measured its copy rate";
      EXPECT_EQ(j.chunk_bytes(), bcs::mm::chunk_budget(j.copy_rate(), j.slice_ns()));
    } else {
      EXPECT_EQ(j.copy_rate(), 0u) << "named, not derived";
      EXPECT_EQ(j.chunk_bytes(), 1u << 20);
    }
    EXPECT_EQ(busiest_slice_bytes(c), std::min<uint64_t>(j.chunk_bytes(), 64u << 20));
    c.expect_alive_then_stop();
  }
}

// The policies of daemon `pid`'s threads named `thread` (the strobe
// receiver "bcs-sr", UCX's "async"), without SCHED_RESET_ON_FORK.
std::vector<int> thread_policies(pid_t pid, const std::string& thread) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  std::vector<int> policies;
  DIR* d = opendir(dir.c_str());
  if (!d) return policies;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream comm(dir + "/" + e->d_name + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == thread) {
      const int policy = sched_getscheduler(std::atoi(e->d_name));
      if (policy >= 0) policies.push_back(policy & ~SCHED_RESET_ON_FORK);
    }
  }
  closedir(d);
  return policies;
}

// The policy of node manager `nm`'s strobe receiver; -1 if it is not found.
int strobe_receiver_policy(pid_t nm) {
  const auto p = thread_policies(nm, "bcs-sr");
  return p.empty() ? -1 : p.front();
}

// The strobe receiver goes to real-time priority while a rank computes, so
// that its wake-up preempts the rank, and comes back to normal priority
// once the ranks only communicate, where real time only costs
// (docs/architecture.md, Pacing): when no rank computed for 20 ms, or
// sooner when the ping-pong keeps it busy more than half the time (the
// CPU guard; here that comes first, and without either the story fails).
// The job tells when it computes and when it ping-pongs; the story looks
// at every node manager's strobe receiver each time, then lets the job go
// on (a file it waits for). UCX's async thread stays at normal priority in
// every daemon throughout, also while the strobe receivers are at real
// time: it spins while a worker holds UCX's async lock, and at real time
// that starved the strobe sender holding it (sched_hint.h).
TEST_P(StrobeStory, AComputingRankRaisesTheStrobeReceiverUntilTheRanksOnlyCommunicate) {
  if (geteuid() != 0) GTEST_SKIP() << "real-time priority needs root here";
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "2 ranks must be bound, one to a CPU";
  Standing c(GetParam());
  ASSERT_TRUE(c.up());
  const std::string dir = "/tmp/bcs-it-rt-" + bcs::test::marker();
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const std::string go = dir + "/go", stop = dir + "/stop";
  const std::vector<pid_t> daemons = c.pids();  // the manager, then the node managers
  std::vector<pid_t> nms(daemons.begin() + 1, daemons.end());
  // Every daemon's UCX async threads (one per process) at normal priority.
  auto async_normal = [&] {
    for (pid_t p : daemons) {
      const auto pol = thread_policies(p, "async");
      if (pol.empty() || std::any_of(pol.begin(), pol.end(), [](int x) { return x != SCHED_OTHER; }))
        return false;
    }
    return true;
  };
  bool async_normal_while_raised = false;
  // Every strobe receiver at `want`, looked at until a deadline.
  auto all_at = [&](int want) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (std::all_of(nms.begin(), nms.end(),
                      [&](pid_t p) { return strobe_receiver_policy(p) == want; }))
        return true;
      std::this_thread::sleep_for(1ms);
    }
    return false;
  };
  auto touch = [](const std::string& f) { std::ofstream(f) << "x"; };
  bool computing = false, pinging = false, raised = false, lowered = false;
  auto r = c.run({"-n", "2", "--nodes", nodes(), it_prog("it_computes"), go, stop},
                 [&](const std::string& out) {
                   if (!computing && out.find("computing") != std::string::npos) {
                     computing = true;
                     raised = all_at(SCHED_FIFO);
                     async_normal_while_raised = async_normal();
                     touch(go);
                   }
                   if (!pinging && out.find("ping-ponging") != std::string::npos) {
                     pinging = true;
                     lowered = all_at(SCHED_OTHER);
                     touch(stop);
                   }
                 });
  std::remove(go.c_str());
  std::remove(stop.c_str());
  rmdir(dir.c_str());
  ASSERT_EQ(r.status, 0) << describe(r);
  ASSERT_TRUE(computing && pinging) << r.out;
  EXPECT_TRUE(raised) << "a strobe receiver stayed at normal priority while its rank computed";
  EXPECT_TRUE(lowered) << "a strobe receiver stayed at real time while the ranks only ping-ponged";
  EXPECT_TRUE(async_normal_while_raised)
      << "a daemon's UCX async thread ran at real time (or was not found by its name)";
  c.expect_alive_then_stop();
}

INSTANTIATE_TEST_SUITE_P(NodeManagers, StrobeStory, testing::Values(1, 2),
                         [](const auto& i) { return std::to_string(i.param) + "nm"; });

}  // namespace
