// The rank side of the job segment: request slots, posting and waiting
// (rank.h).
#include "rank.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string_view>

namespace bcs::rank_side {

bool valid_request(bcs_request_t r) {
  auto& s = st();
  return r >= 0 && static_cast<uint32_t>(r) < s.view.request_slots &&
         slot(static_cast<uint32_t>(r)).state.load(std::memory_order_acquire) !=
             static_cast<uint32_t>(ReqState::free);
}

size_t drop_answered_iprobes();

namespace {
// Makes slot s.fresh usable, then hands it out: its page backed by memory
// (populated with its neighbours, so that a failure is ENOMEM here rather
// than a fault in a post, and the faults of a burst of posts are one system
// call per kPopulateSlots), room for it in free_slots and slot_info.
bcs_status_t take_fresh(uint32_t* idx) {
  auto& s = st();
  const uint32_t i = s.fresh;
  try {
    if (s.free_slots.capacity() <= i)
      s.free_slots.reserve(std::min<size_t>(s.max_requests, std::max<size_t>(2 * size_t{i}, 64)));
    if (s.slot_info.size() <= i)
      s.slot_info.resize(std::min<size_t>(s.max_requests, std::max<size_t>(2 * size_t{i}, 64)));
  } catch (const std::bad_alloc&) {
    return BCS_ERR_NO_MEM;
  }
  if (i >= s.populated) {
    const uint32_t n = std::min(kPopulateSlots, s.max_requests - i);
    if (!bcs::segment_populate(&slot(i), size_t{n} * sizeof(RequestSlot))) return BCS_ERR_NO_MEM;
    s.populated = i + n;
  }
  s.fresh = i + 1;
  *idx = i;
  return BCS_OK;
}
}  // namespace

bcs_status_t alloc_slot(DescKind kind, uint32_t* idx) {
  auto& s = st();
  if (s.free_slots.empty() && s.fresh < s.max_requests) {
    if (const bcs_status_t e = take_fresh(idx)) return e;
  } else {
    if (s.free_slots.empty() && drop_answered_iprobes() == 0) return BCS_ERR_NO_RESOURCES;
    *idx = s.free_slots.back();
    s.free_slots.pop_back();
  }
  RequestSlot& r = slot(*idx);
  r.error = 0;
  r.source = 0;
  r.tag = 0;
  r.bytes = 0;
  r.found = 0;
  r.seq = 0;
  r.slice = 0;
  r.landed = 0;
  r.kind = static_cast<uint32_t>(kind);
  if (kind == DescKind::recv || kind == DescKind::probe || kind == DescKind::iprobe) {
    shelf_may_take();  // drops what is no longer open, so the list stays short
    s.open_recvs.push_back(*idx);
  }
  // The NM only looks at a slot after the descriptor naming it was published
  // by the ring's release store, so relaxed is enough here.
  r.state.store(static_cast<uint32_t>(ReqState::pending), std::memory_order_relaxed);
  return BCS_OK;
}

void release_slot(uint32_t idx) {
  if (st().observer) {  // a receive the program took back: the end of a message flow
    const RequestSlot& r = slot(idx);
    if (r.kind == static_cast<uint32_t>(DescKind::recv) && r.seq &&
        r.state.load(std::memory_order_acquire) == static_cast<uint32_t>(ReqState::done))
      st().observer(0, r.source, r.seq, r.bytes);
  }
  slot(idx).state.store(static_cast<uint32_t>(ReqState::free), std::memory_order_relaxed);
  st().free_slots.push_back(idx);
}

void take_landed(uint32_t idx) {
  RequestSlot& r = slot(idx);
  const State::SlotInfo& b = st().slot_info[idx];
  // The node manager lands no more than the receive holds; the bounds are
  // checked anyway, against what this rank posted.
  const size_t n = std::min<uint64_t>({r.landed, b.recv_cap, bcs::kLandingMax});
  if (n && b.recv_buf && idx < st().view.landing_slots)
    std::memcpy(b.recv_buf, st().view.landing + size_t{idx} * bcs::kLandingMax, n);
  r.landed = 0;
}

void sweep_forgotten() {
  auto& f = st().forgotten;
  for (size_t i = 0; i < f.size();) {
    RequestSlot& r = slot(f[i]);
    if (r.state.load(std::memory_order_acquire) != static_cast<uint32_t>(ReqState::done)) {
      ++i;
      continue;
    }
    if (r.landed) take_landed(f[i]);
    release_slot(f[i]);
    f[i] = f.back();
    f.pop_back();
  }
}

// Frees the slots of non-blocking probes the node manager has answered;
// returns how many.
size_t drop_answered_iprobes() {
  auto& s = st();
  size_t n = 0;
  for (auto it = s.iprobes.begin(); it != s.iprobes.end();) {
    if (slot_done(it->second)) {
      release_slot(it->second);
      it = s.iprobes.erase(it);
      ++n;
    } else {
      ++it;
    }
  }
  return n;
}

// Completion done by the rank itself (inline sends, one-member collectives,
// application bypass).
void complete_locally(uint32_t idx, uint64_t bytes) {
  RequestSlot& r = slot(idx);
  r.error = 0;
  r.source = st().rank;
  r.tag = 0;
  r.bytes = bytes;
  r.state.store(static_cast<uint32_t>(ReqState::done), std::memory_order_release);
}

void fill_status(uint32_t idx, bcs_msg_status_t* out) {
  if (!out) return;
  const RequestSlot& r = slot(idx);
  out->source = r.source;
  out->tag = r.tag;
  out->bytes = r.bytes;
  out->error = r.error;
  out->seq = r.seq;
  out->slice = r.slice;
}

void empty_status(bcs_msg_status_t* out) {
  if (!out) return;
  out->source = BCS_ANY_SOURCE;
  out->tag = BCS_ANY_TAG;
  out->bytes = 0;
  out->error = BCS_OK;
  out->seq = 0;
  out->slice = 0;
}

// A polling caller (MPI_Test / MPI_Iprobe loops) found nothing: give the CPU
// to the node manager, which may share it with us. A node that sleeps
// through the periods (kNmBellOnWork) is rung first: a poll is what its
// period's slice would have served.
void polled_nothing() {
  auto& s = st();
  if (s.slice_hooks) run_slice_hooks();
  if (s.header->nm_flags.load(std::memory_order_relaxed) & bcs::kNmBellOnWork)
    bcs::segment_ring_bell(&s.header->bell);
  sched_yield();
}

uint64_t wait_spin_ns(uint32_t nlocal) {
  if (const char* e = std::getenv("BCS_WAIT_SPIN"); e && std::string_view(e) == "off") return 0;
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0 || CPU_COUNT(&mine) != 1) return 0;
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 0 && nlocal <= static_cast<uint64_t>(cpus) ? kWaitSpinNs : 0;
}

void run_slice_hooks() {
  auto& s = st();
  if (s.drain_observer) {
    auto* ctl = s.view.ctl;
    const uint64_t head = ctl->drain_head.load(std::memory_order_acquire);
    const uint64_t slots = s.view.ring_slots;
    // Lapped (cannot happen while notes are taken at every post, see
    // DrainNote): what was overwritten is reported as lost, slice 0.
    if (head - s.drain_tail > slots) {
      s.drain_observer(0, head - slots - s.drain_tail);
      s.drain_tail = head - slots;
    }
    for (; s.drain_tail != head; ++s.drain_tail) {
      const bcs::DrainNote& n = s.view.drains[s.drain_tail & (slots - 1)];
      s.drain_observer(n.slice, n.count);
    }
  }
  if (s.alarm_slice) {
    const uint64_t now = s.header->job_slice.load(std::memory_order_acquire);
    if (now >= s.alarm_slice) {
      const bcs_slice_alarm_t fn = s.alarm;
      s.alarm_slice = 0;
      s.alarm = nullptr;
      s.view.ctl->wake_at_slice.store(0, std::memory_order_relaxed);
      s.slice_hooks = s.drain_observer != nullptr;
      fn(now);
    }
  }
}

namespace {
// A send to a local rank that sleeps in MPI (kNmBellOnPost). Its read of
// the peer's `waiting` after publishing the head pairs with no barrier of
// the peer's: it is a hint, and a ring missed in a race with the peer
// starting to wait costs at most the period (the peer's own ring wakes the
// node, which then finds the send in the ring).
bool send_to_waiting(const Descriptor& d) {
  if (d.kind != DescKind::send || d.peer < 0 || d.peer >= st().size) return false;
  const bcs::RankControl* c = st().local_ctl[static_cast<size_t>(d.peer)];
  return c && c->waiting.load(std::memory_order_relaxed);
}

// A post that a period's slice would serve while the node sleeps through
// the periods (kNmBellOnWork): a transfer to start or a synchronous send
// to match, a receive or probe that may take a send the node holds, a
// non-blocking probe, a cancel. An inline send is complete already, and
// a receive with nothing held for it waits for a send, whose poster or
// this rank's wait or poll starts the slice.
bool wakes_idle_node(const Descriptor& d) {
  switch (d.kind) {
    case DescKind::send:
      return !(d.flags & bcs::kDescInline);
    case DescKind::recv:
    case DescKind::probe:
      return st().view.ctl->held_sends.load(std::memory_order_relaxed) != 0;
    case DescKind::coll:
    case DescKind::comm:
      return false;  // their own bells (kNmBellOnPost), or a wait's
    default:
      return true;
  }
}

// Whether every other local member of the collective context `d` is posted
// on has posted collective d.seq there or a later one (bcs_coll has just
// made the context the last one). Members that post at once (woken by one
// completion, they often do) each store their word and then read the
// others': with a fence on both sides at least one sees the other's, and
// rings. Without it both may miss, and the period then starts the slice.
bool last_local_post(const Descriptor& d) {
  const CollContext* c = st().coll_last;
  if (!c || !c->members_known || st().coll_last_context != d.context) return false;
  if (c->local_peers.empty()) return true;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (const bcs::RankControl* p : c->local_peers)
    if (!bcs::segment_coll_covers(p->coll_posted.load(std::memory_order_acquire), d.context,
                                  d.seq))
      return false;
  return true;
}
}  // namespace

namespace {
// After `d` went into the ring: the collective word and the bells.
void post_published(Descriptor& d, bool goes_on) {
  auto& s = st();
  // After the head: a member that reads this word and rings finds our
  // descriptor in the ring.
  if (d.kind == DescKind::coll)
    s.view.ctl->coll_posted.store(bcs::segment_coll_word(d.context, d.seq),
                                  std::memory_order_release);
  // A parked strobe (nothing to do anywhere) wakes only when rung, and so
  // does a node on its lease for a send to one of its ranks that waits
  // (the send may be what that rank waits for) or for the last local post
  // of a collective its members go on computing with, or for work a
  // period's slice would do while it sleeps through the periods. The NM
  // sets the flag, then re-reads the rings; we publish the head, then read
  // the flag: with both fences one of us sees the other.
  // (Or, with kNmAsymmetricFence, the NM's membarrier stands in for ours;
  // kNmBellOnWork gets none, as a ring missed costs a few periods at most.)
  if (s.post_fence)
    std::atomic_thread_fence(std::memory_order_seq_cst);
  else
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler keeps the order
  const uint32_t nm = s.header->nm_flags.load(std::memory_order_relaxed);
  const bool work = (nm & bcs::kNmBellOnWork) && wakes_idle_node(d);
  if (work && !goes_on) s.work_owed = true;  // finish_blocking's wait rings
  if ((nm & bcs::kNmParked) ||
      ((nm & bcs::kNmBellOnPost) &&
       (d.kind == DescKind::coll ? goes_on && last_local_post(d) : send_to_waiting(d))) ||
      (work && goes_on)) {
    bcs::segment_ring_bell(&s.header->bell);
    // The node manager just woken is usually placed on this CPU, beside
    // its waker (to the kernel in this VM a halted vCPU looks busy, so an
    // idle one is passed over), and this rank goes on computing: the slice
    // then waited behind it, up to 600 us in bench/halo.c. Yielding once
    // hands it the CPU; with nothing else to run here it costs a system
    // call.
    sched_yield();
  }
}

// `d`, numbered, into one slot, sleeping while the ring is full; then
// published.
void post_numbered(Descriptor& d, bool goes_on) {
  auto& s = st();
  if (!bcs::ring_try_post(s.view, d, &s.ring_tail_seen)) [[unlikely]] {
    auto* ctl = s.view.ctl;
    const uint32_t slots = s.view.ring_slots;
    wait_until([&] {
      return ctl->head.load(std::memory_order_relaxed) -
                 ctl->tail.load(std::memory_order_acquire) <
             slots;
    });
    const bool ok = bcs::ring_try_post(s.view, d, &s.ring_tail_seen);
    (void)ok;  // single producer: space seen above cannot vanish
  }
  post_published(d, goes_on);
}
}  // namespace

bool post_eager(Descriptor& d, const void* src, size_t len, bool goes_on) {
  auto& s = st();
  if (s.slice_hooks) run_slice_hooks();
  d.seq = ++s.post_seq;
  d.flags = bcs::kDescInline;
  d.inline_len = static_cast<uint32_t>(len);
  if (bcs::ring_try_post_span(s.view, d, src, len, &s.ring_tail_seen)) {
    post_published(d, goes_on);
    return true;
  }
  d.flags = 0;
  d.inline_len = 0;
  post_numbered(d, goes_on);
  return false;
}

// Posts `d`, sleeping while the ring is full (the NM frees slots at every
// strobe and wakes waiting ranks). Nothing is ever dropped.
void post(Descriptor& d, bool goes_on) {
  auto& s = st();
  if (s.slice_hooks) run_slice_hooks();
  d.seq = d.kind == DescKind::coll ? d.seq : ++s.post_seq;
  post_numbered(d, goes_on);
}

// Waits for `idx`, copies its status, frees it; returns the request's error.
bcs_status_t finish_blocking(uint32_t idx, bcs_msg_status_t* out) {
  wait_until([&] { return slot_done(idx); });
  fill_status(idx, out);
  const auto err = static_cast<bcs_status_t>(slot(idx).error);
  release_slot(idx);
  return err;
}

}  // namespace bcs::rank_side
