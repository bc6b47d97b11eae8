// The strobe sender's admission: which queued jobs start beside the running ones.
#include "admission.h"

#include <gtest/gtest.h>

namespace bcs::mm {
namespace {

using Ids = std::vector<uint64_t>;

// A matrix of `rows` where job 100 runs on `held` (if any).
Matrix with(uint32_t rows, std::vector<uint32_t> held = {}) {
  Matrix m(rows);
  if (!held.empty()) m.place(100, held);
  return m;
}

TEST(Admission, JobsOnDisjointNodesStartTogether) {
  Matrix m = with(1);
  EXPECT_EQ(admit({{1, {1}}, {2, {2}}, {3, {3, 4}}}, m, 0, true), (Ids{1, 2, 3}));
}

TEST(Admission, AJobWaitsForAHeldNodeAndTheNextStartsBesideIt) {
  // One row, node 1 runs a job: job 1 waits for it, job 2 (node 3) starts.
  Matrix m = with(1, {1});
  EXPECT_EQ(admit({{1, {1, 2}}, {2, {3}}}, m, 1, true), (Ids{2}));
}

TEST(Admission, NoJobOvertakesAnEarlierOneOnItsNodes) {
  // Job 1 waits for node 1 (held) and also wants node 2: job 2 on node 2
  // would delay it, so it waits too; job 3 on node 3 does not.
  Matrix m = with(1, {1});
  EXPECT_EQ(admit({{1, {1, 2}}, {2, {2}}, {3, {3}}}, m, 1, true), (Ids{3}));
}

TEST(Admission, TwoJobsOnOneNodeStartOneAfterTheOtherWithOneRow) {
  Matrix m = with(1);
  EXPECT_EQ(admit({{1, {1}}, {2, {1}}}, m, 0, true), (Ids{1}));
  EXPECT_EQ(admit({{2, {1}}}, m, 1, true), Ids{});
  m.remove(1);
  EXPECT_EQ(admit({{2, {1}}}, m, 0, true), (Ids{2}));
}

TEST(Admission, WithTwoRowsJobsOnTheSameNodesBothStartAndAThirdWaits) {
  Matrix m = with(2);
  EXPECT_EQ(admit({{1, {1, 2}}, {2, {1, 2}}, {3, {2}}}, m, 0, true), (Ids{1, 2}));
  EXPECT_EQ(*m.row_of(1), 0u);
  EXPECT_EQ(*m.row_of(2), 1u);
  // A job on a node no row holds backfills even behind the waiting one.
  EXPECT_EQ(admit({{3, {2}}, {4, {3}}}, m, 2, true), (Ids{4}));
}

TEST(Admission, WithoutSpaceSharingOneJobRunsAtATime) {
  Matrix m = with(2);
  EXPECT_EQ(admit({{1, {1}}, {2, {2}}}, m, 0, false), (Ids{1}));
  EXPECT_EQ(admit({{2, {2}}}, m, 1, false), Ids{});
}

TEST(Admission, AnEmptyQueueStartsNothing) {
  Matrix m = with(1, {1, 2});
  EXPECT_EQ(admit({}, m, 1, true), Ids{});
}

}  // namespace
}  // namespace bcs::mm
