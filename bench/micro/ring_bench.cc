// Cost of posting descriptors into a rank's ring and of the NM draining them
// (every MPI call pays one post; the buffer sender drains every strobe).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bcs/segment.h"

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// A one-rank segment in plain aligned memory: same layout as the NM's memfd,
// without the syscalls, so only the ring code is measured.
struct Segment {
  explicit Segment(uint32_t ring_slots) : layout{1, ring_slots, 64} {
    const size_t bytes = bcs::SegmentLayout::align64(layout.total_bytes());
    mem.reset(std::aligned_alloc(64, bytes));
    std::memset(mem.get(), 0, bytes);
    auto* h = static_cast<bcs::SegmentHeader*>(mem.get());
    h->nlocal = 1;
    h->ring_slots = ring_slots;
    h->request_slots = 64;
    view = bcs::segment_rank_view(mem.get(), 0);
  }
  bcs::SegmentLayout layout;
  std::unique_ptr<void, FreeDeleter> mem;
  bcs::RankView view;
};

bcs::Descriptor make_desc(size_t inline_len) {
  bcs::Descriptor d{};
  d.kind = bcs::DescKind::send;
  d.peer = 1;
  d.tag = 7;
  d.len = inline_len;
  if (inline_len) {
    d.flags = bcs::kDescInline;
    d.inline_len = static_cast<uint32_t>(inline_len);
    std::memset(d.payload, 0x5a, inline_len);
  }
  return d;
}

// One post followed by one drain: the latency-bound pattern of a blocking call.
void BM_PostDrainOne(benchmark::State& state) {
  Segment seg(1024);
  bcs::Descriptor d = make_desc(static_cast<size_t>(state.range(0)));
  uint64_t sum = 0;
  for (auto _ : state) {
    d.seq++;
    if (!bcs::ring_try_post(seg.view, d)) state.SkipWithError("ring full");
    bcs::ring_drain(seg.view, [&](const bcs::Descriptor& x) { sum += x.seq + x.payload[0]; });
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PostDrainOne)->Arg(0)->Arg(bcs::kInlineMax)->ArgName("inline_bytes");

// Fill the whole ring, then drain it in one go: the throughput pattern of a
// rank issuing many non-blocking calls within one slice.
void BM_PostBatchThenDrain(benchmark::State& state) {
  const uint32_t slots = 1024;
  Segment seg(slots);
  bcs::Descriptor d = make_desc(static_cast<size_t>(state.range(0)));
  uint64_t sum = 0;
  for (auto _ : state) {
    for (uint32_t i = 0; i < slots; ++i) {
      d.seq++;
      bcs::ring_try_post(seg.view, d);
    }
    bcs::ring_drain(seg.view, [&](const bcs::Descriptor& x) { sum += x.seq + x.payload[0]; });
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations() * slots);
  state.SetBytesProcessed(state.iterations() * slots *
                          static_cast<int64_t>(offsetof(bcs::Descriptor, payload) + state.range(0)));
}
BENCHMARK(BM_PostBatchThenDrain)->Arg(0)->Arg(bcs::kInlineMax)->ArgName("inline_bytes");

// An eager send (its bytes spanning the slots after its descriptor) posted
// and drained: what a send of 193 B to 1 KiB costs the rank and the buffer
// sender in the ring, against a copy of the same bytes.
void BM_PostDrainEager(benchmark::State& state) {
  Segment seg(1024);
  const size_t len = static_cast<size_t>(state.range(0));
  bcs::Descriptor d = make_desc(0);
  d.flags = bcs::kDescInline;
  d.len = d.inline_len = static_cast<uint32_t>(len);
  std::vector<uint8_t> src(len, 0x5a);
  uint64_t sum = 0;
  for (auto _ : state) {
    d.seq++;
    if (!bcs::ring_try_post_span(seg.view, d, src.data(), len)) state.SkipWithError("ring full");
    bcs::ring_drain(seg.view, [&](const bcs::Descriptor& x, const bcs::RingSpan& span) {
      sum += x.seq + span.data[span.len - 1];
    });
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(len));
}
BENCHMARK(BM_PostDrainEager)->Arg(bcs::kInlineMax + 1)->Arg(bcs::kInlineSpanMax)->ArgName("bytes");

// The refusal path: a full ring (the rank would then sleep on wake_seq).
void BM_PostFull(benchmark::State& state) {
  Segment seg(8);
  bcs::Descriptor d = make_desc(0);
  for (uint32_t i = 0; i < 8; ++i) bcs::ring_try_post(seg.view, d);
  for (auto _ : state) benchmark::DoNotOptimize(bcs::ring_try_post(seg.view, d));
}
BENCHMARK(BM_PostFull);

}  // namespace
