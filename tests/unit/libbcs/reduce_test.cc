// The reduction kernels (bcs.h: bcs_dtype_size, bcs_op_supported,
// bcs_reduce_local; reduce.cc) against a straightforward reference written
// here, one element at a time, for every op x every type.
//
// Buffers are compared byte for byte, padding included: the inputs' padding
// bytes (of the pair types and of x87 long double) are random, and the
// kernels promise to leave inout's padding as it was (REPLACE copies whole
// elements).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "bcs/bcs.h"

namespace {

using Bytes = std::vector<unsigned char>;

// ----------------------------------------------------------------- types

enum class Kind { sint, uint, real, cplx, boolean, byte, pair };

// MPI_FLOAT_INT & co. as the runtime reduces them: packed (MPI_Pack's
// layout, the value then the index, no padding).
template <typename T>
struct __attribute__((packed)) Loc {
  T value;
  int index;
};
static_assert(sizeof(Loc<double>) == 12 && sizeof(Loc<short>) == 6);

struct TypeDesc {
  bcs_dtype_t t;
  const char* name;
  Kind kind;
  size_t size;  // from the C types, independent of the library
};

const TypeDesc kTypes[] = {
    {BCS_DT_INT8, "INT8", Kind::sint, sizeof(int8_t)},
    {BCS_DT_INT16, "INT16", Kind::sint, sizeof(int16_t)},
    {BCS_DT_INT32, "INT32", Kind::sint, sizeof(int32_t)},
    {BCS_DT_INT64, "INT64", Kind::sint, sizeof(int64_t)},
    {BCS_DT_UINT8, "UINT8", Kind::uint, sizeof(uint8_t)},
    {BCS_DT_UINT16, "UINT16", Kind::uint, sizeof(uint16_t)},
    {BCS_DT_UINT32, "UINT32", Kind::uint, sizeof(uint32_t)},
    {BCS_DT_UINT64, "UINT64", Kind::uint, sizeof(uint64_t)},
    {BCS_DT_FLOAT, "FLOAT", Kind::real, sizeof(float)},
    {BCS_DT_DOUBLE, "DOUBLE", Kind::real, sizeof(double)},
    {BCS_DT_LONG_DOUBLE, "LONG_DOUBLE", Kind::real, sizeof(long double)},
    {BCS_DT_C_FLOAT_COMPLEX, "C_FLOAT_COMPLEX", Kind::cplx, sizeof(float[2])},
    {BCS_DT_C_DOUBLE_COMPLEX, "C_DOUBLE_COMPLEX", Kind::cplx, sizeof(double[2])},
    {BCS_DT_C_LONG_DOUBLE_COMPLEX, "C_LONG_DOUBLE_COMPLEX", Kind::cplx, sizeof(long double[2])},
    {BCS_DT_BOOL, "BOOL", Kind::boolean, sizeof(bool)},
    {BCS_DT_BYTE, "BYTE", Kind::byte, 1},
    {BCS_DT_FLOAT_INT, "FLOAT_INT", Kind::pair, sizeof(Loc<float>)},
    {BCS_DT_DOUBLE_INT, "DOUBLE_INT", Kind::pair, sizeof(Loc<double>)},
    {BCS_DT_LONG_INT, "LONG_INT", Kind::pair, sizeof(Loc<long>)},
    {BCS_DT_2INT, "2INT", Kind::pair, sizeof(Loc<int>)},
    {BCS_DT_SHORT_INT, "SHORT_INT", Kind::pair, sizeof(Loc<short>)},
    {BCS_DT_LONG_DOUBLE_INT, "LONG_DOUBLE_INT", Kind::pair, sizeof(Loc<long double>)},
};
static_assert(std::size(kTypes) == BCS_DT_LAST_);

const TypeDesc& desc(bcs_dtype_t t) { return kTypes[static_cast<int>(t) - 1]; }

const bcs_op_t kOps[] = {BCS_OP_SUM,  BCS_OP_PROD,   BCS_OP_MIN,    BCS_OP_MAX,     BCS_OP_LAND,
                         BCS_OP_LOR,  BCS_OP_LXOR,   BCS_OP_BAND,   BCS_OP_BOR,     BCS_OP_BXOR,
                         BCS_OP_MINLOC, BCS_OP_MAXLOC, BCS_OP_REPLACE, BCS_OP_NO_OP};
const char* const kOpNames[] = {"SUM",  "PROD", "MIN",  "MAX",    "LAND",   "LOR",     "LXOR",
                                "BAND", "BOR",  "BXOR", "MINLOC", "MAXLOC", "REPLACE", "NO_OP"};

// MPI-3.1 §5.9.2, one row per op:      sint uint real cplx bool byte pair
const bool kAllowed[14][7] = {
    /* SUM     */ {1, 1, 1, 1, 0, 0, 0},
    /* PROD    */ {1, 1, 1, 1, 0, 0, 0},
    /* MIN     */ {1, 1, 1, 0, 0, 0, 0},
    /* MAX     */ {1, 1, 1, 0, 0, 0, 0},
    /* LAND    */ {1, 1, 0, 0, 1, 0, 0},
    /* LOR     */ {1, 1, 0, 0, 1, 0, 0},
    /* LXOR    */ {1, 1, 0, 0, 1, 0, 0},
    /* BAND    */ {1, 1, 0, 0, 0, 1, 0},
    /* BOR     */ {1, 1, 0, 0, 0, 1, 0},
    /* BXOR    */ {1, 1, 0, 0, 0, 1, 0},
    /* MINLOC  */ {0, 0, 0, 0, 0, 0, 1},
    /* MAXLOC  */ {0, 0, 0, 0, 0, 0, 1},
    /* REPLACE */ {1, 1, 1, 1, 1, 1, 1},
    /* NO_OP   */ {1, 1, 1, 1, 1, 1, 1},
};

bool allowed(bcs_op_t op, bcs_dtype_t t) {
  return kAllowed[static_cast<int>(op) - 1][static_cast<int>(desc(t).kind)];
}

// Bytes of a long double that hold its value (x87 extended: 10 of 16).
#if (defined(__x86_64__) || defined(__i386__)) && LDBL_MANT_DIG == 64
constexpr size_t kLdValue = 10;
#else
constexpr size_t kLdValue = sizeof(long double);
#endif
template <typename T>
constexpr size_t value_bytes() {
  return std::is_same_v<T, long double> ? kLdValue : sizeof(T);
}

template <typename T>
T get(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
void put(unsigned char* p, T v) {
  std::memcpy(p, &v, value_bytes<T>());
}

// ---------------------------------------------------------- random inputs

using Rng = std::mt19937_64;

template <typename T>
T random_int(Rng& rng) {
  const uint64_t r = rng();
  switch (r % 8) {
    case 0: return 0;
    case 1: return static_cast<T>(static_cast<T>((r >> 8) % 5) - (std::is_signed_v<T> ? 2 : 0));
    case 2: return (r >> 8) % 2 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
    default: return static_cast<T>(r >> 8);  // modulo 2^n
  }
}

template <typename T>
T random_real(Rng& rng, bool specials) {
  const uint64_t r = rng();
  if (specials) {
    switch (r % 16) {
      case 0: return T(0);
      case 1: return -T(0);
      case 2: return std::numeric_limits<T>::infinity();
      case 3: return -std::numeric_limits<T>::infinity();
      case 4: return std::numeric_limits<T>::denorm_min();
      case 5: return std::numeric_limits<T>::max();
      default: break;
    }
  }
  if (r % 16 == 6) return T(static_cast<int>((r >> 8) % 5) - 2);  // ties
  std::uniform_real_distribution<double> u(-100.0, 100.0);
  T v = T(u(rng));
  if constexpr (std::is_same_v<T, long double>) v += T(u(rng)) * 0x1p-50L;  // extended bits
  return v;
}

// One element of type t: random bytes everywhere (padding included), then
// a value.
void random_element(bcs_dtype_t t, Rng& rng, unsigned char* p) {
  for (size_t k = 0; k < desc(t).size; ++k) p[k] = static_cast<unsigned char>(rng());
  const auto pair = [&](auto zero) {
    using T = decltype(zero);
    const uint64_t r = rng();
    put<T>(p + offsetof(Loc<T>, value), T(static_cast<int>(r % 8) - 3));
    put<int>(p + offsetof(Loc<T>, index), static_cast<int>((r >> 8) % 16) - 2);
  };
  switch (t) {
    case BCS_DT_INT8: put(p, random_int<int8_t>(rng)); break;
    case BCS_DT_INT16: put(p, random_int<int16_t>(rng)); break;
    case BCS_DT_INT32: put(p, random_int<int32_t>(rng)); break;
    case BCS_DT_INT64: put(p, random_int<int64_t>(rng)); break;
    case BCS_DT_UINT8: put(p, random_int<uint8_t>(rng)); break;
    case BCS_DT_UINT16: put(p, random_int<uint16_t>(rng)); break;
    case BCS_DT_UINT32: put(p, random_int<uint32_t>(rng)); break;
    case BCS_DT_UINT64: put(p, random_int<uint64_t>(rng)); break;
    case BCS_DT_FLOAT: put(p, random_real<float>(rng, true)); break;
    case BCS_DT_DOUBLE: put(p, random_real<double>(rng, true)); break;
    case BCS_DT_LONG_DOUBLE: put(p, random_real<long double>(rng, true)); break;
    // Complex parts stay finite: with infinities the textbook product makes
    // NaNs whose sign the compiler may legitimately choose either way.
    case BCS_DT_C_FLOAT_COMPLEX:
      put(p, random_real<float>(rng, false));
      put(p + sizeof(float), random_real<float>(rng, false));
      break;
    case BCS_DT_C_DOUBLE_COMPLEX:
      put(p, random_real<double>(rng, false));
      put(p + sizeof(double), random_real<double>(rng, false));
      break;
    case BCS_DT_C_LONG_DOUBLE_COMPLEX:
      put(p, random_real<long double>(rng, false));
      put(p + sizeof(long double), random_real<long double>(rng, false));
      break;
    case BCS_DT_BOOL: p[0] = rng() % 2; break;
    case BCS_DT_BYTE: break;  // already random
    case BCS_DT_FLOAT_INT: pair(float{}); break;
    case BCS_DT_DOUBLE_INT: pair(double{}); break;
    case BCS_DT_LONG_INT: pair(long{}); break;
    case BCS_DT_2INT: pair(int{}); break;
    case BCS_DT_SHORT_INT: pair(short{}); break;
    case BCS_DT_LONG_DOUBLE_INT: pair(static_cast<long double>(0)); break;
  }
}

Bytes random_buffer(bcs_dtype_t t, size_t count, Rng& rng) {
  Bytes b(count * desc(t).size);
  for (size_t k = 0; k < count; ++k) random_element(t, rng, b.data() + k * desc(t).size);
  return b;
}

// --------------------------------------------------------------- reference
//
// ref_*(op, out, b): out holds the left operand (inout) on entry and gets
// `out op b` in its value bytes, one element.

template <typename T>
void ref_int(bcs_op_t op, unsigned char* out, const unsigned char* pb) {
  const T a = get<T>(out), b = get<T>(pb);
  T r = a;
  switch (op) {
    // Converting the 64-bit unsigned result to T is modulo 2^n (C++20).
    case BCS_OP_SUM: r = static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); break;
    case BCS_OP_PROD: r = static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); break;
    case BCS_OP_MIN: r = std::min(a, b); break;
    case BCS_OP_MAX: r = std::max(a, b); break;
    case BCS_OP_LAND: r = (a != 0 && b != 0) ? 1 : 0; break;
    case BCS_OP_LOR: r = (a != 0 || b != 0) ? 1 : 0; break;
    case BCS_OP_LXOR: r = ((a != 0) != (b != 0)) ? 1 : 0; break;
    case BCS_OP_BAND: r = static_cast<T>(a & b); break;
    case BCS_OP_BOR: r = static_cast<T>(a | b); break;
    case BCS_OP_BXOR: r = static_cast<T>(a ^ b); break;
    default: FAIL() << "no integer reference for op " << op;
  }
  put<T>(out, r);
}

template <typename T>
void ref_real(bcs_op_t op, unsigned char* out, const unsigned char* pb) {
  const T a = get<T>(out), b = get<T>(pb);
  T r = a;
  switch (op) {
    case BCS_OP_SUM: r = a + b; break;
    case BCS_OP_PROD: r = a * b; break;
    case BCS_OP_MIN: if (b < a) r = b; break;  // else the left operand stays
    case BCS_OP_MAX: if (b > a) r = b; break;
    default: FAIL() << "no real reference for op " << op;
  }
  put<T>(out, r);
}

template <typename R>
void ref_cplx(bcs_op_t op, unsigned char* out, const unsigned char* pb) {
  const R ar = get<R>(out), ai = get<R>(out + sizeof(R));
  const R br = get<R>(pb), bi = get<R>(pb + sizeof(R));
  R re = 0, im = 0;
  if (op == BCS_OP_SUM) {
    re = ar + br;
    im = ai + bi;
  } else if (op == BCS_OP_PROD) {
    // volatile: each product rounded on its own, never fused (FMA).
    volatile R p1 = ar * br, p2 = ai * bi, p3 = ar * bi, p4 = ai * br;
    re = p1 - p2;
    im = p3 + p4;
  } else {
    FAIL() << "no complex reference for op " << op;
  }
  put<R>(out, re);
  put<R>(out + sizeof(R), im);
}

template <typename T>
void ref_pair(bcs_op_t op, unsigned char* out, const unsigned char* pb) {
  constexpr size_t kV = offsetof(Loc<T>, value), kI = offsetof(Loc<T>, index);
  const T av = get<T>(out + kV), bv = get<T>(pb + kV);
  const int ai = get<int>(out + kI), bi = get<int>(pb + kI);
  T v = av;
  int i = ai;
  const bool b_wins = op == BCS_OP_MINLOC ? bv < av : bv > av;
  const bool a_wins = op == BCS_OP_MINLOC ? av < bv : av > bv;
  if (b_wins) {
    v = bv;
    i = bi;
  } else if (!a_wins) {  // equal values: the smaller index
    i = std::min(ai, bi);
  }
  put<T>(out + kV, v);
  put<int>(out + kI, i);
}

void ref_element(bcs_op_t op, bcs_dtype_t t, unsigned char* out, const unsigned char* b) {
  if (op == BCS_OP_NO_OP) return;
  if (op == BCS_OP_REPLACE) {
    std::memcpy(out, b, desc(t).size);
    return;
  }
  switch (t) {
    case BCS_DT_INT8: return ref_int<int8_t>(op, out, b);
    case BCS_DT_INT16: return ref_int<int16_t>(op, out, b);
    case BCS_DT_INT32: return ref_int<int32_t>(op, out, b);
    case BCS_DT_INT64: return ref_int<int64_t>(op, out, b);
    case BCS_DT_UINT8: return ref_int<uint8_t>(op, out, b);
    case BCS_DT_UINT16: return ref_int<uint16_t>(op, out, b);
    case BCS_DT_UINT32: return ref_int<uint32_t>(op, out, b);
    case BCS_DT_UINT64: return ref_int<uint64_t>(op, out, b);
    case BCS_DT_FLOAT: return ref_real<float>(op, out, b);
    case BCS_DT_DOUBLE: return ref_real<double>(op, out, b);
    case BCS_DT_LONG_DOUBLE: return ref_real<long double>(op, out, b);
    case BCS_DT_C_FLOAT_COMPLEX: return ref_cplx<float>(op, out, b);
    case BCS_DT_C_DOUBLE_COMPLEX: return ref_cplx<double>(op, out, b);
    case BCS_DT_C_LONG_DOUBLE_COMPLEX: return ref_cplx<long double>(op, out, b);
    case BCS_DT_BOOL:
      switch (op) {
        case BCS_OP_LAND: out[0] = out[0] && b[0]; return;
        case BCS_OP_LOR: out[0] = out[0] || b[0]; return;
        case BCS_OP_LXOR: out[0] = !out[0] != !b[0]; return;
        default: FAIL() << "no BOOL reference for op " << op;
      }
      return;
    case BCS_DT_BYTE:
      switch (op) {
        case BCS_OP_BAND: out[0] &= b[0]; return;
        case BCS_OP_BOR: out[0] |= b[0]; return;
        case BCS_OP_BXOR: out[0] ^= b[0]; return;
        default: FAIL() << "no BYTE reference for op " << op;
      }
      return;
    case BCS_DT_FLOAT_INT: return ref_pair<float>(op, out, b);
    case BCS_DT_DOUBLE_INT: return ref_pair<double>(op, out, b);
    case BCS_DT_LONG_INT: return ref_pair<long>(op, out, b);
    case BCS_DT_2INT: return ref_pair<int>(op, out, b);
    case BCS_DT_SHORT_INT: return ref_pair<short>(op, out, b);
    case BCS_DT_LONG_DOUBLE_INT: return ref_pair<long double>(op, out, b);
  }
  FAIL() << "unknown type " << t;
}

// Index of the first element where x and y differ, or -1.
long first_difference(const unsigned char* x, const unsigned char* y, size_t count, size_t es) {
  for (size_t k = 0; k < count; ++k)
    if (std::memcmp(x + k * es, y + k * es, es) != 0) return static_cast<long>(k);
  return -1;
}

std::string hex(const unsigned char* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t k = 0; k < n; ++k) {
    s += digits[p[k] >> 4];
    s += digits[p[k] & 15];
  }
  return s;
}

// ------------------------------------------------- every op x every type

class ReduceLocalTest : public ::testing::TestWithParam<std::tuple<bcs_op_t, bcs_dtype_t>> {};

TEST_P(ReduceLocalTest, MatchesReference) {
  const auto [op, t] = GetParam();
  const size_t es = desc(t).size;
  const bool ok = allowed(op, t);
  EXPECT_EQ(bcs_op_supported(op, t), ok ? 1 : 0);

  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
    SCOPED_TRACE("count " + std::to_string(count));
    Rng rng(10007u * static_cast<unsigned>(op) + 101u * static_cast<unsigned>(t) + count);
    const Bytes a = random_buffer(t, count, rng), b = random_buffer(t, count, rng);
    Bytes got = a;
    // Non-null pointers even for count 0 (an empty vector's data() may be NULL).
    unsigned char dummy_a[64] = {}, dummy_b[64] = {};
    unsigned char* pa = count ? got.data() : dummy_a;
    const unsigned char* pb = count ? b.data() : dummy_b;

    if (!ok) {
      EXPECT_EQ(bcs_reduce_local(op, t, pa, pb, count), BCS_ERR_ARG);
      EXPECT_EQ(got, a) << "a refused call changed inout";
      continue;
    }
    Bytes want = a;
    for (size_t k = 0; k < count; ++k) ref_element(op, t, want.data() + k * es, b.data() + k * es);

    ASSERT_EQ(bcs_reduce_local(op, t, pa, pb, count), BCS_OK);
    long d = first_difference(got.data(), want.data(), count, es);
    EXPECT_EQ(d, -1) << "element " << d << ": got " << hex(got.data() + d * es, es) << " want "
                     << hex(want.data() + d * es, es) << " (inout " << hex(a.data() + d * es, es)
                     << ", in " << hex(b.data() + d * es, es) << ")";

    // Misaligned buffers (inout at +1, in at +3) give the same bytes.
    Bytes ma(count * es + 16), mb(count * es + 16);
    if (count) {
      std::memcpy(ma.data() + 1, a.data(), count * es);
      std::memcpy(mb.data() + 3, b.data(), count * es);
    }
    ASSERT_EQ(bcs_reduce_local(op, t, ma.data() + 1, mb.data() + 3, count), BCS_OK);
    d = first_difference(ma.data() + 1, want.data(), count, es);
    EXPECT_EQ(d, -1) << "misaligned: element " << d;
    EXPECT_EQ(ma[0], 0) << "wrote before the buffer";
    EXPECT_EQ(ma[count * es + 1], 0) << "wrote past the buffer";
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllOpsAllTypes, ReduceLocalTest,
    ::testing::Combine(::testing::ValuesIn(kOps),
                       ::testing::ValuesIn([] {
                         std::vector<bcs_dtype_t> v;
                         for (const auto& d : kTypes) v.push_back(d.t);
                         return v;
                       }())),
    [](const ::testing::TestParamInfo<ReduceLocalTest::ParamType>& info) {
      return std::string(kOpNames[static_cast<int>(std::get<0>(info.param)) - 1]) + "_" +
             desc(std::get<1>(info.param)).name;
    });

// -------------------------------------------------------- specific cases

TEST(ReduceTest, SupportedMatrix) {
  int supported = 0;
  for (bcs_op_t op : kOps)
    for (const auto& d : kTypes) {
      EXPECT_EQ(bcs_op_supported(op, d.t), allowed(op, d.t) ? 1 : 0)
          << kOpNames[op - 1] << " on " << d.name;
      supported += bcs_op_supported(op, d.t);
    }
  // 8 integer types x 12 ops, 3 reals x 6, 3 complex x 4, BOOL 5, BYTE 5, 6 pairs x 4.
  EXPECT_EQ(supported, 8 * 12 + 3 * 6 + 3 * 4 + 5 + 5 + 6 * 4);
  // A few spelled out.
  EXPECT_EQ(bcs_op_supported(BCS_OP_MIN, BCS_DT_C_DOUBLE_COMPLEX), 0);
  EXPECT_EQ(bcs_op_supported(BCS_OP_LAND, BCS_DT_DOUBLE), 0);
  EXPECT_EQ(bcs_op_supported(BCS_OP_BAND, BCS_DT_BOOL), 0);
  EXPECT_EQ(bcs_op_supported(BCS_OP_LOR, BCS_DT_BYTE), 0);
  EXPECT_EQ(bcs_op_supported(BCS_OP_SUM, BCS_DT_BYTE), 0);
  EXPECT_EQ(bcs_op_supported(BCS_OP_MAX, BCS_DT_2INT), 0);
  EXPECT_EQ(bcs_op_supported(BCS_OP_MAXLOC, BCS_DT_INT32), 0);
  EXPECT_EQ(bcs_op_supported(BCS_OP_REPLACE, BCS_DT_LONG_DOUBLE_INT), 1);
}

TEST(ReduceTest, DtypeSizes) {
  for (const auto& d : kTypes) EXPECT_EQ(bcs_dtype_size(d.t), d.size) << d.name;
#if defined(__x86_64__)
  EXPECT_EQ(bcs_dtype_size(BCS_DT_LONG_DOUBLE), 16u);
  EXPECT_EQ(bcs_dtype_size(BCS_DT_C_LONG_DOUBLE_COMPLEX), 32u);
  EXPECT_EQ(bcs_dtype_size(BCS_DT_FLOAT_INT), 8u);
  EXPECT_EQ(bcs_dtype_size(BCS_DT_DOUBLE_INT), 12u);  // packed, as MPI_Pack lays it out
  EXPECT_EQ(bcs_dtype_size(BCS_DT_LONG_INT), 12u);
  EXPECT_EQ(bcs_dtype_size(BCS_DT_2INT), 8u);
  EXPECT_EQ(bcs_dtype_size(BCS_DT_SHORT_INT), 6u);
  EXPECT_EQ(bcs_dtype_size(BCS_DT_LONG_DOUBLE_INT), 20u);
#endif
}

// Values outside the enums (still inside their representable range, so the
// casts are well defined in C++).
TEST(ReduceTest, InvalidEnumsRefused) {
  const auto bad_op0 = static_cast<bcs_op_t>(0), bad_op15 = static_cast<bcs_op_t>(15);
  const auto bad_t0 = static_cast<bcs_dtype_t>(0);
  const auto bad_t23 = static_cast<bcs_dtype_t>(BCS_DT_LAST_ + 1);
  const auto bad_t31 = static_cast<bcs_dtype_t>(31);
  for (auto t : {bad_t0, bad_t23, bad_t31}) {
    EXPECT_EQ(bcs_dtype_size(t), 0u);
    for (bcs_op_t op : kOps) EXPECT_EQ(bcs_op_supported(op, t), 0);
  }
  for (auto op : {bad_op0, bad_op15})
    for (const auto& d : kTypes) EXPECT_EQ(bcs_op_supported(op, d.t), 0) << d.name;

  int32_t x[4] = {1, 2, 3, 4};
  const int32_t y[4] = {10, 20, 30, 40};
  EXPECT_EQ(bcs_reduce_local(bad_op0, BCS_DT_INT32, x, y, 4), BCS_ERR_ARG);
  EXPECT_EQ(bcs_reduce_local(bad_op15, BCS_DT_INT32, x, y, 4), BCS_ERR_ARG);
  EXPECT_EQ(bcs_reduce_local(BCS_OP_SUM, bad_t0, x, y, 4), BCS_ERR_ARG);
  EXPECT_EQ(bcs_reduce_local(BCS_OP_SUM, bad_t23, x, y, 4), BCS_ERR_ARG);
  EXPECT_EQ(bcs_reduce_local(BCS_OP_REPLACE, bad_t23, x, y, 4), BCS_ERR_ARG);
  EXPECT_EQ(bcs_reduce_local(BCS_OP_NO_OP, bad_t31, x, y, 0), BCS_ERR_ARG);
  EXPECT_EQ(x[0], 1);
  EXPECT_EQ(x[3], 4);
}

TEST(ReduceTest, NullPointers) {
  int32_t x[2] = {1, 2};
  const int32_t y[2] = {3, 4};
  for (bcs_op_t op : {BCS_OP_SUM, BCS_OP_REPLACE, BCS_OP_NO_OP}) {
    SCOPED_TRACE(kOpNames[op - 1]);
    EXPECT_EQ(bcs_reduce_local(op, BCS_DT_INT32, nullptr, y, 2), BCS_ERR_ARG);
    EXPECT_EQ(bcs_reduce_local(op, BCS_DT_INT32, x, nullptr, 2), BCS_ERR_ARG);
    EXPECT_EQ(bcs_reduce_local(op, BCS_DT_INT32, nullptr, nullptr, 1), BCS_ERR_ARG);
    // Nothing to do: NULL is fine.
    EXPECT_EQ(bcs_reduce_local(op, BCS_DT_INT32, nullptr, nullptr, 0), BCS_OK);
  }
  // An unsupported pair stays refused even with nothing to do.
  EXPECT_EQ(bcs_reduce_local(BCS_OP_MINLOC, BCS_DT_INT32, nullptr, nullptr, 0), BCS_ERR_ARG);
  EXPECT_EQ(x[0], 1);
  EXPECT_EQ(x[1], 2);
  // count * size overflowing size_t.
  EXPECT_EQ(bcs_reduce_local(BCS_OP_SUM, BCS_DT_INT64, x, y, SIZE_MAX / 4), BCS_ERR_ARG);
}

TEST(ReduceTest, IntegerOverflowWraps) {
  {
    int32_t a[3] = {INT32_MAX, INT32_MIN, -1};
    const int32_t b[3] = {1, -1, INT32_MIN};
    ASSERT_EQ(bcs_reduce_local(BCS_OP_SUM, BCS_DT_INT32, a, b, 3), BCS_OK);
    EXPECT_EQ(a[0], INT32_MIN);
    EXPECT_EQ(a[1], INT32_MAX);
    EXPECT_EQ(a[2], INT32_MAX);
  }
  {
    int8_t a[2] = {16, -128};
    const int8_t b[2] = {16, -1};
    ASSERT_EQ(bcs_reduce_local(BCS_OP_PROD, BCS_DT_INT8, a, b, 2), BCS_OK);
    EXPECT_EQ(a[0], 0);     // 256 mod 2^8
    EXPECT_EQ(a[1], -128);  // 128 wraps to -128
  }
  {
    int16_t a[1] = {INT16_MIN};
    const int16_t b[1] = {-1};
    ASSERT_EQ(bcs_reduce_local(BCS_OP_PROD, BCS_DT_INT16, a, b, 1), BCS_OK);
    EXPECT_EQ(a[0], INT16_MIN);
  }
  {
    // uint16 * uint16 does not go through a (signed, overflowing) int.
    std::vector<uint16_t> a(37, 0xffff), b(37, 0xffff);
    ASSERT_EQ(bcs_reduce_local(BCS_OP_PROD, BCS_DT_UINT16, a.data(), b.data(), a.size()), BCS_OK);
    for (uint16_t v : a) EXPECT_EQ(v, 1);  // (2^16 - 1)^2 mod 2^16
  }
  {
    std::vector<int64_t> a(9, INT64_MIN), b(9, -1);
    ASSERT_EQ(bcs_reduce_local(BCS_OP_SUM, BCS_DT_INT64, a.data(), b.data(), a.size()), BCS_OK);
    for (int64_t v : a) EXPECT_EQ(v, INT64_MAX);
  }
  {
    std::vector<uint8_t> a(33, 255), b(33, 1);
    ASSERT_EQ(bcs_reduce_local(BCS_OP_SUM, BCS_DT_UINT8, a.data(), b.data(), a.size()), BCS_OK);
    for (uint8_t v : a) EXPECT_EQ(v, 0);
  }
  {
    std::vector<uint64_t> a(5, UINT64_MAX), b(5, UINT64_MAX);
    ASSERT_EQ(bcs_reduce_local(BCS_OP_PROD, BCS_DT_UINT64, a.data(), b.data(), a.size()), BCS_OK);
    for (uint64_t v : a) EXPECT_EQ(v, 1u);
  }
}

TEST(ReduceTest, MinlocMaxlocTiesTakeTheLowerIndex) {
  // Element k: {inout, in} -> want.
  struct Case {
    Loc<double> a, b;
    Loc<double> min, max;
  };
  const Case cases[] = {
      {{5, 3}, {5, 1}, {5, 1}, {5, 1}},    // tie, smaller index on the right
      {{5, 1}, {5, 3}, {5, 1}, {5, 1}},    // tie, smaller index on the left
      {{5, 7}, {5, 7}, {5, 7}, {5, 7}},    // identical
      {{4, 9}, {5, 0}, {4, 9}, {5, 0}},    // values decide, whatever the index
      {{5, 0}, {4, 9}, {4, 9}, {5, 0}},
      {{-1, -5}, {-1, 2}, {-1, -5}, {-1, -5}},  // negative indices compare as ints
  };
  for (const auto& c : cases) {
    Loc<double> lo = c.a, hi = c.a;
    ASSERT_EQ(bcs_reduce_local(BCS_OP_MINLOC, BCS_DT_DOUBLE_INT, &lo, &c.b, 1), BCS_OK);
    ASSERT_EQ(bcs_reduce_local(BCS_OP_MAXLOC, BCS_DT_DOUBLE_INT, &hi, &c.b, 1), BCS_OK);
    EXPECT_EQ(lo.value, c.min.value);
    EXPECT_EQ(lo.index, c.min.index);
    EXPECT_EQ(hi.value, c.max.value);
    EXPECT_EQ(hi.index, c.max.index);
  }
  // The same on 2INT and LONG_DOUBLE_INT, several elements at once.
  Loc<int> ia[3] = {{7, 4}, {7, 2}, {1, 1}};
  const Loc<int> ib[3] = {{7, 2}, {7, 4}, {1, 0}};
  ASSERT_EQ(bcs_reduce_local(BCS_OP_MAXLOC, BCS_DT_2INT, ia, ib, 3), BCS_OK);
  EXPECT_EQ(ia[0].index, 2);
  EXPECT_EQ(ia[1].index, 2);
  EXPECT_EQ(ia[2].index, 0);
  Loc<long double> la[2] = {{2.5L, 8}, {2.5L, 1}};
  const Loc<long double> lb[2] = {{2.5L, 3}, {2.5L, 6}};
  ASSERT_EQ(bcs_reduce_local(BCS_OP_MINLOC, BCS_DT_LONG_DOUBLE_INT, la, lb, 2), BCS_OK);
  EXPECT_EQ(la[0].index, 3);
  EXPECT_EQ(la[1].index, 1);
  EXPECT_EQ(la[0].value, 2.5L);
}

// Documented in reduce.cc: MIN/MAX and MINLOC/MAXLOC keep the left operand
// unless the right one compares smaller/larger, so a NaN in `in` is ignored
// and a NaN in `inout` stays; MIN(+0, -0) keeps the left zero.
TEST(ReduceTest, RealMinMaxNaNAndZeros) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> a = {nan, 1.0, 0.0, -0.0}, b = {1.0, nan, -0.0, 0.0};
  // Several copies so the vector loop, not only the scalar tail, sees them.
  for (int k = 0; k < 3; ++k) {
    a.insert(a.end(), a.begin(), a.begin() + 4);
    b.insert(b.end(), b.begin(), b.begin() + 4);
  }
  for (bcs_op_t op : {BCS_OP_MIN, BCS_OP_MAX}) {
    std::vector<double> r = a;
    ASSERT_EQ(bcs_reduce_local(op, BCS_DT_DOUBLE, r.data(), b.data(), r.size()), BCS_OK);
    for (size_t k = 0; k < r.size(); k += 4) {
      EXPECT_TRUE(std::isnan(r[k]));
      EXPECT_EQ(r[k + 1], 1.0);
      EXPECT_EQ(r[k + 2], 0.0);
      EXPECT_FALSE(std::signbit(r[k + 2]));
      EXPECT_EQ(r[k + 3], 0.0);
      EXPECT_TRUE(std::signbit(r[k + 3]));
    }
  }
  float fa[9], fb[9];
  for (int k = 0; k < 9; ++k) {
    fa[k] = k % 2 ? std::numeric_limits<float>::quiet_NaN() : 2.0f;
    fb[k] = k % 2 ? 3.0f : std::numeric_limits<float>::quiet_NaN();
  }
  ASSERT_EQ(bcs_reduce_local(BCS_OP_MAX, BCS_DT_FLOAT, fa, fb, 9), BCS_OK);
  for (int k = 0; k < 9; ++k) {
    if (k % 2) EXPECT_TRUE(std::isnan(fa[k])) << k;
    else EXPECT_EQ(fa[k], 2.0f) << k;
  }
  // MINLOC/MAXLOC: the same rule, on the vector path (several elements) and
  // the scalar tail (the odd one).
  for (bcs_op_t op : {BCS_OP_MINLOC, BCS_OP_MAXLOC}) {
    Loc<double> la[7];
    Loc<double> lb[7];
    Loc<float> fla[7];
    Loc<float> flb[7];
    for (int k = 0; k < 7; ++k) {
      la[k] = {k % 2 ? nan : 1.0, 5};
      lb[k] = {k % 2 ? 1.0 : nan, 2};
      fla[k] = {k % 2 ? std::numeric_limits<float>::quiet_NaN() : 1.0f, 5};
      flb[k] = {k % 2 ? 1.0f : std::numeric_limits<float>::quiet_NaN(), 2};
    }
    ASSERT_EQ(bcs_reduce_local(op, BCS_DT_DOUBLE_INT, la, lb, 7), BCS_OK);
    ASSERT_EQ(bcs_reduce_local(op, BCS_DT_FLOAT_INT, fla, flb, 7), BCS_OK);
    for (int k = 0; k < 7; ++k) {
      SCOPED_TRACE(k);
      EXPECT_EQ(std::isnan(la[k].value), k % 2 == 1);  // inout's value stays
      EXPECT_EQ(la[k].index, 5);                       // with its index
      EXPECT_EQ(std::isnan(fla[k].value), k % 2 == 1);
      EXPECT_EQ(fla[k].index, 5);
    }
  }
}

TEST(ReduceTest, LogicalOpsGiveZeroOrOne) {
  std::vector<int32_t> a = {0, 0, 5, -7, 0, 1, 2, INT32_MIN, 9};
  std::vector<int32_t> b = {0, 3, 0, 9, -1, 1, 0, INT32_MIN, 9};
  std::vector<int32_t> land = a, lor = a, lxor = a;
  ASSERT_EQ(bcs_reduce_local(BCS_OP_LAND, BCS_DT_INT32, land.data(), b.data(), a.size()), BCS_OK);
  ASSERT_EQ(bcs_reduce_local(BCS_OP_LOR, BCS_DT_INT32, lor.data(), b.data(), a.size()), BCS_OK);
  ASSERT_EQ(bcs_reduce_local(BCS_OP_LXOR, BCS_DT_INT32, lxor.data(), b.data(), a.size()), BCS_OK);
  EXPECT_EQ(land, (std::vector<int32_t>{0, 0, 0, 1, 0, 1, 0, 1, 1}));
  EXPECT_EQ(lor, (std::vector<int32_t>{0, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(lxor, (std::vector<int32_t>{0, 1, 1, 0, 1, 0, 1, 0, 0}));
  // BOOL: any non-zero byte counts as true, results are 0/1.
  unsigned char ba[4] = {2, 0, 0xff, 1}, bb[4] = {1, 0, 0, 0x80};
  ASSERT_EQ(bcs_reduce_local(BCS_OP_LAND, BCS_DT_BOOL, ba, bb, 4), BCS_OK);
  EXPECT_EQ(ba[0], 1);
  EXPECT_EQ(ba[1], 0);
  EXPECT_EQ(ba[2], 0);
  EXPECT_EQ(ba[3], 1);
}

TEST(ReduceTest, ComplexProductIsTheTextbookFormula) {
  // (1 + 2i)(3 + 4i) = -5 + 10i; (0.5 - i)(2 + 0i) = 1 - 2i.
  double a[4] = {1, 2, 0.5, -1};
  const double b[4] = {3, 4, 2, 0};
  ASSERT_EQ(bcs_reduce_local(BCS_OP_PROD, BCS_DT_C_DOUBLE_COMPLEX, a, b, 2), BCS_OK);
  EXPECT_EQ(a[0], -5);
  EXPECT_EQ(a[1], 10);
  EXPECT_EQ(a[2], 1);
  EXPECT_EQ(a[3], -2);
  float f[2] = {1.5f, -2.0f};
  const float g[2] = {-1.0f, 0.25f};
  ASSERT_EQ(bcs_reduce_local(BCS_OP_SUM, BCS_DT_C_FLOAT_COMPLEX, f, g, 1), BCS_OK);
  EXPECT_EQ(f[0], 0.5f);
  EXPECT_EQ(f[1], -1.75f);
}

TEST(ReduceTest, ReplaceAndNoOp) {
  Loc<long double> a[2], b[2];
  std::memset(a, 0x11, sizeof a);
  std::memset(b, 0x22, sizeof b);
  b[0] = {1.0L, 5};
  b[1] = {2.0L, 6};
  Loc<long double> r[2];
  std::memcpy(r, a, sizeof a);
  ASSERT_EQ(bcs_reduce_local(BCS_OP_NO_OP, BCS_DT_LONG_DOUBLE_INT, r, b, 2), BCS_OK);
  EXPECT_EQ(std::memcmp(r, a, sizeof a), 0);
  ASSERT_EQ(bcs_reduce_local(BCS_OP_REPLACE, BCS_DT_LONG_DOUBLE_INT, r, b, 2), BCS_OK);
  EXPECT_EQ(std::memcmp(r, b, sizeof b), 0);  // whole elements, padding included
}

TEST(ReduceTest, AliasedBuffers) {
  // inout == in: each element combined with itself.
  std::vector<int32_t> x(100);
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<int32_t>(k) - 50;
  std::vector<int32_t> want = x;
  for (auto& v : want) v *= 2;
  ASSERT_EQ(bcs_reduce_local(BCS_OP_SUM, BCS_DT_INT32, x.data(), x.data(), x.size()), BCS_OK);
  EXPECT_EQ(x, want);
  // Partial overlap: as if `in` had been copied first.
  std::vector<double> d(101);
  for (size_t k = 0; k < d.size(); ++k) d[k] = static_cast<double>(k);
  std::vector<double> expect(100);
  for (size_t k = 0; k < 100; ++k) expect[k] = d[k + 1] + d[k];
  ASSERT_EQ(bcs_reduce_local(BCS_OP_SUM, BCS_DT_DOUBLE, d.data() + 1, d.data(), 100), BCS_OK);
  EXPECT_EQ(std::vector<double>(d.begin() + 1, d.end()), expect);
}

TEST(ReduceTest, LargeMisalignedBuffers) {
  // 1 MiB of doubles, inout and in both off by one byte.
  const size_t n = (1u << 20) / sizeof(double);
  Rng rng(42);
  std::uniform_real_distribution<double> u(-1e6, 1e6);
  std::vector<double> a(n), b(n), want(n);
  for (size_t k = 0; k < n; ++k) {
    a[k] = u(rng);
    b[k] = u(rng);
    want[k] = a[k] + b[k];
  }
  Bytes ma(n * sizeof(double) + 1), mb(n * sizeof(double) + 1);
  std::memcpy(ma.data() + 1, a.data(), n * sizeof(double));
  std::memcpy(mb.data() + 1, b.data(), n * sizeof(double));
  ASSERT_EQ(bcs_reduce_local(BCS_OP_SUM, BCS_DT_DOUBLE, ma.data() + 1, mb.data() + 1, n), BCS_OK);
  EXPECT_EQ(std::memcmp(ma.data() + 1, want.data(), n * sizeof(double)), 0);
  EXPECT_EQ(std::memcmp(mb.data() + 1, b.data(), n * sizeof(double)), 0) << "in was written";
}

}  // namespace
