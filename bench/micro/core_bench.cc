// Round-trip latency of the core primitives: xfer_and_signal to a peer fabric,
// whose echo thread answers with xfer_and_signal, and test_event for the
// reply. Two fabrics in one process, so the figures show the layer's own cost
// over UCX (the peer's thread sleeps on its event fd between messages).
//
//   BM_CoreRoundTrip       default endpoints (peer error handling: with
//                          UCX 1.13 this is TCP loopback)
//   BM_CoreRoundTripShm    BCS_CORE_ERR_MODE=none: shared memory + CMA
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bcs/core.h"

namespace {

using namespace std::chrono_literals;
using bcs::core::Fabric;
using bcs::core::FabricConfig;
using bcs::core::Message;
using bcs::core::Status;

constexpr bcs::core::EventId kPing = 1, kPong = 2;

// A client fabric, a server fabric and the server's echo thread.
class Pair {
 public:
  explicit Pair(bool shm) {
    if (shm) ::setenv("BCS_CORE_ERR_MODE", "none", 1);
    else ::unsetenv("BCS_CORE_ERR_MODE");
    std::string err;
    FabricConfig ca, cb;
    ca.self = 1;
    cb.self = 2;
    a_ = Fabric::create(ca, &err);
    b_ = Fabric::create(cb, &err);
    ::unsetenv("BCS_CORE_ERR_MODE");
    if (!a_ || !b_) {
      error_ = "Fabric::create: " + err;
      return;
    }
    if (a_->connect(2, b_->address()) != Status::ok || b_->connect(1, a_->address()) != Status::ok) {
      error_ = "connect failed";
      return;
    }
    echo_ = std::thread([this] {
      Message m;
      // Until close(): every ping comes back as a pong of the same size.
      while (b_->test_event(kPing, &m, std::nullopt) == Status::ok)
        if (b_->xfer_and_signal(1, kPong, m.data) != Status::ok) break;
    });
  }
  ~Pair() {
    if (b_) b_->close();
    if (echo_.joinable()) echo_.join();
  }
  Fabric& a() { return *a_; }
  const std::string& error() const { return error_; }

 private:
  std::unique_ptr<Fabric> a_, b_;
  std::thread echo_;
  std::string error_;
};

void round_trips(benchmark::State& state, bool shm) {
  Pair p(shm);
  if (!p.error().empty()) {
    state.SkipWithError(p.error().c_str());
    return;
  }
  const size_t n = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> data(n, 0x5a);
  Message m;
  for (auto _ : state) {
    if (p.a().xfer_and_signal(2, kPing, data) != Status::ok ||
        p.a().test_event(kPong, &m, std::chrono::nanoseconds(10s)) != Status::ok) {
      state.SkipWithError(("round trip failed: " + p.a().last_error()).c_str());
      break;
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(2 * n));
  state.SetLabel(shm ? "shm+cma" : "default (tcp)");
}

void BM_CoreRoundTrip(benchmark::State& state) { round_trips(state, false); }
void BM_CoreRoundTripShm(benchmark::State& state) { round_trips(state, true); }

BENCHMARK(BM_CoreRoundTrip)->Arg(8)->Arg(64 << 10)->UseRealTime();
BENCHMARK(BM_CoreRoundTripShm)->Arg(8)->Arg(64 << 10)->UseRealTime();

}  // namespace
