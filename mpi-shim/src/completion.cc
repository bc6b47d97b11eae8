// Completion of MPI requests over the runtime's (bcs_test, bcs_testall,
// bcs_testany): the statuses, the rank's own part of a collective after
// its runtime part (a user-op fold), errors raised after every request of
// a call is released. The MPI entry points are in wait.cc; p2p.cc and
// request.cc use these through the p2p_* names of shim.h.
#include <algorithm>
#include <vector>

#include "replay.h"
#include "shim.h"

namespace bcs::shim {
namespace {

// ------------------------------------------------------------ completion

// Status of a completed BCS request of MPI request `r`.
void status_from_bcs(const Req& r, const bcs_msg_status_t& b, MPI_Status* st) {
  if (b.error == BCS_CANCELLED) {  // MPI_Cancel took it: no data, not an error
    set_status(st, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS);
    if (!ignored(st)) st->bcs_cancelled = 1;
    return;
  }
  if (r.is_recv) {
    if (r.wild && replay::g_mode != replay::Mode::off && !bcs_failed(b.error))
      replay::recv_matched("MPI_Irecv", r.wild, from_world(r.comm, b.source), b.tag, b.seq, b.slice);
    set_status(st, from_world(r.comm, b.source), b.tag, static_cast<long long>(b.bytes),
               bcs_to_class(b.error));
  }
  else
    set_status(st, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, bcs_to_class(b.error));
}

// The rank's own part of a collective whose runtime part just completed
// without error (the fold of a user-op reduction). Runs before the request
// is released, so the data it works on is still alive.
void finish_coll(const Req& r, int error, uint64_t bytes = 0) {
  if (!r.coll) return;
  if (r.coll->unpack) {
    // A receive of a datatype with holes: what arrived goes to the user's
    // buffer (also on truncation: the bytes that fit did arrive).
    const auto u = std::move(r.coll->unpack);
    r.coll->unpack = nullptr;
    u(bytes);
    return;
  }
  if (error != BCS_OK || !r.coll->finish) return;
  const std::shared_ptr<CollData> keep = r.coll;
  const auto f = std::move(keep->finish);
  keep->finish = nullptr;
  f();
}

// Validates an array of request handles (MPI_REQUEST_NULL allowed).
int check_requests(const char* fn, int n, const MPI_Request* reqs) {
  if (n < 0) return raise_error(kNoComm, fn, MPI_ERR_COUNT, "negative count %d", n);
  if (n > 0 && !reqs) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "NULL request array");
  for (int i = 0; i < n; ++i)
    if (reqs[i] != MPI_REQUEST_NULL && req_index(reqs[i]) < 0)
      return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "invalid request handle 0x%x at index %d",
                         reqs[i], i);
  return MPI_SUCCESS;
}

// Waitall / Testall.
int complete_all(const char* fn, int n, MPI_Request* reqs, bcs_mode_t mode, int* flag,
                 MPI_Status* sts) {
  REQUIRE_RUNNING(fn);
  if (int e = check_requests(fn, n, reqs)) return e;
  req_settle_self(n, reqs, mode == BCS_BLOCKING);
  Shim& s = S();
  std::vector<bcs_request_t> b(static_cast<size_t>(n), BCS_REQUEST_NULL);
  std::vector<bcs_msg_status_t> bs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    const Req& r = s.reqs[req_index(reqs[i])];
    if (r.greq && !r.local_done) {  // a generalized request the program has not completed
      if (mode == BCS_BLOCKING) return greq_never_completes(r.comm, fn);
      if (flag) *flag = 0;
      return MPI_SUCCESS;
    }
  }
  // The send halves of MPI_Isendrecv requests first (waited for, if blocking).
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    if (!p2p_settle_then(s.reqs[req_index(reqs[i])], mode == BCS_BLOCKING)) {
      if (flag) *flag = 0;
      return MPI_SUCCESS;
    }
  }
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    const Req& r = s.reqs[req_index(reqs[i])];
    if (!r.local_done) b[i] = r.breq;
  }
  int done = 1;
  // Only requests with a BCS half go to the runtime (none in singleton mode).
  if (std::any_of(b.begin(), b.end(), [](bcs_request_t x) { return x != BCS_REQUEST_NULL; })) {
    const int e = bcs_testall(n, b.data(), mode, &done, bs.data());
    if (e == BCS_ERR_ARG || e == BCS_ERR_NOT_INIT) return raise_bcs(kNoComm, fn, e);
  }
  if (flag) *flag = done;
  if (!done) return MPI_SUCCESS;
  const bool keep = sts && sts != MPI_STATUSES_IGNORE;
  // Fill every status and release every request first, then raise: with
  // MPI_ERRORS_RETURN the table is left consistent and all handles are NULL.
  int failed = -1, failed_comm = kWorld;
  size_t failed_cap = 0;
  bool failed_coll = false;
  std::vector<char> bad(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    MPI_Status* st = keep ? &sts[i] : nullptr;
    if (reqs[i] == MPI_REQUEST_NULL) {
      set_empty_status(st);
      continue;
    }
    const int idx = req_index(reqs[i]);
    const Req& r = s.reqs[idx];
    if (r.local_done) {
      copy_status(st, r.local_status);
      if (bcs_failed(r.local_error)) {  // harvested earlier, failed
        bs[i].error = r.local_error;
        bad[static_cast<size_t>(i)] = 1;
        if (failed < 0) {
          failed = i;
          failed_comm = r.comm;
          failed_cap = r.cap;
          failed_coll = r.is_coll;
        }
      }
    } else {
      req_fold_then(r, bs[i]);
      status_from_bcs(r, bs[i], st);
      bad[static_cast<size_t>(i)] = bcs_failed(bs[i].error);
      if (bcs_failed(bs[i].error) && failed < 0) {
        failed = i;
        failed_comm = r.comm;
        failed_cap = r.cap;
        failed_coll = r.is_coll;
      }
      finish_coll(r, bs[i].error, bs[i].bytes);  // last use of r: a user function may grow the table
    }
    req_retire(idx, &reqs[i]);
  }
  if (failed < 0) return MPI_SUCCESS;
  // MPI_ERR_IN_STATUS: every status says how its request ended.
  if (keep)
    for (int i = 0; i < n; ++i)
      if (!bad[static_cast<size_t>(i)]) sts[i].MPI_ERROR = MPI_SUCCESS;
  const int e = bs[failed].error;
  const PeerGoneCause mark(e == BCS_ERR_PEER);
  if (e == BCS_ERR_TRUNCATE && failed_coll)
    return raise_error(failed_comm, fn, MPI_ERR_IN_STATUS,
                       "request %d failed: MPI_ERR_TRUNCATE: a member sent more data than the "
                       "receive buffer (block) for it holds",
                       failed);
  if (e == BCS_ERR_TRUNCATE)
    return raise_error(failed_comm, fn, MPI_ERR_IN_STATUS,
                       "request %d failed: MPI_ERR_TRUNCATE: %s (%zu bytes)", failed, bcs_text(e),
                       failed_cap);
  return raise_error(failed_comm, fn, MPI_ERR_IN_STATUS, "request %d failed: %s: %s", failed,
                     class_name(bcs_to_class(e)), bcs_text(e));
}

// Wait / Test on one request.
int complete_one(const char* fn, MPI_Request* req, bcs_mode_t mode, int* flag, MPI_Status* st) {
  REQUIRE_RUNNING(fn);
  if (!req) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "NULL request pointer");
  if (*req == MPI_REQUEST_NULL) {
    if (flag) *flag = 1;
    set_empty_status(st);
    return MPI_SUCCESS;
  }
  const int idx = req_index(*req);
  if (idx < 0) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "invalid request handle 0x%x", *req);
  req_settle_self(1, req, mode == BCS_BLOCKING);
  Shim& s = S();
  Req& r = s.reqs[idx];
  if (!p2p_settle_then(r, mode == BCS_BLOCKING)) {  // an MPI_Isendrecv's send is still going
    if (flag) *flag = 0;
    return MPI_SUCCESS;
  }
  if (r.local_done) {
    copy_status(st, r.local_status);
    const int le = r.local_error, comm = r.comm;
    const size_t cap = r.cap;
    const bool coll = r.is_coll;
    req_retire(idx, req);
    if (flag) *flag = 1;
    if (bcs_failed(le)) return coll ? raise_coll(comm, fn, le) : raise_bcs(comm, fn, le, cap);
    return MPI_SUCCESS;
  }
  if (r.greq) {
    if (mode == BCS_BLOCKING) return greq_never_completes(r.comm, fn);
    if (flag) *flag = 0;
    return MPI_SUCCESS;
  }
  int done = 0;
  bcs_msg_status_t b{};
  bcs_request_t breq = r.breq;
  const int e = bcs_test(&breq, mode, &done, &b);
  if (e == BCS_ERR_ARG || e == BCS_ERR_NOT_INIT) return raise_bcs(r.comm, fn, e);
  if (flag) *flag = done;
  if (!done) return MPI_SUCCESS;
  req_fold_then(r, b);
  status_from_bcs(r, b, st);
  const int comm = r.comm;
  const size_t cap = r.cap;
  const bool coll = r.is_coll;
  finish_coll(r, b.error, b.bytes);  // last use of r: a user function may grow the table
  req_retire(idx, req);
  if (bcs_failed(b.error))
    return coll ? raise_coll(comm, fn, b.error) : raise_bcs(comm, fn, b.error, cap);
  return MPI_SUCCESS;
}

// Waitany / Testany.
int complete_any(const char* fn, int n, MPI_Request* reqs, bcs_mode_t mode, int* index,
                 int* flag, MPI_Status* st) {
  REQUIRE_RUNNING(fn);
  if (!index) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL index pointer");
  if (int e = check_requests(fn, n, reqs)) return e;
  Shim& s = S();
  // An MPI_Isendrecv request is done when its receive and its send are:
  // the runtime is asked about its send half first, and when that is the
  // one found done, about the rest again.
  for (;;) {
    // The shim's own generalized requests are looked at, not waited for:
    // while one is open the runtime is only polled (each poll that finds
    // nothing yields), so that whichever request completes first returns.
    const bool self_open = req_settle_self(n, reqs, false);
    const bcs_mode_t m = self_open ? BCS_NONBLOCKING : mode;
    // Requests completed locally (MPI_PROC_NULL) are ready now.
    for (int i = 0; i < n; ++i) {
      if (reqs[i] == MPI_REQUEST_NULL) continue;
      const int idx = req_index(reqs[i]);
      if (s.reqs[idx].persistent && !s.reqs[idx].active) continue;  // inactive: like NULL
      if (s.reqs[idx].local_done && p2p_settle_then(s.reqs[idx], false)) {
        const Req r = s.reqs[idx];
        copy_status(st, r.local_status);
        req_retire(idx, &reqs[i]);
        *index = i;
        if (flag) *flag = 1;
        if (bcs_failed(r.local_error))
          return r.is_coll ? raise_coll(r.comm, fn, r.local_error)
                           : raise_bcs(r.comm, fn, r.local_error, r.cap);
        return MPI_SUCCESS;
      }
    }
    std::vector<bcs_request_t> b(static_cast<size_t>(n), BCS_REQUEST_NULL);
    int open_greqs = 0, greq_comm = kWorld;
    for (int i = 0; i < n; ++i)
      if (reqs[i] != MPI_REQUEST_NULL) {
        const Req& r = s.reqs[req_index(reqs[i])];
        b[i] = r.then != BCS_REQUEST_NULL ? r.then : r.breq;
        if (r.greq && !r.local_done) ++open_greqs, greq_comm = r.comm;
      }
    if (open_greqs > 0 &&
        std::none_of(b.begin(), b.end(), [](bcs_request_t x) { return x != BCS_REQUEST_NULL; })) {
      // Only generalized requests are left, and the program's cannot
      // complete meanwhile: wait for the shim's own.
      if (mode == BCS_BLOCKING && self_open) {
        req_settle_self(n, reqs, true);
        continue;
      }
      if (mode == BCS_BLOCKING) return greq_never_completes(greq_comm, fn);
      if (flag) *flag = 0;
      *index = MPI_UNDEFINED;
      return MPI_SUCCESS;
    }
    int which = -1, done = 1;
    bcs_msg_status_t bst{};
    if (std::any_of(b.begin(), b.end(), [](bcs_request_t x) { return x != BCS_REQUEST_NULL; })) {
      const int e = bcs_testany(n, b.data(), m, &which, &done, &bst);
      if (e == BCS_ERR_ARG || e == BCS_ERR_NOT_INIT) return raise_bcs(kNoComm, fn, e);
    }
    if (!done && mode == BCS_BLOCKING) continue;  // only polled: a request of the shim's is open
    if (flag) *flag = done;
    if (!done) {
      *index = MPI_UNDEFINED;
      return MPI_SUCCESS;
    }
    if (which < 0) {  // every request was MPI_REQUEST_NULL
      *index = MPI_UNDEFINED;
      set_empty_status(st);
      return MPI_SUCCESS;
    }
    const int idx = req_index(reqs[which]);
    if (s.reqs[idx].then != BCS_REQUEST_NULL) {  // its send half: the receive may still be going
      req_then_done(s.reqs[idx], bst.error);
      continue;
    }
    const Req r = s.reqs[idx];
    req_fold_then(r, bst);
    status_from_bcs(r, bst, st);
    finish_coll(r, bst.error, bst.bytes);
    req_retire(idx, &reqs[which]);
    *index = which;
    if (bcs_failed(bst.error))
      return r.is_coll ? raise_coll(r.comm, fn, bst.error) : raise_bcs(r.comm, fn, bst.error, r.cap);
    return MPI_SUCCESS;
  }
}

}  // namespace

int p2p_complete_one(const char* fn, MPI_Request* req, bool blocking, int* flag, MPI_Status* st) {
  return complete_one(fn, req, blocking ? BCS_BLOCKING : BCS_NONBLOCKING, flag, st);
}
int p2p_complete_any(const char* fn, int n, MPI_Request* reqs, bool blocking, int* index,
                     int* flag, MPI_Status* st) {
  return complete_any(fn, n, reqs, blocking ? BCS_BLOCKING : BCS_NONBLOCKING, index, flag, st);
}
int p2p_complete_all(const char* fn, int n, MPI_Request* reqs, bool blocking, int* flag,
                     MPI_Status* sts) {
  return complete_all(fn, n, reqs, blocking ? BCS_BLOCKING : BCS_NONBLOCKING, flag, sts);
}
void p2p_status_from_bcs(const Req& r, const bcs_msg_status_t& b, MPI_Status* st) {
  status_from_bcs(r, b, st);
}
void p2p_finish_coll(const Req& r, int error, uint64_t bytes) { finish_coll(r, error, bytes); }

bool req_settle_self(int n, const MPI_Request* reqs, bool wait) {
  bool open = false;
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    const int idx = req_index(reqs[i]);
    if (idx < 0) continue;
    const Req& q = S().reqs[static_cast<size_t>(idx)];
    if (!q.greq || !q.greq->settle || q.local_done) continue;  // the common case: nothing to do
    // settle() completes other requests: the table may grow meanwhile.
    const auto g = q.greq;
    if (!g->settle(wait)) {
      open = true;
      continue;
    }
    Req& r = S().reqs[static_cast<size_t>(idx)];
    r.local_done = true;
    set_empty_status(&r.local_status);
  }
  return open;
}

bool p2p_settle_then(Req& r, bool blocking) {
  if (r.then == BCS_REQUEST_NULL) return true;
  bcs_request_t t = r.then;
  int done = 0;
  bcs_msg_status_t b{};
  const int e = bcs_test(&t, blocking ? BCS_BLOCKING : BCS_NONBLOCKING, &done, &b);
  if (e == BCS_ERR_ARG || e == BCS_ERR_NOT_INIT) {  // not a live request: the send is lost
    done = 1;
    b.error = e;
  }
  if (!done) return false;
  req_then_done(r, b.error);
  return true;
}

}  // namespace bcs::shim
