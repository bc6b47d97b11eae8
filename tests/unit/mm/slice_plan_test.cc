// The strobe sender's per-slice decisions (daemons/mm/slice_plan.h): which
// microphases run, what each microstrobe announces, which collectives are
// released.
#include "slice_plan.h"

#include <gtest/gtest.h>

namespace bcs::mm {
namespace {

wire::Report dem(uint32_t drained, std::vector<uint32_t> batches = {},
                 std::vector<wire::CollLevel> coll = {}, uint32_t pending = 0) {
  wire::Report r;
  r.phase = wire::Phase::dem;
  r.drained = drained;
  r.batches_to = std::move(batches);
  r.coll = std::move(coll);
  r.transfers_pending = pending;
  return r;
}

wire::CollLevel level(int32_t ctx, uint32_t nodes, uint64_t lvl, uint64_t bbm = 0, uint64_t rm = 0) {
  return {ctx, nodes, lvl, bbm, rm};
}

TEST(SlicePlan, AnIdleSliceRunsOnlyTheDem) {
  auto p = plan_after_dem({dem(0, {0, 0}, {level(1, 2, 0)}), dem(0, {0, 0}, {level(1, 2, 0)})}, 1, {});
  EXPECT_FALSE(p.run_msm);
  EXPECT_FALSE(p.run_bbm);
  EXPECT_FALSE(p.run_rm);
  EXPECT_TRUE(p.coll_release.empty());
}

TEST(SlicePlan, MsmRunsForPostsOrTransfersInFlightAndCountsBatchesPerNode) {
  auto p = plan_after_dem({dem(3, {0, 1, 1}), dem(0, {1, 0, 0}), dem(0, {}, {}, 0)}, 2, {});
  EXPECT_TRUE(p.run_msm);
  EXPECT_EQ(p.expect_batches, (std::vector<uint32_t>{1, 1, 1}));
  auto q = plan_after_dem({dem(0, {}, {}, 2)}, 0, {});
  EXPECT_TRUE(q.run_msm) << "a transfer still being chunked needs its MSM";
}

// Inline messages are delivered in the MSM (DmaHelper::deliver_inline):
// only a transfer in flight, or a send that is not inline, may need a P2P.
TEST(SlicePlan, TheMsmMayMoveDataOnlyForTransfersInFlightOrSendsThatAreNotInline) {
  EXPECT_FALSE(plan_after_dem({dem(4, {0, 1}), dem(2, {1, 0})}, 1, {}).may_move)
      << "inline sends and receives only";
  auto moving = dem(1, {0, 1});
  moving.moving = 1;
  EXPECT_TRUE(plan_after_dem({dem(4, {0, 1}), moving}, 1, {}).may_move);
  EXPECT_TRUE(plan_after_dem({dem(0, {}, {}, 1)}, 0, {}).may_move) << "a transfer in flight";
}

TEST(SlicePlan, ReportsNamingUnknownNodesAreIgnored) {
  auto p = plan_after_dem({dem(1, {0, 1, 5, 7})}, 1, {});
  EXPECT_EQ(p.expect_batches, (std::vector<uint32_t>{0, 1}));
}

TEST(SlicePlan, CollectivesDoNotWakeTheMsm) {
  wire::Report r = dem(0, {0}, {level(1, 1, 1, 0, 1)});
  r.coll_drained = 4;
  auto p = plan_after_dem({r}, 0, {});
  EXPECT_FALSE(p.run_msm);
  EXPECT_EQ(p.coll_drained, 4u);
  EXPECT_TRUE(p.run_rm);
  EXPECT_FALSE(p.run_bbm) << "an allreduce alone pays DEM + RM only";
}

TEST(SlicePlan, ACollectiveIsReleasedAtTheMinimumOverNodes) {
  auto p = plan_after_dem({dem(0, {}, {level(1, 2, 5, 3, 4)}), dem(0, {}, {level(1, 2, 3, 3, 0)})},
                          1, {{1, 2}});
  ASSERT_EQ(p.coll_release.size(), 1u);
  EXPECT_EQ(p.coll_release[0].context, 1);
  EXPECT_EQ(p.coll_release[0].level, 3u);
  EXPECT_TRUE(p.run_bbm);
  EXPECT_FALSE(p.run_rm) << "the reduction at 4 is not posted everywhere yet";
}

TEST(SlicePlan, NothingIsReleasedTwice) {
  auto p = plan_after_dem({dem(0, {}, {level(1, 1, 3, 0, 0)})}, 0, {{1, 3}});
  EXPECT_TRUE(p.coll_release.empty());
}

TEST(SlicePlan, AContextIsHeldBackUntilEveryNodeHostingMembersReports) {
  // A communicator over 3 nodes; one has not seen it yet.
  auto p = plan_after_dem({dem(0, {}, {level(9, 3, 2, 1, 0)}), dem(0, {}, {level(9, 3, 2, 1, 0)}),
                           dem(0, {}, {})},
                          2, {});
  EXPECT_TRUE(p.coll_release.empty());
  EXPECT_FALSE(p.run_bbm);
}

TEST(SlicePlan, ACollectiveInItsRoundsRunsItsMicrophaseAgain) {
  // Released in an earlier slice, still moving on one node: the other node
  // is done with it and does not even report the context.
  wire::CollLevel busy = level(1, 2, 3, 0, 0);
  busy.busy_rm = 1;
  auto p = plan_after_dem({dem(0, {}, {busy}), dem(0, {}, {})}, 1, {{1, 3}});
  EXPECT_TRUE(p.coll_release.empty()) << "nothing new to release";
  EXPECT_TRUE(p.run_rm);
  EXPECT_FALSE(p.run_bbm);
}

TEST(SlicePlan, ContextsAreIndependent) {
  auto p = plan_after_dem({dem(0, {}, {level(1, 1, 2, 2, 0), level(3, 1, 0)})}, 0, {{1, 1}});
  ASSERT_EQ(p.coll_release.size(), 1u);
  EXPECT_EQ(p.coll_release[0].context, 1);
  EXPECT_TRUE(p.run_bbm);
}

TEST(SlicePlan, P2pRunsOnlyWhenChunksWereScheduledAndAnnouncesRemoteReads) {
  wire::Report a, b;
  a.chunks = 2;
  a.gets_to = {0, 2};
  b.chunks = 0;
  b.gets_to = {1, 0};
  auto p = plan_after_msm({a, b}, 1);
  EXPECT_EQ(p.chunks, 2u);
  EXPECT_EQ(p.expect_gets, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(plan_after_msm({wire::Report{}}, 0).chunks, 0u);
}

TEST(SlicePlan, ReportsSurviveTheWire) {
  wire::Report r = dem(7, {1, 2}, {level(1, 2, 3, 4, 5)});
  r.coll_drained = 9;
  r.collectives = 3;
  auto back = wire::decode_report(wire::encode(r));
  EXPECT_EQ(back.drained, 7u);
  EXPECT_EQ(back.coll_drained, 9u);
  EXPECT_EQ(back.collectives, 3u);
  ASSERT_EQ(back.coll.size(), 1u);
  EXPECT_EQ(back.coll[0].first_rm, 5u);
  wire::Strobe s;
  s.coll_release = {{1, 4}, {3, 2}};
  auto sb = wire::decode_strobe(wire::encode(s));
  ASSERT_EQ(sb.coll_release.size(), 2u);
  EXPECT_EQ(sb.coll_release[1].context, 3);
  EXPECT_EQ(sb.coll_release[1].level, 2u);
}

// A one-node job's fused report (split_fused): the node's bytes are input.
wire::Report part(uint64_t slice, wire::Phase phase) {
  wire::Report r;
  r.slice = slice;
  r.phase = phase;
  return r;
}

TEST(FusedReport, ALeaseIsCutIntoItsSlices) {
  using wire::Phase;
  wire::FusedReport f;
  f.parts = {part(7, Phase::dem), part(7, Phase::msm), part(7, Phase::p2p),
             part(8, Phase::dem), part(8, Phase::rm),  part(9, Phase::dem)};
  const FusedSlices c = split_fused(f, 7, 2);
  EXPECT_EQ(c.bad, SIZE_MAX) << c.why;
  EXPECT_EQ(c.begins, (std::vector<size_t>{0, 3, 5}));
}

TEST(FusedReport, PartsOutOfOrderOrBeyondTheLeaseAreRefused) {
  using wire::Phase;
  auto bad = [](std::vector<wire::Report> parts, uint32_t lease) {
    wire::FusedReport f;
    f.parts = std::move(parts);
    return split_fused(f, 7, lease);
  };
  // Not the strobe's slice, or not starting with its DEM.
  EXPECT_EQ(bad({part(6, Phase::dem)}, 4).bad, 0u);
  EXPECT_EQ(bad({part(7, Phase::msm)}, 4).bad, 0u);
  // A microphase twice or backwards, a slice skipped or repeated.
  EXPECT_EQ(bad({part(7, Phase::dem), part(7, Phase::msm), part(7, Phase::msm)}, 4).bad, 2u);
  EXPECT_EQ(bad({part(7, Phase::dem), part(7, Phase::rm), part(7, Phase::bbm)}, 4).bad, 2u);
  EXPECT_EQ(bad({part(7, Phase::dem), part(7, Phase::dem)}, 4).bad, 1u);
  EXPECT_EQ(bad({part(8, Phase::dem), part(7, Phase::dem)}, 4).bad, 0u);
  EXPECT_EQ(bad({part(7, Phase::dem), part(8, Phase::dem), part(7, Phase::dem)}, 4).bad, 2u);
  EXPECT_EQ(bad({part(7, Phase::dem), part(8, Phase::msm)}, 4).bad, 1u);
  // More slices than the lease allowed (none: a strobe without a lease).
  const FusedSlices over = bad({part(7, Phase::dem), part(8, Phase::dem)}, 0);
  EXPECT_EQ(over.bad, 1u);
  EXPECT_NE(over.why.find("lease"), std::string::npos);
  // Periods the lease skipped (a gap in the numbers) are fine, up to the
  // most a lease may skip.
  EXPECT_EQ(bad({part(7, Phase::dem), part(9, Phase::dem), part(12, Phase::dem)}, 4).bad,
            SIZE_MAX);
  EXPECT_EQ(bad({part(7, Phase::dem), part(8 + wire::kMaxLeaseSkipped, Phase::dem)}, 4).bad,
            SIZE_MAX);
  const FusedSlices far =
      bad({part(7, Phase::dem), part(9 + wire::kMaxLeaseSkipped, Phase::dem)}, 4);
  EXPECT_EQ(far.bad, 1u);
  EXPECT_NE(far.why.find("skipped"), std::string::npos);
  // A microphase that does not exist.
  EXPECT_EQ(bad({part(7, static_cast<Phase>(9))}, 4).bad, 0u);
  // No part at all.
  EXPECT_EQ(bad({}, 4).bad, 0u);
  // A failure the node reports names its own cause; the slices before it
  // are still cut.
  auto failed = part(8, Phase::msm);
  failed.fail("batch from node 2 never came");
  const FusedSlices c = bad({part(7, Phase::dem), part(8, Phase::dem), failed}, 4);
  EXPECT_EQ(c.bad, 2u);
  EXPECT_EQ(c.why, "batch from node 2 never came");
  EXPECT_EQ(c.begins, (std::vector<size_t>{0, 1}));
}

// The budget a job gets without --chunk: one slice's worth of copying at
// the slowest node's rate, in 64 KiB steps, within the bounds.
TEST(SlicePlan, TheChunkBudgetIsWhatTheSlowestNodeCopiesInOneSlice) {
  // 6 GB/s for 500 us: 3,000,000 bytes, rounded down to 64 KiB = 2,949,120.
  EXPECT_EQ(chunk_budget(6'000'000'000, 500'000), 45u * (64u << 10));
  EXPECT_EQ(chunk_budget(6'000'000'000, 500'000) % (64u << 10), 0u);
  // Twice the slice, twice the budget (up to the rounding).
  EXPECT_EQ(chunk_budget(6'000'000'000, 1'000'000), 91u * (64u << 10));
  // Bounds: a short slice or a slow node still moves kMinChunk; a long
  // slice on a fast node no more than kMaxChunk.
  EXPECT_EQ(chunk_budget(6'000'000'000, 10'000), kMinChunk);
  EXPECT_EQ(chunk_budget(1, 500'000), kMinChunk);
  EXPECT_EQ(chunk_budget(6'000'000'000, 10'000'000'000), kMaxChunk);
  // A rate no node measured: the old fixed budget. Absurd figures (a node
  // manager's report is input) neither overflow nor escape the bounds.
  EXPECT_EQ(chunk_budget(0, 500'000), kDefaultChunk);
  EXPECT_EQ(chunk_budget(UINT64_MAX, UINT64_MAX), kMaxChunk);
  EXPECT_EQ(chunk_budget(UINT64_MAX, 1), kMaxChunk);
}

}  // namespace
}  // namespace bcs::mm
