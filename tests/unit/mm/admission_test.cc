// The strobe sender's admission: which queued jobs start beside the running ones.
#include "admission.h"

#include <gtest/gtest.h>

namespace bcs::mm {
namespace {

using Ids = std::vector<uint64_t>;

TEST(Admission, JobsOnDisjointNodesStartTogether) {
  EXPECT_EQ(admit({{1, {1}}, {2, {2}}, {3, {3, 4}}}, {}, 0, true), (Ids{1, 2, 3}));
}

TEST(Admission, AJobWaitsForAHeldNodeAndTheNextStartsBesideIt) {
  // Node 1 runs a job: job 1 waits for it, job 2 (node 2) starts.
  EXPECT_EQ(admit({{1, {1, 2}}, {2, {3}}}, {1}, 1, true), (Ids{2}));
}

TEST(Admission, NoJobOvertakesAnEarlierOneOnItsNodes) {
  // Job 1 waits for node 1 (held) and also wants node 2: job 2 on node 2
  // would delay it, so it waits too; job 3 on node 3 does not.
  EXPECT_EQ(admit({{1, {1, 2}}, {2, {2}}, {3, {3}}}, {1}, 1, true), (Ids{3}));
}

TEST(Admission, TwoJobsOnOneNodeStartOneAfterTheOther) {
  EXPECT_EQ(admit({{1, {1}}, {2, {1}}}, {}, 0, true), (Ids{1}));
  EXPECT_EQ(admit({{2, {1}}}, {}, 0, true), (Ids{2}));
}

TEST(Admission, WithoutSpaceSharingOneJobRunsAtATime) {
  EXPECT_EQ(admit({{1, {1}}, {2, {2}}}, {}, 0, false), (Ids{1}));
  EXPECT_EQ(admit({{2, {2}}}, {1}, 1, false), Ids{});
}

TEST(Admission, AnEmptyQueueStartsNothing) { EXPECT_EQ(admit({}, {1, 2}, 2, true), Ids{}); }

}  // namespace
}  // namespace bcs::mm
