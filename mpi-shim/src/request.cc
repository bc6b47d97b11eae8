// The request families beyond p2p.cc's basic ones: MPI_Waitsome /
// MPI_Testsome, persistent requests (MPI_Send_init, _Ssend_init,
// _Rsend_init, _Bsend_init, _Recv_init, MPI_Start, MPI_Startall), the ready
// mode (MPI_Rsend, MPI_Irsend: a standard send is a correct ready send),
// the buffered mode (MPI_Buffer_attach/detach, MPI_Bsend, MPI_Ibsend) and
// MPI_Sendrecv_replace.
//
// Buffered sends copy the message out of the caller's buffer at once and
// account for it, plus MPI_BSEND_OVERHEAD, against the attached buffer's
// size: a message that does not fit gets MPI_ERR_BUFFER, as MPI says. The
// copy lives in the shim (the attached memory is only the budget), until
// the runtime has sent it; MPI_Buffer_detach waits for all of them.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "replay.h"
#include "shim.h"

namespace bcs::shim {
namespace {

// ------------------------------------------------------------ buffered mode

struct Buffered {
  uint64_t id = 0;  // names it to an MPI_Ibsend request (MPI_Cancel)
  MPI_Request req = MPI_REQUEST_NULL;
  std::vector<unsigned char> copy;
  int64_t charge = 0;
};

struct BsendState {
  void* buf = nullptr;
  int size = 0;
  bool attached = false;
  int64_t used = 0;
  uint64_t last_id = 0;
  std::vector<std::unique_ptr<Buffered>> pending;
};

BsendState& bsend() {
  static BsendState b;
  return b;
}

// Releases the budget of buffered messages the runtime has sent, of those
// numbered up to `upto`. True when none of those is left.
bool bsend_reclaim(bool wait, uint64_t upto = UINT64_MAX) {
  auto& b = bsend();
  bool all_gone = true;
  for (auto it = b.pending.begin(); it != b.pending.end();) {
    if ((*it)->id > upto) {  // buffered after the flush that asks
      ++it;
      continue;
    }
    int done = 0;
    p2p_complete_one("MPI_Bsend", &(*it)->req, wait, &done, MPI_STATUS_IGNORE);
    if (wait || done) {
      b.used -= (*it)->charge;
      it = b.pending.erase(it);
    } else {
      all_gone = false;
      ++it;
    }
  }
  return all_gone;
}

int bsend(const char* fn, const void* buf, int count, MPI_Datatype type, int dest, int tag,
          MPI_Comm c) {
  REQUIRE_RUNNING(fn);
  const int comm = comm_index(c);
  if (comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (count < 0) return raise_error(comm, fn, MPI_ERR_COUNT, "negative count %d", count);
  if (count > 0)
    if (int e = check_usable(comm, fn, type)) return e;
  auto& b = bsend();
  if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
  const int64_t bytes = count > 0 ? static_cast<int64_t>(count) * type_size(type) : 0;
  const int64_t charge = bytes + MPI_BSEND_OVERHEAD;
  bsend_reclaim(false);
  if (!b.attached)
    return raise_error(comm, fn, MPI_ERR_BUFFER,
                       "no buffer attached (MPI_Buffer_attach) for a buffered send");
  if (b.used + charge > b.size)
    return raise_error(comm, fn, MPI_ERR_BUFFER,
                       "the attached buffer of %d bytes has %lld free, the message needs %lld "
                       "(%lld + MPI_BSEND_OVERHEAD)",
                       b.size, static_cast<long long>(b.size - b.used),
                       static_cast<long long>(charge), static_cast<long long>(bytes));
  auto m = std::make_unique<Buffered>();
  m->copy.resize(static_cast<size_t>(bytes));
  if (bytes > 0) type_pack(buf, count, type, m->copy.data());
  m->charge = charge;
  if (int e = p2p_isend(fn, m->copy.data(), static_cast<int>(bytes), MPI_BYTE, dest, tag, c,
                        &m->req, false))
    return e;
  b.used += charge;
  m->id = ++b.last_id;
  b.pending.push_back(std::move(m));
  return MPI_SUCCESS;
}

}  // namespace

// MPI_Cancel of an MPI_Ibsend request: cancels its buffered message's send
// if the runtime has not delivered it yet. The message leaves the buffer's
// accounting and the request takes over the send's state (its copy kept
// alive until the send is done), so it completes with the send's outcome.
int bsend_cancel(int idx) {
  auto& b = bsend();
  const uint64_t id = std::exchange(S().reqs[static_cast<size_t>(idx)].bsend_id, 0);
  const auto it = std::find_if(b.pending.begin(), b.pending.end(),
                               [&](const auto& m) { return m->id == id; });
  if (it == b.pending.end()) return MPI_SUCCESS;  // sent: the request stands as done
  std::shared_ptr<Buffered> m = std::move(*it);
  b.pending.erase(it);
  b.used -= m->charge;
  MPI_Request inner = m->req;
  if (int e = bcs_impl_Cancel(&inner)) return e;
  const int ii = req_index(inner);
  const Req in = S().reqs[static_cast<size_t>(ii)];
  req_release(ii);
  Req& r = S().reqs[static_cast<size_t>(idx)];
  r.local_done = in.local_done;
  r.local_status = in.local_status;
  r.local_error = in.local_error;
  r.breq = in.breq;
  r.cancelling = in.cancelling;
  r.coll = std::make_shared<CollData>();
  r.coll->staging = std::move(m);
  return MPI_SUCCESS;
}

namespace {

// A request that is complete already (MPI_Ibsend: the message is buffered).
MPI_Request done_request(int comm) {
  Req r;
  r.comm = comm;
  r.local_done = true;
  set_empty_status(&r.local_status);
  return req_alloc(std::move(r));
}

// ------------------------------------------------------------ persistent

// `type` is held until the request is freed: the program may free its
// handle right after the init call and still start the request.
int make_persistent(const char* fn, MPI_Comm c, MPI_Datatype type, MPI_Request* request,
                    std::function<int(MPI_Request*)> start) {
  return persistent_request(fn, c, {type_hold(type)}, request, std::move(start));
}

// Checks the arguments of a persistent point-to-point request once, at
// creation, by the rules of its operation (so MPI_Start cannot fail on them).
int check_args(const char* fn, MPI_Comm c, int count, MPI_Datatype type, int peer, int tag,
               bool recv) {
  const int comm = comm_index(c);
  if (comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (count < 0) return raise_error(comm, fn, MPI_ERR_COUNT, "negative count %d", count);
  if (count > 0)
    if (int e = check_usable(comm, fn, type)) return e;
  const int n = comm_size(comm);
  if (!((peer >= 0 && peer < n) || peer == MPI_PROC_NULL || (recv && peer == MPI_ANY_SOURCE)))
    return raise_error(comm, fn, MPI_ERR_RANK, "%s %d out of range (communicator size %d)",
                       recv ? "source" : "destination", peer, n);
  if (!((tag >= 0 && tag <= kTagUb) || (recv && tag == MPI_ANY_TAG)))
    return raise_error(comm, fn, MPI_ERR_TAG, "tag %d out of range (0..%d)", tag, kTagUb);
  return MPI_SUCCESS;
}

// Both halves of MPI_(I)Sendrecv_replace, checked before either is posted:
// the outgoing data is packed into *out first, so the receive (r[1]) may
// land in `buf` while the send (r[0]) reads the copy. If the send cannot be
// posted, the receive is taken back.
int post_replace(const char* fn, void* buf, int count, MPI_Datatype type, int dest, int sendtag,
                 int source, int recvtag, MPI_Comm c, MPI_Request r[2],
                 std::shared_ptr<CollData>* out) {
  REQUIRE_RUNNING(fn);
  if (int e = check_args(fn, c, count, type, dest, sendtag, false)) return e;
  if (int e = check_args(fn, c, count, type, source, recvtag, true)) return e;
  const int64_t bytes = count > 0 ? static_cast<int64_t>(count) * type_size(type) : 0;
  *out = std::make_shared<CollData>();
  (*out)->tmp.resize(static_cast<size_t>(bytes));
  if (bytes > 0) type_pack(buf, count, type, (*out)->tmp.data());
  r[0] = r[1] = MPI_REQUEST_NULL;
  if (int e = p2p_irecv(fn, buf, count, type, source, recvtag, c, &r[1])) return e;
  if (int e = p2p_isend(fn, (*out)->tmp.data(), static_cast<int>(bytes), MPI_BYTE, dest, sendtag,
                        c, &r[0], false)) {
    p2p_withdraw_recv(fn, &r[1]);
    return e;
  }
  return MPI_SUCCESS;
}

int start_one(const char* fn, MPI_Request* request) {
  if (!request) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "NULL request pointer");
  const int idx = req_index(*request);
  if (idx < 0 || !S().reqs[idx].persistent)
    return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "0x%x is not a persistent request", *request);
  if (S().reqs[idx].active)
    return raise_error(S().reqs[idx].comm, fn, MPI_ERR_REQUEST,
                       "the persistent request is active already (complete it first)");
  const auto start = S().reqs[idx].start;  // a copy: posting may grow the table
  MPI_Request t = MPI_REQUEST_NULL;
  if (int e = start(&t)) return e;
  const int ti = req_index(t);
  const Req round = S().reqs[ti];
  req_release(ti);
  Req& p = S().reqs[idx];
  p.breq = round.breq;
  p.local_done = round.local_done;
  p.local_status = round.local_status;
  p.is_recv = round.is_recv;
  p.cap = round.cap;
  p.sent_to = round.sent_to;  // MPI_Cancel of this round
  p.sent_seq = round.sent_seq;
  p.bsend_id = round.bsend_id;
  p.cancelling = false;
  p.coll = round.coll;
  p.is_coll = round.is_coll;
  p.local_error = round.local_error;
  p.active = true;
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ Waitsome / Testsome

// The requests a wait-some or test-some completed, in the order found: the
// indices, the statuses (unless ignored), the first error.
struct Found {
  int* outcount;
  int* indices;
  MPI_Status* sts;  // null: MPI_STATUSES_IGNORE
  int first_error = MPI_SUCCESS;
  void add(int i, const MPI_Status& st, int e) {
    indices[*outcount] = i;
    if (sts) sts[*outcount] = st;
    ++*outcount;
    if (e != MPI_SUCCESS && first_error == MPI_SUCCESS) first_error = e;
  }
  int result() const { return first_error == MPI_SUCCESS ? MPI_SUCCESS : MPI_ERR_IN_STATUS; }
};

int complete_some(const char* fn, int n, MPI_Request* reqs, bool blocking, int* outcount,
                  int* indices, MPI_Status* sts) {
  REQUIRE_RUNNING(fn);
  if (n < 0) return raise_error(kNoComm, fn, MPI_ERR_COUNT, "negative count %d", n);
  if (!outcount || (n > 0 && (!reqs || !indices)))
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL outcount, requests or indices");
  const bool keep = sts && sts != MPI_STATUSES_IGNORE;
  // Active requests only: null and inactive persistent ones do not count.
  bool any_active = false;
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    const int idx = req_index(reqs[i]);
    if (idx < 0)
      return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "invalid request handle 0x%x at index %d",
                         reqs[i], i);
    if (!(S().reqs[idx].persistent && !S().reqs[idx].active)) any_active = true;
  }
  *outcount = 0;
  if (!any_active) {
    *outcount = MPI_UNDEFINED;
    return MPI_SUCCESS;
  }
  Found found{outcount, indices, keep ? sts : nullptr};
  // One sweep without blocking; if nothing completed and we may block, wait
  // for one (MPI_Waitany) and sweep again for the others that are done.
  for (int pass = 0; pass < 2 && *outcount == 0; ++pass) {
    if (pass == 1) {
      if (!blocking) break;
      int index = MPI_UNDEFINED;
      MPI_Status st{};  // MPI_ERROR = MPI_SUCCESS unless the completion failed
      const int e = p2p_complete_any(fn, n, reqs, true, &index, nullptr, &st);
      if (index == MPI_UNDEFINED) break;
      found.add(index, st, e);
    }
    for (int i = 0; i < n; ++i) {
      if (reqs[i] == MPI_REQUEST_NULL) continue;
      const int idx = req_index(reqs[i]);
      if (S().reqs[idx].persistent && !S().reqs[idx].active) continue;
      if (pass == 1 && std::find(indices, indices + *outcount, i) != indices + *outcount) continue;
      int done = 0;
      MPI_Status st{};
      const int e = p2p_complete_one(fn, &reqs[i], false, &done, &st);
      if (!done) continue;
      found.add(i, st, e);
    }
  }
  return found.result();
}

}  // namespace

int persistent_request(const char* fn, MPI_Comm c, std::vector<std::shared_ptr<void>> holds,
                       MPI_Request* request, std::function<int(MPI_Request*)> start) {
  REQUIRE_RUNNING(fn);
  const int comm = comm_index(c);
  if (comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (!request) return raise_error(comm, fn, MPI_ERR_REQUEST, "NULL request pointer");
  Req r;
  r.comm = comm;
  r.persistent = true;
  r.active = false;
  r.local_done = true;
  set_empty_status(&r.local_status);
  r.start = [h = std::move(holds), f = std::move(start)](MPI_Request* q) { return f(q); };
  *request = req_alloc(std::move(r));
  return MPI_SUCCESS;
}

}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

namespace {

// Wait-some / test-some under record and replay: the recording holds the
// indices that completed (flag set: outcount was MPI_UNDEFINED); a replay
// waits for exactly those, in that order, and for nothing else.
int some(const char* fn, record::Kind kind, int incount, MPI_Request reqs[], int* outcount,
         int indices[], MPI_Status* sts) {
  const bool blocking = kind == record::Kind::waitsome;
  if (replay::g_mode != replay::Mode::replay) {
    const int e = complete_some(fn, incount, reqs, blocking, outcount, indices, sts);
    if (replay::g_mode == replay::Mode::record && outcount) {
      record::Event r;
      r.kind = kind;
      r.flag = *outcount == MPI_UNDEFINED;
      if (!r.flag && indices) r.indices.assign(indices, indices + *outcount);
      replay::record(r);
    }
    return e;
  }
  const auto r = replay::next(kind, fn);
  if (r.flag) return complete_some(fn, incount, reqs, blocking, outcount, indices, sts);
  if (!outcount || (!r.indices.empty() && (!reqs || !indices)))
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL outcount, requests or indices");
  const bool keep = sts && sts != MPI_STATUSES_IGNORE;
  *outcount = 0;
  Found found{outcount, indices, keep ? sts : nullptr};
  for (int32_t i : r.indices) {
    if (i < 0 || i >= incount || reqs[i] == MPI_REQUEST_NULL)
      replay::diverge(fn, record::describe(r),
                      "a call with " + std::to_string(incount) + " requests, " + std::to_string(i) +
                          " not active");
    MPI_Status st{};
    found.add(i, st, p2p_complete_one(fn, &reqs[i], true, nullptr, &st));
  }
  return found.result();
}

}  // namespace

int bcs_impl_Waitsome(int incount, MPI_Request reqs[], int* outcount, int indices[], MPI_Status* sts) {
  return some("MPI_Waitsome", record::Kind::waitsome, incount, reqs, outcount, indices, sts);
}

int bcs_impl_Testsome(int incount, MPI_Request reqs[], int* outcount, int indices[], MPI_Status* sts) {
  return some("MPI_Testsome", record::Kind::testsome, incount, reqs, outcount, indices, sts);
}

// ------------------------------------------------------------ ready mode

int bcs_impl_Rsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c) {
  // A ready send may be a standard send (MPI-3.1 §3.4): the receive is
  // posted, so nothing waits on the match.
  MPI_Request r = MPI_REQUEST_NULL;
  if (int e = p2p_isend("MPI_Rsend", buf, count, type, dest, tag, c, &r, false)) return e;
  return p2p_complete_one("MPI_Rsend", &r, true, nullptr, MPI_STATUS_IGNORE);
}

int bcs_impl_Irsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c,
                MPI_Request* request) {
  return p2p_isend("MPI_Irsend", buf, count, type, dest, tag, c, request, false);
}

// ------------------------------------------------------------ buffered mode

int bcs_impl_Buffer_attach(void* buffer, int size) {
  static const char fn[] = "MPI_Buffer_attach";
  REQUIRE_RUNNING(fn);
  auto& b = bsend();
  if (b.attached)
    return raise_error(kNoComm, fn, MPI_ERR_BUFFER, "a buffer is attached already (detach it first)");
  if (size < 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "negative size %d", size);
  if (!buffer && size > 0) return raise_error(kNoComm, fn, MPI_ERR_BUFFER, "NULL buffer");
  b.buf = buffer;
  b.size = size;
  b.attached = true;
  return MPI_SUCCESS;
}

int bcs_impl_Buffer_detach(void* buffer_addr, int* size) {
  static const char fn[] = "MPI_Buffer_detach";
  REQUIRE_RUNNING(fn);
  if (!buffer_addr || !size) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL argument");
  auto& b = bsend();
  if (!b.attached) return raise_error(kNoComm, fn, MPI_ERR_BUFFER, "no buffer is attached");
  bsend_reclaim(true);  // MPI: detach returns once every buffered message has gone
  *static_cast<void**>(buffer_addr) = b.buf;
  *size = b.size;
  // Message numbers go on across attachments: a flush request (and an
  // MPI_Ibsend's) names messages by them.
  const uint64_t last = b.last_id;
  b = BsendState{};
  b.last_id = last;
  return MPI_SUCCESS;
}

// MPI 4.1: every message buffered so far has gone (the buffer stays
// attached, its space free again).
int bcs_impl_Buffer_flush(void) {
  static const char fn[] = "MPI_Buffer_flush";
  REQUIRE_RUNNING(fn);
  bsend_reclaim(true);
  return MPI_SUCCESS;
}

// The same, as a request: it completes once the messages buffered before
// the call have gone (a receive they wait for may be posted after it).
// One of the shim's own generalized requests (Greq::settle): the waits
// look at it, and MPI_Cancel of it does nothing.
int bcs_impl_Buffer_iflush(MPI_Request* request) {
  static const char fn[] = "MPI_Buffer_iflush";
  REQUIRE_RUNNING(fn);
  if (!request) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "NULL request pointer");
  const uint64_t upto = bsend().last_id;
  Req r;
  r.comm = kSelf;
  r.greq = std::make_shared<Greq>();
  r.greq->settle = [upto](bool wait) { return bsend_reclaim(wait, upto); };
  *request = req_alloc(std::move(r));
  return MPI_SUCCESS;
}

int bcs_impl_Bsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c) {
  return bsend("MPI_Bsend", buf, count, type, dest, tag, c);
}

int bcs_impl_Ibsend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c,
                MPI_Request* request) {
  static const char fn[] = "MPI_Ibsend";
  if (!request) return raise_error(comm_index(c), fn, MPI_ERR_REQUEST, "NULL request pointer");
  if (int e = bsend(fn, buf, count, type, dest, tag, c)) return e;
  *request = done_request(comm_index(c));
  if (dest != MPI_PROC_NULL) S().reqs[static_cast<size_t>(req_index(*request))].bsend_id = bsend().last_id;
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ persistent

int bcs_impl_Send_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c,
                   MPI_Request* request) {
  if (int e = check_args("MPI_Send_init", c, count, type, dest, tag, false)) return e;
  return make_persistent("MPI_Send_init", c, type, request, [=](MPI_Request* r) {
    return p2p_isend("MPI_Start", buf, count, type, dest, tag, c, r, false);
  });
}

int bcs_impl_Ssend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c,
                    MPI_Request* request) {
  if (int e = check_args("MPI_Ssend_init", c, count, type, dest, tag, false)) return e;
  return make_persistent("MPI_Ssend_init", c, type, request, [=](MPI_Request* r) {
    return p2p_isend("MPI_Start", buf, count, type, dest, tag, c, r, true);
  });
}

int bcs_impl_Rsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c,
                    MPI_Request* request) {
  if (int e = check_args("MPI_Rsend_init", c, count, type, dest, tag, false)) return e;
  return make_persistent("MPI_Rsend_init", c, type, request, [=](MPI_Request* r) {
    return p2p_isend("MPI_Start", buf, count, type, dest, tag, c, r, false);
  });
}

int bcs_impl_Bsend_init(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c,
                    MPI_Request* request) {
  if (int e = check_args("MPI_Bsend_init", c, count, type, dest, tag, false)) return e;
  return make_persistent("MPI_Bsend_init", c, type, request, [=](MPI_Request* r) {
    return PMPI_Ibsend(buf, count, type, dest, tag, c, r);
  });
}

int bcs_impl_Recv_init(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm c,
                   MPI_Request* request) {
  if (int e = check_args("MPI_Recv_init", c, count, type, source, tag, true)) return e;
  return make_persistent("MPI_Recv_init", c, type, request, [=](MPI_Request* r) {
    return p2p_irecv("MPI_Start", buf, count, type, source, tag, c, r);
  });
}

int bcs_impl_Start(MPI_Request* request) {
  REQUIRE_RUNNING("MPI_Start");
  return start_one("MPI_Start", request);
}

int bcs_impl_Startall(int count, MPI_Request reqs[]) {
  static const char fn[] = "MPI_Startall";
  REQUIRE_RUNNING(fn);
  if (count < 0) return raise_error(kNoComm, fn, MPI_ERR_COUNT, "negative count %d", count);
  if (count > 0 && !reqs) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "NULL request array");
  for (int i = 0; i < count; ++i)
    if (int e = start_one(fn, &reqs[i])) return e;
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ Sendrecv_replace (post_replace above)

int bcs_impl_Sendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int sendtag,
                          int source, int recvtag, MPI_Comm c, MPI_Status* st) {
  static const char fn[] = "MPI_Sendrecv_replace";
  MPI_Request r[2];
  std::shared_ptr<CollData> out;
  if (int e = post_replace(fn, buf, count, type, dest, sendtag, source, recvtag, c, r, &out))
    return e;
  if (int e = p2p_complete_one(fn, &r[0], true, nullptr, MPI_STATUS_IGNORE)) return e;
  return p2p_complete_one(fn, &r[1], true, nullptr, st);
}

// MPI 4.0: MPI_Sendrecv_replace with a request, which keeps the packed copy
// until its send half is done (Req::then_keep).
int bcs_impl_Isendrecv_replace(void* buf, int count, MPI_Datatype type, int dest, int sendtag,
                               int source, int recvtag, MPI_Comm c, MPI_Request* request) {
  static const char fn[] = "MPI_Isendrecv_replace";
  if (!request) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "NULL request pointer");
  MPI_Request r[2];
  std::shared_ptr<CollData> out;
  if (int e = post_replace(fn, buf, count, type, dest, sendtag, source, recvtag, c, r, &out))
    return e;
  p2p_join_send(r[1], &r[0], std::move(out));
  *request = r[1];
  return MPI_SUCCESS;
}

}  // extern "C"
