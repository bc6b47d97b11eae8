// MPI_Pack_external, MPI_Unpack_external, MPI_Pack_external_size: the
// "external32" representation (MPI-3.1 §13.5.2): big-endian, IEEE formats,
// fixed sizes that are not always the native ones (MPI_LONG is 4 bytes,
// MPI_WCHAR 2, MPI_LONG_DOUBLE a 16-byte IEEE quad).
//
// The data goes through the native packed stream (pack.cc): its element
// runs (DType::elems) say which basic type each native element is, so one
// walk converts element by element, whatever the type's layout.
#include <cstdint>
#include <cstring>
#include <vector>

#include "dtype.h"
#include "shim.h"

namespace bcs::shim {
namespace {

enum class Kind {
  raw,        // bytes as they are (chars, MPI_BYTE, MPI_PACKED)
  sint,       // two's complement integer, narrowed or widened with sign
  uint,       // unsigned integer (also booleans and Fortran LOGICAL)
  ieee,       // float / double: the same bits, big-endian
  quad,       // x87 80-bit long double <-> IEEE binary128
};

// One basic part of a predefined type: native and external sizes, at a
// native offset. Pair and complex types have two parts.
struct Part {
  Kind kind;
  int native, ext, off;
};

struct Layout {
  Part parts[2];
  int n = 0;
};

Layout one(Kind k, int native, int ext) { return Layout{{{k, native, ext, 0}, {}}, 1}; }
Layout two(Kind k1, int n1, int e1, Kind k2, int n2, int e2, int off2) {
  return Layout{{{k1, n1, e1, 0}, {k2, n2, e2, off2}}, 2};
}
template <typename A>
Layout pair_with_int(Kind k, int ext) {
  struct P {
    A a;
    int b;
  };
  return two(k, sizeof(A), ext, Kind::sint, 4, 4, static_cast<int>(offsetof(P, b)));
}

// The external32 layout of a predefined type; n = 0: none (not predefined).
Layout layout_of(MPI_Datatype t) {
  const int ld = sizeof(long double);
  switch (t) {
    case MPI_CHAR: case MPI_SIGNED_CHAR: case MPI_UNSIGNED_CHAR: case MPI_BYTE: case MPI_PACKED:
    case MPI_CHARACTER:
      return one(Kind::raw, 1, 1);
    case MPI_WCHAR: return one(Kind::uint, sizeof(wchar_t), 2);
    case MPI_SHORT: case MPI_INT16_T: case MPI_INTEGER2: return one(Kind::sint, 2, 2);
    case MPI_UNSIGNED_SHORT: case MPI_UINT16_T: return one(Kind::uint, 2, 2);
    case MPI_INT: case MPI_INT32_T: case MPI_INTEGER: case MPI_INTEGER4:
      return one(Kind::sint, 4, 4);
    case MPI_UNSIGNED: case MPI_UINT32_T: case MPI_LOGICAL: return one(Kind::uint, 4, 4);
    case MPI_LONG: return one(Kind::sint, sizeof(long), 4);
    case MPI_UNSIGNED_LONG: return one(Kind::uint, sizeof(long), 4);
    case MPI_LONG_LONG_INT: case MPI_INT64_T: case MPI_AINT: case MPI_OFFSET: case MPI_COUNT:
    case MPI_INTEGER8:
      return one(Kind::sint, 8, 8);
    case MPI_UNSIGNED_LONG_LONG: case MPI_UINT64_T: return one(Kind::uint, 8, 8);
    case MPI_INT8_T: case MPI_INTEGER1: return one(Kind::sint, 1, 1);
    case MPI_UINT8_T: case MPI_C_BOOL: case MPI_CXX_BOOL: return one(Kind::uint, 1, 1);
    case MPI_FLOAT: case MPI_REAL: case MPI_REAL4: return one(Kind::ieee, 4, 4);
    case MPI_DOUBLE: case MPI_DOUBLE_PRECISION: case MPI_REAL8: return one(Kind::ieee, 8, 8);
    case MPI_LONG_DOUBLE: return one(Kind::quad, ld, 16);
    case MPI_C_FLOAT_COMPLEX: case MPI_CXX_FLOAT_COMPLEX: case MPI_COMPLEX: case MPI_COMPLEX8:
    case MPI_2REAL:
      return two(Kind::ieee, 4, 4, Kind::ieee, 4, 4, 4);
    case MPI_C_DOUBLE_COMPLEX: case MPI_CXX_DOUBLE_COMPLEX: case MPI_DOUBLE_COMPLEX:
    case MPI_COMPLEX16: case MPI_2DOUBLE_PRECISION:
      return two(Kind::ieee, 8, 8, Kind::ieee, 8, 8, 8);
    case MPI_C_LONG_DOUBLE_COMPLEX: case MPI_CXX_LONG_DOUBLE_COMPLEX:
      return two(Kind::quad, ld, 16, Kind::quad, ld, 16, ld);
    case MPI_FLOAT_INT: return pair_with_int<float>(Kind::ieee, 4);
    case MPI_DOUBLE_INT: return pair_with_int<double>(Kind::ieee, 8);
    case MPI_LONG_INT: return pair_with_int<long>(Kind::sint, 4);
    case MPI_SHORT_INT: return pair_with_int<short>(Kind::sint, 2);
    case MPI_LONG_DOUBLE_INT: return pair_with_int<long double>(Kind::quad, 16);
    case MPI_2INT: case MPI_2INTEGER: return two(Kind::sint, 4, 4, Kind::sint, 4, 4, 4);
    default: return Layout{};
  }
}

int64_t ext_size_of(MPI_Datatype t) {
  const Layout l = layout_of(t);
  int64_t s = 0;
  for (int i = 0; i < l.n; ++i) s += l.parts[i].ext;
  return s;
}

uint64_t load_le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
void store_le(unsigned char* p, int n, uint64_t v) {
  for (int i = 0; i < n; ++i, v >>= 8) p[i] = static_cast<unsigned char>(v);
}
uint64_t load_be(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = (v << 8) | p[i];
  return v;
}
void store_be(unsigned char* p, int n, uint64_t v) {
  for (int i = n - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<unsigned char>(v);
}

// Native part at `in` -> external at `out`.
void to_ext(const Part& p, const unsigned char* in, unsigned char* out) {
  switch (p.kind) {
    case Kind::raw: std::memcpy(out, in, static_cast<size_t>(p.ext)); return;
    case Kind::sint:
    case Kind::uint:
    case Kind::ieee:
      // Little-endian native: the low `ext` bytes, most significant first.
      store_be(out, p.ext, load_le(in, p.ext < p.native ? p.ext : p.native));
      return;
    case Kind::quad: {
      // x87: 64-bit significand with an explicit integer bit, then sign and
      // a 15-bit exponent biased like binary128's; binary128 keeps the
      // fraction (the significand without that bit) in its top bits.
      const uint64_t mant = load_le(in, 8) & 0x7fffffffffffffffull;
      const uint64_t se = load_le(in + 8, 2);
      store_be(out, 8, (se << 48) | (mant >> 15));
      store_be(out + 8, 8, (mant & 0x7fff) << 49);
      return;
    }
  }
}

// External part at `in` -> native at `out`.
void from_ext(const Part& p, const unsigned char* in, unsigned char* out) {
  switch (p.kind) {
    case Kind::raw: std::memcpy(out, in, static_cast<size_t>(p.ext)); return;
    case Kind::sint:
    case Kind::uint:
    case Kind::ieee: {
      uint64_t v = load_be(in, p.ext);
      if (p.kind == Kind::sint && p.native > p.ext && (in[0] & 0x80))
        v |= ~uint64_t{0} << (8 * p.ext);  // sign-extend a narrowed integer
      store_le(out, p.native, v);
      return;
    }
    case Kind::quad: {
      const uint64_t hi = load_be(in, 8), lo = load_be(in + 8, 8);
      const uint64_t se = hi >> 48;
      uint64_t mant = ((hi & 0xffffffffffffull) << 15) | (lo >> 49);
      if ((se & 0x7fff) != 0) mant |= 1ull << 63;  // normal, infinity, NaN: the integer bit
      std::memset(out, 0, static_cast<size_t>(p.native));
      store_le(out, 8, mant);
      store_le(out + 8, 2, se);
      return;
    }
  }
}

// Walks `count` instances of `d`'s native packed stream `native` alongside
// the external stream `ext`; `pack` says which way the bytes go.
void convert(const DType& d, int64_t count, unsigned char* native, unsigned char* ext,
             bool pack) {
  for (int64_t i = 0; i < count; ++i)
    for (const ElemRun& e : d.elems) {
      const Layout l = layout_of(e.type);
      const int64_t nsize = dtype_of(e.type)->size;
      for (int64_t k = 0; k < e.count; ++k) {
        for (int j = 0; j < l.n; ++j) {
          const Part& p = l.parts[j];
          if (pack)
            to_ext(p, native + p.off, ext);
          else
            from_ext(p, ext, native + p.off);
          ext += p.ext;
        }
        native += nsize;
      }
    }
}

int64_t ext_size(const DType& d) {
  int64_t s = 0;
  for (const ElemRun& e : d.elems) s += e.count * ext_size_of(e.type);
  return s;
}

int check_external(const char* fn, const char* datarep, int count, MPI_Datatype t, DType** d) {
  REQUIRE_RUNNING(fn);
  if (!datarep) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL datarep");
  if (std::strcmp(datarep, "external32") != 0)
    return raise_error(kNoComm, fn, MPI_ERR_ARG,
                       "data representation \"%s\" unknown (only \"external32\" is defined)",
                       datarep);
  if (count < 0) return raise_error(kNoComm, fn, MPI_ERR_COUNT, "negative count %d", count);
  if (int e = check_usable(kNoComm, fn, t)) return e;
  *d = dtype_of(t);
  for (const ElemRun& e : (*d)->elems)
    if (layout_of(e.type).n == 0)
      return raise_error(kNoComm, fn, MPI_ERR_TYPE, "no external32 form for a part of the type");
  return MPI_SUCCESS;
}

}  // namespace
}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

int bcs_impl_Pack_external_size(const char datarep[], int incount, MPI_Datatype type,
                            MPI_Aint* size) {
  static const char fn[] = "MPI_Pack_external_size";
  DType* d;
  if (int e = check_external(fn, datarep, incount, type, &d)) return e;
  if (!size) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL size");
  *size = static_cast<MPI_Aint>(incount * ext_size(*d));
  return MPI_SUCCESS;
}

int bcs_impl_Pack_external(const char datarep[], const void* inbuf, int incount, MPI_Datatype type,
                       void* outbuf, MPI_Aint outsize, MPI_Aint* position) {
  static const char fn[] = "MPI_Pack_external";
  DType* d;
  if (int e = check_external(fn, datarep, incount, type, &d)) return e;
  if (!position) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL position");
  const int64_t n = incount * ext_size(*d);
  if (*position < 0 || *position > outsize || n > outsize - *position)
    return raise_error(kNoComm, fn, MPI_ERR_TRUNCATE,
                       "%lld bytes do not fit at position %lld of a %lld-byte buffer",
                       static_cast<long long>(n), static_cast<long long>(*position),
                       static_cast<long long>(outsize));
  if (n == 0) return MPI_SUCCESS;
  if (!outbuf) return raise_error(kNoComm, fn, MPI_ERR_BUFFER, "NULL outbuf");
  std::vector<unsigned char> native(static_cast<size_t>(incount * d->size));
  type_pack(inbuf, incount, type, native.data());
  convert(*d, incount, native.data(), static_cast<unsigned char*>(outbuf) + *position, true);
  *position += n;
  return MPI_SUCCESS;
}

int bcs_impl_Unpack_external(const char datarep[], const void* inbuf, MPI_Aint insize,
                         MPI_Aint* position, void* outbuf, int outcount, MPI_Datatype type) {
  static const char fn[] = "MPI_Unpack_external";
  DType* d;
  if (int e = check_external(fn, datarep, outcount, type, &d)) return e;
  if (!position) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL position");
  const int64_t n = outcount * ext_size(*d);
  if (*position < 0 || *position > insize || n > insize - *position)
    return raise_error(kNoComm, fn, MPI_ERR_TRUNCATE,
                       "%lld bytes wanted at position %lld of a %lld-byte buffer",
                       static_cast<long long>(n), static_cast<long long>(*position),
                       static_cast<long long>(insize));
  if (n == 0) return MPI_SUCCESS;
  if (!inbuf) return raise_error(kNoComm, fn, MPI_ERR_BUFFER, "NULL inbuf");
  std::vector<unsigned char> native(static_cast<size_t>(outcount * d->size));
  // Padding inside pair types stays zero rather than whatever was there.
  convert(*d, outcount, native.data(),
          const_cast<unsigned char*>(static_cast<const unsigned char*>(inbuf)) + *position,
          false);
  type_unpack(native.data(), native.size(), outcount, type, outbuf);
  *position += n;
  return MPI_SUCCESS;
}

}  // extern "C"
