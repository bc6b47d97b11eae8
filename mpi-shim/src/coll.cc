// Collectives (the paper's Table 4.2, collective part): every MPI collective
// is one bcs_coll descriptor, run by the node managers; the rank only posts
// it (and sleeps if blocking). This file holds what all collectives share
// (posting, one-member communicators) and the data-movement collectives;
// the argument checks are in coll_check.cc, reductions in coll_reduce.cc.
//
//   MPI_Barrier / MPI_Ibarrier            -> BCS_COLL_BARRIER
//   MPI_Bcast                             -> BCS_COLL_BCAST
//   MPI_Gather(v) / MPI_Scatter(v)        -> BCS_COLL_GATHER(V) / SCATTER(V)
//   MPI_Allgather(v)                      -> BCS_COLL_ALLGATHER(V)
//   MPI_Alltoall(v) / MPI_Alltoallw       -> BCS_COLL_ALLTOALL(V)
//
// Sizes given to the runtime are bytes: count * type size; displacements
// are scaled by the type's extent (its size: predefined types only), except
// Alltoallw's, which MPI gives in bytes already. The per-member arrays are
// converted into shim-owned uint64 arrays that live until the operation
// completes (with the MPI request, even if it is freed early).
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "coll.h"
#include "shim.h"

namespace bcs::shim {

std::vector<uint64_t> to_bytes(const int* v, int n, uint64_t unit) {
  std::vector<uint64_t> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = static_cast<uint64_t>(static_cast<int64_t>(v[i])) * unit;
  return out;
}

int run_coll(const char* fn, int comm, bcs_coll_args_t& a, std::shared_ptr<CollData> d,
             MPI_Request* request) {
  a.context = coll_context_of(comm);
  a.comm_size = comm_size(comm);
  auto finish = [&d] {
    if (d && d->finish) {
      const auto f = std::move(d->finish);
      d->finish = nullptr;
      f();
    }
  };
  if (a.comm_size == 1) {
    // One member (MPI_COMM_SELF, singleton mode, any one-member communicator):
    // plain copies, no runtime.
    const int e = bcs_coll_local(&a);
    if (e != BCS_OK) return raise_coll(comm, fn, e);
    finish();
    if (request) {
      Req& q = req_new(request);
      q.comm = comm;
      q.is_coll = true;
      q.local_done = true;
      set_empty_status(&q.local_status);
    }
    return MPI_SUCCESS;
  }
  if (!request) {
    const int e = post_with_retry([&] { return bcs_coll(&a, BCS_BLOCKING, nullptr); });
    if (e != BCS_OK) return raise_coll(comm, fn, e);
    finish();
    return MPI_SUCCESS;
  }
  bcs_request_t b = BCS_REQUEST_NULL;
  const int e = post_with_retry([&] { return bcs_coll(&a, BCS_NONBLOCKING, &b); });
  if (e != BCS_OK) return raise_coll(comm, fn, e);
  Req& q = req_new(request);
  q.comm = comm;
  q.is_coll = true;
  q.breq = b;
  if (d) q.coll = std::move(d);  // runs finish() when the request completes
  return MPI_SUCCESS;
}

namespace {

// A scalar send side with holes (gather, allgather): packed now.
void stage_scalar_send(bcs_coll_args_t& a, CollData& d, const std::shared_ptr<Staging>& st,
                       const CollCheck& k, const void* sendbuf) {
  if (!k.send.live() || !coll_needs_staging(k.send.type, k.send.count)) return;
  st->sb = side_blocks(k.send, 1);
  stage_blocks(st->sb, sendbuf, true, &st->ss);
  a.sendbuf = st->ss.bytes.data();
  a.sbytes = st->ss.len[0];
  d.staging = st;
}

// A gathered receive side with holes (gather(v) at the root, allgather(v)):
// the blocks land packed and are unpacked at completion. In place, member
// `own`'s block is packed there first and sent from there.
void stage_gathered(bcs_coll_args_t& a, CollData& d, const std::shared_ptr<Staging>& st,
                    const CollCheck& k, void* recvbuf, bool v, int n, int own) {
  st->rb = side_blocks(k.recv, n);
  if (!blocks_need_staging(st->rb)) return;
  stage_blocks(st->rb, recvbuf, false, &st->sr);
  a.recvbuf = st->sr.bytes.data();
  if (v) {
    d.rcounts = st->sr.len;
    d.rdispls = st->sr.off;
    a.rcounts = d.rcounts.data();
    a.rdispls = d.rdispls.data();
  } else {
    a.rbytes = st->sr.len[0];
  }
  const auto r = static_cast<size_t>(own);
  if (k.send.in_place()) {
    if (st->sr.len[r] > 0)
      type_pack(at(recvbuf, static_cast<uint64_t>(st->rb.off[r])), st->rb.count[r],
                st->rb.type[r], st->sr.block(r));
    a.sendbuf = st->sr.block(r);
    a.sbytes = st->sr.len[r];
  }
  unstage_when_done(d, st, recvbuf);
}

// ------------------------------------------------------------ barrier, bcast

// MPI_Barrier / MPI_Ibarrier (request non-NULL): a BCS_COLL_BARRIER on the
// communicator's collective context (bcs_barrier only knows WORLD and SELF).
int barrier(const char* fn, MPI_Comm c, bool nb, MPI_Request* request) {
  REQUIRE_RUNNING(fn);
  const int comm = comm_index(c);
  if (comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (nb && !request) return raise_error(comm, fn, MPI_ERR_REQUEST, "NULL request pointer");
  bcs_coll_args_t a{};
  a.kind = BCS_COLL_BARRIER;
  return run_coll(fn, comm, a, nullptr, request);
}

int bcast(const char* fn, void* buf, int count, MPI_Datatype type, int root, MPI_Comm c, bool nb,
          MPI_Request* request) {
  CollCheck k = make_check(fn, c, nb, request);
  k.send = scalar_side("", buf, count, type);
  k.rooted = true;
  k.root = root;
  if (int e = check_coll(k)) return e;
  bcs_coll_args_t a{};
  a.kind = BCS_COLL_BCAST;
  a.root = root;
  a.sendbuf = buf;
  a.recvbuf = buf;
  a.sbytes = a.rbytes = bytes_of(count, type);
  std::shared_ptr<CollData> d;
  if (coll_needs_staging(type, count)) {
    d = std::make_shared<CollData>();
    auto st = std::make_shared<Staging>();
    const bool is_root = comm_rank(k.comm) == root;
    st->rb = side_blocks(k.send, 1);
    stage_blocks(st->rb, buf, is_root, &st->sr);
    a.sendbuf = a.recvbuf = st->sr.bytes.data();
    a.sbytes = a.rbytes = st->sr.len[0];
    if (!is_root) unstage_when_done(*d, st, buf);
    d->staging = st;
  }
  return run_coll(fn, k.comm, a, std::move(d), request);
}

// ------------------------------------------------------------ gather, scatter

int gather(const char* fn, const void* sendbuf, int scount, MPI_Datatype stype, void* recvbuf,
           int rcount, MPI_Datatype rtype, const int* rcounts, const int* displs, bool v,
           int root, MPI_Comm c, bool nb, MPI_Request* request) {
  const bool is_root = my_rank(c) == root;
  CollCheck k = make_check(fn, c, nb, request);
  k.send = scalar_side("send", sendbuf, scount, stype);
  k.send.in_place_ok = is_root;
  k.recv = v ? vector_side("recv", recvbuf, rcounts, displs, rtype)
             : scalar_side("recv", recvbuf, rcount, rtype);
  k.recv.used = is_root;
  k.rooted = true;
  k.root = root;
  k.own = CollCheck::Own::in_recv;
  if (int e = check_coll(k)) return e;
  const int n = comm_size(k.comm);
  auto d = std::make_shared<CollData>();
  bcs_coll_args_t a{};
  a.kind = v ? BCS_COLL_GATHERV : BCS_COLL_GATHER;
  a.root = root;
  a.sendbuf = sendbuf;
  a.sbytes = bytes_of(scount, stype);
  if (is_root) {
    a.recvbuf = recvbuf;
    uint64_t own_off, own_len;  // where the root's own block goes
    if (v) {
      d->rcounts = to_bytes(rcounts, n, unit_of(rtype));
      d->rdispls = to_bytes(displs, n, unit_of(rtype));
      a.rcounts = d->rcounts.data();
      a.rdispls = d->rdispls.data();
      own_off = d->rdispls[static_cast<size_t>(root)];
      own_len = d->rcounts[static_cast<size_t>(root)];
    } else {
      a.rbytes = bytes_of(rcount, rtype);
      own_off = static_cast<uint64_t>(root) * a.rbytes;
      own_len = a.rbytes;
    }
    if (k.send.in_place()) {
      // The root's block is already in place: it "sends" from there.
      a.flags = BCS_COLL_IN_PLACE;
      a.sendbuf = at(recvbuf, own_off);
      a.sbytes = own_len;
    }
  }
  // Sides with holes: packed copies (the root's own block too, in place).
  auto st = std::make_shared<Staging>();
  stage_scalar_send(a, *d, st, k, sendbuf);
  if (is_root) stage_gathered(a, *d, st, k, recvbuf, v, n, root);
  return run_coll(fn, k.comm, a, std::move(d), request);
}

int scatter(const char* fn, const void* sendbuf, int scount, const int* scounts,
            const int* displs, bool v, MPI_Datatype stype, void* recvbuf, int rcount,
            MPI_Datatype rtype, int root, MPI_Comm c, bool nb, MPI_Request* request) {
  const bool is_root = my_rank(c) == root;
  CollCheck k = make_check(fn, c, nb, request);
  k.send = v ? vector_side("send", sendbuf, scounts, displs, stype)
             : scalar_side("send", sendbuf, scount, stype);
  k.send.used = is_root;
  k.recv = scalar_side("recv", recvbuf, rcount, rtype);
  k.recv.in_place_ok = is_root;
  k.rooted = true;
  k.root = root;
  k.own = CollCheck::Own::in_send;
  if (int e = check_coll(k)) return e;
  const int n = comm_size(k.comm);
  auto d = std::make_shared<CollData>();
  bcs_coll_args_t a{};
  a.kind = v ? BCS_COLL_SCATTERV : BCS_COLL_SCATTER;
  a.root = root;
  a.recvbuf = recvbuf;
  a.rbytes = bytes_of(rcount, rtype);
  if (is_root) {
    a.sendbuf = sendbuf;
    uint64_t own_off, own_len;
    if (v) {
      d->scounts = to_bytes(scounts, n, unit_of(stype));
      d->sdispls = to_bytes(displs, n, unit_of(stype));
      a.scounts = d->scounts.data();
      a.sdispls = d->sdispls.data();
      own_off = d->sdispls[static_cast<size_t>(root)];
      own_len = d->scounts[static_cast<size_t>(root)];
    } else {
      a.sbytes = bytes_of(scount, stype);
      own_off = static_cast<uint64_t>(root) * a.sbytes;
      own_len = a.sbytes;
    }
    if (k.recv.in_place()) {
      // The root's block stays in the send buffer.
      a.flags = BCS_COLL_IN_PLACE;
      a.recvbuf = const_cast<unsigned char*>(at(sendbuf, own_off));
      a.rbytes = own_len;
    }
  }
  // Sides with holes: packed copies.
  auto st = std::make_shared<Staging>();
  if (is_root && (st->sb = side_blocks(k.send, n), blocks_need_staging(st->sb))) {
    stage_blocks(st->sb, sendbuf, true, &st->ss);
    a.sendbuf = st->ss.bytes.data();
    if (v) {
      d->scounts = st->ss.len;
      d->sdispls = st->ss.off;
      a.scounts = d->scounts.data();
      a.sdispls = d->sdispls.data();
    } else {
      a.sbytes = st->ss.len[0];
    }
    if (k.recv.in_place()) {
      a.recvbuf = st->ss.block(static_cast<size_t>(root));
      a.rbytes = st->ss.len[static_cast<size_t>(root)];
    }
    d->staging = st;
  }
  if (k.recv.live() && coll_needs_staging(rtype, rcount)) {
    st->rb = side_blocks(k.recv, 1);
    stage_blocks(st->rb, recvbuf, false, &st->sr);
    a.recvbuf = st->sr.bytes.data();
    a.rbytes = st->sr.len[0];
    unstage_when_done(*d, st, recvbuf);
  }
  return run_coll(fn, k.comm, a, std::move(d), request);
}

// ------------------------------------------------------------ allgather, alltoall

int allgather(const char* fn, const void* sendbuf, int scount, MPI_Datatype stype,
              void* recvbuf, int rcount, const int* rcounts, const int* displs, bool v,
              MPI_Datatype rtype, MPI_Comm c, bool nb, MPI_Request* request) {
  CollCheck k = make_check(fn, c, nb, request);
  k.send = scalar_side("send", sendbuf, scount, stype);
  k.send.in_place_ok = true;
  k.recv = v ? vector_side("recv", recvbuf, rcounts, displs, rtype)
             : scalar_side("recv", recvbuf, rcount, rtype);
  k.own = CollCheck::Own::in_recv;
  if (int e = check_coll(k)) return e;
  const int n = comm_size(k.comm);
  const int rank = comm_rank(k.comm);
  auto d = std::make_shared<CollData>();
  bcs_coll_args_t a{};
  a.kind = v ? BCS_COLL_ALLGATHERV : BCS_COLL_ALLGATHER;
  a.sendbuf = sendbuf;
  a.sbytes = bytes_of(scount, stype);
  a.recvbuf = recvbuf;
  uint64_t own_off, own_len;
  if (v) {
    d->rcounts = to_bytes(rcounts, n, unit_of(rtype));
    d->rdispls = to_bytes(displs, n, unit_of(rtype));
    a.rcounts = d->rcounts.data();
    a.rdispls = d->rdispls.data();
    own_off = d->rdispls[static_cast<size_t>(rank)];
    own_len = d->rcounts[static_cast<size_t>(rank)];
  } else {
    a.rbytes = bytes_of(rcount, rtype);
    own_off = static_cast<uint64_t>(rank) * a.rbytes;
    own_len = a.rbytes;
  }
  if (k.send.in_place()) {  // this member's block is already in place
    a.sendbuf = at(recvbuf, own_off);
    a.sbytes = own_len;
  }
  // Sides with holes: packed copies (this member's own block too, in place).
  auto st = std::make_shared<Staging>();
  stage_scalar_send(a, *d, st, k, sendbuf);
  stage_gathered(a, *d, st, k, recvbuf, v, n, rank);
  return run_coll(fn, k.comm, a, std::move(d), request);
}

// All-to-all in place sends the receive buffer's own blocks. The node
// managers move a large all-to-all in rounds, one slice at a time, and
// write what arrived in a round before they read the blocks of later
// rounds: a block received from a peer could overwrite a block not yet
// sent to it. So the blocks to send are copied out first (MPICH keeps a
// temporary buffer for the same reason). `a` already points both sides at
// the receive buffer (or its packed copy).
void in_place_send_copy(bcs_coll_args_t& a, CollData& d, int n) {
  const auto* p = static_cast<const unsigned char*>(a.recvbuf);
  const uint64_t len = a.rbytes * static_cast<uint64_t>(n);
  d.tmp.assign(p, p + len);
  a.sendbuf = d.tmp.data();
  a.sbytes = a.rbytes;
}
// The same for all-to-all(v/w): block i is d.rcounts[i] bytes at
// d.rdispls[i] from a.recvbuf (absolute addresses from MPI_BOTTOM; two's
// complement displacements wrap), packed one after the other.
void in_place_send_copy_v(bcs_coll_args_t& a, CollData& d, int n) {
  const auto base = reinterpret_cast<uintptr_t>(a.recvbuf);
  uint64_t total = 0;
  for (int i = 0; i < n; ++i) total += d.rcounts[static_cast<size_t>(i)];
  d.tmp.resize(total);
  d.scounts = d.rcounts;
  d.sdispls.assign(static_cast<size_t>(n), 0);
  uint64_t off = 0;
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    if (d.rcounts[k])
      std::memcpy(d.tmp.data() + off, reinterpret_cast<const void*>(base + d.rdispls[k]),
                  d.rcounts[k]);
    d.sdispls[k] = off;
    off += d.rcounts[k];
  }
  a.sendbuf = d.tmp.data();
}

int alltoall(const char* fn, const void* sendbuf, int scount, MPI_Datatype stype, void* recvbuf,
             int rcount, MPI_Datatype rtype, MPI_Comm c, bool nb, MPI_Request* request) {
  CollCheck k = make_check(fn, c, nb, request);
  k.send = scalar_side("send", sendbuf, scount, stype);
  k.send.in_place_ok = true;
  k.recv = scalar_side("recv", recvbuf, rcount, rtype);
  if (int e = check_coll(k)) return e;
  bcs_coll_args_t a{};
  a.kind = BCS_COLL_ALLTOALL;
  a.recvbuf = recvbuf;
  a.rbytes = bytes_of(rcount, rtype);
  a.sendbuf = k.send.in_place() ? recvbuf : sendbuf;
  a.sbytes = k.send.in_place() ? a.rbytes : bytes_of(scount, stype);
  const bool stage_s = k.send.live() && coll_needs_staging(stype, scount);
  const bool stage_r = coll_needs_staging(rtype, rcount);
  if (!stage_s && !stage_r && !k.send.in_place())
    return run_coll(fn, k.comm, a, nullptr, request);
  const int n = comm_size(k.comm);
  auto d = std::make_shared<CollData>();
  if (!stage_s && !stage_r) {
    in_place_send_copy(a, *d, n);
    return run_coll(fn, k.comm, a, std::move(d), request);
  }
  // Sides with holes: packed copies (in place: the blocks to send are the
  // receive buffer's, packed).
  auto st = std::make_shared<Staging>();
  d->staging = st;
  if (stage_s) {
    st->sb = side_blocks(k.send, n);
    stage_blocks(st->sb, sendbuf, true, &st->ss);
    a.sendbuf = st->ss.bytes.data();
    a.sbytes = st->ss.len[0];
  }
  if (stage_r) {
    st->rb = side_blocks(k.recv, n);
    stage_blocks(st->rb, recvbuf, k.send.in_place(), &st->sr);
    a.recvbuf = st->sr.bytes.data();
    a.rbytes = st->sr.len[0];
    if (k.send.in_place()) {
      a.sendbuf = st->sr.bytes.data();
      a.sbytes = a.rbytes;
      in_place_send_copy(a, *d, n);
    }
    unstage_when_done(*d, st, recvbuf);
  }
  return run_coll(fn, k.comm, a, std::move(d), request);
}

// Alltoallv (stypes/rtypes NULL: one type per side, displacements in
// elements) and Alltoallw (a type per peer, displacements in bytes).
int alltoallv(const char* fn, const void* sendbuf, const int* scounts, const int* sdispls,
              MPI_Datatype stype, const MPI_Datatype* stypes, void* recvbuf, const int* rcounts,
              const int* rdispls, MPI_Datatype rtype, const MPI_Datatype* rtypes, bool w,
              MPI_Comm c, bool nb, MPI_Request* request) {
  CollCheck k = make_check(fn, c, nb, request);
  k.send = vector_side("send", sendbuf, scounts, sdispls, stype);
  k.send.in_place_ok = true;
  k.recv = vector_side("recv", recvbuf, rcounts, rdispls, rtype);
  if (w) {
    k.send.types = stypes;
    k.recv.types = rtypes;
    k.send.need_types = k.recv.need_types = true;
    k.send.bottom_ok = k.recv.bottom_ok = true;
  }
  if (int e = check_coll(k)) return e;
  const int n = comm_size(k.comm);
  auto d = std::make_shared<CollData>();
  auto counts = [n, w](const int* cnt, MPI_Datatype t, const MPI_Datatype* ts) {
    if (!w) return to_bytes(cnt, n, unit_of(t));
    std::vector<uint64_t> out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = bytes_of(cnt[i], ts[i]);
    return out;
  };
  d->rcounts = counts(rcounts, rtype, rtypes);
  d->rdispls = to_bytes(rdispls, n, w ? 1 : unit_of(rtype));
  if (k.send.in_place()) {  // sends come from where the receives go
    d->scounts = d->rcounts;
    d->sdispls = d->rdispls;
  } else {
    d->scounts = counts(scounts, stype, stypes);
    d->sdispls = to_bytes(sdispls, n, w ? 1 : unit_of(stype));
  }
  bcs_coll_args_t a{};
  a.kind = BCS_COLL_ALLTOALLV;
  a.sendbuf = k.send.in_place() ? recvbuf : sendbuf;
  a.recvbuf = recvbuf;
  a.scounts = d->scounts.data();
  a.sdispls = d->sdispls.data();
  a.rcounts = d->rcounts.data();
  a.rdispls = d->rdispls.data();
  // Sides with holes: packed copies (in place: the receive buffer's blocks).
  auto st = std::make_shared<Staging>();
  if (k.send.live() && (st->sb = side_blocks(k.send, n), blocks_need_staging(st->sb))) {
    stage_blocks(st->sb, sendbuf, true, &st->ss);
    a.sendbuf = st->ss.bytes.data();
    d->scounts = st->ss.len;
    d->sdispls = st->ss.off;
    d->staging = st;
  }
  if (st->rb = side_blocks(k.recv, n), blocks_need_staging(st->rb)) {
    stage_blocks(st->rb, recvbuf, k.send.in_place(), &st->sr);
    a.recvbuf = st->sr.bytes.data();
    d->rcounts = st->sr.len;
    d->rdispls = st->sr.off;
    if (k.send.in_place()) {
      a.sendbuf = a.recvbuf;
      d->scounts = d->rcounts;
      d->sdispls = d->rdispls;
    }
    unstage_when_done(*d, st, recvbuf);
  }
  if (k.send.in_place()) in_place_send_copy_v(a, *d, n);
  a.scounts = d->scounts.data();
  a.sdispls = d->sdispls.data();
  a.rcounts = d->rcounts.data();
  a.rdispls = d->rdispls.data();
  return run_coll(fn, k.comm, a, std::move(d), request);
}

}  // namespace
}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

int bcs_impl_Barrier(MPI_Comm c) {
  if (is_intercomm(c)) return inter_barrier(c);
  return barrier("MPI_Barrier", c, false, nullptr);
}

int bcs_impl_Ibarrier(MPI_Comm c, MPI_Request* request) {
  if (is_intercomm(c)) return inter_ibarrier(c, request);
  return barrier("MPI_Ibarrier", c, true, request);
}

int bcs_impl_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm c) {
  if (is_intercomm(c)) return inter_bcast(buf, count, type, root, c);
  if (coll_needs_staging(type, count)) return staged_bcast(buf, count, type, root, c);
  return bcast("MPI_Bcast", buf, count, type, root, c, false, nullptr);
}

int bcs_impl_Ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm c,
                MPI_Request* request) {
  if (is_intercomm(c)) return inter_ibcast(buf, count, type, root, c, request);
  return bcast("MPI_Ibcast", buf, count, type, root, c, true, request);
}

int bcs_impl_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm c) {
  if (is_intercomm(c))
    return inter_gather("MPI_Gather", sendbuf, sendcount, sendtype, recvbuf, recvcount, nullptr,
                        nullptr, recvtype, root, c);
  if (coll_needs_staging(sendtype, sendcount) || coll_needs_staging(recvtype, recvcount))
    return staged_blocks("MPI_Gather", 0, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                         recvtype, root, c);
  return gather("MPI_Gather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                nullptr, nullptr, false, root, c, false, nullptr);
}

int bcs_impl_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm c,
                 MPI_Request* request) {
  if (is_intercomm(c))
    return inter_igather("MPI_Igather", sendbuf, sendcount, sendtype, recvbuf, recvcount, nullptr,
                         nullptr, recvtype, root, c, request);
  return gather("MPI_Igather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                nullptr, nullptr, false, root, c, true, request);
}

int bcs_impl_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm c) {
  if (is_intercomm(c))
    return inter_gather("MPI_Gatherv", sendbuf, sendcount, sendtype, recvbuf, 0, recvcounts,
                        displs, recvtype, root, c);
  return gather("MPI_Gatherv", sendbuf, sendcount, sendtype, recvbuf, 0, recvtype, recvcounts,
                displs, true, root, c, false, nullptr);
}

int bcs_impl_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                  MPI_Comm c, MPI_Request* request) {
  if (is_intercomm(c))
    return inter_igather("MPI_Igatherv", sendbuf, sendcount, sendtype, recvbuf, 0, recvcounts,
                         displs, recvtype, root, c, request);
  return gather("MPI_Igatherv", sendbuf, sendcount, sendtype, recvbuf, 0, recvtype, recvcounts,
                displs, true, root, c, true, request);
}

int bcs_impl_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm c) {
  if (is_intercomm(c))
    return inter_scatter("MPI_Scatter", sendbuf, sendcount, nullptr, nullptr, sendtype, recvbuf,
                         recvcount, recvtype, root, c);
  if (coll_needs_staging(sendtype, sendcount) || coll_needs_staging(recvtype, recvcount))
    return staged_blocks("MPI_Scatter", 2, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                         recvtype, root, c);
  return scatter("MPI_Scatter", sendbuf, sendcount, nullptr, nullptr, false, sendtype, recvbuf,
                 recvcount, recvtype, root, c, false, nullptr);
}

int bcs_impl_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, int root, MPI_Comm c,
                  MPI_Request* request) {
  if (is_intercomm(c))
    return inter_iscatter("MPI_Iscatter", sendbuf, sendcount, nullptr, nullptr, sendtype, recvbuf,
                          recvcount, recvtype, root, c, request);
  return scatter("MPI_Iscatter", sendbuf, sendcount, nullptr, nullptr, false, sendtype, recvbuf,
                 recvcount, recvtype, root, c, true, request);
}

int bcs_impl_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm c) {
  if (is_intercomm(c))
    return inter_scatter("MPI_Scatterv", sendbuf, 0, sendcounts, displs, sendtype, recvbuf,
                         recvcount, recvtype, root, c);
  return scatter("MPI_Scatterv", sendbuf, 0, sendcounts, displs, true, sendtype, recvbuf,
                 recvcount, recvtype, root, c, false, nullptr);
}

int bcs_impl_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                   MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                   int root, MPI_Comm c, MPI_Request* request) {
  if (is_intercomm(c))
    return inter_iscatter("MPI_Iscatterv", sendbuf, 0, sendcounts, displs, sendtype, recvbuf,
                          recvcount, recvtype, root, c, request);
  return scatter("MPI_Iscatterv", sendbuf, 0, sendcounts, displs, true, sendtype, recvbuf,
                 recvcount, recvtype, root, c, true, request);
}

int bcs_impl_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm c) {
  if (is_intercomm(c))
    return inter_allgather("MPI_Allgather", sendbuf, sendcount, sendtype, recvbuf, recvcount,
                           nullptr, nullptr, recvtype, c);
  if (coll_needs_staging(sendtype, sendcount) || coll_needs_staging(recvtype, recvcount))
    return staged_blocks("MPI_Allgather", 1, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                         recvtype, 0, c);
  return allgather("MPI_Allgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, nullptr,
                   nullptr, false, recvtype, c, false, nullptr);
}

int bcs_impl_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    int recvcount, MPI_Datatype recvtype, MPI_Comm c, MPI_Request* request) {
  if (is_intercomm(c))
    return inter_iallgather("MPI_Iallgather", sendbuf, sendcount, sendtype, recvbuf, recvcount,
                            nullptr, nullptr, recvtype, c, request);
  return allgather("MPI_Iallgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, nullptr,
                   nullptr, false, recvtype, c, true, request);
}

int bcs_impl_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm c) {
  if (is_intercomm(c))
    return inter_allgather("MPI_Allgatherv", sendbuf, sendcount, sendtype, recvbuf, 0, recvcounts,
                           displs, recvtype, c);
  return allgather("MPI_Allgatherv", sendbuf, sendcount, sendtype, recvbuf, 0, recvcounts,
                   displs, true, recvtype, c, false, nullptr);
}

int bcs_impl_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                     MPI_Comm c, MPI_Request* request) {
  if (is_intercomm(c))
    return inter_iallgather("MPI_Iallgatherv", sendbuf, sendcount, sendtype, recvbuf, 0,
                            recvcounts, displs, recvtype, c, request);
  return allgather("MPI_Iallgatherv", sendbuf, sendcount, sendtype, recvbuf, 0, recvcounts,
                   displs, true, recvtype, c, true, request);
}

int bcs_impl_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm c) {
  if (is_intercomm(c))
    return inter_alltoall("MPI_Alltoall", sendbuf, sendcount, nullptr, nullptr, sendtype, nullptr,
                          recvbuf, recvcount, nullptr, nullptr, recvtype, nullptr, c);
  if (coll_needs_staging(sendtype, sendcount) || coll_needs_staging(recvtype, recvcount))
    return staged_blocks("MPI_Alltoall", 3, sendbuf, sendcount, sendtype, recvbuf, recvcount,
                         recvtype, 0, c);
  return alltoall("MPI_Alltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, c,
                  false, nullptr);
}

int bcs_impl_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm c, MPI_Request* request) {
  if (is_intercomm(c))
    return inter_ialltoall("MPI_Ialltoall", sendbuf, sendcount, nullptr, nullptr, sendtype,
                           nullptr, recvbuf, recvcount, nullptr, nullptr, recvtype, nullptr, c,
                           request);
  return alltoall("MPI_Ialltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, c,
                  true, request);
}

int bcs_impl_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm c) {
  if (is_intercomm(c))
    return inter_alltoall("MPI_Alltoallv", sendbuf, 0, sendcounts, sdispls, sendtype, nullptr,
                          recvbuf, 0, recvcounts, rdispls, recvtype, nullptr, c);
  return alltoallv("MPI_Alltoallv", sendbuf, sendcounts, sdispls, sendtype, nullptr, recvbuf,
                   recvcounts, rdispls, recvtype, nullptr, false, c, false, nullptr);
}

int bcs_impl_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                    MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                    const int rdispls[], MPI_Datatype recvtype, MPI_Comm c,
                    MPI_Request* request) {
  if (is_intercomm(c))
    return inter_ialltoall("MPI_Ialltoallv", sendbuf, 0, sendcounts, sdispls, sendtype, nullptr,
                           recvbuf, 0, recvcounts, rdispls, recvtype, nullptr, c, request);
  return alltoallv("MPI_Ialltoallv", sendbuf, sendcounts, sdispls, sendtype, nullptr, recvbuf,
                   recvcounts, rdispls, recvtype, nullptr, false, c, true, request);
}

int bcs_impl_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm c) {
  if (is_intercomm(c))
    return inter_alltoall("MPI_Alltoallw", sendbuf, 0, sendcounts, sdispls, MPI_DATATYPE_NULL,
                          sendtypes, recvbuf, 0, recvcounts, rdispls, MPI_DATATYPE_NULL,
                          recvtypes, c);
  return alltoallv("MPI_Alltoallw", sendbuf, sendcounts, sdispls, MPI_DATATYPE_NULL, sendtypes,
                   recvbuf, recvcounts, rdispls, MPI_DATATYPE_NULL, recvtypes, true, c, false,
                   nullptr);
}

int bcs_impl_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                    const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                    const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm c,
                    MPI_Request* request) {
  if (is_intercomm(c))
    return inter_ialltoall("MPI_Ialltoallw", sendbuf, 0, sendcounts, sdispls, MPI_DATATYPE_NULL,
                           sendtypes, recvbuf, 0, recvcounts, rdispls, MPI_DATATYPE_NULL,
                           recvtypes, c, request);
  return alltoallv("MPI_Ialltoallw", sendbuf, sendcounts, sdispls, MPI_DATATYPE_NULL, sendtypes,
                   recvbuf, recvcounts, rdispls, MPI_DATATYPE_NULL, recvtypes, true, c, true,
                   request);
}

}  // extern "C"
