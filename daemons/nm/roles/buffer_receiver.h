// Buffer receiver (BR), the MSM: takes this slice's send descriptors (the
// local ones from the buffer sender, the remote ones in the batches the
// microstrobe announced), matches them against the local receives and
// probes, answers probes and cuts the matches into per-slice chunks for
// the DMA helper. The matching itself is libbcs's Matcher (pure, tested on
// its own); this role owns the exchange and the completions.
#pragma once

#include <map>
#include <vector>

#include "bcs/matcher.h"
#include "bcs/shelf.h"
#include "ports.h"
#include "wire.h"

namespace bcs::nm {

class BufferReceiver {
 public:
  // `max_unexpected`: sends that may wait for one local receiver before
  // the buffer senders hold back further sends to it (Report::full). So do
  // `max_unexpected_bytes` of their payloads (inline and eager sends, whose
  // bytes this node keeps until a receive takes them).
  // BCS_SHELF=off in the node manager's environment: no unexpected shelf.
  BufferReceiver(uint32_t self, uint64_t chunk_budget, uint64_t max_unexpected = kMaxUnexpected,
                 uint64_t max_unexpected_bytes = kMaxUnexpectedBytes);
  static constexpr uint64_t kMaxUnexpected = 65536;
  static constexpr uint64_t kMaxUnexpectedBytes = uint64_t{64} << 20;

  // From the buffer sender, during DEM.
  void add_local_post(const RecvDesc& r) { local_posts_.push_back(r); }
  void add_local_send(SendDesc s) { local_sends_.push_back(std::move(s)); }
  void add_local_cancel(const SendCancel& c) { local_cancels_.push_back(c); }

  // MSM. `ranks` may be null (this node runs no part of the job any more):
  // the batches announced to it are still consumed.
  wire::Report run(const wire::Strobe& s, LocalRanks* ranks, Net& net);

  // For the DMA helper: this slice's chunks, and the transfers they belong to.
  std::vector<Chunk>& chunks() { return chunks_; }
  ChunkScheduler& scheduler() { return scheduler_; }
  // Sends waiting here unmatched that would move data once matched.
  size_t unexpected_moving() const { return matcher_.unexpected_moving(); }
  // The matching state, read between microphases (describe_waits).
  const Matcher& matcher() const { return matcher_; }
  // Local receivers with max_unexpected or more sends waiting, or
  // max_unexpected_bytes or more of their payloads, ascending.
  std::vector<int32_t> full_receivers(LocalRanks& ranks) const;
  // Receives that took their message from the shelf, found so far (at the
  // withdrawals).
  uint64_t shelf_taken() const { return shelf_taken_; }

 private:
  // The unexpected shelves (segment.h, Shelf) of the ranks this MSM
  // concerns: withdrawn before matching (a rank that wrote garbage there
  // is ended, and not offered to again), offered again after.
  void withdraw_shelves(LocalRanks& ranks, const std::vector<int32_t>& touched);
  void offer_shelves(LocalRanks& ranks, const std::vector<int32_t>& touched);

  const uint32_t self_;
  const uint64_t max_unexpected_;
  const uint64_t max_unexpected_bytes_;
  Matcher matcher_;
  ChunkScheduler scheduler_;
  std::vector<RecvDesc> local_posts_;
  std::vector<SendDesc> local_sends_;
  std::vector<SendCancel> local_cancels_;
  std::vector<Chunk> chunks_;
  bool shelf_ = true;
  std::map<int32_t, ShelfKeeper> shelves_;  // per local world rank
  std::vector<int32_t> shelf_bad_;          // ranks that wrote garbage there
  std::vector<int32_t> touched_;            // this MSM's (kept: no allocation per slice)
  uint64_t shelf_taken_ = 0;
};

}  // namespace bcs::nm
