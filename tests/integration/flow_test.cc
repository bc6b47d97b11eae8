// Stories of flow control (issue 7): a receiver that does not keep up with
// its senders costs its node manager a bounded amount of memory. Past
// `bcs run --max-unexpected` unmatched sends waiting for one receiver,
// further sends to it stay in their senders' rings, while everything else
// those senders post (their receives above all) still goes through. A
// program that then waits for a message the bound keeps back is ended with
// the reason, not left hanging.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <string>

#include "harness.h"
#include "standing.h"
#include "story.h"

using namespace std::chrono_literals;
using bcs::test::bcs_run;
using bcs::test::describe;
using bcs::test::prog;
using bcs::test::Standing;
using testing::HasSubstr;

namespace {

// Parameter: node managers (1: the node holds its own senders back; 2: the
// receiver's node says so through the manager's strobe).
class FlowStory : public bcs::test::Story, public testing::WithParamInterface<int> {
 protected:
  std::string nodes() const { return std::to_string(GetParam()); }
};

TEST_P(FlowStory, TwoRanksFloodingEachOtherPastTheBoundLoseNothing) {
  // Each rank sends 500 messages before it posts a receive, ten times the
  // bound; after the first 250 (and a barrier) each receiver is full, so
  // the rest of at least one rank's sends wait in its ring (the rank whose
  // sends come first finds the other full: that one receives only after
  // its own sends). Its receives, posted behind them, must still reach the
  // matcher, or neither would ever take a message and both would wait
  // forever.
  Standing c(GetParam());
  ASSERT_TRUE(c.up());
  auto r = c.run({"--max-unexpected", "50", "-n", "2", "--nodes", nodes(), prog("prog_flood"),
                  "500", "mutual"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("mutual flood ok (500 messages each way)"));
  // The bound did hold sends back: the manager counted them.
  auto st = bcs::test::run({bcs::test::bin("bcs"), "stats", "--manager", c.addr, "--last", "65536"},
                           30s);
  ASSERT_EQ(st.status, 0) << describe(st);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(st.out, m, std::regex(R"(; (\d+) sends held back)"))) << st.out;
  EXPECT_GT(std::stoull(m[1]), 0u) << st.out;
  c.expect_alive_then_stop();
}

TEST_P(FlowStory, ASenderTheBoundHoldsBackForeverIsEndedWithTheReason) {
  // Rank 0 posts 3000 sends before a barrier, and rank 1 receives only after
  // it: past the bound (50) rank 0's sends wait in its ring, the ring
  // (1024) fills, rank 0 never reaches the barrier and rank 1 never
  // receives. After the liveness timeout the sender is ended, named, with
  // the reason, and the job ends (no hang).
  auto r = bcs_run({"--max-unexpected", "50", "--liveness-timeout", "2s", "-n", "2", "--nodes",
                    nodes(), prog("prog_flood"), "3000"});
  EXPECT_NE(r.status, 0) << describe(r);
  EXPECT_FALSE(r.timed_out) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("bcs: rank 0 (pid ")) << describe(r);
  EXPECT_THAT(r.err, HasSubstr("was ended by its node manager: it kept sending to rank 1"))
      << describe(r);
  EXPECT_THAT(r.err, HasSubstr("--max-unexpected")) << describe(r);
}

TEST_P(FlowStory, TheDefaultBoundLeavesTenThousandUnexpectedSendsAlone) {
  auto r = bcs_run({"-n", "2", "--nodes", nodes(), prog("prog_flood"), "10000"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("flood ok"));
}

TEST_P(FlowStory, ReceivesOfMessagesThatAlreadyWaitNeedNoDescriptorEach) {
  // prog_shelf (tests/programs/shelf.c) without its cancel rounds: 300
  // messages sent before a barrier and received after it one tag at a time,
  // 100 more by MPI_Irecv, then receives of any tag, of any source, after
  // probes. Every value and every order is checked by the program. A
  // receive that goes to the node manager is a descriptor it drains (and
  // waits for a slice); one that takes its message from the unexpected
  // shelf is none. So the same job with the shelf off (BCS_SHELF=off in the
  // node managers' environment) drains at least 300 more. Counted:
  // descriptors, from the job's statistics. (Not slices: a sender's posts
  // to a receiver waiting in MPI ring the node, so how many slices 300
  // sends take depends on timing.)
  bcs::test::TempDir dir{"bcs-shelf-test"};
  ASSERT_FALSE(dir.path.empty());
  uint64_t drained[2] = {0, 0};
  for (int off = 0; off < 2; ++off) {
    const std::string jd = dir.path + (off ? "/off" : "/on");
    std::map<std::string, std::string> env{{"BCS_MDS", "summary"}};
    if (off) env["BCS_SHELF"] = "off";
    auto r = bcs_run({"-n", "2", "--nodes", nodes(), "--job-dir", jd, prog("prog_shelf"), "300",
                      "0"},
                     90s, env);
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_THAT(r.out, HasSubstr("shelf ok"));
    const auto n = bcs::test::csv_column_sum(jd + "/slices.csv", "descriptors");
    ASSERT_TRUE(n) << jd;
    drained[off] = *n;
    ASSERT_GT(drained[off], 300u) << jd;  // 300 sends at least
  }
  EXPECT_GE(drained[1], drained[0] + 300) << "shelf on " << drained[0] << ", off " << drained[1];
}

TEST_P(FlowStory, ACancelAndAReceiveOfTheSameMessageNeverBothWin) {
  // prog_shelf's last part, 60 rounds: the sender cancels a small send
  // just after a barrier while the receiver takes it (even rounds) or
  // waits to hear how the cancel went (odd rounds). The program checks
  // that exactly one wins, each round.
  auto r = bcs_run({"-n", "2", "--nodes", nodes(), prog("prog_shelf"), "0", "60"}, 90s);
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("shelf ok"));
  // Odd rounds cancel (the receive comes after); even ones go either way.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(cancel race: (\d+) received, (\d+) cancelled)")))
      << r.out;
  EXPECT_EQ(std::stoi(m[1]) + std::stoi(m[2]), 60) << r.out;
  EXPECT_GE(std::stoi(m[2]), 30) << r.out;
}

INSTANTIATE_TEST_SUITE_P(NodeManagers, FlowStory, testing::Values(1, 2),
                         [](const auto& i) { return std::to_string(i.param) + "nm"; });

}  // namespace
