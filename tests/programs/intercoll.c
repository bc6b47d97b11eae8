/* Collectives on an intercommunicator, each checked against the rank
   arithmetic, in both directions; blocking, or with the argument "nb" each
   as its non-blocking form followed by MPI_Wait (plus a non-blocking
   allreduce that must not wait for the other group at its post). The two groups are the lower and the
   upper half of WORLD (the upper one larger for odd sizes); the local
   leader of the lower half is its last rank, not its first, so merge and
   dup must not assume the creation leader is rank 0.
     Barrier, Bcast, Reduce, Allreduce, Gather(v), Scatter(v), Allgather(v),
     Alltoall(v, w), Reduce_scatter(_block); then MPI_Intercomm_merge,
     MPI_Comm_dup (attributes copied) and a non-blocking MPI_Comm_idup with
     traffic; MPI_Iscan (not defined on intercommunicators) returns
     MPI_ERR_COMM; a bad root returns MPI_ERR_ROOT. */
#include <stdlib.h>
#include <string.h>

#include "prog_common.h"

static int wrank, wsize, half, lower, lr, ls, rs, x_unused, nb;

/* C(MPI_Bcast, MPI_Ibcast, args...): the first, or in "nb" mode the second
   with &rq appended, then MPI_Wait. */
static MPI_Request rq;
static int wait_rq(int e) { return e != MPI_SUCCESS ? e : MPI_Wait(&rq, MPI_STATUS_IGNORE); }
#define C(b, i, ...) (nb ? wait_rq(i(__VA_ARGS__, &rq)) : b(__VA_ARGS__))

/* World rank of remote rank j (the halves keep WORLD's order). */
static int remote_world(int j) { return lower ? half + j : j; }
static int group_world_sum(int upper_group) {
  int s = 0;
  for (int w = upper_group ? half : 0; w < (upper_group ? wsize : half); ++w) s += w;
  return s;
}

/* Rooted collectives with the root at local rank `root_lr` of the lower
   group (upper = 0) or the upper group (upper = 1). Returns the root
   argument this process passes. */
static int root_arg(int upper, int root_lr) {
  const int in_root_group = upper ? !lower : lower;
  if (!in_root_group) return root_lr;
  return lr == root_lr ? MPI_ROOT : MPI_PROC_NULL;
}

static void rooted(MPI_Comm ic, int upper, int root_lr) {
  const int root = root_arg(upper, root_lr);
  const int receiving = root >= 0; /* the other group: its members take part */
  int buf[3];
  /* Bcast: the root's values reach every member of the other group. */
  for (int k = 0; k < 3; ++k) buf[k] = root == MPI_ROOT ? 1000 * k + wrank : -1;
  MPI_OK(C(MPI_Bcast, MPI_Ibcast, buf, 3, MPI_INT, root, ic));
  if (receiving) {
    const int rw = remote_world(root_lr);
    for (int k = 0; k < 3; ++k) CHECK(buf[k] == 1000 * k + rw, "bcast[%d] = %d", k, buf[k]);
  }
  /* Reduce: the other group's (world rank + k) summed at the root. */
  int in[3], out[3] = {-1, -1, -1};
  for (int k = 0; k < 3; ++k) in[k] = wrank + k;
  MPI_OK(C(MPI_Reduce, MPI_Ireduce, in, out, 3, MPI_INT, MPI_SUM, root, ic));
  if (root == MPI_ROOT)
    for (int k = 0; k < 3; ++k)
      CHECK(out[k] == group_world_sum(lower) + rs * k, "reduce[%d] = %d", k, out[k]);
  /* Gather: 2 ints from each member of the other group, in rank order. */
  int *all = malloc(sizeof(int) * 2 * (size_t)(rs + ls));
  int two[2] = {wrank, wrank * 10};
  MPI_OK(C(MPI_Gather, MPI_Igather, two, 2, MPI_INT, all, 2, MPI_INT, root, ic));
  if (root == MPI_ROOT)
    for (int j = 0; j < rs; ++j)
      CHECK(all[2 * j] == remote_world(j) && all[2 * j + 1] == 10 * remote_world(j),
            "gather block %d = %d,%d", j, all[2 * j], all[2 * j + 1]);
  /* Gatherv: blocks of j + 1 ints, in reverse order of rank. */
  int *counts = malloc(sizeof(int) * (size_t)rs), *displs = malloc(sizeof(int) * (size_t)rs);
  int total = 0;
  for (int j = rs - 1; j >= 0; --j) {
    counts[j] = j + 1;
    displs[j] = total;
    total += j + 1;
  }
  int *vbuf = malloc(sizeof(int) * (size_t)(total + ls + 1));
  int *mine = malloc(sizeof(int) * (size_t)(lr + 1));
  for (int k = 0; k <= lr; ++k) mine[k] = wrank * 100 + k;
  MPI_OK(C(MPI_Gatherv, MPI_Igatherv, mine, lr + 1, MPI_INT, vbuf, counts, displs, MPI_INT, root, ic));
  if (root == MPI_ROOT)
    for (int j = 0; j < rs; ++j)
      for (int k = 0; k <= j; ++k)
        CHECK(vbuf[displs[j] + k] == remote_world(j) * 100 + k, "gatherv %d/%d = %d", j, k,
              vbuf[displs[j] + k]);
  /* Scatter: member j of the other group gets 7 * j + 1. */
  for (int j = 0; j < rs; ++j) all[j] = 7 * j + 1;
  int one = -1;
  MPI_OK(C(MPI_Scatter, MPI_Iscatter, all, 1, MPI_INT, &one, 1, MPI_INT, root, ic));
  if (receiving) CHECK(one == 7 * lr + 1, "scatter got %d", one);
  /* Scatterv: the gatherv layout back. */
  for (int j = 0; j < rs; ++j)
    for (int k = 0; k <= j; ++k) vbuf[displs[j] + k] = j * 50 + k;
  memset(mine, 0xff, sizeof(int) * (size_t)(lr + 1));
  MPI_OK(C(MPI_Scatterv, MPI_Iscatterv, vbuf, counts, displs, MPI_INT, mine, lr + 1, MPI_INT, root, ic));
  if (receiving)
    for (int k = 0; k <= lr; ++k) CHECK(mine[k] == lr * 50 + k, "scatterv[%d] = %d", k, mine[k]);
  free(all);
  free(counts);
  free(displs);
  free(vbuf);
  free(mine);
}

static void everyone(MPI_Comm ic) {
  MPI_OK(C(MPI_Barrier, MPI_Ibarrier, ic));
  /* Allreduce: each side gets the other side's sum. */
  int in[2] = {wrank, 1}, out[2] = {-1, -1};
  MPI_OK(C(MPI_Allreduce, MPI_Iallreduce, in, out, 2, MPI_INT, MPI_SUM, ic));
  CHECK(out[0] == group_world_sum(lower) && out[1] == rs, "allreduce %d %d", out[0], out[1]);
  /* Allgather(v): everyone's world rank from every remote member. */
  int *got = malloc(sizeof(int) * (size_t)rs * 4), *counts = malloc(sizeof(int) * (size_t)rs),
      *displs = malloc(sizeof(int) * (size_t)rs);
  MPI_OK(C(MPI_Allgather, MPI_Iallgather, &wrank, 1, MPI_INT, got, 1, MPI_INT, ic));
  for (int j = 0; j < rs; ++j) CHECK(got[j] == remote_world(j), "allgather[%d] = %d", j, got[j]);
  for (int j = 0; j < rs; ++j) {
    counts[j] = 1;
    displs[j] = rs - 1 - j;
  }
  MPI_OK(C(MPI_Allgatherv, MPI_Iallgatherv, &wrank, 1, MPI_INT, got, counts, displs, MPI_INT, ic));
  for (int j = 0; j < rs; ++j)
    CHECK(got[rs - 1 - j] == remote_world(j), "allgatherv[%d] = %d", j, got[rs - 1 - j]);
  /* Alltoall: block j to remote j is wrank * 1000 + j. */
  int *send = malloc(sizeof(int) * (size_t)rs);
  for (int j = 0; j < rs; ++j) send[j] = wrank * 1000 + j;
  MPI_OK(C(MPI_Alltoall, MPI_Ialltoall, send, 1, MPI_INT, got, 1, MPI_INT, ic));
  for (int j = 0; j < rs; ++j)
    CHECK(got[j] == remote_world(j) * 1000 + lr, "alltoall[%d] = %d", j, got[j]);
  /* Alltoallv with the receive blocks reversed. */
  int *sd = malloc(sizeof(int) * (size_t)rs);
  for (int j = 0; j < rs; ++j) sd[j] = j;
  MPI_OK(C(MPI_Alltoallv, MPI_Ialltoallv, send, counts, sd, MPI_INT, got, counts, displs, MPI_INT, ic));
  for (int j = 0; j < rs; ++j)
    CHECK(got[rs - 1 - j] == remote_world(j) * 1000 + lr, "alltoallv[%d]", j);
  /* Alltoallw: byte displacements, per-block types. */
  int *sdb = malloc(sizeof(int) * (size_t)rs), *rdb = malloc(sizeof(int) * (size_t)rs);
  MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)rs);
  for (int j = 0; j < rs; ++j) {
    sdb[j] = j * (int)sizeof(int);
    rdb[j] = displs[j] * (int)sizeof(int);
    types[j] = MPI_INT;
  }
  memset(got, 0, sizeof(int) * (size_t)rs);
  MPI_OK(C(MPI_Alltoallw, MPI_Ialltoallw, send, counts, sdb, types, got, counts, rdb, types, ic));
  for (int j = 0; j < rs; ++j)
    CHECK(got[rs - 1 - j] == remote_world(j) * 1000 + lr, "alltoallw[%d]", j);
  /* Reduce_scatter_block: both sides reduce ls * rcount = ls * rs elements;
     element k of a side's result is sum(world rank) + size * k, and member
     j of the other side receives elements j*rcount ... */
  const int n = ls * rs;
  int *sb = malloc(sizeof(int) * (size_t)n), *rb = malloc(sizeof(int) * (size_t)n);
  for (int k = 0; k < n; ++k) sb[k] = wrank + k;
  MPI_OK(C(MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, sb, rb, rs, MPI_INT, MPI_SUM, ic));
  for (int i = 0; i < rs; ++i) {
    const int k = lr * rs + i;
    CHECK(rb[i] == group_world_sum(lower) + rs * k, "reduce_scatter_block[%d] = %d", i, rb[i]);
  }
  /* Reduce_scatter with the same counts as a vector. */
  int *rc = malloc(sizeof(int) * (size_t)ls);
  for (int i = 0; i < ls; ++i) rc[i] = rs;
  MPI_OK(C(MPI_Reduce_scatter, MPI_Ireduce_scatter, sb, rb, rc, MPI_INT, MPI_SUM, ic));
  for (int i = 0; i < rs; ++i)
    CHECK(rb[i] == group_world_sum(lower) + rs * (lr * rs + i), "reduce_scatter[%d]", i);
  free(got);
  free(counts);
  free(displs);
  free(send);
  free(sd);
  free(sdb);
  free(rdb);
  free(types);
  free(sb);
  free(rb);
  free(rc);
}

int main(int argc, char **argv) {
  prog_name = "intercoll";
  MPI_Init(&argc, &argv);
  nb = argc > 1 && strcmp(argv[1], "nb") == 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  if (wsize < 2) {
    if (wrank == 0) printf("intercoll ok (%d ranks, nothing to do)\n", wsize);
    MPI_Finalize();
    return 0;
  }
  half = wsize / 2;
  lower = wrank < half;
  MPI_Comm local, ic, merged, dup;
  MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, lower, wrank, &local));
  /* Leaders: the lower half's last rank, the upper half's first. */
  MPI_OK(MPI_Intercomm_create(local, lower ? half - 1 : 0, MPI_COMM_WORLD, lower ? half : half - 1,
                              5, &ic));
  MPI_OK(MPI_Comm_free(&local));
  MPI_OK(MPI_Comm_rank(ic, &lr));
  MPI_OK(MPI_Comm_size(ic, &ls));
  MPI_OK(MPI_Comm_remote_size(ic, &rs));
  CHECK(lr == (lower ? wrank : wrank - half), "local rank %d", lr);

  everyone(ic);
  if (nb) {
    /* The post returns before the other group has entered: the upper
       group's rank 0 synchronously sends to the lower group's rank 0
       before posting, which receives only after posting. */
    int sum = -1, token = 0;
    MPI_Request q;
    if (lower) {
      MPI_OK(MPI_Iallreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, ic, &q));
      if (lr == 0) MPI_OK(MPI_Recv(&token, 1, MPI_INT, 0, 11, ic, MPI_STATUS_IGNORE));
    } else {
      if (lr == 0) MPI_OK(MPI_Ssend(&lr, 1, MPI_INT, 0, 11, ic));
      MPI_OK(MPI_Iallreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, ic, &q));
    }
    MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    CHECK(sum == group_world_sum(lower), "iallreduce %d", sum);
  }
  /* Roots at the first and the last rank of each group. */
  for (int upper = 0; upper <= 1; ++upper) {
    const int size = upper ? wsize - half : half;
    rooted(ic, upper, 0);
    rooted(ic, upper, size - 1);
  }

  /* Merge and dup after a creation led by a non-zero local rank. */
  int mr = -1, sum = 0;
  MPI_OK(MPI_Intercomm_merge(ic, !lower, &merged));
  MPI_OK(MPI_Comm_rank(merged, &mr));
  CHECK(mr == wrank, "merged rank %d", mr);
  MPI_OK(MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, merged));
  CHECK(sum == wsize * (wsize - 1) / 2, "merged allreduce %d", sum);
  /* The dup copies attributes (MPI_COMM_DUP_FN); a freed keyval still
     names its attributes until they are deleted (MPI-3.1 6.7.2). */
  int key = MPI_KEYVAL_INVALID, key_copy, attr_val = 77, *got = NULL, found = 0;
  MPI_OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &key, NULL));
  MPI_OK(MPI_Comm_set_attr(ic, key, &attr_val));
  MPI_OK(MPI_Comm_dup(ic, &dup));
  MPI_OK(MPI_Comm_get_attr(dup, key, &got, &found));
  CHECK(found && got == &attr_val, "attribute not copied by the intercommunicator dup");
  key_copy = key;
  MPI_OK(MPI_Comm_free_keyval(&key));
  CHECK(key == MPI_KEYVAL_INVALID, "free_keyval did not reset the handle");
  MPI_OK(MPI_Comm_get_attr(ic, key_copy, &got, &found));
  CHECK(found && got == &attr_val, "attribute lost when its keyval was freed");
  MPI_OK(MPI_Comm_delete_attr(ic, key_copy));
  MPI_OK(MPI_Comm_delete_attr(dup, key_copy));
  everyone(dup);

  /* MPI_Comm_idup returns before the group has agreed: members other than
     the leader talk to the other group's leader between idup and wait
     (a blocking idup would deadlock here). */
  MPI_Comm idup;
  MPI_Request iq;
  if (lr == 0) {
    for (int j = 1; j < rs; ++j)
      MPI_OK(MPI_Recv(&x_unused, 1, MPI_INT, j, 9, ic, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Comm_idup(ic, &idup, &iq));
    MPI_OK(MPI_Wait(&iq, MPI_STATUS_IGNORE));
  } else {
    MPI_OK(MPI_Comm_idup(ic, &idup, &iq));
    MPI_OK(MPI_Ssend(&lr, 1, MPI_INT, 0, 9, ic));
    MPI_OK(MPI_Wait(&iq, MPI_STATUS_IGNORE));
  }
  everyone(idup);
  MPI_OK(MPI_Comm_free(&idup));

  MPI_OK(MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN));
  MPI_Request q;
  int in1 = 1, out1 = 0;
  CHECK(MPI_Iscan(&in1, &out1, 1, MPI_INT, MPI_SUM, ic, &q) == MPI_ERR_COMM,
        "MPI_Iscan on an intercommunicator");
  int x = 0, err = MPI_Bcast(&x, 1, MPI_INT, rs, ic), cls = -1;
  MPI_Error_class(err, &cls);
  CHECK(cls == MPI_ERR_ROOT, "bcast with root %d returned class %d", rs, cls);
  MPI_OK(MPI_Comm_free(&dup));
  MPI_OK(MPI_Comm_free(&merged));
  MPI_OK(MPI_Comm_free(&ic));
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (wrank == 0) printf("intercoll ok (%d ranks%s)\n", wsize, nb ? ", non-blocking" : "");
  MPI_Finalize();
  return 0;
}
