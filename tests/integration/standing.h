// A standing cluster for integration stories: bcs-mm on loopback and K
// bcs-nm registered with it, started by the test and stopped by PID.
#pragma once

#include <signal.h>

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "harness.h"

namespace bcs::test {

// A standing cluster on loopback: bcs-mm and K bcs-nm started by the test.
class Standing {
 public:
  // With `socket` (a path), the manager also listens there and the node
  // managers connect through it. `mm_wrap` / `nm_wrap` go before each
  // daemon's command line (e.g. setpriv, to run it as another user); the
  // wrapper must exec the daemon, so that its pid is the daemon's.
  explicit Standing(int nodes, std::vector<std::string> mm_extra = {},
                    std::map<std::string, std::string> env = {}, std::string socket = {},
                    std::vector<std::string> mm_wrap = {}, std::vector<std::string> nm_wrap = {}) {
    using namespace std::chrono_literals;
    std::vector<std::string> argv = mm_wrap;
    argv.insert(argv.end(), {bin("bcs-mm"), "--listen", "127.0.0.1:0", "--ready-fd", "3"});
    if (!socket.empty()) argv.insert(argv.end(), {"--socket", socket});
    argv.insert(argv.end(), mm_extra.begin(), mm_extra.end());
    mm = std::make_unique<Background>(argv, env);
    const std::string port = mm->ready_line(30s);
    if (port.empty()) return;
    addr = "127.0.0.1:" + port;
    if (!socket.empty()) unix_addr = "unix:" + socket;
    for (int i = 0; i < nodes; ++i) {
      std::vector<std::string> nm = nm_wrap;
      nm.insert(nm.end(), {bin("bcs-nm"), "--manager", unix_addr.empty() ? addr : unix_addr,
                           "--name", "n" + std::to_string(i + 1)});
      nms.push_back(std::make_unique<Background>(nm, env));
    }
  }
  bool up() const { return !addr.empty(); }
  std::vector<pid_t> pids() const {
    std::vector<pid_t> p{mm->pid()};
    for (auto& n : nms) p.push_back(n->pid());
    return p;
  }
  // `bcs run --manager` on this cluster.
  // A job that ran into its timeout (bcs's, 124, or the harness's) was
  // hung: its error output gets what every daemon's threads were doing
  // then, for the failure report (describe).
  RunResult run(std::vector<std::string> args, OutputHook hook = {}) const {
    args.insert(args.begin(), {"--manager", addr});
    RunResult r = bcs_run(args, std::chrono::seconds(90), {}, std::move(hook));
    if (r.timed_out || r.status == 124) {
      // The manager outlives the job: the job's state (queued, starting,
      // running) and its last slices, globally and as each node saw them,
      // say whether it never started, or the strobe stalled, parked or ran
      // on with nothing moving. First, as CI shows a failure's beginning.
      using namespace std::chrono_literals;
      auto ask = [&](std::vector<std::string> a) {
        a.insert(a.begin(), {bin("bcs")});
        a.insert(a.end(), {"--manager", addr});
        const RunResult s = bcs::test::run(a, 20s);
        return s.out + s.err;
      };
      r.err += "\n--- the manager's jobs, its last slices, each node's ---\n" + ask({"jobs"}) +
               ask({"stats", "--last", "12"});
      for (size_t i = 0; i < nms.size(); ++i)
        r.err += ask({"stats", "--last", "6", "--node", "n" + std::to_string(i + 1)});
      r.err += "\n--- the daemons' threads after the timeout ---\n" + threads_of(pids());
    }
    return r;
  }
  // `bcs kill JOB` on this cluster: it prints the manager's report of what
  // the job was doing.
  RunResult kill_job(uint64_t job) const {
    return bcs::test::run({bin("bcs"), "kill", std::to_string(job), "--manager", addr},
                          std::chrono::seconds(60));
  }
  // `bcs SUBCOMMAND --manager ADDR ARGS...` on this cluster, bounded (the
  // address right after the subcommand: before a program's name, for run).
  RunResult command(std::vector<std::string> args,
                    std::chrono::seconds limit = std::chrono::seconds(60)) const {
    args.insert(args.begin() + (args.empty() ? 0 : 1), {"--manager", addr});
    args.insert(args.begin(), bin("bcs"));
    return bcs::test::run(args, limit);
  }
  // `bcs run --detach ARGS...` on this cluster: the job's id (its stdout),
  // or 0 if it was not launched (`out`, if given, then says why).
  uint64_t detach(std::vector<std::string> args, RunResult* out = nullptr) const {
    args.insert(args.begin(), {"run", "--detach"});
    const RunResult r = command(args);
    if (out) *out = r;
    if (r.status != 0 || r.out.empty() ||
        r.out.find_first_not_of("0123456789\n") != std::string::npos)
      return 0;
    return std::stoull(r.out);
  }
  // The node manager started with --name NAME ("nK": the K-th), or nullptr.
  Background* nm(const std::string& name) const {
    for (size_t i = 0; i < nms.size(); ++i)
      if (name == "n" + std::to_string(i + 1)) return nms[i].get();
    return nullptr;
  }
  // Every daemon still running, then stopped cleanly.
  void expect_alive_then_stop() {
    for (auto& n : nms) EXPECT_EQ(kill(n->pid(), 0), 0) << "a node manager died";
    EXPECT_EQ(kill(mm->pid(), 0), 0) << "the machine manager died";
    for (auto& n : nms) EXPECT_EQ(n->stop(), 0);
    EXPECT_EQ(mm->stop(), 0);
  }

  std::unique_ptr<Background> mm;
  std::vector<std::unique_ptr<Background>> nms;
  std::string addr, unix_addr;
};

}  // namespace bcs::test
