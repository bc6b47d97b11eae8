// Reductions:
//
//   MPI_Reduce                      -> BCS_COLL_REDUCE
//   MPI_Allreduce                   -> BCS_COLL_ALLREDUCE
//   MPI_Reduce_scatter(_block)      -> BCS_COLL_REDUCE_SCATTER
//   MPI_Scan / MPI_Exscan           -> BCS_COLL_SCAN / BCS_COLL_EXSCAN
//
// with a predefined op; the node managers' reduce helper combines the
// contributions in communicator rank order. A user op (MPI_Op_create) is a
// function in the application, which the node manager cannot call, so the
// shim applies it here: the contributions are gathered to the rank(s) that
// need the result (BCS_COLL_GATHER to the root for MPI_Reduce,
// BCS_COLL_ALLGATHER otherwise) into a shim-owned buffer, and the rank folds
// them in rank order once the data is there: at once for a blocking call,
// when the request completes (Wait/Test) for a non-blocking one.
#include <climits>
#include <memory>
#include <vector>

#include "coll.h"
#include "shim.h"

namespace bcs::shim {
namespace {

// A user-op reduction: gathers (`all`: allgather) every member's `bytes` of
// `sendbuf` into d->tmp and sets d->finish to `fold`.
void gather_for_user_op(bcs_coll_args_t& a, CollData& d, bool all, int root, int n,
                        const void* sendbuf, uint64_t bytes, bool receives) {
  a.kind = all ? BCS_COLL_ALLGATHER : BCS_COLL_GATHER;
  a.root = all ? 0 : root;
  a.sendbuf = sendbuf;
  a.sbytes = bytes;
  if (receives) {
    d.tmp.resize(static_cast<size_t>(n) * bytes);
    a.recvbuf = d.tmp.data();
    a.rbytes = bytes;
  }
}

// The common reduction posted straight away: a predefined op on a
// predefined one-element type, count > 0, an intracommunicator of two or
// more, a valid root and buffers. It reads each table once and builds the
// same descriptor as the general path below, without CollCheck's
// generality: that took 2/3 of a post's ~1,600 instructions (issue 5, (c):
// host time to post a non-blocking collective). Returns -1 for any call it
// does not take, valid or not: the general path handles it, and names what
// is wrong.
__attribute__((noinline)) int reduce_fast(const char* fn, bcs_coll_t kind, const void* sendbuf,
                                          void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                                          int root, MPI_Comm c, bool nb, MPI_Request* request) {
  if (count <= 0 || (nb && !request) || S().phase != Phase::running) return -1;
  const int comm = comm_index(c);
  if (comm == kNoComm) return -1;
  const Comm& cm = comm_at(comm);
  const int n = cm.size();
  if (cm.inter || n < 2) return -1;
  const bool rooted = kind == BCS_COLL_REDUCE;
  if (rooted && (root < 0 || root >= n)) return -1;
  const bool is_root = !rooted || cm.rank == root;  // receives the result
  if (is_root && (!recvbuf || recvbuf == MPI_IN_PLACE || sendbuf == recvbuf)) return -1;
  if (sendbuf == MPI_IN_PLACE && is_root) sendbuf = recvbuf;
  if (!sendbuf || sendbuf == MPI_IN_PLACE) return -1;
  uint64_t unit;
  bcs_coll_args_t a{};
  if (!predefined_reducible(type, &unit, &a.dtype) || !predefined_op_on(op, a.dtype, &a.op))
    return -1;
  a.kind = kind;
  a.root = rooted ? root : 0;
  a.sendbuf = sendbuf;
  a.recvbuf = is_root ? recvbuf : nullptr;
  a.count = static_cast<uint64_t>(count);
  a.sbytes = a.count * unit;
  a.rbytes = is_root ? a.sbytes : 0;
  return run_coll(fn, comm, a, nullptr, request);
}

// Reduce (rooted), Allreduce, Scan, Exscan: `count` elements everywhere.
// The general path: checks everything, stages types with holes, applies
// user ops in the rank.
int reduce_general(const char* fn, bcs_coll_t kind, const void* sendbuf, void* recvbuf, int count,
                   MPI_Datatype type, MPI_Op op, int root, MPI_Comm c, bool nb,
                   MPI_Request* request) {
  const bool rooted = kind == BCS_COLL_REDUCE;
  const bool is_root = !rooted || my_rank(c) == root;  // receives the result
  CollCheck k = make_check(fn, c, nb, request);
  k.send = scalar_side("", sendbuf, count, type);
  k.send.bufname = "sendbuf";
  k.send.in_place_ok = is_root;
  k.recv = scalar_side("", recvbuf, count, type);
  k.recv.bufname = "recvbuf";
  k.recv.used = is_root;
  k.rooted = rooted;
  k.root = rooted ? root : 0;
  k.reduction = true;
  k.op = op;
  k.rtype = type;
  k.rcount = count;
  if (int e = check_coll(k)) return e;
  const bool holes = coll_needs_staging(type, count);
  const uint64_t bytes = bytes_of(count, type);
  const void* sb = k.send.in_place() ? recvbuf : sendbuf;
  bcs_coll_args_t a{};
  if (!k.red.user) {
    a.kind = kind;
    a.root = k.root;
    a.sendbuf = sb;
    a.recvbuf = is_root ? recvbuf : nullptr;
    a.sbytes = bytes;
    a.rbytes = is_root ? bytes : 0;
    // A derived type of one basic type reduces element-wise.
    a.count = static_cast<uint64_t>(count) * static_cast<uint64_t>(type_elems(type));
    a.op = k.red.op;
    a.dtype = k.red.dtype;
    if (!holes) return run_coll(fn, k.comm, a, nullptr, request);
    // Packed: the elements side by side, reduced as the basic type, unpacked
    // into recvbuf when done (Exscan's member 0 gets nothing: it unpacks
    // what recvbuf held).
    auto d = std::make_shared<CollData>();
    auto st = std::make_shared<Staging>();
    st->sb = st->rb = side_blocks(k.send, 1);
    stage_blocks(st->sb, sb, true, &st->ss);
    a.sendbuf = st->ss.bytes.data();
    d->staging = st;
    if (is_root) {
      stage_blocks(st->rb, recvbuf, true, &st->sr);
      a.recvbuf = st->sr.bytes.data();
      unstage_when_done(*d, st, recvbuf);
    }
    return run_coll(fn, k.comm, a, std::move(d), request);
  }
  const int n = comm_size(k.comm);
  const int rank = comm_rank(k.comm);
  auto d = std::make_shared<CollData>();
  if (holes) {  // contributions travel packed
    auto st = std::make_shared<Staging>();
    st->sb = side_blocks(k.send, 1);
    stage_blocks(st->sb, sb, true, &st->ss);
    sb = st->ss.bytes.data();
    d->staging = st;
  }
  gather_for_user_op(a, *d, !rooted, root, n, sb, bytes, is_root);
  // Which contributions make this member's result.
  int last = n - 1;
  if (kind == BCS_COLL_SCAN) last = rank;
  if (kind == BCS_COLL_EXSCAN) last = rank - 1;  // member 0: recvbuf untouched
  if (is_root && last >= 0) {
    CollData* dp = d.get();  // owned by the request (or this call) while finish runs
    d->finish = [dp, f = k.red.fn, type, count, bytes, last, recvbuf, holes,
                 hold = type_hold(type)] {
      if (holes)
        user_fold_packed(f, type, count, dp->tmp.data(), bytes, 0, last, recvbuf);
      else
        user_fold(f, type, count, dp->tmp.data(), bytes, 0, 0, last, recvbuf);
    };
  }
  return run_coll(fn, k.comm, a, std::move(d), request);
}

// The short path, else the general one. (Reduce and Allreduce try the
// short path before their intercommunicator test, which it makes too.)
int reduce(const char* fn, bcs_coll_t kind, const void* sendbuf, void* recvbuf, int count,
           MPI_Datatype type, MPI_Op op, int root, MPI_Comm c, bool nb, MPI_Request* request) {
  if (const int e = reduce_fast(fn, kind, sendbuf, recvbuf, count, type, op, root, c, nb, request);
      e >= 0)
    return e;
  return reduce_general(fn, kind, sendbuf, recvbuf, count, type, op, root, c, nb, request);
}

// Reduce_scatter (recvcounts[]) and Reduce_scatter_block (recvcount each).
int reduce_scatter(const char* fn, const void* sendbuf, void* recvbuf, const int* recvcounts,
                   int recvcount, bool block, MPI_Datatype type, MPI_Op op, MPI_Comm c, bool nb,
                   MPI_Request* request) {
  const int comm0 = comm_index(c);
  const int n = comm0 == kNoComm ? 1 : comm_size(comm0);
  const int rank = my_rank(c);
  // Elements of every member's contribution (clamped for the checks; a sum
  // past INT_MAX is fine for the runtime, which counts in uint64).
  long long total = 0;
  if (block)
    total = static_cast<long long>(recvcount) * n;
  else if (recvcounts)
    for (int i = 0; i < n; ++i) total += recvcounts[i] > 0 ? recvcounts[i] : 0;
  const int total_clamped = total > INT_MAX ? INT_MAX : static_cast<int>(total);
  CollCheck k = make_check(fn, c, nb, request);
  k.recv = block ? scalar_side("recv", recvbuf, recvcount, type)
                 : vector_side("recv", recvbuf, recvcounts, nullptr, type);
  k.recv.need_displs = false;
  k.recv.only = rank;
  k.send = scalar_side("", sendbuf, block && recvcount < 0 ? 0 : total_clamped, type);
  k.send.bufname = "sendbuf";
  k.send.in_place_ok = true;
  k.reduction = true;
  k.op = op;
  k.rtype = type;
  k.rcount = total_clamped;
  if (int e = check_coll(k)) return e;
  auto d = std::make_shared<CollData>();
  d->rcounts.assign(static_cast<size_t>(n), static_cast<uint64_t>(block ? recvcount : 0));
  if (!block)
    for (int i = 0; i < n; ++i) d->rcounts[static_cast<size_t>(i)] = static_cast<uint64_t>(recvcounts[i]);
  const uint64_t unit = unit_of(type);
  const uint64_t bytes = static_cast<uint64_t>(total) * unit;
  const uint64_t mine = d->rcounts[static_cast<size_t>(rank)];
  const void* sb = k.send.in_place() ? recvbuf : sendbuf;
  // A type with holes: the whole contribution packed, this member's part
  // received packed and unpacked when done.
  const bool holes = coll_needs_staging(type, total_clamped);
  void* rb = recvbuf;
  if (holes) {
    auto st = std::make_shared<Staging>();
    st->sb = side_blocks(k.send, 1);
    stage_blocks(st->sb, sb, true, &st->ss);
    sb = st->ss.bytes.data();
    d->staging = st;
    if (!k.red.user && mine > 0) {
      st->rb.count = {static_cast<int64_t>(mine)};
      st->rb.off = {0};
      st->rb.type = {type};
      stage_blocks(st->rb, recvbuf, false, &st->sr);
      rb = st->sr.bytes.data();
      unstage_when_done(*d, st, recvbuf);
    }
  }
  bcs_coll_args_t a{};
  if (!k.red.user) {
    a.kind = BCS_COLL_REDUCE_SCATTER;
    a.sendbuf = sb;
    a.recvbuf = rb;
    a.sbytes = bytes;
    a.rbytes = mine * unit;
    a.count = static_cast<uint64_t>(total) * static_cast<uint64_t>(type_elems(type));
    a.op = k.red.op;
    a.dtype = k.red.dtype;
    // The runtime counts elements of the basic type.
    for (auto& rc : d->rcounts) rc *= static_cast<uint64_t>(type_elems(type));
    a.rcounts = d->rcounts.data();
    return run_coll(fn, k.comm, a, std::move(d), request);
  }
  uint64_t off = 0;  // this member's elements in the full vector
  for (int i = 0; i < rank; ++i) off += d->rcounts[static_cast<size_t>(i)];
  gather_for_user_op(a, *d, true, 0, n, sb, bytes, true);
  d->rcounts.clear();  // not read by the runtime for an allgather
  if (mine > 0) {
    CollData* dp = d.get();
    d->finish = [dp, f = k.red.fn, type, mine, bytes, off, unit, n, recvbuf, holes,
                 hold = type_hold(type)] {
      if (holes)
        user_fold_packed(f, type, static_cast<int>(mine), dp->tmp.data() + off * unit, bytes, 0,
                         n - 1, recvbuf);
      else
        user_fold(f, type, static_cast<int>(mine), dp->tmp.data(), bytes, off * unit, 0, n - 1,
                  recvbuf);
    };
  }
  return run_coll(fn, k.comm, a, std::move(d), request);
}

}  // namespace
}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

int bcs_impl_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                int root, MPI_Comm c) {
  if (const int e = reduce_fast("MPI_Reduce", BCS_COLL_REDUCE, sendbuf, recvbuf, count, type, op,
                                root, c, false, nullptr);
      e >= 0)
    return e;
  if (is_intercomm(c)) return inter_reduce(sendbuf, recvbuf, count, type, op, root, c);
  return reduce_general("MPI_Reduce", BCS_COLL_REDUCE, sendbuf, recvbuf, count, type, op, root, c,
                        false, nullptr);
}

int bcs_impl_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                 int root, MPI_Comm c, MPI_Request* request) {
  if (const int e = reduce_fast("MPI_Ireduce", BCS_COLL_REDUCE, sendbuf, recvbuf, count, type, op,
                                root, c, true, request);
      e >= 0)
    return e;
  if (is_intercomm(c)) return inter_ireduce(sendbuf, recvbuf, count, type, op, root, c, request);
  return reduce_general("MPI_Ireduce", BCS_COLL_REDUCE, sendbuf, recvbuf, count, type, op, root, c,
                        true, request);
}

int bcs_impl_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm c) {
  if (const int e = reduce_fast("MPI_Allreduce", BCS_COLL_ALLREDUCE, sendbuf, recvbuf, count, type,
                                op, 0, c, false, nullptr);
      e >= 0)
    return e;
  if (is_intercomm(c)) return inter_allreduce(sendbuf, recvbuf, count, type, op, c);
  return reduce_general("MPI_Allreduce", BCS_COLL_ALLREDUCE, sendbuf, recvbuf, count, type, op, 0,
                        c, false, nullptr);
}

int bcs_impl_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                    MPI_Comm c, MPI_Request* request) {
  if (const int e = reduce_fast("MPI_Iallreduce", BCS_COLL_ALLREDUCE, sendbuf, recvbuf, count, type,
                                op, 0, c, true, request);
      e >= 0)
    return e;
  if (is_intercomm(c)) return inter_iallreduce(sendbuf, recvbuf, count, type, op, c, request);
  return reduce_general("MPI_Iallreduce", BCS_COLL_ALLREDUCE, sendbuf, recvbuf, count, type, op, 0,
                        c, true, request);
}

int bcs_impl_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
              MPI_Comm c) {
  return reduce("MPI_Scan", BCS_COLL_SCAN, sendbuf, recvbuf, count, type, op, 0, c, false,
                nullptr);
}

int bcs_impl_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm c, MPI_Request* request) {
  return reduce("MPI_Iscan", BCS_COLL_SCAN, sendbuf, recvbuf, count, type, op, 0, c, true,
                request);
}

int bcs_impl_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                MPI_Comm c) {
  return reduce("MPI_Exscan", BCS_COLL_EXSCAN, sendbuf, recvbuf, count, type, op, 0, c, false,
                nullptr);
}

int bcs_impl_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op,
                 MPI_Comm c, MPI_Request* request) {
  return reduce("MPI_Iexscan", BCS_COLL_EXSCAN, sendbuf, recvbuf, count, type, op, 0, c, true,
                request);
}

int bcs_impl_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype type, MPI_Op op, MPI_Comm c) {
  if (is_intercomm(c))
    return inter_reduce_scatter("MPI_Reduce_scatter", sendbuf, recvbuf, 0, recvcounts, type, op,
                                c);
  return reduce_scatter("MPI_Reduce_scatter", sendbuf, recvbuf, recvcounts, 0, false, type, op,
                        c, false, nullptr);
}

int bcs_impl_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                         MPI_Datatype type, MPI_Op op, MPI_Comm c, MPI_Request* request) {
  if (is_intercomm(c))
    return inter_ireduce_scatter("MPI_Ireduce_scatter", sendbuf, recvbuf, 0, recvcounts, type, op,
                                 c, request);
  return reduce_scatter("MPI_Ireduce_scatter", sendbuf, recvbuf, recvcounts, 0, false, type, op,
                        c, true, request);
}

int bcs_impl_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                              MPI_Datatype type, MPI_Op op, MPI_Comm c) {
  if (is_intercomm(c))
    return inter_reduce_scatter("MPI_Reduce_scatter_block", sendbuf, recvbuf, recvcount, nullptr,
                                type, op, c);
  return reduce_scatter("MPI_Reduce_scatter_block", sendbuf, recvbuf, nullptr, recvcount, true,
                        type, op, c, false, nullptr);
}

int bcs_impl_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                               MPI_Datatype type, MPI_Op op, MPI_Comm c, MPI_Request* request) {
  if (is_intercomm(c))
    return inter_ireduce_scatter("MPI_Ireduce_scatter_block", sendbuf, recvbuf, recvcount, nullptr,
                                 type, op, c, request);
  return reduce_scatter("MPI_Ireduce_scatter_block", sendbuf, recvbuf, nullptr, recvcount, true,
                        type, op, c, true, request);
}

}  // extern "C"
