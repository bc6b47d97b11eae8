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
  explicit BufferSender(uint32_t self) : self_(self) {}
  // DEM of `slice` (descriptors drained now were posted in slice - 1).
  wire::Report run(uint64_t slice, LocalRanks& ranks, Net& net, BufferReceiver& br,
                   Collectives& coll);

 private:
  const uint32_t self_;
  std::map<std::pair<int32_t, int32_t>, uint64_t> pair_seq_;  // non-overtaking across slices
};

}  // namespace bcs::nm
