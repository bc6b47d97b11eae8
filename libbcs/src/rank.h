// The rank side of the job segment, shared by the BCS API's files
// (api.cc: init, point-to-point, requests; coll.cc: collectives): the
// rank's state, its request slots, and the posting and waiting protocol
// with its node manager (the ring, the futex, the doorbell). Internal to
// libbcs.
//
// Threading: the MPI shim provides at most MPI_THREAD_SERIALIZED, so the
// rank-local state (free list, counters) needs no lock: calls never
// overlap, and the application's own serialisation orders memory between
// threads.
#pragma once

#include <sched.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "bcs/bcs.h"
#include "bcs/segment.h"

namespace bcs::rank_side {

using bcs::DescKind;
using bcs::Descriptor;
using bcs::ReqState;
using bcs::RequestSlot;

// A lost wake-up (which the protocol should make impossible) must never hang
// a rank forever: every futex sleep re-checks after this long.
constexpr uint64_t kWaitSliceNs = 100'000'000;

// Owns the mapping of the job's segment.
class Mapping {
 public:
  Mapping() = default;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping() { reset(); }

  bool map(int fd, size_t len) {
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return false;
    reset();
    base_ = p;
    len_ = len;
    return true;
  }
  void reset() {
    if (base_) munmap(base_, len_);
    base_ = nullptr;
    len_ = 0;
  }
  void* base() const { return base_; }

 private:
  void* base_ = nullptr;
  size_t len_ = 0;
};

// Keys whose latest non-blocking probe keeps its slot (see bcs_probe).
constexpr size_t kIprobeKeep = 64;

struct IprobeKey {
  int32_t source, tag, context;
  bool operator<(const IprobeKey& o) const {
    return std::tie(source, tag, context) < std::tie(o.source, o.tag, o.context);
  }
};

// A collective context as this rank knows it: the collectives it posted
// there and, once the members are known (the world at init, others when
// registered), the control blocks of the other members on this node, to
// tell whether a post is the last local one (kNmBellOnPost).
struct CollContext {
  uint64_t posted = 0;
  bool members_known = false;
  std::vector<const bcs::RankControl*> local_peers;
};

struct State {
  Mapping map;
  bcs::RankView view;
  bcs::SegmentHeader* header = nullptr;
  bcs::SegmentLayout layout;  // as the header gave it (checked at init)
  int32_t rank = 0;
  int32_t size = 0;
  uint32_t local = 0;  // this rank's index among the node's (segment_rank_view)
  uint64_t slice_ns = 0;
  uint64_t post_seq = 0;
  uint64_t ring_tail_seen = 0;  // the NM's ring tail as last read (ring_try_post)
  bool post_fence = true;       // false: kNmAsymmetricFence, and registered for it
  // Request slots. The table is large and sparse (segment.h,
  // kRequestSlots): slots [0, fresh) were handed out at least once, and the
  // freed ones among them wait in free_slots (LIFO: reuse hot slots, so a
  // program that keeps few requests touches few pages); a new one is taken
  // at `fresh` only when none is free. Slots [0, populated) are backed by
  // memory. `max_requests` is how many the rank may use: the table's size,
  // or fewer with BCS_MAX_REQUESTS in its environment.
  std::vector<uint32_t> free_slots;  // capacity >= fresh: release_slot never allocates
  uint32_t fresh = 0;
  uint32_t populated = 0;
  uint32_t max_requests = 0;
  // Per slot, what only this rank knows of its request: a send's
  // destination (for bcs_cancel), a receive's buffer and capacity (where the
  // bytes the node manager left in the slot's landing go, RequestSlot::landed).
  struct SlotInfo {
    int32_t send_dest = -1;
    void* recv_buf = nullptr;
    uint64_t recv_cap = 0;
  };
  std::vector<SlotInfo> slot_info;
  // Requests the program freed before they completed (bcs_request_free):
  // each is freed, and a receive's landed bytes copied, once it completes.
  std::vector<uint32_t> forgotten;
  std::vector<uint64_t> send_seq;                  // per world rank: sends posted to it
  // Per world rank: its control block if it runs on this node (null
  // otherwise), to see whether a send goes to a rank that waits
  // (kNmBellOnPost).
  std::vector<bcs::RankControl*> local_ctl;
  std::map<int32_t, CollContext> coll_ctx;         // per collective context
  // The last context's entry (map nodes never move): a program runs its
  // collectives on one communicator most of the time, and each post then
  // skips the tree walk. Reset with coll_ctx.
  int32_t coll_last_context = 0;
  CollContext* coll_last = nullptr;
  std::map<IprobeKey, uint32_t> iprobes;           // at most one outstanding per key
  // Receives and probes posted to the node manager and not yet seen done:
  // while one is open, a receive may not take from the unexpected shelf
  // (segment.h, Shelf), since the node manager may still match it first.
  std::vector<uint32_t> open_recvs;
  bcs_msg_observer_t observer = nullptr;           // bcs_set_msg_observer
  // Record and replay: a drain observer or a slice alarm is set (one branch
  // on the post and wait paths when neither is).
  bool slice_hooks = false;
  // How long a wait may spin while another local rank computes (0: never);
  // see wait_until.
  uint64_t wait_spin_ns = 0;
  // The last post was one a node sleeping through the periods wants to
  // hear of (kNmBellOnWork) and its caller waits for it now: the wait
  // rings instead of the post, one wake-up of the node, not two.
  bool work_owed = false;
  bcs_drain_observer_t drain_observer = nullptr;   // bcs_set_drain_observer
  uint64_t drain_tail = 0;                         // drain notes handed over
  uint64_t alarm_slice = 0;                        // bcs_set_slice_alarm
  bcs_slice_alarm_t alarm = nullptr;
  bool initialized = false;
};

// The rank's one state (calls never overlap: see the file comment). Inline:
// every call reaches it, and an inline function's static is one object.
inline State& st() {
  static State s;
  return s;
}


// ------------------------------------------------------------ request slots
// (The small ones inline: they sit on the post and wait paths.)
inline bool one_rank_context(int32_t context) {
  // MPI_COMM_SELF's point-to-point and collective contexts.
  return context == bcs::kContextSelf || context == bcs::kContextSelf + 1;
}
inline RequestSlot& slot(uint32_t idx) { return st().view.requests[idx]; }
// Copies what the node manager left in the landing of receive `idx` into
// the receive's buffer (RequestSlot::landed).
void take_landed(uint32_t idx);
// Frees the forgotten requests that are done, their landed bytes copied.
void sweep_forgotten();
// Whether request `idx` is done; a receive's landed bytes are in its buffer
// once this says so, and so are those of every forgotten receive the node
// manager completed before it (the program may know of those by this one).
inline bool slot_done(uint32_t idx) {
  RequestSlot& r = slot(idx);
  if (r.state.load(std::memory_order_acquire) != static_cast<uint32_t>(ReqState::done))
    return false;
  if (r.landed) take_landed(idx);
  if (!st().forgotten.empty()) [[unlikely]] sweep_forgotten();
  return true;
}
bool valid_request(bcs_request_t r);
// Whether a receive may take from the shelf now: none of this rank's
// receives or probes is still open (State::open_recvs). Entries leave from
// the top only, once they no longer name an open receive or probe (done,
// freed, or the slot reused for something else), so a call costs O(1)
// however many receives a program keeps posted; one below an open entry
// waits there until that one is done.
inline bool shelf_may_take() {
  auto& v = st().open_recvs;
  while (!v.empty()) {
    const RequestSlot& r = slot(v.back());
    const auto k = static_cast<DescKind>(r.kind);
    if (r.state.load(std::memory_order_acquire) == static_cast<uint32_t>(ReqState::pending) &&
        (k == DescKind::recv || k == DescKind::probe || k == DescKind::iprobe))
      return false;
    v.pop_back();
  }
  return true;
}
// A free request slot for a descriptor of `kind`, pending. BCS_OK, or
// BCS_ERR_NO_RESOURCES when max_requests are all in use (bcs_request_limit),
// or BCS_ERR_NO_MEM when memory for a new one ran out; nothing changes then.
bcs_status_t alloc_slot(DescKind kind, uint32_t* idx);
// How many slots alloc_slot populates at once past the hot ones: 64 KiB.
constexpr uint32_t kPopulateSlots = 1024;
void release_slot(uint32_t idx);
// Frees the slots of non-blocking probes the node manager has answered;
// returns how many.
size_t drop_answered_iprobes();
// Completion done by the rank itself (inline sends, one-member collectives,
// application bypass).
void complete_locally(uint32_t idx, uint64_t bytes);
void fill_status(uint32_t idx, bcs_msg_status_t* out);
void empty_status(bcs_msg_status_t* out);

// ------------------------------------------------------------ posting, waiting
// The drain notes so far to the drain observer; the slice alarm, if due.
void run_slice_hooks();
// Carries out the DMA helper's copy orders (segment.h, DmaOrder), oldest
// first, including any posted while it copies, unless taken back.
void take_dma_orders();
// Some copy order is posted for this rank.
bool dma_order_posted(const bcs::RankControl* ctl);

// The last local rank to block tells the node manager, which may then
// start the next slice at once (work-conserving strobe). Every rank sets
// its flag before it looks at the others (seq_cst), so of two ranks
// blocking together at least one sees both and rings. A node between
// slices of its lease (kNmBellOnAnyBlock) also starts one for a rank that
// starts waiting while a send to it is posted, or with a collective in its
// ring: the rank rings then, not on every wait. A rank that waits for a
// peer still computing (a halo exchange's first rank done) used to wake the
// node for nothing, on a core a rank computes on: a third of the node's
// wake-ups in bench/halo.c. `owed`: the call's own post asked for a ring
// (State::work_owed), which this wait makes instead. Returns whether it
// rang.
inline bool ring_if_blocked(bool owed = false) {
  auto& s = st();
  if (owed) {
    bcs::segment_ring_bell(&s.header->bell);
    return true;
  }
  const uint32_t nm = s.header->nm_flags.load(std::memory_order_relaxed);
  if (!(nm & (bcs::kNmBellOnBlock | bcs::kNmBellOnAnyBlock))) return false;
  if (bcs::segment_all_blocked(s.map.base(), s.layout) ||
      ((nm & bcs::kNmBellOnAnyBlock) &&
       bcs::segment_slice_for_waiter(s.map.base(), s.layout, s.local, s.rank))) {
    bcs::segment_ring_bell(&s.header->bell);
    return true;
  }
  return false;
}

// The spin wait_until may make (State::wait_spin_ns) on a node of
// `nlocal` ranks: kWaitSpinNs when this rank runs on a CPU of its own (the
// node manager binds ranks to cores when they do not outnumber the CPUs)
// and the node has no more ranks than CPUs, else 0; BCS_WAIT_SPIN=off in
// the rank's environment turns it off.
uint64_t wait_spin_ns(uint32_t nlocal);
constexpr uint64_t kWaitSpinNs = 200'000;

// Sleeps on the rank's futex until `ready()` holds. The order (announce
// `waiting`, re-check, sleep on `waiting` only while it is still raised:
// rank_announce_wait, rank_sleep) pairs with rank_wake() in the NM: a
// completion that lands after the re-check clears the flag, so the futex
// refuses to sleep, or wakes it.
//
// The DMA helper may hand a waiting rank a copy (segment.h, DmaOrder). A
// rank copying for the runtime still waits in MPI, so it stays `waiting`
// meanwhile and rings as a rank that blocks does: the strobe may go on
// (the DMA helper's copies ahead run while the next slice begins) instead
// of holding the slice for a rank that only looks busy.
//
// Before it sleeps, a rank on a core of its own spins a little (at most
// kWaitSpinNs): what it waits for then usually comes with the next slice,
// and a rank that spins is completed without the wake-up of a sleeping
// thread (18-40 us here: an interrupt to another vCPU, the most when that
// vCPU is halted), twice per step of a blocking halo exchange.
//
// Between the slices of a one-node lease (kNmBellOnAnyBlock) the strobe
// receiver is the only daemon thread the job's slices wake, and a rank's
// ring is what wakes it. There the rank spins also when every local rank
// waits and when its own wait rang, and gives the CPU away instead of
// keeping it: it yields once after each ring it makes, and once whenever it
// sees another rank's (the bell's word changed), so a strobe receiver woken
// onto this CPU runs at once even at normal priority. Sleeping instead, as
// it did, left the slice's completion a cross-CPU wake-up of a halted vCPU
// (40 us): an 8-byte ping-pong took 24-26 us per message against 12-13 us,
// a 2-rank 8-byte MPI_Allreduce 61-77 against 23-29 us, a 64 KiB ping-pong
// 46-67 against 19-23 us (1 NM, 3 alternating runs). Without a lease (the
// manager's strobe, a job on several node managers) a slice also wakes the
// doorbell thread, UCX's and the strobe sender, on whichever CPU the kernel
// picks: the rank then stops as soon as every local rank waits, and does
// not spin at all when its own wait rang (spinning there doubled the
// 8-byte ping-pong on two node managers, 100 to 160 us).
struct WaitSpinRule {
  bool after_ring;          // spin although this wait rang the bell
  bool stop_when_all_wait;  // stop as soon as every local rank waits
  bool yield_on_ring;       // yield once after its own ring and at each ring seen
};
// The rule for the node's flags (SegmentHeader::nm_flags): on a one-node
// lease (kNmBellOnAnyBlock) or not.
constexpr WaitSpinRule wait_spin_rule(uint32_t nm_flags) {
  const bool lease = nm_flags & bcs::kNmBellOnAnyBlock;
  return {lease, !lease, lease};
}

template <typename Pred>
void wait_until(Pred ready) {
  auto& s = st();
  auto* ctl = s.view.ctl;
  // The spin rang the bell for this wait and the flag stayed up throughout
  // (nobody woke the rank): whoever blocked or posted to it since saw it
  // waiting and rang if that started a slice, so the first sleep below
  // need not ring again.
  bool rang = false;
  bool owed = std::exchange(s.work_owed, false);
  if (s.wait_spin_ns && !ready()) {
    ctl->waiting.store(1, std::memory_order_seq_cst);
    const WaitSpinRule rule = wait_spin_rule(s.header->nm_flags.load(std::memory_order_relaxed));
    const bool rang_now = ring_if_blocked(std::exchange(owed, false));
    // The rings after this one make the spin below yield.
    uint32_t bell = s.header->bell.load(std::memory_order_relaxed);
    if (rang_now && rule.yield_on_ring) sched_yield();
    timespec t0{}, t{};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (uint32_t i = 0; (rule.after_ring || !rang_now) && !ready() && !dma_order_posted(ctl);
         ++i) {
      __builtin_ia32_pause();
      if (i % 64) continue;
      if (rule.yield_on_ring) {
        const uint32_t b = s.header->bell.load(std::memory_order_relaxed);
        if (b != bell) {
          bell = b;
          sched_yield();
        }
      }
      if (rule.stop_when_all_wait && bcs::segment_all_blocked(s.map.base(), s.layout)) break;
      clock_gettime(CLOCK_MONOTONIC, &t);
      const int64_t ns = (t.tv_sec - t0.tv_sec) * 1'000'000'000LL + (t.tv_nsec - t0.tv_nsec);
      if (ns > static_cast<int64_t>(s.wait_spin_ns)) break;
    }
    rang = ctl->waiting.load(std::memory_order_seq_cst) == 1;
    if (ready()) {
      ctl->waiting.store(0, std::memory_order_relaxed);
      return;
    }
  }
  while (!ready()) {
    bcs::rank_announce_wait(*ctl);
    if (ready()) {
      ctl->waiting.store(0, std::memory_order_relaxed);
      break;
    }
    if (!std::exchange(rang, false)) ring_if_blocked(std::exchange(owed, false));
    // Looked at after `waiting` is set: an order posted later wakes the
    // rank (clearing the flag), so the sleep below returns at once.
    if (dma_order_posted(ctl)) {
      take_dma_orders();
      ctl->waiting.store(0, std::memory_order_relaxed);
      continue;
    }
    bcs::rank_sleep(*ctl, kWaitSliceNs);
    // Woken for an order (rank_wake cleared `waiting`): taken even if
    // ready() now holds, or the helper would wait to take it back.
    if (dma_order_posted(ctl)) {
      ctl->waiting.store(1, std::memory_order_seq_cst);
      ring_if_blocked();
      take_dma_orders();
    }
    ctl->waiting.store(0, std::memory_order_relaxed);
    if (st().slice_hooks) run_slice_hooks();
  }
}

// A polling caller (MPI_Test / MPI_Iprobe loops) found nothing: give the CPU
// to the node manager, which may share it with us.
void polled_nothing();
// Posts `d`, sleeping while the ring is full (the NM frees slots at every
// strobe and wakes waiting ranks). Nothing is ever dropped. `goes_on`: the
// caller does not wait for it now (non-blocking, or a collective completed
// by the rank itself). Such a collective's last local post rings on a
// lease, and so does, while the node sleeps through the periods, a post
// that a slice would serve; a caller that blocks rings from its wait.
void post(Descriptor& d, bool goes_on = false);
// post() for an eager send (segment.h, kInlineSpanMax): `d` is posted
// inline with the `len` bytes at `src` when the ring has room for its
// span. Otherwise it goes as an ordinary send (its inline flag cleared)
// after all: a span never waits for room. Returns whether it went inline.
bool post_eager(Descriptor& d, const void* src, size_t len, bool goes_on);
inline Descriptor make_desc(DescKind kind, int32_t context, int32_t peer, int32_t tag) {
  Descriptor d;
  std::memset(&d, 0, offsetof(Descriptor, payload));
  d.kind = kind;
  d.context = context;
  d.peer = peer;
  d.tag = tag;
  return d;
}
// Waits for `idx`, copies its status, frees it; returns the request's error.
bcs_status_t finish_blocking(uint32_t idx, bcs_msg_status_t* out);

}  // namespace bcs::rank_side
