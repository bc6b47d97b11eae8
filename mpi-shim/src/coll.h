// The collectives' own vocabulary, shared by coll.cc, coll_reduce.cc,
// coll_check.cc and coll_stage.cc: the argument checks every collective
// runs (Side, CollCheck, check_coll) and the staging of buffers whose
// datatypes have holes. Posting (run_coll) is in shim.h: communicator and
// topology code posts collectives too.
#pragma once

#include <memory>
#include <vector>

#include "shim.h"

namespace bcs::shim {

// One buffer argument of a collective as the argument checks see it: a
// count and a type, or per-member arrays (v and w variants).
struct Side {
  bool present = false;        // the call has this buffer
  const char* what = "send";   // "send" / "recv" / "" (messages: "sendcount", "count")
  const char* bufname = nullptr;  // for messages; default from `what`
  const void* buf = nullptr;
  int count = 0;
  MPI_Datatype type = MPI_DATATYPE_NULL;
  bool vec = false;            // counts[] (and displs[], types[]) instead of count
  const int* counts = nullptr;
  const int* displs = nullptr; // checked when need_displs
  const MPI_Datatype* types = nullptr;  // checked when need_types (alltoallw)
  bool need_displs = false;
  bool need_types = false;
  int only = -1;               // vec: only counts[only] elements land in buf (reduce_scatter)
  bool bottom_ok = false;      // buf may be MPI_BOTTOM: displs are byte addresses (alltoallw)
  bool used = true;            // significant at this rank (e.g. gather's receive side: root only)
  bool in_place_ok = false;    // MPI_IN_PLACE allowed here, at this rank
  bool in_place() const { return buf == MPI_IN_PLACE && in_place_ok; }
  // Live: its arguments are used (not ignored at this rank, not replaced
  // by an allowed MPI_IN_PLACE).
  bool live() const { return present && used && !in_place(); }
};

// Everything a collective checks before anything is posted, in MPI's usual
// order: communicator, counts, datatypes, buffers, root, op, MPI_IN_PLACE
// misuse, request pointer.
struct CollCheck {
  const char* fn = nullptr;
  MPI_Comm c = MPI_COMM_NULL;
  Side send, recv;
  bool rooted = false;
  int root = 0;
  bool reduction = false;
  MPI_Op op = MPI_OP_NULL;
  MPI_Datatype rtype = MPI_DATATYPE_NULL;  // reduction element type and count
  int rcount = 0;
  bool nonblocking = false;
  MPI_Request* request = nullptr;
  // Where this rank's own block lies in the other side's buffer: in the
  // receive buffer (allgather, and gather at the root) or in the send
  // buffer (scatter at the root). Naming exactly that block as the other
  // buffer is aliasing, caught like the same buffer (check_coll).
  enum class Own { none, in_recv, in_send } own = Own::none;
  // Results.
  int comm = kNoComm;
  Reduction red;
};

// A scalar (count, type) or vector (counts[], displs[], type) buffer argument.
inline Side scalar_side(const char* what, const void* buf, int count, MPI_Datatype type) {
  Side s;
  s.present = true;
  s.what = what;
  s.buf = buf;
  s.count = count;
  s.type = type;
  return s;
}

inline Side vector_side(const char* what, const void* buf, const int* counts, const int* displs,
                        MPI_Datatype type) {
  Side s = scalar_side(what, buf, 0, type);
  s.vec = true;
  s.counts = counts;
  s.displs = displs;
  s.need_displs = true;
  return s;
}

// `request` is NULL for a blocking call; a non-blocking one (nb) must pass one.
inline CollCheck make_check(const char* fn, MPI_Comm c, bool nb, MPI_Request* request) {
  CollCheck k;
  k.fn = fn;
  k.c = c;
  k.nonblocking = nb;
  k.request = request;
  return k;
}

int check_coll(CollCheck& k);

// Blocking collectives on datatypes with holes, through packed staging
// buffers (coll_stage.cc). kind: 0 gather, 1 allgather, 2 scatter, 3 alltoall.
bool coll_needs_staging(MPI_Datatype t, int count);
int staged_bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm c);
int staged_blocks(const char* fn, int kind, const void* sendbuf, int scount, MPI_Datatype stype,
                  void* recvbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm c);

// Data-movement collectives whose datatypes have holes, any form (v, w,
// non-blocking): a side is described as blocks, moves as its packed bytes
// through a staging buffer the collective owns (CollData), packed when
// posted and unpacked when the runtime part completes (coll_stage.cc).
struct TypedBlocks {
  std::vector<int64_t> count;     // instances of type[i] in block i
  std::vector<int64_t> off;       // byte offset of block i in the user's buffer
  std::vector<MPI_Datatype> type;
};
struct StagedSide {
  std::vector<unsigned char> bytes;      // the blocks, packed, one after the other
  std::vector<uint64_t> off, len;        // packed offset and length of block i
  unsigned char* block(size_t i) { return bytes.data() + off[i]; }
};
// Blocks of a checked side: a scalar side repeated `n` times (block i at
// i * count extents), a vector side per member (w: byte displacements and
// per-member types).
TypedBlocks side_blocks(const Side& s, int n);
bool blocks_need_staging(const TypedBlocks& b);
// Lays out `b` packed; packs the user's data from `buf` when `pack`.
void stage_blocks(const TypedBlocks& b, const void* buf, bool pack, StagedSide* out);
// Unpacks block i (all blocks: i < 0) into the user's buffer.
void unstage_blocks(const TypedBlocks& b, const StagedSide& s, void* buf, int only = -1);
// The packed copies of the sides with holes of one collective; lives in
// its CollData (staging) until the operation completed and was unpacked.
struct Staging {
  TypedBlocks sb, rb;
  StagedSide ss, sr;
  std::vector<std::shared_ptr<void>> holds;  // the types unpacking needs, even if freed meanwhile
};
// Makes `d` unpack the receive side of `st` into `buf` at completion (and
// keep its datatypes alive until then).
void unstage_when_done(CollData& d, const std::shared_ptr<Staging>& st, void* buf);

// counts[i] * unit as bytes (two's complement for negative displacements).
std::vector<uint64_t> to_bytes(const int* v, int n, uint64_t unit);

}  // namespace bcs::shim
