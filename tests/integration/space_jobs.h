// Helpers of the stories of several jobs on one cluster (space_test.cc,
// gang_test.cc): a standing cluster's jobs launched detached and followed,
// bounded polls of `bcs jobs` and of it_meet's files, and checks of what
// each job printed.
#pragma once

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

namespace bcs::test::space {

using namespace std::chrono_literals;
using bcs::test::describe;
using bcs::test::RunResult;
using bcs::test::Standing;
using bcs::test::TempDir;
using testing::HasSubstr;


// How long a story waits for a state it expects (a job started, both
// running, a file there): generous, it is a bound, not a measure.
constexpr auto kBound = 30s;
// How long `bcs attach` may follow a job: beyond any of it_meet's own
// bounds (30 s to meet, 90 s held).
constexpr auto kFollow = 240s;

inline std::string meet() { return bcs::test::it_prog("it_meet"); }

// Half of the K node managers: the first (job A's) or the second (job B's).
// With 2 node managers a job gets 2 ranks on one ("n1:2"), with 4 one rank
// on each of two ("n1,n2"), so that its ring crosses node managers.
struct Half {
  std::string hosts;               // for --host
  std::vector<std::string> names;  // its node managers
  int ranks = 0;
  std::string n() const { return std::to_string(ranks); }
};
inline Half half(int k, bool second) {
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

inline std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// The fields of a CSV line (no quoting: bcs's CSV files hold numbers).
inline std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> f;
  std::istringstream in(line);
  for (std::string x; std::getline(in, x, ',');) f.push_back(x);
  return f;
}

inline bool exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// DIR/NAME.release: the held job NAME goes on.
inline void release(const std::string& dir, const std::string& name) {
  std::ofstream(dir + "/" + name + ".release") << "go\n";
}

// The replay stories' nondeterministic program (prog_nondet: the arrival
// order decides its output) after `head` (bcs run's or replay's options),
// and the line of its output a replay must reproduce.
inline std::vector<std::string> with_nondet(std::vector<std::string> head) {
  for (const auto& a : {bcs::test::prog("prog_nondet"), std::string("master"), std::string("4")})
    head.push_back(a);
  return head;
}
inline std::string nondet_line(const RunResult& r) {
  const auto at = r.out.find("nondet ");
  return at == std::string::npos ? "" : r.out.substr(at, r.out.find('\n', at) - at);
}

// A rank's pid, as it wrote it (DIR/NAME.rankR.pid), or 0.
inline pid_t pid_of(const std::string& dir, const std::string& name, int rank) {
  std::ifstream f(dir + "/" + name + ".rank" + std::to_string(rank) + ".pid");
  long pid = 0;
  f >> pid;
  return static_cast<pid_t>(pid);
}

// `bcs jobs`: each job's STATE column by id; `table` gets the output.
inline std::map<uint64_t, std::string> job_states(const Standing& c, std::string* table = nullptr) {
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

inline std::string says(const std::map<uint64_t, std::string>& states) {
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
inline std::string await(const Standing& c, const std::string& dir, const std::vector<Want>& want,
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
inline testing::AssertionResult seen(const char*, const std::string& why) {
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
inline std::map<int, std::string> nodes_of(const std::string& out, const std::string& name) {
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
inline void expect_whole(const RunResult& r, const std::string& name, const Half& h, int lines,
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
inline void expect_only_lost_then_stop(Standing& c, const std::string& lost) {
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

}  // namespace bcs::test::space
