/* MPI_Isendrecv and MPI_Isendrecv_replace (MPI 4.0), data checked:
   - around the ring, a small (inline) and a 1 MiB (chunked) exchange per
     round, completed in turn by MPI_Wait, MPI_Waitall, MPI_Waitany,
     MPI_Testsome and MPI_Request_get_status; the status is the receive's;
   - the request is not complete while its send is not: rank 0's receive
     is satisfied at once, but its 1 MiB send cannot finish before rank 1
     posts the receive, which rank 1 does only when rank 0 says so after
     testing the request (it must find it pending);
   - MPI_Isendrecv_replace with a strided type and with 1 MiB;
   - a receive from MPI_PROC_NULL whose send is real: the request
     completes with the empty status once the send is done;
   - MPI_Request_free of a pending MPI_Isendrecv: the peer still gets
     every byte;
   - a wrong destination returns MPI_ERR_RANK and posts nothing. */
#include <string.h>

#include "prog_common.h"

enum { BIG = 1 << 18 }; /* ints: 1 MiB */

static int wrank, wsize, to, from;

static int val(int r, int round, int i) { return r * 1000000 + round * 1000 + i % 1000; }

static void fill(int *a, int n, int r, int round) {
  for (int i = 0; i < n; ++i) a[i] = val(r, round, i);
}

static void expect(const int *a, int n, int r, int round, const char *what) {
  for (int i = 0; i < n; ++i)
    CHECK(a[i] == val(r, round, i), "%s round %d [%d] = %d, want %d", what, round, i, a[i],
          val(r, round, i));
}

static void ring(int *sbig, int *rbig) {
  enum { ROUNDS = 10 };
  for (int round = 0; round < ROUNDS; ++round) {
    int ssmall[4], rsmall[4] = {-1, -1, -1, -1};
    fill(ssmall, 4, wrank, round);
    fill(sbig, BIG, wrank, round);
    memset(rbig, 0xff, BIG * sizeof(int));
    MPI_Request r[2];
    MPI_Status st[2];
    MPI_OK(MPI_Isendrecv(ssmall, 4, MPI_INT, to, 1, rsmall, 4, MPI_INT, from, 1, MPI_COMM_WORLD,
                         &r[0]));
    MPI_OK(MPI_Isendrecv(sbig, BIG, MPI_INT, to, 2, rbig, BIG, MPI_INT, from, 2, MPI_COMM_WORLD,
                         &r[1]));
    switch (round % 5) {
      case 0:
        MPI_OK(MPI_Wait(&r[0], &st[0]));
        MPI_OK(MPI_Wait(&r[1], &st[1]));
        break;
      case 1:
        MPI_OK(MPI_Waitall(2, r, st));
        break;
      case 2:
        for (int k = 0; k < 2; ++k) {
          int idx = -1;
          MPI_Status one;
          MPI_OK(MPI_Waitany(2, r, &idx, &one));
          CHECK(idx == 0 || idx == 1, "waitany index %d", idx);
          st[idx] = one;
        }
        break;
      case 3: {
        int left = 2;
        while (left > 0) {
          int n = 0, idx[2];
          MPI_Status some[2];
          MPI_OK(MPI_Testsome(2, r, &n, idx, some));
          for (int k = 0; k < n; ++k) st[idx[k]] = some[k];
          left -= n;
        }
        break;
      }
      default:
        for (int k = 0; k < 2; ++k) {
          int flag = 0;
          while (!flag) MPI_OK(MPI_Request_get_status(r[k], &flag, &st[k]));
          MPI_OK(MPI_Wait(&r[k], MPI_STATUS_IGNORE));
        }
    }
    CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "round %d: handles not freed",
          round);
    for (int k = 0; k < 2; ++k) {
      int n = -1;
      MPI_OK(MPI_Get_count(&st[k], MPI_INT, &n));
      CHECK(st[k].MPI_SOURCE == from && st[k].MPI_TAG == k + 1 && n == (k ? BIG : 4),
            "round %d request %d: status source %d tag %d count %d", round, k, st[k].MPI_SOURCE,
            st[k].MPI_TAG, n);
    }
    expect(rsmall, 4, from, round, "small");
    expect(rbig, BIG, from, round, "big");
  }
}

/* Ranks 0 and 1 only. */
static void send_half(int *sbig, int *rbig) {
  if (wsize < 2 || wrank > 1) return;
  int small = val(wrank, 30, 0), got = -1, go = 1;
  if (wrank == 0) {
    MPI_Request r;
    fill(sbig, BIG, 0, 30);
    MPI_OK(MPI_Isendrecv(sbig, BIG, MPI_INT, 1, 31, &got, 1, MPI_INT, 1, 32, MPI_COMM_WORLD, &r));
    /* Rank 1 sent tag 32 before tag 33: once tag 33 is here, so is 32
       (same sender and communicator, and bcs completes them in order). */
    int after = -1;
    MPI_OK(MPI_Recv(&after, 1, MPI_INT, 1, 33, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    int flag = 1;
    MPI_OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    CHECK(!flag, "MPI_Isendrecv complete while its send had no receive");
    MPI_Status st;
    MPI_OK(MPI_Request_get_status(r, &flag, &st));
    CHECK(!flag, "MPI_Request_get_status: complete while its send had no receive");
    MPI_OK(MPI_Send(&go, 1, MPI_INT, 1, 34, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&r, &st));
    CHECK(got == val(1, 30, 0) && st.MPI_SOURCE == 1 && st.MPI_TAG == 32,
          "send half: got %d from %d tag %d", got, st.MPI_SOURCE, st.MPI_TAG);
  } else {
    MPI_OK(MPI_Send(&small, 1, MPI_INT, 0, 32, MPI_COMM_WORLD));
    MPI_OK(MPI_Send(&small, 1, MPI_INT, 0, 33, MPI_COMM_WORLD));
    MPI_OK(MPI_Recv(&go, 1, MPI_INT, 0, 34, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Recv(rbig, BIG, MPI_INT, 0, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    expect(rbig, BIG, 0, 30, "send half");
  }
}

static void replace(int *big) {
  /* every 3rd of 30 ints */
  int a[30];
  MPI_Datatype v;
  MPI_OK(MPI_Type_vector(10, 1, 3, MPI_INT, &v));
  MPI_OK(MPI_Type_commit(&v));
  for (int i = 0; i < 30; ++i) a[i] = val(wrank, 40, i);
  MPI_Request r[2];
  MPI_OK(MPI_Isendrecv_replace(a, 1, v, to, 41, from, 41, MPI_COMM_WORLD, &r[0]));
  MPI_OK(MPI_Type_free(&v)); /* the request keeps what it needs */
  fill(big, BIG, wrank, 42);
  MPI_OK(MPI_Isendrecv_replace(big, BIG, MPI_INT, to, 42, from, 42, MPI_COMM_WORLD, &r[1]));
  MPI_Status st[2];
  MPI_OK(MPI_Waitall(2, r, st));
  for (int i = 0; i < 30; ++i)
    CHECK(a[i] == (i % 3 == 0 ? val(from, 40, i) : val(wrank, 40, i)), "replace[%d] = %d", i,
          a[i]);
  expect(big, BIG, from, 42, "big replace");
  CHECK(st[0].MPI_SOURCE == from && st[0].MPI_TAG == 41 && st[1].MPI_TAG == 42, "replace status");
}

static void proc_null(int *sbig, int *rbig) {
  MPI_Request r;
  MPI_Status st;
  int dummy = -7;
  fill(sbig, BIG, wrank, 50);
  MPI_OK(MPI_Isendrecv(sbig, BIG, MPI_INT, to, 50, &dummy, 1, MPI_INT, MPI_PROC_NULL, 50,
                       MPI_COMM_WORLD, &r));
  MPI_OK(MPI_Recv(rbig, BIG, MPI_INT, from, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  MPI_OK(MPI_Wait(&r, &st));
  int n = -1;
  MPI_OK(MPI_Get_count(&st, MPI_INT, &n));
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && n == 0 && dummy == -7,
        "proc_null status %d %d %d", st.MPI_SOURCE, st.MPI_TAG, n);
  expect(rbig, BIG, from, 50, "proc_null");
}

static void freed(int *sbig, int *rbig) {
  MPI_Request r;
  int x = -1, y = val(wrank, 60, 0);
  fill(sbig, BIG, wrank, 60);
  MPI_OK(MPI_Isendrecv(sbig, BIG, MPI_INT, to, 60, &x, 1, MPI_INT, from, 61, MPI_COMM_WORLD, &r));
  MPI_OK(MPI_Request_free(&r));
  CHECK(r == MPI_REQUEST_NULL, "freed handle");
  MPI_OK(MPI_Send(&y, 1, MPI_INT, to, 61, MPI_COMM_WORLD));
  MPI_OK(MPI_Recv(rbig, BIG, MPI_INT, from, 60, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  expect(rbig, BIG, from, 60, "freed");
  /* The send buffer may be reused once the peer has the data: a barrier
     after every receive is done says so. */
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

static void errors(void) {
  MPI_Comm c;
  MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
  MPI_OK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
  int x = 0, y = -1, cls = 0;
  MPI_Request r = MPI_REQUEST_NULL;
  const int e = MPI_Isendrecv(&x, 1, MPI_INT, wsize, 70, &y, 1, MPI_INT, from, 70, c, &r);
  MPI_OK(MPI_Error_class(e, &cls));
  CHECK(cls == MPI_ERR_RANK && r == MPI_REQUEST_NULL, "bad destination: class %d", cls);
  const int e2 = MPI_Isendrecv_replace(&x, 1, MPI_INT, to, -5, from, 70, c, &r);
  MPI_OK(MPI_Error_class(e2, &cls));
  CHECK(cls == MPI_ERR_TAG && r == MPI_REQUEST_NULL, "bad tag: class %d", cls);
  /* nothing was posted: this exchange gets its own message, not a stray one */
  x = val(wrank, 71, 0);
  MPI_OK(MPI_Sendrecv(&x, 1, MPI_INT, to, 70, &y, 1, MPI_INT, from, 70, c, MPI_STATUS_IGNORE));
  CHECK(y == val(from, 71, 0), "after the errors got %d", y);
  MPI_OK(MPI_Comm_free(&c));
}

int main(int argc, char **argv) {
  prog_name = "isendrecv";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  to = (wrank + 1) % wsize;
  from = (wrank - 1 + wsize) % wsize;
  int *sbig = (int *)malloc(BIG * sizeof(int)), *rbig = (int *)malloc(BIG * sizeof(int));
  CHECK(sbig && rbig, "out of memory");
  ring(sbig, rbig);
  send_half(sbig, rbig);
  replace(rbig);
  proc_null(sbig, rbig);
  freed(sbig, rbig);
  errors();
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (wrank == 0) printf("isendrecv ok (%d ranks)\n", wsize);
  free(sbig);
  free(rbig);
  MPI_Finalize();
  return 0;
}
