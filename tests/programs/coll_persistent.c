/* Persistent collectives (MPI 4.0), data checked every round:
   - MPI_Bcast_init, MPI_Allreduce_init, MPI_Gather_init, MPI_Alltoallv_init
     and MPI_Barrier_init on the world, started 20 times with new data each
     round (MPI_Start and MPI_Startall; MPI_Wait, MPI_Waitall and an
     MPI_Testall loop), and MPI_Reduce_init with a user op (not
     commutative) on half the world;
   - the members start two of them in opposite orders: they match by the
     order of the init calls (MPI 4.0), not of the starts;
   - an inactive one completes at once with an empty status; starting an
     active one is MPI_ERR_REQUEST; a datatype freed after init still works;
   - MPI_Neighbor_alltoall_init on a periodic ring;
   - MPI_Request_free of each, and nothing left over at MPI_Finalize. */
#include <string.h>

#include "prog_common.h"

enum { ROUNDS = 20, N = 8 };

static int wrank, wsize;

/* a op b = a: associative, not commutative; the result is rank 0's. */
static void keep_first(void *in, void *inout, int *len, MPI_Datatype *t) {
  (void)t;
  memcpy(inout, in, sizeof(int) * (size_t)*len);
}

static void world_rounds(void) {
  int bc[N], sum_in[N], sum_out[N], gin[2], *gout = malloc(sizeof(int) * 2 * wsize);
  int *a2a_s = malloc(sizeof(int) * wsize * 2), *a2a_r = malloc(sizeof(int) * wsize * 2);
  int *sc = malloc(sizeof(int) * wsize), *sd = malloc(sizeof(int) * wsize);
  CHECK(gout && a2a_s && a2a_r && sc && sd, "out of memory");
  for (int j = 0; j < wsize; ++j) {
    sc[j] = 2;
    sd[j] = 2 * j;
  }
  MPI_Datatype pair;
  MPI_OK(MPI_Type_contiguous(2, MPI_INT, &pair));
  MPI_OK(MPI_Type_commit(&pair));
  const int root = wsize - 1;
  MPI_Request r[5];
  MPI_OK(MPI_Bcast_init(bc, N, MPI_INT, root, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]));
  MPI_OK(MPI_Allreduce_init(sum_in, sum_out, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL,
                            &r[1]));
  MPI_OK(MPI_Gather_init(gin, 1, pair, gout, 1, pair, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r[2]));
  MPI_OK(MPI_Type_free(&pair)); /* the request keeps what it needs */
  MPI_OK(MPI_Alltoallv_init(a2a_s, sc, sd, MPI_INT, a2a_r, sc, sd, MPI_INT, MPI_COMM_WORLD,
                            MPI_INFO_NULL, &r[3]));
  MPI_OK(MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &r[4]));
  /* Inactive: complete at once, handle kept. */
  MPI_Status st;
  MPI_OK(MPI_Wait(&r[0], &st));
  CHECK(r[0] != MPI_REQUEST_NULL && st.MPI_TAG == MPI_ANY_TAG, "inactive wait");
  for (int round = 0; round < ROUNDS; ++round) {
    for (int i = 0; i < N; ++i) {
      bc[i] = wrank == root ? round * 100 + i : -1;
      sum_in[i] = wrank + round + i;
      sum_out[i] = -1;
    }
    gin[0] = wrank;
    gin[1] = round;
    for (int j = 0; j < wsize; ++j) {
      a2a_s[2 * j] = wrank * 1000 + j;
      a2a_s[2 * j + 1] = round;
      a2a_r[2 * j] = a2a_r[2 * j + 1] = -1;
    }
    switch (round % 3) {
      case 0:
        MPI_OK(MPI_Startall(5, r));
        MPI_OK(MPI_Waitall(5, r, MPI_STATUSES_IGNORE));
        break;
      case 1:
        for (int k = 0; k < 5; ++k) MPI_OK(MPI_Start(&r[k]));
        for (int k = 4; k >= 0; --k) MPI_OK(MPI_Wait(&r[k], MPI_STATUS_IGNORE));
        break;
      default: {
        MPI_OK(MPI_Startall(5, r));
        int flag = 0;
        while (!flag) MPI_OK(MPI_Testall(5, r, &flag, MPI_STATUSES_IGNORE));
      }
    }
    for (int k = 0; k < 5; ++k) CHECK(r[k] != MPI_REQUEST_NULL, "round %d: handle %d lost", round, k);
    for (int i = 0; i < N; ++i) {
      CHECK(bc[i] == round * 100 + i, "round %d: bcast[%d] = %d", round, i, bc[i]);
      const int want = wsize * (wsize - 1) / 2 + wsize * (round + i);
      CHECK(sum_out[i] == want, "round %d: allreduce[%d] = %d, want %d", round, i, sum_out[i],
            want);
    }
    if (wrank == 0)
      for (int j = 0; j < wsize; ++j)
        CHECK(gout[2 * j] == j && gout[2 * j + 1] == round, "round %d: gather[%d] = %d %d", round,
              j, gout[2 * j], gout[2 * j + 1]);
    for (int j = 0; j < wsize; ++j)
      CHECK(a2a_r[2 * j] == j * 1000 + wrank && a2a_r[2 * j + 1] == round,
            "round %d: alltoallv from %d = %d %d", round, j, a2a_r[2 * j], a2a_r[2 * j + 1]);
  }
  /* Starting an active one is an error (returned here), and changes nothing. */
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_OK(MPI_Start(&r[4]));
  int cls = 0;
  MPI_OK(MPI_Error_class(MPI_Start(&r[4]), &cls));
  CHECK(cls == MPI_ERR_REQUEST, "start of an active request: class %d", cls);
  MPI_OK(MPI_Wait(&r[4], MPI_STATUS_IGNORE));
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  for (int k = 0; k < 5; ++k) {
    MPI_OK(MPI_Request_free(&r[k]));
    CHECK(r[k] == MPI_REQUEST_NULL, "freed handle %d", k);
  }
  free(gout);
  free(a2a_s);
  free(a2a_r);
  free(sc);
  free(sd);
}

/* MPI 4.0: members may start persistent collectives in different orders. */
static void start_order(void) {
  int a = -1, b = -1;
  MPI_Request r[2];
  MPI_OK(MPI_Bcast_init(&a, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r[0]));
  MPI_OK(MPI_Bcast_init(&b, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r[1]));
  for (int round = 0; round < 5; ++round) {
    if (wrank == 0) {
      a = 10 + round;
      b = 20 + round;
    }
    if (wrank % 2 == 0) {
      MPI_OK(MPI_Start(&r[0]));
      MPI_OK(MPI_Start(&r[1]));
    } else {
      MPI_OK(MPI_Start(&r[1]));
      MPI_OK(MPI_Start(&r[0]));
    }
    MPI_OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    CHECK(a == 10 + round && b == 20 + round, "start order round %d: a %d b %d", round, a, b);
  }
  MPI_OK(MPI_Request_free(&r[0]));
  MPI_OK(MPI_Request_free(&r[1]));
}

/* A user op (not commutative) on a sub-communicator, root 0 of it. */
static void user_op_half(void) {
  MPI_Comm half;
  MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half));
  int hr, hs;
  MPI_Comm_rank(half, &hr);
  MPI_Comm_size(half, &hs);
  MPI_Op op;
  MPI_OK(MPI_Op_create(keep_first, 0, &op));
  int in[2], out[2];
  MPI_Request r;
  MPI_OK(MPI_Reduce_init(in, out, 2, MPI_INT, op, 0, half, MPI_INFO_NULL, &r));
  for (int round = 0; round < 5; ++round) {
    in[0] = hr + round;
    in[1] = hr * 7;
    out[0] = out[1] = -1;
    MPI_OK(MPI_Start(&r));
    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    if (hr == 0)
      CHECK(out[0] == round && out[1] == 0, "user op round %d: %d %d (of %d ranks)", round, out[0],
            out[1], hs);
  }
  MPI_OK(MPI_Request_free(&r));
  MPI_OK(MPI_Op_free(&op));
  MPI_OK(MPI_Comm_free(&half));
}

static void neighbours(void) {
  int dims[1] = {wsize}, periods[1] = {1};
  MPI_Comm ring;
  MPI_OK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
  int left, right, me;
  MPI_Comm_rank(ring, &me);
  MPI_OK(MPI_Cart_shift(ring, 0, 1, &left, &right));
  int out[2], in[2];
  MPI_Request r;
  MPI_OK(MPI_Neighbor_alltoall_init(out, 1, MPI_INT, in, 1, MPI_INT, ring, MPI_INFO_NULL, &r));
  for (int round = 0; round < 5; ++round) {
    out[0] = me * 10 + round;      /* to the left neighbour */
    out[1] = me * 10 + round + 5;  /* to the right one */
    in[0] = in[1] = -1;
    MPI_OK(MPI_Start(&r));
    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(in[0] == left * 10 + round + 5 && in[1] == right * 10 + round,
          "neighbour round %d: %d %d", round, in[0], in[1]);
  }
  MPI_OK(MPI_Request_free(&r));
  MPI_OK(MPI_Comm_free(&ring));
}

int main(int argc, char **argv) {
  prog_name = "coll_persistent";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  world_rounds();
  start_order();
  user_op_half();
  neighbours();
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (wrank == 0) printf("coll_persistent ok (%d ranks)\n", wsize);
  MPI_Finalize();
  return 0;
}
