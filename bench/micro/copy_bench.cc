// The DMA helper's copy path: plain memcpy (what a shared segment costs)
// against cross-memory attach, process_vm_readv / process_vm_writev, which is
// how the NM moves data between ranks without their help. Measured on this
// process itself, so it shows the syscall and page-walk overhead alone.
#include <benchmark/benchmark.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace {

std::vector<char> buffer(size_t n, char fill) { return std::vector<char>(n, fill); }

void BM_Memcpy(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto src = buffer(n, 1), dst = buffer(n, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
}

// Reading "the sender's memory" into "the receiver's buffer" (the NM reads a
// remote rank into its own staging buffer, or a rank into another with two
// calls; one call is the unit cost).
void BM_ProcessVmReadv(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto src = buffer(n, 1), dst = buffer(n, 0);
  const pid_t self = getpid();
  for (auto _ : state) {
    iovec local{dst.data(), n}, remote{src.data(), n};
    if (process_vm_readv(self, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(n)) {
      state.SkipWithError("process_vm_readv failed (ptrace restrictions?)");
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
}

void BM_ProcessVmWritev(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0));
  auto src = buffer(n, 1), dst = buffer(n, 0);
  const pid_t self = getpid();
  for (auto _ : state) {
    iovec local{src.data(), n}, remote{dst.data(), n};
    if (process_vm_writev(self, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(n)) {
      state.SkipWithError("process_vm_writev failed (ptrace restrictions?)");
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(n));
}

void sizes(benchmark::internal::Benchmark* b) {
  b->ArgName("bytes");
  for (int64_t n : {int64_t{8}, int64_t{64} << 10, int64_t{1} << 20, int64_t{16} << 20}) b->Arg(n);
}

BENCHMARK(BM_Memcpy)->Apply(sizes);
BENCHMARK(BM_ProcessVmReadv)->Apply(sizes);
BENCHMARK(BM_ProcessVmWritev)->Apply(sizes);

}  // namespace
