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

// A whole report (what a rank leaves at MPI_Finalize) with distributions,
// calls and messages.
mon::RankReport full_report() {
  mon::RankReport r;
  r.full = true;
  r.rank = 1;
  r.size = 3;
  r.host = "n2";
  r.run_ns = 5000;
  r.res = 2;
  mon::CallReport c;
  c.name = "MPI_Send";
  c.blocking = c.sized = true;
  c.stats.add(300, 8);
  c.has_histograms = true;
  c.latency = c.size = mon::LogHistogram(2);
  c.latency.add(300);
  c.size.add(8);
  r.calls.push_back(c);
  r.granularity.add(4000, 0);
  r.overhead.add(300, 0);
  r.granularity_hist = r.overhead_hist = mon::LogHistogram(2);
  r.granularity_hist.add(4000);
  r.overhead_hist.add(300);
  r.event_calls = {"MPI_Send"};
  r.events = {{0, 1000, 300}};
  r.messages = {{1100, 2, true, 1, 8}, {1500, 0, false, 4, 16}};
  return r;
}

TEST(MmdsReportFromSegment, TakesAWholeReportAndRefusesAnythingElse) {
  auto a = area_with_two_calls();
  std::vector<char> block(bcs::kMmdsReportMax);
  auto put = [&](const std::string& text) {
    std::memcpy(block.data(), text.data(), text.size());
    a->report_len.store(text.size());
  };
  mon::RankReport r;
  std::string why;
  // None: no complaint.
  a->report_len.store(0);
  EXPECT_FALSE(mon::mmds_report_from_segment(*a, block.data(), 1, 3, &r, &why));
  EXPECT_EQ(why, "");
  put(mon::mmds_to_json(full_report()));
  ASSERT_TRUE(mon::mmds_report_from_segment(*a, block.data(), 1, 3, &r, &why)) << why;
  EXPECT_TRUE(r.full);
  EXPECT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.granularity_hist.count(), 1u);
  // Another rank's report, a length past the block, garbage.
  EXPECT_FALSE(mon::mmds_report_from_segment(*a, block.data(), 0, 3, &r, &why));
  EXPECT_THAT(why, HasSubstr("is rank 1 of 3"));
  a->report_len.store(bcs::kMmdsReportMax + 1);
  EXPECT_FALSE(mon::mmds_report_from_segment(*a, block.data(), 1, 3, &r, &why));
  EXPECT_THAT(why, HasSubstr("claims"));
  put("{\"format\":\"bcs-mmds-1\",\"rank\":");
  EXPECT_FALSE(mon::mmds_report_from_segment(*a, block.data(), 1, 3, &r, &why));
  EXPECT_THAT(why, HasSubstr("not JSON"));
  // A rank number that is not a count (a float far past int's range).
  std::string huge = mon::mmds_to_json(full_report());
  huge.replace(huge.find("\"rank\":1"), 8, "\"rank\":1e300");
  put(huge);
  EXPECT_FALSE(mon::mmds_report_from_segment(*a, block.data(), 1, 3, &r, &why));
  EXPECT_THAT(why, HasSubstr("'rank' is not a non-negative integer"));
  auto bad = full_report();
  bad.messages[0].peer = 7;  // no such rank
  put(mon::mmds_to_json(bad));
  EXPECT_FALSE(mon::mmds_report_from_segment(*a, block.data(), 1, 3, &r, &why));
  EXPECT_THAT(why, HasSubstr("names no rank"));
}

TEST(MmdsProto, AWholeReportRoundTripsAndStripsWhatWasNotAskedFor) {
  const auto r = full_report();
  bcs::v1::MmdsSummary m;
  mon::mmds_to_proto(r, &m);
  EXPECT_TRUE(m.has_report());
  mon::RankReport back;
  std::string why;
  ASSERT_TRUE(mon::mmds_from_proto(m, &back, &why)) << why;
  EXPECT_EQ(mon::mmds_to_json(back), mon::mmds_to_json(r));  // nothing lost

  auto bare = m;
  mon::mmds_strip_proto(&bare, false, false);
  EXPECT_EQ(bare.granularity_hist().bins_size(), 0);
  EXPECT_FALSE(bare.calls(0).has_latency());
  EXPECT_EQ(bare.events_size(), 0);
  EXPECT_EQ(bare.messages_size(), 0);
  EXPECT_EQ(bare.calls(0).count(), 1u);  // the counters stay
  auto detail = m;
  mon::mmds_strip_proto(&detail, true, false);
  EXPECT_GT(detail.granularity_hist().bins_size(), 0);
  EXPECT_EQ(detail.events_size(), 0);

  auto bad = m;
  bad.add_events(0);  // not a whole triple
  EXPECT_FALSE(mon::mmds_from_proto(bad, &back, &why));
  bad = m;
  bad.set_messages(1, 9);  // a peer past the job's size
  EXPECT_FALSE(mon::mmds_from_proto(bad, &back, &why));
  bad = m;
  for (int i = 0; i < 200; ++i) bad.mutable_granularity_hist()->add_bins(1);  // past 64 * res + 1
  EXPECT_FALSE(mon::mmds_from_proto(bad, &back, &why));
  bad = m;
  bad.set_resolution(3);
  EXPECT_FALSE(mon::mmds_from_proto(bad, &back, &why));
}

}  // namespace
