// The unexpected shelf (segment.h, Shelf; shelf.h): the node manager's
// keeper and the rank's take, played against each other on one Shelf and
// one Matcher.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bcs/shelf.h"
#include "matcher_helpers.h"

namespace bcs {
namespace {

using matcher_test::recv;

constexpr int32_t kRank = 0, kSrc = 1;

// An inline send from kSrc carrying `value`.
SendDesc small(int32_t tag, uint64_t seq, int32_t value, int32_t context = 0) {
  SendDesc s = matcher_test::send(kSrc, kRank, tag, seq, 1, sizeof value, context);
  s.is_inline = true;
  s.payload.resize(sizeof value);
  std::memcpy(s.payload.data(), &value, sizeof value);
  return s;
}

SendDesc large(int32_t tag, uint64_t seq) {
  return matcher_test::send(kSrc, kRank, tag, seq, 1, 1 << 20);
}

class ShelfTest : public testing::Test {
 protected:
  // The matcher holds `sends` unexpected for kRank; the keeper offers them.
  void hold(std::vector<SendDesc> sends) {
    std::string why;
    ASSERT_GE(keeper_.withdraw(shelf_.get(), matcher_, kRank, &why), 0) << why;
    matcher_.msm(1, {}, std::move(sends));
    keeper_.offer(shelf_.get(), matcher_, kRank);
  }
  // What a receive of (tag, context) from kSrc takes, or -1 if nothing.
  int32_t take(int32_t tag, int32_t context = 0, ShelfTaken* t = nullptr) {
    int32_t v = -1;
    ShelfTaken got;
    if (!shelf_take(shelf_.get(), kSrc, context, tag, &v, sizeof v, &got)) return -1;
    if (t) *t = got;
    return v;
  }
  std::unique_ptr<Shelf> shelf_ = std::make_unique<Shelf>();  // zeroed, as a new segment
  Matcher matcher_;
  ShelfKeeper keeper_;
};

TEST_F(ShelfTest, AReceiveTakesItsKeysMessagesInSendOrderAndTheyLeaveMatching) {
  hold({small(5, 1, 10), small(7, 2, 20), small(5, 3, 30)});
  EXPECT_EQ(shelf_->count.load(), 3u);
  ShelfTaken t;
  EXPECT_EQ(take(5, 0, &t), 10);
  EXPECT_EQ(t.pair_seq, 1u);
  EXPECT_EQ(t.len, sizeof(int32_t));
  EXPECT_EQ(take(5), 30);
  EXPECT_EQ(take(5), -1);  // none left of that key
  EXPECT_EQ(take(5, 1), -1);  // nor of another context
  // The node manager learns it at the next withdrawal: two were received.
  std::string why;
  EXPECT_EQ(keeper_.withdraw(shelf_.get(), matcher_, kRank, &why), 2);
  EXPECT_EQ(matcher_.unexpected_count(kRank), 1u);
  // Withdrawn: the shelf is closed until the next offer.
  EXPECT_EQ(take(7), -1);
  keeper_.offer(shelf_.get(), matcher_, kRank);
  EXPECT_EQ(take(7), 20);
}

TEST_F(ShelfTest, OnlyTheLeadingRunOfInlineSendsOfAKeyIsOffered) {
  // Tag 5: small, large, small: only the first (the third must wait for the
  // large one, which needs the node manager). Tag 6 starts with a large
  // one: nothing of it. Tag 7: all.
  hold({small(5, 1, 1), large(5, 2), small(5, 3, 3), large(6, 4), small(6, 5, 5), small(7, 6, 6),
        small(7, 7, 7)});
  EXPECT_EQ(shelf_->count.load(), 3u);
  EXPECT_EQ(take(5), 1);
  EXPECT_EQ(take(5), -1);
  EXPECT_EQ(take(6), -1);
  EXPECT_EQ(take(7), 6);
  EXPECT_EQ(take(7), 7);
}

// An eager send (kInlineMax < len <= kInlineSpanMax) completed at its post
// like an inline one, but an entry holds kInlineMax bytes: it stays with
// the node manager, and cuts its key's run as a large send does.
TEST_F(ShelfTest, AnEagerSendIsNotOfferedAndEndsItsKeysRun) {
  auto eager = [](int32_t tag, uint64_t seq) {
    SendDesc s = matcher_test::send(kSrc, kRank, tag, seq, 1, kInlineMax + 1);
    s.is_inline = true;
    s.payload.assign(kInlineMax + 1, 0x5a);
    return s;
  };
  hold({small(5, 1, 1), eager(5, 2), small(5, 3, 3), eager(6, 4), small(6, 5, 5)});
  EXPECT_EQ(shelf_->count.load(), 1u);
  EXPECT_EQ(take(5), 1);
  EXPECT_EQ(take(5), -1);
  EXPECT_EQ(take(6), -1);
  EXPECT_FALSE(matcher_.take_shelved(kRank, 0, kSrc, 5, 2)) << "not the rank's to take";
}

TEST_F(ShelfTest, KeysTakeTurnsSoThatABacklogDoesNotCrowdOutTheOthers) {
  std::vector<SendDesc> v;
  uint64_t seq = 0;
  for (int i = 0; i < 200; ++i) v.push_back(small(1, ++seq, i));
  v.push_back(small(2, ++seq, 1000));
  hold(v);
  EXPECT_EQ(shelf_->count.load(), kShelfSlots);
  EXPECT_EQ(take(2), 1000);
  for (int i = 0; i < static_cast<int>(kShelfSlots) - 1; ++i) EXPECT_EQ(take(1), i);
  EXPECT_EQ(take(1), -1);  // the rest waits for the next offer
  std::string why;
  EXPECT_EQ(keeper_.withdraw(shelf_.get(), matcher_, kRank, &why),
            static_cast<int>(kShelfSlots));
  keeper_.offer(shelf_.get(), matcher_, kRank);
  EXPECT_EQ(take(1), static_cast<int>(kShelfSlots) - 1);
}

TEST_F(ShelfTest, ALongerMessageIsCutToTheBufferAndSaysHowLongItWas) {
  SendDesc s = small(5, 1, 0);
  s.len = 16;
  s.payload.assign(16, 0);
  for (int i = 0; i < 16; ++i) s.payload[static_cast<size_t>(i)] = static_cast<uint8_t>(i + 1);
  hold({s});
  uint8_t buf[8] = {};
  ShelfTaken t;
  ASSERT_TRUE(shelf_take(shelf_.get(), kSrc, 0, 5, buf, 4, &t));
  EXPECT_EQ(t.len, 16u);
  EXPECT_EQ(buf[3], 4);
  EXPECT_EQ(buf[4], 0);  // nothing past the buffer
}

TEST_F(ShelfTest, AReceiveGivesUpOnAShelfBeingRewritten) {
  hold({small(5, 1, 10), small(5, 2, 11)});
  // As a rank sees it while the node manager withdraws: odd epoch.
  const uint32_t e = shelf_->epoch.load();
  shelf_->epoch.store(e | 1);
  EXPECT_EQ(take(5), -1);
  shelf_->epoch.store(e);
  // The first entry withdrawn, the second not yet (a withdrawal under
  // way): the receive must not skip to the second.
  const uint32_t w = shelf_->entries[0].state.load();
  shelf_->entries[0].state.store((w & ~3u) | kShelfWithdrawn);
  EXPECT_EQ(take(5), -1);
  shelf_->entries[0].state.store(w);
  // An entry of the next epoch (offered again meanwhile): the same.
  shelf_->entries[0].state.store(w + 4);
  EXPECT_EQ(take(5), -1);
  shelf_->entries[0].state.store(w);
  EXPECT_EQ(take(5), 10);
}

TEST_F(ShelfTest, AMessageTheRankTookIsNotCancelledAndOneItDidNotIs) {
  hold({small(5, 1, 10), small(5, 2, 11)});
  EXPECT_EQ(take(5), 10);
  // Cancels of both arrive; the buffer receiver withdraws first.
  std::string why;
  EXPECT_EQ(keeper_.withdraw(shelf_.get(), matcher_, kRank, &why), 1);
  matcher_.cancel_sends({SendCancel{kSrc, kRank, 7, 1, true}, SendCancel{kSrc, kRank, 8, 2, true}});
  const auto m = matcher_.take_matches();
  ASSERT_EQ(m.size(), 2u);
  EXPECT_TRUE(m[0].cancel_late);  // it was received
  EXPECT_TRUE(m[1].cancelled);
  EXPECT_FALSE(m[1].cancel_late);
  keeper_.offer(shelf_.get(), matcher_, kRank);
  EXPECT_EQ(take(5), -1);
}

TEST_F(ShelfTest, GarbageFromTheRankIsNamedAndNothingMoreIsRead) {
  hold({small(5, 1, 10), small(5, 2, 11)});
  shelf_->entries[1].state.store(0xdeadbeef);
  std::string why;
  EXPECT_EQ(keeper_.withdraw(shelf_.get(), matcher_, kRank, &why), -1);
  EXPECT_NE(why.find("unexpected shelf"), std::string::npos) << why;
  EXPECT_NE(why.find("entry 1"), std::string::npos) << why;
  // Its messages stay with the matcher.
  EXPECT_EQ(matcher_.unexpected_count(kRank), 2u);
}

TEST_F(ShelfTest, AWordMarkedTakenThatWasNeverOfferedTakesNothing) {
  hold({small(5, 1, 10)});
  // A "taken" word of a slot past the offers, and of another epoch in an
  // offered slot: neither is ours taken.
  shelf_->entries[3].state.store(kShelfTaken);
  std::string why;
  EXPECT_EQ(keeper_.withdraw(shelf_.get(), matcher_, kRank, &why), 0) << why;
  EXPECT_EQ(matcher_.unexpected_count(kRank), 1u);
  keeper_.offer(shelf_.get(), matcher_, kRank);
  const uint32_t w = shelf_->entries[0].state.load();
  shelf_->entries[0].state.store(((w + 4) & ~3u) | kShelfTaken);
  EXPECT_EQ(keeper_.withdraw(shelf_.get(), matcher_, kRank, &why), -1);
}

TEST_F(ShelfTest, AnyTagTakesTheSourcesEarliestIfNothingHeldBackComesBeforeIt) {
  // Tag 5: #1, #4; tag 7: #2, then the large #3 (not offered), so (0, 1)'s
  // cut is 3.
  hold({small(5, 1, 10), small(7, 2, 20), large(7, 3), small(5, 4, 40)});
  ShelfTaken t;
  EXPECT_EQ(take(kAnyTag, 0, &t), 10);
  EXPECT_EQ(t.tag, 5);
  EXPECT_EQ(take(kAnyTag, 0, &t), 20);
  EXPECT_EQ(t.tag, 7);
  // #4 is next on the shelf, but the large #3 comes before it.
  EXPECT_EQ(take(kAnyTag), -1);
  EXPECT_FALSE(shelf_peek(shelf_.get(), kSrc, 0, kAnyTag, &t));
  // A receive of tag 5 may: #3 is not of its key.
  ASSERT_TRUE(shelf_peek(shelf_.get(), kSrc, 0, 5, &t));
  EXPECT_EQ(t.pair_seq, 4u);
  EXPECT_EQ(take(5), 40);
}

TEST_F(ShelfTest, AProbeSaysWhatTheReceiveWouldTakeAndTakesNothing) {
  hold({small(7, 1, 10), small(5, 2, 20)});
  ShelfTaken t;
  ASSERT_TRUE(shelf_peek(shelf_.get(), kSrc, 0, kAnyTag, &t));
  EXPECT_EQ(t.tag, 7);
  EXPECT_EQ(t.pair_seq, 1u);
  ASSERT_TRUE(shelf_peek(shelf_.get(), kSrc, 0, 5, &t));
  EXPECT_EQ(t.pair_seq, 2u);
  EXPECT_EQ(take(kAnyTag), 10);
  EXPECT_EQ(take(kAnyTag), 20);
  EXPECT_FALSE(shelf_peek(shelf_.get(), kSrc, 0, kAnyTag, &t));
}

// Any source: the earliest in the matcher's canonical order (slice, source,
// number) among the entries a receive accepts, if nothing it would accept
// is held back before it.
TEST_F(ShelfTest, AnySourceTakesTheEarliestArrivalItAcceptsIfNothingHeldBackComesBeforeIt) {
  auto from = [](int32_t src, int32_t tag, uint64_t seq, uint64_t slice, int32_t v) {
    SendDesc s = small(tag, seq, v);
    s.src = src;
    s.slice = slice;
    return s;
  };
  SendDesc big = large(5, 1);
  big.src = 3;
  big.slice = 2;
  // Slice 1: 2#1 (tag 5), 1#1 (tag 6); slice 2: 3#1 (tag 5, large);
  // slice 3: 1#2 (tag 5).
  hold({from(2, 5, 1, 1, 21), from(1, 6, 1, 1, 11), big, from(1, 5, 2, 3, 12)});
  auto any = [&](int32_t tag) {
    int32_t v = -1;
    ShelfTaken t;
    return shelf_take(shelf_.get(), kAnySource, 0, tag, &v, sizeof v, &t) ? v : -1;
  };
  // Canonical order within slice 1 is by source: 1#1 before 2#1.
  EXPECT_EQ(any(kAnyTag), 11);
  EXPECT_EQ(any(5), 21);
  // 1#2 (tag 5) comes after the large 3#1 (tag 5), which only the node
  // manager delivers: neither any-source tag 5 nor any-source any-tag may
  // take it, but a receive from source 1 may.
  EXPECT_EQ(any(5), -1);
  EXPECT_EQ(any(kAnyTag), -1);
  ShelfTaken t;
  ASSERT_TRUE(shelf_peek(shelf_.get(), 1, 0, kAnyTag, &t));
  EXPECT_EQ(t.src, 1);
  EXPECT_EQ(t.pair_seq, 2u);
}

TEST_F(ShelfTest, SendsHandedInOutOfOrderKeepWildcardsAway) {
  SendDesc late = small(5, 1, 10);
  late.slice = 1;
  SendDesc early = small(6, 2, 20);
  early.slice = 2;
  hold({early});
  matcher_.msm(2, {}, {late});  // an older slice, late
  std::string why;
  ASSERT_GE(keeper_.withdraw(shelf_.get(), matcher_, kRank, &why), 0);
  keeper_.offer(shelf_.get(), matcher_, kRank);
  EXPECT_EQ(take(kAnyTag), -1);
  EXPECT_EQ(take(5), 10);  // named keys still take
}

TEST_F(ShelfTest, WithTooManyKeysAnyTagGoesToTheNodeManager) {
  std::vector<SendDesc> v;
  for (int i = 0; i <= static_cast<int>(Matcher::kShelfCutKeys); ++i)
    v.push_back(small(i, static_cast<uint64_t>(i) + 1, i));
  hold(v);
  EXPECT_EQ(take(kAnyTag), -1);
  EXPECT_EQ(take(0), 0);  // a named tag still takes
}

// Found by fuzz_ring under UBSan: an empty message's payload vector has no
// storage, and copying "nothing" from its null data() was undefined.
TEST_F(ShelfTest, AnEmptyMessageIsOfferedAndTakenToo) {
  SendDesc s = small(5, 1, 0);
  s.len = 0;
  s.payload.clear();
  s.payload.shrink_to_fit();
  hold({s});
  ShelfTaken t;
  int32_t v = -1;
  ASSERT_TRUE(shelf_take(shelf_.get(), kSrc, 0, 5, &v, sizeof v, &t));
  EXPECT_EQ(t.len, 0u);
  EXPECT_EQ(v, -1);  // nothing written
}

TEST_F(ShelfTest, ANewShelfOffersNothing) {
  EXPECT_EQ(take(5), -1);
  keeper_.offer(shelf_.get(), matcher_, kRank);
  EXPECT_EQ(shelf_->count.load(), 0u);
  EXPECT_EQ(shelf_->epoch.load() % 2, 0u);
  EXPECT_EQ(take(5), -1);
}

}  // namespace
}  // namespace bcs
