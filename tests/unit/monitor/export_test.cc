// Exports of the slice series (monitor/include/bcs/export.h): CSV round
// trip and bad input, the trace-event JSON's events, the SVG plot.
#include "bcs/export.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <map>
#include <regex>
#include <stdexcept>

namespace mon = bcs::monitor;
using testing::HasSubstr;

namespace {

std::vector<mon::SliceRecord> series(int n) {
  std::vector<mon::SliceRecord> v;
  for (int i = 0; i < n; ++i) {
    mon::SliceRecord s;
    s.slice = 10 + static_cast<uint64_t>(i) * 2;  // gaps: skipped periods
    s.job = 3;
    s.start_ns = 1'000'000'000ull + static_cast<uint64_t>(i) * 500'000;
    s.period_ns = i ? 500'000 + static_cast<uint64_t>(i) * 10 : 0;
    s.phase_ns[0] = 20'000;
    s.phase_ns[1] = 15'000;
    s.phase_ns[2] = i % 2 ? 40'000 : 0;  // a skipped P2P microphase
    s.phase_ns[3] = i % 3 == 0 ? 30'000 : 0;
    s.retries[0] = static_cast<uint64_t>(i);
    s.descriptors = static_cast<uint32_t>(i * 3);
    s.bytes = static_cast<uint64_t>(i) << 33;  // past 32 bits
    s.collectives = i % 3 == 0;
    s.skipped = 1;
    s.early = i % 2;
    s.dem_ahead = i % 4 == 1;
    v.push_back(s);
  }
  return v;
}

TEST(SlicesCsv, RoundTripsEveryField) {
  const auto v = series(7);
  const std::string csv = mon::slices_csv(v);
  EXPECT_EQ(csv.substr(0, 29), "slice,job,start_ns,period_ns,");
  const auto back = mon::slices_from_csv(csv);
  ASSERT_EQ(back.size(), v.size());
  EXPECT_EQ(mon::slices_csv(back), csv);
  EXPECT_EQ(back[5].bytes, uint64_t{5} << 33);
  EXPECT_EQ(back[3].phase_ns[3], 30'000u);
  EXPECT_TRUE(back[1].dem_ahead);
  EXPECT_EQ(back[6].retries[0], 6u);
  // An empty series is a header alone.
  EXPECT_TRUE(mon::slices_from_csv(mon::slices_csv({})).empty());
}

TEST(SlicesCsv, BadInputNamesTheLine) {
  auto fails_with = [](const std::string& text, const std::string& what) {
    try {
      mon::slices_from_csv(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const std::runtime_error& e) {
      EXPECT_THAT(e.what(), HasSubstr(what)) << text;
    }
  };
  fails_with("", "no header");
  fails_with("slice,nonsense\n", "line 1: unknown column 'nonsense'");
  fails_with("bytes,slice\n1,2\n", "the first column must be 'slice'");
  fails_with("slice,bytes\n1,2\n3\n", "line 3: 1 fields, the header has 2");
  fails_with("slice,bytes\n1,-2\n", "line 2: '-2' is not a count");
  fails_with("slice,bytes\n1,2x\n", "'2x' is not a count");
  fails_with("slice,bytes\n1,99999999999999999999999\n", "not a count");
  // A subset of the columns in another order (after slice) is fine.
  const auto v = mon::slices_from_csv("slice,bytes,period_ns\n4,100,500\n");
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].period_ns, 500u);
}

TEST(SlicesMetric, KnowsThePapersNames) {
  mon::SliceRecord s;
  s.period_ns = 123;
  s.phase_ns[1] = 7;
  s.retries[1] = 2;
  double v = 0;
  ASSERT_TRUE(mon::slice_metric(s, "GETTS", &v));
  EXPECT_EQ(v, 123);
  ASSERT_TRUE(mon::slice_metric(s, "GTMSM", &v));
  EXPECT_EQ(v, 7);
  ASSERT_TRUE(mon::slice_metric(s, "USRMSM", &v));
  EXPECT_EQ(v, 2);
  // GTTS: the slice's microphases end to end; USRTS: its retries.
  s.phase_ns[0] = 20;
  s.retries[0] = 1;
  ASSERT_TRUE(mon::slice_metric(s, "GTTS", &v));
  EXPECT_EQ(v, 27);
  ASSERT_TRUE(mon::slice_metric(s, "USRTS", &v));
  EXPECT_EQ(v, 3);
  EXPECT_FALSE(mon::slice_metric(s, "NOPE", &v));
  EXPECT_THAT(mon::slice_metric_names(), testing::Contains("GTDEM"));
}

TEST(SlicesTrace, HoldsEachSliceAndItsMicrophasesInOrder) {
  const auto v = series(6);
  const auto j = nlohmann::json::parse(mon::slices_trace_json(v));
  const auto& ev = j.at("traceEvents");
  int slices = 0, phases = 0;
  std::map<uint64_t, std::vector<std::string>> per_slice;
  double last_ts = -1;
  for (const auto& e : ev) {
    if (e.at("ph") != "X") continue;
    if (e.at("tid") == 1) {
      ++slices;
      EXPECT_GE(e.at("ts").get<double>(), last_ts);
      last_ts = e.at("ts").get<double>();
    } else {
      ++phases;
      per_slice[e.at("args").at("slice").get<uint64_t>()].push_back(e.at("name"));
    }
  }
  EXPECT_EQ(slices, 6);
  // Microphases that took no time (skipped) are not drawn; the others come
  // in the strobe's order.
  EXPECT_EQ(per_slice[10], (std::vector<std::string>{"DEM", "MSM", "BBM"}));
  EXPECT_EQ(per_slice[12], (std::vector<std::string>{"DEM", "MSM", "P2P"}));
  int expect = 0;
  for (const auto& s : v)
    for (uint64_t p : s.phase_ns) expect += p != 0;
  EXPECT_EQ(phases, expect);
  // First slice at time 0, the next 500 us later.
  EXPECT_THAT(mon::slices_trace_json(v), HasSubstr("\"ts\":500.0"));
}

TEST(SlicesTrace, PutsEachRanksCallsOnItsOwnTrack) {
  mon::RankReport a, b;
  a.rank = 0;
  a.host = "h";
  a.event_calls = {"MPI_Send", "MPI_Barrier"};
  a.events = {{0, 1'000'000'100, 50}, {1, 1'000'000'400, 900}};
  b = a;
  b.rank = 1;
  b.events = {{1, 1'000'000'350, 950}};
  const auto v = series(2);  // slices from 1'000'000'000 ns
  const auto j = nlohmann::json::parse(mon::slices_trace_json(v, {a, b}));
  std::map<int, std::vector<std::pair<std::string, double>>> tracks;
  for (const auto& e : j.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("pid") == 2) tracks[e.at("tid")].emplace_back(e.at("name"), e.at("ts"));
  ASSERT_EQ(tracks.size(), 2u);
  EXPECT_EQ(tracks[1], (std::vector<std::pair<std::string, double>>{{"MPI_Send", 0.1}, {"MPI_Barrier", 0.4}}));
  EXPECT_EQ(tracks[2], (std::vector<std::pair<std::string, double>>{{"MPI_Barrier", 0.35}}));
  // Ranks alone (no slices) make a trace too.
  EXPECT_NO_THROW(nlohmann::json::parse(mon::slices_trace_json({}, {a})));
}

TEST(SlicesSvg, PlotsOnePointPerSlice) {
  const auto v = series(9);
  const std::string svg = mon::slices_svg(v, "GETTS", "GETTS <test>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_THAT(svg, HasSubstr("GETTS &lt;test&gt;"));  // escaped
  EXPECT_THAT(svg, HasSubstr("GETTS (us)"));
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, std::regex("points=\"([^\"]*)\"")));
  const std::string pts = m[1];
  EXPECT_EQ(std::count(pts.begin(), pts.end(), ','), 9);
  EXPECT_THROW(mon::slices_svg(v, "NOPE", "x"), std::runtime_error);
  EXPECT_THROW(mon::slices_svg({}, "GETTS", "x"), std::runtime_error);
}

TEST(LocalSlicesCsv, RoundTripsWithLettsAndLtts) {
  std::vector<mon::LocalSliceRecord> v(3);
  for (size_t i = 0; i < v.size(); ++i) {
    v[i].slice = 5 + i;
    v[i].start_ns = 1'000'000 + i * 400;
    v[i].phase_ns[0] = 30;
    v[i].phase_ns[2] = 50 * i;
    v[i].phase_at_ns[2] = 60;
    v[i].descriptors = static_cast<uint32_t>(i);
    v[i].bytes = uint64_t{1} << 40;
    v[i].blocked = 1;
    v[i].nlocal = 2;
    v[i].job = 4;
  }
  const std::string csv = mon::local_slices_csv(v);
  // slice 6: LETTS 400 since slice 5, LTTS 30 + 50.
  EXPECT_THAT(csv, HasSubstr("\n6,1000400,400,80,30,"));
  const auto back = mon::local_slices_from_csv(csv);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(mon::local_slices_csv(back), csv);
  EXPECT_EQ(back[2].phase_at_ns[2], 60u);
  EXPECT_EQ(back[2].job, 4u);  // the job column, last
  EXPECT_EQ(csv.substr(csv.find('\n') - 4, 4), ",job");
  // A file from before the job column still reads (job 0: not said).
  const auto old = mon::local_slices_from_csv("slice,start_ns\n5,100\n");
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].job, 0u);
  EXPECT_THROW(mon::local_slices_from_csv("slice,nope\n1,2\n"), std::runtime_error);
}

TEST(SlicesTrace, MessagesAreFlowsAndNodesHaveTheirOwnMicrophases) {
  mon::RankReport a, b;
  a.rank = 0;
  a.size = b.size = 2;
  b.rank = 1;
  a.event_calls = b.event_calls = {"MPI_Send", "MPI_Recv"};
  a.events = {{0, 1'000'000'100, 50}, {0, 1'000'000'300, 50}};
  b.events = {{1, 1'000'000'090, 400}};
  // Two sends 0 -> 1 (numbers 1 and 2); only the first was received.
  a.messages = {{1'000'000'110, 1, true, 1, 8}, {1'000'000'310, 1, true, 2, 8}};
  b.messages = {{1'000'000'480, 0, false, 1, 8}};
  const auto v = series(2);
  std::vector<mon::LocalSliceRecord> n1(1);
  n1[0].slice = 10;
  n1[0].start_ns = v[0].start_ns + 5'000;  // the same clock, 5 us after the strobe
  n1[0].phase_ns[0] = 2'000;
  n1[0].phase_at_ns[1] = 3'000;
  n1[0].phase_ns[1] = 1'000;
  const auto j = nlohmann::json::parse(mon::slices_trace_json(v, {a, b}, {{"n1", n1}}));
  std::vector<nlohmann::json> starts, ends, node;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "s") starts.push_back(e);
    if (e.at("ph") == "f") ends.push_back(e);
    if (e.at("ph") == "X" && e.at("pid") == 3) node.push_back(e);
  }
  ASSERT_EQ(starts.size(), 1u);
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(starts[0].at("id"), ends[0].at("id"));
  EXPECT_EQ(starts[0].at("tid"), 1);  // from rank 0's track
  EXPECT_EQ(ends[0].at("tid"), 2);    // to rank 1's
  EXPECT_DOUBLE_EQ(ends[0].at("ts").get<double>(), 0.48);
  ASSERT_EQ(node.size(), 2u);
  EXPECT_EQ(node[0].at("name"), "DEM");
  EXPECT_DOUBLE_EQ(node[0].at("ts").get<double>(), 5.0);
  EXPECT_EQ(node[1].at("name"), "MSM");
  EXPECT_DOUBLE_EQ(node[1].at("ts").get<double>(), 8.0);
  // Another host's clock (days off): its earliest reception meets the strobe.
  n1[0].start_ns += 86'400'000'000'000ull;
  const auto k = nlohmann::json::parse(mon::slices_trace_json(v, {}, {{"n1", n1}}));
  double dem = -1;
  for (const auto& e : k.at("traceEvents"))
    if (e.at("ph") == "X" && e.at("pid") == 3 && e.at("name") == "DEM") dem = e.at("ts");
  EXPECT_DOUBLE_EQ(dem, 0.0);
}

}  // namespace
