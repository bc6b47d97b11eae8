// libmpi collectives, MPI_Op and MPI_Reduce_local in singleton mode: every
// communicator has one member (MPI_COMM_SELF always; MPI_COMM_WORLD because
// the program is not started by bcs), so each collective must give the
// one-member result without a runtime, and every invalid argument must be
// reported with the right class before anything is posted. Multi-rank
// behaviour is covered by the integration tests.
#include <mpi.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "singleton.h"

namespace {

class Coll : public SingletonMpi {
 protected:
  static constexpr MPI_Comm kComms[2] = {MPI_COMM_SELF, MPI_COMM_WORLD};
};

// A status of a completed collective request: no source, no tag, no data
// (MPI_ERROR is not written by a successful completion, MPI-3.1 3.7.5).
void expect_coll_status(const MPI_Status& st) {
  EXPECT_EQ(st.MPI_SOURCE, MPI_ANY_SOURCE);
  EXPECT_EQ(st.MPI_TAG, MPI_ANY_TAG);
  int n = -1;
  EXPECT_EQ(MPI_Get_count(&st, MPI_INT, &n), MPI_SUCCESS);
  EXPECT_EQ(n, 0);
}

// Waits for a request of a one-member collective: it is complete at once.
void complete(MPI_Request* r) {
  ASSERT_NE(*r, MPI_REQUEST_NULL);
  int flag = 0;
  MPI_Status st{};
  st.MPI_SOURCE = 77;
  ASSERT_EQ(MPI_Test(r, &flag, &st), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(*r, MPI_REQUEST_NULL);
  expect_coll_status(st);
}

using V = std::vector<int>;

TEST_F(Coll, BarrierAndIbarrier) {
  for (MPI_Comm c : kComms) {
    EXPECT_EQ(MPI_Barrier(c), MPI_SUCCESS);
    MPI_Request r = MPI_REQUEST_NULL;
    ASSERT_EQ(MPI_Ibarrier(c, &r), MPI_SUCCESS);
    complete(&r);
  }
}

TEST_F(Coll, Bcast) {
  for (MPI_Comm c : kComms) {
    V buf{1, 2, 3};
    ASSERT_EQ(MPI_Bcast(buf.data(), 3, MPI_INT, 0, c), MPI_SUCCESS);
    EXPECT_EQ(buf, (V{1, 2, 3}));
    MPI_Request r;
    ASSERT_EQ(MPI_Ibcast(buf.data(), 3, MPI_INT, 0, c, &r), MPI_SUCCESS);
    complete(&r);
    EXPECT_EQ(buf, (V{1, 2, 3}));
    EXPECT_EQ(MPI_Bcast(nullptr, 0, MPI_DATATYPE_NULL, 0, c), MPI_SUCCESS);
  }
}

TEST_F(Coll, GatherAndScatter) {
  for (MPI_Comm c : kComms) {
    V s{1, 2, 3}, r(3, -1);
    ASSERT_EQ(MPI_Gather(s.data(), 3, MPI_INT, r.data(), 3, MPI_INT, 0, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    r.assign(3, -1);
    ASSERT_EQ(MPI_Scatter(s.data(), 3, MPI_INT, r.data(), 3, MPI_INT, 0, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    // Different but matching type signatures: 3 ints = 12 bytes.
    r.assign(3, -1);
    ASSERT_EQ(MPI_Gather(s.data(), 12, MPI_BYTE, r.data(), 3, MPI_INT, 0, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    // MPI_IN_PLACE at the root: its block stays where it is.
    r = {7, 8, 9};
    ASSERT_EQ(MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r.data(), 3, MPI_INT, 0, c),
              MPI_SUCCESS);
    EXPECT_EQ(r, (V{7, 8, 9}));
    ASSERT_EQ(MPI_Scatter(s.data(), 3, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, 0, c),
              MPI_SUCCESS);
    EXPECT_EQ(s, (V{1, 2, 3}));

    MPI_Request q[2];
    r.assign(3, -1);
    V r2(3, -1);
    ASSERT_EQ(MPI_Igather(s.data(), 3, MPI_INT, r.data(), 3, MPI_INT, 0, c, &q[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Iscatter(s.data(), 3, MPI_INT, r2.data(), 3, MPI_INT, 0, c, &q[1]), MPI_SUCCESS);
    MPI_Status st[2];
    ASSERT_EQ(MPI_Waitall(2, q, st), MPI_SUCCESS);
    expect_coll_status(st[0]);
    expect_coll_status(st[1]);
    EXPECT_EQ(r, s);
    EXPECT_EQ(r2, s);
  }
}

TEST_F(Coll, GathervAndScattervUseDisplacements) {
  for (MPI_Comm c : kComms) {
    V s{1, 2, 3}, r(6, -1);
    const int counts[] = {3}, displs[] = {2};
    ASSERT_EQ(MPI_Gatherv(s.data(), 3, MPI_INT, r.data(), counts, displs, MPI_INT, 0, c),
              MPI_SUCCESS);
    EXPECT_EQ(r, (V{-1, -1, 1, 2, 3, -1}));
    V big{0, 0, 4, 5, 6, 0}, out(3, -1);
    ASSERT_EQ(MPI_Scatterv(big.data(), counts, displs, MPI_INT, out.data(), 3, MPI_INT, 0, c),
              MPI_SUCCESS);
    EXPECT_EQ(out, (V{4, 5, 6}));
    // In place at the root.
    ASSERT_EQ(MPI_Gatherv(MPI_IN_PLACE, 3, MPI_INT, r.data(), counts, displs, MPI_INT, 0, c),
              MPI_SUCCESS);
    EXPECT_EQ(r, (V{-1, -1, 1, 2, 3, -1}));
    ASSERT_EQ(MPI_Scatterv(big.data(), counts, displs, MPI_INT, MPI_IN_PLACE, 3, MPI_INT, 0, c),
              MPI_SUCCESS);
    EXPECT_EQ(big, (V{0, 0, 4, 5, 6, 0}));

    MPI_Request q[2];
    r.assign(6, -1);
    out.assign(3, -1);
    ASSERT_EQ(MPI_Igatherv(s.data(), 3, MPI_INT, r.data(), counts, displs, MPI_INT, 0, c, &q[0]),
              MPI_SUCCESS);
    ASSERT_EQ(MPI_Iscatterv(big.data(), counts, displs, MPI_INT, out.data(), 3, MPI_INT, 0, c,
                            &q[1]),
              MPI_SUCCESS);
    int index = -1;
    ASSERT_EQ(MPI_Waitany(2, q, &index, MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(index, 0);
    ASSERT_EQ(MPI_Wait(&q[1], MPI_STATUS_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(r, (V{-1, -1, 1, 2, 3, -1}));
    EXPECT_EQ(out, (V{4, 5, 6}));
  }
}

TEST_F(Coll, AllgatherAndAllgatherv) {
  for (MPI_Comm c : kComms) {
    V s{1, 2}, r(2, -1);
    ASSERT_EQ(MPI_Allgather(s.data(), 2, MPI_INT, r.data(), 2, MPI_INT, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    r = {5, 6};
    ASSERT_EQ(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r.data(), 2, MPI_INT, c),
              MPI_SUCCESS);
    EXPECT_EQ(r, (V{5, 6}));
    const int counts[] = {2}, displs[] = {1};
    V rv(4, -1);
    ASSERT_EQ(MPI_Allgatherv(s.data(), 2, MPI_INT, rv.data(), counts, displs, MPI_INT, c),
              MPI_SUCCESS);
    EXPECT_EQ(rv, (V{-1, 1, 2, -1}));
    rv = {0, 8, 9, 0};
    ASSERT_EQ(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rv.data(), counts, displs,
                             MPI_INT, c),
              MPI_SUCCESS);
    EXPECT_EQ(rv, (V{0, 8, 9, 0}));

    MPI_Request q[2];
    r.assign(2, -1);
    rv.assign(4, -1);
    ASSERT_EQ(MPI_Iallgather(s.data(), 2, MPI_INT, r.data(), 2, MPI_INT, c, &q[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Iallgatherv(s.data(), 2, MPI_INT, rv.data(), counts, displs, MPI_INT, c, &q[1]),
              MPI_SUCCESS);
    int flag = 0;
    ASSERT_EQ(MPI_Testall(2, q, &flag, MPI_STATUSES_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(flag, 1);
    EXPECT_EQ(r, s);
    EXPECT_EQ(rv, (V{-1, 1, 2, -1}));
  }
}

TEST_F(Coll, AlltoallFamily) {
  for (MPI_Comm c : kComms) {
    V s{1, 2}, r(2, -1);
    ASSERT_EQ(MPI_Alltoall(s.data(), 2, MPI_INT, r.data(), 2, MPI_INT, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    r = {3, 4};
    ASSERT_EQ(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r.data(), 2, MPI_INT, c),
              MPI_SUCCESS);
    EXPECT_EQ(r, (V{3, 4}));

    // v: send from element 1, receive at element 2.
    V sv{0, 7, 8}, rv(5, -1);
    const int sc[] = {2}, sd[] = {1}, rc[] = {2}, rd[] = {2};
    ASSERT_EQ(MPI_Alltoallv(sv.data(), sc, sd, MPI_INT, rv.data(), rc, rd, MPI_INT, c),
              MPI_SUCCESS);
    EXPECT_EQ(rv, (V{-1, -1, 7, 8, -1}));
    ASSERT_EQ(MPI_Alltoallv(MPI_IN_PLACE, nullptr, nullptr, MPI_DATATYPE_NULL, rv.data(), rc, rd,
                            MPI_INT, c),
              MPI_SUCCESS);
    EXPECT_EQ(rv, (V{-1, -1, 7, 8, -1}));

    // w: per-peer types, displacements in bytes.
    rv.assign(5, -1);
    const int wsd[] = {4}, wrd[] = {8};
    const MPI_Datatype st[] = {MPI_INT}, rt[] = {MPI_INT};
    ASSERT_EQ(MPI_Alltoallw(sv.data(), sc, wsd, st, rv.data(), rc, wrd, rt, c), MPI_SUCCESS);
    EXPECT_EQ(rv, (V{-1, -1, 7, 8, -1}));
    const int bc[] = {8};
    const MPI_Datatype bt[] = {MPI_BYTE};
    rv.assign(5, -1);
    ASSERT_EQ(MPI_Alltoallw(sv.data(), bc, wsd, bt, rv.data(), rc, wrd, rt, c), MPI_SUCCESS);
    EXPECT_EQ(rv, (V{-1, -1, 7, 8, -1}));
    ASSERT_EQ(MPI_Alltoallw(MPI_IN_PLACE, nullptr, nullptr, nullptr, rv.data(), rc, wrd, rt, c),
              MPI_SUCCESS);
    EXPECT_EQ(rv, (V{-1, -1, 7, 8, -1}));

    MPI_Request q[3];
    r.assign(2, -1);
    V rv2(5, -1), rw(5, -1);
    ASSERT_EQ(MPI_Ialltoall(s.data(), 2, MPI_INT, r.data(), 2, MPI_INT, c, &q[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Ialltoallv(sv.data(), sc, sd, MPI_INT, rv2.data(), rc, rd, MPI_INT, c, &q[1]),
              MPI_SUCCESS);
    ASSERT_EQ(MPI_Ialltoallw(sv.data(), sc, wsd, st, rw.data(), rc, wrd, rt, c, &q[2]),
              MPI_SUCCESS);
    ASSERT_EQ(MPI_Waitall(3, q, MPI_STATUSES_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    EXPECT_EQ(rv2, (V{-1, -1, 7, 8, -1}));
    EXPECT_EQ(rw, (V{-1, -1, 7, 8, -1}));
  }
}

TEST_F(Coll, ReductionsOfOneMemberAreItsContribution) {
  for (MPI_Comm c : kComms) {
    const std::array<double, 3> s{1.5, -2.0, 3.25};
    std::array<double, 3> r{};
    ASSERT_EQ(MPI_Reduce(s.data(), r.data(), 3, MPI_DOUBLE, MPI_SUM, 0, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    r = {};
    ASSERT_EQ(MPI_Allreduce(s.data(), r.data(), 3, MPI_DOUBLE, MPI_MAX, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    r = {};
    ASSERT_EQ(MPI_Scan(s.data(), r.data(), 3, MPI_DOUBLE, MPI_PROD, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    // Exscan: member 0's receive buffer is left alone.
    r = {9, 9, 9};
    ASSERT_EQ(MPI_Exscan(s.data(), r.data(), 3, MPI_DOUBLE, MPI_SUM, c), MPI_SUCCESS);
    EXPECT_EQ(r, (std::array<double, 3>{9, 9, 9}));

    // In place: the receive buffer is the contribution, and stays.
    r = s;
    ASSERT_EQ(MPI_Reduce(MPI_IN_PLACE, r.data(), 3, MPI_DOUBLE, MPI_MIN, 0, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, r.data(), 3, MPI_DOUBLE, MPI_SUM, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    ASSERT_EQ(MPI_Scan(MPI_IN_PLACE, r.data(), 3, MPI_DOUBLE, MPI_SUM, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    ASSERT_EQ(MPI_Exscan(MPI_IN_PLACE, r.data(), 3, MPI_DOUBLE, MPI_SUM, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);

    // Many op/type pairs, including pair types, bool and byte.
    struct {
      int v;
      int i;
    } p{5, 0}, pr{};
    ASSERT_EQ(MPI_Allreduce(&p, &pr, 1, MPI_2INT, MPI_MINLOC, c), MPI_SUCCESS);
    EXPECT_EQ(pr.v, 5);
    bool b = true, br = false;
    ASSERT_EQ(MPI_Allreduce(&b, &br, 1, MPI_C_BOOL, MPI_LAND, c), MPI_SUCCESS);
    EXPECT_TRUE(br);
    unsigned char by = 0x5a, byr = 0;
    ASSERT_EQ(MPI_Allreduce(&by, &byr, 1, MPI_BYTE, MPI_BXOR, c), MPI_SUCCESS);
    EXPECT_EQ(byr, 0x5a);
    long l = -3, lr = 0;
    ASSERT_EQ(MPI_Allreduce(&l, &lr, 1, MPI_LONG, MPI_SUM, c), MPI_SUCCESS);
    EXPECT_EQ(lr, -3);
    // Nothing to reduce: any datatype handle.
    EXPECT_EQ(MPI_Allreduce(nullptr, nullptr, 0, MPI_DATATYPE_NULL, MPI_SUM, c), MPI_SUCCESS);
    EXPECT_EQ(MPI_Allreduce(nullptr, nullptr, 0, MPI_DATATYPE_NULL, MPI_MAXLOC, c), MPI_SUCCESS);
  }
}

TEST_F(Coll, ReduceScatter) {
  for (MPI_Comm c : kComms) {
    const V s{4, 5, 6};
    V r(3, -1);
    const int counts[] = {3};
    ASSERT_EQ(MPI_Reduce_scatter(s.data(), r.data(), counts, MPI_INT, MPI_SUM, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    r.assign(3, -1);
    ASSERT_EQ(MPI_Reduce_scatter_block(s.data(), r.data(), 3, MPI_INT, MPI_BOR, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    r = s;
    ASSERT_EQ(MPI_Reduce_scatter(MPI_IN_PLACE, r.data(), counts, MPI_INT, MPI_SUM, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    ASSERT_EQ(MPI_Reduce_scatter_block(MPI_IN_PLACE, r.data(), 3, MPI_INT, MPI_SUM, c),
              MPI_SUCCESS);
    EXPECT_EQ(r, s);
    const int zero[] = {0};
    EXPECT_EQ(MPI_Reduce_scatter(nullptr, nullptr, zero, MPI_INT, MPI_SUM, c), MPI_SUCCESS);
  }
}

TEST_F(Coll, NonBlockingReductions) {
  for (MPI_Comm c : kComms) {
    const V s{1, 2, 3};
    V r1(3), r2(3), r3(3), r4{-7, -7, -7}, r5(3), r6(3);
    const int counts[] = {3};
    MPI_Request q[6];
    ASSERT_EQ(MPI_Ireduce(s.data(), r1.data(), 3, MPI_INT, MPI_SUM, 0, c, &q[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Iallreduce(s.data(), r2.data(), 3, MPI_INT, MPI_MAX, c, &q[1]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Iscan(s.data(), r3.data(), 3, MPI_INT, MPI_SUM, c, &q[2]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Iexscan(s.data(), r4.data(), 3, MPI_INT, MPI_SUM, c, &q[3]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Ireduce_scatter(s.data(), r5.data(), counts, MPI_INT, MPI_SUM, c, &q[4]),
              MPI_SUCCESS);
    ASSERT_EQ(MPI_Ireduce_scatter_block(s.data(), r6.data(), 3, MPI_INT, MPI_SUM, c, &q[5]),
              MPI_SUCCESS);
    MPI_Status st[6];
    ASSERT_EQ(MPI_Waitall(6, q, st), MPI_SUCCESS);
    for (const auto& x : st) expect_coll_status(x);
    EXPECT_EQ(r1, s);
    EXPECT_EQ(r2, s);
    EXPECT_EQ(r3, s);
    EXPECT_EQ(r4, (V{-7, -7, -7}));
    EXPECT_EQ(r5, s);
    EXPECT_EQ(r6, s);
    // A collective request may be freed (it is complete here anyway).
    ASSERT_EQ(MPI_Iallreduce(s.data(), r2.data(), 3, MPI_INT, MPI_SUM, c, &q[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Request_free(&q[0]), MPI_SUCCESS);
    EXPECT_EQ(q[0], MPI_REQUEST_NULL);
  }
}

// ------------------------------------------------------------ user ops

int g_calls = 0;

// inout = in * 100 + inout: not commutative, shows which operand is which.
void shift_add(void* in, void* inout, int* len, MPI_Datatype* type) {
  ++g_calls;
  ASSERT_EQ(*type, MPI_INT);
  auto* a = static_cast<int*>(in);
  auto* b = static_cast<int*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = a[i] * 100 + b[i];
}

void never(void*, void*, int*, MPI_Datatype*) { ++g_calls; }

TEST_F(Coll, OpCreateFreeCommutative) {
  MPI_Op op = MPI_OP_NULL, op2 = MPI_OP_NULL;
  ASSERT_EQ(MPI_Op_create(shift_add, 0, &op), MPI_SUCCESS);
  ASSERT_EQ(MPI_Op_create(never, 1, &op2), MPI_SUCCESS);
  EXPECT_NE(op, MPI_OP_NULL);
  EXPECT_NE(op, op2);
  int commute = -1;
  ASSERT_EQ(MPI_Op_commutative(op, &commute), MPI_SUCCESS);
  EXPECT_EQ(commute, 0);
  ASSERT_EQ(MPI_Op_commutative(op2, &commute), MPI_SUCCESS);
  EXPECT_EQ(commute, 1);
  for (MPI_Op p : {MPI_SUM, MPI_MAX, MPI_MINLOC, MPI_BXOR}) {
    ASSERT_EQ(MPI_Op_commutative(p, &commute), MPI_SUCCESS);
    EXPECT_EQ(commute, 1);
  }
  ASSERT_EQ(MPI_Op_commutative(MPI_REPLACE, &commute), MPI_SUCCESS);
  EXPECT_EQ(commute, 0);
  EXPECT_EQ(MPI_Op_commutative(MPI_OP_NULL, &commute), MPI_ERR_OP);
  EXPECT_EQ(MPI_Op_commutative(op, nullptr), MPI_ERR_ARG);

  EXPECT_EQ(MPI_Op_create(nullptr, 1, &op2), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Op_create(never, 1, nullptr), MPI_ERR_ARG);
  MPI_Op sum = MPI_SUM;
  EXPECT_EQ(MPI_Op_free(&sum), MPI_ERR_OP);
  EXPECT_EQ(MPI_Op_free(nullptr), MPI_ERR_ARG);
  ASSERT_EQ(MPI_Op_free(&op2), MPI_SUCCESS);
  EXPECT_EQ(op2, MPI_OP_NULL);
  const MPI_Op stale = op;
  ASSERT_EQ(MPI_Op_free(&op), MPI_SUCCESS);
  op = stale;
  EXPECT_EQ(MPI_Op_free(&op), MPI_ERR_OP);  // freed already
  int x = 1, y = 2;
  EXPECT_EQ(MPI_Reduce_local(&x, &y, 1, MPI_INT, stale), MPI_ERR_OP);
  EXPECT_EQ(MPI_Allreduce(&x, &y, 1, MPI_INT, stale, MPI_COMM_WORLD), MPI_ERR_OP);
}

TEST_F(Coll, UserOpsInCollectives) {
  MPI_Op op;
  ASSERT_EQ(MPI_Op_create(shift_add, 0, &op), MPI_SUCCESS);
  for (MPI_Comm c : kComms) {
    const V s{1, 2, 3};
    V r(3, -1);
    // One member: the result is its own contribution.
    ASSERT_EQ(MPI_Reduce(s.data(), r.data(), 3, MPI_INT, op, 0, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    r.assign(3, -1);
    ASSERT_EQ(MPI_Allreduce(s.data(), r.data(), 3, MPI_INT, op, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    r.assign(3, -1);
    ASSERT_EQ(MPI_Scan(s.data(), r.data(), 3, MPI_INT, op, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    r.assign(3, -1);
    ASSERT_EQ(MPI_Exscan(s.data(), r.data(), 3, MPI_INT, op, c), MPI_SUCCESS);
    EXPECT_EQ(r, (V{-1, -1, -1}));
    const int counts[] = {2};
    r.assign(3, -1);
    ASSERT_EQ(MPI_Reduce_scatter(s.data(), r.data(), counts, MPI_INT, op, c), MPI_SUCCESS);
    EXPECT_EQ(r, (V{1, 2, -1}));
    r.assign(3, -1);
    ASSERT_EQ(MPI_Reduce_scatter_block(s.data(), r.data(), 3, MPI_INT, op, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    // In place.
    r = s;
    ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, r.data(), 3, MPI_INT, op, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    ASSERT_EQ(MPI_Reduce(MPI_IN_PLACE, r.data(), 3, MPI_INT, op, 0, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    ASSERT_EQ(MPI_Reduce_scatter_block(MPI_IN_PLACE, r.data(), 3, MPI_INT, op, c), MPI_SUCCESS);
    EXPECT_EQ(r, s);
    // Non-blocking: the result is there once the request completes.
    V r1(3, -1), r2(3, -1), r3(3, -1), r4(3, -1);
    MPI_Request q[4];
    ASSERT_EQ(MPI_Ireduce(s.data(), r1.data(), 3, MPI_INT, op, 0, c, &q[0]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Iallreduce(s.data(), r2.data(), 3, MPI_INT, op, c, &q[1]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Iscan(s.data(), r3.data(), 3, MPI_INT, op, c, &q[2]), MPI_SUCCESS);
    ASSERT_EQ(MPI_Ireduce_scatter(s.data(), r4.data(), counts, MPI_INT, op, c, &q[3]),
              MPI_SUCCESS);
    ASSERT_EQ(MPI_Waitall(4, q, MPI_STATUSES_IGNORE), MPI_SUCCESS);
    EXPECT_EQ(r1, s);
    EXPECT_EQ(r2, s);
    EXPECT_EQ(r3, s);
    EXPECT_EQ(r4, (V{1, 2, -1}));
  }
  // A user op takes any datatype, MPI_PACKED and MPI_BYTE included.
  MPI_Op any;
  ASSERT_EQ(MPI_Op_create(never, 1, &any), MPI_SUCCESS);
  char pk[4] = {1, 2, 3, 4}, pr[4] = {};
  EXPECT_EQ(MPI_Allreduce(pk, pr, 4, MPI_PACKED, any, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(std::memcmp(pk, pr, 4), 0);
  EXPECT_EQ(MPI_Op_free(&any), MPI_SUCCESS);
  EXPECT_EQ(MPI_Op_free(&op), MPI_SUCCESS);
}

// ------------------------------------------------------------ MPI_Reduce_local

TEST_F(Coll, ReduceLocalPredefined) {
  int a[3] = {1, 5, -2}, b[3] = {10, 2, 3};
  ASSERT_EQ(MPI_Reduce_local(a, b, 3, MPI_INT, MPI_SUM), MPI_SUCCESS);
  EXPECT_EQ(b[0], 11);
  EXPECT_EQ(b[1], 7);
  EXPECT_EQ(b[2], 1);
  EXPECT_EQ(a[0], 1);  // inbuf untouched
  double x[2] = {1.5, -4}, y[2] = {0.5, 8};
  ASSERT_EQ(MPI_Reduce_local(x, y, 2, MPI_DOUBLE, MPI_MAX), MPI_SUCCESS);
  EXPECT_EQ(y[0], 1.5);
  EXPECT_EQ(y[1], 8);
  ASSERT_EQ(MPI_Reduce_local(x, y, 2, MPI_DOUBLE, MPI_PROD), MPI_SUCCESS);
  EXPECT_EQ(y[0], 2.25);
  EXPECT_EQ(y[1], -32);
  struct {
    double v;
    int i;
  } p[2] = {{1.0, 7}, {2.0, 3}}, q[2] = {{1.0, 4}, {1.0, 9}};
  ASSERT_EQ(MPI_Reduce_local(p, q, 2, MPI_DOUBLE_INT, MPI_MINLOC), MPI_SUCCESS);
  EXPECT_EQ(q[0].v, 1.0);
  EXPECT_EQ(q[0].i, 4);  // tie: the lower index
  EXPECT_EQ(q[1].v, 1.0);
  EXPECT_EQ(q[1].i, 9);
  bool t[2] = {true, false}, u[2] = {true, true};
  ASSERT_EQ(MPI_Reduce_local(t, u, 2, MPI_C_BOOL, MPI_LAND), MPI_SUCCESS);
  EXPECT_TRUE(u[0]);
  EXPECT_FALSE(u[1]);
  unsigned char m = 0xf0, n = 0x3c;
  ASSERT_EQ(MPI_Reduce_local(&m, &n, 1, MPI_BYTE, MPI_BXOR), MPI_SUCCESS);
  EXPECT_EQ(n, 0xcc);
  long la = 1L << 40, lb = 1;
  ASSERT_EQ(MPI_Reduce_local(&la, &lb, 1, MPI_LONG, MPI_BOR), MPI_SUCCESS);
  EXPECT_EQ(lb, (1L << 40) | 1);
  char c1 = -5, c2 = 3;
  ASSERT_EQ(MPI_Reduce_local(&c1, &c2, 1, MPI_CHAR, MPI_MIN), MPI_SUCCESS);  // char is signed
  EXPECT_EQ(c2, -5);
  unsigned long ua = ~0UL, ub = 1;
  ASSERT_EQ(MPI_Reduce_local(&ua, &ub, 1, MPI_UNSIGNED_LONG, MPI_MAX), MPI_SUCCESS);
  EXPECT_EQ(ub, ~0UL);
  EXPECT_EQ(MPI_Reduce_local(nullptr, nullptr, 0, MPI_INT, MPI_SUM), MPI_SUCCESS);
}

TEST_F(Coll, ReduceLocalUserOp) {
  MPI_Op op;
  ASSERT_EQ(MPI_Op_create(shift_add, 0, &op), MPI_SUCCESS);
  int in[2] = {1, 2}, inout[2] = {3, 4};
  g_calls = 0;
  ASSERT_EQ(MPI_Reduce_local(in, inout, 2, MPI_INT, op), MPI_SUCCESS);
  EXPECT_EQ(g_calls, 1);
  EXPECT_EQ(inout[0], 103);  // inout = in op inout
  EXPECT_EQ(inout[1], 204);
  ASSERT_EQ(MPI_Reduce_local(in, inout, 0, MPI_INT, op), MPI_SUCCESS);
  EXPECT_EQ(g_calls, 1);  // nothing to reduce
  ASSERT_EQ(MPI_Op_free(&op), MPI_SUCCESS);
}

TEST_F(Coll, ReduceLocalErrors) {
  int a = 1, b = 2;
  EXPECT_EQ(MPI_Reduce_local(&a, &b, -1, MPI_INT, MPI_SUM), MPI_ERR_COUNT);
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_DATATYPE_NULL, MPI_SUM), MPI_ERR_TYPE);
  EXPECT_EQ(MPI_Reduce_local(nullptr, &b, 1, MPI_INT, MPI_SUM), MPI_ERR_BUFFER);
  EXPECT_EQ(MPI_Reduce_local(&a, nullptr, 1, MPI_INT, MPI_SUM), MPI_ERR_BUFFER);
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_INT, MPI_OP_NULL), MPI_ERR_OP);
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_INT, static_cast<MPI_Op>(12345)), MPI_ERR_OP);
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_INT, MPI_REPLACE), MPI_ERR_OP);
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_INT, MPI_NO_OP), MPI_ERR_OP);
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_INT, MPI_MINLOC), MPI_ERR_OP);
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_BYTE, MPI_SUM), MPI_ERR_OP);
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_PACKED, MPI_SUM), MPI_ERR_OP);
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_FLOAT, MPI_BAND), MPI_ERR_OP);
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_FLOAT, MPI_LOR), MPI_ERR_OP);
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_C_FLOAT_COMPLEX, MPI_MAX), MPI_ERR_OP);
  EXPECT_EQ(MPI_Reduce_local(&a, &b, 1, MPI_C_BOOL, MPI_SUM), MPI_ERR_OP);
  // No MPI_IN_PLACE, no aliasing: a buffer error, as MPICH says too.
  EXPECT_EQ(MPI_Reduce_local(MPI_IN_PLACE, &b, 1, MPI_INT, MPI_SUM), MPI_ERR_BUFFER);
  EXPECT_EQ(MPI_Reduce_local(&a, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM), MPI_ERR_BUFFER);
  EXPECT_EQ(MPI_Reduce_local(&b, &b, 1, MPI_INT, MPI_SUM), MPI_ERR_BUFFER);
  EXPECT_EQ(MPI_Reduce_local(&b, &b, 0, MPI_INT, MPI_SUM), MPI_SUCCESS);  // nothing read
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 2);
}

// ------------------------------------------------------------ argument errors

// One buffer as both sides, without MPI_IN_PLACE: MPI_ERR_BUFFER, and
// nothing written. MPI_IN_PLACE, or the same address where a side carries
// nothing (a count of 0), is fine.
TEST_F(Coll, AliasedBuffersAreABufferError) {
  int x[2] = {5, 6};
  EXPECT_EQ(MPI_Allreduce(x, x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_BUFFER);
  EXPECT_EQ(MPI_Reduce(x, x, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
  EXPECT_EQ(MPI_Gather(x, 1, MPI_INT, x, 1, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
  EXPECT_EQ(MPI_Scatter(x, 1, MPI_INT, x, 1, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
  EXPECT_EQ(MPI_Alltoall(x, 1, MPI_INT, x, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_BUFFER);
  MPI_Request r = MPI_REQUEST_NULL;
  EXPECT_EQ(MPI_Iallreduce(x, x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r), MPI_ERR_BUFFER);
  EXPECT_EQ(r, MPI_REQUEST_NULL);
  EXPECT_EQ(x[0], 5);
  EXPECT_EQ(MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(MPI_Allgather(x, 0, MPI_INT, x, 0, MPI_INT, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(x[0], 5);
}

TEST_F(Coll, InvalidCommunicatorComesFirst) {
  int x[4] = {}, y[4] = {};
  const int one[] = {1}, zero[] = {0};
  const MPI_Datatype ints[] = {MPI_INT};
  MPI_Request r = MPI_REQUEST_NULL;
  for (MPI_Comm bad : {MPI_COMM_NULL, static_cast<MPI_Comm>(12345)}) {
    EXPECT_EQ(MPI_Ibarrier(bad, &r), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Bcast(x, -1, MPI_DATATYPE_NULL, 9, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Reduce(x, y, -1, MPI_INT, MPI_OP_NULL, 5, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Allreduce(x, y, 1, MPI_INT, MPI_SUM, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Gather(x, 1, MPI_INT, y, 1, MPI_INT, 0, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Gatherv(x, 1, MPI_INT, y, one, zero, MPI_INT, 0, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Scatter(x, 1, MPI_INT, y, 1, MPI_INT, 0, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Scatterv(x, one, zero, MPI_INT, y, 1, MPI_INT, 0, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Allgather(x, 1, MPI_INT, y, 1, MPI_INT, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Allgatherv(x, 1, MPI_INT, y, one, zero, MPI_INT, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Alltoall(x, 1, MPI_INT, y, 1, MPI_INT, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Alltoallv(x, one, zero, MPI_INT, y, one, zero, MPI_INT, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Alltoallw(x, one, zero, ints, y, one, zero, ints, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Reduce_scatter(x, y, one, MPI_INT, MPI_SUM, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Reduce_scatter_block(x, y, 1, MPI_INT, MPI_SUM, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Scan(x, y, 1, MPI_INT, MPI_SUM, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Exscan(x, y, 1, MPI_INT, MPI_SUM, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Ibcast(x, 1, MPI_INT, 0, bad, &r), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Iallreduce(x, y, 1, MPI_INT, MPI_SUM, bad, nullptr), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Ialltoallw(x, one, zero, ints, y, one, zero, ints, bad, &r), MPI_ERR_COMM);
    EXPECT_EQ(r, MPI_REQUEST_NULL);
  }
}

TEST_F(Coll, InvalidCounts) {
  int x[4] = {}, y[4] = {};
  const int neg[] = {-1}, zero[] = {0}, one[] = {1};
  const MPI_Datatype ints[] = {MPI_INT};
  MPI_Request r;
  for (MPI_Comm c : kComms) {
    EXPECT_EQ(MPI_Bcast(x, -1, MPI_INT, 0, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Reduce(x, y, -2, MPI_INT, MPI_SUM, 0, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Allreduce(MPI_IN_PLACE, y, -2, MPI_INT, MPI_SUM, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Gather(x, -1, MPI_INT, y, 1, MPI_INT, 0, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Gather(x, 1, MPI_INT, y, -1, MPI_INT, 0, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Gatherv(x, 1, MPI_INT, y, neg, zero, MPI_INT, 0, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Scatterv(x, neg, zero, MPI_INT, y, 1, MPI_INT, 0, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Scatter(x, 1, MPI_INT, y, -1, MPI_INT, 0, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Allgather(x, -1, MPI_INT, y, 1, MPI_INT, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Allgatherv(x, 1, MPI_INT, y, neg, zero, MPI_INT, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Alltoall(x, 1, MPI_INT, y, -1, MPI_INT, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Alltoallv(x, neg, zero, MPI_INT, y, one, zero, MPI_INT, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Alltoallw(x, one, zero, ints, y, neg, zero, ints, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Reduce_scatter(x, y, neg, MPI_INT, MPI_SUM, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Reduce_scatter_block(x, y, -1, MPI_INT, MPI_SUM, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Scan(x, y, -1, MPI_INT, MPI_SUM, c), MPI_ERR_COUNT);
    EXPECT_EQ(MPI_Iexscan(x, y, -1, MPI_INT, MPI_SUM, c, &r), MPI_ERR_COUNT);
    // Missing arrays are invalid arguments.
    EXPECT_EQ(MPI_Gatherv(x, 1, MPI_INT, y, nullptr, zero, MPI_INT, 0, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Gatherv(x, 1, MPI_INT, y, one, nullptr, MPI_INT, 0, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Alltoallw(x, one, zero, nullptr, y, one, zero, ints, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Reduce_scatter(x, y, nullptr, MPI_INT, MPI_SUM, c), MPI_ERR_ARG);
    // Negative count before invalid type, type before buffer.
    EXPECT_EQ(MPI_Bcast(nullptr, -1, MPI_DATATYPE_NULL, 0, c), MPI_ERR_COUNT);
  }
}

TEST_F(Coll, InvalidDatatypes) {
  int x[4] = {}, y[4] = {};
  const int one[] = {1}, zero[] = {0};
  const MPI_Datatype ints[] = {MPI_INT}, bad[] = {MPI_DATATYPE_NULL};
  for (MPI_Comm c : kComms) {
    for (MPI_Datatype t : {MPI_DATATYPE_NULL, static_cast<MPI_Datatype>(0x4c0000ff)}) {
      EXPECT_EQ(MPI_Bcast(x, 1, t, 0, c), MPI_ERR_TYPE);
      EXPECT_EQ(MPI_Reduce(x, y, 1, t, MPI_SUM, 0, c), MPI_ERR_TYPE);
      EXPECT_EQ(MPI_Allreduce(x, y, 1, t, MPI_OP_NULL, c), MPI_ERR_TYPE);  // type before op
      EXPECT_EQ(MPI_Gather(x, 1, t, y, 1, MPI_INT, 0, c), MPI_ERR_TYPE);
      EXPECT_EQ(MPI_Gather(x, 1, MPI_INT, y, 1, t, 0, c), MPI_ERR_TYPE);
      EXPECT_EQ(MPI_Scatterv(x, one, zero, t, y, 1, MPI_INT, 0, c), MPI_ERR_TYPE);
      EXPECT_EQ(MPI_Allgatherv(x, 1, MPI_INT, y, one, zero, t, c), MPI_ERR_TYPE);
      EXPECT_EQ(MPI_Alltoall(x, 1, t, y, 1, MPI_INT, c), MPI_ERR_TYPE);
      EXPECT_EQ(MPI_Alltoallv(x, one, zero, MPI_INT, y, one, zero, t, c), MPI_ERR_TYPE);
      EXPECT_EQ(MPI_Reduce_scatter_block(x, y, 1, t, MPI_SUM, c), MPI_ERR_TYPE);
      EXPECT_EQ(MPI_Exscan(x, y, 1, t, MPI_SUM, c), MPI_ERR_TYPE);
    }
    EXPECT_EQ(MPI_Alltoallw(x, one, zero, bad, y, one, zero, ints, c), MPI_ERR_TYPE);
    EXPECT_EQ(MPI_Alltoallw(x, one, zero, ints, y, one, zero, bad, c), MPI_ERR_TYPE);
    // Type before buffer.
    EXPECT_EQ(MPI_Bcast(nullptr, 1, MPI_DATATYPE_NULL, 0, c), MPI_ERR_TYPE);
  }
}

TEST_F(Coll, InvalidBuffers) {
  int x[4] = {}, y[4] = {};
  const int one[] = {1}, zero[] = {0}, four[] = {4};
  const MPI_Datatype ints[] = {MPI_INT};
  for (MPI_Comm c : kComms) {
    EXPECT_EQ(MPI_Bcast(nullptr, 1, MPI_INT, 0, c), MPI_ERR_BUFFER);
    EXPECT_EQ(MPI_Reduce(nullptr, y, 1, MPI_INT, MPI_SUM, 0, c), MPI_ERR_BUFFER);
    EXPECT_EQ(MPI_Reduce(x, nullptr, 1, MPI_INT, MPI_SUM, 0, c), MPI_ERR_BUFFER);  // at the root
    EXPECT_EQ(MPI_Allreduce(MPI_IN_PLACE, nullptr, 1, MPI_INT, MPI_SUM, c), MPI_ERR_BUFFER);
    EXPECT_EQ(MPI_Gather(nullptr, 1, MPI_INT, y, 1, MPI_INT, 0, c), MPI_ERR_BUFFER);
    EXPECT_EQ(MPI_Gatherv(x, 1, MPI_INT, nullptr, one, zero, MPI_INT, 0, c), MPI_ERR_BUFFER);
    EXPECT_EQ(MPI_Scatter(x, 1, MPI_INT, nullptr, 1, MPI_INT, 0, c), MPI_ERR_BUFFER);
    EXPECT_EQ(MPI_Allgather(x, 1, MPI_INT, nullptr, 1, MPI_INT, c), MPI_ERR_BUFFER);
    EXPECT_EQ(MPI_Alltoallv(nullptr, one, zero, MPI_INT, y, one, zero, MPI_INT, c),
              MPI_ERR_BUFFER);
    EXPECT_EQ(MPI_Reduce_scatter(x, nullptr, one, MPI_INT, MPI_SUM, c), MPI_ERR_BUFFER);
    EXPECT_EQ(MPI_Scan(x, nullptr, 1, MPI_INT, MPI_SUM, c), MPI_ERR_BUFFER);
    // MPI_BOTTOM with byte displacements (Alltoallw): the displacement is the
    // address, so only displacement 0 is a NULL buffer.
    EXPECT_EQ(MPI_Alltoallw(MPI_BOTTOM, one, zero, ints, y, one, zero, ints, c), MPI_ERR_BUFFER);
    // Empty contributions need no buffer, whatever their displacements.
    EXPECT_EQ(MPI_Gatherv(x, 0, MPI_INT, nullptr, zero, four, MPI_INT, 0, c), MPI_SUCCESS);
    EXPECT_EQ(MPI_Alltoall(nullptr, 0, MPI_INT, nullptr, 0, MPI_INT, c), MPI_SUCCESS);
    // Buffer before root.
    EXPECT_EQ(MPI_Bcast(nullptr, 1, MPI_INT, 5, c), MPI_ERR_BUFFER);
  }
}

TEST_F(Coll, InvalidRoot) {
  int x[4] = {}, y[4] = {};
  const int one[] = {1}, zero[] = {0};
  MPI_Request r;
  for (MPI_Comm c : kComms) {
    for (int root : {1, -1, MPI_ROOT, MPI_PROC_NULL, 1000}) {
      EXPECT_EQ(MPI_Bcast(x, 1, MPI_INT, root, c), MPI_ERR_ROOT) << root;
      EXPECT_EQ(MPI_Ibcast(x, 1, MPI_INT, root, c, &r), MPI_ERR_ROOT) << root;
      EXPECT_EQ(MPI_Reduce(x, y, 1, MPI_INT, MPI_SUM, root, c), MPI_ERR_ROOT) << root;
      EXPECT_EQ(MPI_Gather(x, 1, MPI_INT, y, 1, MPI_INT, root, c), MPI_ERR_ROOT) << root;
      EXPECT_EQ(MPI_Gatherv(x, 1, MPI_INT, y, one, zero, MPI_INT, root, c), MPI_ERR_ROOT);
      EXPECT_EQ(MPI_Scatter(x, 1, MPI_INT, y, 1, MPI_INT, root, c), MPI_ERR_ROOT) << root;
      EXPECT_EQ(MPI_Iscatterv(x, one, zero, MPI_INT, y, 1, MPI_INT, root, c, &r), MPI_ERR_ROOT);
    }
    // Root before op.
    EXPECT_EQ(MPI_Reduce(x, y, 1, MPI_INT, MPI_OP_NULL, 3, c), MPI_ERR_ROOT);
  }
}

TEST_F(Coll, InvalidOps) {
  int x[4] = {}, y[4] = {};
  const int one[] = {1};
  MPI_Request r;
  for (MPI_Comm c : kComms) {
    for (MPI_Op op : {MPI_OP_NULL, static_cast<MPI_Op>(0x58000099), static_cast<MPI_Op>(7),
                      MPI_REPLACE, MPI_NO_OP}) {
      EXPECT_EQ(MPI_Reduce(x, y, 1, MPI_INT, op, 0, c), MPI_ERR_OP);
      EXPECT_EQ(MPI_Allreduce(x, y, 1, MPI_INT, op, c), MPI_ERR_OP);
      EXPECT_EQ(MPI_Iallreduce(x, y, 1, MPI_INT, op, c, &r), MPI_ERR_OP);
      EXPECT_EQ(MPI_Reduce_scatter(x, y, one, MPI_INT, op, c), MPI_ERR_OP);
      EXPECT_EQ(MPI_Reduce_scatter_block(x, y, 1, MPI_INT, op, c), MPI_ERR_OP);
      EXPECT_EQ(MPI_Scan(x, y, 1, MPI_INT, op, c), MPI_ERR_OP);
      EXPECT_EQ(MPI_Exscan(x, y, 1, MPI_INT, op, c), MPI_ERR_OP);
      // Even with nothing to reduce.
      EXPECT_EQ(MPI_Allreduce(x, y, 0, MPI_INT, op, c), MPI_ERR_OP);
    }
    // Ops not defined on the type.
    EXPECT_EQ(MPI_Allreduce(x, y, 1, MPI_BYTE, MPI_SUM, c), MPI_ERR_OP);
    EXPECT_EQ(MPI_Allreduce(x, y, 1, MPI_PACKED, MPI_BOR, c), MPI_ERR_OP);
    EXPECT_EQ(MPI_Allreduce(x, y, 1, MPI_FLOAT, MPI_BXOR, c), MPI_ERR_OP);
    EXPECT_EQ(MPI_Allreduce(x, y, 1, MPI_DOUBLE, MPI_LAND, c), MPI_ERR_OP);
    EXPECT_EQ(MPI_Allreduce(x, y, 1, MPI_INT, MPI_MAXLOC, c), MPI_ERR_OP);
    EXPECT_EQ(MPI_Allreduce(x, y, 1, MPI_2INT, MPI_SUM, c), MPI_ERR_OP);
    EXPECT_EQ(MPI_Allreduce(x, y, 1, MPI_C_DOUBLE_COMPLEX, MPI_MIN, c), MPI_ERR_OP);
    EXPECT_EQ(MPI_Allreduce(x, y, 1, MPI_CXX_BOOL, MPI_PROD, c), MPI_ERR_OP);
    // Op before MPI_IN_PLACE misuse.
    EXPECT_EQ(MPI_Allreduce(MPI_IN_PLACE, MPI_IN_PLACE, 1, MPI_INT, MPI_OP_NULL, c), MPI_ERR_OP);
  }
}

TEST_F(Coll, InPlaceWhereMpiForbidsIt) {
  int x[4] = {}, y[4] = {};
  const int one[] = {1}, zero[] = {0};
  MPI_Request r;
  for (MPI_Comm c : kComms) {
    EXPECT_EQ(MPI_Bcast(MPI_IN_PLACE, 1, MPI_INT, 0, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Allreduce(MPI_IN_PLACE, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Allreduce(x, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Reduce(x, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, 0, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Gather(x, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, 0, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Gather(MPI_IN_PLACE, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, 0, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Scatter(MPI_IN_PLACE, 1, MPI_INT, y, 1, MPI_INT, 0, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Scatterv(x, one, zero, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, 0, c), MPI_SUCCESS);
    EXPECT_EQ(MPI_Allgather(x, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Alltoallv(x, one, zero, MPI_INT, MPI_IN_PLACE, one, zero, MPI_INT, c),
              MPI_ERR_ARG);
    EXPECT_EQ(MPI_Scan(MPI_IN_PLACE, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Reduce_scatter_block(x, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, c), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Iallgather(x, 1, MPI_INT, MPI_IN_PLACE, 1, MPI_INT, c, &r), MPI_ERR_ARG);
    EXPECT_EQ(MPI_Iexscan(x, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, c, &r), MPI_ERR_ARG);
  }
}

TEST_F(Coll, NullRequestPointer) {
  int x[4] = {}, y[4] = {};
  const int one[] = {1}, zero[] = {0};
  const MPI_Datatype ints[] = {MPI_INT};
  for (MPI_Comm c : kComms) {
    EXPECT_EQ(MPI_Ibarrier(c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Ibcast(x, 1, MPI_INT, 0, c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Ireduce(x, y, 1, MPI_INT, MPI_SUM, 0, c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Iallreduce(x, y, 1, MPI_INT, MPI_SUM, c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Igather(x, 1, MPI_INT, y, 1, MPI_INT, 0, c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Igatherv(x, 1, MPI_INT, y, one, zero, MPI_INT, 0, c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Iscatter(x, 1, MPI_INT, y, 1, MPI_INT, 0, c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Iscatterv(x, one, zero, MPI_INT, y, 1, MPI_INT, 0, c, nullptr),
              MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Iallgather(x, 1, MPI_INT, y, 1, MPI_INT, c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Iallgatherv(x, 1, MPI_INT, y, one, zero, MPI_INT, c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Ialltoall(x, 1, MPI_INT, y, 1, MPI_INT, c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Ialltoallv(x, one, zero, MPI_INT, y, one, zero, MPI_INT, c, nullptr),
              MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Ialltoallw(x, one, zero, ints, y, one, zero, ints, c, nullptr),
              MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Ireduce_scatter(x, y, one, MPI_INT, MPI_SUM, c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Ireduce_scatter_block(x, y, 1, MPI_INT, MPI_SUM, c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Iscan(x, y, 1, MPI_INT, MPI_SUM, c, nullptr), MPI_ERR_REQUEST);
    EXPECT_EQ(MPI_Iexscan(x, y, 1, MPI_INT, MPI_SUM, c, nullptr), MPI_ERR_REQUEST);
  }
}

TEST_F(Coll, TruncationIsReported) {
  int x[4] = {1, 2, 3, 4}, y[4] = {};
  for (MPI_Comm c : kComms) {
    EXPECT_EQ(MPI_Gather(x, 4, MPI_INT, y, 2, MPI_INT, 0, c), MPI_ERR_TRUNCATE);
    EXPECT_EQ(MPI_Allgather(x, 2, MPI_INT, y, 1, MPI_INT, c), MPI_ERR_TRUNCATE);
    MPI_Request r = MPI_REQUEST_NULL;
    EXPECT_EQ(MPI_Iscatter(x, 3, MPI_INT, y, 2, MPI_INT, 0, c, &r), MPI_ERR_TRUNCATE);
    EXPECT_EQ(r, MPI_REQUEST_NULL);
  }
}

TEST_F(Coll, FatalErrorsNameTheRankAndTheCall) {
  int x = 1, y = 0;
  ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL), MPI_SUCCESS);
  // Each communicator has its own handler.
  EXPECT_EQ(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_REPLACE, MPI_COMM_SELF), MPI_ERR_OP);
  EXPECT_EXIT(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_REPLACE, MPI_COMM_WORLD),
              ::testing::ExitedWithCode(MPI_ERR_OP),
              "bcs: rank 0: MPI_Allreduce: MPI_ERR_OP: MPI_REPLACE is only for one-sided");
  EXPECT_EXIT(MPI_Reduce(&x, &y, 1, MPI_BYTE, MPI_SUM, 0, MPI_COMM_WORLD),
              ::testing::ExitedWithCode(MPI_ERR_OP),
              "bcs: rank 0: MPI_Reduce: MPI_ERR_OP: MPI_SUM is not defined on MPI_BYTE");
  EXPECT_EXIT(MPI_Bcast(&x, 1, MPI_INT, 4, MPI_COMM_WORLD), ::testing::ExitedWithCode(MPI_ERR_ROOT),
              "bcs: rank 0: MPI_Bcast: MPI_ERR_ROOT: root 4 out of range");
  EXPECT_EXIT(MPI_Ibarrier(MPI_COMM_WORLD, nullptr), ::testing::ExitedWithCode(MPI_ERR_REQUEST),
              "bcs: rank 0: MPI_Ibarrier: MPI_ERR_REQUEST: ");
}

}  // namespace
