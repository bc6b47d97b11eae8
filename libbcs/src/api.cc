// The BCS API (Table 4.1), rank side: every call fills a descriptor, posts it
// into this rank's ring in the job's shared segment and, if blocking, sleeps
// on the rank's futex until the node manager completes the request. The
// only work done here besides posting is completing inline sends (the bytes
// already travel inside the descriptor, so the user buffer is free at once).
// Collectives are in coll.cc, the state and protocol both use in rank.h.
#include "bcs/bcs.h"
#include "bcs/shelf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rank.h"

using namespace bcs::rank_side;

namespace {

bool parse_long(const char* s, long min, long max, long* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno || *end || v < min || v > max) return false;
  *out = v;
  return true;
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
  s.local = static_cast<uint32_t>(local);
  if (s.view.ctl->world_rank != static_cast<int32_t>(rank)) {
    s.map.reset();
    s.view = {};
    return BCS_ERR_INTERNAL;
  }
  // Map the rank's own area now (its ring, requests, landings), not one
  // minor fault at a time in the posts of its first steps. Only its own:
  // every rank maps the whole segment, and populating all of it in every
  // rank would cost page tables quadratic in the local ranks. A kernel
  // without MADV_POPULATE_WRITE (before 5.14) refuses, which costs nothing.
  // Only its hot part: the request slots past it are populated as they are
  // handed out (alloc_slot). A failure here is no error: the pages then
  // come one fault at a time.
  bcs::segment_populate(s.view.ctl, l.hot_bytes());
  s.header = h;
  s.layout = l;
  s.rank = static_cast<int32_t>(rank);
  s.size = static_cast<int32_t>(size);
  s.slice_ns = h->slice_ns;
  s.post_seq = 0;
  s.post_fence = !((h->nm_flags.load(std::memory_order_acquire) & bcs::kNmAsymmetricFence) &&
                   bcs::segment_membarrier_register());
  s.coll_ctx.clear();
  s.coll_last = nullptr;
  s.iprobes.clear();
  s.forgotten.clear();
  // The slots are free (the memfd is zero-filled) and none handed out yet;
  // nothing of an earlier attachment's requests is left (its open receives
  // would name slots of another segment).
  s.open_recvs.clear();
  s.free_slots.clear();
  s.slot_info.clear();
  s.fresh = 0;
  s.populated = std::min(s.view.request_slots, bcs::kHotRequestSlots);
  s.max_requests = s.view.request_slots;
  if (const char* m = std::getenv("BCS_MAX_REQUESTS")) {
    // Fewer, for a program (or a test) that wants to meet the limit early.
    char* end = nullptr;
    const unsigned long long v = std::strtoull(m, &end, 10);
    if (end != m && *end == '\0' && v > 0 && v < s.max_requests)
      s.max_requests = static_cast<uint32_t>(v);
  }
  s.send_seq.assign(static_cast<size_t>(s.size), 0);
  s.local_ctl.assign(static_cast<size_t>(s.size), nullptr);
  for (uint32_t i = 0; i < l.nlocal; ++i) {
    bcs::RankControl* c = bcs::segment_rank_view(s.map.base(), i, l).ctl;
    if (c->world_rank >= 0 && c->world_rank < s.size) s.local_ctl[static_cast<size_t>(c->world_rank)] = c;
  }
  // The world's collective context: every local rank is a member.
  CollContext& world = s.coll_ctx[bcs::kContextWorld + 1];
  world.members_known = true;
  for (const bcs::RankControl* c : s.local_ctl)
    if (c && c != s.view.ctl) world.local_peers.push_back(c);
  s.wait_spin_ns = wait_spin_ns(l.nlocal);
  // Before anything is posted: the node manager copies from and into this
  // process, which need not be the one it started (a wrapper that forks).
  s.view.ctl->mpi_pid.store(static_cast<uint32_t>(::getpid()), std::memory_order_release);
  s.view.ctl->mpi_state.store(static_cast<uint32_t>(bcs::MpiState::initialized),
                              std::memory_order_release);
  s.initialized = true;
  return BCS_OK;
}

int bcs_initialized(void) { return st().initialized ? 1 : 0; }

bcs_status_t bcs_finalize(void) {
  auto& s = st();
  if (!s.initialized) return BCS_ERR_NOT_INIT;
  sweep_forgotten();  // what came is in its buffers; the rest never will be
  s.forgotten.clear();
  s.view.ctl->mpi_state.store(static_cast<uint32_t>(bcs::MpiState::finalized),
                              std::memory_order_release);
  s.map.reset();
  s.view = {};
  s.header = nullptr;
  s.free_slots.clear();
  s.iprobes.clear();
  s.coll_ctx.clear();
  s.coll_last = nullptr;
  s.drain_observer = nullptr;
  s.drain_tail = 0;
  s.alarm = nullptr;
  s.alarm_slice = 0;
  s.slice_hooks = false;
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
void* bcs_mmds_area(void) { return st().initialized ? st().view.mmds : nullptr; }
char* bcs_mmds_report(void) { return st().initialized ? st().view.mmds_report : nullptr; }

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
  if (const bcs_status_t e = alloc_slot(DescKind::send, &idx)) return e;
  Descriptor d = make_desc(DescKind::send, context, dest, tag);
  d.request = idx;
  d.addr = reinterpret_cast<uintptr_t>(buf);
  d.len = len;
  st().slot_info[idx].send_dest = dest;  // for bcs_cancel
  // The node manager numbers each rank's sends per destination the same way
  // (SendDesc::pair_seq): the number names an inline send to bcs_cancel_sent.
  const uint64_t pair_seq = ++st().send_seq[static_cast<size_t>(dest)];
  if (st().observer) st().observer(1, dest, pair_seq, len);
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
  // Eager (segment.h, kInlineSpanMax) when contiguous and a span of slots
  // fits; post_eager posts it either way.
  bool eager = false;
  if (!inl && !sync && !layout && len <= bcs::kInlineSpanMax)
    eager = post_eager(d, buf, len, mode == BCS_NONBLOCKING);
  else
    post(d, mode == BCS_NONBLOCKING);
  // Inline: the bytes are in the ring, the user buffer is reusable now.
  if (inl || eager) complete_locally(idx, len);
  if (mode == BCS_NONBLOCKING) {
    *req = static_cast<bcs_request_t>(idx);
    return BCS_OK;
  }
  return finish_blocking(idx, nullptr);
}

// bcs_probe keeps the node manager's answer to a non-blocking probe for the
// next call of that key. A receive that could take the message it names
// makes that answer out of date, whether it is in yet or still to come (the
// node manager answers a probe posted before the receive as it stood before
// it): handed out later, "found" would send the program after a message it
// already has, and a blocking receive would wait for it forever. So a
// receive, or a probe answered from the shelf, forgets the answers of the
// probes whose key overlaps its own; one not in yet is freed when it comes.
void forget_probe_answers(int32_t source, int32_t tag, int32_t context) {
  auto& s = st();
  for (auto it = s.iprobes.begin(); it != s.iprobes.end();) {
    const IprobeKey& k = it->first;
    const bool overlap =
        k.context == context &&
        (k.source == BCS_ANY_SOURCE || source == BCS_ANY_SOURCE || k.source == source) &&
        (k.tag == BCS_ANY_TAG || tag == BCS_ANY_TAG || k.tag == tag);
    if (!overlap) {
      ++it;
      continue;
    }
    if (slot_done(it->second))
      release_slot(it->second);
    else
      s.forgotten.push_back(it->second);
    it = s.iprobes.erase(it);
  }
}

// What the node manager would have said of a receive with `cap` bytes of
// room that got the shelf's message `t` (a probe: cap = t.len).
bcs_msg_status_t shelf_status(const bcs::ShelfTaken& t, uint64_t cap) {
  bcs_msg_status_t m{};
  m.source = t.src;
  m.tag = t.tag;
  m.bytes = std::min<uint64_t>(t.len, cap);
  m.error = t.len > cap ? BCS_ERR_TRUNCATE : BCS_OK;
  m.seq = t.pair_seq;
  m.slice = st().header->job_slice.load(std::memory_order_relaxed);
  return m;
}

// A blocking receive that took its message from the shelf.
bcs_status_t shelf_received(const bcs::ShelfTaken& t, size_t cap, bcs_msg_status_t* out) {
  const bcs_msg_status_t m = shelf_status(t, cap);
  if (st().observer) st().observer(0, m.source, m.seq, m.bytes);
  if (out) *out = m;
  return static_cast<bcs_status_t>(m.error);
}

// A non-blocking one: its request slot, completed (release_slot tells the
// observer).
void shelf_received_into(uint32_t idx, const bcs::ShelfTaken& t, size_t cap) {
  const bcs_msg_status_t m = shelf_status(t, cap);
  bcs::request_complete(st().view, idx, m.error, m.source, m.tag, m.bytes, 0, m.seq, m.slice);
}

bcs_status_t recv_impl(void* buf, size_t cap, const bcs_layout_t* layout, int32_t source,
                       int32_t tag, int32_t context, bcs_mode_t mode, bcs_request_t* req,
                       bcs_msg_status_t* out) {
  if (!st().initialized) return BCS_ERR_NOT_INIT;
  if (layout && !layout_bytes(layout, &cap)) return BCS_ERR_ARG;
  if ((!buf && cap && !layout) || !valid_peer(source, true) || !valid_tag(tag, true) ||
      (mode == BCS_NONBLOCKING && !req))
    return BCS_ERR_ARG;
  if (!st().iprobes.empty()) forget_probe_answers(source, tag, context);
  // The message may be on the shelf already (segment.h, Shelf): a receive
  // into a contiguous buffer takes it there, without a slice, when no
  // receive of ours is still open before it.
  const bool shelf = !layout && shelf_may_take();
  bcs::ShelfTaken t;
  if (shelf && mode == BCS_BLOCKING &&
      bcs::shelf_take(st().view.shelf, source, context, tag, buf, cap, &t))
    return shelf_received(t, cap, out);
  uint32_t idx;
  if (const bcs_status_t e = alloc_slot(DescKind::recv, &idx)) return e;
  // Non-blocking: the slot first, so that a message taken is never lost
  // for want of one.
  if (shelf && mode == BCS_NONBLOCKING &&
      bcs::shelf_take(st().view.shelf, source, context, tag, buf, cap, &t)) {
    shelf_received_into(idx, t, cap);
    *req = static_cast<bcs_request_t>(idx);
    return BCS_OK;
  }
  Descriptor d = make_desc(DescKind::recv, context, source, tag);
  d.request = idx;
  d.addr = reinterpret_cast<uintptr_t>(buf);
  d.len = cap;
  // A receive into a layout never lands (the node manager writes it).
  st().slot_info[idx].recv_buf = layout ? nullptr : buf;
  st().slot_info[idx].recv_cap = layout ? 0 : cap;
  if (layout && cap) {
    d.flags = bcs::kDescLayout;
    put_layout(&d, layout);
  }
  post(d, mode == BCS_NONBLOCKING);
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
  // A message on the shelf is the one a receive posted now would get: the
  // answer needs no slice (segment.h, Shelf).
  bcs::ShelfTaken t;
  if (shelf_may_take() && bcs::shelf_peek(s.view.shelf, source, context, tag, &t)) {
    forget_probe_answers(source, tag, context);
    if (flag) *flag = 1;
    if (out) *out = shelf_status(t, t.len);
    return BCS_OK;
  }
  if (mode == BCS_BLOCKING) {
    uint32_t idx;
    if (const bcs_status_t e = alloc_slot(DescKind::probe, &idx)) return e;
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
  if (const bcs_status_t e = alloc_slot(DescKind::iprobe, &idx)) return e;
  Descriptor d = make_desc(DescKind::iprobe, context, source, tag);
  d.request = idx;
  post(d, true);
  s.iprobes.emplace(key, idx);
  polled_nothing();
  return BCS_OK;
}

bcs_status_t bcs_cancel(bcs_request_t req) {
  auto& s = st();
  if (!s.initialized) return BCS_ERR_NOT_INIT;
  if (req < 0 || static_cast<uint32_t>(req) >= s.fresh) return BCS_ERR_ARG;
  const RequestSlot& r = slot(static_cast<uint32_t>(req));
  const bool send = r.kind == static_cast<uint32_t>(DescKind::send);
  if (!send && r.kind != static_cast<uint32_t>(DescKind::recv)) return BCS_ERR_ARG;
  if (slot_done(static_cast<uint32_t>(req))) return BCS_OK;  // too late: nothing to do
  Descriptor d = make_desc(DescKind::cancel, 0, send ? s.slot_info[req].send_dest : 0, 0);
  d.request = static_cast<uint32_t>(req);
  if (send) d.flags = bcs::kDescCancelSend;
  post(d, true);
  return BCS_OK;
}

void bcs_set_msg_observer(bcs_msg_observer_t fn) { st().observer = fn; }

uint32_t bcs_request_limit(void) { return st().initialized ? st().max_requests : 0; }

uint64_t bcs_job_slice(void) {
  const auto& s = st();
  return s.initialized ? s.header->job_slice.load(std::memory_order_acquire) : 0;
}

void bcs_take_drains(void) {
  auto& s = st();
  if (s.initialized && s.drain_observer) run_slice_hooks();
}

void bcs_set_drain_observer(bcs_drain_observer_t fn) {
  auto& s = st();
  if (!s.initialized) return;
  if (!fn) bcs_take_drains();
  s.drain_observer = fn;
  // The NM notes drains from its next DEM on; notes written before (by an
  // earlier observer) are not this one's.
  if (fn) s.drain_tail = s.view.ctl->drain_head.load(std::memory_order_acquire);
  s.view.ctl->note_drains.store(fn ? 1 : 0, std::memory_order_relaxed);
  s.slice_hooks = s.drain_observer || s.alarm_slice;
}

void bcs_set_slice_alarm(uint64_t slice, bcs_slice_alarm_t fn) {
  auto& s = st();
  if (!s.initialized) return;
  s.alarm_slice = fn ? slice : 0;
  s.alarm = s.alarm_slice ? fn : nullptr;
  s.view.ctl->wake_at_slice.store(s.alarm_slice, std::memory_order_relaxed);
  s.slice_hooks = s.drain_observer || s.alarm_slice;
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
  if (const bcs_status_t e = alloc_slot(DescKind::cancel, &idx)) return e;
  Descriptor d = make_desc(DescKind::cancel, 0, dest, 0);
  d.request = idx;
  d.addr = seq;
  d.flags = bcs::kDescCancelSend | bcs::kDescCancelInline;
  post(d, true);
  *ticket = static_cast<bcs_request_t>(idx);
  return BCS_OK;
}

bcs_status_t bcs_request_free(bcs_request_t* req) {
  if (!st().initialized) return BCS_ERR_NOT_INIT;
  if (!req) return BCS_ERR_ARG;
  if (*req == BCS_REQUEST_NULL) return BCS_OK;
  if (!valid_request(*req)) return BCS_ERR_ARG;
  const auto idx = static_cast<uint32_t>(*req);
  if (slot_done(idx))
    release_slot(idx);
  else
    st().forgotten.push_back(idx);
  *req = BCS_REQUEST_NULL;
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
  // From the first request not yet seen done: a request once done stays
  // done until freed below, and a wait for 10^6 requests that rescanned
  // the done ones at every wake-up spent its node's CPU in this loop
  // (quadratic in the requests outstanding).
  int from = 0;
  auto all_done = [&] {
    for (; from < n; ++from)
      if (reqs[from] != BCS_REQUEST_NULL && !slot_done(static_cast<uint32_t>(reqs[from])))
        return false;
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

}  // extern "C"
