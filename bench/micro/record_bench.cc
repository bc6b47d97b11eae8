// Cost of recording (issue 10): encoding one event into the stream (what a
// recording rank pays per wildcard match or per changed test outcome; a
// repeated one only bumps a count) and decoding a recording at a replay's
// MPI_Init.
#include <benchmark/benchmark.h>

#include <string>

#include "bcs/record.h"

namespace {

namespace r = bcs::record;

void BM_RecordAppendMatch(benchmark::State& state) {
  r::Event e;
  e.kind = r::Kind::match;
  e.source = 3;
  e.tag = 7;
  std::string buf;
  for (auto _ : state) {
    ++e.index;
    ++e.seq;
    r::append_event(e, &buf);
    if (buf.size() > (1 << 16)) buf.clear();  // the shim writes 64 KiB blocks
  }
}
BENCHMARK(BM_RecordAppendMatch);

void BM_RecordParse(benchmark::State& state) {
  std::string file;
  r::Header h;
  h.rank = 0;
  h.size = 4;
  r::append_header(h, &file);
  r::Event e;
  e.kind = r::Kind::match;
  for (int i = 0; i < 10000; ++i) {
    ++e.index;
    e.source = i % 4;
    r::append_event(e, &file);
  }
  for (auto _ : state) {
    r::File f;
    std::string err;
    benchmark::DoNotOptimize(r::parse(file, "bench.rec", &f, &err));
  }
  state.SetItemsProcessed(state.iterations() * 10000);
}
BENCHMARK(BM_RecordParse);

}  // namespace
