// Helpers shared by the libbcs/core unit tests.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bcs/core.h"

namespace bcs::core::test {

using namespace std::chrono_literals;

// Generous: a wait in a test should never time out unless something is broken.
inline constexpr std::chrono::nanoseconds kWait = 10s;

inline std::unique_ptr<Fabric> make_fabric(NodeId id) {
  std::string err;
  FabricConfig cfg;
  cfg.self = id;
  auto f = Fabric::create(cfg, &err);
  EXPECT_TRUE(f) << err;
  return f;
}

// Fully connects the fabrics, each also to itself.
inline void connect_all(const std::vector<Fabric*>& fs) {
  for (Fabric* a : fs)
    for (Fabric* b : fs) ASSERT_EQ(a->connect(b->self(), b->address()), Status::ok);
}

// A recognisable block: byte k of block `tag` is a function of both.
inline std::vector<uint8_t> pattern(size_t n, uint32_t tag) {
  std::vector<uint8_t> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = static_cast<uint8_t>((k * 131 + tag * 7 + (k >> 12)) & 0xff);
  return v;
}

// Keeps a fabric progressing from a thread of its own, as a daemon's helper
// threads do. A sender's first message needs the peer to answer UCX's
// connection handshake, and a rendezvous send completes only once the peer
// fetched the data, so an idle peer in the same test process needs a pump.
// The thread sleeps in test_event on a private event; the destructor wakes it
// with a message to self (the fabric must be connected to itself).
class Pump {
 public:
  static constexpr EventId kStop = 0xfffe;
  explicit Pump(Fabric& f) : f_(f), t_([this] {
      Message m;
      st_ = f_.test_event(kStop, &m, std::nullopt);
    }) {}
  ~Pump() {
    if (f_.xfer_and_signal(f_.self(), kStop, {}) != Status::ok) f_.close();
    t_.join();
  }
  Pump(const Pump&) = delete;
  Pump& operator=(const Pump&) = delete;

 private:
  Fabric& f_;
  Status st_ = Status::ok;
  std::thread t_;
};

inline std::vector<uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }

}  // namespace bcs::core::test
