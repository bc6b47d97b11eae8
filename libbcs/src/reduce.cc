// Reduction kernels (MPI's predefined ops on the element types of bcs.h).
//
// The node managers' reduce helper combines megabytes with these, so the
// dispatch on (type, op) happens once per call, outside the loops, and the
// loops themselves are typed and explicitly vectorised: integer, float and
// double elements go through GCC/Clang generic vectors of 16 bytes (SSE2 on
// x86-64, NEON on AArch64), two vectors per iteration, with a scalar tail;
// so do the pair types with a 4- or 8-byte value (see loc). That does not
// depend on the optimisation level (at -O2 GCC 12 would not vectorise a loop
// of unknown length) nor on the cost model. long double, its complex, the
// complex product and SHORT_INT / LONG_DOUBLE_INT stay scalar.
//
// Alignment: the helpers' buffers are byte vectors with no alignment
// promise, so every element (and every vector) is loaded and stored with
// memcpy, which compiles to a plain (unaligned) move.
//
// Determinism: the same inputs give the same bits every time.
//  - Reals use plain IEEE operations, one rounding per operation; the
//    complex product is the textbook formula with each of its four products
//    rounded on its own (never fused into an FMA, whatever -march or
//    -ffp-contract say; GCC >= 11 fuses it even with -ffp-contract=off).
//  - Bytes that are not part of an element's value (the 6 padding bytes of
//    an x87 long double) keep `inout`'s contents; only REPLACE copies whole
//    elements, padding included.
//
// Aliasing: `inout == in` is fine (each element is read before it is
// written). Buffers that overlap partially are combined as if `in` had been
// copied first (as memmove does).
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

#include "bcs/bcs.h"

namespace {

// The MINLOC/MAXLOC pair types in their packed form, as MPI_Pack lays them
// out (MPI defines them as structs, so their size is the sum of the parts):
// the value's sizeof(T) bytes, then the int index, no padding. Elements are
// therefore at most 4-byte aligned, which the memcpy loads do not mind.
template <typename T>
struct Pair {
  static constexpr size_t kIndex = sizeof(T);
  static constexpr size_t kSize = sizeof(T) + sizeof(int);
};

// BOOL runs as uint8 (C _Bool and C++ bool are one byte on every ABI we
// build for); any non-zero byte counts as true.
static_assert(sizeof(bool) == 1);

// Bytes of T that hold its value. An x87 extended long double (x86) holds
// 10 bytes of value in 16 (12 on i386); the rest is padding we never write.
template <typename T>
inline constexpr size_t kValueBytes = sizeof(T);
#if (defined(__x86_64__) || defined(__i386__)) && LDBL_MANT_DIG == 64
template <>
inline constexpr size_t kValueBytes<long double> = 10;
#endif

template <typename T>
inline T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
inline void store(unsigned char* p, T v) {
  std::memcpy(p, &v, kValueBytes<T>);
}

// Types whose loops run on generic vectors.
template <typename T>
inline constexpr bool kSimd =
    std::is_integral_v<T> || std::is_same_v<T, float> || std::is_same_v<T, double>;

// Scalar operands of f in the tail: unsigned types narrower than unsigned
// int are widened to unsigned int, so that their products never go through
// a signed int (uint16 * uint16 would overflow int: UB).
template <typename T>
using Scalar =
    std::conditional_t<std::is_unsigned_v<T> && sizeof(T) < sizeof(unsigned), unsigned, T>;

// a[k] = f(a[k], b[k]) for k < n, elements of type T. `f` is generic: it
// gets either two vectors of T or two scalars, and returns something the
// same size (a comparison mask for the logical ops) that is converted back.
template <typename T, typename F>
void apply(unsigned char* a, const unsigned char* b, size_t n, F f) {
  size_t k = 0;
  if constexpr (kSimd<T>) {
    typedef T V __attribute__((vector_size(16)));
    constexpr size_t kLanes = sizeof(V) / sizeof(T);
    for (; k + 2 * kLanes <= n; k += 2 * kLanes) {
      unsigned char* pa = a + k * sizeof(T);
      const unsigned char* pb = b + k * sizeof(T);
      V x0 = load<V>(pa), x1 = load<V>(pa + sizeof(V));
      const V y0 = load<V>(pb), y1 = load<V>(pb + sizeof(V));
      x0 = (V)f(x0, y0);
      x1 = (V)f(x1, y1);
      store<V>(pa, x0);
      store<V>(pa + sizeof(V), x1);
    }
  }
  for (; k < n; ++k) {
    unsigned char* pa = a + k * sizeof(T);
    const Scalar<T> x = load<T>(pa), y = load<T>(b + k * sizeof(T));
    store<T>(pa, static_cast<T>(f(x, y)));
  }
}

// The element operations, for vectors and scalars alike. MIN/MAX keep the
// left operand (inout) unless the right one (in) compares smaller/larger:
// a NaN in `in` is ignored, a NaN in `inout` stays, and MIN(+0, -0) keeps
// the left zero (as MPICH's and Open MPI's loops). The logical ops give 0/1
// (a vector comparison gives -1/0 per lane, hence the "& 1").
const auto kSum = [](auto x, auto y) { return x + y; };
const auto kProd = [](auto x, auto y) { return x * y; };
const auto kMin = [](auto x, auto y) { return y < x ? y : x; };
const auto kMax = [](auto x, auto y) { return y > x ? y : x; };
const auto kLand = [](auto x, auto y) { return ((x != 0) & (y != 0)) & 1; };
const auto kLor = [](auto x, auto y) { return ((x != 0) | (y != 0)) & 1; };
const auto kLxor = [](auto x, auto y) { return ((x != 0) ^ (y != 0)) & 1; };
const auto kBand = [](auto x, auto y) { return x & y; };
const auto kBor = [](auto x, auto y) { return x | y; };
const auto kBxor = [](auto x, auto y) { return x ^ y; };

// Integers (and BOOL and BYTE, as uint8: bcs_op_supported has already kept
// only the logical ops for BOOL and the bitwise ones for BYTE). SUM/PROD
// wrap modulo 2^n: they run in the unsigned type (no signed overflow); so
// do the logical and bitwise ops, which only look at bits. MIN/MAX compare
// in T.
template <typename T>
bool integer(bcs_op_t op, unsigned char* a, const unsigned char* b, size_t n) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case BCS_OP_SUM: apply<U>(a, b, n, kSum); return true;
    case BCS_OP_PROD: apply<U>(a, b, n, kProd); return true;
    case BCS_OP_MIN: apply<T>(a, b, n, kMin); return true;
    case BCS_OP_MAX: apply<T>(a, b, n, kMax); return true;
    case BCS_OP_LAND: apply<U>(a, b, n, kLand); return true;
    case BCS_OP_LOR: apply<U>(a, b, n, kLor); return true;
    case BCS_OP_LXOR: apply<U>(a, b, n, kLxor); return true;
    case BCS_OP_BAND: apply<U>(a, b, n, kBand); return true;
    case BCS_OP_BOR: apply<U>(a, b, n, kBor); return true;
    case BCS_OP_BXOR: apply<U>(a, b, n, kBxor); return true;
    default: return false;
  }
}

// Reals: plain IEEE operations (see kMin/kMax for NaN and signed zeros).
template <typename T>
bool floating(bcs_op_t op, unsigned char* a, const unsigned char* b, size_t n) {
  switch (op) {
    case BCS_OP_SUM: apply<T>(a, b, n, kSum); return true;
    case BCS_OP_PROD: apply<T>(a, b, n, kProd); return true;
    case BCS_OP_MIN: apply<T>(a, b, n, kMin); return true;
    case BCS_OP_MAX: apply<T>(a, b, n, kMax); return true;
    default: return false;
  }
}

// Makes the compiler materialise `v` as a rounded R: nothing can be fused
// across it (used on the products of the complex product).
template <typename R>
inline void rounded(R& v) {
#if defined(__GNUC__) && defined(__x86_64__)
  if constexpr (!std::is_same_v<R, long double>) asm("" : "+x"(v));
#elif defined(__GNUC__) && defined(__aarch64__)
  if constexpr (!std::is_same_v<R, long double>) asm("" : "+w"(v));
#else
  (void)v;
#endif
}

// (ar + i ai)(br + i bi) = (ar br - ai bi) + i (ar bi + ai br): the textbook
// product, no C99 Annex G recovery of infinities (what std::complex and
// _Complex do through __muldc3), so it is cheap and the same everywhere.
template <typename R>
void complex_prod(unsigned char* a, const unsigned char* b, size_t n) {
  constexpr size_t kR = sizeof(R);
  for (size_t k = 0; k < n; ++k) {
    unsigned char* pa = a + 2 * k * kR;
    const unsigned char* pb = b + 2 * k * kR;
    const R ar = load<R>(pa), ai = load<R>(pa + kR);
    const R br = load<R>(pb), bi = load<R>(pb + kR);
    R rr = ar * br, ii = ai * bi, ri = ar * bi, ir = ai * br;
    rounded(rr);
    rounded(ii);
    rounded(ri);
    rounded(ir);
    store<R>(pa, rr - ii);
    store<R>(pa + kR, ri + ir);
  }
}

// Complex: SUM is the real SUM over the 2n parts (re and im sit at 0 and
// sizeof(R), as R[2]); PROD as above.
template <typename R>
bool complex(bcs_op_t op, unsigned char* a, const unsigned char* b, size_t n) {
  switch (op) {
    case BCS_OP_SUM: apply<R>(a, b, 2 * n, kSum); return true;
    case BCS_OP_PROD: complex_prod<R>(a, b, n); return true;
    default: return false;
  }
}

// MINLOC/MAXLOC (MPI-3.1 §5.9.4): the smaller/larger value wins with its
// index; on equal values the value stays and the index is the smaller of
// the two, whichever side it is on. A NaN value never compares, so a NaN in
// `in` loses and a NaN in `inout` stays (MPI leaves NaN undefined). Both
// fields are selected, never recomputed, so their bits are exact.
template <bool kIsMax, typename V, typename I>
inline I loc_take(V av, V bv, I ai, I bi) {
  if constexpr (kIsMax)
    return (bv > av) | ((bv == av) & (bi < ai));
  else
    return (bv < av) | ((bv == av) & (bi < ai));
}

// Values of 4 or 8 bytes (FLOAT_INT, 2INT, DOUBLE_INT, LONG_INT) run
// 16 / sizeof(T) pairs at a time on generic vectors: the value and index
// fields are gathered into two vectors (indices widened to the value's
// width, so that both comparison masks have the same lanes), selected
// without branches, and stored back field by field. A scalar loop with a
// ternary becomes branches, which on data with ties mispredict (2-4x
// slower); a scalar select on the bits stays at half the speed of this.
template <typename T, bool kIsMax>
void loc(unsigned char* a, const unsigned char* b, size_t n) {
  constexpr size_t kSize = Pair<T>::kSize, kIndex = Pair<T>::kIndex;
  size_t k = 0;
  if constexpr (sizeof(T) == 4 || sizeof(T) == 8) {
    using M = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
    typedef T V __attribute__((vector_size(16)));
    typedef M I __attribute__((vector_size(16)));
    constexpr size_t kLanes = 16 / sizeof(T);
    for (; k + kLanes <= n; k += kLanes) {
      unsigned char* pa = a + k * kSize;
      const unsigned char* pb = b + k * kSize;
      V av, bv;
      I ai, bi;
      for (size_t j = 0; j < kLanes; ++j) {
        av[j] = load<T>(pa + j * kSize);
        bv[j] = load<T>(pb + j * kSize);
        ai[j] = load<int>(pa + j * kSize + kIndex);
        bi[j] = load<int>(pb + j * kSize + kIndex);
      }
      const I take = loc_take<kIsMax>(av, bv, ai, bi);
      const V v = take ? bv : av;
      const I i = take ? bi : ai;
      for (size_t j = 0; j < kLanes; ++j) {
        store<T>(pa + j * kSize, v[j]);
        store<int>(pa + j * kSize + kIndex, static_cast<int>(i[j]));
      }
    }
  }
  for (; k < n; ++k) {
    unsigned char* pa = a + k * kSize;
    const unsigned char* pb = b + k * kSize;
    const T av = load<T>(pa), bv = load<T>(pb);
    const int ai = load<int>(pa + kIndex), bi = load<int>(pb + kIndex);
    const bool take = loc_take<kIsMax>(av, bv, ai, bi);
    store<T>(pa, take ? bv : av);
    store<int>(pa + kIndex, take ? bi : ai);
  }
}

template <typename T>
bool pair(bcs_op_t op, unsigned char* a, const unsigned char* b, size_t n) {
  switch (op) {
    case BCS_OP_MINLOC: loc<T, false>(a, b, n); return true;
    case BCS_OP_MAXLOC: loc<T, true>(a, b, n); return true;
    default: return false;
  }
}

enum class Cat { integer, floating, complex, boolean, byte, pair, invalid };

Cat category(bcs_dtype_t t) {
  switch (t) {
    case BCS_DT_INT8: case BCS_DT_INT16: case BCS_DT_INT32: case BCS_DT_INT64:
    case BCS_DT_UINT8: case BCS_DT_UINT16: case BCS_DT_UINT32: case BCS_DT_UINT64:
      return Cat::integer;
    case BCS_DT_FLOAT: case BCS_DT_DOUBLE: case BCS_DT_LONG_DOUBLE:
      return Cat::floating;
    case BCS_DT_C_FLOAT_COMPLEX: case BCS_DT_C_DOUBLE_COMPLEX: case BCS_DT_C_LONG_DOUBLE_COMPLEX:
      return Cat::complex;
    case BCS_DT_BOOL:
      return Cat::boolean;
    case BCS_DT_BYTE:
      return Cat::byte;
    case BCS_DT_FLOAT_INT: case BCS_DT_DOUBLE_INT: case BCS_DT_LONG_INT: case BCS_DT_2INT:
    case BCS_DT_SHORT_INT: case BCS_DT_LONG_DOUBLE_INT:
      return Cat::pair;
  }
  return Cat::invalid;
}

bool valid_op(bcs_op_t op) { return op >= BCS_OP_SUM && op <= BCS_OP_NO_OP; }

// The typed kernel of a supported (op, t), not NO_OP / REPLACE.
bool run(bcs_op_t op, bcs_dtype_t t, unsigned char* a, const unsigned char* b, size_t n) {
  switch (t) {
    case BCS_DT_INT8: return integer<int8_t>(op, a, b, n);
    case BCS_DT_INT16: return integer<int16_t>(op, a, b, n);
    case BCS_DT_INT32: return integer<int32_t>(op, a, b, n);
    case BCS_DT_INT64: return integer<int64_t>(op, a, b, n);
    case BCS_DT_UINT8: return integer<uint8_t>(op, a, b, n);
    case BCS_DT_UINT16: return integer<uint16_t>(op, a, b, n);
    case BCS_DT_UINT32: return integer<uint32_t>(op, a, b, n);
    case BCS_DT_UINT64: return integer<uint64_t>(op, a, b, n);
    case BCS_DT_FLOAT: return floating<float>(op, a, b, n);
    case BCS_DT_DOUBLE: return floating<double>(op, a, b, n);
    case BCS_DT_LONG_DOUBLE: return floating<long double>(op, a, b, n);
    case BCS_DT_C_FLOAT_COMPLEX: return complex<float>(op, a, b, n);
    case BCS_DT_C_DOUBLE_COMPLEX: return complex<double>(op, a, b, n);
    case BCS_DT_C_LONG_DOUBLE_COMPLEX: return complex<long double>(op, a, b, n);
    case BCS_DT_BOOL: return integer<uint8_t>(op, a, b, n);  // logical ops only
    case BCS_DT_BYTE: return integer<uint8_t>(op, a, b, n);  // bitwise ops only
    case BCS_DT_FLOAT_INT: return pair<float>(op, a, b, n);
    case BCS_DT_DOUBLE_INT: return pair<double>(op, a, b, n);
    case BCS_DT_LONG_INT: return pair<long>(op, a, b, n);
    case BCS_DT_2INT: return pair<int>(op, a, b, n);
    case BCS_DT_SHORT_INT: return pair<short>(op, a, b, n);
    case BCS_DT_LONG_DOUBLE_INT: return pair<long double>(op, a, b, n);
  }
  return false;
}

}  // namespace

extern "C" {

size_t bcs_dtype_size(bcs_dtype_t t) {
  switch (t) {
    case BCS_DT_INT8: case BCS_DT_UINT8: return 1;
    case BCS_DT_INT16: case BCS_DT_UINT16: return 2;
    case BCS_DT_INT32: case BCS_DT_UINT32: return 4;
    case BCS_DT_INT64: case BCS_DT_UINT64: return 8;
    case BCS_DT_FLOAT: return sizeof(float);
    case BCS_DT_DOUBLE: return sizeof(double);
    case BCS_DT_LONG_DOUBLE: return sizeof(long double);
    case BCS_DT_C_FLOAT_COMPLEX: return 2 * sizeof(float);
    case BCS_DT_C_DOUBLE_COMPLEX: return 2 * sizeof(double);
    case BCS_DT_C_LONG_DOUBLE_COMPLEX: return 2 * sizeof(long double);
    case BCS_DT_BOOL: return 1;
    case BCS_DT_BYTE: return 1;
    case BCS_DT_FLOAT_INT: return Pair<float>::kSize;
    case BCS_DT_DOUBLE_INT: return Pair<double>::kSize;
    case BCS_DT_LONG_INT: return Pair<long>::kSize;
    case BCS_DT_2INT: return Pair<int>::kSize;
    case BCS_DT_SHORT_INT: return Pair<short>::kSize;
    case BCS_DT_LONG_DOUBLE_INT: return Pair<long double>::kSize;
  }
  return 0;
}

int bcs_op_supported(bcs_op_t op, bcs_dtype_t t) {
  const Cat c = category(t);
  if (c == Cat::invalid || !valid_op(op)) return 0;
  switch (op) {
    case BCS_OP_MIN: case BCS_OP_MAX:
      return c == Cat::integer || c == Cat::floating;
    case BCS_OP_SUM: case BCS_OP_PROD:
      return c == Cat::integer || c == Cat::floating || c == Cat::complex;
    case BCS_OP_LAND: case BCS_OP_LOR: case BCS_OP_LXOR:
      return c == Cat::integer || c == Cat::boolean;
    case BCS_OP_BAND: case BCS_OP_BOR: case BCS_OP_BXOR:
      return c == Cat::integer || c == Cat::byte;
    case BCS_OP_MINLOC: case BCS_OP_MAXLOC:
      return c == Cat::pair;
    case BCS_OP_REPLACE: case BCS_OP_NO_OP:
      return 1;
  }
  return 0;
}

bcs_status_t bcs_reduce_local(bcs_op_t op, bcs_dtype_t t, void* inout, const void* in,
                              size_t count) {
  if (!bcs_op_supported(op, t)) return BCS_ERR_ARG;
  if (count == 0) return BCS_OK;
  if (!inout || !in) return BCS_ERR_ARG;
  if (op == BCS_OP_NO_OP) return BCS_OK;
  const size_t es = bcs_dtype_size(t);
  if (count > SIZE_MAX / es) return BCS_ERR_ARG;
  const size_t bytes = count * es;
  auto* a = static_cast<unsigned char*>(inout);
  const auto* b = static_cast<const unsigned char*>(in);
  if (op == BCS_OP_REPLACE) {
    if (a != b) std::memmove(a, b, bytes);
    return BCS_OK;
  }
  const auto ua = reinterpret_cast<uintptr_t>(a), ub = reinterpret_cast<uintptr_t>(b);
  if (ua != ub && ua < ub + bytes && ub < ua + bytes) {
    // Partial overlap: combine with a copy of `in`, as memmove would.
    try {
      const std::vector<unsigned char> copy(b, b + bytes);
      return run(op, t, a, copy.data(), count) ? BCS_OK : BCS_ERR_ARG;
    } catch (const std::bad_alloc&) {
      return BCS_ERR_NO_MEM;
    }
  }
  return run(op, t, a, b, count) ? BCS_OK : BCS_ERR_ARG;
}

}  // extern "C"
