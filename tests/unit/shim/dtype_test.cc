// Derived datatypes in singleton mode: sizes, extents and true extents of
// each constructor, envelopes and contents, packing round trips,
// MPI_Get_elements on partial data, and the error classes of bad arguments.
#include <mpi.h>

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "singleton.h"

namespace {

class Dtype : public SingletonMpi {};

struct Extent {
  MPI_Aint lb, ext, tlb, text;
  int size;
};

Extent extent_of(MPI_Datatype t) {
  Extent e{};
  EXPECT_EQ(MPI_Type_get_extent(t, &e.lb, &e.ext), MPI_SUCCESS);
  EXPECT_EQ(MPI_Type_get_true_extent(t, &e.tlb, &e.text), MPI_SUCCESS);
  EXPECT_EQ(MPI_Type_size(t, &e.size), MPI_SUCCESS);
  return e;
}

TEST_F(Dtype, VectorSizeExtentAndTrueExtent) {
  MPI_Datatype v;
  ASSERT_EQ(MPI_Type_vector(3, 2, 5, MPI_INT, &v), MPI_SUCCESS);
  const Extent e = extent_of(v);
  EXPECT_EQ(e.size, 3 * 2 * 4);
  EXPECT_EQ(e.lb, 0);
  EXPECT_EQ(e.ext, (2 * 5 + 2) * 4);  // last block ends at 12 ints
  EXPECT_EQ(e.tlb, 0);
  EXPECT_EQ(e.text, 12 * 4);
  MPI_Type_free(&v);
}

TEST_F(Dtype, ResizedAndNegativeDisplacements) {
  MPI_Datatype h, r;
  const int bl[2] = {1, 1};
  const MPI_Aint d[2] = {-8, 16};
  ASSERT_EQ(MPI_Type_create_hindexed(2, bl, d, MPI_DOUBLE, &h), MPI_SUCCESS);
  Extent e = extent_of(h);
  EXPECT_EQ(e.lb, -8);
  EXPECT_EQ(e.ext, 32);
  ASSERT_EQ(MPI_Type_create_resized(h, -16, 64, &r), MPI_SUCCESS);
  e = extent_of(r);
  EXPECT_EQ(e.lb, -16);
  EXPECT_EQ(e.ext, 64);
  EXPECT_EQ(e.tlb, -8);  // the data did not move
  EXPECT_EQ(e.text, 32);
  MPI_Type_free(&h);
  MPI_Type_free(&r);
}

TEST_F(Dtype, StructExtentIsPaddedLikeTheCStruct) {
  struct S {
    double d;
    char c;
  };
  const int bl[2] = {1, 1};
  const MPI_Aint d[2] = {0, 8};
  const MPI_Datatype t[2] = {MPI_DOUBLE, MPI_CHAR};
  MPI_Datatype s;
  ASSERT_EQ(MPI_Type_create_struct(2, bl, d, t, &s), MPI_SUCCESS);
  const Extent e = extent_of(s);
  EXPECT_EQ(e.size, 9);
  EXPECT_EQ(e.ext, static_cast<MPI_Aint>(sizeof(S)));
  EXPECT_EQ(e.text, 9);
  MPI_Type_free(&s);
}

TEST_F(Dtype, PackUnpackRoundTripOfAnIndexedType) {
  const int bl[3] = {2, 1, 3};
  const int disp[3] = {5, 0, 9};
  MPI_Datatype t;
  ASSERT_EQ(MPI_Type_indexed(3, bl, disp, MPI_INT, &t), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&t), MPI_SUCCESS);
  std::vector<int> src(24), dst(24, -1);
  for (int i = 0; i < 24; ++i) src[i] = 100 + i;
  char buf[256];
  int pos = 0;
  ASSERT_EQ(MPI_Pack(src.data(), 2, t, buf, sizeof buf, &pos, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(pos, 2 * 6 * 4);
  // Packed in type-map order: 5,6,0,9,10,11 then the same +12 (extent 12 ints).
  const int want[12] = {105, 106, 100, 109, 110, 111, 117, 118, 112, 121, 122, 123};
  EXPECT_EQ(std::memcmp(buf, want, sizeof want), 0);
  int upos = 0;
  ASSERT_EQ(MPI_Unpack(buf, pos, &upos, dst.data(), 2, t, MPI_COMM_WORLD), MPI_SUCCESS);
  for (int i = 0; i < 24; ++i) {
    const int k = i % 12;
    const bool in_map = k == 0 || k == 5 || k == 6 || (k >= 9 && k <= 11);
    EXPECT_EQ(dst[i], in_map ? src[i] : -1) << i;
  }
  int small = 8;
  pos = 0;
  EXPECT_EQ(MPI_Pack(src.data(), 1, t, buf, small, &pos, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
  MPI_Type_free(&t);
}

TEST_F(Dtype, EnvelopeAndContents) {
  MPI_Datatype v, got[1];
  ASSERT_EQ(MPI_Type_vector(4, 3, 7, MPI_FLOAT, &v), MPI_SUCCESS);
  int ni, na, nd, comb;
  ASSERT_EQ(MPI_Type_get_envelope(v, &ni, &na, &nd, &comb), MPI_SUCCESS);
  EXPECT_EQ(comb, MPI_COMBINER_VECTOR);
  EXPECT_EQ(ni, 3);
  EXPECT_EQ(na, 0);
  EXPECT_EQ(nd, 1);
  int ints[3];
  ASSERT_EQ(MPI_Type_get_contents(v, 3, 0, 1, ints, nullptr, got), MPI_SUCCESS);
  EXPECT_EQ(ints[0], 4);
  EXPECT_EQ(ints[1], 3);
  EXPECT_EQ(ints[2], 7);
  EXPECT_EQ(got[0], MPI_FLOAT);
  ASSERT_EQ(MPI_Type_get_envelope(MPI_INT, &ni, &na, &nd, &comb), MPI_SUCCESS);
  EXPECT_EQ(comb, MPI_COMBINER_NAMED);
  EXPECT_EQ(MPI_Type_get_contents(MPI_INT, 0, 0, 0, nullptr, nullptr, nullptr), MPI_ERR_ARG);
  // A derived handle from get_contents is the caller's to free, and the
  // type it came from stays usable.
  MPI_Datatype outer, inner[1];
  ASSERT_EQ(MPI_Type_contiguous(2, v, &outer), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_get_contents(outer, 1, 0, 1, ints, nullptr, inner), MPI_SUCCESS);
  EXPECT_EQ(inner[0], v);
  ASSERT_EQ(MPI_Type_free(&inner[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_free(&v), MPI_SUCCESS);
  int size = 0;
  ASSERT_EQ(MPI_Type_size(outer, &size), MPI_SUCCESS);
  EXPECT_EQ(size, 2 * 4 * 3 * 4);
  MPI_Type_free(&outer);
}

TEST_F(Dtype, GetElementsCountsBasicElementsOfPartialData) {
  const int bl[2] = {1, 2};
  const MPI_Aint d[2] = {0, 8};
  const MPI_Datatype t[2] = {MPI_INT, MPI_DOUBLE};
  MPI_Datatype s;
  ASSERT_EQ(MPI_Type_create_struct(2, bl, d, t, &s), MPI_SUCCESS);
  MPI_Status st{};
  ASSERT_EQ(MPI_Status_set_elements(&st, s, 4), MPI_SUCCESS);  // one whole (3) + one int
  int n = -1;
  ASSERT_EQ(MPI_Get_elements(&st, s, &n), MPI_SUCCESS);
  EXPECT_EQ(n, 4);
  ASSERT_EQ(MPI_Get_count(&st, s, &n), MPI_SUCCESS);
  EXPECT_EQ(n, MPI_UNDEFINED);
  st.bcs_count = 20 + 4 + 3;  // ends inside a double
  ASSERT_EQ(MPI_Get_elements(&st, s, &n), MPI_SUCCESS);
  EXPECT_EQ(n, MPI_UNDEFINED);
  MPI_Type_free(&s);
}

TEST_F(Dtype, ErrorClasses) {
  MPI_Datatype t;
  EXPECT_EQ(MPI_Type_contiguous(-1, MPI_INT, &t), MPI_ERR_COUNT);
  EXPECT_EQ(MPI_Type_contiguous(2, MPI_DATATYPE_NULL, &t), MPI_ERR_TYPE);
  EXPECT_EQ(MPI_Type_vector(2, -1, 1, MPI_INT, &t), MPI_ERR_ARG);
  MPI_Datatype pre = MPI_INT;
  EXPECT_EQ(MPI_Type_free(&pre), MPI_ERR_TYPE);
  // An uncommitted type cannot be used for communication (or packing).
  ASSERT_EQ(MPI_Type_contiguous(2, MPI_INT, &t), MPI_SUCCESS);
  int x[2] = {0, 0}, pos = 0;
  char buf[16];
  EXPECT_EQ(MPI_Pack(x, 1, t, buf, sizeof buf, &pos, MPI_COMM_WORLD), MPI_ERR_TYPE);
  EXPECT_EQ(MPI_Send(x, 1, t, 0, 0, MPI_COMM_SELF), MPI_ERR_TYPE);
  MPI_Type_free(&t);
  const int sizes[2] = {4, 4}, sub[2] = {5, 1}, start[2] = {0, 0};
  EXPECT_EQ(MPI_Type_create_subarray(2, sizes, sub, start, MPI_ORDER_C, MPI_INT, &t), MPI_ERR_ARG);
}

// Types with more blocks than bcs keeps a list of (256 Mi) are described
// exactly but refused for moving; a dense type of any count is one block.
TEST_F(Dtype, AVectorOfABillionBlocksIsDescribedButNotMoved) {
  MPI_Datatype four, v, big;
  ASSERT_EQ(MPI_Type_contiguous(4, MPI_INT, &four), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_vector(INT32_MAX / 2, 1, 3, four, &v), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&v), MPI_SUCCESS);
  MPI_Count size = 0, lb = -1, ext = 0, tlb = -1, text = 0;
  ASSERT_EQ(MPI_Type_size_x(v, &size), MPI_SUCCESS);
  EXPECT_EQ(size, MPI_Count{INT32_MAX / 2} * 16);
  ASSERT_EQ(MPI_Type_get_extent_x(v, &lb, &ext), MPI_SUCCESS);
  EXPECT_EQ(lb, 0);
  EXPECT_EQ(ext, MPI_Count{48} * (INT32_MAX / 2 - 1) + 16);
  ASSERT_EQ(MPI_Type_get_true_extent_x(v, &tlb, &text), MPI_SUCCESS);
  EXPECT_EQ(text, ext);
  MPI_Status st;
  MPI_Count elems = 0;
  ASSERT_EQ(MPI_Status_set_elements_x(&st, v, MPI_Count{INT32_MAX / 2} * 4), MPI_SUCCESS);
  ASSERT_EQ(MPI_Get_elements_x(&st, v, &elems), MPI_SUCCESS);
  EXPECT_EQ(elems, MPI_Count{INT32_MAX / 2} * 4);
  // A resized copy keeps the verdict; moving either is a clear MPI_ERR_TYPE.
  ASSERT_EQ(MPI_Type_create_resized(v, 0, 64, &big), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&big), MPI_SUCCESS);
  char buf[64];
  int pos = 0;
  EXPECT_EQ(MPI_Pack(buf, 1, v, buf, sizeof buf, &pos, MPI_COMM_WORLD), MPI_ERR_TYPE);
  EXPECT_EQ(MPI_Send(buf, 1, big, 0, 0, MPI_COMM_SELF), MPI_ERR_TYPE);
  MPI_Type_free(&big);
  MPI_Type_free(&v);
  // INT_MAX contiguous chars: one block, usable (an empty send is fine).
  MPI_Datatype line;
  ASSERT_EQ(MPI_Type_contiguous(INT32_MAX, MPI_CHAR, &line), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&line), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_vector(3, 1, 2, line, &v), MPI_SUCCESS);  // 3 blocks of 2 GiB
  ASSERT_EQ(MPI_Type_commit(&v), MPI_SUCCESS);
  ASSERT_EQ(MPI_Pack_size(1, line, MPI_COMM_WORLD, &pos), MPI_SUCCESS);
  MPI_Type_free(&v);
  MPI_Type_free(&line);
  MPI_Type_free(&four);
}

TEST_F(Dtype, DarrayBlockAndCyclicDistributions) {
  // 10 ints in blocks over 3 processes: rank 1 owns 4..7.
  const int g[1] = {10}, block[1] = {MPI_DISTRIBUTE_BLOCK}, dflt[1] = {MPI_DISTRIBUTE_DFLT_DARG},
            p[1] = {3};
  MPI_Datatype t;
  ASSERT_EQ(MPI_Type_create_darray(3, 1, 1, g, block, dflt, p, MPI_ORDER_C, MPI_INT, &t),
            MPI_SUCCESS);
  Extent e = extent_of(t);
  EXPECT_EQ(e.size, 4 * 4);
  EXPECT_EQ(e.lb, 0);
  EXPECT_EQ(e.ext, 10 * 4);  // the whole global array
  EXPECT_EQ(e.tlb, 4 * 4);
  EXPECT_EQ(e.text, 4 * 4);
  MPI_Type_free(&t);
  // A 4x6 array, rows cyclic over 2 (rank 1 of a 2x1 grid: rows 1 and 3),
  // columns cyclic in pairs over 1: every column. Packed in C order.
  const int g2[2] = {4, 6}, cyc[2] = {MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_CYCLIC},
            darg[2] = {1, 2}, p2[2] = {2, 1};
  ASSERT_EQ(MPI_Type_create_darray(2, 1, 2, g2, cyc, darg, p2, MPI_ORDER_C, MPI_INT, &t),
            MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&t), MPI_SUCCESS);
  int a[24], out[12], pos = 0;
  for (int i = 0; i < 24; ++i) a[i] = i;
  ASSERT_EQ(MPI_Pack(a, 1, t, out, sizeof out, &pos, MPI_COMM_WORLD), MPI_SUCCESS);
  ASSERT_EQ(pos, static_cast<int>(sizeof out));
  for (int j = 0; j < 6; ++j) {
    EXPECT_EQ(out[j], 6 + j);       // row 1
    EXPECT_EQ(out[6 + j], 18 + j);  // row 3
  }
  MPI_Type_free(&t);
  const int bad_p[1] = {2};
  EXPECT_EQ(MPI_Type_create_darray(3, 0, 1, g, block, dflt, bad_p, MPI_ORDER_C, MPI_INT, &t),
            MPI_ERR_ARG);  // a grid of 2 for 3 processes
}

TEST_F(Dtype, ReductionOnAContiguousDerivedType) {
  MPI_Datatype pair;
  ASSERT_EQ(MPI_Type_contiguous(2, MPI_DOUBLE, &pair), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_commit(&pair), MPI_SUCCESS);
  double in[4] = {1, 2, 3, 4}, io[4] = {10, 20, 30, 40};
  ASSERT_EQ(MPI_Reduce_local(in, io, 2, pair, MPI_SUM), MPI_SUCCESS);
  EXPECT_EQ(io[0], 11);
  EXPECT_EQ(io[3], 44);
  double out[4] = {};
  ASSERT_EQ(MPI_Allreduce(in, out, 2, pair, MPI_MAX, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(out[2], 3);
  MPI_Type_free(&pair);
}

}  // namespace

namespace {

class F90 : public SingletonMpi {};

TEST_F(F90, KindsHoldThePrecisionAskedAndSayHowTheyWereMade) {
  MPI_Datatype r4, r8, again, c16, i2, i8;
  ASSERT_EQ(MPI_Type_create_f90_real(3, 10, &r4), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_create_f90_real(7, MPI_UNDEFINED, &r8), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_create_f90_real(3, 10, &again), MPI_SUCCESS);
  EXPECT_EQ(again, r4);  // the same (p, r) is the same predefined type
  ASSERT_EQ(MPI_Type_create_f90_complex(MPI_UNDEFINED, 30, &c16), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_create_f90_integer(3, &i2), MPI_SUCCESS);
  ASSERT_EQ(MPI_Type_create_f90_integer(10, &i8), MPI_SUCCESS);
  int s = 0;
  MPI_Type_size(r4, &s);
  EXPECT_EQ(s, 4);
  MPI_Type_size(r8, &s);
  EXPECT_EQ(s, 8);
  MPI_Type_size(c16, &s);
  EXPECT_EQ(s, 8);  // range 30 fits a 4-byte real: COMPLEX8
  MPI_Type_size(i2, &s);
  EXPECT_EQ(s, 2);
  MPI_Type_size(i8, &s);
  EXPECT_EQ(s, 8);

  int ni, na, nt, comb, ints[2] = {0, 0};
  ASSERT_EQ(MPI_Type_get_envelope(r8, &ni, &na, &nt, &comb), MPI_SUCCESS);
  EXPECT_EQ(comb, MPI_COMBINER_F90_REAL);
  EXPECT_EQ(ni, 2);
  EXPECT_EQ(nt, 0);
  ASSERT_EQ(MPI_Type_get_contents(r8, 2, 0, 0, ints, nullptr, nullptr), MPI_SUCCESS);
  EXPECT_EQ(ints[0], 7);
  EXPECT_EQ(ints[1], MPI_UNDEFINED);
  ASSERT_EQ(MPI_Type_get_envelope(i8, &ni, &na, &nt, &comb), MPI_SUCCESS);
  EXPECT_EQ(comb, MPI_COMBINER_F90_INTEGER);
  EXPECT_EQ(ni, 1);

  // Usable at once (committed, reducible: a singleton has no messages to
  // send, the MPICH test createf90types sends them under bcs run); never freed.
  double a = 1.5, b = 2.25;
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, r8, MPI_SUM), MPI_SUCCESS);
  EXPECT_EQ(b, 3.75);
  char packed[16];
  int pos = 0;
  EXPECT_EQ(MPI_Pack(&a, 1, r8, packed, sizeof packed, &pos, MPI_COMM_SELF), MPI_SUCCESS);
  EXPECT_EQ(pos, 8);
  MPI_Datatype keep = r4;
  EXPECT_EQ(MPI_Type_free(&keep), MPI_ERR_TYPE);
}

TEST_F(F90, PrecisionNoTypeHoldsIsAnArgumentError) {
  MPI_Datatype t = MPI_DATATYPE_NULL;
  EXPECT_EQ(MPI_Type_create_f90_real(40, MPI_UNDEFINED, &t), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Type_create_f90_real(MPI_UNDEFINED, 400, &t), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Type_create_f90_complex(16, 10, &t), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Type_create_f90_integer(19, &t), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Type_create_f90_integer(-1, &t), MPI_ERR_ARG);
  EXPECT_EQ(t, MPI_DATATYPE_NULL);
}

}  // namespace
