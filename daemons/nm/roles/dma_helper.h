// DMA helper (DH), the P2P microphase: moves the bytes of this slice's
// chunks. Inline payloads are written straight into the receive buffer;
// a sender on this node is read by cross-memory attach through a staging
// buffer; a sender on another node is read remotely: this node sends a
// DmaGet, the sender's DMA helper reads its rank and answers with the bytes
// (serve(), run from inside the fabric's progress whatever this node is
// waiting for). The P2P microstrobe says how many remote reads this node
// must serve; the microphase ends only when they are served and its own
// chunks have landed.
#pragma once

#include <unordered_map>
#include <vector>

#include "buffer_receiver.h"
#include "ports.h"
#include "wire.h"

namespace bcs::nm {

class DmaHelper {
 public:
  explicit DmaHelper(uint32_t self) : self_(self) {}
  // P2P. `ranks` may be null (no job here any more): the announced remote
  // reads are still awaited so the microphase completes.
  wire::Report run(const wire::Strobe& s, LocalRanks* ranks, Net& net, BufferReceiver& br);
  // Sender side of a remote read; `ranks` is the job this node runs now
  // (null: none). The reply goes to m.from.
  static void serve(const core::Message& m, LocalRanks* ranks, Net& net);

 private:
  const uint32_t self_;
  std::vector<uint8_t> staging_;  // bounce buffer for local copies
  uint64_t next_token_ = 1;
  std::unordered_map<uint64_t, int32_t> xfer_error_;  // transfer id -> bcs_err_*
};

}  // namespace bcs::nm
