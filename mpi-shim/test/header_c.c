/* Compiled by check_wrappers.sh as strict C99 through mpicc: mpi.h must be
   warning-free under -std=c99 -pedantic -Wall -Wextra -Werror, and a plain
   program must link and run as a singleton (no bcs runtime). */
#include <mpi.h>
#include <stdio.h>

/* A user reduction: must match MPI_User_function exactly. */
static void add_ints(void *in, void *inout, int *len, MPI_Datatype *type) {
  int i;
  (void)type;
  for (i = 0; i < *len; ++i) ((int *)inout)[i] += ((const int *)in)[i];
}

/* Collectives with the const-qualified count arrays of MPI 3.1. */
static int collectives(void) {
  int v[4] = {1, 2, 3, 4}, r[4] = {0, 0, 0, 0};
  const int counts[1] = {2}, displs[1] = {1}, bdispls[1] = {4};
  const MPI_Datatype types[1] = {MPI_INT};
  MPI_Op op = MPI_OP_NULL;
  MPI_Request reqs[3];
  int commute = -1, bad = 0, local = 0;
  bad |= MPI_Bcast(v, 4, MPI_INT, 0, MPI_COMM_WORLD);
  bad |= MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  bad |= MPI_Gatherv(v, 2, MPI_INT, r, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
  bad |= MPI_Alltoallw(v, counts, bdispls, types, r, counts, bdispls, types, MPI_COMM_SELF);
  bad |= MPI_Op_create(add_ints, 1, &op);
  bad |= MPI_Op_commutative(op, &commute);
  bad |= MPI_Reduce(v, r, 4, MPI_INT, op, 0, MPI_COMM_SELF);
  bad |= MPI_Reduce_local(v, r, 4, MPI_INT, op);
  local = r[3]; /* 4 + 4 */
  bad |= MPI_Ibarrier(MPI_COMM_WORLD, &reqs[0]);
  bad |= MPI_Iscan(v, r, 4, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &reqs[1]);
  bad |= MPI_Ireduce_scatter_block(v, r, 4, MPI_INT, op, MPI_COMM_WORLD, &reqs[2]);
  bad |= MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE);
  bad |= MPI_Op_free(&op);
  if (bad || commute != 1 || op != MPI_OP_NULL || local != 8 || r[0] != 1 || MPI_BOTTOM != 0 ||
      MPI_IN_PLACE == MPI_BOTTOM || MPI_NO_OP == MPI_REPLACE)
    return 1;
  return 0;
}

/* Callbacks that must match the attribute callback types exactly. */
static int copy_attr(MPI_Comm oldcomm, int keyval, void *extra, void *in, void *out, int *flag) {
  (void)oldcomm;
  (void)keyval;
  (void)extra;
  *(void **)out = in;
  *flag = 1;
  return MPI_SUCCESS;
}
static int delete_attr(MPI_Comm comm, int keyval, void *val, void *extra) {
  (void)comm;
  (void)keyval;
  (void)val;
  ++*(int *)extra;
  return MPI_SUCCESS;
}

/* Communicators, groups and attributes, with the MPI 3.1 signatures. */
static int communicators(void) {
  MPI_Comm dup = MPI_COMM_NULL, split = MPI_COMM_NULL, made = MPI_COMM_NULL;
  MPI_Group world = MPI_GROUP_NULL, g = MPI_GROUP_NULL;
  MPI_Comm_copy_attr_function *copy = copy_attr;
  MPI_Copy_function *old_copy = MPI_DUP_FN;
  int ranges[1][3] = {{0, 0, 1}};
  const int ranks[1] = {0};
  int out[1] = {-1}, kv = MPI_KEYVAL_INVALID, deletes = 0, flag = 0, cmp = -1, bad = 0, len = 0;
  void *val = NULL;
  char name[MPI_MAX_OBJECT_NAME];
  static char attr;
  bad |= MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  bad |= MPI_Comm_create_keyval(copy, delete_attr, &kv, &deletes);
  bad |= MPI_Comm_set_attr(dup, kv, &attr);
  bad |= MPI_Comm_split(dup, 0, 0, &split);
  bad |= MPI_Comm_group(split, &world);
  bad |= MPI_Group_range_incl(world, 1, ranges, &g);
  bad |= MPI_Group_translate_ranks(g, 1, ranks, world, out);
  bad |= MPI_Comm_create(dup, g, &made);
  bad |= MPI_Comm_compare(made, MPI_COMM_WORLD, &cmp);
  bad |= MPI_Comm_set_name(made, "made");
  bad |= MPI_Comm_get_name(made, name, &len);
  bad |= MPI_Comm_get_attr(made, MPI_UNIVERSE_SIZE, &val, &flag);
  bad |= MPI_Group_free(&g);
  bad |= MPI_Group_free(&world);
  bad |= MPI_Comm_free(&made);
  bad |= MPI_Comm_free(&split);
  bad |= MPI_Comm_free(&dup);
  bad |= MPI_Comm_free_keyval(&kv);
  if (bad || out[0] != 0 || cmp != MPI_CONGRUENT || len != 4 || !flag || *(int *)val != 1 ||
      deletes != 1 || dup != MPI_COMM_NULL || kv != MPI_KEYVAL_INVALID || !old_copy ||
      MPI_IDENT == MPI_UNEQUAL || MPI_ERR_KEYVAL > MPI_ERR_LASTCODE)
    return 1;
  return 0;
}

int main(int argc, char **argv) {
  int rank = -1, size = -1, flag = 0, len = 0, tsize = 0;
  char name[MPI_MAX_PROCESSOR_NAME];
  MPI_Status st;
  MPI_Request reqs[2];
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 2;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Initialized(&flag);
  MPI_Get_processor_name(name, &len);
  MPI_Type_size(MPI_DOUBLE, &tsize);
  MPI_Recv(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
  MPI_Barrier(MPI_COMM_WORLD);
  /* Array arguments with the IGNORE constants must not warn at -O2. */
  MPI_Isend(&tsize, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &reqs[0]);
  MPI_Irecv(&len, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &reqs[1]);
  MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
  MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
  if (rank != 0 || size != 1 || !flag || len <= 0 || tsize != (int)sizeof(double) ||
      st.MPI_SOURCE != MPI_PROC_NULL)
    return 3;
  if (collectives()) return 4;
  if (communicators()) return 5;
  MPI_Finalize();
  printf("c header ok\n");
  return 0;
}
