// MMDS statistics (monitor/include/bcs/mmds.h): histogram bins, summaries,
// the environment's selections, the JSON form (round trip, bad input) and
// the Table 5.3 summary.
#include "bcs/mmds.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <stdexcept>

namespace mon = bcs::monitor;
using testing::HasSubstr;

namespace {

TEST(LogHistogram, EveryValueLiesInItsBin) {
  std::mt19937_64 rng(7);
  for (uint32_t res : {1u, 2u, 4u, 8u, 16u}) {
    for (int i = 0; i < 20000; ++i) {
      const uint64_t v = rng() >> (rng() % 64);
      const uint32_t b = mon::LogHistogram::bin_of(v, res);
      EXPECT_LE(mon::LogHistogram::lower_bound(b, res), v) << v << " res " << res;
      if (v < (1ull << 62)) {
        EXPECT_GT(mon::LogHistogram::lower_bound(b + 1, res), v) << v << " res " << res;
      }
    }
    EXPECT_EQ(mon::LogHistogram::bin_of(0, res), 0u);
    EXPECT_EQ(mon::LogHistogram::lower_bound(0, res), 0u);
    // Bins are ordered: a larger value never lands in a lower bin.
    uint32_t last = 0;
    for (uint64_t v = 0; v < 5000; ++v) {
      const uint32_t b = mon::LogHistogram::bin_of(v, res);
      EXPECT_GE(b, last);
      last = b;
    }
  }
  // res 4: one power of two is four bins; 1000..1023 share [896, 1024)'s
  // neighbour bins at 1/4 octave steps.
  EXPECT_EQ(mon::LogHistogram::bin_of(1024, 4), mon::LogHistogram::bin_of(1279, 4));
  EXPECT_NE(mon::LogHistogram::bin_of(1279, 4), mon::LogHistogram::bin_of(1280, 4));
}

TEST(LogHistogram, CountsMergesAndRefusesOtherResolutions) {
  mon::LogHistogram a(4), b(4), c(8);
  a.add(10);
  a.add(10);
  a.add(1'000'000);
  b.add(10, 5);
  a.merge(b);
  EXPECT_EQ(a.count(), 8u);
  EXPECT_EQ(a.bins()[mon::LogHistogram::bin_of(10, 4)], 7u);
  EXPECT_THROW(a.merge(c), std::runtime_error);
  EXPECT_FALSE(mon::LogHistogram::valid_res(3));
  EXPECT_FALSE(mon::LogHistogram::valid_res(32));
  EXPECT_TRUE(mon::LogHistogram::valid_res(16));
}

TEST(PrimitiveStats, MinMaxTotalAverageAndMerge) {
  mon::PrimitiveStats s;
  EXPECT_EQ(s.avg_ns(), 0.0);
  s.add(30, 8);
  s.add(10, 8);
  s.add(20, 0);
  EXPECT_EQ(s.count, 3u);
  EXPECT_EQ(s.min_ns, 10u);
  EXPECT_EQ(s.max_ns, 30u);
  EXPECT_EQ(s.total_ns, 60u);
  EXPECT_EQ(s.bytes, 16u);
  EXPECT_DOUBLE_EQ(s.avg_ns(), 20.0);
  mon::PrimitiveStats t;
  t.add(5, 1);
  t.add(50, 1);
  s.merge(t);
  s.merge(mon::PrimitiveStats{});  // an empty one changes nothing
  EXPECT_EQ(s.count, 5u);
  EXPECT_EQ(s.min_ns, 5u);
  EXPECT_EQ(s.max_ns, 50u);
  EXPECT_EQ(s.total_ns, 115u);
}

TEST(MmdsConfig, ReadsTheEnvironmentsSelections) {
  mon::MmdsConfig c;
  EXPECT_EQ(mon::mmds_parse_config(nullptr, nullptr, nullptr, nullptr, &c), "");
  EXPECT_FALSE(c.enabled);
  EXPECT_EQ(mon::mmds_parse_config("off", "1", nullptr, nullptr, &c), "");
  EXPECT_FALSE(c.enabled);
  EXPECT_EQ(mon::mmds_parse_config("summary", nullptr, nullptr, nullptr, &c), "");
  EXPECT_TRUE(c.enabled);
  EXPECT_FALSE(c.call_histogram("MPI_Send"));
  EXPECT_TRUE(c.rank_selected(12345));
  EXPECT_EQ(mon::mmds_parse_config("all", "0,2-4", "MPI_Send,MPI_Allreduce", "8", &c), "");
  EXPECT_TRUE(c.rank_selected(0));
  EXPECT_FALSE(c.rank_selected(1));
  EXPECT_TRUE(c.rank_selected(3));
  EXPECT_FALSE(c.rank_selected(5));
  EXPECT_TRUE(c.call_histogram("MPI_Allreduce"));
  EXPECT_FALSE(c.call_histogram("MPI_Recv"));
  EXPECT_EQ(c.res, 8u);

  EXPECT_THAT(mon::mmds_parse_config("yes", nullptr, nullptr, nullptr, &c), HasSubstr("BCS_MDS='yes'"));
  EXPECT_THAT(mon::mmds_parse_config("all", "3-1", nullptr, nullptr, &c), HasSubstr("BCS_MDS_RANKS"));
  EXPECT_THAT(mon::mmds_parse_config("all", "x", nullptr, nullptr, &c), HasSubstr("BCS_MDS_RANKS"));
  EXPECT_THAT(mon::mmds_parse_config("all", "1,", nullptr, nullptr, &c), HasSubstr("BCS_MDS_RANKS"));
  EXPECT_THAT(mon::mmds_parse_config("all", nullptr, "Send", nullptr, &c), HasSubstr("BCS_MDS_CALLS"));
  EXPECT_THAT(mon::mmds_parse_config("all", nullptr, nullptr, "3", &c), HasSubstr("BCS_MDS_RES"));
  EXPECT_THAT(mon::mmds_parse_config("all", nullptr, nullptr, "64", &c), HasSubstr("BCS_MDS_RES"));
}

mon::RankReport sample(int rank) {
  mon::RankReport r;
  r.rank = rank;
  r.size = 2;
  r.host = "node-a";
  r.res = 4;
  r.run_ns = 1'000'000;
  mon::CallReport send{"MPI_Send", true, true, {}, true, mon::LogHistogram(4), mon::LogHistogram(4)};
  for (uint64_t ns : {1000u, 3000u, 2000u}) {
    send.stats.add(ns, 64);
    send.latency.add(ns);
    send.size.add(64);
  }
  mon::CallReport isend{"MPI_Isend", false, true, {}, false, mon::LogHistogram(4), mon::LogHistogram(4)};
  isend.stats.add(250, 8);
  r.calls = {send, isend};
  r.overhead.add(6000, 0);
  r.overhead_hist = mon::LogHistogram(4);
  r.overhead_hist.add(6000);
  r.granularity.add(994'000, 0);
  r.granularity_hist = mon::LogHistogram(4);
  r.granularity_hist.add(994'000);
  return r;
}

TEST(MmdsJson, RoundTrips) {
  auto r = sample(1);
  r.event_calls = {"MPI_Send", "MPI_Isend"};
  r.events = {{0, 100, 5}, {1, 200, 7}};
  r.events_dropped = 3;
  const auto back = mon::mmds_from_json(mon::mmds_to_json(r));
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.size, 2);
  EXPECT_EQ(back.host, "node-a");
  EXPECT_EQ(back.run_ns, r.run_ns);
  ASSERT_EQ(back.calls.size(), 2u);
  EXPECT_EQ(back.calls[0].name, "MPI_Send");
  EXPECT_TRUE(back.calls[0].blocking);
  EXPECT_TRUE(back.calls[0].sized);
  EXPECT_EQ(back.calls[0].stats.count, 3u);
  EXPECT_EQ(back.calls[0].stats.min_ns, 1000u);
  EXPECT_EQ(back.calls[0].stats.max_ns, 3000u);
  EXPECT_EQ(back.calls[0].stats.bytes, 192u);
  EXPECT_EQ(back.calls[0].latency.bins(), r.calls[0].latency.bins());
  EXPECT_EQ(back.calls[0].size.bins(), r.calls[0].size.bins());
  EXPECT_FALSE(back.calls[1].has_histograms);
  EXPECT_EQ(back.granularity.total_ns, 994'000u);
  EXPECT_EQ(back.overhead_hist.bins(), r.overhead_hist.bins());
  ASSERT_EQ(back.events.size(), 2u);
  EXPECT_EQ(back.events[1].call, 1u);
  EXPECT_EQ(back.events[1].start_ns, 200u);
  EXPECT_EQ(back.events_dropped, 3u);
  // And again: the text is stable.
  EXPECT_EQ(mon::mmds_to_json(back), mon::mmds_to_json(r));
}

TEST(MmdsJson, BadInputIsAClearError) {
  const std::string good = mon::mmds_to_json(sample(0));
  auto fails_with = [](const std::string& text, const std::string& what) {
    try {
      mon::mmds_from_json(text);
      ADD_FAILURE() << "accepted: " << text.substr(0, 80);
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), HasSubstr(what)) << text.substr(0, 80);
    }
  };
  fails_with("", "not JSON");
  fails_with(good.substr(0, good.size() / 2), "not JSON");  // truncated
  fails_with("{\"format\": \"something-else\"}", "not an MMDS rank report");
  fails_with("[1, 2]", "not an MMDS rank report");
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto p = s.find(from);
    EXPECT_NE(p, std::string::npos) << from;
    return s.replace(p, from.size(), to);
  };
  fails_with(edit("\"rank\":0", "\"rank\":5"), "bad rank");
  fails_with(edit("\"resolution\":4", "\"resolution\":3"), "bad resolution");
  fails_with(edit("\"count\":3", "\"count\":-3"), "count");
  fails_with(edit("\"min_ns\":1000", "\"min_ns\":9000"), "min_ns > max_ns");
  fails_with(edit("\"host\":\"node-a\"", "\"host\":7"), "malformed");
  // Every truncation of a valid report is refused, never a crash.
  for (size_t n = 0; n < good.size() - 2; n += 7) EXPECT_THROW(mon::mmds_from_json(good.substr(0, n)), std::runtime_error);
  // Random bytes too.
  std::mt19937 rng(3);
  for (int i = 0; i < 200; ++i) {
    std::string s = good;
    for (int k = 0; k < 3; ++k) s[rng() % s.size()] = static_cast<char>(rng());
    try {
      mon::mmds_from_json(s);
    } catch (const std::runtime_error&) {
    }
  }
}

TEST(MmdsTable, SummarisesOverRanksInTable53sShape) {
  const std::vector<mon::RankReport> ranks = {sample(0), sample(1)};
  const std::string t = mon::mmds_table(ranks, true);
  EXPECT_THAT(t, HasSubstr("MMDS summary: 2 ranks"));
  EXPECT_THAT(t, HasSubstr("Primitive"));
  EXPECT_THAT(t, HasSubstr("Average(us)"));
  // MPI_Send over both ranks: min 1 us, max 3 us, total 12 us, 6 calls, avg 2 us, 384 B.
  EXPECT_THAT(t, testing::ContainsRegex("MPI_Send +1\\.000 +3\\.000 +12\\.000 +6 +2\\.000 +384"));
  EXPECT_THAT(t, testing::ContainsRegex("Comp Granularity +994\\.000 +994\\.000 +1988\\.000 +2 "));
  EXPECT_THAT(t, testing::ContainsRegex("Comm Overhead +6\\.000 +6\\.000 +12\\.000 +2 "));
  // Sum check: 2 x (994 + 6) us = 2 x 1000 us.
  EXPECT_THAT(t, HasSubstr("granularity + overhead 2000.000 us (+0.0000%)"));
  EXPECT_THAT(t, HasSubstr("rank 1 (node-a)"));
  // Ordered by total time: MPI_Send (12 us) before MPI_Isend (0.5 us).
  EXPECT_LT(t.find("MPI_Send "), t.find("MPI_Isend "));
  EXPECT_THAT(mon::mmds_job_json(ranks), HasSubstr("\"ranks\""));
}

}  // namespace
