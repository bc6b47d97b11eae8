// Reduction operations: MPI's predefined ops (applied by the node managers'
// reduce helper through bcs_op_t) and user ops from MPI_Op_create (applied
// here, in the rank: the node manager cannot call a function of the
// application), MPI_Op_commutative and MPI_Reduce_local.
#include <algorithm>
#include <cstring>
#include <vector>

#include "dtype.h"
#include "shim.h"

namespace bcs::shim {
namespace {

constexpr int kOpBase = 0x58000000;      // predefined: kOpBase + 1 .. (mpi.h)
constexpr int kUserOpBase = 0x78000000;  // user ops: kUserOpBase + 1 + table index

struct OpInfo {
  MPI_Op handle;
  bcs_op_t op;
  const char* name;
};

const OpInfo kOps[] = {
    {MPI_MAX, BCS_OP_MAX, "MPI_MAX"},          {MPI_MIN, BCS_OP_MIN, "MPI_MIN"},
    {MPI_SUM, BCS_OP_SUM, "MPI_SUM"},          {MPI_PROD, BCS_OP_PROD, "MPI_PROD"},
    {MPI_LAND, BCS_OP_LAND, "MPI_LAND"},       {MPI_BAND, BCS_OP_BAND, "MPI_BAND"},
    {MPI_LOR, BCS_OP_LOR, "MPI_LOR"},          {MPI_BOR, BCS_OP_BOR, "MPI_BOR"},
    {MPI_LXOR, BCS_OP_LXOR, "MPI_LXOR"},       {MPI_BXOR, BCS_OP_BXOR, "MPI_BXOR"},
    {MPI_MINLOC, BCS_OP_MINLOC, "MPI_MINLOC"}, {MPI_MAXLOC, BCS_OP_MAXLOC, "MPI_MAXLOC"},
    {MPI_REPLACE, BCS_OP_REPLACE, "MPI_REPLACE"}, {MPI_NO_OP, BCS_OP_NO_OP, "MPI_NO_OP"},
};
constexpr int kOpCount = static_cast<int>(sizeof(kOps) / sizeof(kOps[0]));
static_assert(kOpBase + kOpCount == MPI_NO_OP, "op table out of sync with mpi.h");

const OpInfo* predefined(MPI_Op op) {
  const long i = static_cast<long>(op) - kOpBase - 1;
  if (i < 0 || i >= kOpCount) return nullptr;
  return &kOps[i];
}

UserOp* user_op(MPI_Op op) {
  const long i = static_cast<long>(op) - kUserOpBase - 1;
  auto& ops = S().ops;
  if (i < 0 || i >= static_cast<long>(ops.size()) || !ops[i].used) return nullptr;
  return &ops[i];
}

}  // namespace

int check_op(const char* fn, int comm, MPI_Op op, MPI_Datatype type, int count, Reduction* out) {
  *out = Reduction{};
  if (const UserOp* u = user_op(op)) {
    // A user function is given every datatype, MPI_PACKED included.
    out->user = true;
    out->fn = u->fn;
    out->commute = u->commute;
    return MPI_SUCCESS;
  }
  const OpInfo* p = predefined(op);
  if (!p)
    return raise_error(comm, fn, MPI_ERR_OP, "invalid operation handle 0x%x%s", op,
                       op == MPI_OP_NULL ? " (MPI_OP_NULL)" : "");
  if (p->op == BCS_OP_REPLACE || p->op == BCS_OP_NO_OP)
    return raise_error(comm, fn, MPI_ERR_OP,
                       "%s is only for one-sided accumulate operations, not for reductions",
                       p->name);
  out->op = p->op;
  if (count == 0 && type_size(type) < 0) {
    // An empty reduction never touches its datatype (any handle is accepted
    // with count 0, as for messages); name one the runtime accepts.
    out->dtype = p->op == BCS_OP_MINLOC || p->op == BCS_OP_MAXLOC ? BCS_DT_2INT : BCS_DT_INT32;
    return MPI_SUCCESS;
  }
  if (!reduce_dtype(type, &out->dtype) || !bcs_op_supported(p->op, out->dtype))
    return raise_error(comm, fn, MPI_ERR_OP, "%s is not defined on %s", p->name, type_name(type));
  return MPI_SUCCESS;
}

bool predefined_op_on(MPI_Op op, bcs_dtype_t dtype, bcs_op_t* out) {
  const OpInfo* p = predefined(op);
  if (!p || p->op == BCS_OP_REPLACE || p->op == BCS_OP_NO_OP || !bcs_op_supported(p->op, dtype))
    return false;
  *out = p->op;
  return true;
}

void user_fold(MPI_User_function* fn, MPI_Datatype type, int count, unsigned char* base,
               size_t stride, size_t offset, int first, int last, void* out) {
  if (count <= 0 || last < first) return;
  const size_t bytes = static_cast<size_t>(count) * static_cast<size_t>(type_size(type));
  std::memcpy(out, base + static_cast<size_t>(last) * stride + offset, bytes);
  for (int i = last - 1; i >= first; --i) {
    int len = count;          // fresh copies: the function may write through them
    MPI_Datatype t = type;
    fn(base + static_cast<size_t>(i) * stride + offset, out, &len, &t);
  }
}

void user_fold_packed(MPI_User_function* fn, MPI_Datatype type, int count,
                      const unsigned char* base, size_t stride, int first, int last, void* out) {
  if (count <= 0 || last < first) return;
  const DType* d = dtype_of(type);
  // One contribution laid out as the type says, for the function to read.
  const int64_t ext = d->extent() > 0 ? d->extent() : 0;
  const int64_t tlb = std::min<int64_t>(d->tlb, 0);
  std::vector<unsigned char> lay(static_cast<size_t>((count - 1) * ext + d->tub - tlb));
  unsigned char* in = lay.data() - tlb;
  const uint64_t bytes = static_cast<uint64_t>(count) * static_cast<uint64_t>(d->size);
  type_unpack(base + static_cast<size_t>(last) * stride, bytes, count, type, out);
  for (int i = last - 1; i >= first; --i) {
    type_unpack(base + static_cast<size_t>(i) * stride, bytes, count, type, in);
    int len = count;
    MPI_Datatype t = type;
    fn(in, out, &len, &t);
  }
}

}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

int bcs_impl_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op) {
  static const char fn[] = "MPI_Op_create";
  REQUIRE_RUNNING(fn);
  if (!user_fn) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL user function");
  if (!op) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL op pointer");
  Shim& s = S();
  int idx;
  if (!s.free_ops.empty()) {
    idx = s.free_ops.back();
    s.free_ops.pop_back();
  } else {
    idx = static_cast<int>(s.ops.size());
    s.ops.emplace_back();
  }
  s.ops[idx] = UserOp{true, user_fn, commute != 0};
  *op = kUserOpBase + 1 + idx;
  return MPI_SUCCESS;
}

int bcs_impl_Op_free(MPI_Op* op) {
  static const char fn[] = "MPI_Op_free";
  REQUIRE_RUNNING(fn);
  if (!op) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL op pointer");
  if (predefined(*op))
    return raise_error(kNoComm, fn, MPI_ERR_OP, "cannot free the predefined operation %s",
                       predefined(*op)->name);
  if (!user_op(*op)) return raise_error(kNoComm, fn, MPI_ERR_OP, "invalid operation handle 0x%x", *op);
  // Collectives in flight keep their own copy of the function (MPI allows
  // freeing an op they use).
  const int idx = *op - kUserOpBase - 1;
  S().ops[idx] = UserOp{};
  S().free_ops.push_back(idx);
  *op = MPI_OP_NULL;
  return MPI_SUCCESS;
}

int bcs_impl_Op_commutative(MPI_Op op, int* commute) {
  static const char fn[] = "MPI_Op_commutative";
  REQUIRE_RUNNING(fn);
  int c;
  if (const OpInfo* p = predefined(op))
    c = p->op != BCS_OP_REPLACE && p->op != BCS_OP_NO_OP;  // a op b = b (or a): not commutative
  else if (const UserOp* u = user_op(op))
    c = u->commute;
  else
    return raise_error(kNoComm, fn, MPI_ERR_OP, "invalid operation handle 0x%x", op);
  if (!commute) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL commute pointer");
  *commute = c;
  return MPI_SUCCESS;
}

// inoutbuf = inbuf op inoutbuf (inbuf is the left operand, as the
// contribution of a lower rank would be).
int bcs_impl_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype type, MPI_Op op) {
  static const char fn[] = "MPI_Reduce_local";
  REQUIRE_RUNNING(fn);
  if (count < 0) return raise_error(kNoComm, fn, MPI_ERR_COUNT, "negative count %d", count);
  const int64_t ts = type_size(type);
  if (count > 0 && ts < 0)
    return raise_error(kNoComm, fn, MPI_ERR_TYPE, "invalid datatype 0x%x", type);
  if (count > 0 && ts >= 0)
    if (int e = check_usable(kNoComm, fn, type)) return e;
  if (count > 0 && (!inbuf || !inoutbuf))
    return raise_error(kNoComm, fn, MPI_ERR_BUFFER, "NULL %s with count %d",
                       !inbuf ? "inbuf" : "inoutbuf", count);
  // No MPI_IN_PLACE here (MPI 5.9.7), and one buffer as both is erroneous.
  if (inbuf == MPI_IN_PLACE || inoutbuf == MPI_IN_PLACE)
    return raise_error(kNoComm, fn, MPI_ERR_BUFFER, "MPI_IN_PLACE is not allowed as %s",
                       inbuf == MPI_IN_PLACE ? "inbuf" : "inoutbuf");
  if (count > 0 && inbuf == inoutbuf)
    return raise_error(kNoComm, fn, MPI_ERR_BUFFER,
                       "inbuf and inoutbuf are the same buffer %p (aliased)", inbuf);
  Reduction red;
  if (int e = check_op(fn, kNoComm, op, type, count, &red)) return e;
  if (count == 0) return MPI_SUCCESS;
  if (red.user) {
    int len = count;
    MPI_Datatype t = type;
    red.fn(const_cast<void*>(inbuf), inoutbuf, &len, &t);
    return MPI_SUCCESS;
  }
  // bcs_reduce_local(inout, in) computes inout = inout op in with `inout` the
  // left operand, so the left operand (inbuf) goes through a copy. The
  // runtime reduces packed elements: a type with holes (a pair type's
  // padding, a vector's gaps) is packed first and the result unpacked.
  const size_t bytes = static_cast<size_t>(count) * static_cast<size_t>(ts);
  const size_t n = static_cast<size_t>(count) * static_cast<size_t>(type_elems(type));
  int64_t off = 0;
  const bool flat = type_contiguous(type, &off) && off == 0;
  std::vector<unsigned char> acc(bytes), other;
  if (flat) {
    std::memcpy(acc.data(), inbuf, bytes);
  } else {
    type_pack(inbuf, count, type, acc.data());
    other.resize(bytes);
    type_pack(inoutbuf, count, type, other.data());
  }
  const int e = bcs_reduce_local(red.op, red.dtype, acc.data(), flat ? inoutbuf : other.data(), n);
  if (e != BCS_OK) return raise_bcs(kNoComm, fn, e);
  if (flat)
    std::memcpy(inoutbuf, acc.data(), bytes);
  else
    type_unpack(acc.data(), bytes, count, type, inoutbuf);
  return MPI_SUCCESS;
}

}  // extern "C"
