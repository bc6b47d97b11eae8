// The descriptor ring's operations: the rank posts (ring_try_post,
// ring_try_post_span), the node manager drains (ring_drain,
// ring_drain_holding) and both peek between slices (ring_peek); and the
// request table's completion (request_complete, request_land, rank_wake).
// The types are segment.h's, which includes this header at its end, so
// either may be included.
#pragma once

#include "bcs/segment.h"

namespace bcs {

// ------------------------------------------------------------- ring ops
// Single producer (the rank), single consumer (the NM).
// ring_try_post copies `d` into the next slot; false when the ring is full.
// `tail_seen` (optional, the producer's own memory): the consumer's tail as
// last read. The tail is read again only when the ring looks full by it, so
// a post does not pull the line the consumer writes on every call (a
// cross-core cache miss that was a large part of a post after a wait).
bool ring_try_post(RankView& v, const Descriptor& d, uint64_t* tail_seen = nullptr);
// ring_try_post_span posts the eager send `d` (kDescInline, inline_len =
// len, kInlineMax < len <= kInlineSpanMax) with its `len` bytes at `src`
// across ring_span_slots(len) slots; false when fewer slots are free.
bool ring_try_post_span(RankView& v, const Descriptor& d, const void* src, size_t len,
                        uint64_t* tail_seen = nullptr);

// What a drain hands its callback besides the descriptor: the inline bytes
// of an eager send (a span), contiguous (copied out of the ring where the
// span wraps around its end), `len` = the descriptor's inline_len; or
// nothing (data null) for any other descriptor.
struct RingSpan {
  const uint8_t* data = nullptr;
  size_t len = 0;
};
namespace detail {
// Reads the descriptor at ring index `i` once, into `d` (private memory:
// the rank may write its ring while we look, and a field checked must be
// the field used), and its span into `buf`. Returns the slots it takes, or
// 0 when the span runs past `head` (the rank published half a descriptor).
inline uint64_t ring_read(const RankView& v, uint64_t i, uint64_t head, Descriptor& d,
                          uint8_t (&buf)[kInlineSpanMax], RingSpan& span) {
  const uint64_t mask = v.ring_slots - 1;
  std::memcpy(&d, &v.ring[i & mask], sizeof d);
  span = {};
  if (d.kind != DescKind::send || !(d.flags & kDescInline)) return 1;
  const uint64_t n = ring_span_slots(d.inline_len);
  if (n == 1) return 1;
  if (n > head - i || n > v.ring_slots) return 0;
  // The span's bytes start at the descriptor's payload and run on through
  // the next slots, which lie right after it unless the ring wraps.
  const auto* ring = reinterpret_cast<const uint8_t*>(v.ring);
  const size_t at = (i & mask) * kDescriptorSize + offsetof(Descriptor, payload);
  const size_t end = size_t{v.ring_slots} * kDescriptorSize;
  const size_t first = std::min<size_t>(d.inline_len, end - at);
  std::memcpy(buf, ring + at, first);
  std::memcpy(buf + first, ring, d.inline_len - first);
  span = {buf, d.inline_len};
  return n;
}
template <typename Fn>
auto ring_call(Fn& fn, const Descriptor& d, const RingSpan& span) {
  if constexpr (std::is_invocable_v<Fn&, const Descriptor&, const RingSpan&>)
    return fn(d, span);
  else
    return fn(d);
}
}  // namespace detail

// ring_drain hands every posted descriptor to `fn` in post order and frees
// the slots; returns how many it drained. `fn` takes a private copy of the
// descriptor and, optionally, its RingSpan. The head is the rank's to
// write: one more than a ring ahead of the tail (or behind it) is garbage,
// and then nothing is drained and *bad (if given) is set; so is a head
// that ends within a span, and the drain stops before that descriptor.
template <typename Fn>
size_t ring_drain(RankView& v, Fn&& fn, bool* bad = nullptr) {
  uint64_t tail = v.ctl->tail.load(std::memory_order_relaxed);
  const uint64_t head = v.ctl->head.load(std::memory_order_acquire);
  if (head - tail > v.ring_slots) {
    if (bad) *bad = true;
    return 0;
  }
  size_t n = 0;
  Descriptor d;
  uint8_t buf[kInlineSpanMax];
  RingSpan span;
  while (tail != head) {
    const uint64_t slots = detail::ring_read(v, tail, head, d, buf, span);
    if (!slots) {
      if (bad) *bad = true;
      break;
    }
    detail::ring_call(fn, d, span);
    tail += slots;
    ++n;
  }
  v.ctl->tail.store(tail, std::memory_order_release);
  return n;
}

// ring_drain_holding is ring_drain for a consumer that may hold some
// descriptors back (a send to a receiver with too many unexpected
// messages): `fn` returns false to leave a descriptor in the ring. Later
// ones are still handed over; the tail stops at the first one held, and
// `taken` (the consumer's own memory, ring_slots entries, zero at first)
// remembers which slots past it were already handed over, so each
// descriptor reaches `fn` once taken. The ring's capacity bounds what may
// wait behind a held one.
struct RingDrained {
  size_t taken = 0;          // descriptors handed over now
  uint64_t head = 0;         // the head this drain read (all before it were seen)
  bool full_before = false;  // the ring was full: the rank may sleep waiting for room
  bool bad = false;          // the head is garbage: nothing drained
  bool torn = false;         // the head ends within a span: drained up to that descriptor
};
template <typename Fn>
RingDrained ring_drain_holding(RankView& v, std::vector<uint8_t>& taken, Fn&& fn) {
  RingDrained out;
  uint64_t tail = v.ctl->tail.load(std::memory_order_relaxed);
  const uint64_t head = v.ctl->head.load(std::memory_order_acquire);
  out.head = head;
  out.full_before = head - tail == v.ring_slots;
  if (head - tail > v.ring_slots) {
    out.bad = true;
    return out;
  }
  if (taken.size() != v.ring_slots) taken.assign(v.ring_slots, 0);
  bool held = false;
  size_t& n = out.taken;
  Descriptor d;
  uint8_t buf[kInlineSpanMax];
  RingSpan span;
  // taken[k]: the slots of the descriptor at k, handed over while one
  // before it is held (its span as read then: the rank may have rewritten
  // the slot since).
  for (uint64_t i = tail; i != head;) {
    const uint64_t k = i & (v.ring_slots - 1);
    if (const uint64_t slots = taken[k]) {
      if (slots > head - i) {  // the head moved back into it: garbage
        out.torn = true;
        break;
      }
      if (!held) {
        taken[k] = 0;
        tail = i + slots;
      }
      i += slots;
      continue;
    }
    const uint64_t slots = detail::ring_read(v, i, head, d, buf, span);
    if (!slots) {
      out.torn = true;
      break;
    }
    if (!detail::ring_call(fn, d, span)) {
      held = true;
      i += slots;
      continue;
    }
    ++n;
    if (held)
      taken[k] = static_cast<uint8_t>(slots);
    else
      tail = i + slots;
    i += slots;
  }
  v.ctl->tail.store(tail, std::memory_order_release);
  return out;
}

// Marks request `idx` done with the given fields and wakes the rank if it waits.
void request_complete(RankView& v, uint32_t idx, int32_t error, int32_t source, int32_t tag,
                      uint64_t bytes, uint32_t found = 0, uint64_t seq = 0, uint64_t slice = 0);
// Puts a small receive's `n` bytes into the landing of request `idx` and
// says so in the slot (the NM, before request_complete, whose release store
// publishes them). False, landing nothing, when `n` is 0 or more than
// kLandingMax, or slot `idx` has no landing (SegmentLayout::landing_slots):
// the caller writes the buffer.
inline bool request_land(RankView& v, uint32_t idx, const void* src, size_t n) {
  if (n == 0 || n > kLandingMax || idx >= v.landing_slots) return false;
  std::memcpy(v.landing + size_t{idx} * kLandingMax, src, n);
  v.requests[idx].landed = static_cast<uint32_t>(n);
  return true;
}
// Wake the rank if it sleeps (after completing several requests, or after
// freeing ring space).
void rank_wake(RankView& v);
// The rank's half: it raises `waiting` (rank_announce_wait, seq_cst), looks
// at what it waits for once more, and only then sleeps on the flag
// (rank_sleep), which returns at once if a rank_wake cleared it since.
// False if the sleep timed out.
inline void rank_announce_wait(RankControl& c) { c.waiting.store(1, std::memory_order_seq_cst); }
inline bool rank_sleep(RankControl& c, uint64_t timeout_ns) {
  return futex_wait(&c.waiting, 1, timeout_ns);
}

// ------------------------------------------------------------- peeking
// Whether a slice could start for world rank `me` as it starts waiting, by
// the rules of a node on its lease (Nic::wait_on_bell) beyond "every local
// rank is blocked": a send to it sits in a local ring the node has not
// drained (its own ring too: a send to itself), or its own ring holds a
// collective (the node starts one once its local members all posted). The
// rank then rings; otherwise the node would only wake to find nothing to
// start. Looks at the first kRingPeekMax slots of each ring not drained
// yet, as the node's own peek does (ring_peek); the rings are their
// owners' to write, so a field read while a slot is rewritten costs at most
// a ring too many or a slice left to the period's end.
constexpr uint64_t kRingPeekMax = 64;
// Calls fn(kind, peer, context, seq) for the descriptors in slots [from,
// head) of `v`'s ring, at most kRingPeekMax slots and one ring's worth,
// each field read once, until fn returns true (then so does ring_peek).
// `from` must be where a descriptor starts (the tail, or a head a drain
// read): the walk steps over eager sends' spans, so their bytes are never
// taken for descriptors.
template <typename Fn>
bool ring_peek(const RankView& v, uint64_t from, uint64_t head, Fn&& fn) {
  const uint64_t n = std::min<uint64_t>({head - from, v.ring_slots, kRingPeekMax});
  for (uint64_t k = from; k - from < n;) {
    const Descriptor& d = v.ring[k & (v.ring_slots - 1)];
    const DescKind kind = d.kind;
    const uint8_t flags = d.flags;
    const uint32_t inline_len = d.inline_len;
    if (fn(kind, d.peer, d.context, d.seq)) return true;
    k += kind == DescKind::send && (flags & kDescInline) ? ring_span_slots(inline_len) : 1;
  }
  return false;
}
inline bool segment_slice_for_waiter(void* base, const SegmentLayout& l, uint32_t my_local,
                                     int32_t me) {
  if (segment_rank_view(base, my_local, l).ctl->held_sends.load(std::memory_order_seq_cst))
    return true;
  for (uint32_t i = 0; i < l.nlocal; ++i) {
    const RankView v = segment_rank_view(base, i, l);
    const uint64_t head = v.ctl->head.load(std::memory_order_seq_cst);
    const uint64_t tail = v.ctl->tail.load(std::memory_order_acquire);
    if (ring_peek(v, tail, head, [&](DescKind kind, int32_t peer, int32_t, uint64_t) {
          return (kind == DescKind::send && peer == me) || (kind == DescKind::coll && i == my_local);
        }))
      return true;
  }
  return false;
}

}  // namespace bcs
