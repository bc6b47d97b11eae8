// Matched probes: MPI_Mprobe, MPI_Improbe, MPI_Mrecv, MPI_Imrecv.
//
// A matched probe must take the message out of matching, so that no later
// receive gets it. The shim does that with what the runtime already has:
// once a probe has named a message (source, tag, length), the shim posts a
// receive for exactly that source and tag into a buffer it owns. Receives
// match in post order and messages from one source with one tag in send
// order, so that receive gets the probed message, and every receive the
// program posts later comes after it. MPI_Mrecv / MPI_Imrecv then hand the
// bytes to the user's buffer (unpacked by its datatype) when that receive
// completes. The cost is one copy of the message on the receiving rank.
//
// Limitation: MPI_Imrecv into a buffer smaller than the message copies what
// fits and completes without MPI_ERR_TRUNCATE in its status (MPI_Mrecv
// reports the truncation).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "replay.h"
#include "shim.h"

namespace bcs::shim {
namespace {

struct Message {
  bool used = false;
  int comm = kNoComm;
  uint64_t len = 0;                // bytes of the message
  bcs_request_t breq = BCS_REQUEST_NULL;
  std::shared_ptr<CollData> data;  // data->tmp receives the message
};

constexpr int kMessageBase = 0x2c000001;  // after MPI_MESSAGE_NULL

std::vector<Message>& messages() {
  static std::vector<Message> m;
  return m;
}

// Takes the probed message (world source `src`, `tag`, `len` bytes) out of
// matching: an exact receive into a shim buffer.
int claim(const char* fn, int comm, const bcs_msg_status_t& b, MPI_Message* message) {
  Message m;
  m.used = true;
  m.comm = comm;
  m.len = b.bytes;
  m.data = std::make_shared<CollData>();
  m.data->tmp.resize(static_cast<size_t>(b.bytes));
  const int e = post_with_retry([&] {
    return bcs_recv(m.data->tmp.data(), m.data->tmp.size(), b.source, b.tag, context_of(comm),
                    BCS_NONBLOCKING, &m.breq, nullptr);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  auto& t = messages();
  size_t i = 0;
  while (i < t.size() && t[i].used) ++i;
  if (i == t.size()) t.emplace_back();
  t[i] = std::move(m);
  *message = kMessageBase + static_cast<int>(i);
  return MPI_SUCCESS;
}

int probe(const char* fn, int source, int tag, MPI_Comm c, bool blocking, int* flag,
          MPI_Message* message, MPI_Status* st) {
  REQUIRE_RUNNING(fn);
  int comm;
  size_t bytes;
  if (int e = p2p_check(fn, c, nullptr, 0, MPI_BYTE, source, tag, true, &comm, &bytes)) return e;
  if (!message) return raise_error(comm, fn, MPI_ERR_ARG, "NULL message pointer");
  if (!blocking && !flag) return raise_error(comm, fn, MPI_ERR_ARG, "NULL flag pointer");
  if (flag) *flag = 0;
  if (source == MPI_PROC_NULL) {
    if (flag) *flag = 1;
    *message = MPI_MESSAGE_NO_PROC;
    set_proc_null_status(st);
    return MPI_SUCCESS;
  }
  if (S().singleton)
    return raise_error(comm, fn, MPI_ERR_OTHER,
                       "point-to-point communication needs the bcs runtime: this program must "
                       "be started with `bcs run`");
  const bool wild = source == MPI_ANY_SOURCE || tag == MPI_ANY_TAG;
  if (replay::g_mode == replay::Mode::replay && (wild || !blocking)) {
    // The message found when recorded, waited for; none found: none now.
    const auto r = replay::next(blocking ? record::Kind::mprobe : record::Kind::improbe, fn);
    if (!blocking && !r.flag) return MPI_SUCCESS;
    source = r.source;
    tag = r.tag;
    blocking = true;
  }
  bcs_msg_status_t b{};
  int found = 0;
  const int e = post_with_retry([&] {
    return bcs_probe(to_world(comm, source), tag, context_of(comm),
                     blocking ? BCS_BLOCKING : BCS_NONBLOCKING, blocking ? nullptr : &found, &b);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  if (replay::g_mode == replay::Mode::record && (wild || !blocking)) {
    record::Event r;
    r.kind = blocking ? record::Kind::mprobe : record::Kind::improbe;
    r.flag = blocking || found;
    if (r.flag) {
      r.source = from_world(comm, b.source);
      r.tag = b.tag;
    }
    replay::record(r);
  }
  if (!blocking && !found) return MPI_SUCCESS;
  if (int e2 = claim(fn, comm, b, message)) return e2;
  if (flag) *flag = 1;
  set_status(st, from_world(comm, b.source), b.tag, static_cast<long long>(b.bytes), MPI_SUCCESS);
  return MPI_SUCCESS;
}

int mrecv(const char* fn, void* buf, int count, MPI_Datatype type, MPI_Message* message,
          MPI_Request* request, uint64_t* len) {
  REQUIRE_RUNNING(fn);
  if (!message) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL message pointer");
  if (!request) return raise_error(kNoComm, fn, MPI_ERR_REQUEST, "NULL request pointer");
  Req r;
  if (*message == MPI_MESSAGE_NO_PROC) {
    if (count < 0) return raise_error(kNoComm, fn, MPI_ERR_COUNT, "negative count %d", count);
    r.local_done = true;
    set_proc_null_status(&r.local_status);
    *request = req_alloc(std::move(r));
    *message = MPI_MESSAGE_NULL;
    *len = 0;
    return MPI_SUCCESS;
  }
  const long i = static_cast<long>(*message) - kMessageBase;
  auto& t = messages();
  if (i < 0 || i >= static_cast<long>(t.size()) || !t[static_cast<size_t>(i)].used)
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "invalid message handle 0x%x%s", *message,
                       *message == MPI_MESSAGE_NULL ? " (MPI_MESSAGE_NULL)" : "");
  Message& m = t[static_cast<size_t>(i)];
  int comm;
  size_t cap;
  if (int e = p2p_check(fn, comm_handle(m.comm), buf, count, type, MPI_ANY_SOURCE, MPI_ANY_TAG,
                        true, &comm, &cap))
    return e;
  r.comm = m.comm;
  r.is_recv = true;
  r.breq = m.breq;
  r.cap = cap;
  r.coll = m.data;
  CollData* dp = m.data.get();
  int64_t off = 0;
  const bool contiguous = type_contiguous(type, &off);
  m.data->unpack = [dp, buf, count, type, cap, contiguous, off, hold = type_hold(type)](uint64_t n) {
    const uint64_t k = std::min<uint64_t>(n, cap);
    if (k == 0) return;
    if (contiguous)
      std::memcpy(static_cast<unsigned char*>(buf) + off, dp->tmp.data(), static_cast<size_t>(k));
    else
      type_unpack(dp->tmp.data(), k, count, type, buf);
  };
  *len = m.len;
  m = Message{};
  *request = req_alloc(std::move(r));
  *message = MPI_MESSAGE_NULL;
  return MPI_SUCCESS;
}

}  // namespace
}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

int bcs_impl_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  return probe("MPI_Mprobe", source, tag, comm, true, nullptr, message, status);
}

int bcs_impl_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message,
                 MPI_Status* status) {
  return probe("MPI_Improbe", source, tag, comm, false, flag, message, status);
}

int bcs_impl_Imrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message,
                MPI_Request* request) {
  uint64_t len = 0;
  return mrecv("MPI_Imrecv", buf, count, type, message, request, &len);
}

int bcs_impl_Mrecv(void* buf, int count, MPI_Datatype type, MPI_Message* message, MPI_Status* status) {
  static const char fn[] = "MPI_Mrecv";
  MPI_Request r = MPI_REQUEST_NULL;
  uint64_t len = 0;
  const MPI_Message h = message ? *message : MPI_MESSAGE_NULL;
  if (int e = mrecv(fn, buf, count, type, message, &r, &len)) return e;
  MPI_Status st;
  if (status && status != MPI_STATUS_IGNORE) st = *status;  // MPI_ERROR stays as it was
  if (int e = PMPI_Wait(&r, &st)) return e;
  const int64_t ts = type_size(type);
  const uint64_t cap = count > 0 && ts > 0 ? static_cast<uint64_t>(count) * ts : 0;
  if (h != MPI_MESSAGE_NO_PROC && len > cap) {
    st.MPI_ERROR = MPI_ERR_TRUNCATE;
    if (status && status != MPI_STATUS_IGNORE) *status = st;
    return raise_error(kNoComm, fn, MPI_ERR_TRUNCATE,
                       "message of %llu bytes, receive buffer of %llu bytes",
                       static_cast<unsigned long long>(len), static_cast<unsigned long long>(cap));
  }
  if (status && status != MPI_STATUS_IGNORE) *status = st;
  return MPI_SUCCESS;
}

}  // extern "C"
