// Buffer sender (BS), the DEM: drains every local rank's descriptor ring.
// Sends get their per-(source, destination) sequence number; sends to local
// ranks and all receives/probes go to the local buffer receiver, sends to
// remote ranks travel in one batch per destination node; collectives go to
// the collective state. Every descriptor is validated before use: a rank's
// ring is input.
#pragma once

#include <map>

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

 private:
  const uint32_t self_;
  // Test-only fault injection (BCS_TEST_FAULT in the node manager's
  // environment; unset in normal use): "bad-batch" sends every descriptor
  // batch as bytes that do not decode, "lose-batch" announces batches it
  // never sends. The integration tests use it to check that such a failure
  // ends the job with its cause instead of a hang.
  enum class Fault { none, bad_batch, lose_batch } fault_ = Fault::none;
  std::map<std::pair<int32_t, int32_t>, uint64_t> pair_seq_;  // non-overtaking across slices
};

}  // namespace bcs::nm
