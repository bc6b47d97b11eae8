// Stories of flow control (issue 7): a receiver that does not keep up with
// its senders costs its node manager a bounded amount of memory. Past
// `bcs run --max-unexpected` unmatched sends waiting for one receiver,
// further sends to it stay in their senders' rings, while everything else
// those senders post (their receives above all) still goes through. A
// program that then waits for a message the bound keeps back is ended with
// the reason, not left hanging.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

INSTANTIATE_TEST_SUITE_P(NodeManagers, FlowStory, testing::Values(1, 2),
                         [](const auto& i) { return std::to_string(i.param) + "nm"; });

}  // namespace
