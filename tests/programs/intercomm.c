/* Intercommunicators, checked against the rank arithmetic:
   - MPI_Intercomm_create over MPI_COMM_WORLD from two halves (the upper
     half one larger for odd sizes), remote size and group, test_inter;
   - point-to-point across: every rank sends to remote rank (r % remote
     size), receives with MPI_ANY_SOURCE, checks source and data;
   - MPI_Intercomm_merge with high on the lower half: upper half first;
   - MPI_Comm_dup and MPI_Comm_split (by parity) of the intercommunicator,
     traffic on each; MPI_Comm_create with a subgroup;
   - MPI_Iscan (not defined on intercommunicators) returns MPI_ERR_COMM
     (the defined collectives are in intercoll.c). */
#include <stdlib.h>

#include "prog_common.h"

static int wrank, wsize;

/* Each rank r of one side sends its world rank to remote rank r % rsize;
   every remote rank receives as many messages as name it. */
static void traffic(MPI_Comm ic, int tag) {
  int lr, ls, rs;
  MPI_OK(MPI_Comm_rank(ic, &lr));
  MPI_OK(MPI_Comm_size(ic, &ls));
  MPI_OK(MPI_Comm_remote_size(ic, &rs));
  MPI_Request q;
  MPI_OK(MPI_Isend(&wrank, 1, MPI_INT, lr % rs, tag, ic, &q));
  int expect = 0;
  for (int r = 0; r < rs; ++r) expect += (r % ls) == lr;
  MPI_Group rg, wg;
  MPI_OK(MPI_Comm_remote_group(ic, &rg));
  MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
  for (int i = 0; i < expect; ++i) {
    int got = -1, wr = -1;
    MPI_Status st;
    MPI_OK(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, tag, ic, &st));
    CHECK(st.MPI_SOURCE % ls == lr, "source %d", st.MPI_SOURCE);
    MPI_OK(MPI_Group_translate_ranks(rg, 1, &st.MPI_SOURCE, wg, &wr));
    CHECK(got == wr, "got %d from remote %d (world %d)", got, st.MPI_SOURCE, wr);
  }
  MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
  MPI_OK(MPI_Group_free(&rg));
  MPI_OK(MPI_Group_free(&wg));
}

int main(int argc, char **argv) {
  prog_name = "intercomm";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  if (wsize < 2) {
    if (wrank == 0) printf("intercomm ok (%d ranks, nothing to do)\n", wsize);
    MPI_Finalize();
    return 0;
  }
  const int half = wsize / 2, lower = wrank < half;
  MPI_Comm local, ic, merged, dup, par, sub;
  MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, lower, wrank, &local));
  MPI_OK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, lower ? half : 0, 77, &ic));
  MPI_OK(MPI_Comm_free(&local)); /* the intercommunicator does not need it */
  int flag = 0, rs = 0, ls = 0;
  MPI_OK(MPI_Comm_test_inter(ic, &flag));
  CHECK(flag, "test_inter");
  MPI_OK(MPI_Comm_test_inter(MPI_COMM_WORLD, &flag));
  CHECK(!flag, "WORLD is not inter");
  MPI_OK(MPI_Comm_size(ic, &ls));
  MPI_OK(MPI_Comm_remote_size(ic, &rs));
  CHECK(ls == (lower ? half : wsize - half) && rs == wsize - ls, "sizes %d/%d", ls, rs);
  traffic(ic, 1);

  /* Merge: the lower half says high, so the upper half comes first. */
  int mr = -1;
  MPI_OK(MPI_Intercomm_merge(ic, lower, &merged));
  MPI_OK(MPI_Comm_rank(merged, &mr));
  CHECK(mr == (lower ? (wsize - half) + wrank : wrank - half), "merged rank %d", mr);
  int sum = 0;
  MPI_OK(MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, merged));
  CHECK(sum == wsize * (wsize - 1) / 2, "merged allreduce %d", sum);

  MPI_OK(MPI_Comm_dup(ic, &dup));
  traffic(dup, 2);
  /* Split by parity of the local rank: both sides have parity 0 (local
     rank 0 exists on both); parity 1 exists on a side only if it has 2+. */
  int lr;
  MPI_OK(MPI_Comm_rank(ic, &lr));
  MPI_OK(MPI_Comm_split(ic, lr % 2, lr, &par));
  const int both_odd = half >= 2 && wsize - half >= 2;
  if (lr % 2 == 0 || both_odd) {
    CHECK(par != MPI_COMM_NULL, "parity split gave MPI_COMM_NULL");
    traffic(par, 3);
    MPI_OK(MPI_Comm_free(&par));
  } else {
    CHECK(par == MPI_COMM_NULL, "parity 1 without a remote side");
  }
  /* Create: each side keeps its local rank 0 only. */
  MPI_Group g, g0;
  int zero = 0;
  MPI_OK(MPI_Comm_group(ic, &g));
  MPI_OK(MPI_Group_incl(g, 1, &zero, &g0));
  MPI_OK(MPI_Comm_create(ic, g0, &sub));
  if (lr == 0) {
    CHECK(sub != MPI_COMM_NULL, "create: rank 0 left out");
    MPI_OK(MPI_Comm_remote_size(sub, &rs));
    CHECK(rs == 1, "create: remote size %d", rs);
    traffic(sub, 4);
    MPI_OK(MPI_Comm_free(&sub));
  } else {
    CHECK(sub == MPI_COMM_NULL, "create: non-member got a communicator");
  }
  MPI_OK(MPI_Group_free(&g0));
  MPI_OK(MPI_Group_free(&g));

  MPI_OK(MPI_Comm_set_errhandler(ic, MPI_ERRORS_RETURN));
  MPI_Request q;
  int in = 1, out = 0;
  CHECK(MPI_Iscan(&in, &out, 1, MPI_INT, MPI_SUM, ic, &q) == MPI_ERR_COMM,
        "MPI_Iscan on an intercommunicator");
  MPI_OK(MPI_Comm_free(&dup));
  MPI_OK(MPI_Comm_free(&merged));
  MPI_OK(MPI_Comm_free(&ic));
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (wrank == 0) printf("intercomm ok (%d ranks)\n", wsize);
  MPI_Finalize();
  return 0;
}
