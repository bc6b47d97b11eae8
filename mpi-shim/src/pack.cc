// Packing: the rank-side copy of a datatype with holes into a contiguous
// stream and back (used by point-to-point for such types, see p2p.cc), and
// MPI_Pack / MPI_Unpack / MPI_Pack_size.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "dtype.h"
#include "shim.h"

namespace bcs::shim {

void type_pack(const void* in, int64_t count, MPI_Datatype t, void* out) {
  const DType* d = dtype_of(t);
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  const int64_t ext = d->extent();
  for (int64_t i = 0; i < count; ++i)
    for (const TypeBlock& b : d->blocks) {
      std::memcpy(dst, src + i * ext + b.off, static_cast<size_t>(b.len));
      dst += b.len;
    }
}

std::shared_ptr<void> type_hold(MPI_Datatype t) {
  DType* d = dtype_of(t);
  if (!d || d->predefined) return nullptr;
  ++d->refs;
  return std::shared_ptr<void>(d, [](void* p) { dtype_release(static_cast<DType*>(p)); });
}

void type_unpack(const void* in, uint64_t bytes, int64_t count, MPI_Datatype t, void* out) {
  const DType* d = dtype_of(t);
  const auto* src = static_cast<const unsigned char*>(in);
  auto* dst = static_cast<unsigned char*>(out);
  const int64_t ext = d->extent();
  uint64_t left = bytes;
  for (int64_t i = 0; i < count && left > 0; ++i)
    for (const TypeBlock& b : d->blocks) {
      const uint64_t n = std::min<uint64_t>(left, static_cast<uint64_t>(b.len));
      std::memcpy(dst + i * ext + b.off, src, n);
      src += n;
      left -= n;
      if (left == 0) return;
    }
}

}  // namespace bcs::shim

using namespace bcs::shim;

namespace {

int check_pack(const char* fn, MPI_Comm comm, int count, MPI_Datatype t, int* ci, DType** d) {
  REQUIRE_RUNNING(fn);
  *ci = comm_index(comm);
  if (*ci == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", comm);
  if (count < 0) return raise_error(*ci, fn, MPI_ERR_COUNT, "negative count %d", count);
  if (int e = check_usable(*ci, fn, t)) return e;
  *d = dtype_of(t);
  return MPI_SUCCESS;
}

}  // namespace

extern "C" {

int bcs_impl_Pack_size(int incount, MPI_Datatype type, MPI_Comm comm, int* size) {
  static const char fn[] = "MPI_Pack_size";
  int ci;
  DType* d;
  if (int e = check_pack(fn, comm, incount, type, &ci, &d)) return e;
  if (!size) return raise_error(ci, fn, MPI_ERR_ARG, "NULL size");
  const int64_t n = incount * d->size;
  if (n > INT32_MAX) return raise_error(ci, fn, MPI_ERR_COUNT, "the packed size exceeds an int");
  *size = static_cast<int>(n);
  return MPI_SUCCESS;
}

int bcs_impl_Pack(const void* inbuf, int incount, MPI_Datatype type, void* outbuf, int outsize,
              int* position, MPI_Comm comm) {
  static const char fn[] = "MPI_Pack";
  int ci;
  DType* d;
  if (int e = check_pack(fn, comm, incount, type, &ci, &d)) return e;
  if (!position) return raise_error(ci, fn, MPI_ERR_ARG, "NULL position");
  const int64_t n = incount * d->size;
  if (*position < 0 || *position > outsize || n > outsize - *position)
    return raise_error(ci, fn, MPI_ERR_TRUNCATE,
                       "%lld bytes do not fit at position %d of a %d-byte buffer",
                       static_cast<long long>(n), *position, outsize);
  // inbuf may be MPI_BOTTOM (absolute displacements in the type).
  if (n > 0 && !outbuf) return raise_error(ci, fn, MPI_ERR_BUFFER, "NULL outbuf");
  type_pack(inbuf, incount, type, static_cast<unsigned char*>(outbuf) + *position);
  *position += static_cast<int>(n);
  return MPI_SUCCESS;
}

int bcs_impl_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount,
                MPI_Datatype type, MPI_Comm comm) {
  static const char fn[] = "MPI_Unpack";
  int ci;
  DType* d;
  if (int e = check_pack(fn, comm, outcount, type, &ci, &d)) return e;
  if (!position) return raise_error(ci, fn, MPI_ERR_ARG, "NULL position");
  const int64_t n = outcount * d->size;
  if (*position < 0 || *position > insize || n > insize - *position)
    return raise_error(ci, fn, MPI_ERR_TRUNCATE,
                       "%lld bytes wanted at position %d of a %d-byte buffer",
                       static_cast<long long>(n), *position, insize);
  // outbuf may be MPI_BOTTOM (absolute displacements in the type).
  if (n > 0 && !inbuf) return raise_error(ci, fn, MPI_ERR_BUFFER, "NULL inbuf");
  type_unpack(static_cast<const unsigned char*>(inbuf) + *position, static_cast<uint64_t>(n),
              outcount, type, outbuf);
  *position += static_cast<int>(n);
  return MPI_SUCCESS;
}

}  // extern "C"
