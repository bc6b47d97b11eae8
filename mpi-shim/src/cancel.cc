// MPI_Cancel, MPI_Test_cancelled, MPI_Status_set_cancelled and generalized
// requests (MPI_Grequest_start / MPI_Grequest_complete).
//
// Cancelling posts a cancel descriptor behind the request's own. For a
// receive, the node manager's matcher takes it in the rank's post order
// and removes the receive if it is still unmatched. For a send, the cancel
// follows the send to the receiver's node manager, which removes the send
// from the unexpected messages if no receive has matched it, and the
// sender's request completes as cancelled in the next P2P microphase. A
// request that matched first completes normally. Either way the request
// completes, so a wait after MPI_Cancel always returns (MPI-3.1 3.8.4).
// A send of up to 192 bytes, or an eager one of up to 1 KiB, completes when
// posted (its bytes travel in the ring); cancelling it sends a cancel naming the send by its number
// to the receiver's node, and the request completes again with the answer.
// A buffered send (MPI_Ibsend) is cancelled through its message's send.
#include "replay.h"
#include "shim.h"

namespace bcs::shim {

int greq_never_completes(int comm, const char* fn) {
  return raise_error(comm, fn, MPI_ERR_REQUEST,
                     "waiting for a generalized request that MPI_Grequest_complete has not "
                     "completed: no other thread can complete it meanwhile (thread level at "
                     "most MPI_THREAD_SERIALIZED), so the wait would never return");
}

}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

int bcs_impl_Cancel(MPI_Request* request) {
  if (replay::g_mode != replay::Mode::off) replay::not_covered("MPI_Cancel");
  static const char fn[] = "MPI_Cancel";
  REQUIRE_RUNNING(fn);
  if (!request) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "NULL request pointer");
  if (*request == MPI_REQUEST_NULL)
    return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "MPI_REQUEST_NULL cannot be cancelled");
  const int idx = req_index(*request);
  if (idx < 0)
    return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "invalid request handle 0x%x", *request);
  const Req& r = S().reqs[static_cast<size_t>(idx)];
  if (r.greq) {
    const auto g = r.greq;
    const int e = g->cancel ? g->cancel(g->extra, r.local_done ? 1 : 0) : MPI_SUCCESS;
    if (e != MPI_SUCCESS)
      return raise_error(r.comm, fn, MPI_ERR_OTHER, "the request's cancel function returned %d",
                         e);
    return MPI_SUCCESS;
  }
  if (r.persistent && !r.active)
    return raise_error(r.comm, fn, MPI_ERR_REQUEST,
                       "the persistent request is inactive (MPI_Start it first)");
  if (r.is_coll)
    return raise_error(r.comm, fn, MPI_ERR_REQUEST,
                       "a non-blocking collective cannot be cancelled (MPI-3.1 5.12)");
  if (r.cancelling) return MPI_SUCCESS;  // asked already: the answer is on its way
  if (r.bsend_id) return bsend_cancel(idx);
  if (r.local_done && r.sent_to >= 0) {
    // An inline send: complete for the sender, but maybe still unmatched at
    // the receiver's node. The request waits again, for the cancel's answer.
    bcs_request_t t = BCS_REQUEST_NULL;
    const int32_t to = r.sent_to;
    const uint64_t seq = r.sent_seq;
    const int comm = r.comm;
    const int e = post_with_retry([&] { return bcs_cancel_sent(to, seq, &t); });
    if (e != BCS_OK) return raise_bcs(comm, fn, e);
    Req& w = S().reqs[static_cast<size_t>(idx)];  // posting may grow the table
    w.local_done = false;
    w.breq = t;
    w.cancelling = true;
    w.sent_to = -1;
    return MPI_SUCCESS;
  }
  if (r.local_done || r.breq == BCS_REQUEST_NULL) return MPI_SUCCESS;  // done: completes as is
  const int e = bcs_cancel(r.breq);
  if (e != BCS_OK) return raise_bcs(r.comm, fn, e);
  return MPI_SUCCESS;
}

int bcs_impl_Test_cancelled(const MPI_Status* status, int* flag) {
  static const char fn[] = "MPI_Test_cancelled";
  if (!status || status == MPI_STATUS_IGNORE || !flag)
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL status or flag");
  *flag = status->bcs_cancelled ? 1 : 0;
  return MPI_SUCCESS;
}

int bcs_impl_Status_set_cancelled(MPI_Status* status, int flag) {
  static const char fn[] = "MPI_Status_set_cancelled";
  if (!status || status == MPI_STATUS_IGNORE)
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL status");
  status->bcs_cancelled = flag ? 1 : 0;
  return MPI_SUCCESS;
}

int bcs_impl_Grequest_start(MPI_Grequest_query_function* query_fn,
                        MPI_Grequest_free_function* free_fn,
                        MPI_Grequest_cancel_function* cancel_fn, void* extra_state,
                        MPI_Request* request) {
  static const char fn[] = "MPI_Grequest_start";
  REQUIRE_RUNNING(fn);
  if (!request) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "NULL request pointer");
  if (!query_fn) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL query function");
  Req r;
  r.comm = kSelf;  // errors of a generalized request go to MPI_COMM_SELF's handler
  r.greq = std::make_shared<Greq>(Greq{query_fn, free_fn, cancel_fn, extra_state, {}});
  *request = req_alloc(std::move(r));
  return MPI_SUCCESS;
}

int bcs_impl_Grequest_complete(MPI_Request request) {
  static const char fn[] = "MPI_Grequest_complete";
  REQUIRE_RUNNING(fn);
  const int idx = req_index(request);
  if (idx < 0 || !S().reqs[static_cast<size_t>(idx)].greq)
    return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "0x%x is not a generalized request",
                       request);
  Req& r = S().reqs[static_cast<size_t>(idx)];
  if (r.local_done)
    return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "the request was completed already");
  // The status a wait or test will return: the query function fills it now
  // (the program may not change what it reports after completing).
  const auto g = r.greq;
  MPI_Status st{};
  set_empty_status(&st);
  const int e = g->query(g->extra, &st);
  Req& again = S().reqs[static_cast<size_t>(idx)];  // the query may have grown the table
  again.local_done = true;
  again.local_status = st;
  if (e != MPI_SUCCESS) again.local_status.MPI_ERROR = e;
  return MPI_SUCCESS;
}

}  // extern "C"
