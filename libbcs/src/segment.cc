#include "bcs/segment.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace bcs {

bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns) {
  struct timespec ts{};
  struct timespec* tsp = nullptr;
  if (timeout_ns) {
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000ull);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000ull);
    tsp = &ts;
  }
  // Shared (not FUTEX_PRIVATE) because the word lives in a segment mapped by
  // several processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, tsp, nullptr,
                 0) == 0 ||
         errno != ETIMEDOUT;
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

bool segment_populate(void* p, size_t len) {
  if (len == 0) return true;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto at = reinterpret_cast<uintptr_t>(p);
  const uintptr_t from = at & ~(page - 1);
#ifdef MADV_POPULATE_WRITE
  if (madvise(reinterpret_cast<void*>(from), at + len - from, MADV_POPULATE_WRITE) == 0) return true;
  if (errno != EINVAL) return false;
#endif
  // An old kernel: a read of each page allocates it (the segment is shared
  // memory), without writing anything a rank may be using.
  for (uintptr_t a = from; a < at + len; a += page) (void)*reinterpret_cast<volatile const char*>(a);
  return true;
}

bool ring_try_post(RankView& v, const Descriptor& d, uint64_t* tail_seen) {
  const uint64_t head = v.ctl->head.load(std::memory_order_relaxed);
  // A stale tail is safe: the consumer only moves it forward, and the
  // slots below the value seen were released by the acquire that read it.
  uint64_t tail = tail_seen ? *tail_seen : 0;
  if (!tail_seen || head - tail >= v.ring_slots) {
    tail = v.ctl->tail.load(std::memory_order_acquire);
    if (tail_seen) *tail_seen = tail;
    if (head - tail >= v.ring_slots) return false;
  }
  Descriptor& slot = v.ring[head & (v.ring_slots - 1)];
  // Copy only what is used: the header, plus the inline bytes if any (a
  // collective's inline area starts with its CollArgs, a layout's with its
  // LayoutRef).
  std::memcpy(&slot, &d, offsetof(Descriptor, payload));
  if (d.kind == DescKind::coll)
    std::memcpy(slot.payload, d.payload,
                (d.flags & kDescInline) ? kCollInlineOffset + d.inline_len : sizeof(CollArgs));
  else if (d.flags & kDescInline)
    std::memcpy(slot.payload, d.payload, d.inline_len);
  else if (d.flags & kDescLayout)
    std::memcpy(slot.payload, d.payload, sizeof(LayoutRef));
  v.ctl->head.store(head + 1, std::memory_order_release);
  return true;
}

bool ring_try_post_span(RankView& v, const Descriptor& d, const void* src, size_t len,
                        uint64_t* tail_seen) {
  const uint64_t slots = ring_span_slots(static_cast<uint32_t>(len));
  if (slots > v.ring_slots) return false;
  const uint64_t head = v.ctl->head.load(std::memory_order_relaxed);
  uint64_t tail = tail_seen ? *tail_seen : 0;
  if (!tail_seen || v.ring_slots - (head - tail) < slots) {
    tail = v.ctl->tail.load(std::memory_order_acquire);
    if (tail_seen) *tail_seen = tail;
    if (v.ring_slots - (head - tail) < slots) return false;
  }
  const uint64_t mask = v.ring_slots - 1;
  std::memcpy(&v.ring[head & mask], &d, offsetof(Descriptor, payload));
  // The bytes run on from the descriptor's payload through the next
  // slots, wrapping to the ring's start (ring_read reads them so).
  auto* ring = reinterpret_cast<uint8_t*>(v.ring);
  const size_t at = (head & mask) * kDescriptorSize + offsetof(Descriptor, payload);
  const size_t end = size_t{v.ring_slots} * kDescriptorSize;
  const size_t first = std::min(len, end - at);
  std::memcpy(ring + at, src, first);
  std::memcpy(ring, static_cast<const uint8_t*>(src) + first, len - first);
  v.ctl->head.store(head + slots, std::memory_order_release);
  return true;
}

void rank_wake(RankView& v) {
  v.ctl->wake_seq.fetch_add(1, std::memory_order_relaxed);
  // The rank sets `waiting` before re-checking its condition and sleeping,
  // so either it sees our completion or we see it waiting (both seq_cst).
  // Clearing the flag here (the rank clears it too once it runs) means a
  // rank woken but not yet scheduled no longer counts as blocked
  // (segment_all_blocked), so the strobe never races ahead of it. The rank
  // sleeps on this flag itself (rank_sleep): a wake-up that clears it before
  // the rank sleeps makes that sleep return at once. It used to sleep on
  // wake_seq, read before it raised the flag: a wake-up bumping wake_seq
  // before that read and clearing the flag after it was consumed by a rank
  // not yet asleep, and the next completion, finding the flag down, woke
  // nobody. The rank then slept until its futex timed out (100 ms), a few
  // times per run of OSU's osu_bw.
  if (v.ctl->waiting.exchange(0, std::memory_order_seq_cst)) futex_wake_all(&v.ctl->waiting);
}

bool segment_membarrier_supported() {
  const long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  return q > 0 && (q & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
         (q & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED);
}

bool segment_membarrier_register() {
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
}

bool segment_membarrier() {
  return syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) == 0;
}

void segment_ring_bell(std::atomic<uint32_t>* bell) {
  bell->fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(bell);
}

void request_complete(RankView& v, uint32_t idx, int32_t error, int32_t source, int32_t tag,
                      uint64_t bytes, uint32_t found, uint64_t seq, uint64_t slice) {
  RequestSlot& r = v.requests[idx];
  r.seq = seq;
  r.slice = slice;
  r.error = error;
  r.source = source;
  r.tag = tag;
  r.bytes = bytes;
  r.found = found;
  r.state.store(static_cast<uint32_t>(ReqState::done), std::memory_order_release);
  rank_wake(v);
}

}  // namespace bcs
