/* Collectives on datatypes with holes in every form the runtime stages:
   v and w variants and the non-blocking calls (the blocking plain forms
   are in dtype.c). The type is "every other int" (a vector with stride 2);
   a received block must hold the sent values in its even slots and leave
   its odd slots (the holes) untouched. Checked with MPI_IN_PLACE where MPI
   allows it, every root; reductions (predefined and user ops, scan,
   reduce-scatter) on the same type. */
#include <stdlib.h>
#include <string.h>

#include "prog_common.h"

enum { K = 5 };                   /* ints of data per block */
static int wrank, wsize;
static MPI_Datatype evens;        /* K ints, stride 2: extent 2K-1 ints */
static MPI_Datatype evens_block;  /* evens resized to 2K ints, to lay blocks side by side */

static int val(int from, int to, int i) { return from * 10000 + to * 100 + i; }
#define HOLE (-7)

/* Block b of a buffer of 2K-int blocks: even slots hold val(from, to, i). */
static void fill(int *buf, int b, int from, int to) {
  for (int i = 0; i < 2 * K; ++i) buf[b * 2 * K + i] = i % 2 ? HOLE : val(from, to, i / 2);
}
static void check_block(const int *buf, int b, int from, int to, const char *what) {
  for (int i = 0; i < 2 * K; ++i) {
    const int want = i % 2 ? HOLE : val(from, to, i / 2);
    CHECK(buf[b * 2 * K + i] == want, "%s: block %d slot %d = %d, want %d", what, b, i,
          buf[b * 2 * K + i], want);
  }
}
static int *blocks(int n) {
  int *p = malloc(sizeof(int) * 2 * K * (size_t)(n + 1));
  for (int i = 0; i < 2 * K * (n + 1); ++i) p[i] = HOLE;
  return p;
}

static void wait(MPI_Request *q) { MPI_OK(MPI_Wait(q, MPI_STATUS_IGNORE)); }

static void rooted(int root) {
  const int n = wsize, me = wrank;
  MPI_Request q;
  int *s = blocks(n), *r = blocks(n);
  /* Ibcast */
  if (me == root)
    fill(r, 0, root, 0);
  else
    for (int i = 0; i < 2 * K; i += 2) r[i] = 0;
  MPI_OK(MPI_Ibcast(r, 1, evens, root, MPI_COMM_WORLD, &q));
  wait(&q);
  check_block(r, 0, root, 0, "ibcast");
  /* Igather / Gatherv / Igatherv: block b at the root from rank b. */
  fill(s, 0, me, root);
  free(r);
  r = blocks(n);
  MPI_OK(MPI_Igather(s, 1, evens, r, 1, evens_block, root, MPI_COMM_WORLD, &q));
  wait(&q);
  if (me == root)
    for (int b = 0; b < n; ++b) check_block(r, b, b, root, "igather");
  int *counts = malloc(sizeof(int) * (size_t)n), *displs = malloc(sizeof(int) * (size_t)n);
  for (int b = 0; b < n; ++b) {
    counts[b] = 1;
    displs[b] = n - 1 - b; /* reversed, in units of the 2K-int block */
  }
  free(r);
  r = blocks(n);
  MPI_OK(MPI_Gatherv(s, 1, evens, r, counts, displs, evens_block, root, MPI_COMM_WORLD));
  if (me == root)
    for (int b = 0; b < n; ++b) check_block(r, n - 1 - b, b, root, "gatherv");
  /* in place at the root: its own block is already in r */
  free(r);
  r = blocks(n);
  if (me == root) fill(r, n - 1 - me, me, root);
  MPI_OK(MPI_Igatherv(me == root ? MPI_IN_PLACE : s, 1, evens, r, counts, displs, evens_block,
                      root, MPI_COMM_WORLD, &q));
  wait(&q);
  if (me == root)
    for (int b = 0; b < n; ++b) check_block(r, n - 1 - b, b, root, "igatherv in place");
  /* Iscatter / Scatterv: block b of the root to rank b. */
  free(s);
  s = blocks(n);
  for (int b = 0; b < n; ++b) fill(s, b, root, b);
  free(r);
  r = blocks(1);
  MPI_OK(MPI_Iscatter(s, 1, evens_block, r, 1, evens, root, MPI_COMM_WORLD, &q));
  wait(&q);
  check_block(r, 0, root, me, "iscatter");
  free(s);
  s = blocks(n);
  for (int b = 0; b < n; ++b) fill(s, n - 1 - b, root, b);
  free(r);
  r = blocks(1);
  MPI_OK(MPI_Scatterv(s, counts, displs, evens_block, r, 1, evens, root, MPI_COMM_WORLD));
  check_block(r, 0, root, me, "scatterv");
  free(r);
  r = blocks(1);
  MPI_OK(MPI_Iscatterv(s, counts, displs, evens_block, me == root ? MPI_IN_PLACE : r, 1, evens,
                       root, MPI_COMM_WORLD, &q));
  wait(&q);
  if (me != root) check_block(r, 0, root, me, "iscatterv in place");
  free(s);
  free(r);
  free(counts);
  free(displs);
}

/* inout[i] = in[i] * 3 + inout[i] over the type's elements: not a
   predefined op, and its result shows the order of the operands. */
static void weighted(void *in, void *inout, int *len, MPI_Datatype *t) {
  MPI_Aint lb, ext;
  MPI_Type_get_extent(*t, &lb, &ext);
  const int *a = in;
  int *b = inout;
  for (int k = 0; k < *len; ++k)
    for (int i = 0; i < K; ++i) b[k * (int)(ext / sizeof(int)) + 2 * i] += 3 * a[k * (int)(ext / sizeof(int)) + 2 * i];
}

/* Reductions on the type with holes: predefined and user op, blocking and
   not, scan and reduce-scatter; holes stay untouched. */
static void reductions(int *s, int *r) {
  const int n = wsize, me = wrank;
  MPI_Request q;
  MPI_Op op;
  MPI_OK(MPI_Op_create(weighted, 0, &op));
  for (int b = 0; b < n; ++b) fill(s, b, me, b);
  for (int i = 0; i < 2 * K * n; ++i) r[i] = HOLE;
  MPI_OK(MPI_Iallreduce(s, r, 1, evens, MPI_SUM, MPI_COMM_WORLD, &q));
  wait(&q);
  for (int i = 0; i < 2 * K; ++i) {
    int want = HOLE;
    if (i % 2 == 0) {
      want = 0;
      for (int f = 0; f < n; ++f) want += val(f, 0, i / 2);
    }
    CHECK(r[i] == want, "iallreduce slot %d = %d, want %d", i, r[i], want);
  }
  /* User op, non-commutative: rank order fold r = s0*3 + (s1*3 + (... + s_last)) */
  for (int i = 0; i < 2 * K; ++i) r[i] = HOLE;
  MPI_OK(MPI_Ireduce(s, r, 1, evens, op, 0, MPI_COMM_WORLD, &q));
  MPI_OK(MPI_Op_free(&op)); /* freed while the operation is pending */
  wait(&q);
  if (me == 0)
    for (int i = 0; i < 2 * K; ++i) {
      int want = HOLE;
      if (i % 2 == 0) {
        want = val(n - 1, 0, i / 2);
        for (int f = n - 2; f >= 0; --f) want += 3 * val(f, 0, i / 2);
      }
      CHECK(r[i] == want, "ireduce user op slot %d = %d, want %d", i, r[i], want);
    }
  /* Reduce_scatter_block: member m gets the sum of everyone's block m. */
  for (int i = 0; i < 2 * K; ++i) r[i] = HOLE;
  MPI_OK(MPI_Ireduce_scatter_block(s, r, 1, evens_block, MPI_SUM, MPI_COMM_WORLD, &q));
  wait(&q);
  for (int i = 0; i < 2 * K; ++i) {
    int want = HOLE;
    if (i % 2 == 0) {
      want = 0;
      for (int f = 0; f < n; ++f) want += val(f, me, i / 2);
    }
    CHECK(r[i] == want, "ireduce_scatter_block slot %d = %d, want %d", i, r[i], want);
  }
  /* Scan over block 0 (to = 0). */
  for (int i = 0; i < 2 * K; ++i) r[i] = HOLE;
  MPI_OK(MPI_Scan(s, r, 1, evens, MPI_SUM, MPI_COMM_WORLD));
  for (int i = 0; i < 2 * K; ++i) {
    int want = HOLE;
    if (i % 2 == 0) {
      want = 0;
      for (int f = 0; f <= me; ++f) want += val(f, 0, i / 2);
    }
    CHECK(r[i] == want, "scan slot %d = %d, want %d", i, r[i], want);
  }
}

static void everyone(void) {
  const int n = wsize, me = wrank;
  MPI_Request q;
  int *s = blocks(n), *r = blocks(n);
  /* Iallgather, Allgatherv (reversed), Iallgatherv in place */
  fill(s, 0, me, 0);
  MPI_OK(MPI_Iallgather(s, 1, evens, r, 1, evens_block, MPI_COMM_WORLD, &q));
  wait(&q);
  for (int b = 0; b < n; ++b) check_block(r, b, b, 0, "iallgather");
  int *counts = malloc(sizeof(int) * (size_t)n), *displs = malloc(sizeof(int) * (size_t)n),
      *bdispls = malloc(sizeof(int) * (size_t)n), *sdispls = malloc(sizeof(int) * (size_t)n);
  MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)n);
  for (int b = 0; b < n; ++b) {
    counts[b] = 1;
    displs[b] = n - 1 - b;
    sdispls[b] = b;
    bdispls[b] = displs[b] * 2 * K * (int)sizeof(int);
    types[b] = evens;
  }
  free(r);
  r = blocks(n);
  MPI_OK(MPI_Allgatherv(s, 1, evens, r, counts, displs, evens_block, MPI_COMM_WORLD));
  for (int b = 0; b < n; ++b) check_block(r, n - 1 - b, b, 0, "allgatherv");
  free(r);
  r = blocks(n);
  fill(r, n - 1 - me, me, 0);
  MPI_OK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, counts, displs, evens_block,
                         MPI_COMM_WORLD, &q));
  wait(&q);
  for (int b = 0; b < n; ++b) check_block(r, n - 1 - b, b, 0, "iallgatherv in place");
  /* Ialltoall, Alltoallv, Ialltoallw: block b goes to rank b. */
  for (int b = 0; b < n; ++b) fill(s, b, me, b);
  free(r);
  r = blocks(n);
  MPI_OK(MPI_Ialltoall(s, 1, evens_block, r, 1, evens_block, MPI_COMM_WORLD, &q));
  wait(&q);
  for (int b = 0; b < n; ++b) check_block(r, b, b, me, "ialltoall");
  free(r);
  r = blocks(n);
  MPI_OK(MPI_Alltoallv(s, counts, sdispls, evens_block, r, counts, displs, evens_block,
                       MPI_COMM_WORLD));
  for (int b = 0; b < n; ++b) check_block(r, n - 1 - b, b, me, "alltoallv");
  free(r);
  r = blocks(n);
  int *sb = malloc(sizeof(int) * (size_t)n);
  for (int b = 0; b < n; ++b) sb[b] = b * 2 * K * (int)sizeof(int);
  MPI_OK(MPI_Ialltoallw(s, counts, sb, types, r, counts, bdispls, types, MPI_COMM_WORLD, &q));
  wait(&q);
  for (int b = 0; b < n; ++b) check_block(r, n - 1 - b, b, me, "ialltoallw");
  /* Ialltoall in place */
  free(r);
  r = blocks(n);
  for (int b = 0; b < n; ++b) fill(r, b, me, b);
  MPI_OK(MPI_Ialltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, 1, evens_block, MPI_COMM_WORLD,
                       &q));
  wait(&q);
  for (int b = 0; b < n; ++b) check_block(r, b, b, me, "ialltoall in place");
  reductions(s, r);
  free(s);
  free(r);
  free(sb);
  free(counts);
  free(displs);
  free(bdispls);
  free(sdispls);
  free(types);
}

int main(int argc, char **argv) {
  prog_name = "coll_holes";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  MPI_OK(MPI_Type_vector(K, 1, 2, MPI_INT, &evens));
  MPI_OK(MPI_Type_create_resized(evens, 0, 2 * K * (MPI_Aint)sizeof(int), &evens_block));
  MPI_OK(MPI_Type_commit(&evens));
  MPI_OK(MPI_Type_commit(&evens_block));
  for (int root = 0; root < wsize; ++root) rooted(root);
  everyone();
  MPI_OK(MPI_Type_free(&evens));
  MPI_OK(MPI_Type_free(&evens_block));
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (wrank == 0) printf("coll_holes ok (%d ranks)\n", wsize);
  MPI_Finalize();
  return 0;
}
