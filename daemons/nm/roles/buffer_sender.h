// Buffer sender (BS), the DEM: drains every local rank's descriptor ring.
// Sends get their per-(source, destination) sequence number; sends to local
// ranks and all receives/probes go to the local buffer receiver, sends to
// remote ranks travel in one batch per destination node; collectives go to
// the collective state. Every descriptor is validated before use: a rank's
// ring is input.
//
// Flow control: a send (or its cancel) to a receiver that has too many
// unexpected sends waiting (hold_sends_to) stays in its sender's ring; the
// rank's later descriptors still go (receives, sends to others), so a rank
// flooding a peer can still receive, and the ring's capacity bounds what
// waits. A send held that long without its receiver taking anything (the
// node manager's liveness timeout) ends the sender with the reason: the
// program waits for a message the bound keeps back, which would otherwise
// be a silent hang.
#pragma once

#include <chrono>
#include <map>
#include <vector>

#include "buffer_receiver.h"
#include "collectives.h"
#include "ports.h"
#include "wire.h"

namespace bcs::nm {

class BufferSender {
 public:
  explicit BufferSender(uint32_t self);
  // DEM of `slice` (descriptors drained now were posted in slice - 1).
  wire::Report run(uint64_t slice, LocalRanks& ranks, Net& net, BufferReceiver& br,
                   Collectives& coll);
  // For the next run(): the receivers (world ranks) whose sends to hold,
  // and whether every rank of the job is blocked (the strobe's word): only
  // then does a held send's time count towards the limit.
  void hold_sends_to(std::vector<int32_t> receivers, bool job_blocked = false);
  // How long a send may be held with its ring not moving before the sender
  // is ended; `max_unexpected` is only for the message.
  void set_hold_limit(std::chrono::nanoseconds limit, uint64_t max_unexpected) {
    hold_limit_ = limit;
    max_unexpected_ = max_unexpected;
  }

 private:
  void hold_check(int32_t me, RankView& v, int32_t held_to, LocalRanks& ranks);
  const uint32_t self_;
  // Test-only fault injection (BCS_TEST_FAULT in the node manager's
  // environment; unset in normal use): "bad-batch" sends every descriptor
  // batch as bytes that do not decode, "lose-batch" announces batches it
  // never sends, "hide-moving" reports no send that would move data
  // (Report::moving). The integration tests use it to check that such a
  // failure ends the job with its cause instead of a hang.
  enum class Fault { none, bad_batch, lose_batch, hide_moving } fault_ = Fault::none;
  std::map<std::pair<int32_t, int32_t>, uint64_t> pair_seq_;  // non-overtaking across slices
  std::vector<int32_t> hold_to_;                  // ascending
  bool job_blocked_ = false;
  std::map<int32_t, std::vector<uint8_t>> taken_;  // per rank: ring_drain_holding's slots
  struct Held {
    uint64_t tail;  // the ring's tail when the hold began (the first send held)
    int32_t to;
    std::chrono::steady_clock::time_point since;
  };
  std::map<int32_t, Held> held_;  // per local rank with a send held
  std::chrono::nanoseconds hold_limit_ = std::chrono::seconds(60);
  uint64_t max_unexpected_ = 0;
};

}  // namespace bcs::nm
