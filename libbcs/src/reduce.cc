// Reduction kernels (MPI's predefined ops on the element types of bcs.h).
// The node managers' reduce helper combines megabytes with these, so the
// dispatch on (op, type) happens once per call and the loops are typed and
// simple enough for the compiler to vectorise. Elements are loaded and
// stored with memcpy: the helpers' buffers are byte vectors with no
// alignment promise, and a memcpy of one element compiles to a plain move.
#include <complex>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "bcs/bcs.h"

namespace {

template <typename T>
struct Pair {
  T v;
  int i;
};

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

template <typename T, typename F>
void loop(void* inout, const void* in, size_t n, F f) {
  auto* a = static_cast<unsigned char*>(inout);
  const auto* b = static_cast<const unsigned char*>(in);
  for (size_t i = 0; i < n; ++i) {
    T x, y;
    std::memcpy(&x, a + i * sizeof(T), sizeof(T));
    std::memcpy(&y, b + i * sizeof(T), sizeof(T));
    x = f(x, y);
    std::memcpy(a + i * sizeof(T), &x, sizeof(T));
  }
}

// Integers: SUM/PROD wrap (done in the unsigned type: no signed overflow).
template <typename T>
bool integer(bcs_op_t op, void* io, const void* in, size_t n) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case BCS_OP_SUM: loop<T>(io, in, n, [](T a, T b) { return T(U(a) + U(b)); }); return true;
    case BCS_OP_PROD: loop<T>(io, in, n, [](T a, T b) { return T(U(a) * U(b)); }); return true;
    case BCS_OP_MIN: loop<T>(io, in, n, [](T a, T b) { return b < a ? b : a; }); return true;
    case BCS_OP_MAX: loop<T>(io, in, n, [](T a, T b) { return b > a ? b : a; }); return true;
    case BCS_OP_LAND: loop<T>(io, in, n, [](T a, T b) { return T(a && b); }); return true;
    case BCS_OP_LOR: loop<T>(io, in, n, [](T a, T b) { return T(a || b); }); return true;
    case BCS_OP_LXOR: loop<T>(io, in, n, [](T a, T b) { return T(!a != !b); }); return true;
    case BCS_OP_BAND: loop<T>(io, in, n, [](T a, T b) { return T(a & b); }); return true;
    case BCS_OP_BOR: loop<T>(io, in, n, [](T a, T b) { return T(a | b); }); return true;
    case BCS_OP_BXOR: loop<T>(io, in, n, [](T a, T b) { return T(a ^ b); }); return true;
    default: return false;
  }
}

// Reals: plain IEEE operations. MIN/MAX keep the left operand unless the
// right one compares smaller/larger, so a NaN on the right is ignored and
// a NaN on the left stays (as in MPICH's and Open MPI's loops).
template <typename T>
bool floating(bcs_op_t op, void* io, const void* in, size_t n) {
  switch (op) {
    case BCS_OP_SUM: loop<T>(io, in, n, [](T a, T b) { return a + b; }); return true;
    case BCS_OP_PROD: loop<T>(io, in, n, [](T a, T b) { return a * b; }); return true;
    case BCS_OP_MIN: loop<T>(io, in, n, [](T a, T b) { return b < a ? b : a; }); return true;
    case BCS_OP_MAX: loop<T>(io, in, n, [](T a, T b) { return b > a ? b : a; }); return true;
    default: return false;
  }
}

// Complex: SUM and PROD, with the textbook product (no C99 Annex G
// infinity recovery): the same bits on every node manager.
template <typename R>
bool complex(bcs_op_t op, void* io, const void* in, size_t n) {
  struct C {
    R re, im;
  };
  switch (op) {
    case BCS_OP_SUM:
      loop<C>(io, in, n, [](C a, C b) { return C{a.re + b.re, a.im + b.im}; });
      return true;
    case BCS_OP_PROD:
      loop<C>(io, in, n, [](C a, C b) {
        return C{a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
      });
      return true;
    default:
      return false;
  }
}

bool boolean(bcs_op_t op, void* io, const void* in, size_t n) {
  using B = unsigned char;  // C _Bool / C++ bool: one byte, 0 or 1
  switch (op) {
    case BCS_OP_LAND: loop<B>(io, in, n, [](B a, B b) { return B(a && b); }); return true;
    case BCS_OP_LOR: loop<B>(io, in, n, [](B a, B b) { return B(a || b); }); return true;
    case BCS_OP_LXOR: loop<B>(io, in, n, [](B a, B b) { return B(!a != !b); }); return true;
    default: return false;
  }
}

bool byte(bcs_op_t op, void* io, const void* in, size_t n) {
  using B = unsigned char;
  switch (op) {
    case BCS_OP_BAND: loop<B>(io, in, n, [](B a, B b) { return B(a & b); }); return true;
    case BCS_OP_BOR: loop<B>(io, in, n, [](B a, B b) { return B(a | b); }); return true;
    case BCS_OP_BXOR: loop<B>(io, in, n, [](B a, B b) { return B(a ^ b); }); return true;
    default: return false;
  }
}

// MINLOC/MAXLOC: the value wins; on equal values the smaller index.
template <typename T>
bool pair(bcs_op_t op, void* io, const void* in, size_t n) {
  using P = Pair<T>;
  switch (op) {
    case BCS_OP_MINLOC:
      loop<P>(io, in, n, [](P a, P b) {
        if (b.v < a.v || (b.v == a.v && b.i < a.i)) return b;
        return a;
      });
      return true;
    case BCS_OP_MAXLOC:
      loop<P>(io, in, n, [](P a, P b) {
        if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
        return a;
      });
      return true;
    default:
      return false;
  }
}

bool valid_op(bcs_op_t op) { return op >= BCS_OP_SUM && op <= BCS_OP_NO_OP; }

}  // namespace

extern "C" {

size_t bcs_dtype_size(bcs_dtype_t t) {
  switch (t) {
    case BCS_DT_INT8: case BCS_DT_UINT8: case BCS_DT_BOOL: case BCS_DT_BYTE: return 1;
    case BCS_DT_INT16: case BCS_DT_UINT16: return 2;
    case BCS_DT_INT32: case BCS_DT_UINT32: return 4;
    case BCS_DT_INT64: case BCS_DT_UINT64: return 8;
    case BCS_DT_FLOAT: return sizeof(float);
    case BCS_DT_DOUBLE: return sizeof(double);
    case BCS_DT_LONG_DOUBLE: return sizeof(long double);
    case BCS_DT_C_FLOAT_COMPLEX: return sizeof(std::complex<float>);
    case BCS_DT_C_DOUBLE_COMPLEX: return sizeof(std::complex<double>);
    case BCS_DT_C_LONG_DOUBLE_COMPLEX: return sizeof(std::complex<long double>);
    case BCS_DT_FLOAT_INT: return sizeof(Pair<float>);
    case BCS_DT_DOUBLE_INT: return sizeof(Pair<double>);
    case BCS_DT_LONG_INT: return sizeof(Pair<long>);
    case BCS_DT_2INT: return sizeof(Pair<int>);
    case BCS_DT_SHORT_INT: return sizeof(Pair<short>);
    case BCS_DT_LONG_DOUBLE_INT: return sizeof(Pair<long double>);
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
  if (op == BCS_OP_REPLACE) {
    std::memmove(inout, in, count * bcs_dtype_size(t));
    return BCS_OK;
  }
  bool ok = false;
  switch (t) {
    case BCS_DT_INT8: ok = integer<int8_t>(op, inout, in, count); break;
    case BCS_DT_INT16: ok = integer<int16_t>(op, inout, in, count); break;
    case BCS_DT_INT32: ok = integer<int32_t>(op, inout, in, count); break;
    case BCS_DT_INT64: ok = integer<int64_t>(op, inout, in, count); break;
    case BCS_DT_UINT8: ok = integer<uint8_t>(op, inout, in, count); break;
    case BCS_DT_UINT16: ok = integer<uint16_t>(op, inout, in, count); break;
    case BCS_DT_UINT32: ok = integer<uint32_t>(op, inout, in, count); break;
    case BCS_DT_UINT64: ok = integer<uint64_t>(op, inout, in, count); break;
    case BCS_DT_FLOAT: ok = floating<float>(op, inout, in, count); break;
    case BCS_DT_DOUBLE: ok = floating<double>(op, inout, in, count); break;
    case BCS_DT_LONG_DOUBLE: ok = floating<long double>(op, inout, in, count); break;
    case BCS_DT_C_FLOAT_COMPLEX: ok = complex<float>(op, inout, in, count); break;
    case BCS_DT_C_DOUBLE_COMPLEX: ok = complex<double>(op, inout, in, count); break;
    case BCS_DT_C_LONG_DOUBLE_COMPLEX: ok = complex<long double>(op, inout, in, count); break;
    case BCS_DT_BOOL: ok = boolean(op, inout, in, count); break;
    case BCS_DT_BYTE: ok = byte(op, inout, in, count); break;
    case BCS_DT_FLOAT_INT: ok = pair<float>(op, inout, in, count); break;
    case BCS_DT_DOUBLE_INT: ok = pair<double>(op, inout, in, count); break;
    case BCS_DT_LONG_INT: ok = pair<long>(op, inout, in, count); break;
    case BCS_DT_2INT: ok = pair<int>(op, inout, in, count); break;
    case BCS_DT_SHORT_INT: ok = pair<short>(op, inout, in, count); break;
    case BCS_DT_LONG_DOUBLE_INT: ok = pair<long double>(op, inout, in, count); break;
  }
  return ok ? BCS_OK : BCS_ERR_ARG;
}

}  // extern "C"
