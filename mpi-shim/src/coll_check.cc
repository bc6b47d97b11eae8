// The argument checks every collective shares (check_coll, shim.h): each
// side's count, datatype and buffer, MPI_IN_PLACE where MPI allows it, the
// root, the request of a non-blocking one; the error names the call, the
// side and whether this rank is the root. Posting and data movement are in
// coll.cc, reductions in coll_reduce.cc.
#include <algorithm>
#include <cstring>
#include <vector>

#include "coll.h"
#include "dtype.h"
#include "shim.h"

namespace bcs::shim {
namespace {


const char* buf_name(const Side& s) {
  if (s.bufname) return s.bufname;
  return s.what[0] == 's' ? "sendbuf" : s.what[0] == 'r' ? "recvbuf" : "buffer";
}

int check_counts(const CollCheck& k, const Side& s, int n) {
  if (!s.vec) {
    if (s.count < 0)
      return raise_error(k.comm, k.fn, MPI_ERR_COUNT, "negative %scount %d", s.what, s.count);
    return MPI_SUCCESS;
  }
  if (!s.counts)
    return raise_error(k.comm, k.fn, MPI_ERR_ARG, "NULL %scounts array", s.what);
  for (int i = 0; i < n; ++i)
    if (s.counts[i] < 0)
      return raise_error(k.comm, k.fn, MPI_ERR_COUNT, "negative %scounts[%d] = %d", s.what, i,
                         s.counts[i]);
  if (s.need_displs && !s.displs)
    return raise_error(k.comm, k.fn, MPI_ERR_ARG, "NULL %s displacement array", s.what);
  if (s.need_types && !s.types)
    return raise_error(k.comm, k.fn, MPI_ERR_ARG, "NULL %stypes array", s.what);
  return MPI_SUCCESS;
}

// A derived datatype in a collective must be committed. The node managers
// move collective data as byte blocks: a type with holes travels packed
// (coll_stage.cc), so any committed type goes.
int check_derived(const CollCheck& k, const Side&, MPI_Datatype t) {
  return check_usable(k.comm, k.fn, t);
}

int check_types(const CollCheck& k, const Side& s, int n) {
  // Like messages: a datatype that describes no data is never used, so any
  // handle is accepted with count 0.
  if (!s.vec) {
    if (s.count > 0 && type_size(s.type) < 0)
      return raise_error(k.comm, k.fn, MPI_ERR_TYPE, "invalid %stype 0x%x", s.what, s.type);
    if (s.count > 0) return check_derived(k, s, s.type);
    return MPI_SUCCESS;
  }
  for (int i = 0; i < n; ++i) {
    if (s.counts[i] == 0) continue;
    const MPI_Datatype t = s.need_types ? s.types[i] : s.type;
    if (type_size(t) < 0)
      return s.need_types ? raise_error(k.comm, k.fn, MPI_ERR_TYPE, "invalid %stypes[%d] 0x%x",
                                        s.what, i, t)
                          : raise_error(k.comm, k.fn, MPI_ERR_TYPE, "invalid %stype 0x%x",
                                        s.what, t);
    if (int e = check_derived(k, s, t)) return e;
  }
  return MPI_SUCCESS;
}

// Whether side `s` carries data at this rank.
bool carries(const Side& s, int n) {
  if (!s.vec) return s.count > 0;
  for (int i = 0; i < n; ++i)
    if (s.counts[i] > 0 && (s.only < 0 || i == s.only)) return true;
  return false;
}

int check_buffer(const CollCheck& k, const Side& s, int n) {
  if (s.buf) return MPI_SUCCESS;
  if (!s.vec) {
    if (s.count > 0)
      return raise_error(k.comm, k.fn, MPI_ERR_BUFFER, "NULL %s with %scount %d", buf_name(s),
                         s.what, s.count);
    return MPI_SUCCESS;
  }
  for (int i = 0; i < n; ++i) {
    if (s.counts[i] == 0 || (s.only >= 0 && i != s.only)) continue;
    // MPI_BOTTOM (address 0) with byte displacements: they are addresses.
    if (s.bottom_ok && s.displs[i] != 0) continue;
    return raise_error(k.comm, k.fn, MPI_ERR_BUFFER, "NULL %s with %scounts[%d] = %d",
                       buf_name(s), s.what, i, s.counts[i]);
  }
  return MPI_SUCCESS;
}

}  // namespace

int check_coll(CollCheck& k) {
  REQUIRE_RUNNING(k.fn);
  k.comm = comm_index(k.c);
  if (k.comm == kNoComm)
    return raise_error(kNoComm, k.fn, MPI_ERR_COMM, "invalid communicator 0x%x", k.c);
  if (comm_at(k.comm).inter)  // the others were handed to intercoll_nb.cc
    return raise_error(k.comm, k.fn, MPI_ERR_COMM,
                       "not defined on an intercommunicator (MPI-3.1 5.11)");
  const int n = comm_size(k.comm);
  const Side* sides[2] = {&k.send, &k.recv};
  for (const Side* s : sides)
    if (s->live())
      if (int e = check_counts(k, *s, n)) return e;
  for (const Side* s : sides)
    if (s->live())
      if (int e = check_types(k, *s, n)) return e;
  for (const Side* s : sides)
    if (s->live())
      if (int e = check_buffer(k, *s, n)) return e;
  if (k.rooted && (k.root < 0 || k.root >= n))
    return raise_error(k.comm, k.fn, MPI_ERR_ROOT, "root %d out of range (communicator size %d)",
                       k.root, n);
  if (k.reduction)
    if (int e = check_op(k.fn, k.comm, k.op, k.rtype, k.rcount, &k.red)) return e;
  if (k.send.present && k.recv.present && k.send.used && k.recv.used &&
      k.send.buf == MPI_IN_PLACE && k.recv.buf == MPI_IN_PLACE)
    return raise_error(k.comm, k.fn, MPI_ERR_ARG, "sendbuf and recvbuf are both MPI_IN_PLACE");
  for (const Side* s : sides)
    if (s->present && s->used && s->buf == MPI_IN_PLACE && !s->in_place_ok) {
      const bool root = k.rooted && comm_rank(k.comm) == k.root;
      return raise_error(k.comm, k.fn, MPI_ERR_ARG, "MPI_IN_PLACE is not allowed as %s%s",
                         buf_name(*s),
                         !k.rooted ? "" : root ? " at the root" : " at a non-root rank");
    }
  // One buffer as both the data read and the data written is erroneous
  // (MPI 5.2.1: that is what MPI_IN_PLACE is for), and the result would be
  // whatever the copies' order made of it. Caught when it is the same
  // address and both sides carry data here; MPI_BOTTOM (absolute
  // displacements) is left alone.
  if (k.send.live() && k.recv.live() && k.send.buf && k.send.buf == k.recv.buf &&
      carries(k.send, n) && carries(k.recv, n))
    return raise_error(k.comm, k.fn, MPI_ERR_BUFFER,
                       "sendbuf and recvbuf are the same buffer %p (aliased; MPI_IN_PLACE is "
                       "the way to reuse one)",
                       k.send.buf);
  // The same written out: this rank's own block of the gathered (or
  // scattered) buffer named as the other buffer, which is what MPI_IN_PLACE
  // says. Caught at every rank alike (MPICH catches it too): caught only
  // where it happens to be the same address (the rank whose block is at
  // offset 0), it let the other ranks go on into a collective that rank
  // had refused.
  if (k.own != CollCheck::Own::none && k.send.live() && k.recv.live()) {
    const Side& whole = k.own == CollCheck::Own::in_recv ? k.recv : k.send;
    const Side& mine = k.own == CollCheck::Own::in_recv ? k.send : k.recv;
    const int me = comm_rank(k.comm);
    const int64_t count = whole.vec ? whole.counts[me] : whole.count;
    const DType* t = dtype_of(whole.type);
    if (t && count > 0 && mine.count > 0 && whole.buf && mine.buf) {
      const int64_t first = whole.vec ? whole.displs[me] : int64_t{me} * whole.count;
      if (mine.buf == static_cast<const char*>(whole.buf) + first * t->extent())
        return raise_error(k.comm, k.fn, MPI_ERR_BUFFER,
                           "%s %p is this rank's own block of %s (aliased; MPI_IN_PLACE is the "
                           "way to reuse it)",
                           buf_name(mine), mine.buf, buf_name(whole));
    }
  }
  if (k.nonblocking && !k.request)
    return raise_error(k.comm, k.fn, MPI_ERR_REQUEST, "NULL request pointer");
  return MPI_SUCCESS;
}

}  // namespace bcs::shim
