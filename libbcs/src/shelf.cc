// The unexpected shelf: see segment.h (Shelf) for the protocol and
// shelf.h for the two sides.
#include "bcs/shelf.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

namespace bcs {

namespace {
constexpr uint32_t kStateBits = 2;
constexpr uint32_t kStateMask = (1u << kStateBits) - 1;
constexpr uint32_t kEpochMask = ~0u >> kStateBits;

uint32_t word(uint32_t epoch, ShelfState s) {
  return ((epoch & kEpochMask) << kStateBits) | s;
}

// The entry a receive (or probe) of (src, context, tag) would take, or
// null. Named source and tag: the first entry of that key (a key's entries
// are in send order). A wildcard: the entry with the lowest arrival among
// those it accepts, if it comes before every send it would accept that is
// held but not offered (the cut of its key). `*w`: its state word as read.
ShelfEntry* shelf_find(Shelf* shelf, int32_t src, int32_t context, int32_t tag, uint32_t* w) {
  const uint32_t epoch = shelf->epoch.load(std::memory_order_acquire);
  if (epoch & 1) return nullptr;  // being rewritten
  const uint32_t n = std::min(shelf->count.load(std::memory_order_acquire), kShelfSlots);
  const uint32_t offered = word(epoch, kShelfOffered), taken = word(epoch, kShelfTaken);
  const bool exact = src != kAnySource && tag != kAnyTag;
  ShelfEntry* best = nullptr;
  uint64_t best_arrival = 0;
  for (uint32_t i = 0; i < n; ++i) {
    ShelfEntry& e = shelf->entries[i];
    const uint32_t s = e.state.load(std::memory_order_acquire);
    if (s == taken) continue;          // an earlier receive of ours
    if (s != offered) return nullptr;  // withdrawn, or another epoch's
    if (e.context != context || (src != kAnySource && e.src != src) ||
        (tag != kAnyTag && e.tag != tag))
      continue;
    if (exact) {
      *w = s;
      return &e;
    }
    const uint64_t a = e.arrival;
    if (!best || a < best_arrival) {
      best = &e;
      best_arrival = a;
      *w = s;
    }
  }
  if (!best) return nullptr;
  const uint64_t cut = src != kAnySource ? best->src_cut
                       : tag != kAnyTag  ? best->tag_cut
                                         : best->context_cut;
  return best_arrival < cut ? best : nullptr;
}

// What a receive that takes `e` gets, as read now.
ShelfTaken taken_of(const ShelfEntry& e) {
  ShelfTaken t;
  t.src = e.src;
  t.tag = e.tag;
  t.len = std::min<uint32_t>(e.len, kInlineMax);
  t.pair_seq = e.pair_seq;
  return t;
}
}  // namespace

bool shelf_take(Shelf* shelf, int32_t src, int32_t context, int32_t tag, void* buf, size_t cap,
                ShelfTaken* out) {
  uint32_t w = 0;
  ShelfEntry* e = shelf_find(shelf, src, context, tag, &w);
  if (!e) return false;
  // Copied before the CAS: if the node manager withdrew the entry (and
  // rewrote it) meanwhile, the CAS fails and these bytes are dropped.
  unsigned char bytes[kInlineMax];
  const ShelfTaken t = taken_of(*e);
  std::memcpy(bytes, e->payload, t.len);
  const uint32_t taken = (w & ~kStateMask) | kShelfTaken;
  if (!e->state.compare_exchange_strong(w, taken, std::memory_order_acq_rel)) return false;
  if (const size_t k = std::min<size_t>(t.len, cap)) std::memcpy(buf, bytes, k);
  *out = t;
  return true;
}

bool shelf_peek(Shelf* shelf, int32_t src, int32_t context, int32_t tag, ShelfTaken* out) {
  uint32_t w = 0;
  ShelfEntry* e = shelf_find(shelf, src, context, tag, &w);
  if (!e) return false;
  const ShelfTaken t = taken_of(*e);
  // Still the entry we read (not withdrawn and rewritten meanwhile).
  if (e->state.load(std::memory_order_acquire) != w) return false;
  *out = t;
  return true;
}

int ShelfKeeper::withdraw(Shelf* shelf, Matcher& m, int32_t rank, std::string* why) {
  if (offers_.empty()) return 0;
  // Odd: a rank that reads it now leaves the shelf alone.
  shelf->epoch.store(generation_ | 1, std::memory_order_seq_cst);
  int took = 0;
  for (size_t i = 0; i < offers_.size(); ++i) {
    const Offer& o = offers_[i];
    uint32_t w = o.word;
    if (shelf->entries[i].state.compare_exchange_strong(
            w, (o.word & ~kStateMask) | kShelfWithdrawn, std::memory_order_acq_rel))
      continue;
    if (w != ((o.word & ~kStateMask) | kShelfTaken)) {
      *why = "wrote " + std::to_string(w) + " into entry " + std::to_string(i) +
             " of its unexpected shelf";
      offers_.clear();
      return -1;
    }
    // Received. The matcher holds it: nothing else takes the rank's
    // messages between an offer and its withdrawal.
    if (m.take_shelved(rank, o.context, o.src, o.tag, o.pair_seq)) ++took;
  }
  offers_.clear();
  shelf->count.store(0, std::memory_order_release);
  return took;
}

void ShelfKeeper::offer(Shelf* shelf, const Matcher& m, int32_t rank) {
  offers_.clear();
  generation_ = (generation_ + 2) & kEpochMask & ~1u;
  // Odd while the entries are written (withdraw() left it odd when it
  // withdrew anything; a first offer finds it even).
  shelf->epoch.store(generation_ - 1, std::memory_order_seq_cst);
  const uint32_t offered = word(generation_, kShelfOffered);
  const Matcher::ShelfOffer o = m.shelf_candidates(rank, kShelfSlots);
  for (const SendDesc* s : o.sends) {
    ShelfEntry& e = shelf->entries[offers_.size()];
    e.len = static_cast<uint32_t>(std::min<uint64_t>(s->len, kInlineMax));
    e.src = s->src;
    e.context = s->context;
    e.tag = s->tag;
    e.pair_seq = s->pair_seq;
    e.arrival = s->arrival;
    auto cut = [&](const auto& cuts, const auto& k) -> uint64_t {
      if (o.no_wildcards) return 0;
      const auto it = cuts.find(k);
      return it == cuts.end() ? UINT64_MAX : it->second;
    };
    e.src_cut = cut(o.src_cuts, std::make_pair(s->context, s->src));
    e.tag_cut = cut(o.tag_cuts, std::make_pair(s->context, s->tag));
    e.context_cut = cut(o.context_cuts, s->context);
    // An empty message has no bytes (and its vector no storage to copy from).
    if (const size_t k = std::min<size_t>(e.len, s->payload.size()))
      std::memcpy(e.payload, s->payload.data(), k);
    e.state.store(offered, std::memory_order_release);
    offers_.push_back({offered, s->context, s->src, s->tag, s->pair_seq});
  }
  shelf->count.store(static_cast<uint32_t>(offers_.size()), std::memory_order_release);
  shelf->epoch.store(generation_, std::memory_order_release);
}

}  // namespace bcs
