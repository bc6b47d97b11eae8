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

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "harness.h"
#include "standing.h"
#include "story.h"

using namespace std::chrono_literals;
using bcs::test::describe;
using bcs::test::RunResult;
using bcs::test::Standing;
using bcs::test::Story;
using bcs::test::TempDir;
using testing::HasSubstr;

namespace {

// How long a story waits for a state it expects (a job started, both
// running, a file there): generous, it is a bound, not a measure.
constexpr auto kBound = 30s;
// How long `bcs attach` may follow a job: beyond any of it_meet's own
// bounds (30 s to meet, 90 s held).
constexpr auto kFollow = 240s;

std::string meet() { return bcs::test::it_prog("it_meet"); }

// Half of the K node managers: the first (job A's) or the second (job B's).
// With 2 node managers a job gets 2 ranks on one ("n1:2"), with 4 one rank
// on each of two ("n1,n2"), so that its ring crosses node managers.
struct Half {
  std::string hosts;               // for --host
  std::vector<std::string> names;  // its node managers
  int ranks = 0;
  std::string n() const { return std::to_string(ranks); }
};
Half half(int k, bool second) {
  Half h;
  const int count = k / 2, first = second ? count + 1 : 1;
  for (int i = first; i < first + count; ++i) h.names.push_back("n" + std::to_string(i));
  if (count == 1) {
    h.hosts = h.names[0] + ":2";
    h.ranks = 2;
  } else {
    for (const auto& n : h.names) h.hosts += (h.hosts.empty() ? "" : ",") + n;
    h.ranks = count;
  }
  return h;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// The fields of a CSV line (no quoting: bcs's CSV files hold numbers).
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> f;
  std::istringstream in(line);
  for (std::string x; std::getline(in, x, ',');) f.push_back(x);
  return f;
}

bool exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// DIR/NAME.release: the held job NAME goes on.
void release(const std::string& dir, const std::string& name) {
  std::ofstream(dir + "/" + name + ".release") << "go\n";
}

// A rank's pid, as it wrote it (DIR/NAME.rankR.pid), or 0.
pid_t pid_of(const std::string& dir, const std::string& name, int rank) {
  std::ifstream f(dir + "/" + name + ".rank" + std::to_string(rank) + ".pid");
  long pid = 0;
  f >> pid;
  return static_cast<pid_t>(pid);
}

// `bcs jobs`: each job's STATE column by id; `table` gets the output.
std::map<uint64_t, std::string> job_states(const Standing& c, std::string* table = nullptr) {
  const RunResult r = c.command({"jobs"});
  if (table) *table = r.out + (r.status ? "(bcs jobs: " + describe(r) + ")" : "");
  std::map<uint64_t, std::string> states;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream row(line);
    std::string id, state;
    if (!(row >> id >> state) || id.find_first_not_of("0123456789") != std::string::npos) continue;
    states[std::stoull(id)] = state;
  }
  return states;
}

std::string says(const std::map<uint64_t, std::string>& states) {
  std::vector<std::string> v;
  for (const auto& [id, s] : states) v.push_back("job " + std::to_string(id) + " " + s);
  return v.empty() ? "no jobs" : join(v, ", ");
}

// The job a story follows: NAME, its id, what it must be doing.
struct Want {
  std::string name;
  uint64_t id;
  std::string state;  // its `bcs jobs` STATE
  bool holding;       // and its rank 0 waits in it_meet's hold
};

// Polls (bounded) until every job of `want` is in its state, and those
// holding have written DIR/NAME.holding, in one look. "" then; else what
// was seen: each job's files, and every distinct `bcs jobs` in turn.
std::string await(const Standing& c, const std::string& dir, const std::vector<Want>& want,
                  std::chrono::seconds bound = kBound) {
  std::vector<std::string> seen;
  std::string table;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    bool files = true;
    for (const auto& w : want) files &= !w.holding || exists(dir + "/" + w.name + ".holding");
    auto states = job_states(c, &table);
    bool all = files;
    for (const auto& w : want) all &= states.count(w.id) && states[w.id] == w.state;
    if (all) return "";
    const std::string now = says(states);
    if (seen.empty() || seen.back() != now) seen.push_back(now);
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(50ms);  // the poll's pace, not a synchronisation
  }
  std::vector<std::string> wanted, files;
  for (const auto& w : want) {
    wanted.push_back(w.name + " (job " + std::to_string(w.id) + ") " + w.state +
                     (w.holding ? " and holding" : ""));
    const std::string at = dir + "/" + w.name;
    files.push_back(w.name + ": " +
                    (exists(at + ".holding")   ? "holding"
                     : exists(at + ".saw")     ? "met the other job, not holding yet"
                     : exists(at + ".started") ? "started, not holding"
                                               : "never started"));
  }
  return "wanted within " + std::to_string(bound.count()) + " s: " + join(wanted, ", ") +
         "\nwhat the jobs wrote: " + join(files, "; ") + "\n`bcs jobs` showed, in turn:\n  " +
         join(seen, "\n  ") + "\nthe last:\n" + table;
}

// For EXPECT_PRED_FORMAT1(seen, await(...)): passes on "", else fails
// with what await saw (once, not as a diff).
testing::AssertionResult seen(const char*, const std::string& why) {
  if (why.empty()) return testing::AssertionSuccess();
  return testing::AssertionFailure() << why;
}

// The jobs of a story, each launched with `bcs run --detach` and followed
// by `bcs attach` on a thread of its own (its output from the start, and
// its exit status). However the story ends (an ASSERT returns early),
// every job not ended is killed and every follower joined before the
// cluster stops.
class Jobs {
 public:
  explicit Jobs(const Standing& c) : c_(c) {}
  ~Jobs() {
    for (auto& j : all_)
      if (!j->ended.load()) c_.kill_job(j->id);
    for (auto& j : all_)
      if (j->follower.joinable()) j->follower.join();
  }
  Jobs(const Jobs&) = delete;
  Jobs& operator=(const Jobs&) = delete;
  // Its id, or 0 (a failure added) if it was not launched.
  uint64_t launch(std::vector<std::string> args) {
    RunResult r;
    const uint64_t id = c_.detach(std::move(args), &r);
    if (!id) {
      ADD_FAILURE() << "bcs run --detach: " << describe(r);
      return 0;
    }
    auto j = std::make_unique<One>();
    j->id = id;
    One* p = j.get();
    const Standing& c = c_;
    p->follower = std::thread([p, &c] {
      p->r = c.command({"attach", std::to_string(p->id)}, kFollow);
      p->ended = true;
    });
    all_.push_back(std::move(j));
    return id;
  }
  // `bcs attach JOB`'s result, once the job ended.
  const RunResult& result(uint64_t id) {
    for (auto& j : all_)
      if (j->id == id) {
        if (j->follower.joinable()) j->follower.join();
        return j->r;
      }
    static const RunResult none;
    ADD_FAILURE() << "no job " << id << " was launched";
    return none;
  }

 private:
  struct One {
    uint64_t id = 0;
    std::atomic<bool> ended{false};
    RunResult r;
    std::thread follower;
  };
  const Standing& c_;
  std::vector<std::unique_ptr<One>> all_;
};

// The ranks job NAME announced ("NAME rank R pid P on NODE"): rank -> node.
std::map<int, std::string> nodes_of(const std::string& out, const std::string& name) {
  std::map<int, std::string> nodes;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string who, rank_word, pid_word, on, node;
    int rank = -1;
    long pid = 0;
    if (w >> who >> rank_word >> rank >> pid_word >> pid >> on >> node && who == name &&
        rank_word == "rank" && pid_word == "pid" && on == "on")
      nodes[rank] = node;
  }
  return nodes;
}

// Job NAME's output: its `ranks` ranks on `names` only, its lines 1..N
// each once and in order, its success line, and nothing of job OTHER.
void expect_whole(const RunResult& r, const std::string& name, const Half& h, int lines,
                  const std::string& met, const std::string& other) {
  if (r.status != 0 || r.timed_out) {
    ADD_FAILURE() << "job " << name << " did not complete: " << describe(r);
    return;
  }
  const auto nodes = nodes_of(r.out, name);
  EXPECT_EQ(nodes.size(), static_cast<size_t>(h.ranks)) << name << ": " << r.out;
  const std::set<std::string> mine(h.names.begin(), h.names.end());
  for (const auto& [rank, node] : nodes)
    EXPECT_TRUE(mine.count(node)) << name << " rank " << rank << " ran on " << node << ", not on "
                                  << h.hosts;
  std::vector<std::string> wrong;  // lines missing, twice, or out of order
  size_t at = 0;
  for (int i = 1; i <= lines; ++i) {
    const std::string line =
        name + " line " + std::to_string(i) + " of " + std::to_string(lines) + "\n";
    const size_t n = bcs::test::count(r.out, line), p = r.out.find(line);
    if (n != 1 || p < at)
      wrong.push_back(std::to_string(i) + (n == 0  ? " missing"
                                           : n > 1 ? " twice"
                                                   : " out of order"));
    if (p != std::string::npos) at = p;
  }
  EXPECT_TRUE(wrong.empty()) << name << "'s lines " << join(wrong, ", ") << " in\n" << r.out;
  EXPECT_THAT(r.out, HasSubstr(name + " ok: " + h.n() + " ranks, job "));
  EXPECT_THAT(r.out,
              HasSubstr(", met " + met + ", " + std::to_string(lines) + " lines, ring checked"));
  if (!other.empty()) {
    EXPECT_THAT(r.out, testing::Not(HasSubstr(other + " rank ")))
        << name << " got " << other << "'s output";
    EXPECT_THAT(r.out, testing::Not(HasSubstr(other + " line ")))
        << name << " got " << other << "'s output";
  }
}

// The node managers of a cluster one of which (`lost`) was SIGKILLed: it
// died of it, the others and the manager still run, and stop cleanly.
void expect_only_lost_then_stop(Standing& c, const std::string& lost) {
  for (size_t i = 0; i < c.nms.size(); ++i) {
    auto& n = c.nms[i];
    if ("n" + std::to_string(i + 1) == lost) {
      EXPECT_EQ(n->wait(10s), 128 + SIGKILL) << lost;
      continue;
    }
    EXPECT_EQ(kill(n->pid(), 0), 0) << "node manager n" << i + 1 << " died";
    EXPECT_EQ(n->stop(), 0) << "n" << i + 1;
  }
  EXPECT_EQ(kill(c.mm->pid(), 0), 0) << "the machine manager died";
  EXPECT_EQ(c.mm->stop(), 0);
}

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

}  // namespace

// Replay per job: a run of a nondeterministic program (prog_nondet: the
// arrival order decides its output) recorded while another job ran beside
// it replays to the same output alone, and one recorded alone replays to
// its output while another job runs beside it.
TEST_F(SpaceQueue, ARecordingMadeBesideAnotherJobReplaysAloneAndTheReverse) {
  TempDir dir("bcs-space");
  ASSERT_FALSE(dir.path.empty());
  const std::string& d = dir.path;
  auto hash_line = [](const RunResult& r) {
    const auto at = r.out.find("nondet ");
    return at == std::string::npos ? "" : r.out.substr(at, r.out.find('\n', at) - at);
  };
  const std::vector<std::string> nondet = {bcs::test::prog("prog_nondet"), "master", "4"};
  auto with = [&](std::vector<std::string> head) {
    head.insert(head.end(), nondet.begin(), nondet.end());
    return head;
  };
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
        with({"--manager", c.addr, "--record", d + "/beside", "--host", "n2:3", "-n", "3"}), 60s);
    ASSERT_EQ(rec.status, 0) << describe(rec);
    beside_want = hash_line(rec);
    ASSERT_THAT(beside_want, HasSubstr("nondet master hash "));
    // Recorded alone (embedded), replayed here beside A: placed on n2.
    const RunResult alone = bcs::test::bcs_run(with({"--record", d + "/alone", "-n", "3"}), 60s);
    ASSERT_EQ(alone.status, 0) << describe(alone);
    alone_want = hash_line(alone);
    ASSERT_THAT(alone_want, HasSubstr("nondet master hash "));
    const RunResult again = c.command({"replay", d + "/alone", "--nodes", "1", "--timeout", "50s"}, 60s);
    ASSERT_EQ(again.status, 0) << describe(again);
    EXPECT_EQ(hash_line(again), alone_want) << "a recording made alone, replayed beside job A";
    EXPECT_PRED_FORMAT1(seen, await(c, d, {{"A", a, "running", true}}))
        << "job A while the replay ran beside it";
    release(d, "A");
    expect_whole(jobs.result(a), "A", {"n1:2", {"n1"}, 2}, 0, "nobody", "B");
  }
  c.expect_alive_then_stop();
  // The recording made beside A, replayed alone (embedded).
  const RunResult r = bcs::test::run({bcs::test::bin("bcs"), "replay", d + "/beside", "--timeout", "50s"}, 60s);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(hash_line(r), beside_want) << "a recording made beside job A, replayed alone";
}

// ------------------------------------------------------------ gang scheduling

// `bcs jobs`, per job: its state, quanta and slices (the columns STATE,
// QUANTA and SLICES).
struct Row {
  std::string state;
  uint64_t quanta = 0, slices = 0;
};
std::map<uint64_t, Row> job_rows(const Standing& c) {
  std::map<uint64_t, Row> out;
  const RunResult r = c.command({"jobs"});
  std::istringstream in(r.out);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::vector<std::string> col;
    for (std::string w; f >> w;) col.push_back(w);
    if (col.size() < 15) continue;
    out[std::stoull(col[0])] = {col[1], std::stoull(col[13]), std::stoull(col[10])};
  }
  return out;
}

// Jobs A and B both got to their hold (bounded).
bool both_holding(const std::string& d) {
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (!(exists(d + "/A.holding") && exists(d + "/B.holding")) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  return exists(d + "/A.holding") && exists(d + "/B.holding");
}

char state_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string st;
  std::getline(stat, st);
  const auto close = st.rfind(')');
  return close != std::string::npos && close + 2 < st.size() ? st[close + 2] : '?';
}

// Issue 43's gang story: two jobs on the same two node managers at --mpl 2
// take turns. Each runs in quanta of its own; whenever `bcs jobs` shows
// one suspended twice in a row within one of its suspensions (its quanta
// unchanged), every rank of it read in between was stopped ('T') and it
// ran no slice; both complete with their data checked.
TEST_F(SpaceQueue, TwoJobsOnTheSameNodeManagersTakeTurnsAtMpl2) {
  TempDir dir("bcs-gang");
  ASSERT_FALSE(dir.path.empty());
  const std::string& d = dir.path;
  Standing c(2, {"--mpl", "2", "--quantum", "200ms"});
  ASSERT_TRUE(c.up());
  const Half both{"n1:1,n2:1", {"n1", "n2"}, 2};
  {
    Jobs jobs(c);
    const uint64_t a = jobs.launch({"--host", both.hosts, meet(), d, "A", "lines", "40", "hold"});
    const uint64_t b = jobs.launch({"--host", both.hosts, meet(), d, "B", "lines", "40", "hold"});
    ASSERT_NE(a, 0u);
    ASSERT_NE(b, 0u);
    // Both get to their hold, through quanta of their own (half their lines).
    ASSERT_TRUE(both_holding(d)) << "jobs sharing both node managers at --mpl 2 did not both run";
    std::map<std::string, bool> checked;
    std::string bad;
    for (auto until = std::chrono::steady_clock::now() + kBound;
         checked.size() < 2 && bad.empty() && std::chrono::steady_clock::now() < until;) {
      for (const auto& [name, id] : {std::pair{std::string("A"), a}, std::pair{std::string("B"), b}}) {
        const auto before = job_rows(c);
        if (!before.count(id) || before.at(id).state != "suspended") continue;
        std::string states;
        for (int r = 0; r < both.ranks; ++r) states += state_of(pid_of(d, name, r));
        const auto after = job_rows(c);
        if (!after.count(id) || after.at(id).state != "suspended" ||
            after.at(id).quanta != before.at(id).quanta)
          continue;  // resumed meanwhile: the reading may be of either
        if (states != std::string(static_cast<size_t>(both.ranks), 'T'))
          bad += name + "'s ranks were '" + states + "' while it was suspended; ";
        if (after.at(id).slices != before.at(id).slices)
          bad += name + " ran slices while it was suspended; ";
        checked[name] = true;
      }
    }
    EXPECT_EQ(bad, "");
    EXPECT_TRUE(checked["A"] && checked["B"]) << "not seen suspended (twice within one suspension): "
                                               << (checked["A"] ? "" : "A ") << (checked["B"] ? "" : "B");
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
    release(d, "A");
    release(d, "B");
    expect_whole(jobs.result(a), "A", both, 40, "nobody", "B");
    expect_whole(jobs.result(b), "B", both, 40, "nobody", "A");
  }
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
TEST_F(SpaceQueue, ARankOfASuspendedJobKilledEndsOnlyThatJob) {
  TempDir dir("bcs-gang");
  ASSERT_FALSE(dir.path.empty());
  const std::string& d = dir.path;
  Standing c(2, {"--mpl", "2", "--quantum", "200ms"});
  ASSERT_TRUE(c.up());
  const Half both{"n1:1,n2:1", {"n1", "n2"}, 2};
  {
    Jobs jobs(c);
    const uint64_t a = jobs.launch({"--host", both.hosts, meet(), d, "A", "lines", "10", "hold"});
    const uint64_t b = jobs.launch({"--host", both.hosts, meet(), d, "B", "lines", "10", "hold"});
    ASSERT_NE(a, 0u);
    ASSERT_NE(b, 0u);
    ASSERT_TRUE(both_holding(d)) << "jobs sharing both node managers at --mpl 2 did not both run";
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

// With the matrix full (two rows on both node managers), a third job
// queues; `bcs jobs` shows it queued beside one running and one suspended
// job; it starts when a slot frees (A ends) and completes; `bcs kill`
// ends a suspended job.
TEST_F(SpaceQueue, AThirdJobWaitsForAFreeRowAndAKillEndsASuspendedJob) {
  TempDir dir("bcs-gang");
  ASSERT_FALSE(dir.path.empty());
  const std::string& d = dir.path;
  Standing c(2, {"--mpl", "2", "--quantum", "200ms"});
  ASSERT_TRUE(c.up());
  const Half both{"n1:1,n2:1", {"n1", "n2"}, 2};
  {
    Jobs jobs(c);
    const uint64_t a = jobs.launch({"--host", both.hosts, meet(), d, "A", "hold"});
    const uint64_t b = jobs.launch({"--host", both.hosts, meet(), d, "B", "hold"});
    ASSERT_NE(a, 0u);
    ASSERT_NE(b, 0u);
    ASSERT_TRUE(both_holding(d)) << "jobs sharing both node managers at --mpl 2 did not both run";
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
