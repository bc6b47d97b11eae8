// Stories of gang scheduling (issue 43): jobs that share node managers take
// turns in quanta of an Ousterhout matrix (bcs-mm --mpl, --quantum); while
// one runs, the other's ranks are stopped. Same means as space_test.cc
// (it_meet, bounded polls of files and `bcs jobs`, no timing thresholds).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gang_jobs.h"

using namespace bcs::test::space;

namespace {

using GangStory = bcs::test::Story;

// The manager's options of every gang story: 200 ms quanta, long enough
// for `bcs jobs` to be asked twice within one.
const std::vector<std::string> kGang{"--mpl", "2", "--quantum", "200ms"};

// Issue 43's gang story: two jobs on the same two node managers at --mpl 2
// take turns. Each runs in quanta of its own; whenever `bcs jobs` shows
// one suspended twice in a row within one of its suspensions (its quanta
// unchanged), every rank of it read in between was stopped ('T') and it
// ran no slice; both complete with their data checked.
TEST_F(GangStory, TwoJobsOnTheSameNodeManagersTakeTurnsAtMpl2) {
  TempDir dir("bcs-gang");
  ASSERT_FALSE(dir.path.empty());
  const std::string& d = dir.path;
  Standing c(2, kGang);
  ASSERT_TRUE(c.up());
  const Half& both = kBoth;
  {
    Jobs jobs(c);
    // Both get to their hold, through quanta of their own (half their lines).
    const auto [a, b] = start_two(jobs, d, 40);
    ASSERT_NE(a, 0u);
    std::string missing;
    const std::string bad = while_suspended(
        c, a, b, "suspended",
        [&](const std::string& name) {
          std::string states;
          for (int r = 0; r < both.ranks; ++r) states += state_of(pid_of(d, name, r));
          return states;
        },
        [&](const std::string& name, const std::string& states) {
          return states == std::string(static_cast<size_t>(both.ranks), 'T')
                     ? std::string()
                     : name + "'s ranks were '" + states + "' while it was suspended; ";
        },
        &missing);
    EXPECT_EQ(bad, "");
    EXPECT_EQ(missing, "") << "not seen suspended (twice within one suspension)";
    // They go on taking turns while both hold: each comes back for a
    // second quantum (bounded).
    auto rows = job_rows(c);
    auto turned = [&] {
      return rows.count(a) && rows.count(b) && rows.at(a).quanta >= 2 && rows.at(b).quanta >= 2;
    };
    for (auto until = std::chrono::steady_clock::now() + kBound;
         !turned() && std::chrono::steady_clock::now() < until;)
      rows = job_rows(c);
    EXPECT_TRUE(turned()) << "quanta: A " << (rows.count(a) ? rows.at(a).quanta : 0) << ", B "
                          << (rows.count(b) ? rows.at(b).quanta : 0);
    // The matrix: a row each, both node managers in it, one row running.
    const RunResult m = c.command({"jobs", "--matrix"});
    EXPECT_EQ(m.status, 0) << describe(m);
    std::istringstream lines(m.out);
    std::string line;
    std::getline(lines, line);
    EXPECT_THAT(line, testing::MatchesRegex(" *ROW +n1 +n2"));
    std::set<std::vector<std::string>> held;
    int active = 0;
    while (std::getline(lines, line)) {
      active += !line.empty() && line[0] == '*';
      std::istringstream f(line.substr(1));
      std::vector<std::string> cells;
      for (std::string w; f >> w;) cells.push_back(w);
      if (!cells.empty()) held.insert({cells.begin() + 1, cells.end()});
    }
    const std::string sa = std::to_string(a), sb = std::to_string(b);
    EXPECT_EQ(held, (std::set<std::vector<std::string>>{{sa, sa}, {sb, sb}})) << m.out;
    EXPECT_EQ(active, 1) << m.out;
    release(d, "A");
    release(d, "B");
    expect_whole(jobs.result(a), "A", both, 40, "nobody", "B");
    expect_whole(jobs.result(b), "B", both, 40, "nobody", "A");
  }
  // The EMDS recorded the switches, with what they cost, in the slices
  // that followed them.
  const RunResult st = c.command({"stats", "--last", "100000"});
  EXPECT_EQ(st.status, 0) << describe(st);
  EXPECT_THAT(st.out, testing::ContainsRegex("\\(gang scheduling: [1-9][0-9]* switches before these "
                                             "slices, [0-9.]+ us in all\\)"));
  c.expect_alive_then_stop();
}

// Waits (bounded) until `bcs jobs` shows job `id` suspended; its rows then.
std::map<uint64_t, Row> await_suspended(const Standing& c, uint64_t id) {
  auto rows = job_rows(c);
  for (auto until = std::chrono::steady_clock::now() + kBound;
       !(rows.count(id) && rows.at(id).state == "suspended") &&
       std::chrono::steady_clock::now() < until;)
    rows = job_rows(c);
  return rows;
}

// A rank of a suspended job SIGKILLed from outside ends that job at once
// (137, naming the rank) and nothing of the other, which completes.
TEST_F(GangStory, ARankOfASuspendedJobKilledEndsOnlyThatJob) {
  TempDir dir("bcs-gang");
  ASSERT_FALSE(dir.path.empty());
  const std::string& d = dir.path;
  Standing c(2, kGang);
  ASSERT_TRUE(c.up());
  const Half& both = kBoth;
  {
    Jobs jobs(c);
    const auto [a, b] = start_two(jobs, d, 10);
    ASSERT_NE(a, 0u);
    ASSERT_EQ(await_suspended(c, a).at(a).state, "suspended");
    const pid_t victim = pid_of(d, "A", 1);
    ASSERT_GT(victim, 0);
    ASSERT_EQ(::kill(victim, SIGKILL), 0);
    const RunResult& ra = jobs.result(a);
    EXPECT_EQ(ra.status, 128 + SIGKILL) << describe(ra);
    EXPECT_THAT(ra.err, HasSubstr("rank 1 (pid " + std::to_string(victim))) << describe(ra);
    for (int r = 0; r < both.ranks; ++r)
      EXPECT_EQ(::kill(pid_of(d, "B", r), 0), 0) << "rank " << r << " of B died with A";
    release(d, "B");
    expect_whole(jobs.result(b), "B", both, 10, "nobody", "A");
  }
  c.expect_alive_then_stop();
}

// A user may SIGCONT their own job's stopped ranks (the kernel allows it
// within a uid). The node manager finds such a rank running at its next
// switch and stops it again; the third time, it ends the job, naming the
// rank, and the other job completes.
TEST_F(GangStory, RanksContinuedFromOutsideWhileSuspendedAreStoppedAgainThenEnded) {
  TempDir dir("bcs-gang");
  ASSERT_FALSE(dir.path.empty());
  const std::string& d = dir.path;
  Standing c(2, kGang);
  ASSERT_TRUE(c.up());
  const Half& both = kBoth;
  {
    Jobs jobs(c);
    const auto [a, b] = start_two(jobs, d, 10);
    ASSERT_NE(a, 0u);
    const pid_t rank0 = pid_of(d, "A", 0);
    ASSERT_GT(rank0, 0);
    // Once per suspension of A (its quanta differ), while `bcs jobs` says
    // it is suspended: its rank 0 continued from outside.
    uint64_t last_quanta = UINT64_MAX;
    int sent = 0;
    std::string state;
    for (auto until = std::chrono::steady_clock::now() + kBound;
         std::chrono::steady_clock::now() < until;) {
      const auto rows = job_rows(c);
      if (!rows.count(a)) break;
      state = rows.at(a).state;
      if (state != "suspended" && state != "running" && state != "suspending") break;  // ending
      if (state == "suspended" && rows.at(a).quanta != last_quanta) {
        last_quanta = rows.at(a).quanta;
        if (::kill(rank0, SIGCONT) == 0) ++sent;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const RunResult& ra = jobs.result(a);
    EXPECT_GE(sent, 3);
    EXPECT_EQ(ra.status, 128 + SIGKILL) << describe(ra);
    EXPECT_THAT(ra.err, HasSubstr("was continued from outside (SIGCONT) 3 times while its job was "
                                  "suspended by gang scheduling"))
        << describe(ra);
    release(d, "B");
    expect_whole(jobs.result(b), "B", both, 10, "nobody", "A");
  }
  c.expect_alive_then_stop();
}

// Replay per job under gang scheduling: a run of a nondeterministic
// program (prog_nondet: the arrival order decides its output) recorded
// while it took turns with job A on the same node managers replays to the
// same output alone, and one recorded alone replays to its output while
// taking turns with A.
TEST_F(GangStory, ARecordingMadeTakingTurnsReplaysAloneAndTheReverse) {
  TempDir dir("bcs-gang");
  ASSERT_FALSE(dir.path.empty());
  const std::string& d = dir.path;
  std::string shared_want;
  Standing c(2, kGang);
  ASSERT_TRUE(c.up());
  {
    Jobs jobs(c);
    const uint64_t a = jobs.launch({"--host", kBoth.hosts, meet(), d, "A", "hold"});
    ASSERT_NE(a, 0u);
    ASSERT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "running", true}}));
    // Recorded on both node managers, in turns with A.
    const RunResult rec = bcs::test::bcs_run(
        with_nondet({"--manager", c.addr, "--record", d + "/shared", "--host", "n1:2,n2:2", "-n", "4"}), 60s);
    ASSERT_EQ(rec.status, 0) << describe(rec);
    shared_want = nondet_line(rec);
    ASSERT_THAT(shared_want, HasSubstr("nondet master hash "));
    // Recorded alone (embedded), replayed here in turns with A.
    const RunResult alone = bcs::test::bcs_run(with_nondet({"--record", d + "/alone", "-n", "4"}), 60s);
    ASSERT_EQ(alone.status, 0) << describe(alone);
    const std::string alone_want = nondet_line(alone);
    ASSERT_THAT(alone_want, HasSubstr("nondet master hash "));
    const RunResult again = c.command({"replay", d + "/alone", "--nodes", "2", "--timeout", "50s"}, 60s);
    ASSERT_EQ(again.status, 0) << describe(again);
    EXPECT_EQ(nondet_line(again), alone_want) << "a recording made alone, replayed in turns with A";
    release(d, "A");
    expect_whole(jobs.result(a), "A", kBoth, 0, "nobody", "B");
  }
  c.expect_alive_then_stop();
  // The recording made in turns with A, replayed alone (embedded).
  const RunResult r = bcs::test::run({bcs::test::bin("bcs"), "replay", d + "/shared", "--timeout", "50s"}, 60s);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(nondet_line(r), shared_want) << "a recording made in turns with A, replayed alone";
}

// With the matrix full (two rows on both node managers), a third job
// queues; `bcs jobs` shows it queued beside one running and one suspended
// job; it starts when a slot frees (A ends) and completes; `bcs kill`
// ends a suspended job.
TEST_F(GangStory, AThirdJobWaitsForAFreeRowAndAKillEndsASuspendedJob) {
  TempDir dir("bcs-gang");
  ASSERT_FALSE(dir.path.empty());
  const std::string& d = dir.path;
  Standing c(2, kGang);
  ASSERT_TRUE(c.up());
  const Half& both = kBoth;
  {
    Jobs jobs(c);
    const auto [a, b] = start_two(jobs, d, 0);
    ASSERT_NE(a, 0u);
    const uint64_t x = jobs.launch({"--host", both.hosts, meet(), d, "C", "lines", "10"});
    ASSERT_NE(x, 0u);
    // The three states on the way: one running, one suspended, one queued.
    std::set<std::string> seen;
    auto rows = job_rows(c);
    for (auto until = std::chrono::steady_clock::now() + kBound;
         std::chrono::steady_clock::now() < until;) {
      rows = job_rows(c);
      if (rows.count(x) && rows.at(x).state == "queued" && rows.count(a) && rows.count(b)) {
        const std::set<std::string> ab{rows.at(a).state, rows.at(b).state};
        if (ab == std::set<std::string>{"running", "suspended"}) break;
      }
    }
    ASSERT_TRUE(rows.count(x) && rows.count(a) && rows.count(b));
    EXPECT_EQ(rows.at(x).state, "queued");
    EXPECT_EQ((std::set<std::string>{rows.at(a).state, rows.at(b).state}),
              (std::set<std::string>{"running", "suspended"}));
    // The suspended one, killed (a suspended job's ranks die at once):
    // C takes its row, and completes beside the other, which then ends too.
    const bool a_suspended = rows.at(a).state == "suspended";
    const uint64_t killed = a_suspended ? a : b, other = a_suspended ? b : a;
    const RunResult k = c.kill_job(killed);
    EXPECT_EQ(k.status, 0) << describe(k);
    EXPECT_EQ(jobs.result(killed).status, 143) << describe(jobs.result(killed));
    expect_whole(jobs.result(x), "C", both, 10, "nobody", "A");
    release(d, a_suspended ? "B" : "A");
    expect_whole(jobs.result(other), a_suspended ? "B" : "A", both, 0, "nobody", "C");
  }
  c.expect_alive_then_stop();
}

}  // namespace

namespace {

// --timeout counts the job's own running time (issue 43): A, run with
// `bcs run --timeout 2s` beside B on the same two node managers at --mpl 2,
// is suspended for B's quanta on the way; it is killed only once it has
// run 2 s itself (exit 124), and bcs says how long it was suspended. Both
// spin forever (it_computes never told to go on); B ends by `bcs kill`.
TEST_F(GangStory, ATimeoutCountsOnlyRunningTimeAndSaysHowLongTheJobWasSuspended) {
  TempDir dir("bcs-gang");
  ASSERT_FALSE(dir.path.empty());
  const std::string& d = dir.path;
  Standing c(2, kGang);
  ASSERT_TRUE(c.up());
  const std::string spin = bcs::test::it_prog("it_computes");
  {
    Jobs jobs(c);
    const uint64_t b = jobs.launch({"--host", kBoth.hosts, spin, d + "/B.go", d + "/B.stop"});
    ASSERT_NE(b, 0u);
    EXPECT_PRED_FORMAT1(seen, await(c, d, {{"B", b, "running", false}}));
    // The harness's own limit (60 s) is the guard; bcs's --timeout ends A.
    const RunResult ra =
        c.command({"run", "--timeout", "2s", "--host", kBoth.hosts, spin, d + "/A.go", d + "/A.stop"});
    EXPECT_FALSE(ra.timed_out) << describe(ra);
    EXPECT_EQ(ra.status, 124) << describe(ra);
    EXPECT_THAT(ra.err, HasSubstr("timed out after 2s of running time (also ")) << describe(ra);
    EXPECT_THAT(ra.err, HasSubstr(" s suspended)")) << describe(ra);
    const RunResult k = c.kill_job(b);
    EXPECT_EQ(k.status, 0) << describe(k);
    const RunResult& rb = jobs.result(b);
    EXPECT_FALSE(rb.timed_out) << describe(rb);
    EXPECT_EQ(rb.status, 143) << describe(rb);
  }
  c.expect_alive_then_stop();
}

}  // namespace
