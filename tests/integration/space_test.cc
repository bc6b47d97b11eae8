// Stories of space sharing (issue 43, step 1): on a standing cluster, jobs
// whose node managers do not overlap run at the same time, each with its
// own output, exit status, failures and statistics; a job whose node
// managers are held waits for them, first come first served.
//
// Each job runs tests/integration/meet.c (it_meet): its rank 0 proves the
// job ran while another one did (a two-way handshake through files of a
// directory the story owns, bounded), holds until the story releases it
// (a file), prints numbered lines whose data it checked, and ends with a
// checked ring. Nothing here waits on time: every wait is a bounded poll
// of files or of `bcs jobs`, and its failure says what it saw meanwhile.
//
// Against a manager that runs one job at a time (bcs-mm --space-share
// off) the concurrency stories fail at their bounded polls, saying that
// job B stayed queued while job A ran.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "space_jobs.h"

using namespace bcs::test::space;
using bcs::test::Story;

namespace {

// ------------------------------------------------------------- 2 and 4 NMs

class SpaceSharing : public Story, public testing::WithParamInterface<int> {
 protected:
  // Jobs A (the first half of the node managers) and B (the second), each
  // meeting the other, B with `b_lines` numbered lines, both held: the
  // story's start. Returns "" once both are running and holding, with both
  // meetings done; else what was seen.
  std::string start_both(const Standing& c, Jobs& jobs, const std::string& dir, int b_lines) {
    a_ = jobs.launch({"--host", A.hosts, "-n", A.n(), meet(), dir, "A", "meet", "B", "hold"});
    b_ = jobs.launch({"--host", B.hosts, "-n", B.n(), meet(), dir, "B", "meet", "A", "lines",
                      std::to_string(b_lines), "hold"});
    if (!a_ || !b_) return "a job was not launched";
    const std::string why = await(c, dir, {{"A", a_, "running", true}, {"B", b_, "running", true}});
    if (why.empty()) return "";
    return "jobs A (--host " + A.hosts + ") and B (--host " + B.hosts +
           ") share no node manager, but did not run at once:\n" + why;
  }
  const Half A = half(GetParam(), false), B = half(GetParam(), true);
  uint64_t a_ = 0, b_ = 0;
};

// Issue 43's first acceptance story: two jobs on disjoint node managers
// both run at once (each rank 0 sees the other job running: it_meet's
// handshake) and both complete with their data checked.
TEST_P(SpaceSharing, TwoJobsOnDisjointNodeManagersRunAtOnce) {
  TempDir dir("bcs-space");
  ASSERT_FALSE(dir.path.empty());
  Standing c(GetParam());
  ASSERT_TRUE(c.up());
  {
    Jobs jobs(c);
    const uint64_t a = jobs.launch({"--host", A.hosts, "-n", A.n(), meet(), dir.path, "A", "meet",
                                    "B", "lines", "20", "hold"});
    const uint64_t b = jobs.launch({"--host", B.hosts, "-n", B.n(), meet(), dir.path, "B", "meet",
                                    "A", "lines", "20", "hold"});
    ASSERT_NE(a, 0u);
    ASSERT_NE(b, 0u);
    // Not an ASSERT: what the jobs say when they end is the rest of the
    // story (it_meet names the job it did not see).
    EXPECT_PRED_FORMAT1(seen,
                        await(c, dir.path, {{"A", a, "running", true}, {"B", b, "running", true}}))
        << "jobs on disjoint node managers (A on " << A.hosts << ", B on " << B.hosts
        << ") did not run at once";
    release(dir.path, "A");
    release(dir.path, "B");
    expect_whole(jobs.result(a), "A", A, 20, "B", "B");
    expect_whole(jobs.result(b), "B", B, 20, "A", "A");
    EXPECT_PRED_FORMAT1(seen,
                        await(c, dir.path, {{"A", a, "done", false}, {"B", b, "done", false}}));
  }
  c.expect_alive_then_stop();
}

// Killing one of two jobs running at once leaves the other's output
// complete (half of its lines printed before the kill, half after) and its
// exit status 0.
TEST_P(SpaceSharing, KillingOneLeavesTheOthersOutputComplete) {
  TempDir dir("bcs-space");
  ASSERT_FALSE(dir.path.empty());
  Standing c(GetParam());
  ASSERT_TRUE(c.up());
  {
    Jobs jobs(c);
    const std::string why = start_both(c, jobs, dir.path, 200);
    ASSERT_PRED_FORMAT1(seen, why);
    const auto k = c.kill_job(a_);
    EXPECT_EQ(k.status, 0) << describe(k);
    const RunResult& a = jobs.result(a_);
    EXPECT_EQ(a.status, 143) << describe(a);
    EXPECT_THAT(a.err, HasSubstr("killed: requested with `bcs kill`")) << describe(a);
    // B runs on, held where it was, and has its first half of lines.
    EXPECT_PRED_FORMAT1(seen, await(c, dir.path, {{"B", b_, "running", true}}))
        << "job B after A's kill";
    release(dir.path, "B");
    expect_whole(jobs.result(b_), "B", B, 200, "A", "A");
  }
  c.expect_alive_then_stop();
}

// A rank of A SIGKILLed from outside (as an OOM killer would) ends A with
// 137, naming that rank, and nothing of B: its ranks still run, and it
// completes with 0.
TEST_P(SpaceSharing, ARankSigkilledEndsOnlyItsJob) {
  TempDir dir("bcs-space");
  ASSERT_FALSE(dir.path.empty());
  Standing c(GetParam());
  ASSERT_TRUE(c.up());
  {
    Jobs jobs(c);
    const std::string why = start_both(c, jobs, dir.path, 20);
    ASSERT_PRED_FORMAT1(seen, why);
    const pid_t victim = pid_of(dir.path, "A", 1);
    ASSERT_GT(victim, 0);
    ASSERT_EQ(::kill(victim, SIGKILL), 0);
    const RunResult& a = jobs.result(a_);
    EXPECT_EQ(a.status, 128 + SIGKILL) << describe(a);
    EXPECT_THAT(a.err, HasSubstr("rank 1 (pid " + std::to_string(victim))) << describe(a);
    EXPECT_THAT(a.err, HasSubstr("was killed by signal 9")) << describe(a);
    // A's other ranks are gone; every rank of B is alive.
    for (int r = 0; r < A.ranks; ++r)
      EXPECT_NE(::kill(pid_of(dir.path, "A", r), 0), 0) << "rank " << r << " of A outlived its job";
    for (int r = 0; r < B.ranks; ++r)
      EXPECT_EQ(::kill(pid_of(dir.path, "B", r), 0), 0) << "rank " << r << " of B died with A";
    EXPECT_PRED_FORMAT1(seen, await(c, dir.path, {{"B", b_, "running", true}}))
        << "job B after A's rank died";
    release(dir.path, "B");
    expect_whole(jobs.result(b_), "B", B, 20, "A", "A");
  }
  c.expect_alive_then_stop();
}

// A stalled job delays no other: with A's first node manager stopped
// (SIGSTOP: A's microphases cannot complete, its strobes go unanswered),
// B runs to its end with every line; once n1 runs again, A completes too.
TEST_P(SpaceSharing, AStoppedNodeManagerDelaysOnlyItsJob) {
  TempDir dir("bcs-space");
  ASSERT_FALSE(dir.path.empty());
  Standing c(GetParam());
  ASSERT_TRUE(c.up());
  {
    Jobs jobs(c);
    const std::string why = start_both(c, jobs, dir.path, 50);
    ASSERT_PRED_FORMAT1(seen, why);
    const pid_t n1 = c.nm("n1")->pid();
    ASSERT_EQ(::kill(n1, SIGSTOP), 0);
    // Continued however the story ends, so the cluster can stop.
    struct Cont {
      pid_t pid;
      ~Cont() { ::kill(pid, SIGCONT); }
    } cont{n1};
    release(dir.path, "B");
    expect_whole(jobs.result(b_), "B", B, 50, "A", "A");
    EXPECT_PRED_FORMAT1(seen, await(c, dir.path, {{"A", a_, "running", true}}))
        << "job A while its node manager n1 was stopped";
    ASSERT_EQ(::kill(n1, SIGCONT), 0);
    release(dir.path, "A");
    expect_whole(jobs.result(a_), "A", A, 0, "B", "B");
  }
  c.expect_alive_then_stop();
}

// A node manager SIGKILLed ends only the jobs that had ranks on it: A
// (on n1) ends non-zero naming n1; B completes with 0.
TEST_P(SpaceSharing, ALostNodeManagerEndsOnlyTheJobsOnIt) {
  TempDir dir("bcs-space");
  ASSERT_FALSE(dir.path.empty());
  Standing c(GetParam());
  ASSERT_TRUE(c.up());
  {
    Jobs jobs(c);
    const std::string why = start_both(c, jobs, dir.path, 20);
    ASSERT_PRED_FORMAT1(seen, why);
    const pid_t n1 = c.nm("n1")->pid();
    ASSERT_EQ(::kill(n1, SIGKILL), 0);
    const RunResult& a = jobs.result(a_);
    EXPECT_NE(a.status, 0) << describe(a);
    EXPECT_FALSE(a.timed_out) << describe(a);
    EXPECT_THAT(a.err, HasSubstr("node manager n1 (pid " + std::to_string(n1) + ") was lost"))
        << describe(a);
    for (int r = 0; r < B.ranks; ++r)
      EXPECT_EQ(::kill(pid_of(dir.path, "B", r), 0), 0) << "rank " << r << " of B died with n1";
    EXPECT_PRED_FORMAT1(seen, await(c, dir.path, {{"B", b_, "running", true}}))
        << "job B after n1 was lost";
    release(dir.path, "B");
    expect_whole(jobs.result(b_), "B", B, 20, "A", "A");
  }
  expect_only_lost_then_stop(c, "n1");
}

// Each job's statistics hold only its own: two jobs run at once, each with
// a job directory (slices.csv, node-NAME.csv, the ranks' MMDS summaries),
// and `bcs stats JOB` of each names only its ranks on its node managers.
TEST_P(SpaceSharing, EachJobsStatsHoldOnlyItsSlices) {
  TempDir dir("bcs-space");
  ASSERT_FALSE(dir.path.empty());
  Standing c(GetParam());
  ASSERT_TRUE(c.up());
  // Plain `bcs run` here (a job directory needs a waiting client), each
  // bounded by its --timeout; it_meet's handshake holds neither longer
  // than 30 s.
  RunResult ra, rb;
  auto run = [&](const std::string& name, const Half& h, const std::string& other, RunResult* r) {
    *r = bcs::test::bcs_run(
        {"--manager", c.addr, "--job-dir", dir.path + "/" + name, "--host", h.hosts, "-n", h.n(),
         meet(), dir.path, name, "meet", other, "lines", "50"},
        90s, {{"BCS_MDS", "summary"}});
  };
  {
    std::thread ta([&] { run("A", A, "B", &ra); });
    std::thread tb([&] { run("B", B, "A", &rb); });
    ta.join();
    tb.join();
  }
  expect_whole(ra, "A", A, 50, "B", "B");
  expect_whole(rb, "B", B, 50, "A", "A");
  // The job ids, as the ranks had them ($BCS_JOB).
  auto id_of = [](const RunResult& r, const std::string& name) -> uint64_t {
    const std::string key = name + " ok: ";
    const size_t p = r.out.find(key);
    const size_t j = p == std::string::npos ? p : r.out.find("job ", p);
    return j == std::string::npos ? 0 : std::stoull(r.out.substr(j + 4));
  };
  const uint64_t a = id_of(ra, "A"), b = id_of(rb, "B");
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  ASSERT_NE(a, b);
  for (const auto& [name, id, h, other] :
       {std::tuple{std::string("A"), a, A, B}, std::tuple{std::string("B"), b, B, A}}) {
    SCOPED_TRACE("job " + name + " (" + std::to_string(id) + ")");
    const std::string jd = dir.path + "/" + name;
    // slices.csv: the job's slices only (its job column), in order.
    std::ifstream in(jd + "/slices.csv");
    std::string header;
    ASSERT_TRUE(std::getline(in, header)) << jd << "/slices.csv";
    const std::vector<std::string> cols = fields(header);
    size_t job_col = cols.size(), slice_col = cols.size();
    for (size_t i = 0; i < cols.size(); ++i) {
      if (cols[i] == "job") job_col = i;
      if (cols[i] == "slice") slice_col = i;
    }
    ASSERT_LT(job_col, cols.size()) << header;
    ASSERT_LT(slice_col, cols.size()) << header;
    size_t rows = 0, others = 0;
    uint64_t last = 0;
    for (std::string line; std::getline(in, line);) {
      const std::vector<std::string> f = fields(line);
      ASSERT_EQ(f.size(), cols.size()) << line;
      ++rows;
      if (std::stoull(f[job_col]) != id) ++others;
      const uint64_t s = std::stoull(f[slice_col]);
      EXPECT_TRUE(rows == 1 || s > last) << "slice " << s << " after " << last;
      last = s;
    }
    EXPECT_GT(rows, 0u) << "no slices in " << jd << "/slices.csv";
    EXPECT_EQ(others, 0u) << others << " of " << rows << " slices of " << jd
                          << "/slices.csv belong to another job";
    // Its node managers' series, and no other's.
    std::set<std::string> node_files, want;
    for (const auto& n : h.names) want.insert("node-" + n + ".csv");
    for (const auto& e : std::filesystem::directory_iterator(jd)) {
      const std::string f = e.path().filename();
      if (f.rfind("node-", 0) == 0) node_files.insert(f);
    }
    EXPECT_EQ(node_files, want);
    // The ranks' MMDS summaries, from the manager: its ranks on its nodes.
    const RunResult st = c.command({"stats", std::to_string(id), "--per-rank"});
    ASSERT_EQ(st.status, 0) << describe(st);
    EXPECT_THAT(st.out, HasSubstr("MMDS summary: " + h.n() + " ranks")) << st.out;
    for (const auto& n : other.names)
      EXPECT_THAT(st.out, testing::Not(HasSubstr("(" + n + ")"))) << st.out;
    size_t named = 0;
    for (const auto& n : h.names) named += bcs::test::count(st.out, "(" + n + ")\n");
    EXPECT_EQ(named, static_cast<size_t>(h.ranks)) << st.out;
  }
  c.expect_alive_then_stop();
}

INSTANTIATE_TEST_SUITE_P(Space, SpaceSharing, testing::Values(2, 4),
                         [](const auto& i) { return std::to_string(i.param) + "nm"; });

// ------------------------------------------------------- 2 node managers

using SpaceQueue = Story;

// A on n1 and B on n2 run; C, for n1, is queued and stays so while B ends
// (a node manager freed, but not its own); once A ends C runs, then
// completes. `bcs jobs` shows the states on the way.
TEST_F(SpaceQueue, AThirdJobWaitsForAFreeNodeAndSaysWhy) {
  TempDir dir("bcs-space");
  ASSERT_FALSE(dir.path.empty());
  Standing c(2, {"--mpl", "1"});  // space sharing only: jobs sharing a node wait
  ASSERT_TRUE(c.up());
  const std::string& d = dir.path;
  {
    Jobs jobs(c);
    const uint64_t a = jobs.launch({"--host", "n1:2", meet(), d, "A", "hold"});
    const uint64_t b = jobs.launch({"--host", "n2:2", meet(), d, "B", "hold"});
    ASSERT_NE(a, 0u);
    ASSERT_NE(b, 0u);
    ASSERT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "running", true}, {"B", b, "running", true}}))
        << "A (n1) and B (n2) did not run at once";
    const uint64_t cj = jobs.launch({"--host", "n1:2", meet(), d, "C", "hold"});
    ASSERT_NE(cj, 0u);
    // (The manager may say why C waits, in a column of its own; its words
    // are not this story's.)
    EXPECT_PRED_FORMAT1(
        seen,
        await(c, d,
              {{"A", a, "running", true}, {"B", b, "running", true}, {"C", cj, "queued", false}}));
    // n2 is free once B ends: not C's.
    release(d, "B");
    expect_whole(jobs.result(b), "B", {"n2:2", {"n2"}, 2}, 0, "nobody", "A");
    EXPECT_PRED_FORMAT1(
        seen,
        await(c, d,
              {{"A", a, "running", true}, {"B", b, "done", false}, {"C", cj, "queued", false}}));
    EXPECT_FALSE(exists(d + "/C.started")) << "C started while A held n1";
    // n1 is free once A ends: C runs there.
    release(d, "A");
    expect_whole(jobs.result(a), "A", {"n1:2", {"n1"}, 2}, 0, "nobody", "C");
    EXPECT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "done", false}, {"C", cj, "running", true}}));
    release(d, "C");
    expect_whole(jobs.result(cj), "C", {"n1:2", {"n1"}, 2}, 0, "nobody", "A");
    EXPECT_PRED_FORMAT1(
        seen,
        await(c, d, {{"A", a, "done", false}, {"B", b, "done", false}, {"C", cj, "done", false}}));
  }
  c.expect_alive_then_stop();
}

// A job given a count of node managers (--nodes 1) while A holds n1 goes
// to the free one, n2, and runs at once: it completes while A still runs.
TEST_F(SpaceQueue, ACountBasedJobGoesToAFreeNodeManager) {
  TempDir dir("bcs-space");
  ASSERT_FALSE(dir.path.empty());
  Standing c(2);
  ASSERT_TRUE(c.up());
  const std::string& d = dir.path;
  {
    Jobs jobs(c);
    const uint64_t a = jobs.launch({"--host", "n1:2", meet(), d, "A", "hold"});
    ASSERT_NE(a, 0u);
    ASSERT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "running", true}}));
    const uint64_t b = jobs.launch({"--nodes", "1", "-n", "2", meet(), d, "B", "hold"});
    ASSERT_NE(b, 0u);
    ASSERT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "running", true}, {"B", b, "running", true}}))
        << "a --nodes 1 job did not start on the free node manager while A held n1";
    release(d, "B");
    expect_whole(jobs.result(b), "B", {"n2:2", {"n2"}, 2}, 0, "nobody", "A");
    EXPECT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "running", true}, {"B", b, "done", false}}));
    release(d, "A");
    expect_whole(jobs.result(a), "A", {"n1:2", {"n1"}, 2}, 0, "nobody", "B");
  }
  c.expect_alive_then_stop();
}

// What holds today and must hold after: a job naming a node manager that
// another job holds waits for it (queued, not started), and runs there
// once it is free.
TEST_F(SpaceQueue, AJobNamingABusyNodeManagerWaitsForIt) {
  TempDir dir("bcs-space");
  ASSERT_FALSE(dir.path.empty());
  Standing c(2, {"--mpl", "1"});  // space sharing only: jobs sharing a node wait
  ASSERT_TRUE(c.up());
  const std::string& d = dir.path;
  {
    Jobs jobs(c);
    const uint64_t a = jobs.launch({"--host", "n1:2", meet(), d, "A", "hold"});
    ASSERT_NE(a, 0u);
    ASSERT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "running", true}}));
    const uint64_t cj = jobs.launch({"--host", "n1:2", meet(), d, "C", "lines", "10"});
    ASSERT_NE(cj, 0u);
    EXPECT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "running", true}, {"C", cj, "queued", false}}));
    EXPECT_FALSE(exists(d + "/C.started")) << "C started while A held n1";
    release(d, "A");
    expect_whole(jobs.result(a), "A", {"n1:2", {"n1"}, 2}, 0, "nobody", "C");
    expect_whole(jobs.result(cj), "C", {"n1:2", {"n1"}, 2}, 10, "nobody", "A");
  }
  c.expect_alive_then_stop();
}

// First come, first served, today and after: C, queued for n1 and n2
// while A holds n1, is not passed by D, which came later for n2 alone
// (free meanwhile); D runs once C is done.
TEST_F(SpaceQueue, ALaterJobDoesNotPassAQueuedOneOnItsNodes) {
  TempDir dir("bcs-space");
  ASSERT_FALSE(dir.path.empty());
  Standing c(2, {"--mpl", "1"});  // space sharing only: jobs sharing a node wait
  ASSERT_TRUE(c.up());
  const std::string& d = dir.path;
  {
    Jobs jobs(c);
    const uint64_t a = jobs.launch({"--host", "n1:2", meet(), d, "A", "hold"});
    ASSERT_NE(a, 0u);
    ASSERT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "running", true}}));
    const uint64_t cj = jobs.launch({"--host", "n1,n2", meet(), d, "C", "hold"});
    ASSERT_NE(cj, 0u);
    ASSERT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "running", true}, {"C", cj, "queued", false}}));
    const uint64_t dj = jobs.launch({"--host", "n2:2", meet(), d, "D"});
    ASSERT_NE(dj, 0u);
    EXPECT_PRED_FORMAT1(
        seen,
        await(c, d,
              {{"A", a, "running", true}, {"C", cj, "queued", false}, {"D", dj, "queued", false}}));
    release(d, "A");
    expect_whole(jobs.result(a), "A", {"n1:2", {"n1"}, 2}, 0, "nobody", "C");
    EXPECT_PRED_FORMAT1(seen, await(c, d, {{"C", cj, "running", true}, {"D", dj, "queued", false}}))
        << "D passed C, queued before it for n2";
    EXPECT_FALSE(exists(d + "/D.started")) << "D started before C, queued before it for n2";
    release(d, "C");
    expect_whole(jobs.result(cj), "C", {"n1,n2", {"n1", "n2"}, 2}, 0, "nobody", "D");
    expect_whole(jobs.result(dj), "D", {"n2:2", {"n2"}, 2}, 0, "nobody", "C");
  }
  c.expect_alive_then_stop();
}


// Replay per job: a run of a nondeterministic program (prog_nondet: the
// arrival order decides its output) recorded while another job ran beside
// it replays to the same output alone, and one recorded alone replays to
// its output while another job runs beside it.
TEST_F(SpaceQueue, ARecordingMadeBesideAnotherJobReplaysAloneAndTheReverse) {
  TempDir dir("bcs-space");
  ASSERT_FALSE(dir.path.empty());
  const std::string& d = dir.path;
  std::string beside_want, alone_want;
  Standing c(2);
  ASSERT_TRUE(c.up());
  {
    Jobs jobs(c);
    const uint64_t a = jobs.launch({"--host", "n1:2", meet(), d, "A", "hold"});
    ASSERT_NE(a, 0u);
    ASSERT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "running", true}}));
    // Recorded on n2 while A holds n1.
    const RunResult rec = bcs::test::bcs_run(
        with_nondet({"--manager", c.addr, "--record", d + "/beside", "--host", "n2:3", "-n", "3"}), 60s);
    ASSERT_EQ(rec.status, 0) << describe(rec);
    beside_want = nondet_line(rec);
    ASSERT_THAT(beside_want, HasSubstr("nondet master hash "));
    // Recorded alone (embedded), replayed here beside A: placed on n2.
    const RunResult alone = bcs::test::bcs_run(with_nondet({"--record", d + "/alone", "-n", "3"}), 60s);
    ASSERT_EQ(alone.status, 0) << describe(alone);
    alone_want = nondet_line(alone);
    ASSERT_THAT(alone_want, HasSubstr("nondet master hash "));
    const RunResult again = c.command({"replay", d + "/alone", "--nodes", "1", "--timeout", "50s"}, 60s);
    ASSERT_EQ(again.status, 0) << describe(again);
    EXPECT_EQ(nondet_line(again), alone_want) << "a recording made alone, replayed beside job A";
    EXPECT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "running", true}}))
        << "job A while the replay ran beside it";
    release(d, "A");
    expect_whole(jobs.result(a), "A", {"n1:2", {"n1"}, 2}, 0, "nobody", "B");
  }
  c.expect_alive_then_stop();
  // The recording made beside A, replayed alone (embedded).
  const RunResult r = bcs::test::run({bcs::test::bin("bcs"), "replay", d + "/beside", "--timeout", "50s"}, 60s);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(nondet_line(r), beside_want) << "a recording made beside job A, replayed alone";
}

}  // namespace
