// MSM throughput: how many sends/receives the buffer receiver can match per
// slice. The per-slice budget is a fraction of the slice length (a few
// hundred µs), so this bounds the message rate a node can schedule.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include "bcs/matcher.h"

namespace {

using bcs::kAnySource;
using bcs::kAnyTag;

constexpr int kSources = 16;

// `n` sends from kSources sources to rank 0 (shuffled, as the network would
// deliver them), and `n` receives of rank 0 that match them one to one.
struct Workload {
  std::vector<bcs::SendDesc> sends;
  std::vector<bcs::RecvDesc> recvs;
};

Workload make(int n, bool wildcard, uint64_t slice) {
  Workload w;
  std::vector<uint64_t> seq(kSources, 0);
  for (int i = 0; i < n; ++i) {
    bcs::SendDesc s;
    s.src = i % kSources;
    s.dst = 0;
    s.tag = i % 4;
    s.pair_seq = ++seq[static_cast<size_t>(s.src)] + slice * static_cast<uint64_t>(n);
    s.slice = slice;
    s.len = 64;
    w.sends.push_back(s);
    bcs::RecvDesc r;
    r.rank = 0;
    r.kind = bcs::DescKind::recv;
    r.src = wildcard ? kAnySource : s.src;
    r.tag = wildcard ? kAnyTag : s.tag;
    r.cap = 64;
    r.request = static_cast<uint32_t>(i);
    r.slice = slice;
    w.recvs.push_back(r);
  }
  std::mt19937 rng(42);
  std::shuffle(w.sends.begin(), w.sends.end(), rng);
  return w;
}

// Adds `q` sends that no receive ever accepts (another tag): each receive's
// scan of the unexpected queue then has to walk past them, which is what a
// rank that lags behind its senders costs the MSM.
void prefill_unexpected(bcs::Matcher& m, int q) {
  if (q == 0) return;
  std::vector<bcs::SendDesc> junk;
  for (int i = 0; i < q; ++i) {
    bcs::SendDesc s;
    s.src = 100 + i % kSources;  // sources the workload never names
    s.dst = 0;
    s.tag = 999;
    s.pair_seq = static_cast<uint64_t>(i + 1);
    s.len = 8;
    junk.push_back(s);
  }
  m.msm(0, {}, std::move(junk));
  m.take_matches();
}

// Receives posted first (same MSM step 1), the slice's sends then match them
// in step 2: the common "receiver was ready" case.
void BM_MsmRecvsFirst(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool wildcard = state.range(1) != 0;
  const int q = static_cast<int>(state.range(2));
  const Workload w = make(n, wildcard, 1);
  bcs::Matcher m;
  prefill_unexpected(m, q);
  uint64_t slice = 1;
  for (auto _ : state) {
    m.msm(slice++, w.recvs, w.sends);  // the sends vector is copied: part of the cost
    auto ms = m.take_matches();
    if (ms.size() != static_cast<size_t>(n)) state.SkipWithError("not all matched");
    benchmark::DoNotOptimize(ms.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

// Sends arrive one slice before their receives: every receive searches the
// unexpected queue (the "unexpected message" case).
void BM_MsmSendsFirst(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool wildcard = state.range(1) != 0;
  const int q = static_cast<int>(state.range(2));
  const Workload w = make(n, wildcard, 1);
  bcs::Matcher m;
  prefill_unexpected(m, q);
  uint64_t slice = 1;
  for (auto _ : state) {
    m.msm(slice++, {}, w.sends);
    m.msm(slice++, w.recvs, {});
    auto ms = m.take_matches();
    if (ms.size() != static_cast<size_t>(n)) state.SkipWithError("not all matched");
    benchmark::DoNotOptimize(ms.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

void args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "wildcard", "unexpected"});
  for (int wc : {0, 1}) b->Args({1024, wc, 0});
  for (int q : {1024, 16384}) b->Args({1024, 0, q});
  b->Args({64, 0, 0});
}

BENCHMARK(BM_MsmRecvsFirst)->Apply(args);
BENCHMARK(BM_MsmSendsFirst)->Apply(args);

// Probes: a rank waiting in MPI_Probe while unrelated traffic flows.
void BM_MsmPendingProbes(benchmark::State& state) {
  const int n = 1024;
  const Workload w = make(n, false, 1);
  bcs::Matcher m;
  std::vector<bcs::RecvDesc> probes;
  for (int i = 0; i < static_cast<int>(state.range(0)); ++i) {
    bcs::RecvDesc p;
    p.rank = 0;
    p.kind = bcs::DescKind::probe;
    p.src = 200 + i;  // never satisfied
    p.tag = kAnyTag;
    probes.push_back(p);
  }
  m.msm(0, probes, {});
  uint64_t slice = 1;
  for (auto _ : state) {
    m.msm(slice++, {}, w.sends);
    m.msm(slice++, w.recvs, {});
    benchmark::DoNotOptimize(m.take_matches().size());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_MsmPendingProbes)->Arg(1)->Arg(64)->ArgName("probes");

// The DMA helper's chunking of one slice: many small transfers, or one big one.
void BM_ChunkSchedule(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const uint64_t bytes = static_cast<uint64_t>(state.range(1));
  bcs::Match proto;
  proto.send.len = bytes;
  proto.recv.cap = bytes;
  proto.bytes = bytes;
  for (auto _ : state) {
    bcs::ChunkScheduler cs(1 << 20);
    for (int i = 0; i < n; ++i) cs.add(proto);
    size_t chunks = 0;
    while (!cs.idle()) {
      chunks += cs.schedule_slice().size();
      cs.finish_slice();
    }
    benchmark::DoNotOptimize(chunks);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_ChunkSchedule)->Args({1024, 64})->Args({1, 16 << 20})->ArgNames({"transfers", "bytes"});

}  // namespace
