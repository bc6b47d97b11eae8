// The MMDS summary as the node manager reads it from a rank's segment area
// and as the manager reads it off the wire: whatever a rank or a node
// manager wrote is checked, never trusted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "bcs/mmds.h"
#include "bcs/segment.h"
#include "bcs/service.h"

namespace mon = bcs::monitor;
using testing::HasSubstr;

namespace {

std::unique_ptr<bcs::MmdsArea> area_with_two_calls() {
  auto a = std::make_unique<bcs::MmdsArea>();
  std::memset(static_cast<void*>(a.get()), 0, sizeof *a);
  std::strcpy(a->names[0], "MPI_Send");
  std::strcpy(a->names[1], "MPI_Isend");
  a->flags[0] = bcs::kMmdsBlocking | bcs::kMmdsSized;
  a->flags[1] = bcs::kMmdsSized;
  a->calls[0] = {3, 600, 100, 300, 24};
  a->calls[1] = {0, 0, 0, 0, 0};  // never called: left out
  a->granularity = {4, 1000, 100, 400, 0};
  a->overhead = {3, 600, 100, 300, 0};
  a->run_ns = 1600;
  a->ncalls.store(2);
  return a;
}

TEST(MmdsFromSegment, ReadsWhatTheRankWrote) {
  auto a = area_with_two_calls();
  mon::RankReport r;
  std::string why;
  ASSERT_TRUE(mon::mmds_from_segment(*a, &r, &why)) << why;
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "MPI_Send");
  EXPECT_TRUE(r.calls[0].blocking);
  EXPECT_TRUE(r.calls[0].sized);
  EXPECT_EQ(r.calls[0].stats.total_ns, 600u);
  EXPECT_EQ(r.run_ns, 1600u);
  EXPECT_EQ(r.granularity.count, 4u);
  // Off: nothing, and no complaint.
  a->ncalls.store(0);
  EXPECT_FALSE(mon::mmds_from_segment(*a, &r, &why));
  EXPECT_EQ(why, "");
}

TEST(MmdsFromSegment, RefusesScribbles) {
  auto refused = [](const bcs::MmdsArea& a, const std::string& what) {
    mon::RankReport r;
    std::string why;
    EXPECT_FALSE(mon::mmds_from_segment(a, &r, &why));
    EXPECT_THAT(why, HasSubstr(what));
  };
  auto a = area_with_two_calls();
  a->ncalls.store(bcs::kMmdsMaxCalls + 1);
  refused(*a, "claims");
  a = area_with_two_calls();
  std::memset(a->names[0], 'A', bcs::kMmdsNameLen);  // no NUL
  refused(*a, "not an MPI call name");
  a = area_with_two_calls();
  std::strcpy(a->names[1], "MPI_\x01x");
  refused(*a, "bad character");
  a = area_with_two_calls();
  a->calls[0].min_ns = 500;  // min > max: a torn update
  refused(*a, "inconsistent");
  a = area_with_two_calls();
  a->calls[1].total_ns = 7;  // count 0 with time
  refused(*a, "inconsistent");
  a = area_with_two_calls();
  a->overhead.max_ns = 1'000'000;  // max > total
  refused(*a, "inconsistent");
}

TEST(MmdsProto, RoundTripsAndChecks) {
  auto a = area_with_two_calls();
  mon::RankReport r;
  std::string why;
  ASSERT_TRUE(mon::mmds_from_segment(*a, &r, &why));
  r.rank = 2;
  r.host = "n1";
  bcs::v1::MmdsSummary m;
  mon::mmds_to_proto(r, &m);
  mon::RankReport back;
  ASSERT_TRUE(mon::mmds_from_proto(m, &back, &why)) << why;
  EXPECT_EQ(back.rank, 2);
  EXPECT_EQ(back.host, "n1");
  ASSERT_EQ(back.calls.size(), 1u);
  EXPECT_EQ(back.calls[0].stats.bytes, 24u);
  EXPECT_EQ(back.overhead.total_ns, 600u);

  auto bad = m;
  bad.mutable_calls(0)->set_name("rm -rf /");
  EXPECT_FALSE(mon::mmds_from_proto(bad, &back, &why));
  bad = m;
  bad.mutable_calls(0)->set_min_ns(10'000);
  EXPECT_FALSE(mon::mmds_from_proto(bad, &back, &why));
  bad = m;
  bad.mutable_granularity()->set_count(0);
  EXPECT_FALSE(mon::mmds_from_proto(bad, &back, &why));
}

}  // namespace
