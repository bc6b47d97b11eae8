// The local EMDS (Table 5.2): the node manager's recorder, the manager's
// per-node windows, and the wire form, checked on arrival.
#include <gtest/gtest.h>

#include <thread>

#include "bcs/emds.h"
#include "bcs/service.h"

namespace mon = bcs::monitor;
using namespace std::chrono_literals;

namespace {

mon::LocalSliceRecord counts(uint32_t descriptors, uint32_t blocked, uint32_t nlocal) {
  mon::LocalSliceRecord a;
  a.descriptors = descriptors;
  a.blocked = blocked;
  a.nlocal = nlocal;
  return a;
}

TEST(LocalRecorder, OneRecordPerSliceSummingItsMicrophases) {
  mon::LocalRecorder rec;
  rec.note(5, 0, 1000, 100, counts(3, 0, 2));
  rec.note(5, 1, 1150, 40, counts(0, 1, 2));
  rec.note(5, 2, 1200, 60, counts(0, 2, 2));
  rec.note(6, 0, 1500, 10, counts(1, 2, 2));  // closes slice 5
  auto out = rec.take(0ms);
  // Slice 6 got nothing more within the batch time: closed too.
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].slice, 5u);
  EXPECT_EQ(out[0].phase_ns[0], 100u);
  EXPECT_EQ(out[0].phase_ns[1], 40u);
  EXPECT_EQ(out[0].phase_ns[2], 60u);
  EXPECT_EQ(out[0].descriptors, 3u);
  EXPECT_EQ(out[0].blocked, 2u);  // the last microphase's view
  // When the node began the slice and each microphase (from the slice's start).
  EXPECT_EQ(out[0].start_ns, 1000u);
  EXPECT_EQ(out[0].phase_at_ns[0], 0u);
  EXPECT_EQ(out[0].phase_at_ns[1], 150u);
  EXPECT_EQ(out[0].phase_at_ns[2], 200u);
  EXPECT_EQ(out[0].phase_ns[3], 0u);  // not run: no start either
  EXPECT_EQ(out[0].phase_at_ns[3], 0u);
  EXPECT_EQ(out[1].slice, 6u);
  EXPECT_EQ(out[1].start_ns, 1500u);
}

TEST(LocalRecorder, BoundedWhenNobodyTakesAndStopWakesTheFlusher) {
  mon::LocalRecorder rec(3);
  for (uint64_t s = 1; s <= 10; ++s) rec.note(s, 0, s * 100, 1, {});
  auto out = rec.take(0ms);
  ASSERT_EQ(out.size(), 3u);  // the window: slice 10 closed, the last 3 kept
  EXPECT_EQ(out.front().slice, 8u);
  EXPECT_EQ(out.back().slice, 10u);
  std::thread flusher([&] { EXPECT_TRUE(rec.take(10s).empty()); });
  rec.stop();  // an idle flusher sleeps untimed: stop must wake it
  flusher.join();
  EXPECT_TRUE(rec.stopped());
}

TEST(NodeSeries, WindowsPerNodeAndRanges) {
  mon::NodeSeries ns(4);
  std::vector<mon::LocalSliceRecord> v(6);
  for (size_t i = 0; i < v.size(); ++i) v[i].slice = 10 + i;
  ns.record("n1", v);
  EXPECT_TRUE(ns.known("n1"));
  EXPECT_FALSE(ns.known("n2"));
  auto last = ns.last("n1", 100);
  ASSERT_EQ(last.size(), 4u);
  EXPECT_EQ(last.front().slice, 12u);
  std::vector<mon::LocalSliceRecord> out;
  std::pair<uint64_t, uint64_t> kept;
  EXPECT_TRUE(ns.range("n1", 13, 14, &out, &kept));
  EXPECT_EQ(out.size(), 2u);
  out.clear();
  EXPECT_FALSE(ns.range("n1", 11, 14, &out, &kept));
  EXPECT_EQ(kept, (std::pair<uint64_t, uint64_t>{12, 15}));
}

TEST(NodeSeries, BatchesOutOfOrderStaySorted) {
  mon::NodeSeries ns(10);
  std::vector<mon::LocalSliceRecord> late(2), early(3);
  late[0].slice = 8;
  late[1].slice = 9;
  for (size_t i = 0; i < 3; ++i) early[i].slice = 5 + i;
  ns.record("n", late);
  ns.record("n", early);
  ns.record("n", late);  // again: not twice
  std::vector<uint64_t> got;
  for (const auto& r : ns.last("n", 100)) got.push_back(r.slice);
  EXPECT_EQ(got, (std::vector<uint64_t>{5, 6, 7, 8, 9}));
}

// Jobs gang-scheduled on one node number their slices each on its own: a
// number both used is two records, each kept once.
TEST(NodeSeries, TwoJobsSlicesOfOneNumberAreBothKept) {
  mon::NodeSeries ns(10);
  std::vector<mon::LocalSliceRecord> a(2), b(2);
  for (size_t i = 0; i < 2; ++i) {
    a[i].slice = b[i].slice = 7 + i;
    a[i].job = 1;
    b[i].job = 2;
  }
  ns.record("n", a);
  ns.record("n", b);
  ns.record("n", a);  // again: not twice
  std::vector<std::pair<uint64_t, uint64_t>> got;
  for (const auto& r : ns.last("n", 100)) got.emplace_back(r.slice, r.job);
  EXPECT_EQ(got, (std::vector<std::pair<uint64_t, uint64_t>>{{7, 1}, {7, 2}, {8, 1}, {8, 2}}));
}

TEST(LocalRecorder, TakeNowClosesTheCurrentSlice) {
  mon::LocalRecorder rec;
  rec.note(3, 0, 10, 5, {});
  rec.note(4, 0, 20, 5, {});
  auto out = rec.take_now();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].slice, 4u);
  EXPECT_TRUE(rec.take_now().empty());
}

TEST(LocalRecorder, EachRecordNamesItsJobAndAnotherJobClosesTheSlice) {
  mon::LocalRecorder rec;
  auto of = [](uint64_t job) {
    mon::LocalSliceRecord a;
    a.job = job;
    return a;
  };
  rec.note(7, 0, 10, 5, of(1));
  rec.note(7, 1, 20, 5, of(1));
  // The same number for another job: another record, not job 1's slice 7.
  rec.note(7, 0, 30, 5, of(2));
  auto out = rec.take_now();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].job, 1u);
  EXPECT_EQ(out[0].phase_ns[1], 5u);
  EXPECT_EQ(out[1].job, 2u);
  EXPECT_EQ(out[1].start_ns, 30u);
}

TEST(LocalProto, RoundTripsAndRefusesContradictions) {
  mon::LocalSliceRecord r = counts(7, 1, 3);
  r.slice = 42;
  r.phase_ns[3] = 99;
  r.start_ns = 123456;
  r.phase_at_ns[3] = 77;
  r.coll_descriptors = 2;
  r.bytes = 1000;
  r.sender_bytes = 300;
  r.second_thread_bytes = 200;
  r.job = 12;
  bcs::v1::LocalSlice p;
  mon::local_to_proto(r, &p);
  mon::LocalSliceRecord back;
  std::string why;
  ASSERT_TRUE(mon::local_from_proto(p, &back, &why)) << why;
  EXPECT_EQ(back.slice, 42u);
  EXPECT_EQ(back.job, 12u);
  EXPECT_EQ(back.phase_ns[3], 99u);
  EXPECT_EQ(back.start_ns, 123456u);
  EXPECT_EQ(back.phase_at_ns[3], 77u);
  EXPECT_EQ(back.descriptors, 7u);
  EXPECT_EQ(back.sender_bytes, 300u);
  EXPECT_EQ(back.second_thread_bytes, 200u);
  auto bad = p;
  bad.set_sender_bytes(1001);  // more written by senders than moved
  EXPECT_FALSE(mon::local_from_proto(bad, &back, &why));
  bad = p;
  bad.set_second_thread_bytes(701);  // senders' and second threads' bytes overlap
  EXPECT_FALSE(mon::local_from_proto(bad, &back, &why));
  bad = p;
  bad.set_blocked(4);  // more blocked than ranks
  EXPECT_FALSE(mon::local_from_proto(bad, &back, &why));
  bad = p;
  bad.set_coll_descriptors(8);
  EXPECT_FALSE(mon::local_from_proto(bad, &back, &why));
  bad = p;
  bad.clear_phase_ns();
  EXPECT_FALSE(mon::local_from_proto(bad, &back, &why));
  bad = p;
  bad.clear_phase_at_ns();  // the microphases' starts come with their times
  EXPECT_FALSE(mon::local_from_proto(bad, &back, &why));
}

}  // namespace
