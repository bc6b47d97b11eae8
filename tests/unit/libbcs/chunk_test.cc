// ChunkScheduler (matcher.h): cutting matched transfers into per-slice chunks.
#include <map>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "bcs/matcher.h"

namespace bcs {
namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB;

Match transfer(uint64_t bytes, int32_t tag = 0, bool is_inline = false) {
  Match m;
  m.send.len = bytes;
  m.send.tag = tag;
  m.send.is_inline = is_inline;
  if (is_inline) m.send.payload.assign(bytes, 0xab);
  m.recv.cap = bytes;
  m.bytes = bytes;
  return m;
}

// Runs slices until idle (bounded), checking per-transfer contiguity and flags,
// and returns the chunks of each slice.
std::vector<std::vector<Chunk>> drain(ChunkScheduler& cs, int max_slices = 10000) {
  std::vector<std::vector<Chunk>> slices;
  while (!cs.idle() && max_slices-- > 0) {
    slices.push_back(cs.schedule_slice());
    cs.finish_slice();
  }
  EXPECT_TRUE(cs.idle());
  return slices;
}

TEST(ChunkTest, SixteenMiBInOneMiBSlices) {
  ChunkScheduler cs(1 * MiB);
  cs.add(transfer(16 * MiB, 7));
  EXPECT_FALSE(cs.idle());
  EXPECT_EQ(cs.in_flight(), 1u);
  uint64_t next = 0;
  int slices = 0;
  while (!cs.idle() && slices < 100) {
    auto ch = cs.schedule_slice();
    ASSERT_EQ(ch.size(), 1u) << "slice " << slices;
    const Chunk& c = ch[0];
    EXPECT_EQ(c.transfer, 0u);
    ASSERT_NE(c.match, nullptr);
    EXPECT_EQ(c.match->send.tag, 7);
    EXPECT_EQ(c.offset, next);
    EXPECT_EQ(c.len, 1 * MiB);
    EXPECT_EQ(c.first, slices == 0);
    EXPECT_EQ(c.last, slices == 15);
    next += c.len;
    cs.finish_slice();
    ++slices;
    EXPECT_EQ(cs.idle(), slices == 16);
  }
  EXPECT_EQ(slices, 16);
  EXPECT_EQ(next, 16 * MiB);
  EXPECT_TRUE(cs.schedule_slice().empty());  // nothing left, nothing scheduled
}

TEST(ChunkTest, UnevenSizeLastChunkIsTheRemainder) {
  ChunkScheduler cs(1 * MiB);
  cs.add(transfer(2 * MiB + 5));
  auto s = drain(cs);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2][0].offset, 2 * MiB);
  EXPECT_EQ(s[2][0].len, 5u);
  EXPECT_TRUE(s[2][0].last);
}

TEST(ChunkTest, TwoTransfersShareASlice) {
  ChunkScheduler cs(100);
  cs.add(transfer(30, 1));
  cs.add(transfer(50, 2));
  cs.add(transfer(60, 3));
  auto ch = cs.schedule_slice();
  // 30 + 50 + 20 of the third.
  ASSERT_EQ(ch.size(), 3u);
  EXPECT_EQ(ch[0].transfer, 0u);
  EXPECT_EQ(ch[0].len, 30u);
  EXPECT_TRUE(ch[0].first && ch[0].last);
  EXPECT_EQ(ch[1].transfer, 1u);
  EXPECT_EQ(ch[1].len, 50u);
  EXPECT_TRUE(ch[1].first && ch[1].last);
  EXPECT_EQ(ch[2].transfer, 2u);
  EXPECT_EQ(ch[2].match->send.tag, 3);
  EXPECT_EQ(ch[2].offset, 0u);
  EXPECT_EQ(ch[2].len, 20u);
  EXPECT_TRUE(ch[2].first);
  EXPECT_FALSE(ch[2].last);
  cs.finish_slice();
  EXPECT_EQ(cs.in_flight(), 1u);
  ch = cs.schedule_slice();
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].transfer, 2u);
  EXPECT_EQ(ch[0].offset, 20u);
  EXPECT_EQ(ch[0].len, 40u);
  EXPECT_FALSE(ch[0].first);
  EXPECT_TRUE(ch[0].last);
  cs.finish_slice();
  EXPECT_TRUE(cs.idle());
}

TEST(ChunkTest, FifoNoLaterTransferOvertakesAPartialOne) {
  ChunkScheduler cs(100);
  cs.add(transfer(250, 1));
  cs.add(transfer(10, 2));
  auto s = drain(cs);
  ASSERT_EQ(s.size(), 3u);
  ASSERT_EQ(s[0].size(), 1u);
  ASSERT_EQ(s[1].size(), 1u);
  ASSERT_EQ(s[2].size(), 2u);  // 50 of the first, then the small one
  EXPECT_EQ(s[2][0].len, 50u);
  EXPECT_EQ(s[2][1].transfer, 1u);
  EXPECT_EQ(s[2][1].len, 10u);
}

TEST(ChunkTest, ZeroByteTransferIsOneFreeChunk) {
  ChunkScheduler cs(100);
  cs.add(transfer(100, 1));
  cs.add(transfer(0, 2));
  cs.add(transfer(0, 3));
  cs.add(transfer(1, 4));
  auto ch = cs.schedule_slice();
  // The budget is spent on the first, the empty ones cost nothing, the
  // one-byte transfer has to wait.
  ASSERT_EQ(ch.size(), 3u);
  EXPECT_EQ(ch[1].transfer, 1u);
  EXPECT_EQ(ch[1].len, 0u);
  EXPECT_EQ(ch[1].offset, 0u);
  EXPECT_TRUE(ch[1].first && ch[1].last);
  EXPECT_EQ(ch[2].transfer, 2u);
  EXPECT_TRUE(ch[2].first && ch[2].last);
  cs.finish_slice();
  EXPECT_EQ(cs.in_flight(), 1u);
  ch = cs.schedule_slice();
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].transfer, 3u);
  EXPECT_EQ(ch[0].len, 1u);
}

TEST(ChunkTest, TruncatedToZeroIsAZeroByteTransfer) {
  ChunkScheduler cs(100);
  Match m = transfer(500);
  m.recv.cap = 0;
  m.bytes = 0;
  m.truncated = true;
  cs.add(m);
  auto ch = cs.schedule_slice();
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].len, 0u);
  EXPECT_TRUE(ch[0].last);
  EXPECT_TRUE(ch[0].match->truncated);
}

TEST(ChunkTest, TruncatedTransferMovesOnlyTheReceiverCapacity) {
  ChunkScheduler cs(64);
  Match m = transfer(1000);
  m.recv.cap = 100;
  m.bytes = 100;
  m.truncated = true;
  cs.add(m);
  auto s = drain(cs);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0][0].len + s[1][0].len, 100u);
}

TEST(ChunkTest, InlineTransfersAreSingleChunks) {
  ChunkScheduler cs(200);
  cs.add(transfer(150, 1, /*inline=*/true));
  cs.add(transfer(100, 2, /*inline=*/true));  // 150 + 100 > 200: waits, whole
  cs.add(transfer(10, 3));
  auto ch = cs.schedule_slice();
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].len, 150u);
  EXPECT_TRUE(ch[0].first && ch[0].last);
  cs.finish_slice();
  ch = cs.schedule_slice();
  ASSERT_EQ(ch.size(), 2u);
  EXPECT_EQ(ch[0].transfer, 1u);
  EXPECT_EQ(ch[0].len, 100u);
  EXPECT_TRUE(ch[0].first && ch[0].last);
  EXPECT_EQ(ch[1].transfer, 2u);
  EXPECT_EQ(ch[1].len, 10u);
  cs.finish_slice();
  EXPECT_TRUE(cs.idle());
}

TEST(ChunkTest, InlineLargerThanBudgetStillProgresses) {
  ChunkScheduler cs(16);
  cs.add(transfer(192, 1, /*inline=*/true));
  cs.add(transfer(192, 2, /*inline=*/true));
  auto s = drain(cs, 10);
  ASSERT_EQ(s.size(), 2u);  // one per slice, never split
  for (const auto& ch : s) {
    ASSERT_EQ(ch.size(), 1u);
    EXPECT_EQ(ch[0].len, 192u);
    EXPECT_TRUE(ch[0].first && ch[0].last);
  }
}

TEST(ChunkTest, TinyBudgetAlwaysProgresses) {
  ChunkScheduler cs(1);
  cs.add(transfer(5));
  auto s = drain(cs, 100);
  ASSERT_EQ(s.size(), 5u);
  for (uint64_t i = 0; i < 5; ++i) {
    ASSERT_EQ(s[i].size(), 1u);
    EXPECT_EQ(s[i][0].offset, i);
    EXPECT_EQ(s[i][0].len, 1u);
  }
}

TEST(ChunkTest, ZeroBudgetMeansUnlimited) {
  ChunkScheduler cs(0);
  cs.add(transfer(64 * MiB));
  cs.add(transfer(3));
  auto ch = cs.schedule_slice();
  ASSERT_EQ(ch.size(), 2u);
  EXPECT_EQ(ch[0].len, 64 * MiB);
  EXPECT_TRUE(ch[0].first && ch[0].last);
  EXPECT_EQ(ch[1].len, 3u);
  cs.finish_slice();
  EXPECT_TRUE(cs.idle());
}

TEST(ChunkTest, BudgetChangeBetweenSlices) {
  ChunkScheduler cs(10);
  EXPECT_EQ(cs.budget(), 10u);
  cs.add(transfer(100));
  auto ch = cs.schedule_slice();
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].len, 10u);
  cs.finish_slice();
  cs.set_budget(50);
  EXPECT_EQ(cs.budget(), 50u);
  ch = cs.schedule_slice();
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].offset, 10u);
  EXPECT_EQ(ch[0].len, 50u);
  EXPECT_FALSE(ch[0].first);
  EXPECT_FALSE(ch[0].last);
  cs.finish_slice();
  cs.set_budget(5);
  ch = cs.schedule_slice();
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].offset, 60u);
  EXPECT_EQ(ch[0].len, 5u);
  cs.finish_slice();
  cs.set_budget(1000);
  ch = cs.schedule_slice();
  ASSERT_EQ(ch.size(), 1u);
  EXPECT_EQ(ch[0].offset, 65u);
  EXPECT_EQ(ch[0].len, 35u);
  EXPECT_TRUE(ch[0].last);
  cs.finish_slice();
  EXPECT_TRUE(cs.idle());
}

TEST(ChunkTest, FinishSliceRemovesOnlyFinishedTransfers) {
  ChunkScheduler cs(100);
  cs.add(transfer(40, 1));
  cs.add(transfer(40, 2));
  cs.add(transfer(40, 3));
  cs.add(transfer(40, 4));
  auto ch = cs.schedule_slice();  // 40, 40, 20 of the third
  ASSERT_EQ(ch.size(), 3u);
  EXPECT_EQ(cs.in_flight(), 4u);  // nothing is forgotten before finish_slice
  cs.finish_slice();
  EXPECT_EQ(cs.in_flight(), 2u);
  // The survivors are the partial third and the untouched fourth, and the
  // pointers the scheduler hands out still refer to them.
  ch = cs.schedule_slice();
  ASSERT_EQ(ch.size(), 2u);
  EXPECT_EQ(ch[0].match->send.tag, 3);
  EXPECT_EQ(ch[0].offset, 20u);
  EXPECT_EQ(ch[1].match->send.tag, 4);
  cs.finish_slice();
  EXPECT_TRUE(cs.idle());
  // finish_slice with nothing scheduled is harmless.
  cs.finish_slice();
  EXPECT_TRUE(cs.idle());
}

TEST(ChunkTest, ChunkPointerStaysValidWhileTransfersAreAdded) {
  ChunkScheduler cs(10);
  cs.add(transfer(25, 42));
  auto ch = cs.schedule_slice();
  ASSERT_EQ(ch.size(), 1u);
  const Match* p = ch[0].match;
  // The MSM of the next slice may add matches while the DH still holds this
  // slice's chunks.
  for (int i = 0; i < 1000; ++i) cs.add(transfer(1, i));
  EXPECT_EQ(p->send.tag, 42);
  EXPECT_EQ(ch[0].match, p);
  cs.finish_slice();
  ch = cs.schedule_slice();
  ASSERT_FALSE(ch.empty());
  EXPECT_EQ(ch[0].match, p);  // same transfer, same object across slices
  EXPECT_EQ(p->send.tag, 42);
}

TEST(ChunkTest, ScheduleWithoutFinishDoesNotRepeatChunks) {
  ChunkScheduler cs(100);
  cs.add(transfer(50, 1));
  cs.add(transfer(80, 2));
  auto a = cs.schedule_slice();
  auto b = cs.schedule_slice();  // finish_slice() not called in between
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].transfer, 1u);
  EXPECT_EQ(b[0].offset, 50u);
  EXPECT_EQ(b[0].len, 30u);
  EXPECT_TRUE(b[0].last);
}

// Many random transfers under a random budget: every byte of every transfer
// is scheduled exactly once, in order, each slice stays within budget
// (except a lone inline chunk), and no slice is empty while work remains.
TEST(ChunkTest, RandomWorkloadCoversEveryByteOnce) {
  uint64_t state = 12345;
  auto rnd = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  ChunkScheduler cs(1000);
  std::map<uint64_t, uint64_t> size_of, next_off;
  std::map<uint64_t, bool> finished;
  std::map<uint64_t, std::pair<int32_t, int32_t>> pair_of;
  std::map<std::pair<int32_t, int32_t>, uint64_t> last_started;  // per pair
  uint64_t added = 0;
  for (int slice = 0; slice < 2000 && (added < 500 || !cs.idle()); ++slice) {
    if (added < 500) {
      for (uint64_t k = rnd(4); k > 0; --k) {
        const bool inl = rnd(4) == 0;
        const uint64_t bytes = inl ? rnd(193) : (rnd(5) == 0 ? 0 : rnd(5000));
        size_of[added] = bytes;
        Match m = transfer(bytes, static_cast<int32_t>(added), inl);
        m.send.src = static_cast<int32_t>(rnd(3));  // three senders, two receivers
        m.recv.rank = static_cast<int32_t>(rnd(2));
        pair_of[added] = {m.send.src, m.recv.rank};
        cs.add(m);
        ++added;
      }
    }
    if (slice % 7 == 0) cs.set_budget(1 + rnd(3000));
    const bool had_work = !cs.idle();
    auto ch = cs.schedule_slice();
    if (had_work) {
      ASSERT_FALSE(ch.empty()) << "slice " << slice;
    }
    uint64_t spent = 0;
    for (const Chunk& c : ch) {
      ASSERT_FALSE(finished[c.transfer]);
      ASSERT_EQ(c.offset, next_off[c.transfer]);
      if (c.first) {
        // A pair's transfer starts only once the pair's previous one is done.
        auto& prev = last_started[pair_of[c.transfer]];
        if (prev) {
          ASSERT_TRUE(finished[prev - 1]) << "transfer " << c.transfer;
        }
        prev = c.transfer + 1;
      }
      ASSERT_EQ(c.first, c.offset == 0);
      ASSERT_EQ(static_cast<uint64_t>(c.match->send.tag), c.transfer);
      next_off[c.transfer] += c.len;
      ASSERT_LE(next_off[c.transfer], size_of[c.transfer]);
      ASSERT_EQ(c.last, next_off[c.transfer] == size_of[c.transfer]);
      if (c.last) finished[c.transfer] = true;
      spent += c.len;
    }
    if (!ch.empty() && ch[0].match->send.is_inline && ch[0].len > cs.budget()) {
      EXPECT_EQ(spent, ch[0].len) << "an oversized inline chunk travels alone, slice " << slice;
    } else {
      EXPECT_LE(spent, cs.budget()) << "slice " << slice;
    }
    cs.finish_slice();
  }
  EXPECT_TRUE(cs.idle());
  EXPECT_EQ(added, size_of.size());
  for (const auto& [id, bytes] : size_of) {
    EXPECT_TRUE(finished[id]) << "transfer " << id;
    EXPECT_EQ(next_off[id], bytes);
  }
}

// ---- fairness between (sender, receiver) pairs

Match pair_transfer(int32_t src, int32_t dst, uint64_t bytes, int32_t tag) {
  Match m = transfer(bytes, tag);
  m.send.src = src;
  m.send.dst = dst;
  m.recv.rank = dst;
  return m;
}

// Issue 8: behind one 1 GiB transfer into a node, an unrelated 8-byte
// message must not wait for the gigabyte.
TEST(ChunkFairness, ASmallMessageIsNotScheduledBehindAnotherPairsLargeTransfer) {
  ChunkScheduler cs(2 * MiB);
  cs.add(pair_transfer(0, 1, 1024 * MiB, 1));
  auto first = cs.schedule_slice();  // the gigabyte is under way
  cs.finish_slice();
  ASSERT_EQ(first.size(), 1u);
  cs.add(pair_transfer(2, 1, 8, 2));
  auto ch = cs.schedule_slice();
  bool small_done = false;
  for (const Chunk& c : ch)
    if (c.match->send.tag == 2) small_done = c.first && c.last && c.len == 8;
  EXPECT_TRUE(small_done) << "the 8-byte message waits behind the 1 GiB transfer";
  // And the large one still moves in the same slice.
  uint64_t large = 0;
  for (const Chunk& c : ch)
    if (c.match->send.tag == 1) large += c.len;
  EXPECT_EQ(large, 2 * MiB - 8);
}

TEST(ChunkFairness, TwoLargeTransfersShareEachSliceEqually) {
  ChunkScheduler cs(100);
  cs.add(pair_transfer(0, 1, 1000, 1));
  cs.add(pair_transfer(2, 1, 1000, 2));
  for (int slice = 0; slice < 5; ++slice) {
    auto ch = cs.schedule_slice();
    std::map<int32_t, uint64_t> got;
    for (const Chunk& c : ch) got[c.match->send.tag] += c.len;
    EXPECT_EQ(got[1], 50u) << "slice " << slice;
    EXPECT_EQ(got[2], 50u) << "slice " << slice;
    cs.finish_slice();
  }
}

// A budget smaller than the number of pairs: the first pair rotates, so no
// pair starves.
TEST(ChunkFairness, TheFirstPairRotatesSoNoPairStarves) {
  ChunkScheduler cs(2);
  for (int32_t p = 0; p < 3; ++p) cs.add(pair_transfer(p, 9, 10, p));
  std::map<int32_t, uint64_t> got;
  for (int slice = 0; slice < 3; ++slice) {
    for (const Chunk& c : cs.schedule_slice()) got[c.match->send.tag] += c.len;
    cs.finish_slice();
  }
  for (int32_t p = 0; p < 3; ++p) EXPECT_EQ(got[p], 2u) << "pair " << p;
}

// Fair between pairs never reorders one pair's transfers (non-overtaking).
TEST(ChunkFairness, WithinAPairTransfersStillFinishInOrder) {
  ChunkScheduler cs(60);
  cs.add(pair_transfer(0, 1, 100, 1));
  cs.add(pair_transfer(0, 1, 10, 2));
  cs.add(pair_transfer(3, 1, 10, 3));
  std::vector<int32_t> finished;
  for (int slice = 0; slice < 10 && !cs.idle(); ++slice) {
    for (const Chunk& c : cs.schedule_slice())
      if (c.last) finished.push_back(c.match->send.tag);
    cs.finish_slice();
  }
  EXPECT_TRUE(cs.idle());
  // Pair (3,1) is done in the first slice; pair (0,1) keeps 1 before 2.
  EXPECT_EQ(finished, (std::vector<int32_t>{3, 1, 2}));
}

// The same additions always give the same chunks (determinism of the
// slice schedule), here with many pairs and random sizes.
TEST(ChunkFairness, TheScheduleDependsOnlyOnWhatWasAdded) {
  auto run = [] {
    uint64_t state = 99;
    auto rnd = [&](uint64_t n) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return (state >> 33) % n;
    };
    ChunkScheduler cs(500);
    std::vector<std::tuple<uint64_t, uint64_t, uint64_t>> log;
    for (int slice = 0; slice < 200; ++slice) {
      for (uint64_t k = rnd(3); k > 0; --k)
        cs.add(pair_transfer(static_cast<int32_t>(rnd(4)), static_cast<int32_t>(rnd(2)),
                             rnd(2000), slice));
      for (const Chunk& c : cs.schedule_slice()) log.emplace_back(c.transfer, c.offset, c.len);
      cs.finish_slice();
    }
    return log;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace bcs
