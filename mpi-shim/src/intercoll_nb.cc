// Non-blocking collectives on intercommunicators (MPI-3.1 §5.12 on an
// intercommunicator). Each is ONE non-blocking alltoallw (or barrier) of a
// hidden intracommunicator over both groups, so the node managers progress
// it like any collective, with no MPI call needed between post and wait,
// and no stage waits for another (the blocking forms in intercoll.cc chain
// group-local stages, which a non-blocking call could only run at request
// progress):
//
//   Ibarrier            a barrier of both groups (every process entered)
//   Ibcast              the root sends to every member of the other group
//   Igather(v)/Iscatter(v)  the root receives from / sends to each member
//   Iallgather(v)       each member sends its block to every remote member
//   Ialltoall(v,w)      each block straight to its remote member
//   Ireduce             the remote group's contributions land at the root,
//                       which folds them in rank order when the request
//                       completes (so non-commutative and user ops are right)
//   Iallreduce          every member gets every remote contribution and folds
//   Ireduce_scatter(_block)  every member gets every remote vector and folds
//                       its own segment
// The reductions move each contribution to every receiver instead of a
// reduced one: more bytes than a tree, but one collective and no stage.
//
// The hidden communicator: the groups in a fixed order (the group whose
// leader has the lower world rank first), its context id derived from the
// intercommunicator's (kMergedContextOffset above it, a range no other
// communicator uses), so every member makes it alone, at its first
// non-blocking collective on the intercommunicator, with no communication.
#include <functional>
#include <memory>
#include <unordered_map>

#include "intercoll.h"
#include "shim.h"

namespace bcs::shim {
namespace {

using namespace intercoll;

struct Merged {
  MPI_Comm comm = MPI_COMM_NULL;
  bool local_first = true;
  int size = 0, rsize = 0;
  // Rank in the hidden communicator of remote rank j / of local rank i.
  int remote(int j) const { return local_first ? size + j : j; }
  int local(int i) const { return local_first ? i : rsize + i; }
  int n() const { return size + rsize; }
};

int merged_of(const Inter& it, const char* fn, Merged* out) {
  static std::unordered_map<int, int> made;
  const Comm& x = comm_at(it.ic);
  out->local_first = x.m->world[0] < x.remote->world[0];
  out->size = x.size();
  out->rsize = x.remote->size();
  if (auto f = made.find(it.ic); f != made.end()) {
    out->comm = comm_handle(f->second);
    return MPI_SUCCESS;
  }
  std::vector<int32_t> world;
  const Members& first = out->local_first ? *x.m : *x.remote;
  const Members& second = out->local_first ? *x.remote : *x.m;
  world.insert(world.end(), first.world.begin(), first.world.end());
  world.insert(world.end(), second.world.begin(), second.world.end());
  const int rank = out->local(x.rank);
  const int32_t ctx = x.context + kMergedContextOffset;
  MembersPtr m = make_members(std::move(world));
  // Before anything is posted on it; the member array lives as long as the
  // (never reused) slot.
  if (int e = bcs_comm_register(ctx + 1, m->size(), m->world.data()); e != BCS_OK)
    return raise_bcs(it.ic, fn, e);
  int idx;
  Comm& c = comm_new_slot(&idx);  // may move the table: `x` is not used below
  c.m = std::move(m);
  c.rank = rank;
  c.context = ctx;
  c.errh = MPI_ERRORS_RETURN;
  c.name = "(non-blocking collectives of an intercommunicator)";
  made[it.ic] = idx;
  out->comm = comm_handle(idx);
  return MPI_SUCCESS;
}

// The arguments of one alltoallw of the hidden communicator: nothing moves
// unless set (zero counts, MPI_BYTE).
struct Blocks {
  std::vector<int> sc, sd, rc, rd;
  std::vector<MPI_Datatype> st, rt;
  explicit Blocks(int n)
      : sc(static_cast<size_t>(n)), sd(sc), rc(sc), rd(sc), st(sc.size(), MPI_BYTE),
        rt(sc.size(), MPI_BYTE) {}
  void send(int k, int count, MPI_Aint byte_off, MPI_Datatype t) {
    sc[static_cast<size_t>(k)] = count;
    sd[static_cast<size_t>(k)] = static_cast<int>(byte_off);
    st[static_cast<size_t>(k)] = t;
  }
  void recv(int k, int count, MPI_Aint byte_off, MPI_Datatype t) {
    rc[static_cast<size_t>(k)] = count;
    rd[static_cast<size_t>(k)] = static_cast<int>(byte_off);
    rt[static_cast<size_t>(k)] = t;
  }
};

int check_request(const Inter& it, const char* fn, MPI_Request* request) {
  if (!request) return raise_error(it.ic, fn, MPI_ERR_REQUEST, "NULL request pointer");
  return MPI_SUCCESS;
}

// Posts the alltoallw; the request then belongs to the user's
// intercommunicator (its errors are raised there).
int post(const Inter& it, const char* fn, const Merged& mg, const void* sbuf, void* rbuf,
         const Blocks& b, MPI_Request* request, std::function<void()> after = {}) {
  const int e = PMPI_Ialltoallw(sbuf, b.sc.data(), b.sd.data(), b.st.data(), rbuf, b.rc.data(),
                                b.rd.data(), b.rt.data(), mg.comm, request);
  if (e != MPI_SUCCESS) return failed(it, fn, e);
  Req& r = S().reqs[req_index(*request)];
  r.comm = it.ic;
  if (after) {
    if (!r.coll) r.coll = std::make_shared<CollData>();
    auto prev = std::move(r.coll->finish);
    r.coll->finish = [prev = std::move(prev), after = std::move(after)] {
      if (prev) prev();
      after();
    };
  }
  return MPI_SUCCESS;
}

// Copies `count` instances of `type` (both buffers laid out by the type).
void copy_typed(const void* src, void* dst, int count, MPI_Datatype type) {
  int bytes = 0;
  if (count <= 0 || PMPI_Pack_size(count, type, MPI_COMM_SELF, &bytes) != MPI_SUCCESS) return;
  std::vector<unsigned char> tmp(static_cast<size_t>(bytes));
  int pos = 0;
  PMPI_Pack(src, count, type, tmp.data(), bytes, &pos, MPI_COMM_SELF);
  pos = 0;
  PMPI_Unpack(tmp.data(), bytes, &pos, dst, count, type, MPI_COMM_SELF);
}

// The remote group's `rsize` vectors of `n` elements, arrived in `blocks`
// (vector j at j * n extents): folded in rank order over elements
// [first, first + count) and copied to `out`.
void fold_into(Scratch& blocks, int rsize, int n, int first, int count, MPI_Datatype type,
               MPI_Op op, void* out) {
  if (count <= 0 || rsize <= 0) return;
  const MPI_Aint ext = extent_of(type);
  auto vec = [&](int j) {
    return at(blocks.ptr(), static_cast<uint64_t>((static_cast<MPI_Aint>(j) * n + first) * ext));
  };
  // x0 op (x1 op (... op x_{r-1})): MPI ops are associative, and every
  // operand stays on its side, so non-commutative ops are right.
  for (int j = rsize - 2; j >= 0; --j) PMPI_Reduce_local(vec(j), vec(rsize - 1), count, type, op);
  copy_typed(vec(rsize - 1), out, count, type);
}

}  // namespace

int inter_ibarrier(MPI_Comm c, MPI_Request* request) {
  static const char fn[] = "MPI_Ibarrier";
  const Inter it = inter_of(c);
  if (int e = check_request(it, fn, request)) return e;
  Merged mg;
  if (int e = merged_of(it, fn, &mg)) return e;
  if (int e = PMPI_Ibarrier(mg.comm, request)) return failed(it, fn, e);
  S().reqs[req_index(*request)].comm = it.ic;
  return MPI_SUCCESS;
}

int inter_ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm c,
                 MPI_Request* request) {
  static const char fn[] = "MPI_Ibcast";
  const Inter it = inter_of(c);
  if (int e = check_request(it, fn, request)) return e;
  if (int e = check_root(it, fn, root)) return e;
  if (root != MPI_PROC_NULL)
    if (int e = check_data(it, fn, "", buf, count, type)) return e;
  Merged mg;
  if (int e = merged_of(it, fn, &mg)) return e;
  Blocks b(mg.n());
  if (root == MPI_ROOT)
    for (int j = 0; j < it.rsize; ++j) b.send(mg.remote(j), count, 0, type);
  else if (root != MPI_PROC_NULL)
    b.recv(mg.remote(root), count, 0, type);
  return post(it, fn, mg, buf, buf, b, request);
}

int inter_igather(const char* fn, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                  int rcount, const int* rcounts, const int* displs, MPI_Datatype rtype, int root,
                  MPI_Comm c, MPI_Request* request) {
  const Inter it = inter_of(c);
  if (int e = check_request(it, fn, request)) return e;
  if (int e = check_root(it, fn, root)) return e;
  Merged mg;
  if (int e = merged_of(it, fn, &mg)) return e;
  Blocks b(mg.n());
  if (root == MPI_ROOT) {
    if (rcounts)
      if (int e = check_counts(it, fn, "recv", rcounts, displs, it.rsize)) return e;
    const MPI_Aint ext = extent_of(rtype);
    for (int j = 0; j < it.rsize; ++j) {
      const int n = rcounts ? rcounts[j] : rcount;
      if (int e = check_data(it, fn, "recv", rbuf, n, rtype)) return e;
      b.recv(mg.remote(j), n, (rcounts ? displs[j] : static_cast<MPI_Aint>(j) * rcount) * ext,
             rtype);
    }
  } else if (root != MPI_PROC_NULL) {
    if (int e = check_data(it, fn, "send", sbuf, scount, stype)) return e;
    b.send(mg.remote(root), scount, 0, stype);
  }
  return post(it, fn, mg, sbuf, rbuf, b, request);
}

int inter_iscatter(const char* fn, const void* sbuf, int scount, const int* scounts,
                   const int* displs, MPI_Datatype stype, void* rbuf, int rcount,
                   MPI_Datatype rtype, int root, MPI_Comm c, MPI_Request* request) {
  const Inter it = inter_of(c);
  if (int e = check_request(it, fn, request)) return e;
  if (int e = check_root(it, fn, root)) return e;
  Merged mg;
  if (int e = merged_of(it, fn, &mg)) return e;
  Blocks b(mg.n());
  if (root == MPI_ROOT) {
    if (scounts)
      if (int e = check_counts(it, fn, "send", scounts, displs, it.rsize)) return e;
    const MPI_Aint ext = extent_of(stype);
    for (int j = 0; j < it.rsize; ++j) {
      const int n = scounts ? scounts[j] : scount;
      if (int e = check_data(it, fn, "send", sbuf, n, stype)) return e;
      b.send(mg.remote(j), n, (scounts ? displs[j] : static_cast<MPI_Aint>(j) * scount) * ext,
             stype);
    }
  } else if (root != MPI_PROC_NULL) {
    if (int e = check_data(it, fn, "recv", rbuf, rcount, rtype)) return e;
    b.recv(mg.remote(root), rcount, 0, rtype);
  }
  return post(it, fn, mg, sbuf, rbuf, b, request);
}

int inter_iallgather(const char* fn, const void* sbuf, int scount, MPI_Datatype stype,
                     void* rbuf, int rcount, const int* rcounts, const int* displs,
                     MPI_Datatype rtype, MPI_Comm c, MPI_Request* request) {
  const Inter it = inter_of(c);
  if (int e = check_request(it, fn, request)) return e;
  if (int e = check_data(it, fn, "send", sbuf, scount, stype)) return e;
  if (rcounts)
    if (int e = check_counts(it, fn, "recv", rcounts, displs, it.rsize)) return e;
  Merged mg;
  if (int e = merged_of(it, fn, &mg)) return e;
  Blocks b(mg.n());
  const MPI_Aint ext = extent_of(rtype);
  for (int j = 0; j < it.rsize; ++j) {
    const int n = rcounts ? rcounts[j] : rcount;
    if (int e = check_data(it, fn, "recv", rbuf, n, rtype)) return e;
    b.send(mg.remote(j), scount, 0, stype);
    b.recv(mg.remote(j), n, (rcounts ? displs[j] : static_cast<MPI_Aint>(j) * rcount) * ext,
           rtype);
  }
  return post(it, fn, mg, sbuf, rbuf, b, request);
}

int inter_ialltoall(const char* fn, const void* sbuf, int scount, const int* scounts,
                    const int* sdispls, MPI_Datatype stype, const MPI_Datatype* stypes, void* rbuf,
                    int rcount, const int* rcounts, const int* rdispls, MPI_Datatype rtype,
                    const MPI_Datatype* rtypes, MPI_Comm c, MPI_Request* request) {
  const Inter it = inter_of(c);
  if (int e = check_request(it, fn, request)) return e;
  const bool w = stypes || rtypes;
  if (w && (!stypes || !rtypes))
    return raise_error(it.ic, fn, MPI_ERR_ARG, "NULL %stypes array", stypes ? "recv" : "send");
  if (scounts)
    if (int e = check_counts(it, fn, "send", scounts, sdispls, it.rsize)) return e;
  if (rcounts)
    if (int e = check_counts(it, fn, "recv", rcounts, rdispls, it.rsize)) return e;
  Merged mg;
  if (int e = merged_of(it, fn, &mg)) return e;
  Blocks b(mg.n());
  for (int j = 0; j < it.rsize; ++j)
    for (bool send : {true, false}) {
      const int* counts = send ? scounts : rcounts;
      const int* displs = send ? sdispls : rdispls;
      const int n = counts ? counts[j] : send ? scount : rcount;
      const MPI_Datatype t = w ? (send ? stypes : rtypes)[j] : send ? stype : rtype;
      const MPI_Aint d = counts ? displs[j] : static_cast<MPI_Aint>(j) * n;
      if (int e = check_data(it, fn, send ? "send" : "recv", send ? sbuf : rbuf, n, t)) return e;
      (b.*(send ? &Blocks::send : &Blocks::recv))(mg.remote(j), n, w ? d : d * extent_of(t), t);
    }
  return post(it, fn, mg, sbuf, rbuf, b, request);
}

int inter_ireduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                  MPI_Comm c, MPI_Request* request) {
  static const char fn[] = "MPI_Ireduce";
  const Inter it = inter_of(c);
  if (int e = check_request(it, fn, request)) return e;
  if (int e = check_root(it, fn, root)) return e;
  Merged mg;
  if (int e = merged_of(it, fn, &mg)) return e;
  Blocks b(mg.n());
  if (root == MPI_ROOT) {
    if (int e = check_data(it, fn, "recv", rbuf, count, type)) return e;
    auto blocks = std::make_shared<Scratch>(count * it.rsize, type);
    const MPI_Aint ext = extent_of(type);
    for (int j = 0; j < it.rsize; ++j)
      b.recv(mg.remote(j), count, static_cast<MPI_Aint>(j) * count * ext, type);
    const int rsize = it.rsize;
    return post(it, fn, mg, nullptr, blocks->ptr(), b, request, [=] {
      fold_into(*blocks, rsize, count, 0, count, type, op, rbuf);
    });
  }
  if (root != MPI_PROC_NULL) {
    if (int e = check_data(it, fn, "send", sbuf, count, type)) return e;
    b.send(mg.remote(root), count, 0, type);
  }
  return post(it, fn, mg, sbuf, nullptr, b, request);
}

int inter_iallreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op,
                     MPI_Comm c, MPI_Request* request) {
  static const char fn[] = "MPI_Iallreduce";
  const Inter it = inter_of(c);
  if (int e = check_request(it, fn, request)) return e;
  if (int e = check_data(it, fn, "send", sbuf, count, type)) return e;
  if (int e = check_data(it, fn, "recv", rbuf, count, type)) return e;
  Merged mg;
  if (int e = merged_of(it, fn, &mg)) return e;
  Blocks b(mg.n());
  auto blocks = std::make_shared<Scratch>(count * it.rsize, type);
  const MPI_Aint ext = extent_of(type);
  for (int j = 0; j < it.rsize; ++j) {
    b.send(mg.remote(j), count, 0, type);
    b.recv(mg.remote(j), count, static_cast<MPI_Aint>(j) * count * ext, type);
  }
  const int rsize = it.rsize;
  return post(it, fn, mg, sbuf, blocks->ptr(), b, request, [=] {
    fold_into(*blocks, rsize, count, 0, count, type, op, rbuf);
  });
}

int inter_ireduce_scatter(const char* fn, const void* sbuf, void* rbuf, int rcount,
                          const int* rcounts, MPI_Datatype type, MPI_Op op, MPI_Comm c,
                          MPI_Request* request) {
  const Inter it = inter_of(c);
  if (int e = check_request(it, fn, request)) return e;
  if (!rcounts && rcount < 0)
    return raise_error(it.ic, fn, MPI_ERR_COUNT, "negative recvcount %d", rcount);
  // This group's counts give the vector length and this member's segment.
  int64_t total = 0, first = 0;
  for (int i = 0; i < it.size; ++i) {
    const int ci = rcounts ? rcounts[i] : rcount;
    if (ci < 0) return raise_error(it.ic, fn, MPI_ERR_COUNT, "negative recvcounts[%d] = %d", i, ci);
    if (i == it.rank) first = total;
    total += ci;
  }
  if (total > INT32_MAX)
    return raise_error(it.ic, fn, MPI_ERR_COUNT, "the counts add up to more than INT_MAX");
  const int n = static_cast<int>(total);
  const int mine = rcounts ? rcounts[it.rank] : rcount;
  if (int e = check_data(it, fn, "send", sbuf, n, type)) return e;
  if (int e = check_data(it, fn, "recv", rbuf, mine, type)) return e;
  Merged mg;
  if (int e = merged_of(it, fn, &mg)) return e;
  Blocks b(mg.n());
  auto blocks = std::make_shared<Scratch>(n * it.rsize, type);
  const MPI_Aint ext = extent_of(type);
  for (int j = 0; j < it.rsize; ++j) {
    b.send(mg.remote(j), n, 0, type);
    b.recv(mg.remote(j), n, static_cast<MPI_Aint>(j) * n * ext, type);
  }
  const int rsize = it.rsize, off = static_cast<int>(first);
  return post(it, fn, mg, sbuf, blocks->ptr(), b, request, [=] {
    fold_into(*blocks, rsize, n, off, mine, type, op, rbuf);
  });
}

}  // namespace bcs::shim
