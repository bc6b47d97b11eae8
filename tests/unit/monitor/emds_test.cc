// The EMDS recorder (monitor/include/bcs/emds.h) with several jobs running
// at once under one strobe: their records interleave in the global ring,
// each job numbers its own slices, and each job keeps its own window. And
// Monitor.Slices answering for one job from that window.
#include <gtest/gtest.h>

#include <grpcpp/grpcpp.h>

#include <set>
#include <utility>
#include <vector>

#include "bcs/emds.h"
#include "bcs/service.h"

namespace mon = bcs::monitor;
namespace pb = bcs::v1;

namespace {

mon::SliceRecord rec(uint64_t job, uint64_t slice, uint64_t period_ns = 0) {
  mon::SliceRecord r;
  r.job = job;
  r.slice = slice;
  r.period_ns = period_ns;
  r.start_ns = slice * 1000;
  return r;
}

std::vector<std::pair<uint64_t, uint64_t>> named(const std::vector<mon::SliceRecord>& v) {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& r : v) out.emplace_back(r.job, r.slice);
  return out;
}

using Names = std::vector<std::pair<uint64_t, uint64_t>>;

TEST(EmdsRecorder, ABusyJobDoesNotPushAQuietJobsSlicesOutOfItsWindow) {
  mon::EmdsRecorder emds(4);
  emds.record(rec(1, 10));
  emds.record(rec(1, 11));
  for (uint64_t s = 100; s < 110; ++s) emds.record(rec(2, s));
  // The global window: the last 4 of every job's, as they ran.
  EXPECT_EQ(named(emds.last(100)), (Names{{2, 106}, {2, 107}, {2, 108}, {2, 109}}));
  // Job 1's own window still has both of its slices.
  EXPECT_EQ(named(emds.last_of(1, 100)), (Names{{1, 10}, {1, 11}}));
  EXPECT_EQ(named(emds.last_of(2, 2)), (Names{{2, 108}, {2, 109}}));
  EXPECT_EQ(emds.total(), 12u);
  EXPECT_EQ(emds.total_of(1), 2u);
  EXPECT_EQ(emds.total_of(2), 10u);
  EXPECT_TRUE(emds.last_of(3, 100).empty());
  EXPECT_EQ(emds.total_of(3), 0u);
}

TEST(EmdsRecorder, RangeWorksOnARingNotSortedBySlice) {
  mon::EmdsRecorder emds(10);
  // Job 1 numbers from 50, job 2 from 5, job 3 from 6: interleaved, and
  // job 3's numbers repeat job 2's.
  for (const auto& [job, slice] : Names{{1, 50}, {2, 5}, {1, 51}, {2, 6}, {3, 6}, {1, 52}, {2, 7}})
    emds.record(rec(job, slice));
  std::vector<mon::SliceRecord> out;
  std::pair<uint64_t, uint64_t> kept;
  // The lowest and highest kept, not the first and last recorded (50, 7).
  ASSERT_TRUE(emds.range(5, 52, &out, &kept));
  EXPECT_EQ(out.size(), 7u);
  EXPECT_EQ(kept, (std::pair<uint64_t, uint64_t>{5, 52}));
  out.clear();
  ASSERT_TRUE(emds.range(6, 51, &out, &kept));
  EXPECT_EQ(named(out), (Names{{1, 50}, {1, 51}, {2, 6}, {3, 6}, {2, 7}}));
  out.clear();
  EXPECT_FALSE(emds.range(4, 10, &out, &kept));
  EXPECT_EQ(kept, (std::pair<uint64_t, uint64_t>{5, 52}));
  EXPECT_FALSE(emds.range(5, 53, &out, &kept));
  EXPECT_TRUE(out.empty());
  // A job's range, in its own window.
  ASSERT_TRUE(emds.range_of(2, 5, 7, &out, &kept));
  EXPECT_EQ(named(out), (Names{{2, 5}, {2, 6}, {2, 7}}));
  out.clear();
  EXPECT_FALSE(emds.range_of(2, 5, 50, &out, &kept));
  EXPECT_EQ(kept, (std::pair<uint64_t, uint64_t>{5, 7}));
  EXPECT_FALSE(emds.range_of(9, 1, 2, &out, &kept));
  EXPECT_EQ(kept, (std::pair<uint64_t, uint64_t>{0, 0}));
  // Nothing recorded: nothing kept.
  mon::EmdsRecorder none(4);
  EXPECT_FALSE(none.range(0, 0, &out, &kept));
  EXPECT_EQ(kept, (std::pair<uint64_t, uint64_t>{0, 0}));
}

TEST(EmdsRecorder, PeriodsArePerJobNeverMixed) {
  mon::EmdsRecorder emds(100);
  // A 1 ms job beside a 10 ms one, interleaved; each job's first slice has
  // no period, an early and a parked one are not the clock's.
  emds.record(rec(1, 1));
  emds.record(rec(2, 1));
  for (uint64_t i = 2; i <= 11; ++i) {
    emds.record(rec(1, i, 1'000'000 + i));
    emds.record(rec(2, i, 10'000'000 + i));
  }
  auto early = rec(1, 12, 5);
  early.early = true;
  emds.record(early);
  auto parked = rec(2, 13, 99'000'000);
  parked.skipped = 3;
  emds.record(parked);
  const mon::PeriodSummary p1 = emds.periods(1), p2 = emds.periods(2);
  EXPECT_EQ(p1.count, 10u);
  EXPECT_EQ(p1.max_ns, 1'000'011u);
  EXPECT_EQ(p1.p50_ns, 1'000'007u);
  EXPECT_EQ(p1.p99_ns, 1'000'011u);
  EXPECT_EQ(p2.count, 10u);
  EXPECT_EQ(p2.max_ns, 10'000'011u);
  EXPECT_EQ(p2.p50_ns, 10'000'007u);
  EXPECT_EQ(emds.periods(3).count, 0u);
  const auto all = emds.periods_by_job();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all.at(1).max_ns, p1.max_ns);
  EXPECT_EQ(all.at(2).p50_ns, p2.p50_ns);
}

TEST(EmdsRecorder, KeptJobsAreTheMostRecentlyRecorded) {
  mon::EmdsRecorder emds(10, 3);
  for (uint64_t j = 1; j <= 3; ++j) emds.record(rec(j, j));
  emds.record(rec(1, 20));  // job 1 records again: 2 is the least recent now
  emds.record(rec(4, 1));
  EXPECT_EQ(emds.total_of(2), 0u);
  EXPECT_EQ(emds.total_of(1), 2u);
  EXPECT_EQ(emds.total_of(3), 1u);
  EXPECT_EQ(emds.total_of(4), 1u);
  // The global window still has every record.
  EXPECT_EQ(emds.last(100).size(), 5u);
}

TEST(EmdsRecorder, TheRecordBudgetDropsWholeWindowsOfJobsNotRecordingNow) {
  // Windows of 4, at most 6 records in all the jobs' windows.
  mon::EmdsRecorder emds(4, 1000, 6);
  for (uint64_t s = 1; s <= 3; ++s) emds.record(rec(1, s));
  for (uint64_t s = 1; s <= 3; ++s) emds.record(rec(2, s));
  EXPECT_EQ(emds.total_of(1), 3u);
  emds.record(rec(3, 1));  // 7 records: job 1's window (least recent) goes
  EXPECT_EQ(emds.total_of(1), 0u);
  EXPECT_EQ(named(emds.last_of(2, 10)), (Names{{2, 1}, {2, 2}, {2, 3}}));
  // A job recording now never loses its own: past its window only its
  // oldest go.
  for (uint64_t s = 4; s <= 20; ++s) emds.record(rec(2, s));
  EXPECT_EQ(named(emds.last_of(2, 10)), (Names{{2, 17}, {2, 18}, {2, 19}, {2, 20}}));
  EXPECT_EQ(emds.total_of(3), 1u);  // 4 + 1 records: within the budget
}

TEST(EmdsRecorder, FollowSeesEveryJobsRecordsInOrder) {
  mon::EmdsRecorder emds(10);
  emds.record(rec(1, 50));
  emds.record(rec(2, 5));
  std::vector<mon::SliceRecord> out;
  uint64_t missed = 0;
  EXPECT_EQ(emds.wait_after(0, std::chrono::milliseconds(0), &out, &missed), 2u);
  EXPECT_EQ(named(out), (Names{{1, 50}, {2, 5}}));
  EXPECT_EQ(missed, 0u);
}

// Monitor.Slices, called as the gRPC server would.
class SlicesCall : public ::testing::Test {
 protected:
  SlicesCall()
      : service_(
            emds_, nodes_, [](grpc::ServerContext*) { return true; },
            [](grpc::ServerContext*, const pb::JobStatsRequest&, pb::JobStatsReply*) {
              return grpc::Status::OK;
            },
            [](grpc::ServerContext*, uint64_t job) {
              using S = mon::MonitorService::JobState;
              return job == 1 || job == 2 ? S::live : job == 3 ? S::forbidden : S::unknown;
            }) {
    emds_.record(rec(1, 10));
    emds_.record(rec(1, 11));
    for (uint64_t s = 10; s < 20; ++s) emds_.record(rec(2, s));
  }
  grpc::Status call(const pb::SlicesRequest& req, pb::SlicesReply* rep) {
    grpc::ServerContext ctx;
    return service_.Slices(&ctx, &req, rep);
  }
  mon::EmdsRecorder emds_{4};
  mon::NodeSeries nodes_;
  mon::MonitorService service_;
};

Names named(const pb::SlicesReply& rep) {
  Names out;
  for (const auto& s : rep.slices()) out.emplace_back(s.job_id(), s.slice());
  return out;
}

TEST_F(SlicesCall, AJobsSlicesComeFromItsOwnWindow) {
  pb::SlicesRequest req;
  req.set_job_id(1);
  req.set_last(100);
  pb::SlicesReply rep;
  ASSERT_TRUE(call(req, &rep).ok());
  EXPECT_EQ(named(rep), (Names{{1, 10}, {1, 11}}));
  EXPECT_EQ(rep.total_slices(), 2u);
  // Its numbers repeat job 2's: a range of job 1 holds job 1's only.
  req.set_range(true);
  req.set_first_slice(11);
  req.set_last_slice(11);
  rep.Clear();
  ASSERT_TRUE(call(req, &rep).ok());
  EXPECT_EQ(named(rep), (Names{{1, 11}}));
  req.set_last_slice(12);
  rep.Clear();
  const grpc::Status out = call(req, &rep);
  EXPECT_EQ(out.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_NE(out.error_message().find("of job 1 are not all kept: the window holds slices 10..11"),
            std::string::npos)
      << out.error_message();
}

TEST_F(SlicesCall, WithoutAJobEveryJobsSlicesAsTheyRan) {
  pb::SlicesRequest req;
  req.set_last(3);
  pb::SlicesReply rep;
  ASSERT_TRUE(call(req, &rep).ok());
  EXPECT_EQ(named(rep), (Names{{2, 17}, {2, 18}, {2, 19}}));
  EXPECT_EQ(rep.total_slices(), 12u);
}

TEST_F(SlicesCall, AnotherUsersJobOrAnUnknownOneIsRefused) {
  pb::SlicesRequest req;
  req.set_job_id(3);
  pb::SlicesReply rep;
  EXPECT_EQ(call(req, &rep).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  req.set_job_id(9);
  EXPECT_EQ(call(req, &rep).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(rep.slices_size(), 0);
}

}  // namespace
