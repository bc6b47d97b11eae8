// libmpi: MPI on top of the BCS API (the paper's Table 4.2).
//
//   MPI_Send / MPI_Isend        -> bcs_send (blocking / non-blocking)
//   MPI_Ssend / MPI_Issend      -> bcs_ssend (no inline completion: done once matched)
//   MPI_Recv / MPI_Irecv        -> bcs_recv (blocking / non-blocking)
//   MPI_Probe / MPI_Iprobe      -> bcs_probe (blocking / non-blocking)
//   MPI_Wait / MPI_Test         -> bcs_test (blocking / non-blocking)
//   MPI_Waitall / MPI_Testall   -> bcs_testall
//   MPI_Waitany / MPI_Testany   -> bcs_testany
//   MPI_Barrier                 -> bcs_barrier
//   MPI_Sendrecv                = Isend + Irecv + Waitall
//
// This layer owns what MPI adds on top: argument checking with the right
// error class before anything is posted, communicator rank translation,
// MPI_PROC_NULL, error handlers, datatypes (predefined, contiguous only) and
// the MPI request table (an MPI request may exist without a BCS request, e.g.
// for MPI_PROC_NULL).
//
// Every function is defined as PMPI_x with MPI_x a weak alias, so profiling
// tools can interpose MPI_x and call PMPI_x. Internal code never calls MPI_x.
#include <mpi.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <complex>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bcs/bcs.h"
#include "bcs/segment.h"

namespace {

// ------------------------------------------------------------ state

enum class Phase { before_init, running, finalized };

// Communicators known to this implementation: index 0 = world, 1 = self.
constexpr int kWorld = 0;
constexpr int kSelf = 1;
constexpr int kNoComm = -1;
constexpr int kTagUb = (1 << 30) - 1;

struct Req {
  bool used = false;
  bool local_done = false;     // completed without a BCS request (MPI_PROC_NULL)
  bool is_recv = false;
  int comm = kWorld;
  bcs_request_t breq = BCS_REQUEST_NULL;
  size_t cap = 0;              // receive capacity, for error messages
  MPI_Status local_status{};   // status of a local_done request
};

struct Shim {
  Phase phase = Phase::before_init;
  bool singleton = false;      // not started by bcs: a one-rank job without a runtime
  int rank = 0;
  int size = 1;
  int thread_level = MPI_THREAD_SINGLE;
  pthread_t main_thread{};
  MPI_Errhandler errh[2] = {MPI_ERRORS_ARE_FATAL, MPI_ERRORS_ARE_FATAL};
  std::vector<Req> reqs;
  std::vector<int> free_reqs;
  // BCS requests of MPI requests freed by MPI_Request_free while pending:
  // reclaimed once they complete (lazily, when the BCS table runs out).
  std::vector<bcs_request_t> orphans;
};

Shim& S() {
  static Shim s;
  return s;
}

// ------------------------------------------------------------ datatypes

template <typename A, typename B>
struct Pair {
  A a;
  B b;
};

constexpr int kTypeBase = 0x4c000000;
// Indexed by handle - kTypeBase; entry 0 unused.
const int kTypeSizes[] = {
    0,
    sizeof(char),                      // MPI_CHAR
    sizeof(signed char),               // MPI_SIGNED_CHAR
    sizeof(unsigned char),             // MPI_UNSIGNED_CHAR
    1,                                 // MPI_BYTE
    sizeof(short),                     // MPI_SHORT
    sizeof(unsigned short),            // MPI_UNSIGNED_SHORT
    sizeof(int),                       // MPI_INT
    sizeof(unsigned),                  // MPI_UNSIGNED
    sizeof(long),                      // MPI_LONG
    sizeof(unsigned long),             // MPI_UNSIGNED_LONG
    sizeof(long long),                 // MPI_LONG_LONG_INT
    sizeof(unsigned long long),        // MPI_UNSIGNED_LONG_LONG
    sizeof(float),                     // MPI_FLOAT
    sizeof(double),                    // MPI_DOUBLE
    sizeof(long double),               // MPI_LONG_DOUBLE
    sizeof(wchar_t),                   // MPI_WCHAR
    sizeof(bool),                      // MPI_C_BOOL (_Bool has the size of bool on this ABI)
    1, 2, 4, 8,                        // MPI_INT8_T .. MPI_INT64_T
    1, 2, 4, 8,                        // MPI_UINT8_T .. MPI_UINT64_T
    sizeof(MPI_Aint),                  // MPI_AINT
    sizeof(MPI_Offset),                // MPI_OFFSET
    sizeof(MPI_Count),                 // MPI_COUNT
    1,                                 // MPI_PACKED
    sizeof(std::complex<float>),       // MPI_C_FLOAT_COMPLEX
    sizeof(std::complex<double>),      // MPI_C_DOUBLE_COMPLEX
    sizeof(std::complex<long double>), // MPI_C_LONG_DOUBLE_COMPLEX
    sizeof(Pair<float, int>),          // MPI_FLOAT_INT
    sizeof(Pair<double, int>),         // MPI_DOUBLE_INT
    sizeof(Pair<long, int>),           // MPI_LONG_INT
    sizeof(Pair<int, int>),            // MPI_2INT
    sizeof(Pair<short, int>),          // MPI_SHORT_INT
    sizeof(Pair<long double, int>),    // MPI_LONG_DOUBLE_INT
    sizeof(bool),                      // MPI_CXX_BOOL
};
constexpr int kTypeCount = static_cast<int>(sizeof(kTypeSizes) / sizeof(kTypeSizes[0]));
static_assert(kTypeBase + kTypeCount - 1 == MPI_CXX_BOOL, "datatype table out of sync with mpi.h");

// Size in bytes of a valid datatype, or -1.
int type_size(MPI_Datatype t) {
  const long idx = static_cast<long>(t) - kTypeBase;
  if (idx < 1 || idx >= kTypeCount) return -1;
  return kTypeSizes[idx];
}

// ------------------------------------------------------------ errors

const char* class_name(int cls) {
  switch (cls) {
    case MPI_SUCCESS: return "MPI_SUCCESS";
    case MPI_ERR_BUFFER: return "MPI_ERR_BUFFER";
    case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
    case MPI_ERR_TYPE: return "MPI_ERR_TYPE";
    case MPI_ERR_TAG: return "MPI_ERR_TAG";
    case MPI_ERR_COMM: return "MPI_ERR_COMM";
    case MPI_ERR_RANK: return "MPI_ERR_RANK";
    case MPI_ERR_ROOT: return "MPI_ERR_ROOT";
    case MPI_ERR_GROUP: return "MPI_ERR_GROUP";
    case MPI_ERR_OP: return "MPI_ERR_OP";
    case MPI_ERR_TOPOLOGY: return "MPI_ERR_TOPOLOGY";
    case MPI_ERR_DIMS: return "MPI_ERR_DIMS";
    case MPI_ERR_ARG: return "MPI_ERR_ARG";
    case MPI_ERR_UNKNOWN: return "MPI_ERR_UNKNOWN";
    case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
    case MPI_ERR_OTHER: return "MPI_ERR_OTHER";
    case MPI_ERR_INTERN: return "MPI_ERR_INTERN";
    case MPI_ERR_IN_STATUS: return "MPI_ERR_IN_STATUS";
    case MPI_ERR_PENDING: return "MPI_ERR_PENDING";
    case MPI_ERR_REQUEST: return "MPI_ERR_REQUEST";
    default: return nullptr;
  }
}

const char* class_text(int cls) {
  switch (cls) {
    case MPI_SUCCESS: return "no error";
    case MPI_ERR_BUFFER: return "invalid buffer pointer";
    case MPI_ERR_COUNT: return "invalid count argument";
    case MPI_ERR_TYPE: return "invalid datatype";
    case MPI_ERR_TAG: return "invalid tag";
    case MPI_ERR_COMM: return "invalid communicator";
    case MPI_ERR_RANK: return "invalid rank";
    case MPI_ERR_ROOT: return "invalid root";
    case MPI_ERR_GROUP: return "invalid group";
    case MPI_ERR_OP: return "invalid reduction operation";
    case MPI_ERR_TOPOLOGY: return "invalid topology";
    case MPI_ERR_DIMS: return "invalid dimension argument";
    case MPI_ERR_ARG: return "invalid argument";
    case MPI_ERR_UNKNOWN: return "unknown error";
    case MPI_ERR_TRUNCATE: return "message truncated";
    case MPI_ERR_OTHER: return "other error";
    case MPI_ERR_INTERN: return "internal error";
    case MPI_ERR_IN_STATUS: return "error code is in status";
    case MPI_ERR_PENDING: return "pending request";
    case MPI_ERR_REQUEST: return "invalid request";
    default: return nullptr;
  }
}

// Raises error `cls` from `fn` on communicator `comm` (an index, or kNoComm
// for calls without one: those use MPI_COMM_WORLD's handler, as MPI says).
// ERRORS_ARE_FATAL: names the rank and the call on stderr and aborts the job
// with the error class as exit code. ERRORS_RETURN: returns the class.
int raise_error(int comm, const char* fn, int cls, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));
int raise_error(int comm, const char* fn, int cls, const char* fmt, ...) {
  Shim& s = S();
  const MPI_Errhandler h = s.errh[comm == kSelf ? kSelf : kWorld];
  if (h == MPI_ERRORS_RETURN && s.phase == Phase::running) return cls;
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "bcs: rank %d: %s: %s: %s\n", s.rank, fn, class_name(cls), detail);
  bcs_abort(cls);
}

// Maps a BCS error to an MPI class and a sentence for the handler.
int bcs_to_class(int e) {
  switch (e) {
    case BCS_OK: return MPI_SUCCESS;
    case BCS_ERR_TRUNCATE: return MPI_ERR_TRUNCATE;
    case BCS_ERR_ARG: return MPI_ERR_ARG;
    case BCS_ERR_INTERNAL: return MPI_ERR_INTERN;
    default: return MPI_ERR_OTHER;
  }
}

const char* bcs_text(int e) {
  switch (e) {
    case BCS_ERR_TRUNCATE: return "message truncated: the message is longer than the receive buffer";
    case BCS_ERR_PEER: return "the peer process is gone (its memory could not be reached)";
    case BCS_ERR_INTERNAL: return "internal error in the bcs runtime";
    case BCS_ERR_ARG: return "invalid argument passed to the bcs runtime";
    case BCS_ERR_NO_RESOURCES:
      return "too many outstanding requests (the job segment's request table is full)";
    case BCS_ERR_NOT_INIT: return "not attached to a bcs node manager";
    default: return "unknown bcs error";
  }
}

int raise_bcs(int comm, const char* fn, int e, size_t cap = 0) {
  if (e == BCS_ERR_TRUNCATE)
    return raise_error(comm, fn, MPI_ERR_TRUNCATE, "%s (%zu bytes)", bcs_text(e), cap);
  return raise_error(comm, fn, bcs_to_class(e), "%s", bcs_text(e));
}

// ------------------------------------------------------------ checks

#define REQUIRE_RUNNING(fn)                                                                   \
  do {                                                                                        \
    if (S().phase == Phase::before_init)                                                      \
      return raise_error(kNoComm, fn, MPI_ERR_OTHER, "called before MPI_Init");               \
    if (S().phase == Phase::finalized)                                                        \
      return raise_error(kNoComm, fn, MPI_ERR_OTHER, "called after MPI_Finalize");            \
  } while (0)

int comm_index(MPI_Comm c) {
  if (c == MPI_COMM_WORLD) return kWorld;
  if (c == MPI_COMM_SELF) return kSelf;
  return kNoComm;
}

int comm_size(int comm) { return comm == kSelf ? 1 : S().size; }
int comm_rank(int comm) { return comm == kSelf ? 0 : S().rank; }
int32_t context_of(int comm) { return comm == kSelf ? bcs::kContextSelf : bcs::kContextWorld; }

int32_t to_world(int comm, int r) {
  if (r == MPI_ANY_SOURCE) return BCS_ANY_SOURCE;
  return comm == kSelf ? S().rank : r;
}

int from_world(int comm, int32_t w) {
  if (comm == kSelf) return 0;
  return w;
}

bool ignored(const MPI_Status* st) { return st == nullptr || st == MPI_STATUS_IGNORE; }

void set_status(MPI_Status* st, int source, int tag, long long bytes, int err) {
  if (ignored(st)) return;
  st->MPI_SOURCE = source;
  st->MPI_TAG = tag;
  st->MPI_ERROR = err;
  st->bcs_cancelled = 0;
  st->bcs_count = bytes;
}

void set_empty_status(MPI_Status* st) { set_status(st, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS); }

void set_proc_null_status(MPI_Status* st) {
  set_status(st, MPI_PROC_NULL, MPI_ANY_TAG, 0, MPI_SUCCESS);
}

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
  const int ts = type_size(type);
  if (ts < 0 && count > 0)
    return raise_error(*comm, fn, MPI_ERR_TYPE, "invalid datatype handle 0x%x", type);
  if (!buf && count > 0)
    return raise_error(*comm, fn, MPI_ERR_BUFFER, "NULL buffer with count %d", count);
  const int n = comm_size(*comm);
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

int singleton_p2p(int comm, const char* fn) {
  return raise_error(comm, fn, MPI_ERR_OTHER,
                     "point-to-point communication needs the bcs runtime: this program must be "
                     "started with `bcs run`");
}

// ------------------------------------------------------------ requests

constexpr int kReqBase = MPI_REQUEST_NULL + 1;

// Returns the index of a live request handle, or -1.
int req_index(MPI_Request h) {
  const long idx = static_cast<long>(h) - kReqBase;
  Shim& s = S();
  if (idx < 0 || idx >= static_cast<long>(s.reqs.size()) || !s.reqs[idx].used) return -1;
  return static_cast<int>(idx);
}

MPI_Request req_alloc(Req r) {
  Shim& s = S();
  int idx;
  if (!s.free_reqs.empty()) {
    idx = s.free_reqs.back();
    s.free_reqs.pop_back();
  } else {
    idx = static_cast<int>(s.reqs.size());
    s.reqs.emplace_back();
  }
  r.used = true;
  s.reqs[idx] = r;
  return kReqBase + idx;
}

void req_release(int idx) {
  S().reqs[idx] = Req{};
  S().free_reqs.push_back(idx);
}

// Frees the BCS requests of completed orphans (MPI_Request_free'd while
// pending). Returns whether any slot was reclaimed.
bool reclaim_orphans() {
  auto& o = S().orphans;
  bool any = false;
  while (!o.empty()) {
    int index = -1, flag = 0;
    bcs_testany(static_cast<int>(o.size()), o.data(), BCS_NONBLOCKING, &index, &flag, nullptr);
    if (!flag || index < 0) break;
    o.erase(o.begin() + index);
    any = true;
  }
  return any;
}

// Runs a posting call; when the BCS request table is full, reclaims orphans
// once and retries.
template <typename Fn>
int post_with_retry(Fn fn) {
  int e = fn();
  if (e == BCS_ERR_NO_RESOURCES && reclaim_orphans()) e = fn();
  return e;
}

// Status of a completed BCS request of MPI request `r`.
void status_from_bcs(const Req& r, const bcs_msg_status_t& b, MPI_Status* st) {
  if (r.is_recv)
    set_status(st, from_world(r.comm, b.source), b.tag, static_cast<long long>(b.bytes),
               bcs_to_class(b.error));
  else
    set_status(st, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, bcs_to_class(b.error));
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
  Shim& s = S();
  std::vector<bcs_request_t> b(static_cast<size_t>(n), BCS_REQUEST_NULL);
  std::vector<bcs_msg_status_t> bs(static_cast<size_t>(n));
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
  for (int i = 0; i < n; ++i) {
    MPI_Status* st = keep ? &sts[i] : nullptr;
    if (reqs[i] == MPI_REQUEST_NULL) {
      set_empty_status(st);
      continue;
    }
    const int idx = req_index(reqs[i]);
    const Req& r = s.reqs[idx];
    if (r.local_done) {
      if (st) *st = r.local_status;
    } else {
      status_from_bcs(r, bs[i], st);
      if (bs[i].error != BCS_OK && failed < 0) {
        failed = i;
        failed_comm = r.comm;
        failed_cap = r.cap;
      }
    }
    req_release(idx);
    reqs[i] = MPI_REQUEST_NULL;
  }
  if (failed < 0) return MPI_SUCCESS;
  const int e = bs[failed].error;
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
  Shim& s = S();
  Req& r = s.reqs[idx];
  if (r.local_done) {
    if (!ignored(st)) *st = r.local_status;
    req_release(idx);
    *req = MPI_REQUEST_NULL;
    if (flag) *flag = 1;
    return MPI_SUCCESS;
  }
  int done = 0;
  bcs_msg_status_t b{};
  bcs_request_t breq = r.breq;
  const int e = bcs_test(&breq, mode, &done, &b);
  if (e == BCS_ERR_ARG || e == BCS_ERR_NOT_INIT) return raise_bcs(r.comm, fn, e);
  if (flag) *flag = done;
  if (!done) return MPI_SUCCESS;
  status_from_bcs(r, b, st);
  const int comm = r.comm;
  const size_t cap = r.cap;
  req_release(idx);
  *req = MPI_REQUEST_NULL;
  if (b.error != BCS_OK) return raise_bcs(comm, fn, b.error, cap);
  return MPI_SUCCESS;
}

// Waitany / Testany.
int complete_any(const char* fn, int n, MPI_Request* reqs, bcs_mode_t mode, int* index,
                 int* flag, MPI_Status* st) {
  REQUIRE_RUNNING(fn);
  if (!index) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL index pointer");
  if (int e = check_requests(fn, n, reqs)) return e;
  Shim& s = S();
  // Requests completed locally (MPI_PROC_NULL) are ready now.
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    const int idx = req_index(reqs[i]);
    if (s.reqs[idx].local_done) {
      if (!ignored(st)) *st = s.reqs[idx].local_status;
      req_release(idx);
      reqs[i] = MPI_REQUEST_NULL;
      *index = i;
      if (flag) *flag = 1;
      return MPI_SUCCESS;
    }
  }
  std::vector<bcs_request_t> b(static_cast<size_t>(n), BCS_REQUEST_NULL);
  for (int i = 0; i < n; ++i)
    if (reqs[i] != MPI_REQUEST_NULL) b[i] = s.reqs[req_index(reqs[i])].breq;
  int which = -1, done = 1;
  bcs_msg_status_t bst{};
  if (std::any_of(b.begin(), b.end(), [](bcs_request_t x) { return x != BCS_REQUEST_NULL; })) {
    const int e = bcs_testany(n, b.data(), mode, &which, &done, &bst);
    if (e == BCS_ERR_ARG || e == BCS_ERR_NOT_INIT) return raise_bcs(kNoComm, fn, e);
  }
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
  const Req r = s.reqs[idx];
  status_from_bcs(r, bst, st);
  req_release(idx);
  reqs[which] = MPI_REQUEST_NULL;
  *index = which;
  if (bst.error != BCS_OK) return raise_bcs(r.comm, fn, bst.error, r.cap);
  return MPI_SUCCESS;
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
    *request = req_alloc(r);
    return MPI_SUCCESS;
  }
  if (S().singleton) return singleton_p2p(comm, fn);
  bcs_request_t b = BCS_REQUEST_NULL;
  const int e = post_with_retry([&] {
    return (sync ? bcs_ssend : bcs_send)(buf, bytes, to_world(comm, dest), tag, context_of(comm),
                                         BCS_NONBLOCKING, &b);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  r.breq = b;
  *request = req_alloc(r);
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
    *request = req_alloc(r);
    return MPI_SUCCESS;
  }
  if (S().singleton) return singleton_p2p(comm, fn);
  bcs_request_t b = BCS_REQUEST_NULL;
  const int e = post_with_retry([&] {
    return bcs_recv(buf, bytes, to_world(comm, source), tag, context_of(comm), BCS_NONBLOCKING,
                    &b, nullptr);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  r.breq = b;
  *request = req_alloc(r);
  return MPI_SUCCESS;
}

double now_seconds() {
  struct timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

// ================================================================ C ABI

#define BCS_PMPI_ALIAS(name) _Pragma(BCS_STR(weak MPI_##name = PMPI_##name))
#define BCS_STR(x) #x

extern "C" {

// ------------------------------------------------------------ init / finalize

BCS_PMPI_ALIAS(Init_thread)
int PMPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  (void)argc;
  (void)argv;
  Shim& s = S();
  if (s.phase != Phase::before_init)
    return raise_error(kNoComm, "MPI_Init", MPI_ERR_OTHER,
                       s.phase == Phase::running ? "MPI_Init called twice"
                                                 : "MPI_Init called after MPI_Finalize");
  const int e = bcs_init();
  if (e == BCS_OK) {
    s.rank = bcs_world_rank();
    s.size = bcs_world_size();
  } else if (e == BCS_ERR_NOT_INIT) {
    // No node manager: run as a one-rank job (rank 0 of 1) for everything
    // that needs no runtime. Point-to-point calls explain `bcs run`.
    s.singleton = true;
    s.rank = 0;
    s.size = 1;
  } else {
    std::fprintf(stderr,
                 "bcs: MPI_Init: cannot attach to the job's shared segment (%s); this program "
                 "must be started with `bcs run`\n",
                 bcs_text(e));
    bcs_abort(MPI_ERR_OTHER);
  }
  s.main_thread = pthread_self();
  s.thread_level = std::min(std::max(required, MPI_THREAD_SINGLE), MPI_THREAD_SERIALIZED);
  if (provided) *provided = s.thread_level;
  s.phase = Phase::running;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Init)
int PMPI_Init(int* argc, char*** argv) {
  return PMPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, nullptr);
}

BCS_PMPI_ALIAS(Initialized)
int PMPI_Initialized(int* flag) {
  if (!flag) return raise_error(kNoComm, "MPI_Initialized", MPI_ERR_ARG, "NULL flag pointer");
  *flag = S().phase != Phase::before_init;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Finalized)
int PMPI_Finalized(int* flag) {
  if (!flag) return raise_error(kNoComm, "MPI_Finalized", MPI_ERR_ARG, "NULL flag pointer");
  *flag = S().phase == Phase::finalized;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Finalize)
int PMPI_Finalize(void) {
  REQUIRE_RUNNING("MPI_Finalize");
  Shim& s = S();
  if (!s.singleton) {
    // Nobody leaves before everybody arrived: a rank's memory must stay
    // readable by the NM until every message it sent has been delivered.
    const int e = bcs_barrier(bcs::kContextWorld, BCS_BLOCKING, nullptr);
    if (e != BCS_OK) return raise_bcs(kWorld, "MPI_Finalize", e);
    bcs_finalize();
  }
  s.phase = Phase::finalized;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Abort)
int PMPI_Abort(MPI_Comm comm, int errorcode) {
  (void)comm;  // every communicator here spans at most the world: abort the job
  if (S().singleton || S().phase != Phase::running)
    std::fprintf(stderr, "bcs: rank %d: MPI_Abort called with error code %d\n", S().rank,
                 errorcode);
  // Under bcs the node manager reports the abort (it reads it from the segment).
  bcs_abort(errorcode);
}

BCS_PMPI_ALIAS(Query_thread)
int PMPI_Query_thread(int* provided) {
  REQUIRE_RUNNING("MPI_Query_thread");
  if (!provided) return raise_error(kNoComm, "MPI_Query_thread", MPI_ERR_ARG, "NULL pointer");
  *provided = S().thread_level;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Is_thread_main)
int PMPI_Is_thread_main(int* flag) {
  REQUIRE_RUNNING("MPI_Is_thread_main");
  if (!flag) return raise_error(kNoComm, "MPI_Is_thread_main", MPI_ERR_ARG, "NULL pointer");
  *flag = pthread_equal(pthread_self(), S().main_thread) ? 1 : 0;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Get_version)
int PMPI_Get_version(int* version, int* subversion) {
  if (!version || !subversion)
    return raise_error(kNoComm, "MPI_Get_version", MPI_ERR_ARG, "NULL pointer");
  *version = MPI_VERSION;
  *subversion = MPI_SUBVERSION;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Get_library_version)
int PMPI_Get_library_version(char* version, int* resultlen) {
  if (!version || !resultlen)
    return raise_error(kNoComm, "MPI_Get_library_version", MPI_ERR_ARG, "NULL pointer");
  const int n = std::snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
                              "bcs %s (Buffered Coscheduling MPI, MPI %d.%d subset)",
                              BCS_VERSION_STRING, MPI_VERSION, MPI_SUBVERSION);
  *resultlen = std::min(n, MPI_MAX_LIBRARY_VERSION_STRING - 1);
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Get_processor_name)
int PMPI_Get_processor_name(char* name, int* resultlen) {
  if (!name || !resultlen)
    return raise_error(kNoComm, "MPI_Get_processor_name", MPI_ERR_ARG, "NULL pointer");
  if (gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0) std::snprintf(name, 10, "localhost");
  name[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
  *resultlen = static_cast<int>(std::strlen(name));
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Wtime)
double PMPI_Wtime(void) { return now_seconds(); }

BCS_PMPI_ALIAS(Wtick)
double PMPI_Wtick(void) {
  struct timespec ts{};
  clock_getres(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// ------------------------------------------------------------ communicators

BCS_PMPI_ALIAS(Comm_rank)
int PMPI_Comm_rank(MPI_Comm c, int* rank) {
  REQUIRE_RUNNING("MPI_Comm_rank");
  const int comm = comm_index(c);
  if (comm == kNoComm)
    return raise_error(kNoComm, "MPI_Comm_rank", MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (!rank) return raise_error(comm, "MPI_Comm_rank", MPI_ERR_ARG, "NULL rank pointer");
  *rank = comm_rank(comm);
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Comm_size)
int PMPI_Comm_size(MPI_Comm c, int* size) {
  REQUIRE_RUNNING("MPI_Comm_size");
  const int comm = comm_index(c);
  if (comm == kNoComm)
    return raise_error(kNoComm, "MPI_Comm_size", MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (!size) return raise_error(comm, "MPI_Comm_size", MPI_ERR_ARG, "NULL size pointer");
  *size = comm_size(comm);
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Comm_get_attr)
int PMPI_Comm_get_attr(MPI_Comm c, int keyval, void* attribute_val, int* flag) {
  REQUIRE_RUNNING("MPI_Comm_get_attr");
  static int tag_ub = kTagUb, host = MPI_PROC_NULL, io = MPI_ANY_SOURCE, wtime_global = 0;
  const int comm = comm_index(c);
  if (comm == kNoComm)
    return raise_error(kNoComm, "MPI_Comm_get_attr", MPI_ERR_COMM, "invalid communicator 0x%x",
                       c);
  if (!attribute_val || !flag)
    return raise_error(comm, "MPI_Comm_get_attr", MPI_ERR_ARG, "NULL pointer");
  int* v = nullptr;
  switch (keyval) {
    case MPI_TAG_UB: v = &tag_ub; break;
    case MPI_HOST: v = &host; break;
    case MPI_IO: v = &io; break;
    case MPI_WTIME_IS_GLOBAL: v = &wtime_global; break;
    default:
      return raise_error(comm, "MPI_Comm_get_attr", MPI_ERR_ARG, "unknown attribute key 0x%x",
                         keyval);
  }
  // Predefined attributes are returned as a pointer to the value (MPI rule).
  *static_cast<void**>(attribute_val) = v;
  *flag = 1;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Comm_set_errhandler)
int PMPI_Comm_set_errhandler(MPI_Comm c, MPI_Errhandler h) {
  REQUIRE_RUNNING("MPI_Comm_set_errhandler");
  const int comm = comm_index(c);
  if (comm == kNoComm)
    return raise_error(kNoComm, "MPI_Comm_set_errhandler", MPI_ERR_COMM,
                       "invalid communicator 0x%x", c);
  if (h != MPI_ERRORS_ARE_FATAL && h != MPI_ERRORS_RETURN)
    return raise_error(comm, "MPI_Comm_set_errhandler", MPI_ERR_ARG,
                       "invalid error handler 0x%x", h);
  S().errh[comm] = h;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Comm_get_errhandler)
int PMPI_Comm_get_errhandler(MPI_Comm c, MPI_Errhandler* h) {
  REQUIRE_RUNNING("MPI_Comm_get_errhandler");
  const int comm = comm_index(c);
  if (comm == kNoComm)
    return raise_error(kNoComm, "MPI_Comm_get_errhandler", MPI_ERR_COMM,
                       "invalid communicator 0x%x", c);
  if (!h) return raise_error(comm, "MPI_Comm_get_errhandler", MPI_ERR_ARG, "NULL pointer");
  *h = S().errh[comm];
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Errhandler_free)
int PMPI_Errhandler_free(MPI_Errhandler* h) {
  if (!h || (*h != MPI_ERRORS_ARE_FATAL && *h != MPI_ERRORS_RETURN))
    return raise_error(kNoComm, "MPI_Errhandler_free", MPI_ERR_ARG, "invalid error handler");
  *h = MPI_ERRHANDLER_NULL;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Error_class)
int PMPI_Error_class(int code, int* cls) {
  if (!cls || !class_name(code))
    return raise_error(kNoComm, "MPI_Error_class", MPI_ERR_ARG, "invalid error code %d", code);
  *cls = code;  // error codes are error classes in this implementation
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Error_string)
int PMPI_Error_string(int code, char* string, int* resultlen) {
  if (!string || !resultlen)
    return raise_error(kNoComm, "MPI_Error_string", MPI_ERR_ARG, "NULL pointer");
  const char* name = class_name(code);
  if (!name)
    return raise_error(kNoComm, "MPI_Error_string", MPI_ERR_ARG, "invalid error code %d", code);
  const int n = std::snprintf(string, MPI_MAX_ERROR_STRING, "%s: %s", name, class_text(code));
  *resultlen = std::min(n, MPI_MAX_ERROR_STRING - 1);
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ datatypes

BCS_PMPI_ALIAS(Type_size)
int PMPI_Type_size(MPI_Datatype type, int* size) {
  const int ts = type_size(type);
  if (ts < 0) return raise_error(kNoComm, "MPI_Type_size", MPI_ERR_TYPE, "invalid datatype 0x%x", type);
  if (!size) return raise_error(kNoComm, "MPI_Type_size", MPI_ERR_ARG, "NULL size pointer");
  *size = ts;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Get_count)
int PMPI_Get_count(const MPI_Status* st, MPI_Datatype type, int* count) {
  if (ignored(st) || !count)
    return raise_error(kNoComm, "MPI_Get_count", MPI_ERR_ARG, "NULL or ignored status");
  const int ts = type_size(type);
  if (ts < 0) return raise_error(kNoComm, "MPI_Get_count", MPI_ERR_TYPE, "invalid datatype 0x%x", type);
  const long long n = st->bcs_count / ts;
  *count = (st->bcs_count % ts || n > 0x7fffffff) ? MPI_UNDEFINED : static_cast<int>(n);
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Get_elements)
int PMPI_Get_elements(const MPI_Status* st, MPI_Datatype type, int* count) {
  // Predefined types only: an element is one datatype.
  return PMPI_Get_count(st, type, count);
}

// ------------------------------------------------------------ point-to-point

namespace {
// MPI_Send / MPI_Ssend (bcs_send / bcs_ssend, blocking).
int send(const char* fn, const void* buf, int count, MPI_Datatype type, int dest, int tag,
         MPI_Comm c, bool sync) {
  REQUIRE_RUNNING(fn);
  int comm;
  size_t bytes;
  if (int e = check_p2p(fn, c, buf, count, type, dest, tag, false, &comm, &bytes)) return e;
  if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
  if (S().singleton) return singleton_p2p(comm, fn);
  const int e = post_with_retry([&] {
    return (sync ? bcs_ssend : bcs_send)(buf, bytes, to_world(comm, dest), tag, context_of(comm),
                                         BCS_BLOCKING, nullptr);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  return MPI_SUCCESS;
}
}  // namespace

BCS_PMPI_ALIAS(Send)
int PMPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c) {
  return send("MPI_Send", buf, count, type, dest, tag, c, false);
}

BCS_PMPI_ALIAS(Ssend)
int PMPI_Ssend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c) {
  return send("MPI_Ssend", buf, count, type, dest, tag, c, true);
}

BCS_PMPI_ALIAS(Issend)
int PMPI_Issend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c,
                MPI_Request* request) {
  return isend("MPI_Issend", buf, count, type, dest, tag, c, request, true);
}

BCS_PMPI_ALIAS(Recv)
int PMPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm c,
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
  bcs_msg_status_t b{};
  const int e = post_with_retry([&] {
    return bcs_recv(buf, bytes, to_world(comm, source), tag, context_of(comm), BCS_BLOCKING,
                    nullptr, &b);
  });
  if (e == BCS_OK || e == b.error) {
    set_status(st, from_world(comm, b.source), b.tag, static_cast<long long>(b.bytes),
               bcs_to_class(b.error));
  }
  if (e != BCS_OK) return raise_bcs(comm, fn, e, bytes);
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Isend)
int PMPI_Isend(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm c,
               MPI_Request* request) {
  return isend("MPI_Isend", buf, count, type, dest, tag, c, request);
}

BCS_PMPI_ALIAS(Irecv)
int PMPI_Irecv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm c,
               MPI_Request* request) {
  return irecv("MPI_Irecv", buf, count, type, source, tag, c, request);
}

BCS_PMPI_ALIAS(Sendrecv)
int PMPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                  int sendtag, void* recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                  int recvtag, MPI_Comm c, MPI_Status* st) {
  static const char fn[] = "MPI_Sendrecv";
  REQUIRE_RUNNING(fn);
  // Check both halves before posting either, so an argument error posts nothing.
  int comm;
  size_t bytes;
  if (int e = check_p2p(fn, c, sendbuf, sendcount, sendtype, dest, sendtag, false, &comm, &bytes))
    return e;
  if (int e = check_p2p(fn, c, recvbuf, recvcount, recvtype, source, recvtag, true, &comm, &bytes))
    return e;
  MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  if (int e = irecv(fn, recvbuf, recvcount, recvtype, source, recvtag, c, &r[1])) return e;
  if (int e = isend(fn, sendbuf, sendcount, sendtype, dest, sendtag, c, &r[0])) {
    // Cannot cancel a posted receive; wait for it would deadlock. Leave it to
    // the runtime (the error already went through the handler).
    return e;
  }
  // Wait for the send first, then the receive, so the receive's error (if
  // any) is reported with MPI_Sendrecv's own class rather than IN_STATUS.
  if (int e = complete_one(fn, &r[0], BCS_BLOCKING, nullptr, nullptr)) return e;
  return complete_one(fn, &r[1], BCS_BLOCKING, nullptr, st);
}

BCS_PMPI_ALIAS(Probe)
int PMPI_Probe(int source, int tag, MPI_Comm c, MPI_Status* st) {
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
  bcs_msg_status_t b{};
  const int e = post_with_retry([&] {
    return bcs_probe(to_world(comm, source), tag, context_of(comm), BCS_BLOCKING, nullptr, &b);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  set_status(st, from_world(comm, b.source), b.tag, static_cast<long long>(b.bytes), MPI_SUCCESS);
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Iprobe)
int PMPI_Iprobe(int source, int tag, MPI_Comm c, int* flag, MPI_Status* st) {
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
  bcs_msg_status_t b{};
  int found = 0;
  const int e = post_with_retry([&] {
    return bcs_probe(to_world(comm, source), tag, context_of(comm), BCS_NONBLOCKING, &found, &b);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  *flag = found;
  if (found)
    set_status(st, from_world(comm, b.source), b.tag, static_cast<long long>(b.bytes),
               MPI_SUCCESS);
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ completion

BCS_PMPI_ALIAS(Wait)
int PMPI_Wait(MPI_Request* request, MPI_Status* st) {
  return complete_one("MPI_Wait", request, BCS_BLOCKING, nullptr, st);
}

BCS_PMPI_ALIAS(Test)
int PMPI_Test(MPI_Request* request, int* flag, MPI_Status* st) {
  if (!flag) return raise_error(kNoComm, "MPI_Test", MPI_ERR_ARG, "NULL flag pointer");
  return complete_one("MPI_Test", request, BCS_NONBLOCKING, flag, st);
}

BCS_PMPI_ALIAS(Waitall)
int PMPI_Waitall(int count, MPI_Request reqs[], MPI_Status sts[]) {
  return complete_all("MPI_Waitall", count, reqs, BCS_BLOCKING, nullptr, sts);
}

BCS_PMPI_ALIAS(Testall)
int PMPI_Testall(int count, MPI_Request reqs[], int* flag, MPI_Status sts[]) {
  if (!flag) return raise_error(kNoComm, "MPI_Testall", MPI_ERR_ARG, "NULL flag pointer");
  return complete_all("MPI_Testall", count, reqs, BCS_NONBLOCKING, flag, sts);
}

BCS_PMPI_ALIAS(Waitany)
int PMPI_Waitany(int count, MPI_Request reqs[], int* index, MPI_Status* st) {
  return complete_any("MPI_Waitany", count, reqs, BCS_BLOCKING, index, nullptr, st);
}

BCS_PMPI_ALIAS(Testany)
int PMPI_Testany(int count, MPI_Request reqs[], int* index, int* flag, MPI_Status* st) {
  if (!flag) return raise_error(kNoComm, "MPI_Testany", MPI_ERR_ARG, "NULL flag pointer");
  return complete_any("MPI_Testany", count, reqs, BCS_NONBLOCKING, index, flag, st);
}

BCS_PMPI_ALIAS(Request_free)
int PMPI_Request_free(MPI_Request* request) {
  static const char fn[] = "MPI_Request_free";
  REQUIRE_RUNNING(fn);
  if (!request || *request == MPI_REQUEST_NULL)
    return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "null request");
  const int idx = req_index(*request);
  if (idx < 0) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "invalid request handle 0x%x", *request);
  Req& r = S().reqs[idx];
  if (!r.local_done) {
    // The operation goes on; its BCS request is freed once it completes.
    bcs_request_t b = r.breq;
    int done = 0;
    bcs_msg_status_t ignore{};
    bcs_test(&b, BCS_NONBLOCKING, &done, &ignore);
    if (!done) S().orphans.push_back(r.breq);
  }
  req_release(idx);
  *request = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ collectives

BCS_PMPI_ALIAS(Barrier)
int PMPI_Barrier(MPI_Comm c) {
  static const char fn[] = "MPI_Barrier";
  REQUIRE_RUNNING(fn);
  const int comm = comm_index(c);
  if (comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (comm == kSelf || S().singleton) return MPI_SUCCESS;  // one-rank communicator
  const int e = post_with_retry(
      [&] { return bcs_barrier(context_of(comm), BCS_BLOCKING, nullptr); });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  return MPI_SUCCESS;
}

}  // extern "C"
