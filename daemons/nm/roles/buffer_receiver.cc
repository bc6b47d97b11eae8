#include "buffer_receiver.h"

#include "dma_helper.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace bcs::nm {

BufferReceiver::BufferReceiver(uint32_t self, uint64_t chunk_budget, uint64_t max_unexpected,
                               uint64_t max_unexpected_bytes)
    : self_(self),
      max_unexpected_(max_unexpected),
      max_unexpected_bytes_(max_unexpected_bytes),
      scheduler_(chunk_budget) {
  if (const char* e = std::getenv("BCS_SHELF"); e && std::string(e) == "off") shelf_ = false;
}

void BufferReceiver::withdraw_shelves(LocalRanks& ranks, const std::vector<int32_t>& touched) {
  for (int32_t r : touched) {
    auto it = shelves_.find(r);
    if (it == shelves_.end() || !it->second.offering()) continue;
    std::string why;
    const int took = it->second.withdraw(ranks.view_of(r).shelf, matcher_, r, &why);
    if (took < 0) {
      ranks.rank_corrupted(r, why);
      shelves_.erase(it);
      shelf_bad_.push_back(r);  // never offered to again: it is being ended
      continue;
    }
    shelf_taken_ += static_cast<uint64_t>(took);
  }
}

void BufferReceiver::offer_shelves(LocalRanks& ranks, const std::vector<int32_t>& touched) {
  for (int32_t r : touched) {
    auto it = shelves_.find(r);
    if (it == shelves_.end()) {
      // A first offer only for a rank with something to offer, and never
      // to one that wrote garbage there (it is being ended).
      if (!matcher_.unexpected_count(r) ||
          std::find(shelf_bad_.begin(), shelf_bad_.end(), r) != shelf_bad_.end())
        continue;
      it = shelves_.emplace(r, ShelfKeeper{}).first;
    }
    it->second.offer(ranks.view_of(r).shelf, matcher_, r);
  }
}

wire::Report BufferReceiver::run(const wire::Strobe& s, LocalRanks* ranks, Net& net) {
  wire::Report rep;
  const uint32_t expect = self_ < s.expect_batches.size() ? s.expect_batches[self_] : 0;
  std::vector<SendDesc> sends = std::move(local_sends_);
  local_sends_.clear();
  std::vector<SendCancel> cancels = std::move(local_cancels_);
  local_cancels_.clear();
  for (uint32_t i = 0; i < expect; ++i) {
    core::Message m;
    auto r = net.wait(wire::kEvDescBatch, &m, kPhaseDataTimeout);
    if (r != core::Status::ok) {
      spdlog::error("MSM: waiting for descriptor batch {}/{}: {}", i + 1, expect,
                    core::status_str(r));
      rep.fail(fmt::format("descriptor batch {} of {} never came: {}", i + 1, expect,
                           core::status_str(r)));
      break;
    }
    wire::DescBatch b;
    try {
      b = wire::decode_batch(m.data);
    } catch (const std::exception& e) {
      spdlog::error("MSM: descriptor batch from node {}: {}", m.from, e.what());
      rep.fail(fmt::format("descriptor batch from node {} did not decode: {}", m.from, e.what()));
      continue;
    }
    if (!ranks || b.job != ranks->job_id()) {
      // Of a job that ended (a peer ran its DEM while the job failed). A
      // job that still runs never has a batch in flight outside its own
      // slice (its MSM takes every one announced), so this is said.
      spdlog::warn("MSM of job {}, slice {}: dropped a descriptor batch of job {} from node {}",
                   s.job, s.slice, b.job, m.from);
      continue;
    }
    for (auto& x : b.sends) {
      // A batch names receivers; only local ones are ours to match.
      if (x.dst < 0 || !ranks->is_local(x.dst)) {
        spdlog::error("MSM: node {} sent a descriptor for rank {}, not on this node", m.from, x.dst);
        rep.fail(fmt::format("node {} sent a descriptor for rank {}, not on this node", m.from,
                             x.dst));
        continue;
      }
      sends.push_back(std::move(x));
    }
    for (const auto& c : b.cancels) {
      if (c.dst < 0 || !ranks->is_local(c.dst) || c.src < 0 ||
          static_cast<uint32_t>(c.src) >= ranks->nranks() || ranks->node_of(c.src) != m.from) {
        spdlog::error("MSM: node {} sent a cancel for rank {} -> {}, not its sender or ours",
                      m.from, c.src, c.dst);
        rep.fail(fmt::format("node {} sent a cancel for rank {} -> {}", m.from, c.src, c.dst));
        continue;
      }
      cancels.push_back(c);
    }
  }
  if (!ranks) {
    local_posts_.clear();
    return rep;
  }

  // The ranks whose messages this MSM may take or add to: their shelves
  // are withdrawn first, so that what a rank took leaves matching before
  // anything else can match it, and offered again after.
  std::vector<int32_t>& touched = touched_;
  touched.clear();
  if (shelf_) {
    for (const RecvDesc& r : local_posts_) touched.push_back(r.rank);
    for (const SendDesc& x : sends) touched.push_back(x.dst);
    for (const SendCancel& c : cancels) touched.push_back(c.dst);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    touched.erase(std::remove_if(touched.begin(), touched.end(),
                                 [&](int32_t r) { return !ranks->is_local(r); }),
                  touched.end());
    withdraw_shelves(*ranks, touched);
  }
  matcher_.msm(s.slice, local_posts_, std::move(sends));
  local_posts_.clear();
  matcher_.cancel_sends(cancels);
  if (shelf_) offer_shelves(*ranks, touched);

  for (const RecvDesc& c : matcher_.take_cancelled())
    ranks->complete_status(c.rank, c.request, bcs_err_cancelled, c.src, c.tag, 0, 0);
  for (auto& pr : matcher_.take_probe_results())
    ranks->complete_status(pr.probe.rank, pr.probe.request, 0, pr.source, pr.tag, pr.len,
                           pr.found ? 1 : 0);
  auto matches = matcher_.take_matches();
  rep.matches = static_cast<uint32_t>(matches.size());
  for (auto& m : matches) scheduler_.add(std::move(m));
  chunks_ = scheduler_.schedule_slice();
  rep.chunks = static_cast<uint32_t>(chunks_.size());
  // Remote reads the DMA helper will send in P2P, per sender node, so that
  // each sender knows how many to serve.
  rep.gets_to.assign(ranks->nnodes(), 0);
  for (const Chunk& c : chunks_)
    if (const uint32_t n = DmaHelper::remote_gets(c, *ranks))
      rep.gets_to[ranks->node_of(c.match->send.src)] += n;
  rep.transfers_pending = static_cast<uint32_t>(scheduler_.in_flight());
  rep.full = full_receivers(*ranks);
  // Which local ranks have sends here that no receive took: one of them
  // that starts waiting rings (segment_slice_for_waiter), since its new
  // receive may take one.
  for (int32_t r : ranks->local_ranks()) ranks->held_sends(r, matcher_.unexpected_count(r) != 0);
  return rep;
}

std::vector<int32_t> BufferReceiver::full_receivers(LocalRanks& ranks) const {
  std::vector<int32_t> full;
  for (int32_t r : ranks.local_ranks())
    if (matcher_.unexpected_count(r) >= max_unexpected_ ||
        matcher_.unexpected_bytes(r) >= max_unexpected_bytes_)
      full.push_back(r);
  return full;
}

}  // namespace bcs::nm
