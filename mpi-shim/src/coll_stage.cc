// Collectives on datatypes with holes: the data is packed into a contiguous
// staging buffer, the collective runs on bytes (reductions on the packed
// elements of the type's one reducible predefined type), and the result is
// unpacked. The node managers move collective data as byte blocks, so this
// is where such types become blocks. Two ways in: the blocking Bcast /
// Gather / Scatter / Allgather / Alltoall restart themselves on bytes
// (staged_*); every other collective (v, w, non-blocking, reductions)
// stages its sides inside the call (side_blocks .. unstage_blocks, used by
// coll.cc and coll_reduce.cc) and unpacks when the operation completes.
#include <cstring>
#include <vector>

#include "dtype.h"
#include "coll.h"
#include "shim.h"

namespace bcs::shim {

bool coll_needs_staging(MPI_Datatype t, int count) {
  const DType* d = dtype_of(t);
  if (count <= 0 || !d || !d->committed) return false;  // the normal checks report these
  int64_t off = 0;
  return !(type_contiguous(t, &off) && off == 0);
}

TypedBlocks side_blocks(const Side& s, int n) {
  TypedBlocks b;
  const bool w = s.need_types;
  for (int i = 0; i < n; ++i) {
    const MPI_Datatype t = w ? s.types[i] : s.type;
    const DType* d = dtype_of(t);
    const int64_t ext = d ? d->extent() : 0;
    const int64_t count = s.vec ? s.counts[i] : s.count;
    const int64_t off = !s.vec ? i * s.count * ext : w ? s.displs[i] : s.displs[i] * ext;
    b.count.push_back(count);
    b.off.push_back(off);
    b.type.push_back(t);
  }
  return b;
}

bool blocks_need_staging(const TypedBlocks& b) {
  for (size_t i = 0; i < b.count.size(); ++i)
    if (coll_needs_staging(b.type[i], static_cast<int>(b.count[i]))) return true;
  return false;
}

void stage_blocks(const TypedBlocks& b, const void* buf, bool pack, StagedSide* out) {
  uint64_t total = 0;
  out->off.clear();
  out->len.clear();
  for (size_t i = 0; i < b.count.size(); ++i) {
    const uint64_t len =
        b.count[i] > 0 ? static_cast<uint64_t>(b.count[i] * type_size(b.type[i])) : 0;
    out->off.push_back(total);
    out->len.push_back(len);
    total += len;
  }
  out->bytes.assign(total, 0);
  if (!pack) return;
  for (size_t i = 0; i < b.count.size(); ++i)
    if (out->len[i] > 0)
      type_pack(at(buf, static_cast<uint64_t>(b.off[i])), b.count[i], b.type[i], out->block(i));
}

void unstage_blocks(const TypedBlocks& b, const StagedSide& s, void* buf, int only) {
  for (size_t i = 0; i < b.count.size(); ++i) {
    if ((only >= 0 && static_cast<int>(i) != only) || s.len[i] == 0) continue;
    type_unpack(s.bytes.data() + s.off[i], s.len[i], b.count[i], b.type[i],
                at(buf, static_cast<uint64_t>(b.off[i])));
  }
}

void unstage_when_done(CollData& d, const std::shared_ptr<Staging>& st, void* buf) {
  Staging* p = st.get();  // d owns it (d.staging): no cycle through the closure
  for (MPI_Datatype t : st->rb.type)
    if (auto h = type_hold(t)) st->holds.push_back(std::move(h));
  d.staging = st;
  d.finish = [p, buf] { unstage_blocks(p->rb, p->sr, buf); };
}

namespace {

// `n` instances of `t` at `buf`, packed.
std::vector<unsigned char> packed(const void* buf, int64_t n, MPI_Datatype t) {
  std::vector<unsigned char> v(static_cast<size_t>(n * type_size(t)));
  if (n > 0) type_pack(buf, n, t, v.data());
  return v;
}

int too_big(const char* fn, MPI_Comm c) {
  return raise_error(comm_index(c), fn, MPI_ERR_COUNT,
                     "the packed data exceeds INT_MAX bytes (a datatype with holes is staged "
                     "as bytes)");
}

bool fits(int64_t bytes) { return bytes <= INT32_MAX; }

int comm_n(MPI_Comm c) {
  const int ci = comm_index(c);
  return ci == kNoComm ? 0 : comm_size(ci);
}

}  // namespace

int staged_bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm c) {
  const int64_t bytes = static_cast<int64_t>(count) * type_size(type);
  if (!fits(bytes)) return too_big("MPI_Bcast", c);
  std::vector<unsigned char> tmp = packed(buf, count, type);  // only the root's matters
  if (int e = PMPI_Bcast(tmp.data(), static_cast<int>(bytes), MPI_BYTE, root, c)) return e;
  type_unpack(tmp.data(), static_cast<uint64_t>(bytes), count, type, buf);
  return MPI_SUCCESS;
}

// Gather, Allgather, Scatter, Alltoall: a side whose type has holes is
// packed (send) or received packed (receive); a contiguous side is used as
// it is. `sn`/`rn`: instances in the send/receive buffer at this rank.
int staged_blocks(const char* fn, int kind, const void* sendbuf, int scount, MPI_Datatype stype,
                  void* recvbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm c) {
  const int n = comm_n(c);
  int me = 0;
  PMPI_Comm_rank(c, &me);
  const bool gather_like = kind == 0 || kind == 1;        // gather, allgather
  const bool recv_here = kind != 0 || me == root;        // gather: root only
  const bool send_here = kind != 2 || me == root;        // scatter: root only
  const int64_t sn = (kind == 2 || kind == 3) ? int64_t{n} * scount : scount;
  const int64_t rn = gather_like || kind == 3 ? int64_t{n} * rcount : rcount;
  const bool in_place = sendbuf == MPI_IN_PLACE || recvbuf == MPI_IN_PLACE;
  const bool stage_s = send_here && sendbuf != MPI_IN_PLACE && coll_needs_staging(stype, scount);
  const bool stage_r = recv_here && recvbuf != MPI_IN_PLACE && coll_needs_staging(rtype, rcount);
  std::vector<unsigned char> s, r;
  const void* sb = sendbuf;
  void* rb = recvbuf;
  int sc = scount, rc = rcount;
  MPI_Datatype st = stype, rt = rtype;
  if (stage_s) {
    if (!fits(sn * type_size(stype))) return too_big(fn, c);
    s = packed(sendbuf, sn, stype);
    sb = s.data();
    sc = static_cast<int>(scount * type_size(stype));
    st = MPI_BYTE;
  }
  if (stage_r) {
    if (!fits(rn * type_size(rtype))) return too_big(fn, c);
    // With MPI_IN_PLACE this rank's own block is already in recvbuf.
    r = in_place ? packed(recvbuf, rn, rtype) : std::vector<unsigned char>(
                                                    static_cast<size_t>(rn * type_size(rtype)));
    rb = r.data();
    rc = static_cast<int>(rcount * type_size(rtype));
    rt = MPI_BYTE;
  }
  // A side that is not significant at this rank still names its type: make
  // it bytes too, so the call below does not come back here.
  if (!stage_s && coll_needs_staging(st, sc)) {
    if (!fits(scount * type_size(stype))) return too_big(fn, c);
    sc = static_cast<int>(scount * type_size(stype));
    st = MPI_BYTE;
  }
  if (!stage_r && coll_needs_staging(rt, rc)) {
    if (!fits(rcount * type_size(rtype))) return too_big(fn, c);
    rc = static_cast<int>(rcount * type_size(rtype));
    rt = MPI_BYTE;
  }
  int e;
  switch (kind) {
    case 0: e = PMPI_Gather(sb, sc, st, rb, rc, rt, root, c); break;
    case 1: e = PMPI_Allgather(sb, sc, st, rb, rc, rt, c); break;
    case 2: e = PMPI_Scatter(sb, sc, st, rb, rc, rt, root, c); break;
    default: e = PMPI_Alltoall(sb, sc, st, rb, rc, rt, c); break;
  }
  if (e != MPI_SUCCESS) return e;
  if (stage_r) type_unpack(r.data(), r.size(), rn, rtype, recvbuf);
  return MPI_SUCCESS;
}

}  // namespace bcs::shim
