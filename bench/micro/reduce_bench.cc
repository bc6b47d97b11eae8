// The reduce helper's kernels (bcs_reduce_local): how fast a node manager
// combines two contributions. Bytes per second count the vector reduced
// (count * element size) once, although each call reads two buffers of that
// size and writes one. Buffers start one byte off alignment, as the node
// manager's byte vectors may. 8 B of DOUBLE_INT is one 12-byte packed element.
// MAXLOC's inout holds the maxima after the first call; the kernel has no
// branch on the data (reduce.cc, loc), so that steady state flatters nothing.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "bcs/bcs.h"

namespace {

template <bcs_op_t kOp, bcs_dtype_t kType>
void BM_Reduce(benchmark::State& state) {
  const size_t es = bcs_dtype_size(kType);
  const size_t count = std::max<size_t>(1, static_cast<size_t>(state.range(0)) / es);
  const size_t bytes = count * es;
  // Random bytes, then values that stay finite however often they are
  // combined: small doubles for the DOUBLE kinds, random ints for INT32.
  std::vector<unsigned char> a(bytes + 1), b(bytes + 1);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (size_t k = 0; k < count; ++k) {
    for (std::vector<unsigned char>* v : {&a, &b}) {
      unsigned char* p = v->data() + 1 + k * es;
      if (kType == BCS_DT_INT32) {
        const auto x = static_cast<int32_t>(rng());
        std::memcpy(p, &x, sizeof x);
      } else {
        const double x = u(rng) * 1e-6;  // sums stay far from overflow
        std::memcpy(p, &x, sizeof x);
        if (kType == BCS_DT_DOUBLE_INT) {
          const int i = static_cast<int>(rng() % 1024);
          std::memcpy(p + sizeof(double), &i, sizeof i);
        }
      }
    }
  }
  for (auto _ : state) {
    if (bcs_reduce_local(kOp, kType, a.data() + 1, b.data() + 1, count) != BCS_OK) {
      state.SkipWithError("bcs_reduce_local failed");
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes));
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgName("bytes");
  for (int64_t n : {int64_t{8}, int64_t{64} << 10, int64_t{8} << 20}) b->Arg(n);
}

BENCHMARK(BM_Reduce<BCS_OP_SUM, BCS_DT_DOUBLE>)->Name("BM_Reduce/SUM/DOUBLE")->Apply(sizes);
BENCHMARK(BM_Reduce<BCS_OP_SUM, BCS_DT_INT32>)->Name("BM_Reduce/SUM/INT32")->Apply(sizes);
BENCHMARK(BM_Reduce<BCS_OP_MAXLOC, BCS_DT_DOUBLE_INT>)
    ->Name("BM_Reduce/MAXLOC/DOUBLE_INT")
    ->Apply(sizes);

}  // namespace
