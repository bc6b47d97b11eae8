// Point-to-point (Table 4.2) and request completion:
//
//   MPI_Send / MPI_Isend        -> bcs_send (blocking / non-blocking)
//   MPI_Ssend / MPI_Issend      -> bcs_ssend (no inline completion: done once matched)
//   MPI_Recv / MPI_Irecv        -> bcs_recv (blocking / non-blocking)
//   MPI_Probe / MPI_Iprobe      -> bcs_probe (blocking / non-blocking)
//   MPI_Wait / MPI_Test         -> bcs_test (blocking / non-blocking)
//   MPI_Waitall / MPI_Testall   -> bcs_testall
//   MPI_Waitany / MPI_Testany   -> bcs_testany
//   MPI_Sendrecv                = Isend + Irecv + Waitall
//
// (The completions are in completion.cc, the MPI entry points of the Wait
// and Test families in wait.cc.)
//
// The MPI request table lives here: an MPI request may exist without a BCS
// request (MPI_PROC_NULL, one-member collectives), and a collective request
// carries what the shim owns for it (CollData), including the work that runs
// when it completes (the fold of a user-op reduction).
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <new>
#include <vector>

#include "dtype.h"
#include "replay.h"
#include "shim.h"

namespace bcs::shim {

// ------------------------------------------------------------ requests

constexpr int kReqBase = MPI_REQUEST_NULL + 1;

// Returns the index of a live request handle, or -1.
int req_index(MPI_Request h) {
  const long idx = static_cast<long>(h) - kReqBase;
  Shim& s = S();
  if (idx < 0 || idx >= static_cast<long>(s.reqs.size()) || !s.reqs[idx].used) return -1;
  return static_cast<int>(idx);
}

Req& req_new(MPI_Request* handle) {
  Shim& s = S();
  int idx;
  if (!s.free_reqs.empty()) {
    idx = s.free_reqs.back();
    s.free_reqs.pop_back();
  } else {
    idx = static_cast<int>(s.reqs.size());
    s.reqs.emplace_back();
  }
  Req& r = s.reqs[static_cast<size_t>(idx)];  // pristine: req_release resets a slot it frees
  r.used = true;
  *handle = kReqBase + idx;
  return r;
}

bool req_room() {
  Shim& s = S();
  if (!s.free_reqs.empty() || s.reqs.size() < s.reqs.capacity()) return true;
  try {
    s.reqs.reserve(std::max<size_t>(64, 2 * s.reqs.size()));
    // A request freed later goes back on free_reqs: room for it now too.
    s.free_reqs.reserve(s.reqs.capacity());
  } catch (const std::bad_alloc&) {
    return false;
  }
  return true;
}

MPI_Request req_alloc(Req r) {
  MPI_Request h;
  Req& slot = req_new(&h);
  r.used = true;
  slot = std::move(r);
  return h;
}

void req_release(int idx) {
  // A generalized request's free function runs when MPI frees it.
  if (const auto g = S().reqs[idx].greq; g && g->free) g->free(g->extra);
  S().reqs[idx] = Req{};
  S().free_reqs.push_back(idx);
}

void req_retire(int idx, MPI_Request* handle) {
  Req& r = S().reqs[idx];
  if (r.persistent) {
    // Back to inactive: the handle stays, a wait on it returns at once
    // with an empty status until the next MPI_Start.
    r.active = false;
    r.local_done = true;
    set_empty_status(&r.local_status);
    r.local_error = 0;  // the next round starts clean
    r.breq = BCS_REQUEST_NULL;
    r.coll.reset();
    r.sent_to = -1;  // nothing left to cancel
    r.bsend_id = 0;
    r.cancelling = false;
    return;
  }
  req_release(idx);
  *handle = MPI_REQUEST_NULL;
}

// Frees the BCS requests of completed orphans (MPI_Request_free'd while
// pending), and with them what their collectives still needed.
bool reclaim_orphans() {
  auto& o = S().orphans;
  bool any = false;
  while (!o.empty()) {
    std::vector<bcs_request_t> b(o.size());
    for (size_t i = 0; i < o.size(); ++i) b[i] = o[i].breq;
    int index = -1, flag = 0;
    bcs_testany(static_cast<int>(b.size()), b.data(), BCS_NONBLOCKING, &index, &flag, nullptr);
    if (!flag || index < 0) break;
    o.erase(o.begin() + index);
    any = true;
  }
  return any;
}

namespace {

// A completed runtime request becomes a local_done MPI request.
void harvest_one(int idx, const bcs_msg_status_t& st) {
  Req& r = S().reqs[static_cast<size_t>(idx)];
  r.breq = BCS_REQUEST_NULL;
  r.local_done = true;
  bcs_msg_status_t outcome = st;
  req_fold_then(r, outcome);  // an MPI_Isendrecv's send half that failed
  r.local_error = outcome.error;
  p2p_status_from_bcs(r, outcome, &r.local_status);
  const Req copy = r;  // finish_coll may run user code that grows the table
  p2p_finish_coll(copy, st.error, st.bytes);
}
}  // namespace

size_t requests_held() {
  size_t n = 0;
  for (const Req& r : S().reqs) n += r.used && !r.local_done && r.breq != BCS_REQUEST_NULL;
  return n + S().orphans.size();
}

bool harvest_requests() {
  auto& s = S();
  std::vector<int> idx;
  std::vector<bcs_request_t> b;
  for (size_t i = 0; i < s.reqs.size(); ++i) {
    const Req& r = s.reqs[i];
    // (Not an MPI_Isendrecv whose send half is pending: local_done would
    // hide that half from the completions.)
    if (r.used && !r.local_done && !r.greq && !r.persistent && r.breq != BCS_REQUEST_NULL &&
        r.then == BCS_REQUEST_NULL) {
      idx.push_back(static_cast<int>(i));
      b.push_back(r.breq);
    }
  }
  if (idx.empty()) return false;
  bool any = false;
  for (size_t k = 0; k < idx.size(); ++k) {
    int done = 0;
    bcs_msg_status_t st{};
    if (bcs_test(&b[k], BCS_NONBLOCKING, &done, &st) == BCS_OK && done) {
      harvest_one(idx[k], st);
      any = true;
    }
  }
  return any;
}

namespace {

// ------------------------------------------------------------ checks

// Common checks of a point-to-point call. `peer` is dest (send) or source
// (recv); `bytes` receives count * type size.
int check_p2p(const char* fn, MPI_Comm c, const void* buf, int count, MPI_Datatype type, int peer,
              int tag, bool is_recv, int* comm, size_t* bytes) {
  *comm = comm_index(c);
  if (*comm == kNoComm)
    return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator handle 0x%x", c);
  if (count < 0) return raise_error(*comm, fn, MPI_ERR_COUNT, "negative count %d", count);
  // An empty message carries no data, so its datatype is never used: like
  // MPICH, accept any handle (MPI_DATATYPE_NULL included) when count is 0.
  const int64_t ts = type_size(type);
  if (count > 0)
    if (int e = check_usable(*comm, fn, type)) return e;
  // MPI_BOTTOM (NULL) is a valid buffer for a derived type whose
  // displacements are absolute addresses (or which holds no data).
  int64_t off0 = 0;
  if (!buf && count > 0 && ts > 0 && type_contiguous(type, &off0) && off0 == 0)
    return raise_error(*comm, fn, MPI_ERR_BUFFER, "NULL buffer with count %d", count);
  const int n = peer_count(*comm);  // an intercommunicator names the remote group
  const bool peer_ok = (peer >= 0 && peer < n) || peer == MPI_PROC_NULL ||
                       (is_recv && peer == MPI_ANY_SOURCE);
  if (!peer_ok)
    return raise_error(*comm, fn, MPI_ERR_RANK, "%s %d out of range (communicator size %d)",
                       is_recv ? "source" : "destination", peer, n);
  const bool tag_ok = (tag >= 0 && tag <= kTagUb) || (is_recv && tag == MPI_ANY_TAG);
  if (!tag_ok)
    return raise_error(*comm, fn, MPI_ERR_TAG, "tag %d out of range (0..%d)", tag, kTagUb);
  *bytes = count > 0 ? static_cast<size_t>(count) * static_cast<size_t>(ts) : 0;
  return MPI_SUCCESS;
}

// Datatypes with holes travel as layouts (bcs_send_layout): the node
// managers read and write the type's blocks themselves, the rank does not
// pack. The request holds the type, whose block list the descriptor points
// at, until it completes. A type of more blocks per instance than a layout
// takes (BCS_LAYOUT_MAX_BLOCKS) is packed by the rank instead: a send into
// a staging buffer that lives as long as the request, a receive into one
// that is unpacked when it completes. Contiguous types are plain bytes
// (from the buffer moved by the type's offset).
struct P2pBuf {
  const bcs_layout_t* layout() const { return typed ? &lay : nullptr; }
  bool typed = false;
  bcs_layout_t lay{};
  std::shared_ptr<CollData> keep;  // the type (layout) or the staging buffer
};

bool as_layout(const void* /*buf*/, int count, MPI_Datatype type, P2pBuf* p) {
  const DType* d = dtype_of(type);
  if (!d || d->blocks.empty() || d->blocks.size() > BCS_LAYOUT_MAX_BLOCKS) return false;
  static_assert(sizeof(TypeBlock) == sizeof(bcs_block_t) &&
                offsetof(TypeBlock, off) == offsetof(bcs_block_t, disp) &&
                offsetof(TypeBlock, len) == offsetof(bcs_block_t, len));
  for (const TypeBlock& b : d->blocks)
    if (b.len <= 0) return false;
  p->typed = true;
  p->lay.blocks = reinterpret_cast<const bcs_block_t*>(d->blocks.data());
  p->lay.nblocks = static_cast<uint32_t>(d->blocks.size());
  p->lay.count = static_cast<uint32_t>(count);
  p->lay.extent = d->extent();
  p->keep = std::make_shared<CollData>();
  p->keep->staging = type_hold(type);
  return true;
}

P2pBuf stage_send(const void*& buf, int count, MPI_Datatype type) {
  P2pBuf p;
  int64_t off = 0;
  if (count <= 0 || type_contiguous(type, &off)) {
    if (count > 0) buf = static_cast<const unsigned char*>(buf) + off;
    return p;
  }
  if (as_layout(buf, count, type, &p)) return p;
  auto d = std::make_shared<CollData>();
  d->tmp.resize(static_cast<size_t>(count) * static_cast<size_t>(type_size(type)));
  type_pack(buf, count, type, d->tmp.data());
  buf = d->tmp.data();
  p.keep = d;
  return p;
}

P2pBuf stage_recv(void*& buf, int count, MPI_Datatype type) {
  P2pBuf p;
  int64_t off = 0;
  if (count <= 0 || type_contiguous(type, &off)) {
    if (count > 0) buf = static_cast<unsigned char*>(buf) + off;
    return p;
  }
  if (as_layout(buf, count, type, &p)) return p;
  auto d = std::make_shared<CollData>();
  d->tmp.resize(static_cast<size_t>(count) * static_cast<size_t>(type_size(type)));
  void* user = buf;
  CollData* dp = d.get();
  d->unpack = [dp, user, count, type, hold = type_hold(type)](uint64_t bytes) {
    type_unpack(dp->tmp.data(), std::min<uint64_t>(bytes, dp->tmp.size()), count, type, user);
  };
  buf = d->tmp.data();
  p.keep = d;
  return p;
}

// The runtime's send and receive of a staged buffer.
bcs_status_t post_send(const P2pBuf& p, const void* buf, size_t bytes, int32_t dest, int32_t tag,
                       int32_t ctx, bool sync, bcs_mode_t mode, bcs_request_t* b) {
  if (p.typed) return bcs_send_layout(buf, p.layout(), dest, tag, ctx, sync, mode, b);
  return (sync ? bcs_ssend : bcs_send)(buf, bytes, dest, tag, ctx, mode, b);
}
bcs_status_t post_recv(const P2pBuf& p, void* buf, size_t bytes, int32_t src, int32_t tag,
                       int32_t ctx, bcs_mode_t mode, bcs_request_t* b, bcs_msg_status_t* st) {
  if (p.typed) return bcs_recv_layout(buf, p.layout(), src, tag, ctx, mode, b, st);
  return bcs_recv(buf, bytes, src, tag, ctx, mode, b, st);
}

int singleton_p2p(int comm, const char* fn) {
  return raise_error(comm, fn, MPI_ERR_OTHER,
                     "point-to-point communication needs the bcs runtime: this program must be "
                     "started with `bcs run`");
}

// Non-blocking send/recv shared by Isend/Irecv/Sendrecv.
int isend(const char* fn, const void* buf, int count, MPI_Datatype type, int dest, int tag,
          MPI_Comm c, MPI_Request* request, bool sync = false) {
  REQUIRE_RUNNING(fn);
  int comm;
  size_t bytes;
  if (int e = check_p2p(fn, c, buf, count, type, dest, tag, false, &comm, &bytes)) return e;
  if (!request) return raise_error(comm, fn, MPI_ERR_REQUEST, "NULL request pointer");
  Req r;
  r.comm = comm;
  if (dest == MPI_PROC_NULL) {
    r.local_done = true;
    set_proc_null_status(&r.local_status);
    *request = req_alloc(std::move(r));
    return MPI_SUCCESS;
  }
  if (S().singleton) return singleton_p2p(comm, fn);
  if (!req_room()) return raise_bcs(comm, fn, BCS_ERR_NO_MEM);
  const P2pBuf p = stage_send(buf, count, type);
  r.coll = p.keep;
  bcs_request_t b = BCS_REQUEST_NULL;
  const int e = post_with_retry([&] {
    return post_send(p, buf, bytes, to_world(comm, dest), tag, context_of(comm), sync,
                     BCS_NONBLOCKING, &b);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  // A small send travels inside its descriptor and is complete once posted:
  // its runtime request slot goes back now, not at MPI_Wait, so a program
  // may hold any number of such requests (the table has a few thousand).
  int done = 0;
  bcs_msg_status_t st{};
  if (!sync && bcs_test(&b, BCS_NONBLOCKING, &done, &st) == BCS_OK && done) {
    r.local_done = true;
    p2p_status_from_bcs(r, st, &r.local_status);
    r.coll = nullptr;  // the bytes are in the descriptor: no staging to keep
    r.sent_to = to_world(comm, dest);  // MPI_Cancel may still take it back
    r.sent_seq = bcs_send_seq(r.sent_to);
  } else {
    r.breq = b;
  }
  *request = req_alloc(std::move(r));
  return MPI_SUCCESS;
}

int irecv(const char* fn, void* buf, int count, MPI_Datatype type, int source, int tag,
          MPI_Comm c, MPI_Request* request) {
  REQUIRE_RUNNING(fn);
  int comm;
  size_t bytes;
  if (int e = check_p2p(fn, c, buf, count, type, source, tag, true, &comm, &bytes)) return e;
  if (!request) return raise_error(comm, fn, MPI_ERR_REQUEST, "NULL request pointer");
  Req r;
  r.comm = comm;
  r.is_recv = true;
  r.cap = bytes;
  if (source == MPI_PROC_NULL) {
    r.local_done = true;
    set_proc_null_status(&r.local_status);
    *request = req_alloc(std::move(r));
    return MPI_SUCCESS;
  }
  if (S().singleton) return singleton_p2p(comm, fn);
  if (!req_room()) return raise_bcs(comm, fn, BCS_ERR_NO_MEM);
  if (replay::g_mode != replay::Mode::off) r.wild = replay::recv_posted(fn, &source, &tag);
  const P2pBuf p = stage_recv(buf, count, type);
  r.coll = p.keep;
  bcs_request_t b = BCS_REQUEST_NULL;
  const int e = post_with_retry([&] {
    return post_recv(p, buf, bytes, to_world(comm, source), tag, context_of(comm),
                     BCS_NONBLOCKING, &b, nullptr);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  r.breq = b;
  *request = req_alloc(std::move(r));
  return MPI_SUCCESS;
}

// Both halves of a send-receive, checked before either is posted (so an
// argument error posts nothing): r[1] the receive, r[0] the send. If the
// send cannot be posted, the receive is taken back.
int post_sendrecv(const char* fn, const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                  int dest, int sendtag, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  int source, int recvtag, MPI_Comm c, MPI_Request r[2]) {
  REQUIRE_RUNNING(fn);
  int comm;
  size_t bytes;
  if (int e = check_p2p(fn, c, sendbuf, sendcount, sendtype, dest, sendtag, false, &comm, &bytes))
    return e;
  if (int e = check_p2p(fn, c, recvbuf, recvcount, recvtype, source, recvtag, true, &comm, &bytes))
    return e;
  r[0] = r[1] = MPI_REQUEST_NULL;
  if (int e = irecv(fn, recvbuf, recvcount, recvtype, source, recvtag, c, &r[1])) return e;
  if (int e = isend(fn, sendbuf, sendcount, sendtype, dest, sendtag, c, &r[0])) {
    p2p_withdraw_recv(fn, &r[1]);
    return e;
  }
  return MPI_SUCCESS;
}

// MPI_Send / MPI_Ssend (bcs_send / bcs_ssend, blocking).
int send(const char* fn, const void* buf, int count, MPI_Datatype type, int dest, int tag,
         MPI_Comm c, bool sync) {
  REQUIRE_RUNNING(fn);
  int comm;
  size_t bytes;
  if (int e = check_p2p(fn, c, buf, count, type, dest, tag, false, &comm, &bytes)) return e;
  if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
  if (S().singleton) return singleton_p2p(comm, fn);
  const P2pBuf staged = stage_send(buf, count, type);
  const int e = post_with_retry([&] {
    return post_send(staged, buf, bytes, to_world(comm, dest), tag, context_of(comm), sync,
                     BCS_BLOCKING, nullptr);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  return MPI_SUCCESS;
}

}  // namespace

int p2p_isend(const char* fn, const void* buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm c, MPI_Request* request, bool sync) {
  return isend(fn, buf, count, type, dest, tag, c, request, sync);
}
int p2p_irecv(const char* fn, void* buf, int count, MPI_Datatype type, int source, int tag,
              MPI_Comm c, MPI_Request* request) {
  return irecv(fn, buf, count, type, source, tag, c, request);
}
// The send half of a send-receive failed (its error went through the
// handler): takes the posted receive back, so the node manager never writes
// into its buffer after the call returned. Cancelled or matched, it
// completes.
void p2p_withdraw_recv(const char* fn, MPI_Request* recv) {
  if (*recv == MPI_REQUEST_NULL) return;
  const Req& rr = S().reqs[static_cast<size_t>(req_index(*recv))];
  if (!rr.local_done && rr.breq != BCS_REQUEST_NULL) bcs_cancel(rr.breq);
  p2p_complete_one(fn, recv, true, nullptr, nullptr);
}

void p2p_join_send(MPI_Request recv, MPI_Request* send, std::shared_ptr<CollData> keep) {
  Shim& s = S();
  const int si = req_index(*send);
  const bool done = s.reqs[si].local_done;  // inline, or to MPI_PROC_NULL
  const bcs_request_t t = done ? BCS_REQUEST_NULL : s.reqs[si].breq;
  const int error = done ? s.reqs[si].local_error : BCS_OK;
  std::shared_ptr<CollData> staged = s.reqs[si].coll;  // a send type with holes
  req_release(si);
  *send = MPI_REQUEST_NULL;
  Req& r = s.reqs[static_cast<size_t>(req_index(recv))];
  if (t == BCS_REQUEST_NULL) {
    req_then_done(r, error);
    return;
  }
  r.then = t;
  if (keep && staged) keep->staging = staged;
  r.then_keep = keep ? std::move(keep) : std::move(staged);
}
int p2p_check(const char* fn, MPI_Comm c, const void* buf, int count, MPI_Datatype type,
              int peer, int tag, bool is_recv, int* comm, size_t* bytes) {
  return check_p2p(fn, c, buf, count, type, peer, tag, is_recv, comm, bytes);
}

}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

// ------------------------------------------------------------ point-to-point

int bcs_impl_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c) {
  return send("MPI_Send", buf, count, type, dest, tag, c, false);
}

int bcs_impl_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c) {
  return send("MPI_Ssend", buf, count, type, dest, tag, c, true);
}

int bcs_impl_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c,
                MPI_Request* request) {
  return isend("MPI_Issend", buf, count, type, dest, tag, c, request, true);
}

int bcs_impl_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm c,
              MPI_Status* st) {
  static const char fn[] = "MPI_Recv";
  REQUIRE_RUNNING(fn);
  int comm;
  size_t bytes;
  if (int e = check_p2p(fn, c, buf, count, type, source, tag, true, &comm, &bytes)) return e;
  if (source == MPI_PROC_NULL) {
    set_proc_null_status(st);
    return MPI_SUCCESS;
  }
  if (S().singleton) return singleton_p2p(comm, fn);
  const uint64_t wild = replay::g_mode != replay::Mode::off ? replay::recv_posted(fn, &source, &tag) : 0;
  const P2pBuf staged = stage_recv(buf, count, type);
  bcs_msg_status_t b{};
  const int e = post_with_retry([&] {
    return post_recv(staged, buf, bytes, to_world(comm, source), tag, context_of(comm),
                     BCS_BLOCKING, nullptr, &b);
  });
  if (staged.keep && staged.keep->unpack) staged.keep->unpack(b.bytes);
  if (wild && !bcs_failed(b.error)) replay::recv_matched(fn, wild, from_world(comm, b.source), b.tag, b.seq, b.slice);
  if (e == BCS_OK || e == b.error) {
    set_status(st, from_world(comm, b.source), b.tag, static_cast<long long>(b.bytes),
               bcs_to_class(b.error));
  }
  if (e != BCS_OK) return raise_bcs(comm, fn, e, bytes);
  return MPI_SUCCESS;
}

int bcs_impl_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c,
               MPI_Request* request) {
  return isend("MPI_Isend", buf, count, type, dest, tag, c, request);
}

int bcs_impl_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm c,
               MPI_Request* request) {
  return irecv("MPI_Irecv", buf, count, type, source, tag, c, request);
}

int bcs_impl_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                  int sendtag, void* recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                  int recvtag, MPI_Comm c, MPI_Status* st) {
  static const char fn[] = "MPI_Sendrecv";
  MPI_Request r[2];
  if (int e = post_sendrecv(fn, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                            recvtype, source, recvtag, c, r))
    return e;
  // Wait for the send first, then the receive, so the receive's error (if
  // any) is reported with MPI_Sendrecv's own class rather than IN_STATUS.
  if (int e = p2p_complete_one(fn, &r[0], true, nullptr, nullptr)) return e;
  return p2p_complete_one(fn, &r[1], true, nullptr, st);
}

// MPI 4.0: one request for both halves. The receive is the request (its
// status is the request's); the send is its send half (Req::then), which
// the completions wait for as well.
int bcs_impl_Isendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                       int sendtag, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                       int source, int recvtag, MPI_Comm c, MPI_Request* request) {
  static const char fn[] = "MPI_Isendrecv";
  if (!request) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "NULL request pointer");
  MPI_Request r[2];
  if (int e = post_sendrecv(fn, sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                            recvtype, source, recvtag, c, r))
    return e;
  p2p_join_send(r[1], &r[0], nullptr);
  *request = r[1];
  return MPI_SUCCESS;
}

int bcs_impl_Probe(int source, int tag, MPI_Comm c, MPI_Status* st) {
  static const char fn[] = "MPI_Probe";
  REQUIRE_RUNNING(fn);
  int comm;
  size_t bytes;
  if (int e = check_p2p(fn, c, nullptr, 0, MPI_BYTE, source, tag, true, &comm, &bytes)) return e;
  if (source == MPI_PROC_NULL) {
    set_proc_null_status(st);
    return MPI_SUCCESS;
  }
  if (S().singleton) return singleton_p2p(comm, fn);
  const bool wild = source == MPI_ANY_SOURCE || tag == MPI_ANY_TAG;
  if (wild && replay::g_mode == replay::Mode::replay) {  // the message it found
    const auto r = replay::next(record::Kind::probe, fn);
    source = r.source;
    tag = r.tag;
  }
  bcs_msg_status_t b{};
  const int e = post_with_retry([&] {
    return bcs_probe(to_world(comm, source), tag, context_of(comm), BCS_BLOCKING, nullptr, &b);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  if (wild && replay::g_mode == replay::Mode::record) {
    record::Event r;
    r.kind = record::Kind::probe;
    r.source = from_world(comm, b.source);
    r.tag = b.tag;
    replay::record(r);
  }
  set_status(st, from_world(comm, b.source), b.tag, static_cast<long long>(b.bytes), MPI_SUCCESS);
  return MPI_SUCCESS;
}

int bcs_impl_Iprobe(int source, int tag, MPI_Comm c, int* flag, MPI_Status* st) {
  static const char fn[] = "MPI_Iprobe";
  REQUIRE_RUNNING(fn);
  int comm;
  size_t bytes;
  if (int e = check_p2p(fn, c, nullptr, 0, MPI_BYTE, source, tag, true, &comm, &bytes)) return e;
  if (!flag) return raise_error(comm, fn, MPI_ERR_ARG, "NULL flag pointer");
  if (source == MPI_PROC_NULL) {
    *flag = 1;
    set_proc_null_status(st);
    return MPI_SUCCESS;
  }
  if (S().singleton) return singleton_p2p(comm, fn);
  if (replay::g_mode == replay::Mode::replay) {
    // Not found then: not found now, without asking. Found: the same
    // message, waited for.
    const auto r = replay::next(record::Kind::iprobe, fn);
    if (!r.flag) {
      *flag = 0;
      return MPI_SUCCESS;
    }
    *flag = 1;
    return bcs_impl_Probe(r.source, r.tag, c, st);
  }
  bcs_msg_status_t b{};
  int found = 0;
  const int e = post_with_retry([&] {
    return bcs_probe(to_world(comm, source), tag, context_of(comm), BCS_NONBLOCKING, &found, &b);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  if (replay::g_mode == replay::Mode::record) {
    record::Event r;
    r.kind = record::Kind::iprobe;
    r.flag = found != 0;
    if (found) {
      r.source = from_world(comm, b.source);
      r.tag = b.tag;
    }
    replay::record(r);
  }
  *flag = found;
  if (found)
    set_status(st, from_world(comm, b.source), b.tag, static_cast<long long>(b.bytes),
               MPI_SUCCESS);
  return MPI_SUCCESS;
}

}  // extern "C"
