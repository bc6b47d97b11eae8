// The Wait and Test families at the MPI interface (MPI_Wait, _Test,
// _Waitall, _Testall, _Waitany, _Testany, MPI_Request_get_status,
// MPI_Request_free) over p2p.cc's completions, and their record and replay
// (replay.h): what a test or a wait-any observed is recorded, and replayed
// by waiting for exactly that.
#include "replay.h"
#include "shim.h"

using namespace bcs::shim;

extern "C" {

// ------------------------------------------------------------ completion

int bcs_impl_Wait(MPI_Request* request, MPI_Status* st) {
  return p2p_complete_one("MPI_Wait", request, true, nullptr, st);
}

int bcs_impl_Test(MPI_Request* request, int* flag, MPI_Status* st) {
  if (!flag) return raise_error(kNoComm, "MPI_Test", MPI_ERR_ARG, "NULL flag pointer");
  if (replay::g_mode == replay::Mode::replay) {
    // "Not yet" again without looking; done: the same request, waited for.
    if (!replay::next(record::Kind::test, "MPI_Test").flag) {
      *flag = 0;
      return MPI_SUCCESS;
    }
    *flag = 1;
    return p2p_complete_one("MPI_Test", request, true, nullptr, st);
  }
  const int e = p2p_complete_one("MPI_Test", request, false, flag, st);
  if (replay::g_mode == replay::Mode::record) {
    record::Event r;
    r.kind = record::Kind::test;
    r.flag = *flag != 0;
    replay::record(r);
  }
  return e;
}

int bcs_impl_Waitall(int count, MPI_Request reqs[], MPI_Status sts[]) {
  return p2p_complete_all("MPI_Waitall", count, reqs, true, nullptr, sts);
}

int bcs_impl_Testall(int count, MPI_Request reqs[], int* flag, MPI_Status sts[]) {
  if (!flag) return raise_error(kNoComm, "MPI_Testall", MPI_ERR_ARG, "NULL flag pointer");
  if (replay::g_mode == replay::Mode::replay) {
    if (!replay::next(record::Kind::testall, "MPI_Testall").flag) {
      *flag = 0;
      return MPI_SUCCESS;
    }
    *flag = 1;
    return p2p_complete_all("MPI_Testall", count, reqs, true, nullptr, sts);
  }
  const int e = p2p_complete_all("MPI_Testall", count, reqs, false, flag, sts);
  if (replay::g_mode == replay::Mode::record) {
    record::Event r;
    r.kind = record::Kind::testall;
    r.flag = *flag != 0;
    replay::record(r);
  }
  return e;
}

namespace {
// Replaying a wait-any or a test-any that completed request `index`: that
// request, waited for (MPI_UNDEFINED: every request was null or inactive,
// which the call itself finds again).
int replay_any(const char* fn, int count, MPI_Request reqs[], int recorded, int* index,
               int* flag, MPI_Status* st) {
  if (recorded == MPI_UNDEFINED) return p2p_complete_any(fn, count, reqs, true, index, flag, st);
  if (recorded < 0 || recorded >= count || !reqs || reqs[recorded] == MPI_REQUEST_NULL)
    replay::diverge(fn, "request " + std::to_string(recorded) + " completed",
                    "a call with " + std::to_string(count) + " requests, that one not active");
  *index = recorded;
  if (flag) *flag = 1;
  return p2p_complete_one(fn, &reqs[recorded], true, nullptr, st);
}
void record_any(record::Kind k, int index, int flag) {
  record::Event r;
  r.kind = k;
  r.flag = flag != 0;
  r.indices = {index};
  replay::record(r);
}
}  // namespace

int bcs_impl_Waitany(int count, MPI_Request reqs[], int* index, MPI_Status* st) {
  if (replay::g_mode == replay::Mode::replay) {
    if (!index) return raise_error(kNoComm, "MPI_Waitany", MPI_ERR_ARG, "NULL index pointer");
    const auto r = replay::next(record::Kind::waitany, "MPI_Waitany");
    return replay_any("MPI_Waitany", count, reqs, r.indices.empty() ? MPI_UNDEFINED : r.indices[0],
                      index, nullptr, st);
  }
  const int e = p2p_complete_any("MPI_Waitany", count, reqs, true, index, nullptr, st);
  if (replay::g_mode == replay::Mode::record && index) record_any(record::Kind::waitany, *index, 1);
  return e;
}

int bcs_impl_Testany(int count, MPI_Request reqs[], int* index, int* flag, MPI_Status* st) {
  if (!flag) return raise_error(kNoComm, "MPI_Testany", MPI_ERR_ARG, "NULL flag pointer");
  if (replay::g_mode == replay::Mode::replay) {
    if (!index) return raise_error(kNoComm, "MPI_Testany", MPI_ERR_ARG, "NULL index pointer");
    const auto r = replay::next(record::Kind::testany, "MPI_Testany");
    if (!r.flag) {
      *flag = 0;
      *index = MPI_UNDEFINED;
      return MPI_SUCCESS;
    }
    return replay_any("MPI_Testany", count, reqs, r.indices.empty() ? MPI_UNDEFINED : r.indices[0],
                      index, flag, st);
  }
  const int e = p2p_complete_any("MPI_Testany", count, reqs, false, index, flag, st);
  if (replay::g_mode == replay::Mode::record && index) record_any(record::Kind::testany, *index, *flag);
  return e;
}

// MPI_Request_get_status: like MPI_Test, but the request stays. A runtime
// request that completed is consumed here (bcs_test frees it), so the MPI
// request turns into a locally completed one holding the status: a later
// wait or test returns the same status and frees it.
int bcs_impl_Request_get_status(MPI_Request request, int* flag, MPI_Status* st) {
  static const char fn[] = "MPI_Request_get_status";
  REQUIRE_RUNNING(fn);
  if (!flag) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL flag pointer");
  const int idx = request == MPI_REQUEST_NULL ? -1 : req_index(request);
  if (request != MPI_REQUEST_NULL && idx < 0)
    return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "invalid request handle 0x%x", request);
  // Record and replay, like MPI_Test: "not yet" again without looking; done:
  // the same request, waited for.
  bcs_mode_t mode = BCS_NONBLOCKING;
  if (replay::g_mode == replay::Mode::replay) {
    if (!replay::next(record::Kind::get_status, fn).flag) {
      *flag = 0;
      return MPI_SUCCESS;
    }
    mode = BCS_BLOCKING;
  }
  struct Noted {  // records the outcome however the call returns
    int* flag;
    ~Noted() {
      if (replay::g_mode != replay::Mode::record) return;
      record::Event e;
      e.kind = record::Kind::get_status;
      e.flag = *flag != 0;
      replay::record(e);
    }
  } noted{flag};
  if (request == MPI_REQUEST_NULL) {
    *flag = 1;
    set_empty_status(st);
    return MPI_SUCCESS;
  }
  req_settle_self(1, &request, false);  // an MPI_Buffer_iflush request
  Req& r = S().reqs[idx];
  if (!p2p_settle_then(r, mode == BCS_BLOCKING)) {  // an MPI_Isendrecv's send is still going
    *flag = 0;
    return MPI_SUCCESS;
  }
  if (r.local_done) {
    *flag = 1;
    copy_status(st, r.local_status);
    return MPI_SUCCESS;
  }
  // A generalized request is done when it was completed (local_done,
  // above): it has no BCS half, which the runtime would call done.
  if (r.greq) {
    *flag = 0;
    return MPI_SUCCESS;
  }
  int done = 0;
  bcs_msg_status_t b{};
  bcs_request_t breq = r.breq;
  *flag = 0;
  const int e = bcs_test(&breq, mode, &done, &b);
  if (e == BCS_ERR_ARG || e == BCS_ERR_NOT_INIT) return raise_bcs(r.comm, fn, e);
  *flag = done;
  if (!done) return MPI_SUCCESS;
  MPI_Status full{};
  req_fold_then(r, b);
  p2p_status_from_bcs(r, b, &full);
  p2p_finish_coll(r, b.error, b.bytes);
  Req& again = S().reqs[idx];  // finish may have grown the table
  again.breq = BCS_REQUEST_NULL;
  again.local_done = true;
  again.local_status = full;
  if (!ignored(st)) *st = full;
  return MPI_SUCCESS;
}

int bcs_impl_Request_free(MPI_Request* request) {
  static const char fn[] = "MPI_Request_free";
  REQUIRE_RUNNING(fn);
  if (!request || *request == MPI_REQUEST_NULL)
    return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "null request");
  const int idx = req_index(*request);
  if (idx < 0) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "invalid request handle 0x%x", *request);
  Req& r = S().reqs[idx];
  if (r.then != BCS_REQUEST_NULL) {  // an MPI_Isendrecv's send half goes on alone
    if (r.then_keep)
      S().orphans.push_back(Orphan{r.then, r.then_keep});  // it reads a copy the shim holds
    else
      bcs_request_free(&r.then);
    r.then = BCS_REQUEST_NULL;
  }
  if (!r.local_done) {
    // The operation goes on; its BCS request is freed once it completes,
    // and a collective keeps what the node manager still reads (its byte
    // arrays, a user-op gather buffer) until then. A user-op fold runs now
    // if the data is already there, else never: nothing can wait for the
    // request any more, and a late fold would write into a buffer the
    // application may be reusing.
    bcs_request_t b = r.breq;
    int done = 0;
    bcs_msg_status_t st{};
    bcs_test(&b, BCS_NONBLOCKING, &done, &st);
    if (done)
      p2p_finish_coll(r, st.error, st.bytes);
    else if (!r.coll)
      bcs_request_free(&b);  // a receive's data still reaches its buffer
    else
      S().orphans.push_back(Orphan{r.breq, r.coll});
  }
  req_release(idx);
  *request = MPI_REQUEST_NULL;
  return MPI_SUCCESS;
}

}  // extern "C"
