// How big a job may be (daemons/common/job_limits.h).
#include "job_limits.h"

#include <gtest/gtest.h>

namespace bcs {
namespace {

TEST(JobLimits, ReasonableJobsFit) {
  EXPECT_EQ(job_size_problem(1, 1, 0), "");
  EXPECT_EQ(job_size_problem(kMaxRanksPerNode, 1, 0), "");
  EXPECT_EQ(job_size_problem(4 * kMaxRanksPerNode, 4, 0), "");
  EXPECT_EQ(job_size_problem(100000 % kMaxRanks, 0, 0), "");  // node count unknown
}

TEST(JobLimits, AHundredThousandRanksAreRefusedWithTheReason) {
  auto why = job_size_problem(100000, 1, 0);
  EXPECT_NE(why.find("at most 65536"), std::string::npos) << why;
  why = job_size_problem(2000, 1, 0);
  EXPECT_NE(why.find("at most 1024 ranks"), std::string::npos) << why;
  EXPECT_NE(why.find("at least 2 node managers"), std::string::npos) << why;
}

TEST(JobLimits, RanksPerNodeIsCountedAsTheManagerPlacesThem) {
  // Blocks of 600 dealt over 2 nodes: 0-599 and 1200-1799 on the first.
  EXPECT_NE(job_size_problem(1800, 2, 600), "");
  EXPECT_EQ(job_size_problem(1200, 2, 600), "");
  EXPECT_NE(job_size_problem(1100, 2, 1100), "");
  // More nodes than ranks: only as many nodes as ranks are used.
  EXPECT_EQ(job_size_problem(3, 8, 0), "");
}

}  // namespace
}  // namespace bcs
