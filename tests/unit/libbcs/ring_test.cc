// Descriptor ring and request table of the shared segment (segment.h).
//
// The segment is a real memfd mapping sized with SegmentLayout, as the node
// manager creates it, so these tests exercise the same layout arithmetic the
// NM and the ranks use.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "bcs/segment.h"

namespace bcs {
namespace {

// RAII: one memfd-backed segment with an initialised header.
class TestSegment {
 public:
  TestSegment(uint32_t nlocal, uint32_t ring_slots, uint32_t request_slots)
      : layout_{nlocal, ring_slots, request_slots}, bytes_(layout_.total_bytes()) {
    fd_ = memfd_create("bcs-ring-test", MFD_CLOEXEC);
    if (fd_ < 0) throw std::runtime_error("memfd_create");
    if (ftruncate(fd_, static_cast<off_t>(bytes_)) != 0) throw std::runtime_error("ftruncate");
    base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (base_ == MAP_FAILED) throw std::runtime_error("mmap");
    auto* h = static_cast<SegmentHeader*>(base_);  // memfd pages start zeroed
    h->magic = kSegmentMagic;
    h->version = kSegmentVersion;
    h->nlocal = nlocal;
    h->ring_slots = ring_slots;
    h->request_slots = request_slots;
    h->rank_area_bytes = layout_.rank_area_bytes();
    h->total_bytes = bytes_;
  }
  ~TestSegment() {
    munmap(base_, bytes_);
    close(fd_);
  }
  TestSegment(const TestSegment&) = delete;
  TestSegment& operator=(const TestSegment&) = delete;

  RankView view(uint32_t i) { return segment_rank_view(base_, i); }
  void* base() { return base_; }
  const SegmentLayout& layout() const { return layout_; }

 private:
  SegmentLayout layout_;
  size_t bytes_;
  int fd_ = -1;
  void* base_ = nullptr;
};

// A descriptor whose every field is derived from `n`, so a drained copy can be
// checked for both order and content. Every third one carries inline bytes.
Descriptor make_desc(uint64_t n) {
  Descriptor d{};
  d.kind = (n % 2) ? DescKind::send : DescKind::recv;
  d.request = static_cast<uint32_t>(n * 7);
  d.context = static_cast<int32_t>(n % 5);
  d.peer = static_cast<int32_t>(n % 11);
  d.tag = static_cast<int32_t>(n * 3);
  d.addr = 0x1000 + n;
  d.len = n * 13;
  d.seq = n;
  if (n % 3 == 0) {
    d.flags = kDescInline;
    d.inline_len = static_cast<uint32_t>(n % (kInlineMax + 1));
    for (uint32_t i = 0; i < d.inline_len; ++i) d.payload[i] = static_cast<uint8_t>(n + i * 31);
  }
  return d;
}

void expect_desc(const Descriptor& got, uint64_t n) {
  const Descriptor want = make_desc(n);
  ASSERT_EQ(got.seq, n);
  EXPECT_EQ(got.kind, want.kind);
  EXPECT_EQ(got.flags, want.flags);
  EXPECT_EQ(got.request, want.request);
  EXPECT_EQ(got.context, want.context);
  EXPECT_EQ(got.peer, want.peer);
  EXPECT_EQ(got.tag, want.tag);
  EXPECT_EQ(got.addr, want.addr);
  EXPECT_EQ(got.len, want.len);
  if (want.flags & kDescInline) {
    ASSERT_EQ(got.inline_len, want.inline_len);
    EXPECT_EQ(0, std::memcmp(got.payload, want.payload, want.inline_len)) << "descriptor " << n;
  }
}

TEST(SegmentLayoutTest, BlocksAre64ByteAlignedAndDisjoint) {
  TestSegment seg(3, 8, 16);
  const auto& l = seg.layout();
  EXPECT_EQ(l.header_bytes() % 64, 0u);
  EXPECT_EQ(l.rank_area_bytes() % 64, 0u);
  auto* base = static_cast<uint8_t*>(seg.base());
  for (uint32_t i = 0; i < 3; ++i) {
    RankView v = seg.view(i);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.ctl) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.ring) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.requests) % 64, 0u);
    EXPECT_EQ(v.ring_slots, 8u);
    EXPECT_EQ(v.request_slots, 16u);
    EXPECT_LT(reinterpret_cast<uint8_t*>(v.ctl), reinterpret_cast<uint8_t*>(v.ring));
    EXPECT_LT(reinterpret_cast<uint8_t*>(v.ring), reinterpret_cast<uint8_t*>(v.requests));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.landing) % 64, 0u);
    EXPECT_LE(reinterpret_cast<uint8_t*>(v.drains + v.ring_slots), v.landing);
    EXPECT_EQ(v.landing_slots, 16u);
    // The request table comes last, after the landings and the shelf.
    EXPECT_LE(v.landing + size_t{v.landing_slots} * kLandingMax, reinterpret_cast<uint8_t*>(v.shelf));
    EXPECT_LE(reinterpret_cast<uint8_t*>(v.shelf + 1), reinterpret_cast<uint8_t*>(v.requests));
    // The request table and the landings of the last rank end inside the
    // segment.
    EXPECT_LE(reinterpret_cast<uint8_t*>(v.requests + v.request_slots), base + l.total_bytes());
    EXPECT_LE(v.landing + size_t{v.request_slots} * kLandingMax, base + l.total_bytes());
    if (i > 0) {
      RankView prev = seg.view(i - 1);
      EXPECT_LE(reinterpret_cast<uint8_t*>(prev.requests + prev.request_slots),
                reinterpret_cast<uint8_t*>(v.ctl));
      EXPECT_LE(prev.landing + size_t{prev.request_slots} * kLandingMax,
                reinterpret_cast<uint8_t*>(v.ctl));
    }
  }
}

// The default table holds more than 10^6 requests a rank (issue 42), yet
// what the job's start backs with memory (hot_bytes) is what a table of
// 4096 was: the slots past kHotRequestSlots are at the end of the rank's
// area, and only the first kLandingSlots slots have a landing.
TEST(SegmentLayoutTest, TheLargeRequestTableIsLastAndOnlyItsHotSlotsArePopulated) {
  SegmentLayout l{2, 1024, kRequestSlots};
  EXPECT_GE(l.request_slots, 1'000'000u);
  EXPECT_EQ(l.landing_slots(), kLandingSlots);
  EXPECT_EQ(l.landing_bytes(), size_t{kLandingSlots} * kLandingMax);
  EXPECT_EQ(l.requests_offset() % 64, 0u);
  EXPECT_EQ(l.rank_area_bytes(), l.requests_offset() + size_t{kRequestSlots} * sizeof(RequestSlot));
  EXPECT_EQ(l.hot_bytes(), l.requests_offset() + size_t{kHotRequestSlots} * sizeof(RequestSlot));
  // As much at the start as the layout of a 4096-slot table.
  SegmentLayout small{2, 1024, 4096};
  EXPECT_EQ(l.hot_bytes(), small.rank_area_bytes());
  // A table smaller than the hot part is all hot, and all landed.
  SegmentLayout tiny{1, 16, 8};
  EXPECT_EQ(tiny.landing_slots(), 8u);
  EXPECT_EQ(tiny.hot_bytes(), tiny.rank_area_bytes());
}

// A slot past the landings gets no landing: the node manager writes the
// receive's buffer instead (request_land says false, and leaves the slot).
TEST(SegmentLayoutTest, ASlotPastTheLandingsIsNotLanded) {
  TestSegment seg(1, 16, kLandingSlots + 8);
  RankView v = seg.view(0);
  const uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_TRUE(request_land(v, kLandingSlots - 1, bytes, sizeof bytes));
  EXPECT_EQ(v.requests[kLandingSlots - 1].landed, 8u);
  EXPECT_FALSE(request_land(v, kLandingSlots, bytes, sizeof bytes));
  EXPECT_EQ(v.requests[kLandingSlots].landed, 0u);
  EXPECT_FALSE(request_land(v, kLandingSlots + 8, bytes, sizeof bytes));
}

TEST(RingTest, DrainReturnsPostOrder) {
  TestSegment seg(1, 16, 16);
  RankView v = seg.view(0);
  for (uint64_t n = 1; n <= 10; ++n) ASSERT_TRUE(ring_try_post(v, make_desc(n)));
  std::vector<uint64_t> seen;
  size_t drained = ring_drain(v, [&](const Descriptor& d) {
    expect_desc(d, seen.size() + 1);
    seen.push_back(d.seq);
  });
  EXPECT_EQ(drained, 10u);
  ASSERT_EQ(seen.size(), 10u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], i + 1);
  // Nothing left: a second drain is empty.
  EXPECT_EQ(ring_drain(v, [](const Descriptor&) { ADD_FAILURE() << "unexpected descriptor"; }),
            0u);
}

TEST(RingTest, EmptyRingDrainsNothing) {
  TestSegment seg(1, 8, 8);
  RankView v = seg.view(0);
  EXPECT_EQ(ring_drain(v, [](const Descriptor&) { ADD_FAILURE(); }), 0u);
}

TEST(RingTest, WrapsAroundManyTimesKeepingOrderAndContent) {
  TestSegment seg(1, 8, 8);
  RankView v = seg.view(0);
  uint64_t next_post = 1, next_drain = 1;
  // Uneven batch sizes (1..8) make head and tail cross the wrap point at
  // every possible offset.
  for (uint64_t batch = 0; next_post <= 1000; ++batch) {
    const uint64_t k = 1 + batch % 8;
    for (uint64_t i = 0; i < k && next_post <= 1000; ++i) ASSERT_TRUE(ring_try_post(v, make_desc(next_post++)));
    ring_drain(v, [&](const Descriptor& d) { expect_desc(d, next_drain++); });
  }
  EXPECT_EQ(next_drain, 1001u);
  EXPECT_EQ(v.ctl->head.load(), 1000u);
  EXPECT_EQ(v.ctl->tail.load(), 1000u);
}

TEST(RingTest, FullExactlyAtRingSlotsAndUsableAfterDrain) {
  TestSegment seg(1, 8, 8);
  RankView v = seg.view(0);
  uint64_t n = 1;
  for (int cycle = 0; cycle < 3; ++cycle) {
    for (uint32_t i = 0; i < v.ring_slots; ++i) ASSERT_TRUE(ring_try_post(v, make_desc(n++)));
    // Full: refused, and the refused descriptor must not overwrite anything.
    EXPECT_FALSE(ring_try_post(v, make_desc(9999)));
    EXPECT_FALSE(ring_try_post(v, make_desc(9999)));
    uint64_t expect = n - v.ring_slots;
    EXPECT_EQ(ring_drain(v, [&](const Descriptor& d) { expect_desc(d, expect++); }), v.ring_slots);
    EXPECT_EQ(expect, n);
  }
  // Partial drain state: 5 outstanding, 3 free.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(ring_try_post(v, make_desc(n++)));
  ring_drain(v, [](const Descriptor&) {});
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(ring_try_post(v, make_desc(n++)));
  EXPECT_FALSE(ring_try_post(v, make_desc(n)));
}

TEST(RingTest, RanksHaveIndependentRings) {
  TestSegment seg(2, 8, 8);
  RankView a = seg.view(0), b = seg.view(1);
  for (uint64_t n = 1; n <= 8; ++n) ASSERT_TRUE(ring_try_post(a, make_desc(n)));
  EXPECT_FALSE(ring_try_post(a, make_desc(9)));
  ASSERT_TRUE(ring_try_post(b, make_desc(100)));
  uint64_t seen = 0;
  ring_drain(b, [&](const Descriptor& d) { expect_desc(d, 100); ++seen; });
  EXPECT_EQ(seen, 1u);
  uint64_t expect = 1;
  ring_drain(a, [&](const Descriptor& d) { expect_desc(d, expect++); });
  EXPECT_EQ(expect, 9u);
}

// The buffer sender's drain when some receivers are full: held descriptors
// stay (and keep the tail), later ones are taken once each, and a held one
// released later comes out before anything after it that was not taken yet.
TEST(RingTest, HoldingDrainTakesPastHeldOnesExactlyOnceAndKeepsTheTail) {
  TestSegment seg(1, 8, 8);
  RankView v = seg.view(0);
  std::vector<uint8_t> taken;
  for (uint64_t n = 1; n <= 6; ++n) ASSERT_TRUE(ring_try_post(v, make_desc(n)));
  // Hold 2 and 4.
  std::vector<uint64_t> seen;
  auto hold = [&](std::set<uint64_t> held) {
    return [&seen, held](const Descriptor& d) {
      if (held.count(d.seq)) return false;
      seen.push_back(d.seq);
      return true;
    };
  };
  RingDrained r = ring_drain_holding(v, taken, hold({2, 4}));
  EXPECT_EQ(r.taken, 4u);
  EXPECT_EQ(r.head, 6u);
  EXPECT_FALSE(r.bad);
  EXPECT_EQ(seen, (std::vector<uint64_t>{1, 3, 5, 6}));
  EXPECT_EQ(v.ctl->tail.load(), 1u);  // stops at the first held one
  // The ring counts the held and the taken-but-unfreed slots: 3 free.
  for (uint64_t n = 7; n <= 9; ++n) ASSERT_TRUE(ring_try_post(v, make_desc(n)));
  EXPECT_FALSE(ring_try_post(v, make_desc(99)));
  // Still holding 4: 2 goes, then only 7, 8 and 9 are new; the tail moves
  // up to 4.
  seen.clear();
  r = ring_drain_holding(v, taken, hold({4}));
  EXPECT_TRUE(r.full_before);
  EXPECT_EQ(seen, (std::vector<uint64_t>{2, 7, 8, 9}));
  EXPECT_EQ(v.ctl->tail.load(), 3u);
  // Nothing held: 4 goes alone, and the tail passes everything.
  seen.clear();
  r = ring_drain_holding(v, taken, hold({}));
  EXPECT_EQ(seen, (std::vector<uint64_t>{4}));
  EXPECT_EQ(v.ctl->tail.load(), 9u);
  // The ring is whole again: 8 posts fit, wrapping, and drain in order.
  for (uint64_t n = 10; n <= 17; ++n) ASSERT_TRUE(ring_try_post(v, make_desc(n)));
  seen.clear();
  r = ring_drain_holding(v, taken, hold({}));
  EXPECT_EQ(r.taken, 8u);
  EXPECT_EQ(seen, (std::vector<uint64_t>{10, 11, 12, 13, 14, 15, 16, 17}));
}

TEST(RingTest, HoldingDrainRefusesAGarbageHead) {
  TestSegment seg(1, 8, 8);
  RankView v = seg.view(0);
  std::vector<uint8_t> taken;
  v.ctl->head.store(100);
  const RingDrained r = ring_drain_holding(v, taken, [](const Descriptor&) {
    ADD_FAILURE();
    return true;
  });
  EXPECT_TRUE(r.bad);
  EXPECT_EQ(r.taken, 0u);
  EXPECT_EQ(v.ctl->tail.load(), 0u);
}

// An eager send of `len` bytes numbered `n` (segment.h, kInlineSpanMax):
// its bytes, and its descriptor as the rank posts it.
std::vector<uint8_t> eager_bytes(uint64_t n, size_t len) {
  std::vector<uint8_t> b(len);
  for (size_t i = 0; i < len; ++i) b[i] = static_cast<uint8_t>(n * 7 + i * 13 + i / 256);
  return b;
}
Descriptor eager_desc(uint64_t n, size_t len) {
  Descriptor d{};
  d.kind = DescKind::send;
  d.flags = kDescInline;
  d.inline_len = static_cast<uint32_t>(len);
  d.len = len;
  d.seq = n;
  d.peer = 1;
  return d;
}

// Eager sends of every length from just past one slot to the largest,
// between ordinary descriptors, through a 32-slot ring: spans start at
// every slot and wrap around the ring's end at every offset, and each comes
// out whole, in post order, as one descriptor.
TEST(RingTest, EagerSendsRunOnThroughTheNextSlotsAndComeOutWhole) {
  TestSegment seg(1, 32, 16);
  RankView v = seg.view(0);
  EXPECT_EQ(ring_span_slots(kInlineMax), 1u);
  EXPECT_EQ(ring_span_slots(kInlineMax + 1), 2u);
  EXPECT_EQ(ring_span_slots(kInlineMax + kDescriptorSize), 2u);
  EXPECT_EQ(ring_span_slots(kInlineMax + kDescriptorSize + 1), 3u);
  EXPECT_EQ(ring_span_slots(kInlineSpanMax + 1), 1u);  // not eager: refused by the NM
  uint64_t n = 0, drained = 0, slots = 0;
  for (size_t len = kInlineMax + 1; len <= kInlineSpanMax; len += 37) {
    ++n;
    const auto bytes = eager_bytes(n, len);
    ASSERT_TRUE(ring_try_post_span(v, eager_desc(n, len), bytes.data(), len));
    ASSERT_TRUE(ring_try_post(v, make_desc(1000 + n)));
    slots += ring_span_slots(static_cast<uint32_t>(len)) + 1;
    EXPECT_EQ(v.ctl->head.load(), slots);
    const size_t got = ring_drain(v, [&](const Descriptor& d, const RingSpan& span) {
      if (d.seq >= 1000) {
        EXPECT_EQ(span.data, nullptr);
        expect_desc(d, d.seq);
        return;
      }
      ASSERT_EQ(d.seq, n);
      ASSERT_EQ(span.len, len);
      EXPECT_EQ(0, std::memcmp(span.data, bytes.data(), len)) << len << " bytes";
      ++drained;
    });
    EXPECT_EQ(got, 2u);
    EXPECT_EQ(v.ctl->tail.load(), slots);
  }
  EXPECT_EQ(drained, n);
  EXPECT_GT(n, 20u);
}

// A span needs all its slots free at once; refused, it writes nothing.
TEST(RingTest, AnEagerSendIsRefusedWhenItsSlotsAreNotAllFree) {
  TestSegment seg(1, 8, 8);
  RankView v = seg.view(0);
  const size_t len = kInlineMax + 4 * kDescriptorSize;  // 5 slots
  const auto bytes = eager_bytes(1, len);
  for (uint64_t n = 1; n <= 4; ++n) ASSERT_TRUE(ring_try_post(v, make_desc(n)));
  uint64_t tail_seen = 0;
  EXPECT_FALSE(ring_try_post_span(v, eager_desc(9, len), bytes.data(), len, &tail_seen));
  EXPECT_EQ(v.ctl->head.load(), 4u);
  uint64_t next = 1;
  ring_drain(v, [&](const Descriptor& d) { expect_desc(d, next++); });
  EXPECT_EQ(next, 5u);
  // Free now (the stale tail seen is read again).
  EXPECT_TRUE(ring_try_post_span(v, eager_desc(9, len), bytes.data(), len, &tail_seen));
  EXPECT_EQ(v.ctl->head.load(), 4u + ring_span_slots(len));
  // Never more than the ring holds.
  TestSegment tiny(1, 4, 4);
  RankView t = tiny.view(0);
  EXPECT_FALSE(ring_try_post_span(t, eager_desc(1, len), bytes.data(), len));
}

// A head published within a span (only a rank writing its ring by hand can
// do that) stops the drain before that descriptor, flagged.
TEST(RingTest, AHeadWithinAnEagerSendTearsTheDrain) {
  TestSegment seg(1, 16, 16);
  RankView v = seg.view(0);
  const auto bytes = eager_bytes(2, 700);
  ASSERT_TRUE(ring_try_post(v, make_desc(1)));
  ASSERT_TRUE(ring_try_post_span(v, eager_desc(2, 700), bytes.data(), 700));
  v.ctl->head.store(v.ctl->head.load() - 1);
  std::vector<uint64_t> seen;
  std::vector<uint8_t> taken;
  const RingDrained r = ring_drain_holding(v, taken, [&](const Descriptor& d) {
    seen.push_back(d.seq);
    return true;
  });
  EXPECT_TRUE(r.torn);
  EXPECT_EQ(seen, (std::vector<uint64_t>{1}));
  EXPECT_EQ(v.ctl->tail.load(), 1u);
  bool bad = false;
  EXPECT_EQ(ring_drain(v, [](const Descriptor&) { ADD_FAILURE(); }, &bad), 0u);
  EXPECT_TRUE(bad);
}

// Held descriptors and spans: a span taken behind a held one is skipped
// whole later, and the tail then passes all its slots.
TEST(RingTest, HoldingDrainSkipsAnEagerSendTakenBehindAHeldOne) {
  TestSegment seg(1, 16, 16);
  RankView v = seg.view(0);
  std::vector<uint8_t> taken;
  const auto bytes = eager_bytes(2, 1000);
  ASSERT_TRUE(ring_try_post(v, make_desc(1)));
  ASSERT_TRUE(ring_try_post_span(v, eager_desc(2, 1000), bytes.data(), 1000));
  ASSERT_TRUE(ring_try_post(v, make_desc(3)));
  std::vector<uint64_t> seen;
  auto hold = [&](std::set<uint64_t> held) {
    return [&seen, held](const Descriptor& d, const RingSpan& span) {
      if (held.count(d.seq)) return false;
      seen.push_back(d.seq);
      if (d.seq == 2) {
        EXPECT_EQ(span.len, 1000u);
      }
      return true;
    };
  };
  RingDrained r = ring_drain_holding(v, taken, hold({1}));
  EXPECT_EQ(r.taken, 2u);
  EXPECT_EQ(seen, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(v.ctl->tail.load(), 0u);
  seen.clear();
  r = ring_drain_holding(v, taken, hold({}));
  EXPECT_EQ(seen, (std::vector<uint64_t>{1}));
  EXPECT_EQ(v.ctl->tail.load(), v.ctl->head.load());
  EXPECT_FALSE(r.torn);
}

// A rank thread and an NM thread pushing 100k descriptors through an 8-slot
// ring. The producer sleeps on its `waiting` flag when the ring is full (the
// NM's rank_wake clears it after freeing space, exactly as in the runtime:
// rank_announce_wait, rank_sleep); the consumer sleeps on a
// futex word the producer bumps after each post. Both waits are bounded
// (futex timeout) so a lost wake-up slows the test down instead of hanging
// it, and a global deadline turns a real hang into a failure.
TEST(RingTest, ProducerConsumerThreadsLoseAndReorderNothing) {
  constexpr uint64_t kCount = 100000;
  constexpr uint64_t kWaitNs = 10'000'000;  // bound of one sleep, not a sync mechanism
  TestSegment seg(1, 8, 8);
  RankView pv = seg.view(0);
  RankView cv = seg.view(0);
  std::atomic<uint32_t> posted_seq{0};      // consumer's doorbell
  std::atomic<bool> consumer_waiting{false};
  std::atomic<bool> abort{false};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);

  std::thread producer([&] {
    for (uint64_t n = 1; n <= kCount && !abort.load();) {
      if (ring_try_post(pv, make_desc(n))) {
        ++n;
        posted_seq.fetch_add(1, std::memory_order_seq_cst);
        if (consumer_waiting.load(std::memory_order_seq_cst)) futex_wake_all(&posted_seq);
        continue;
      }
      // Full: announce that we wait, re-check, sleep until the consumer frees space.
      rank_announce_wait(*pv.ctl);
      if (!ring_try_post(pv, make_desc(n))) {
        rank_sleep(*pv.ctl, kWaitNs);
      } else {
        ++n;
        posted_seq.fetch_add(1, std::memory_order_seq_cst);
        if (consumer_waiting.load(std::memory_order_seq_cst)) futex_wake_all(&posted_seq);
      }
      pv.ctl->waiting.store(0, std::memory_order_seq_cst);
    }
  });

  uint64_t expect = 1;
  bool content_ok = true;
  while (expect <= kCount) {
    const uint32_t seen = posted_seq.load(std::memory_order_acquire);
    size_t got = ring_drain(cv, [&](const Descriptor& d) {
      // Check cheaply on the hot path; report the first mismatch only.
      if (content_ok && (d.seq != expect || d.tag != make_desc(expect).tag ||
                         ((d.flags & kDescInline) &&
                          (d.inline_len != make_desc(expect).inline_len ||
                           std::memcmp(d.payload, make_desc(expect).payload, d.inline_len) != 0)))) {
        content_ok = false;
        ADD_FAILURE() << "descriptor " << expect << " arrived as seq " << d.seq;
      }
      ++expect;
    });
    if (got) {
      rank_wake(cv);  // ring space freed: wake the producer if it sleeps
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "timed out at descriptor " << expect;
      break;
    }
    consumer_waiting.store(true, std::memory_order_seq_cst);
    if (cv.ctl->head.load(std::memory_order_seq_cst) == cv.ctl->tail.load(std::memory_order_relaxed))
      futex_wait(&posted_seq, seen, kWaitNs);
    consumer_waiting.store(false, std::memory_order_seq_cst);
  }
  abort.store(true);
  producer.join();
  EXPECT_TRUE(content_ok);
  EXPECT_EQ(expect, kCount + 1);
  EXPECT_EQ(cv.ctl->head.load(), kCount);
  EXPECT_EQ(cv.ctl->tail.load(), kCount);
}

TEST(RequestTest, CompleteSetsFieldsStateAndBumpsWakeSeq) {
  TestSegment seg(2, 8, 16);
  RankView v = seg.view(1);
  RequestSlot& r = v.requests[5];
  r.state.store(static_cast<uint32_t>(ReqState::pending));
  r.kind = static_cast<uint32_t>(DescKind::recv);
  const uint32_t before = v.ctl->wake_seq.load();
  request_complete(v, 5, bcs_err_truncate, 3, 42, 4096, 1);
  EXPECT_EQ(r.state.load(), static_cast<uint32_t>(ReqState::done));
  EXPECT_EQ(r.error, bcs_err_truncate);
  EXPECT_EQ(r.source, 3);
  EXPECT_EQ(r.tag, 42);
  EXPECT_EQ(r.bytes, 4096u);
  EXPECT_EQ(r.found, 1u);
  EXPECT_EQ(r.kind, static_cast<uint32_t>(DescKind::recv));  // untouched
  EXPECT_EQ(v.ctl->wake_seq.load(), before + 1);
  // Neighbouring slots and the other rank are untouched.
  EXPECT_EQ(v.requests[4].state.load(), static_cast<uint32_t>(ReqState::free));
  EXPECT_EQ(v.requests[6].state.load(), static_cast<uint32_t>(ReqState::free));
  EXPECT_EQ(seg.view(0).ctl->wake_seq.load(), 0u);
  EXPECT_EQ(seg.view(0).requests[5].state.load(), static_cast<uint32_t>(ReqState::free));
}

// A rank blocked on wake_seq (as a blocking bcs call sleeps) is woken by
// request_complete from another thread and then sees the completed fields.
TEST(RequestTest, CompleteWakesASleepingWaiter) {
  TestSegment seg(1, 8, 8);
  RankView v = seg.view(0);
  v.requests[0].state.store(static_cast<uint32_t>(ReqState::pending));
  std::atomic<bool> started{false};
  uint64_t bytes_seen = 0;
  bool done = false;
  std::thread rank([&] {
    RankView rv = seg.view(0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    started.store(true);
    while (std::chrono::steady_clock::now() < deadline) {
      rank_announce_wait(*rv.ctl);
      if (rv.requests[0].state.load(std::memory_order_acquire) ==
          static_cast<uint32_t>(ReqState::done)) {
        rv.ctl->waiting.store(0);
        bytes_seen = rv.requests[0].bytes;
        done = true;
        return;
      }
      rank_sleep(*rv.ctl, 100'000'000);
      rv.ctl->waiting.store(0);
    }
  });
  while (!started.load()) std::this_thread::yield();
  request_complete(v, 0, bcs_err_none, 1, 2, 777);
  rank.join();
  EXPECT_TRUE(done);
  EXPECT_EQ(bytes_seen, 777u);
}

// A rank waiting for several requests while the node manager completes
// them one after another, as a receiver's MPI_Waitall meets a slice's
// matches (osu_bw: 64 per window). Every completion that comes while the
// rank is between raising its flag and sleeping must still reach it. With
// the rank sleeping on wake_seq read before it raised the flag, one
// completion bumped wake_seq before that read and cleared the flag after
// it, the rank slept on the new value, and the completions after it found
// the flag down and woke nobody: the rank slept until its futex timed out.
// Here each sleep may last 10 s, and the test counts the sleeps that timed
// out although everything was complete: none may.
TEST(RequestTest, NoCompletionIsLostWhileTheRankGoesToSleep) {
  constexpr uint32_t kWindow = 8;
  constexpr int kRounds = 20000;
  TestSegment seg(1, 8, kWindow);
  RankView v = seg.view(0);
  std::atomic<int> round{-1}, finished{-1}, lost{0};
  std::thread rank([&] {
    RankView rv = seg.view(0);
    auto all_done = [&] {
      for (uint32_t i = 0; i < kWindow; ++i)
        if (rv.requests[i].state.load(std::memory_order_acquire) !=
            static_cast<uint32_t>(ReqState::done))
          return false;
      return true;
    };
    for (int r = 0; r < kRounds && !lost.load(); ++r) {
      for (uint32_t i = 0; i < kWindow; ++i)
        rv.requests[i].state.store(static_cast<uint32_t>(ReqState::pending));
      round.store(r, std::memory_order_seq_cst);
      while (!all_done()) {
        rank_announce_wait(*rv.ctl);
        if (all_done()) break;
        if (!rank_sleep(*rv.ctl, 10'000'000'000) && all_done()) ++lost;
        rv.ctl->waiting.store(0, std::memory_order_relaxed);
      }
      rv.ctl->waiting.store(0, std::memory_order_relaxed);
      finished.store(r, std::memory_order_seq_cst);
    }
  });
  for (int r = 0; r < kRounds; ++r) {
    while (round.load(std::memory_order_seq_cst) < r) __builtin_ia32_pause();
    // Spaced as a slice's deliveries are (each is a copy first), so that
    // the rank wakes and goes back to sleep between them.
    for (uint32_t i = 0; i < kWindow; ++i) {
      for (int k = 0; k < 200 * (r % 8); ++k) __builtin_ia32_pause();
      request_complete(v, i, bcs_err_none, 0, 0, 1);
    }
    while (finished.load(std::memory_order_seq_cst) < r) __builtin_ia32_pause();
    if (lost.load()) break;
  }
  rank.join();
  EXPECT_EQ(lost.load(), 0) << "completions lost in " << finished.load() + 1 << " rounds";
}

// A rank that starts waiting on a node's lease rings only when the node
// would start a slice for it (Nic::wait_on_bell): a send to it is posted in
// a local ring the node has not drained, or a collective is in its own ring.
TEST(RingTest, AWaiterIsOwedASliceForASendToItOrItsOwnCollective) {
  TestSegment seg(3, 8, 8);
  for (uint32_t i = 0; i < 3; ++i) seg.view(i).ctl->world_rank = static_cast<int32_t>(10 + i);
  auto post = [&](uint32_t local, DescKind kind, int32_t peer) {
    Descriptor d{};
    d.kind = kind;
    d.peer = peer;
    RankView v = seg.view(local);
    ASSERT_TRUE(ring_try_post(v, d));
  };
  auto owed = [&](uint32_t local) {
    return segment_slice_for_waiter(seg.base(), seg.layout(), local, 10 + static_cast<int32_t>(local));
  };
  EXPECT_FALSE(owed(0)) << "nothing posted";
  post(1, DescKind::recv, 10);
  post(1, DescKind::send, 12);
  post(0, DescKind::send, 11);
  EXPECT_FALSE(owed(0)) << "a receive from it and sends elsewhere are no slice for rank 10";
  EXPECT_TRUE(owed(1)) << "rank 10 sent to rank 11";
  EXPECT_TRUE(owed(2)) << "rank 11 sent to rank 12";
  post(2, DescKind::coll, 0);
  EXPECT_FALSE(owed(0)) << "another rank's collective";
  post(0, DescKind::coll, 0);
  EXPECT_TRUE(owed(0)) << "its own collective";
  // Drained: the node has them all, a slice for them is the node's call.
  for (uint32_t i = 0; i < 3; ++i) {
    RankView v = seg.view(i);
    ring_drain(v, [](const Descriptor&) {});
  }
  for (uint32_t i = 0; i < 3; ++i) EXPECT_FALSE(owed(i)) << i;
  post(1, DescKind::send, 11);
  EXPECT_TRUE(owed(1)) << "a send to itself";
}

}  // namespace
}  // namespace bcs
