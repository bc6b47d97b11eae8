// The BCS API (Table 4.1), rank side: every call fills a descriptor, posts it
// into this rank's ring in the job's shared segment and, if blocking, sleeps
// on the rank's futex until the node manager completes the request. The
// only work done here besides posting is completing inline sends (the bytes
// already travel inside the descriptor, so the user buffer is free at once).
//
// Threading: the MPI shim provides at most MPI_THREAD_SERIALIZED, so the
// rank-local state below (free list, counters) needs no lock: calls never
// overlap, and the application's own serialisation orders memory between
// threads.
#include "bcs/bcs.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "bcs/segment.h"

namespace {

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

struct State {
  Mapping map;
  bcs::RankView view;
  bcs::SegmentHeader* header = nullptr;
  bcs::SegmentLayout layout;  // as the header gave it (checked at init)
  int32_t rank = 0;
  int32_t size = 0;
  uint64_t slice_ns = 0;
  uint64_t post_seq = 0;
  std::vector<uint32_t> free_slots;                // LIFO: reuse hot slots
  std::vector<int32_t> send_dest;                  // per slot: the destination of a send
  std::vector<uint64_t> send_seq;                  // per world rank: sends posted to it
  std::map<int32_t, uint64_t> coll_count;          // collectives posted, per context
  std::map<IprobeKey, uint32_t> iprobes;           // at most one outstanding per key
  bool initialized = false;
};

State& st() {
  static State s;
  return s;
}

// ------------------------------------------------------------ helpers

bool parse_long(const char* s, long min, long max, long* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno || *end || v < min || v > max) return false;
  *out = v;
  return true;
}

bool one_rank_context(int32_t context) {
  // MPI_COMM_SELF's point-to-point and collective contexts.
  return context == bcs::kContextSelf || context == bcs::kContextSelf + 1;
}

RequestSlot& slot(uint32_t idx) { return st().view.requests[idx]; }

bool slot_done(uint32_t idx) {
  return slot(idx).state.load(std::memory_order_acquire) == static_cast<uint32_t>(ReqState::done);
}

bool valid_request(bcs_request_t r) {
  auto& s = st();
  return r >= 0 && static_cast<uint32_t>(r) < s.view.request_slots &&
         slot(static_cast<uint32_t>(r)).state.load(std::memory_order_acquire) !=
             static_cast<uint32_t>(ReqState::free);
}

size_t drop_answered_iprobes();

bool alloc_slot(DescKind kind, uint32_t* idx) {
  auto& s = st();
  if (s.free_slots.empty() && drop_answered_iprobes() == 0) return false;
  *idx = s.free_slots.back();
  s.free_slots.pop_back();
  RequestSlot& r = slot(*idx);
  r.error = 0;
  r.source = 0;
  r.tag = 0;
  r.bytes = 0;
  r.found = 0;
  r.kind = static_cast<uint32_t>(kind);
  // The NM only looks at a slot after the descriptor naming it was published
  // by the ring's release store, so relaxed is enough here.
  r.state.store(static_cast<uint32_t>(ReqState::pending), std::memory_order_relaxed);
  return true;
}

void release_slot(uint32_t idx) {
  slot(idx).state.store(static_cast<uint32_t>(ReqState::free), std::memory_order_relaxed);
  st().free_slots.push_back(idx);
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
}

void empty_status(bcs_msg_status_t* out) {
  if (!out) return;
  out->source = BCS_ANY_SOURCE;
  out->tag = BCS_ANY_TAG;
  out->bytes = 0;
  out->error = BCS_OK;
}

// Sleeps on the rank's futex until `ready()` holds. The order (read
// wake_seq, announce `waiting`, re-check, sleep only if wake_seq is unchanged)
// pairs with rank_wake() in the NM: a completion that lands after the
// re-check changes wake_seq, so the futex refuses to sleep.
template <typename Pred>
void wait_until(Pred ready) {
  auto* ctl = st().view.ctl;
  while (!ready()) {
    const uint32_t seen = ctl->wake_seq.load(std::memory_order_acquire);
    ctl->waiting.store(1, std::memory_order_seq_cst);
    if (ready()) {
      ctl->waiting.store(0, std::memory_order_relaxed);
      break;
    }
    // The last local rank to block tells the node manager, which may then
    // start the next slice at once (work-conserving strobe). Every rank sets
    // its flag before it looks at the others (seq_cst), so of two ranks
    // blocking together at least one sees both and rings.
    auto& s = st();
    if ((s.header->nm_flags.load(std::memory_order_relaxed) & bcs::kNmBellOnBlock) &&
        bcs::segment_all_blocked(s.map.base(), s.layout))
      bcs::segment_ring_bell(&s.header->bell);
    bcs::futex_wait(&ctl->wake_seq, seen, kWaitSliceNs);
    ctl->waiting.store(0, std::memory_order_relaxed);
  }
}

// A polling caller (MPI_Test / MPI_Iprobe loops) found nothing: give the CPU
// to the node manager, which may share it with us.
void polled_nothing() { sched_yield(); }

// Posts `d`, sleeping while the ring is full (the NM frees slots at every
// strobe and wakes waiting ranks). Nothing is ever dropped.
void post(Descriptor& d) {
  auto& s = st();
  d.seq = d.kind == DescKind::coll ? d.seq : ++s.post_seq;
  if (bcs::ring_try_post(s.view, d)) {
    // A parked strobe (nothing to do anywhere) wakes only when rung. The NM
    // sets kNmParked, then re-reads the rings; we publish the head, then
    // read the flag: with both fences one of us sees the other.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (s.header->nm_flags.load(std::memory_order_relaxed) & bcs::kNmParked)
      bcs::segment_ring_bell(&s.header->bell);
    return;
  }
  auto* ctl = s.view.ctl;
  const uint32_t slots = s.view.ring_slots;
  wait_until([&] {
    return ctl->head.load(std::memory_order_relaxed) - ctl->tail.load(std::memory_order_acquire) <
           slots;
  });
  const bool ok = bcs::ring_try_post(s.view, d);
  (void)ok;  // single producer: space seen above cannot vanish
}

Descriptor make_desc(DescKind kind, int32_t context, int32_t peer, int32_t tag) {
  Descriptor d;
  std::memset(&d, 0, offsetof(Descriptor, payload));
  d.kind = kind;
  d.context = context;
  d.peer = peer;
  d.tag = tag;
  return d;
}

// Waits for `idx`, copies its status, frees it; returns the request's error.
bcs_status_t finish_blocking(uint32_t idx, bcs_msg_status_t* out) {
  wait_until([&] { return slot_done(idx); });
  fill_status(idx, out);
  const auto err = static_cast<bcs_status_t>(slot(idx).error);
  release_slot(idx);
  return err;
}

bool valid_peer(int32_t p, bool allow_any) {
  return (p >= 0 && p < st().size) || (allow_any && p == BCS_ANY_SOURCE);
}

bool valid_tag(int32_t t, bool allow_any) { return t >= 0 || (allow_any && t == BCS_ANY_TAG); }

}  // namespace

// ---------------------------------------------------------------- API

extern "C" {

bcs_status_t bcs_init(void) {
  auto& s = st();
  if (s.initialized) return BCS_OK;
  const char* fd_env = std::getenv("BCS_SEGMENT_FD");
  if (!fd_env) return BCS_ERR_NOT_INIT;
  long fd = -1, local = -1, rank = -1, size = -1;
  if (!parse_long(fd_env, 0, INT32_MAX, &fd) ||
      !parse_long(std::getenv("BCS_LOCAL_INDEX"), 0, INT32_MAX, &local) ||
      !parse_long(std::getenv("BCS_RANK"), 0, INT32_MAX, &rank) ||
      !parse_long(std::getenv("BCS_SIZE"), 1, INT32_MAX, &size) || rank >= size)
    return BCS_ERR_ARG;

  struct stat sb{};
  if (fstat(static_cast<int>(fd), &sb) != 0 ||
      static_cast<size_t>(sb.st_size) < sizeof(bcs::SegmentHeader))
    return BCS_ERR_INTERNAL;
  if (!s.map.map(static_cast<int>(fd), static_cast<size_t>(sb.st_size))) return BCS_ERR_INTERNAL;
  // The mapping keeps the memfd alive; dropping the fd now means a rank's
  // children (exec'd helpers) never inherit it.
  close(static_cast<int>(fd));
  unsetenv("BCS_SEGMENT_FD");

  auto* h = static_cast<bcs::SegmentHeader*>(s.map.base());
  bcs::SegmentLayout l{h->nlocal, h->ring_slots, h->request_slots};
  const bool ok = h->magic == bcs::kSegmentMagic && h->version == bcs::kSegmentVersion &&
                  h->world_size == static_cast<uint32_t>(size) && h->nlocal > 0 &&
                  static_cast<uint32_t>(local) < h->nlocal && h->ring_slots > 0 &&
                  (h->ring_slots & (h->ring_slots - 1)) == 0 && h->request_slots > 0 &&
                  h->request_slots <= static_cast<uint32_t>(INT32_MAX) &&
                  l.total_bytes() <= static_cast<size_t>(sb.st_size);
  if (!ok) {
    s.map.reset();
    return BCS_ERR_INTERNAL;
  }
  s.view = bcs::segment_rank_view(s.map.base(), static_cast<uint32_t>(local));
  if (s.view.ctl->world_rank != static_cast<int32_t>(rank)) {
    s.map.reset();
    s.view = {};
    return BCS_ERR_INTERNAL;
  }
  s.header = h;
  s.layout = l;
  s.rank = static_cast<int32_t>(rank);
  s.size = static_cast<int32_t>(size);
  s.slice_ns = h->slice_ns;
  s.post_seq = 0;
  s.coll_count.clear();
  s.iprobes.clear();
  s.free_slots.clear();
  s.free_slots.reserve(s.view.request_slots);
  s.send_dest.assign(s.view.request_slots, -1);
  s.send_seq.assign(static_cast<size_t>(s.size), 0);
  for (uint32_t i = s.view.request_slots; i-- > 0;) {
    s.free_slots.push_back(i);  // slot 0 on top
    slot(i).state.store(static_cast<uint32_t>(ReqState::free), std::memory_order_relaxed);
  }
  s.view.ctl->mpi_state.store(static_cast<uint32_t>(bcs::MpiState::initialized),
                              std::memory_order_release);
  s.initialized = true;
  return BCS_OK;
}

int bcs_initialized(void) { return st().initialized ? 1 : 0; }

bcs_status_t bcs_finalize(void) {
  auto& s = st();
  if (!s.initialized) return BCS_ERR_NOT_INIT;
  s.view.ctl->mpi_state.store(static_cast<uint32_t>(bcs::MpiState::finalized),
                              std::memory_order_release);
  s.map.reset();
  s.view = {};
  s.header = nullptr;
  s.free_slots.clear();
  s.iprobes.clear();
  s.coll_count.clear();
  s.initialized = false;
  return BCS_OK;
}

namespace {
[[noreturn]] void abort_with(int code, uint32_t how) {
  auto& s = st();
  if (s.initialized) {
    s.view.ctl->abort_code.store(code, std::memory_order_relaxed);
    s.view.ctl->aborted.store(how, std::memory_order_release);
  }
  // Whatever the program printed must not be lost with the process.
  std::fflush(nullptr);
  int status = code & 0xff;
  _exit(status ? status : 1);
}
}  // namespace

void bcs_abort(int code) { abort_with(code, bcs::kAbortedByRank); }
void bcs_abort_noticed(int code) { abort_with(code, bcs::kAbortedNoticingPeer); }

int32_t bcs_world_rank(void) { return st().initialized ? st().rank : 0; }
int32_t bcs_world_size(void) { return st().initialized ? st().size : 1; }
uint64_t bcs_slice_ns(void) { return st().initialized ? st().slice_ns : 0; }

namespace {

void put_layout(Descriptor* d, const bcs_layout_t* l) {
  static_assert(sizeof(bcs::LayoutBlock) == sizeof(bcs_block_t));
  bcs::LayoutRef ref{reinterpret_cast<uintptr_t>(l->blocks), l->nblocks, l->count, l->extent};
  std::memcpy(d->payload, &ref, sizeof ref);
}

// The packed size of a layout the caller passes, false if it is not one
// the node managers accept (layout.h checks the same on their side).
bool layout_bytes(const bcs_layout_t* l, size_t* bytes) {
  if (!l || !l->blocks || l->nblocks == 0 || l->nblocks > bcs::kLayoutMaxBlocks) return false;
  uint64_t size = 0;
  for (uint32_t i = 0; i < l->nblocks; ++i) {
    if (l->blocks[i].len == 0 || l->blocks[i].len > (uint64_t{1} << 40)) return false;
    size += l->blocks[i].len;
  }
  if (size > (uint64_t{1} << 40) || (l->count && size > (uint64_t{1} << 46) / l->count))
    return false;
  *bytes = static_cast<size_t>(size * l->count);
  return true;
}

// `layout` null: `len` contiguous bytes at buf; else the layout at buf.
bcs_status_t send_impl(const void* buf, size_t len, const bcs_layout_t* layout, int32_t dest,
                       int32_t tag, int32_t context, bcs_mode_t mode, bcs_request_t* req,
                       bool sync) {
  if (!st().initialized) return BCS_ERR_NOT_INIT;
  if (layout && !layout_bytes(layout, &len)) return BCS_ERR_ARG;
  if ((!buf && len && !layout) || !valid_peer(dest, false) || !valid_tag(tag, false) ||
      (mode == BCS_NONBLOCKING && !req))
    return BCS_ERR_ARG;
  uint32_t idx;
  if (!alloc_slot(DescKind::send, &idx)) return BCS_ERR_NO_RESOURCES;
  Descriptor d = make_desc(DescKind::send, context, dest, tag);
  d.request = idx;
  d.addr = reinterpret_cast<uintptr_t>(buf);
  d.len = len;
  st().send_dest[idx] = dest;  // for bcs_cancel
  // The node manager numbers each rank's sends per destination the same way
  // (SendDesc::pair_seq): the number names an inline send to bcs_cancel_sent.
  ++st().send_seq[static_cast<size_t>(dest)];
  // A synchronous send must not complete before it is matched, so it never
  // takes the inline shortcut (which completes at post).
  const bool inl = !sync && len <= bcs::kInlineMax;
  if (inl) {
    d.flags = bcs::kDescInline;
    d.inline_len = static_cast<uint32_t>(len);
    if (layout) {  // a few bytes: gathered here, like any inline send
      size_t at = 0;
      for (uint32_t i = 0; i < layout->count; ++i)
        for (uint32_t b = 0; b < layout->nblocks; ++b) {
          const bcs_block_t& blk = layout->blocks[b];
          std::memcpy(d.payload + at,
                      static_cast<const unsigned char*>(buf) + i * layout->extent + blk.disp,
                      blk.len);
          at += blk.len;
        }
    } else if (len) {
      std::memcpy(d.payload, buf, len);
    }
  } else if (layout) {
    d.flags = bcs::kDescLayout;
    put_layout(&d, layout);
  }
  post(d);
  // Inline: the bytes are in the ring, the user buffer is reusable now.
  if (inl) complete_locally(idx, len);
  if (mode == BCS_NONBLOCKING) {
    *req = static_cast<bcs_request_t>(idx);
    return BCS_OK;
  }
  return finish_blocking(idx, nullptr);
}

bcs_status_t recv_impl(void* buf, size_t cap, const bcs_layout_t* layout, int32_t source,
                       int32_t tag, int32_t context, bcs_mode_t mode, bcs_request_t* req,
                       bcs_msg_status_t* out) {
  if (!st().initialized) return BCS_ERR_NOT_INIT;
  if (layout && !layout_bytes(layout, &cap)) return BCS_ERR_ARG;
  if ((!buf && cap && !layout) || !valid_peer(source, true) || !valid_tag(tag, true) ||
      (mode == BCS_NONBLOCKING && !req))
    return BCS_ERR_ARG;
  uint32_t idx;
  if (!alloc_slot(DescKind::recv, &idx)) return BCS_ERR_NO_RESOURCES;
  Descriptor d = make_desc(DescKind::recv, context, source, tag);
  d.request = idx;
  d.addr = reinterpret_cast<uintptr_t>(buf);
  d.len = cap;
  if (layout && cap) {
    d.flags = bcs::kDescLayout;
    put_layout(&d, layout);
  }
  post(d);
  if (mode == BCS_NONBLOCKING) {
    *req = static_cast<bcs_request_t>(idx);
    return BCS_OK;
  }
  return finish_blocking(idx, out);
}

}  // namespace

bcs_status_t bcs_send(const void* buf, size_t len, int32_t dest, int32_t tag, int32_t context,
                      bcs_mode_t mode, bcs_request_t* req) {
  return send_impl(buf, len, nullptr, dest, tag, context, mode, req, false);
}

bcs_status_t bcs_ssend(const void* buf, size_t len, int32_t dest, int32_t tag, int32_t context,
                       bcs_mode_t mode, bcs_request_t* req) {
  return send_impl(buf, len, nullptr, dest, tag, context, mode, req, true);
}

bcs_status_t bcs_send_layout(const void* base, const bcs_layout_t* layout, int32_t dest,
                             int32_t tag, int32_t context, int sync, bcs_mode_t mode,
                             bcs_request_t* req) {
  if (!layout) return BCS_ERR_ARG;
  return send_impl(base, 0, layout, dest, tag, context, mode, req, sync != 0);
}

bcs_status_t bcs_recv(void* buf, size_t cap, int32_t source, int32_t tag, int32_t context,
                      bcs_mode_t mode, bcs_request_t* req, bcs_msg_status_t* out) {
  return recv_impl(buf, cap, nullptr, source, tag, context, mode, req, out);
}

bcs_status_t bcs_recv_layout(void* base, const bcs_layout_t* layout, int32_t source, int32_t tag,
                             int32_t context, bcs_mode_t mode, bcs_request_t* req,
                             bcs_msg_status_t* out) {
  if (!layout) return BCS_ERR_ARG;
  return recv_impl(base, 0, layout, source, tag, context, mode, req, out);
}

bcs_status_t bcs_probe(int32_t source, int32_t tag, int32_t context, bcs_mode_t mode, int* flag,
                       bcs_msg_status_t* out) {
  auto& s = st();
  if (!s.initialized) return BCS_ERR_NOT_INIT;
  if (!valid_peer(source, true) || !valid_tag(tag, true) || (mode == BCS_NONBLOCKING && !flag))
    return BCS_ERR_ARG;
  if (mode == BCS_BLOCKING) {
    uint32_t idx;
    if (!alloc_slot(DescKind::probe, &idx)) return BCS_ERR_NO_RESOURCES;
    Descriptor d = make_desc(DescKind::probe, context, source, tag);
    d.request = idx;
    post(d);
    if (flag) *flag = 1;
    return finish_blocking(idx, out);
  }

  // Non-blocking: the answer is the one the NM gave to the previous iprobe
  // with the same arguments (at most one is outstanding per key, so a
  // polling loop costs one descriptor per MSM, not one per call).
  *flag = 0;
  const IprobeKey key{source, tag, context};
  auto it = s.iprobes.find(key);
  if (it != s.iprobes.end()) {
    const uint32_t idx = it->second;
    if (!slot_done(idx)) {
      polled_nothing();
      return BCS_OK;
    }
    const bool found = slot(idx).found != 0;
    const auto err = static_cast<bcs_status_t>(slot(idx).error);
    if (found || err != BCS_OK) {
      fill_status(idx, out);
      release_slot(idx);
      s.iprobes.erase(it);
      if (err != BCS_OK) return err;
      *flag = 1;
      return BCS_OK;
    }
    release_slot(idx);
    s.iprobes.erase(it);
  }
  // Each key polled keeps one slot for its next answer. A program probing
  // many distinct (source, tag) pairs must not fill the request table with
  // them: past kIprobeKeep keys, or when the table is full, answered probes
  // of other keys give their slots back (their next Iprobe asks afresh and
  // answers one MSM later: MPI lets an Iprobe say no, not forever).
  if (s.iprobes.size() >= kIprobeKeep) drop_answered_iprobes();
  uint32_t idx;
  if (!alloc_slot(DescKind::iprobe, &idx)) return BCS_ERR_NO_RESOURCES;
  Descriptor d = make_desc(DescKind::iprobe, context, source, tag);
  d.request = idx;
  post(d);
  s.iprobes.emplace(key, idx);
  polled_nothing();
  return BCS_OK;
}

bcs_status_t bcs_cancel(bcs_request_t req) {
  auto& s = st();
  if (!s.initialized) return BCS_ERR_NOT_INIT;
  if (req < 0 || static_cast<uint32_t>(req) >= s.view.request_slots) return BCS_ERR_ARG;
  const RequestSlot& r = slot(static_cast<uint32_t>(req));
  const bool send = r.kind == static_cast<uint32_t>(DescKind::send);
  if (!send && r.kind != static_cast<uint32_t>(DescKind::recv)) return BCS_ERR_ARG;
  if (slot_done(static_cast<uint32_t>(req))) return BCS_OK;  // too late: nothing to do
  Descriptor d = make_desc(DescKind::cancel, 0, send ? s.send_dest[req] : 0, 0);
  d.request = static_cast<uint32_t>(req);
  if (send) d.flags = bcs::kDescCancelSend;
  post(d);
  return BCS_OK;
}

uint64_t bcs_send_seq(int32_t dest) {
  const auto& s = st();
  if (!s.initialized || !valid_peer(dest, false)) return 0;
  return s.send_seq[static_cast<size_t>(dest)];
}

bcs_status_t bcs_cancel_sent(int32_t dest, uint64_t seq, bcs_request_t* ticket) {
  auto& s = st();
  if (!s.initialized) return BCS_ERR_NOT_INIT;
  if (!ticket || !valid_peer(dest, false) || seq == 0 ||
      seq > s.send_seq[static_cast<size_t>(dest)])
    return BCS_ERR_ARG;
  uint32_t idx;
  if (!alloc_slot(DescKind::cancel, &idx)) return BCS_ERR_NO_RESOURCES;
  Descriptor d = make_desc(DescKind::cancel, 0, dest, 0);
  d.request = idx;
  d.addr = seq;
  d.flags = bcs::kDescCancelSend | bcs::kDescCancelInline;
  post(d);
  *ticket = static_cast<bcs_request_t>(idx);
  return BCS_OK;
}

bcs_status_t bcs_test(bcs_request_t* req, bcs_mode_t mode, int* flag, bcs_msg_status_t* out) {
  if (!st().initialized) return BCS_ERR_NOT_INIT;
  if (!req) return BCS_ERR_ARG;
  if (*req == BCS_REQUEST_NULL) {
    if (flag) *flag = 1;
    empty_status(out);
    return BCS_OK;
  }
  if (!valid_request(*req)) return BCS_ERR_ARG;
  const auto idx = static_cast<uint32_t>(*req);
  if (mode == BCS_NONBLOCKING && !slot_done(idx)) {
    if (flag) *flag = 0;
    polled_nothing();
    return BCS_OK;
  }
  const bcs_status_t err = finish_blocking(idx, out);
  *req = BCS_REQUEST_NULL;
  if (flag) *flag = 1;
  return err;
}

bcs_status_t bcs_testall(int n, bcs_request_t* reqs, bcs_mode_t mode, int* flag,
                         bcs_msg_status_t* sts) {
  if (!st().initialized) return BCS_ERR_NOT_INIT;
  if (n < 0 || (n > 0 && !reqs)) return BCS_ERR_ARG;
  for (int i = 0; i < n; ++i)
    if (reqs[i] != BCS_REQUEST_NULL && !valid_request(reqs[i])) return BCS_ERR_ARG;
  auto all_done = [&] {
    for (int i = 0; i < n; ++i)
      if (reqs[i] != BCS_REQUEST_NULL && !slot_done(static_cast<uint32_t>(reqs[i]))) return false;
    return true;
  };
  if (mode == BCS_NONBLOCKING) {
    if (!all_done()) {
      if (flag) *flag = 0;
      polled_nothing();
      return BCS_OK;
    }
  } else {
    wait_until(all_done);
  }
  bcs_status_t first_err = BCS_OK;
  for (int i = 0; i < n; ++i) {
    bcs_msg_status_t* o = sts ? &sts[i] : nullptr;
    if (reqs[i] == BCS_REQUEST_NULL) {
      empty_status(o);
      continue;
    }
    const auto idx = static_cast<uint32_t>(reqs[i]);
    fill_status(idx, o);
    const auto err = static_cast<bcs_status_t>(slot(idx).error);
    if (err != BCS_OK && first_err == BCS_OK) first_err = err;
    release_slot(idx);
    reqs[i] = BCS_REQUEST_NULL;
  }
  if (flag) *flag = 1;
  return first_err;
}

bcs_status_t bcs_testany(int n, bcs_request_t* reqs, bcs_mode_t mode, int* index, int* flag,
                         bcs_msg_status_t* out) {
  if (!st().initialized) return BCS_ERR_NOT_INIT;
  if (n < 0 || (n > 0 && !reqs) || !index) return BCS_ERR_ARG;
  bool any_active = false;
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == BCS_REQUEST_NULL) continue;
    if (!valid_request(reqs[i])) return BCS_ERR_ARG;
    any_active = true;
  }
  *index = -1;
  if (!any_active) {
    if (flag) *flag = 1;
    empty_status(out);
    return BCS_OK;
  }
  int found = -1;
  auto pick = [&] {
    for (int i = 0; i < n; ++i) {
      if (reqs[i] != BCS_REQUEST_NULL && slot_done(static_cast<uint32_t>(reqs[i]))) {
        found = i;
        return true;
      }
    }
    return false;
  };
  if (mode == BCS_NONBLOCKING) {
    if (!pick()) {
      if (flag) *flag = 0;
      polled_nothing();
      return BCS_OK;
    }
  } else {
    wait_until(pick);
  }
  const bcs_status_t err = finish_blocking(static_cast<uint32_t>(reqs[found]), out);
  reqs[found] = BCS_REQUEST_NULL;
  *index = found;
  if (flag) *flag = 1;
  return err;
}

bcs_status_t bcs_barrier(int32_t context, bcs_mode_t mode, bcs_request_t* req) {
  bcs_coll_args_t a{};
  a.kind = BCS_COLL_BARRIER;
  a.context = context;
  a.comm_size = one_rank_context(context) ? 1 : st().size;
  return bcs_coll(&a, mode, req);
}

}  // extern "C"

namespace {

bool rooted(bcs_coll_t k) {
  switch (k) {
    case BCS_COLL_BCAST:
    case BCS_COLL_GATHER:
    case BCS_COLL_GATHERV:
    case BCS_COLL_SCATTER:
    case BCS_COLL_SCATTERV:
    case BCS_COLL_REDUCE:
      return true;
    default:
      return false;
  }
}

bool is_reduction(bcs_coll_t k) {
  return k == BCS_COLL_REDUCE || k == BCS_COLL_ALLREDUCE || k == BCS_COLL_REDUCE_SCATTER ||
         k == BCS_COLL_SCAN || k == BCS_COLL_EXSCAN;
}

// Arguments that can be checked without the other members.
bool coll_args_valid(const bcs_coll_args_t* a) {
  if (!a || a->kind < BCS_COLL_BARRIER || a->kind > BCS_COLL_EXSCAN || a->comm_size < 1)
    return false;
  if (rooted(a->kind) && (a->root < 0 || a->root >= a->comm_size)) return false;
  if (is_reduction(a->kind)) {
    const size_t es = bcs_dtype_size(a->dtype);
    if (!es || !bcs_op_supported(a->op, a->dtype)) return false;
    if (a->count > UINT64_MAX / es) return false;
  }
  // Arrays every member needs whatever its role (a root's arrays of
  // GATHERV/SCATTERV are checked by the node manager, which reads them).
  if (a->kind == BCS_COLL_REDUCE_SCATTER && !a->rcounts) return false;
  if ((a->kind == BCS_COLL_ALLGATHERV || a->kind == BCS_COLL_ALLTOALLV) &&
      (!a->rcounts || !a->rdispls))
    return false;
  if (a->kind == BCS_COLL_ALLTOALLV && (!a->scounts || !a->sdispls)) return false;
  return true;
}

uint64_t vec_at(const uint64_t* v, int i) { return v ? v[i] : 0; }

}  // namespace

extern "C" {

bcs_status_t bcs_coll_local(const bcs_coll_args_t* a) {
  if (!coll_args_valid(a) || a->comm_size != 1) return BCS_ERR_ARG;
  const auto* sb = static_cast<const uint8_t*>(a->sendbuf);
  auto* rb = static_cast<uint8_t*>(a->recvbuf);
  const bool in_place = (a->flags & BCS_COLL_IN_PLACE) != 0;
  // memmove: MPI_IN_PLACE maps sendbuf onto recvbuf for several kinds.
  auto copy = [](uint8_t* to, const uint8_t* from, uint64_t n) {
    if (n && to != from) std::memmove(to, from, n);
  };
  switch (a->kind) {
    case BCS_COLL_BARRIER:
    case BCS_COLL_BCAST:  // the root's buffer is the result
    case BCS_COLL_EXSCAN:  // member 0's receive buffer is left untouched
      return BCS_OK;
    case BCS_COLL_GATHER:
    case BCS_COLL_SCATTER:
    case BCS_COLL_ALLGATHER:
    case BCS_COLL_ALLTOALL:
      if (!in_place) copy(rb, sb, std::min(a->sbytes, a->rbytes));
      return a->sbytes > a->rbytes ? BCS_ERR_TRUNCATE : BCS_OK;
    case BCS_COLL_GATHERV:
    case BCS_COLL_ALLGATHERV:
      if (!in_place) copy(rb + vec_at(a->rdispls, 0), sb, std::min(a->sbytes, vec_at(a->rcounts, 0)));
      return a->sbytes > vec_at(a->rcounts, 0) ? BCS_ERR_TRUNCATE : BCS_OK;
    case BCS_COLL_SCATTERV:
      if (!in_place)
        copy(rb, sb + vec_at(a->sdispls, 0), std::min(vec_at(a->scounts, 0), a->rbytes));
      return vec_at(a->scounts, 0) > a->rbytes ? BCS_ERR_TRUNCATE : BCS_OK;
    case BCS_COLL_ALLTOALLV:
      copy(rb + vec_at(a->rdispls, 0), sb + vec_at(a->sdispls, 0),
           std::min(vec_at(a->scounts, 0), vec_at(a->rcounts, 0)));
      return vec_at(a->scounts, 0) > vec_at(a->rcounts, 0) ? BCS_ERR_TRUNCATE : BCS_OK;
    case BCS_COLL_REDUCE:
    case BCS_COLL_ALLREDUCE:
    case BCS_COLL_SCAN:
      copy(rb, sb, a->count * bcs_dtype_size(a->dtype));
      return BCS_OK;
    case BCS_COLL_REDUCE_SCATTER:
      copy(rb, sb, vec_at(a->rcounts, 0) * bcs_dtype_size(a->dtype));
      return BCS_OK;
  }
  return BCS_ERR_ARG;
}

bcs_status_t bcs_comm_register(int32_t coll_context, int32_t size, const int32_t* members) {
  auto& s = st();
  if (!s.initialized) return BCS_ERR_NOT_INIT;
  if (size < 1 || size > s.size || !members || coll_context <= bcs::kContextSelf + 1)
    return BCS_ERR_ARG;
  Descriptor d = make_desc(DescKind::comm, coll_context, 0, 0);
  d.addr = reinterpret_cast<uintptr_t>(members);
  d.len = static_cast<uint64_t>(size);
  post(d);
  return BCS_OK;
}

bcs_status_t bcs_coll(const bcs_coll_args_t* a, bcs_mode_t mode, bcs_request_t* req) {
  auto& s = st();
  if (!s.initialized) return BCS_ERR_NOT_INIT;
  if (!coll_args_valid(a) || (mode == BCS_NONBLOCKING && !req)) return BCS_ERR_ARG;
  if (a->comm_size > s.size) return BCS_ERR_ARG;
  uint32_t idx;
  if (!alloc_slot(DescKind::coll, &idx)) return BCS_ERR_NO_RESOURCES;
  if (a->comm_size == 1) {
    const bcs_status_t e = bcs_coll_local(a);
    complete_locally(idx, 0);
    slot(idx).error = e;
  } else {
    Descriptor d = make_desc(DescKind::coll, a->context, 0, 0);
    d.request = idx;
    d.seq = ++s.coll_count[a->context];
    bcs::CollArgs c{};
    c.kind = static_cast<uint8_t>(a->kind);
    c.op = static_cast<uint8_t>(a->op);
    c.dtype = static_cast<uint8_t>(a->dtype);
    c.flags = static_cast<uint8_t>(a->flags);
    c.comm_size = a->comm_size;
    c.root = a->root;
    c.comm_rank = -1;  // filled in by the node manager from its own tables
    c.sendbuf = reinterpret_cast<uintptr_t>(a->sendbuf);
    c.recvbuf = reinterpret_cast<uintptr_t>(a->recvbuf);
    c.sbytes = a->sbytes;
    c.rbytes = a->rbytes;
    c.count = a->count;
    c.scounts = reinterpret_cast<uintptr_t>(a->scounts);
    c.sdispls = reinterpret_cast<uintptr_t>(a->sdispls);
    c.rcounts = reinterpret_cast<uintptr_t>(a->rcounts);
    c.rdispls = reinterpret_cast<uintptr_t>(a->rdispls);
    // Application bypass (paper 000): a member that only contributes data
    // small enough for the descriptor hands it over and is done; the node
    // managers finish the operation without it. (Its rank in the
    // communicator is known here for the world; other communicators are
    // never bypassed.)
    const bool world = a->context == bcs::kContextWorld + 1;
    const bool send_only =
        world && ((a->kind == BCS_COLL_BCAST && a->root == s.rank) ||
                  ((a->kind == BCS_COLL_REDUCE || a->kind == BCS_COLL_GATHER ||
                    a->kind == BCS_COLL_GATHERV) &&
                   a->root != s.rank));
    const bool bypass = send_only && a->sbytes <= bcs::kCollInlineMax;
    if (bypass) {
      d.flags = bcs::kDescInline | bcs::kDescNoComplete;
      d.inline_len = static_cast<uint32_t>(a->sbytes);
      if (a->sbytes) std::memcpy(d.payload + bcs::kCollInlineOffset, a->sendbuf, a->sbytes);
    }
    std::memcpy(d.payload, &c, sizeof c);
    post(d);
    if (bypass) complete_locally(idx, 0);
  }
  if (mode == BCS_NONBLOCKING) {
    *req = static_cast<bcs_request_t>(idx);
    return BCS_OK;
  }
  return finish_blocking(idx, nullptr);
}

}  // extern "C"
