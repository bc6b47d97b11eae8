// Stories of a job's clients on a standing cluster (issue 42): a job whose
// `bcs run` is SIGKILLed ends, and the next job runs; a job run with
// --detach outlives its clients, keeps its output for `bcs attach`, and
// `bcs attach` returns its exit status; the unix socket's session cap is
// said to the user it refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.h"
#include "peer.h"
#include "standing.h"
#include "story.h"

using namespace std::chrono_literals;
using bcs::test::bin;
using bcs::test::describe;
using bcs::test::Standing;
using bcs::test::Story;
using testing::HasSubstr;

namespace {

// `bcs SUBCOMMAND --manager ADDR ARGS...`, bounded (before a program's
// name: what follows it is the program's).
bcs::test::RunResult bcs_cmd(std::vector<std::string> args, const std::string& addr,
                             bcs::test::OutputHook hook = {}) {
  args.insert(args.begin() + 1, {"--manager", addr});
  args.insert(args.begin(), bin("bcs"));
  return bcs::test::run(args, 90s, {}, std::move(hook));
}

// The `bcs jobs` row of job `id`, split into its columns ("" if absent).
std::vector<std::string> job_row(const std::string& jobs_out, uint64_t id) {
  std::istringstream in(jobs_out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::vector<std::string> cols;
    for (std::string c; row >> c;) cols.push_back(c);
    if (!cols.empty() && cols[0] == std::to_string(id)) return cols;
  }
  return {};
}

// SIGKILLs the one `bcs` process of this test that runs now (the one whose
// output hook calls this): as a user's `kill -9` would.
pid_t kill_running_bcs() {
  const auto pids = bcs::test::marked_running(bin("bcs"));
  if (pids.size() != 1) return 0;
  ::kill(pids[0], SIGKILL);
  return pids[0];
}

}  // namespace

// Issue 42: `bcs run --manager ... & kill -9 $!` left the job running with
// nobody attached, and every later job queued behind it. Now the manager
// sees the client's Attach stream go (the job prints nothing meanwhile:
// it_block waits in MPI_Recv) and ends the job, naming the client.
TEST_F(Story, AJobWhoseClientIsSigkilledEndsAndTheNextJobRuns) {
  // One row: the next job on the node manager waits for the orphan to end
  // (with gang scheduling it would run beside it at once).
  Standing c(1, {"--mpl", "1"});
  ASSERT_TRUE(c.up());
  pid_t client = 0;
  std::vector<pid_t> ranks;
  auto r = c.run({"-n", "2", bcs::test::blocker()}, [&](const std::string& out) {
    if (client || bcs::test::count(out, "blocking") < 2) return;
    for (int rank = 0; rank < 2; ++rank) {
      const auto at = out.find("rank " + std::to_string(rank) + " pid ");
      if (at != std::string::npos) ranks.push_back(std::stoi(out.substr(at + 11)));
    }
    client = kill_running_bcs();
  });
  ASSERT_NE(client, 0) << describe(r);
  EXPECT_EQ(r.status, 128 + SIGKILL) << describe(r);
  // The next job runs: it would queue behind an orphan until the harness's
  // limit otherwise.
  auto next = c.run({"-n", "2", bcs::test::prog("prog_ring")});
  EXPECT_EQ(next.status, 0) << describe(next);
  EXPECT_THAT(next.out, HasSubstr("ring ok"));
  // The orphan's ranks are gone, and its end says why, to whoever asks.
  ASSERT_EQ(ranks.size(), 2u);
  for (pid_t p : ranks) EXPECT_NE(::kill(p, 0), 0) << "rank pid " << p << " outlived its job";
  auto late = bcs_cmd({"attach", "1"}, c.addr);
  EXPECT_EQ(late.status, 129) << describe(late);
  EXPECT_THAT(late.err, HasSubstr("killed: its client (bcs run, pid " + std::to_string(client) +
                                  ") went away"));
  auto jobs = bcs_cmd({"jobs"}, c.addr);
  ASSERT_EQ(jobs.status, 0) << describe(jobs);
  const auto row = job_row(jobs.out, 1);
  ASSERT_GE(row.size(), 6u) << jobs.out;
  EXPECT_EQ(row[1], "failed") << jobs.out;
  EXPECT_EQ(row[4], "attached") << jobs.out;
  c.expect_alive_then_stop();
}

// --detach: the job runs without a client; its output printed while nobody
// watched reaches a later `bcs attach`; a SIGKILLed `bcs attach` leaves it
// running; `bcs attach` ends with its exit status.
TEST_F(Story, ADetachedJobOutlivesItsClientsAndAttachGetsItsOutputAndStatus) {
  Standing c(1);
  ASSERT_TRUE(c.up());
  auto d = bcs_cmd({"run", "--detach", "-n", "2", bcs::test::blocker()}, c.addr);
  ASSERT_EQ(d.status, 0) << describe(d);
  EXPECT_EQ(d.out, "1\n");  // the id alone on stdout, for scripts
  EXPECT_THAT(d.err, HasSubstr("job 1 runs detached"));
  // Its output, printed while no client was attached, is held for this one.
  pid_t attacher = 0;
  auto a1 = bcs_cmd({"attach", "1"}, c.addr, [&](const std::string& out) {
    if (!attacher && bcs::test::count(out, "blocking") == 2) attacher = kill_running_bcs();
  });
  ASSERT_NE(attacher, 0) << describe(a1);
  EXPECT_EQ(a1.status, 128 + SIGKILL) << describe(a1);
  // The manager notices the attacher is gone (CLIENTS drops to 0) and, the
  // job being detached, lets it run on: still running then, in the same
  // step that would have ended it otherwise.
  // Its CLIENTS column, once it reads `want` (bounded: 30 s).
  auto row_when_clients = [&](const std::string& want) {
    std::vector<std::string> row;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    do {
      auto jobs = bcs_cmd({"jobs"}, c.addr);
      EXPECT_EQ(jobs.status, 0) << describe(jobs);
      row = job_row(jobs.out, 1);
      if (row.size() < 6) {
        ADD_FAILURE() << jobs.out;
        return row;
      }
    } while (row[5] != want && std::chrono::steady_clock::now() < deadline);
    return row;
  };
  auto row = row_when_clients("0");
  ASSERT_GE(row.size(), 6u);
  EXPECT_EQ(row[5], "0");
  EXPECT_EQ(row[1], "running");
  EXPECT_EQ(row[4], "detached");
  // Attached again, `bcs attach` ends with the job's status when it ends.
  bcs::test::RunResult a2;
  std::thread attach([&] { a2 = bcs_cmd({"attach", "1"}, c.addr); });
  row = row_when_clients("1");
  EXPECT_EQ(row[1], "running");
  auto k = c.kill_job(1);
  EXPECT_EQ(k.status, 0) << describe(k);
  attach.join();
  EXPECT_EQ(a2.status, 143) << describe(a2);
  EXPECT_THAT(a2.err, HasSubstr("killed: requested with `bcs kill`"));
  c.expect_alive_then_stop();
}

// Issue 42: of 200 `bcs run` of one user at once through the unix socket,
// 133 exited 1 with "the manager ... closed the connection", the reason in
// the manager's log only. Now the refused client says it.
TEST_F(Story, TheUnixSocketsSessionCapIsSaidToTheUserItRefuses) {
  bcs::test::TempDir dir("bcs-cap");
  ASSERT_FALSE(dir.path.empty());
  Standing c(0, {}, {}, dir.path + "/mm.sock");
  ASSERT_TRUE(c.up());
  std::vector<bcs::UnixSession> held;
  std::string why;
  for (int i = 0; i < 64; ++i) {
    auto s = bcs::connect_unix_session(dir.path + "/mm.sock", 10s, &why);
    ASSERT_TRUE(s) << "session " << i << ": " << why;
    held.push_back(std::move(*s));
  }
  auto refused = bcs_cmd({"jobs"}, c.unix_addr);
  EXPECT_EQ(refused.status, 1) << describe(refused);
  EXPECT_THAT(refused.err, HasSubstr("refused the connection: "));
  EXPECT_THAT(refused.err, HasSubstr("already has 64 connections open to this manager, the most "
                                     "one user may have (64)"));
  held.clear();  // closed: the manager drops them as gRPC closes its ends
  // A client is served again once the manager saw them go (bounded).
  bcs::test::RunResult ok;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  do ok = bcs_cmd({"jobs"}, c.unix_addr);
  while (ok.status != 0 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(ok.status, 0) << describe(ok);
  c.expect_alive_then_stop();
}
