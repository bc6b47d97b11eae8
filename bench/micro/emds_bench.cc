// Cost of the EMDS on the strobe path: what the node manager's strobe
// receiver pays per microphase (LocalRecorder::note) and the strobe sender
// per slice (EmdsRecorder::record), and what the rank's MMDS pays per
// histogram sample. bench/mds.sh turns these into the share of a run.
#include <benchmark/benchmark.h>

#include "bcs/emds.h"
#include "bcs/mmds.h"

namespace {

namespace mon = bcs::monitor;

// One microphase noted; five make a slice, as on a node manager.
void BM_LocalNote(benchmark::State& state) {
  mon::LocalRecorder rec;
  mon::LocalSliceRecord add;
  add.descriptors = 2;
  add.nlocal = 2;
  uint64_t n = 0;
  for (auto _ : state) {
    rec.note(n / 5, static_cast<int>(n % 5), n * 100, 40, add);
    ++n;
    // Nobody takes them here: the bounded window drops the oldest, which
    // is also what the flusher's take() would leave.
  }
}
BENCHMARK(BM_LocalNote);

// One slice recorded by the strobe sender, the window full.
void BM_SliceRecord(benchmark::State& state) {
  mon::EmdsRecorder rec;
  mon::SliceRecord s;
  s.descriptors = 4;
  for (auto _ : state) {
    ++s.slice;
    rec.record(s);
  }
}
BENCHMARK(BM_SliceRecord);

// One sample into a log-scale histogram (BCS_MDS=all, per call).
void BM_HistogramAdd(benchmark::State& state) {
  mon::LogHistogram h(4);
  uint64_t v = 1;
  for (auto _ : state) {
    h.add(v);
    v = v * 2862933555777941757ull + 3037000493ull;
    v >>= 40;  // values up to ~16 M: a spread of latencies
  }
  benchmark::DoNotOptimize(h.count());
}
BENCHMARK(BM_HistogramAdd);

}  // namespace
