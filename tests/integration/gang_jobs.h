// What the gang stories (gang_test.cc, gang_policy_test.cc) share: `bcs
// jobs` read per job, a rank's scheduler state, and two jobs started on the
// same two node managers.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "space_jobs.h"

namespace bcs::test::space {

// `bcs jobs`, per job: its state, quanta, slices and its ranks' CPU time
// (the columns STATE, QUANTA, SLICES and CPU_S).
struct Row {
  std::string state;
  uint64_t quanta = 0, slices = 0;
  double cpu_s = 0;
};
inline std::map<uint64_t, Row> job_rows(const Standing& c) {
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
    out[std::stoull(col[0])] = {col[1], std::stoull(col[13]), std::stoull(col[10]),
                                col.size() > 17 ? std::stod(col[17]) : 0.0};
  }
  return out;
}

// Jobs A and B both got to their hold (bounded). Looks every 2 ms: a
// spinning look would take a CPU from the ranks it waits for.
inline bool both_holding(const std::string& d) {
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + kBound;
  while (!(exists(d + "/A.holding") && exists(d + "/B.holding")) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(2ms);
  return exists(d + "/A.holding") && exists(d + "/B.holding");
}

// The process's state letter in /proc/PID/stat ('T': stopped).
inline char state_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string st;
  std::getline(stat, st);
  const auto close = st.rfind(')');
  return close != std::string::npos && close + 2 < st.size() ? st[close + 2] : '?';
}

// Jobs A (`a`) and B (`b`) looked at while suspended: whenever `bcs jobs`
// shows one in `state` twice in a row within one of its suspensions (its
// quanta unchanged), `look(name)` read in between what the story wants to
// know, and the job ran no slice; `judge(name, reading)` says what was
// wrong with the reading ("": nothing). Until both were seen so, something
// was wrong, or kBound passed. Returns what was wrong; *missing, the jobs
// never seen so.
inline std::string while_suspended(const Standing& c, uint64_t a, uint64_t b,
                                   const std::string& state,
                                   const std::function<std::string(const std::string&)>& look,
                                   const std::function<std::string(const std::string&,
                                                                   const std::string&)>& judge,
                                   std::string* missing) {
  std::map<std::string, bool> checked;
  std::string bad;
  for (auto until = std::chrono::steady_clock::now() + kBound;
       checked.size() < 2 && bad.empty() && std::chrono::steady_clock::now() < until;) {
    for (const auto& [name, id] : {std::pair{std::string("A"), a}, std::pair{std::string("B"), b}}) {
      const auto before = job_rows(c);
      if (!before.count(id) || before.at(id).state != state) continue;
      const std::string reading = look(name);
      const auto after = job_rows(c);
      if (!after.count(id) || after.at(id).state != state ||
          after.at(id).quanta != before.at(id).quanta)
        continue;  // resumed meanwhile: the reading may be of either
      bad += judge(name, reading);
      if (after.at(id).slices != before.at(id).slices) bad += name + " ran slices while " + state + "; ";
      checked[name] = true;
    }
  }
  *missing = std::string(checked["A"] ? "" : "A ") + (checked["B"] ? "" : "B");
  return bad;
}

// Both node managers of a 2-node-manager cluster, one rank on each.
inline const Half kBoth{"n1:1,n2:1", {"n1", "n2"}, 2};

// Jobs A and B on both node managers (`lines` numbered lines each, 0:
// none), once both hold; their ids ({0, 0} and a failure added if not).
inline std::pair<uint64_t, uint64_t> start_two(Jobs& jobs, const std::string& d, int lines) {
  auto args = [&](const std::string& name) {
    std::vector<std::string> a{"--host", kBoth.hosts, meet(), d, name};
    if (lines) a.insert(a.end(), {"lines", std::to_string(lines)});
    a.push_back("hold");
    return a;
  };
  const uint64_t a = jobs.launch(args("A")), b = jobs.launch(args("B"));
  if (!a || !b) return {0, 0};
  if (!both_holding(d)) {
    ADD_FAILURE() << "jobs sharing both node managers at --mpl 2 did not both run";
    return {0, 0};
  }
  return {a, b};
}

}  // namespace bcs::test::space
