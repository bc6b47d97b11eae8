// Blocking collectives on intercommunicators (MPI-3.1 §5.2.2): each is a
// group-local stage on the group's private intracommunicator (Comm::local,
// in the group's rank order, so its rank 0 is the group's leader) joined to
// the other group by point-to-point on the intercommunicator's collective
// context, which no user message can match. The node managers see only
// ordinary collectives and messages; nothing new crosses the segment.
//
//   Barrier          local barrier, leaders exchange, local barrier
//   Bcast            root -> remote leader, then a broadcast in that group
//   Reduce           reduce in the sending group, its leader -> root
//   Allreduce        reduce in each group, leaders swap, broadcast in each
//   Reduce_scatter   reduce in each group, leaders swap, scatter in each
//   Gather/Scatter   root <-> every member of the other group directly
//   Allgather/Alltoall  every member <-> every member of the other group
//
// The non-blocking forms are refused (MPI_ERR_COMM, coll.cc): running these
// stages at request progress needs a schedule the shim does not have yet.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <unordered_map>
#include <vector>

#include "intercoll.h"
#include "shim.h"

namespace bcs::shim {
namespace intercoll {

// A hidden communicator slot per intercommunicator: the same groups on its
// collective context, errors returned to this file (which raises them on
// the user's intercommunicator, naming the user's call).
MPI_Comm shadow_of(int ic) {
  static std::unordered_map<int, int> shadows;
  if (auto it = shadows.find(ic); it != shadows.end()) return comm_handle(it->second);
  int idx;
  Comm& s = comm_new_slot(&idx);
  const Comm& x = comm_at(ic);
  s.m = x.m;
  s.rank = x.rank;
  s.inter = true;
  s.remote = x.remote;
  s.local = x.local;
  s.context = x.context + 1;
  s.errh = MPI_ERRORS_RETURN;
  s.name = "(collectives of an intercommunicator)";
  shadows[ic] = idx;
  return comm_handle(idx);
}

Inter inter_of(MPI_Comm c) {
  Inter it;
  it.ic = comm_index(c);
  const Comm& x = comm_at(it.ic);
  it.local = comm_handle(x.local);
  it.rank = x.rank;
  it.size = x.size();
  it.rsize = x.remote->size();
  it.shadow = shadow_of(it.ic);
  return it;
}

// An error of an inner call, raised on the user's communicator.
int failed(const Inter& it, const char* fn, int code) {
  if (code == MPI_SUCCESS) return code;
  int cls = MPI_ERR_OTHER;
  PMPI_Error_class(code, &cls);
  return raise_error(it.ic, fn, cls, "the inter-group stage failed (error class %d)", cls);
}

int check_root(const Inter& it, const char* fn, int root) {
  if (root == MPI_ROOT || root == MPI_PROC_NULL || (root >= 0 && root < it.rsize))
    return MPI_SUCCESS;
  return raise_error(it.ic, fn, MPI_ERR_ROOT,
                     "root %d is not MPI_ROOT, MPI_PROC_NULL or a rank of the remote group "
                     "(size %d)",
                     root, it.rsize);
}

// One (buffer, count, type) argument that is used.
int check_data(const Inter& it, const char* fn, const char* what, const void* buf, int count,
               MPI_Datatype type) {
  if (count < 0) return raise_error(it.ic, fn, MPI_ERR_COUNT, "negative %scount %d", what, count);
  if (buf == MPI_IN_PLACE)
    return raise_error(it.ic, fn, MPI_ERR_ARG,
                       "MPI_IN_PLACE is not allowed on an intercommunicator");
  if (count == 0) return MPI_SUCCESS;
  if (type_size(type) < 0)
    return raise_error(it.ic, fn, MPI_ERR_TYPE, "invalid %stype 0x%x", what, type);
  if (int e = check_usable(it.ic, fn, type)) return e;
  if (!buf && type_size(type) > 0)
    return raise_error(it.ic, fn, MPI_ERR_BUFFER, "NULL %sbuf with %scount %d", what, what,
                       count);
  return MPI_SUCCESS;
}

int check_counts(const Inter& it, const char* fn, const char* what, const int* counts,
                 const int* displs, int n) {
  if (!counts) return raise_error(it.ic, fn, MPI_ERR_ARG, "NULL %scounts array", what);
  if (!displs) return raise_error(it.ic, fn, MPI_ERR_ARG, "NULL %sdispls array", what);
  for (int i = 0; i < n; ++i)
    if (counts[i] < 0)
      return raise_error(it.ic, fn, MPI_ERR_COUNT, "negative %scounts[%d] = %d", what, i,
                         counts[i]);
  return MPI_SUCCESS;
}

MPI_Aint extent_of(MPI_Datatype t) {
  MPI_Aint lb = 0, ext = 0;
  PMPI_Type_get_extent(t, &lb, &ext);
  return ext;
}

}  // namespace intercoll

namespace {

using namespace intercoll;
constexpr int kTag = 0x6963;  // on the collective context; leader_exchange uses 1 and 2

// Posted requests, all waited for (also on the error path: nothing stays
// in flight into a buffer the caller gets back).
class Batch {
 public:
  void add(MPI_Request r) { reqs_.push_back(r); }
  int wait() {
    if (reqs_.empty()) return MPI_SUCCESS;
    const int e = PMPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE);
    reqs_.clear();
    return e;
  }
  ~Batch() { wait(); }

 private:
  std::vector<MPI_Request> reqs_;
};

// Leaders send `out` and receive `in` (count elements of type each way).
int leaders_swap(const Inter& it, const void* out, void* in, int count, MPI_Datatype type) {
  return PMPI_Sendrecv(out, count, type, 0, kTag, in, count, type, 0, kTag, it.shadow,
                       MPI_STATUS_IGNORE);
}

// One block to or from each member j of the other group: `count` (or
// counts[j] at displs[j]) instances of `type`, block j at j * count extents.
int post_blocks(const Inter& it, const char* fn, Batch& b, bool send, const void* buf, int count,
                const int* counts, const int* displs, MPI_Datatype type) {
  const char* what = send ? "send" : "recv";
  if (counts)
    if (int e = check_counts(it, fn, what, counts, displs, it.rsize)) return e;
  const MPI_Aint ext = extent_of(type);
  for (int j = 0; j < it.rsize; ++j) {
    const int n = counts ? counts[j] : count;
    const MPI_Aint off = (counts ? displs[j] : static_cast<MPI_Aint>(j) * count) * ext;
    if (int e = check_data(it, fn, what, buf, n, type)) return e;
    MPI_Request r;
    const int e = send ? PMPI_Isend(at(buf, off), n, type, j, kTag, it.shadow, &r)
                       : PMPI_Irecv(at(const_cast<void*>(buf), off), n, type, j, kTag, it.shadow, &r);
    if (e) return failed(it, fn, e);
    b.add(r);
  }
  return MPI_SUCCESS;
}

}  // namespace

bool is_intercomm(MPI_Comm c) {
  const int ci = comm_index(c);
  return ci != kNoComm && comm_at(ci).inter;
}

int inter_barrier(MPI_Comm c) {
  static const char fn[] = "MPI_Barrier";
  const Inter it = inter_of(c);
  // Everyone of this group is in; the leaders learn the other group is too;
  // the second barrier lets nobody out before its leader knows.
  int e = PMPI_Barrier(it.local);
  if (e == MPI_SUCCESS && it.leader()) e = leaders_swap(it, nullptr, nullptr, 0, MPI_BYTE);
  if (e == MPI_SUCCESS) e = PMPI_Barrier(it.local);
  return failed(it, fn, e);
}

int inter_bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm c) {
  static const char fn[] = "MPI_Bcast";
  const Inter it = inter_of(c);
  if (int e = check_root(it, fn, root)) return e;
  if (root == MPI_PROC_NULL) return MPI_SUCCESS;
  if (int e = check_data(it, fn, "", buf, count, type)) return e;
  if (root == MPI_ROOT) return failed(it, fn, PMPI_Send(buf, count, type, 0, kTag, it.shadow));
  int e = MPI_SUCCESS;
  if (it.leader()) e = PMPI_Recv(buf, count, type, root, kTag, it.shadow, MPI_STATUS_IGNORE);
  if (e == MPI_SUCCESS) e = PMPI_Bcast(buf, count, type, 0, it.local);
  return failed(it, fn, e);
}

int inter_reduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                 MPI_Comm c) {
  static const char fn[] = "MPI_Reduce";
  const Inter it = inter_of(c);
  if (int e = check_root(it, fn, root)) return e;
  if (root == MPI_PROC_NULL) return MPI_SUCCESS;
  if (root == MPI_ROOT) {
    if (int e = check_data(it, fn, "recv", rbuf, count, type)) return e;
    return failed(it, fn, PMPI_Recv(rbuf, count, type, 0, kTag, it.shadow, MPI_STATUS_IGNORE));
  }
  if (int e = check_data(it, fn, "send", sbuf, count, type)) return e;
  // The group's reduction, in its rank order, lands at its leader.
  Scratch tmp(it.leader() ? count : 0, type);
  int e = PMPI_Reduce(sbuf, tmp.ptr(), count, type, op, 0, it.local);
  if (e == MPI_SUCCESS && it.leader()) e = PMPI_Send(tmp.ptr(), count, type, root, kTag, it.shadow);
  return failed(it, fn, e);
}

int inter_allreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op,
                    MPI_Comm c) {
  static const char fn[] = "MPI_Allreduce";
  const Inter it = inter_of(c);
  if (int e = check_data(it, fn, "send", sbuf, count, type)) return e;
  if (int e = check_data(it, fn, "recv", rbuf, count, type)) return e;
  // Each group's result goes to the other group.
  Scratch tmp(it.leader() ? count : 0, type);
  int e = PMPI_Reduce(sbuf, tmp.ptr(), count, type, op, 0, it.local);
  if (e == MPI_SUCCESS && it.leader()) e = leaders_swap(it, tmp.ptr(), rbuf, count, type);
  if (e == MPI_SUCCESS) e = PMPI_Bcast(rbuf, count, type, 0, it.local);
  return failed(it, fn, e);
}

int inter_reduce_scatter(const char* fn, const void* sbuf, void* rbuf, int rcount,
                         const int* rcounts, MPI_Datatype type, MPI_Op op, MPI_Comm c) {
  const Inter it = inter_of(c);
  // The reduction of one group's sendbufs is scattered over the other
  // group by the receivers' counts; both groups' totals must agree.
  std::vector<int> counts, displs;
  if (rcounts) {
    counts.assign(rcounts, rcounts + it.size);
  } else {
    counts.assign(static_cast<size_t>(it.size), rcount);
  }
  int64_t total = 0;
  for (int i = 0; i < it.size; ++i) {
    if (counts[static_cast<size_t>(i)] < 0)
      return raise_error(it.ic, fn, MPI_ERR_COUNT, "negative recvcount %d",
                         counts[static_cast<size_t>(i)]);
    displs.push_back(static_cast<int>(total));
    total += counts[static_cast<size_t>(i)];
  }
  if (total > INT32_MAX)
    return raise_error(it.ic, fn, MPI_ERR_COUNT, "the counts add up to more than INT_MAX");
  const int n = static_cast<int>(total);
  if (int e = check_data(it, fn, "send", sbuf, n, type)) return e;
  const int mine = counts[static_cast<size_t>(it.rank)];
  if (int e = check_data(it, fn, "recv", rbuf, mine, type)) return e;
  Scratch ours(it.leader() ? n : 0, type), theirs(it.leader() ? n : 0, type);
  int e = PMPI_Reduce(sbuf, ours.ptr(), n, type, op, 0, it.local);
  if (e == MPI_SUCCESS && it.leader()) e = leaders_swap(it, ours.ptr(), theirs.ptr(), n, type);
  if (e == MPI_SUCCESS)
    e = PMPI_Scatterv(theirs.ptr(), counts.data(), displs.data(), type, rbuf, mine, type, 0,
                      it.local);
  return failed(it, fn, e);
}

int inter_gather(const char* fn, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                 int rcount, const int* rcounts, const int* displs, MPI_Datatype rtype, int root,
                 MPI_Comm c) {
  const Inter it = inter_of(c);
  if (int e = check_root(it, fn, root)) return e;
  if (root == MPI_PROC_NULL) return MPI_SUCCESS;
  if (root != MPI_ROOT) {
    if (int e = check_data(it, fn, "send", sbuf, scount, stype)) return e;
    return failed(it, fn, PMPI_Send(sbuf, scount, stype, root, kTag, it.shadow));
  }
  Batch b;
  if (int e = post_blocks(it, fn, b, false, rbuf, rcount, rcounts, displs, rtype)) return e;
  return failed(it, fn, b.wait());
}

int inter_scatter(const char* fn, const void* sbuf, int scount, const int* scounts,
                  const int* displs, MPI_Datatype stype, void* rbuf, int rcount,
                  MPI_Datatype rtype, int root, MPI_Comm c) {
  const Inter it = inter_of(c);
  if (int e = check_root(it, fn, root)) return e;
  if (root == MPI_PROC_NULL) return MPI_SUCCESS;
  if (root != MPI_ROOT) {
    if (int e = check_data(it, fn, "recv", rbuf, rcount, rtype)) return e;
    return failed(it, fn,
                  PMPI_Recv(rbuf, rcount, rtype, root, kTag, it.shadow, MPI_STATUS_IGNORE));
  }
  Batch b;
  if (int e = post_blocks(it, fn, b, true, sbuf, scount, scounts, displs, stype)) return e;
  return failed(it, fn, b.wait());
}

int inter_allgather(const char* fn, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                    int rcount, const int* rcounts, const int* displs, MPI_Datatype rtype,
                    MPI_Comm c) {
  const Inter it = inter_of(c);
  if (int e = check_data(it, fn, "send", sbuf, scount, stype)) return e;
  Batch b;
  if (int e = post_blocks(it, fn, b, false, rbuf, rcount, rcounts, displs, rtype)) return e;
  for (int j = 0; j < it.rsize; ++j) {
    MPI_Request r;
    if (int e = PMPI_Isend(sbuf, scount, stype, j, kTag, it.shadow, &r)) return failed(it, fn, e);
    b.add(r);
  }
  return failed(it, fn, b.wait());
}

int inter_alltoall(const char* fn, const void* sbuf, int scount, const int* scounts,
                   const int* sdispls, MPI_Datatype stype, const MPI_Datatype* stypes, void* rbuf,
                   int rcount, const int* rcounts, const int* rdispls, MPI_Datatype rtype,
                   const MPI_Datatype* rtypes, MPI_Comm c) {
  const Inter it = inter_of(c);
  const bool w = stypes || rtypes;
  if (w && (!stypes || !rtypes))
    return raise_error(it.ic, fn, MPI_ERR_ARG, "NULL %stypes array", stypes ? "recv" : "send");
  if (scounts) {
    if (int e = check_counts(it, fn, "send", scounts, sdispls, it.rsize)) return e;
  }
  if (rcounts) {
    if (int e = check_counts(it, fn, "recv", rcounts, rdispls, it.rsize)) return e;
  }
  // Block j: its count, type and byte offset (w: displacements are bytes).
  auto block = [&](int j, bool send, int* n, MPI_Datatype* t, MPI_Aint* off) {
    const int* counts = send ? scounts : rcounts;
    const int* displs = send ? sdispls : rdispls;
    *n = counts ? counts[j] : send ? scount : rcount;
    *t = w ? (send ? stypes : rtypes)[j] : send ? stype : rtype;
    const MPI_Aint d = counts ? displs[j] : static_cast<MPI_Aint>(j) * *n;
    *off = w ? d : d * extent_of(*t);
  };
  Batch b;
  for (int j = 0; j < it.rsize; ++j) {
    int n;
    MPI_Datatype t;
    MPI_Aint off;
    block(j, false, &n, &t, &off);
    if (int e = check_data(it, fn, "recv", rbuf, n, t)) return e;
    MPI_Request r;
    if (int e = PMPI_Irecv(at(rbuf, static_cast<uint64_t>(off)), n, t, j, kTag, it.shadow, &r))
      return failed(it, fn, e);
    b.add(r);
  }
  for (int j = 0; j < it.rsize; ++j) {
    int n;
    MPI_Datatype t;
    MPI_Aint off;
    block(j, true, &n, &t, &off);
    if (int e = check_data(it, fn, "send", sbuf, n, t)) return e;
    MPI_Request r;
    if (int e = PMPI_Isend(at(sbuf, static_cast<uint64_t>(off)), n, t, j, kTag, it.shadow, &r))
      return failed(it, fn, e);
    b.add(r);
  }
  return failed(it, fn, b.wait());
}

}  // namespace bcs::shim
