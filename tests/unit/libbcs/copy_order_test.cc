// Single copy (segment.h, DmaOrder): copy orders the DMA helper hands a
// rank asleep in MPI, which the rank carries out with its own rights before
// it sleeps on. Played against the in-process fake node manager, whose
// strobe thread posts the orders the way NmJob::post_copy does.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include <unistd.h>

#include "api_fixture.h"

namespace bcs::apitest {
namespace {

// Writes order `o` as NmJob::post_order does, with this process as the
// other end; `error` and `second` start as junk the rank must overwrite.
void write_order(DmaOrder& o, const uint8_t* src, uint8_t* dst, uint64_t len, uint64_t seq,
                 bool write = false, bool split = false) {
  o.pid = static_cast<uint32_t>(getpid());
  o.src = reinterpret_cast<uintptr_t>(src);
  o.dst = reinterpret_cast<uintptr_t>(dst);
  o.len = len;
  o.write = write ? 1 : 0;
  o.split = split ? 1 : 0;
  o.second = 99;
  o.seq = seq;
  o.error = 99;
}

// Posts a written order, wakes the rank and sleeps on the order until the
// rank says it is done, as NmJob::settle does.
void post_and_await(RankView& v, DmaOrder& o) {
  o.state.store(kDmaPosted, std::memory_order_seq_cst);
  rank_wake(v);
  o.nm_waiting.store(1, std::memory_order_seq_cst);
  for (uint32_t s; (s = o.state.load(std::memory_order_seq_cst)) != kDmaDone;)
    futex_wait(&o.state, s, 1'000'000);
}

// Single copy: the DMA helper hands a rank asleep in MPI copy orders; the
// rank reads the sender's memory into its buffer itself (here the "sender"
// is this process), says so, and sleeps on until its receive completes. An
// order taken back before the rank saw it is left alone. Two orders posted
// together (copies ahead: the next piece while the rank copies one) are
// both carried out on one wake-up, and the rank wakes the helper that said
// it sleeps on one.
TEST_F(ApiTest, ASleepingRankCarriesOutTheDmaHelpersCopyOrders) {
  attach(2);
  const std::vector<uint8_t> src = pattern(300000, 5);
  std::vector<uint8_t> dst(src.size());
  uint8_t small[8] = {};
  DmaOrder& o = view_.ctl->dma[0];
  DmaOrder& o2 = view_.ctl->dma[1];
  uint32_t taken_back_state = 0;
  std::thread nm([&] {
    while (!view_.ctl->waiting.load()) std::this_thread::yield();
    nm_->step();
    // An order taken back (CAS Posted -> Idle) before the rank looks.
    o.pid = static_cast<uint32_t>(getpid());
    o.src = reinterpret_cast<uintptr_t>(src.data());
    o.dst = reinterpret_cast<uintptr_t>(dst.data());
    o.len = 16;
    o.state.store(kDmaPosted);
    uint32_t posted = kDmaPosted;
    if (o.state.compare_exchange_strong(posted, kDmaIdle)) taken_back_state = kDmaIdle;
    // The real ones, as NmJob::post_copy posts them: the first half in the
    // second slot, the rest in the first.
    const size_t half = src.size() / 2;
    o2.pid = o.pid;
    o2.src = o.src;
    o2.dst = o.dst;
    o2.len = half;
    o2.seq = 1;
    o2.error = 99;
    o.src += half;
    o.dst += half;
    o.len = src.size() - half;
    o.seq = 2;
    o.error = 99;
    o2.state.store(kDmaPosted, std::memory_order_seq_cst);
    o.state.store(kDmaPosted, std::memory_order_seq_cst);
    rank_wake(view_);
    for (DmaOrder* w : {&o2, &o}) {
      w->nm_waiting.store(1, std::memory_order_seq_cst);
      for (uint32_t s; (s = w->state.load(std::memory_order_seq_cst)) != kDmaDone;)
        futex_wait(&w->state, s, 1'000'000);
    }
    request_complete(view_, nm_->seen().back().request, bcs_err_none, 1, 3, src.size(), 0, 1, 2);
  });
  EXPECT_EQ(bcs_recv(small, sizeof small, 1, 3, kContextWorld, BCS_BLOCKING, nullptr, nullptr),
            BCS_OK);
  nm.join();
  EXPECT_EQ(taken_back_state, kDmaIdle);
  EXPECT_EQ(o.error, 0);
  EXPECT_EQ(o2.error, 0);
  EXPECT_EQ(dst, src);
}

// A shared order (segment.h, DmaOrder::write): the rank is the sender of a
// large message and, asleep in its blocking send, writes part of it from
// its own buffer into the receiver's (here this process again) while the
// receiver reads the rest. The rank says done and sleeps on until its send
// completes.
TEST_F(ApiTest, ASleepingSenderWritesItsShareOfACopyOrder) {
  attach(2);
  const std::vector<uint8_t> src = pattern(300000, 7);
  std::vector<uint8_t> dst(src.size());
  DmaOrder& o = view_.ctl->dma[0];
  std::thread nm([&] {
    while (!view_.ctl->waiting.load()) std::this_thread::yield();
    nm_->step();
    write_order(o, src.data() + 4096, dst.data() + 4096, src.size() - 4096, 1, true);
    post_and_await(view_, o);
    request_complete(view_, nm_->seen().back().request, bcs_err_none, 0, 3, src.size(), 0, 1, 2);
  });
  EXPECT_EQ(bcs_send(src.data(), src.size(), 1, 3, kContextWorld, BCS_BLOCKING, nullptr), BCS_OK);
  nm.join();
  EXPECT_EQ(o.error, 0);
  EXPECT_TRUE(std::equal(src.begin() + 4096, src.end(), dst.begin() + 4096)) << "its share landed";
  EXPECT_TRUE(std::all_of(dst.begin(), dst.begin() + 4096, [](uint8_t b) { return b == 0; }))
      << "and nothing else";
}

// A large order the node manager lets the rank split (DmaOrder::split): the
// rank copies the first half and a second thread of its own the rest, but
// only when a CPU is to spare, that is when fewer of the node's ranks are
// awake than there are CPUs. Here the node has as many ranks as CPUs: with
// all of them awake the rank copies alone, and so it does while the others
// sleep in MPI but copy orders of their own; once they only sleep it
// splits, and says in `second` how much its second thread copied.
TEST_F(ApiTest, ARankSplitsALargeOrderOverASecondThreadOnlyWithACpuToSpare) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 2) GTEST_SKIP() << "one CPU: never a second thread";
  const auto n = static_cast<uint32_t>(cpus);
  seg_ = std::make_unique<FakeSegment>(n, n, 64, 64);
  seg_->export_env(0, 0);
  ASSERT_EQ(bcs_init(), BCS_OK);
  view_ = seg_->view(0);
  nm_ = std::make_unique<FakeNm>(view_, 0);

  const std::vector<uint8_t> src = pattern((3 << 20) + 12345, 9);
  DmaOrder& o = view_.ctl->dma[0];
  // One receive whose bytes the rank copies on an order; returns `second`.
  auto receive = [&](int tag) -> uint64_t {
    std::vector<uint8_t> dst(src.size());
    std::thread nm([&] {
      while (!view_.ctl->waiting.load()) std::this_thread::yield();
      nm_->step();
      write_order(o, src.data(), dst.data(), src.size(), static_cast<uint64_t>(tag), false, true);
      post_and_await(view_, o);
      o.state.store(kDmaIdle);
      request_complete(view_, nm_->seen().back().request, bcs_err_none, 1, tag, src.size(), 0, 1,
                       2);
    });
    uint8_t small[8] = {};
    EXPECT_EQ(bcs_recv(small, sizeof small, 1, tag, kContextWorld, BCS_BLOCKING, nullptr, nullptr),
              BCS_OK);
    nm.join();
    EXPECT_EQ(o.error, 0);
    EXPECT_EQ(dst, src) << "tag " << tag;
    return o.second;
  };
  EXPECT_EQ(receive(1), 0u) << "every CPU runs a rank";
  for (uint32_t i = 1; i < n; ++i) seg_->view(i).ctl->waiting.store(1);
  // Asleep in MPI, but copying an order of its own (two ranks exchanging
  // large messages): that rank's CPU is taken all the same.
  std::vector<uint32_t> copying{kDmaPosted, kDmaTaken};
  for (uint32_t st : copying) {
    for (uint32_t i = 1; i < n; ++i) seg_->view(i).ctl->dma[1].state.store(st);
    EXPECT_EQ(receive(3), 0u) << "the others copy orders of their own, state " << st;
  }
  for (uint32_t i = 1; i < n; ++i) seg_->view(i).ctl->dma[1].state.store(kDmaIdle);
  const uint64_t second = receive(2);
  EXPECT_GT(second, 0u) << "the others sleep: a CPU to spare";
  EXPECT_LT(second, src.size()) << "and the rank copied its part";
}

}  // namespace
}  // namespace bcs::apitest
