/* Request families and send modes, data checked:
   - persistent send/receive requests (Send_init, Ssend_init, Rsend_init,
     Recv_init) restarted 50 times around a ring, with Startall and Waitall,
     and an inactive persistent request completing at once with an empty
     status;
   - MPI_Waitsome / MPI_Testsome over a mix of completed and pending
     receives until all are in, each index reported once;
   - buffered sends: Bsend / Ibsend / Bsend_init through an attached
     buffer, a message that does not fit gets MPI_ERR_BUFFER (and nothing
     is sent), Buffer_detach returns the buffer;
   - MPI 4.1 flushes: MPI_Buffer_iflush completes under MPI_Wait,
     MPI_Waitany (beside the receive its message waits for) and
     MPI_Request_get_status once the receives are posted, MPI_Buffer_flush
     returns once they are, and each time the whole buffer is free again;
   - MPI_Rsend / MPI_Irsend to a posted receive;
   - MPI_Sendrecv_replace around the ring with a strided datatype;
   - MPI_Request_get_status polled to completion, then MPI_Wait;
   - MPI_Request_free of a pending receive: its data is in the buffer once
     a later receive of the same sender and tag has completed (they match
     in order, and bcs completes them in that order). */
#include <stdlib.h>
#include <string.h>

#include "prog_common.h"

static int wrank, wsize, to, from;

static int val(int r, int round, int i) { return r * 1000000 + round * 1000 + i; }

static void persistent(void) {
  enum { N = 64, ROUNDS = 50 };
  int out[3][N], in[3][N];
  MPI_Request r[6];
  memset(out, 0, sizeof out);
  MPI_OK(MPI_Send_init(out[0], N, MPI_INT, to, 10, MPI_COMM_WORLD, &r[0]));
  MPI_OK(MPI_Ssend_init(out[1], N, MPI_INT, to, 11, MPI_COMM_WORLD, &r[1]));
  MPI_OK(MPI_Recv_init(in[0], N, MPI_INT, from, 10, MPI_COMM_WORLD, &r[2]));
  MPI_OK(MPI_Recv_init(in[1], N, MPI_INT, from, 11, MPI_COMM_WORLD, &r[3]));
  MPI_OK(MPI_Recv_init(in[2], N, MPI_INT, from, 12, MPI_COMM_WORLD, &r[4]));
  MPI_OK(MPI_Rsend_init(out[2], N, MPI_INT, to, 12, MPI_COMM_WORLD, &r[5]));
  /* Inactive: completes at once with an empty status, handle kept. */
  MPI_Status st;
  int flag = 0;
  MPI_OK(MPI_Test(&r[0], &flag, &st));
  CHECK(flag && r[0] != MPI_REQUEST_NULL && st.MPI_TAG == MPI_ANY_TAG, "inactive test");
  for (int round = 0; round < ROUNDS; ++round) {
    for (int k = 0; k < 3; ++k)
      for (int i = 0; i < N; ++i) {
        out[k][i] = val(wrank, round, i + k);
        in[k][i] = -1;
      }
    /* receives first (the ready send needs its receive posted everywhere) */
    MPI_OK(MPI_Startall(3, &r[2]));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Start(&r[0]));
    MPI_OK(MPI_Start(&r[1]));
    MPI_OK(MPI_Start(&r[5]));
    MPI_OK(MPI_Waitall(6, r, MPI_STATUSES_IGNORE));
    for (int k = 0; k < 3; ++k) {
      CHECK(r[k] != MPI_REQUEST_NULL, "persistent handle %d lost", k);
      for (int i = 0; i < N; ++i)
        CHECK(in[k][i] == val(from, round, i + k), "round %d stream %d [%d] = %d", round, k, i,
              in[k][i]);
    }
  }
  /* Starting an active request is an error. */
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_OK(MPI_Start(&r[2]));
  CHECK(MPI_Start(&r[2]) == MPI_ERR_REQUEST, "double start");
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  MPI_OK(MPI_Send(out[0], N, MPI_INT, to, 10, MPI_COMM_WORLD));
  MPI_OK(MPI_Wait(&r[2], MPI_STATUS_IGNORE));
  for (int k = 0; k < 6; ++k) MPI_OK(MPI_Request_free(&r[k]));
  CHECK(r[0] == MPI_REQUEST_NULL, "freed persistent handle");
  /* A derived type freed right after the init calls: the requests keep it. */
  MPI_Datatype evens;
  MPI_OK(MPI_Type_vector(N / 2, 1, 2, MPI_INT, &evens));
  MPI_OK(MPI_Type_commit(&evens));
  MPI_OK(MPI_Send_init(out[0], 1, evens, to, 13, MPI_COMM_WORLD, &r[0]));
  MPI_OK(MPI_Recv_init(in[0], 1, evens, from, 13, MPI_COMM_WORLD, &r[1]));
  MPI_OK(MPI_Type_free(&evens));
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < N; ++i) {
      out[0][i] = val(wrank, round, i);
      in[0][i] = -1;
    }
    MPI_OK(MPI_Startall(2, r));
    MPI_OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    for (int i = 0; i < N; ++i)
      CHECK(in[0][i] == (i % 2 ? -1 : val(from, round, i)), "freed type round %d [%d] = %d",
            round, i, in[0][i]);
  }
  MPI_OK(MPI_Request_free(&r[0]));
  MPI_OK(MPI_Request_free(&r[1]));
}

static void some(void) {
  enum { K = 8 };
  int in[K], out[K], idx[K], seen[K] = {0}, outcount, left = K;
  MPI_Request r[K];
  MPI_Status st[K];
  for (int i = 0; i < K; ++i) {
    in[i] = -1;
    out[i] = val(wrank, 7, i);
    MPI_OK(MPI_Irecv(&in[i], 1, MPI_INT, from, 20 + i, MPI_COMM_WORLD, &r[i]));
  }
  /* Half the messages now, Testsome, then the rest, Waitsome to the end. */
  for (int i = 0; i < K; i += 2) MPI_OK(MPI_Send(&out[i], 1, MPI_INT, to, 20 + i, MPI_COMM_WORLD));
  MPI_OK(MPI_Testsome(K, r, &outcount, idx, st));
  CHECK(outcount >= 0 && outcount <= K / 2, "testsome outcount %d", outcount);
  for (int j = 0; j < outcount; ++j) {
    CHECK(idx[j] % 2 == 0 && !seen[idx[j]], "testsome index %d", idx[j]);
    seen[idx[j]] = 1;
    --left;
  }
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  for (int i = 1; i < K; i += 2) MPI_OK(MPI_Send(&out[i], 1, MPI_INT, to, 20 + i, MPI_COMM_WORLD));
  while (left > 0) {
    MPI_OK(MPI_Waitsome(K, r, &outcount, idx, st));
    CHECK(outcount > 0, "waitsome outcount %d with %d left", outcount, left);
    for (int j = 0; j < outcount; ++j) {
      CHECK(!seen[idx[j]], "index %d reported twice", idx[j]);
      CHECK(st[j].MPI_TAG == 20 + idx[j] && st[j].MPI_SOURCE == from, "status of %d", idx[j]);
      seen[idx[j]] = 1;
      --left;
    }
  }
  MPI_OK(MPI_Waitsome(K, r, &outcount, idx, st));
  CHECK(outcount == MPI_UNDEFINED, "waitsome on all-null: %d", outcount);
  for (int i = 0; i < K; ++i) CHECK(in[i] == val(from, 7, i), "some[%d] = %d", i, in[i]);
}

static void buffered(void) {
  enum { N = 100 };
  int size = 3 * (N * (int)sizeof(int) + MPI_BSEND_OVERHEAD), out[N], in[3][N];
  char *buf = malloc((size_t)size);
  MPI_OK(MPI_Buffer_attach(buf, size));
  for (int i = 0; i < N; ++i) out[i] = val(wrank, 9, i);
  MPI_Request rr[3], ib, pb;
  for (int k = 0; k < 3; ++k) MPI_OK(MPI_Irecv(in[k], N, MPI_INT, from, 30 + k, MPI_COMM_WORLD, &rr[k]));
  MPI_OK(MPI_Bsend(out, N, MPI_INT, to, 30, MPI_COMM_WORLD));
  memset(out, 0, sizeof out); /* buffered: the caller may reuse it at once */
  for (int i = 0; i < N; ++i) out[i] = val(wrank, 9, i);
  MPI_OK(MPI_Ibsend(out, N, MPI_INT, to, 31, MPI_COMM_WORLD, &ib));
  MPI_OK(MPI_Bsend_init(out, N, MPI_INT, to, 32, MPI_COMM_WORLD, &pb));
  MPI_OK(MPI_Start(&pb));
  /* The buffer holds three messages: a fourth does not fit (unless some
     left already), so try one bigger than the whole buffer. */
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int *big = malloc((size_t)size);
  CHECK(MPI_Bsend(big, size / (int)sizeof(int), MPI_INT, to, 39, MPI_COMM_WORLD) == MPI_ERR_BUFFER,
        "oversized bsend");
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  MPI_OK(MPI_Wait(&ib, MPI_STATUS_IGNORE));
  MPI_OK(MPI_Wait(&pb, MPI_STATUS_IGNORE));
  MPI_OK(MPI_Request_free(&pb));
  MPI_OK(MPI_Waitall(3, rr, MPI_STATUSES_IGNORE));
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < N; ++i) CHECK(in[k][i] == val(from, 9, i), "bsend %d [%d]", k, i);
  void *back = NULL;
  int back_size = 0;
  MPI_OK(MPI_Buffer_detach(&back, &back_size));
  CHECK(back == buf && back_size == size, "detach returned %p/%d", back, back_size);
  free(big);
  free(buf);
}

static void flushed(void) {
  enum { N = 25000 }; /* 100 KB: not an inline message */
  int size = N * (int)sizeof(int) + MPI_BSEND_OVERHEAD;
  int *out = malloc(sizeof(int) * N), *in = malloc(sizeof(int) * N);
  char *buf = malloc((size_t)size);
  MPI_OK(MPI_Buffer_attach(buf, size));
  MPI_Request f, r[2];
  int idx = -1, flag = 0;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < N; ++i) out[i] = val(wrank, 60 + round, i);
    /* The buffer holds exactly one message: this one fits only if the
       flush before freed all of it. */
    MPI_OK(MPI_Bsend(out, N, MPI_INT, to, 60 + round, MPI_COMM_WORLD));
    if (round == 3) {
      MPI_OK(MPI_Recv(in, N, MPI_INT, from, 63, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      MPI_OK(MPI_Buffer_flush());
    } else {
      MPI_OK(MPI_Buffer_iflush(&f));
      CHECK(f != MPI_REQUEST_NULL, "iflush gave no request");
      MPI_OK(MPI_Irecv(in, N, MPI_INT, from, 60 + round, MPI_COMM_WORLD, &r[0]));
      if (round == 0) {
        MPI_OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
        MPI_OK(MPI_Wait(&f, MPI_STATUS_IGNORE));
      } else if (round == 1) {
        r[1] = f;
        for (int k = 0; k < 2; ++k) MPI_OK(MPI_Waitany(2, r, &idx, MPI_STATUS_IGNORE));
        CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "waitany left a request");
      } else {
        MPI_OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
        for (flag = 0; !flag;) MPI_OK(MPI_Request_get_status(f, &flag, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Wait(&f, MPI_STATUS_IGNORE));
      }
      CHECK(f == MPI_REQUEST_NULL || round == 1, "wait left the flush request");
    }
    for (int i = 0; i < N; ++i) CHECK(in[i] == val(from, 60 + round, i), "flush round %d [%d]", round, i);
  }
  MPI_OK(MPI_Buffer_flush()); /* nothing left: returns at once */
  void *back = NULL;
  int back_size = 0;
  MPI_OK(MPI_Buffer_detach(&back, &back_size));
  free(buf);
  free(in);
  free(out);
}

static void get_status(void) {
  /* MPI_Request_get_status leaves the request: poll it to completion, then
     MPI_Wait returns the same status and frees it. */
  int x = -1, y = val(wrank, 13, 0), flag = 0, polls = 0;
  MPI_Request r, s;
  MPI_Status st, st2;
  MPI_OK(MPI_Irecv(&x, 1, MPI_INT, from, 50, MPI_COMM_WORLD, &r));
  MPI_OK(MPI_Isend(&y, 1, MPI_INT, to, 50, MPI_COMM_WORLD, &s));
  while (!flag) {
    MPI_OK(MPI_Request_get_status(r, &flag, &st));
    ++polls;
  }
  CHECK(r != MPI_REQUEST_NULL, "get_status freed the request");
  CHECK(x == val(from, 13, 0) && st.MPI_SOURCE == from && st.MPI_TAG == 50, "get_status data");
  MPI_OK(MPI_Request_get_status(r, &flag, &st2));
  CHECK(flag && st2.MPI_SOURCE == from, "second get_status");
  MPI_OK(MPI_Wait(&r, &st2));
  CHECK(r == MPI_REQUEST_NULL && st2.MPI_SOURCE == from && st2.MPI_TAG == 50, "wait after get_status");
  MPI_OK(MPI_Wait(&s, MPI_STATUS_IGNORE));
  CHECK(polls >= 1, "polls");
  /* MPI_REQUEST_NULL: complete, with the empty status (its MPI_ERROR is
     MPI_SUCCESS by definition); a successful receive leaves MPI_ERROR. */
  st.MPI_ERROR = MPI_ERR_DIMS;
  MPI_OK(MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &st));
  CHECK(flag && st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG &&
            st.MPI_ERROR == MPI_SUCCESS,
        "empty status %d %d %d", st.MPI_SOURCE, st.MPI_TAG, st.MPI_ERROR);
  st.MPI_ERROR = MPI_ERR_DIMS;
  MPI_OK(MPI_Sendrecv(&y, 1, MPI_INT, to, 51, &x, 1, MPI_INT, from, 51, MPI_COMM_WORLD, &st));
  CHECK(st.MPI_ERROR == MPI_ERR_DIMS, "a successful receive wrote MPI_ERROR (%d)", st.MPI_ERROR);
}

static void ready_and_replace(void) {
  int x = -1, y = val(wrank, 11, 0);
  MPI_Request r;
  MPI_OK(MPI_Irecv(&x, 1, MPI_INT, from, 40, MPI_COMM_WORLD, &r));
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* every receive is posted */
  MPI_OK(MPI_Rsend(&y, 1, MPI_INT, to, 40, MPI_COMM_WORLD));
  MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
  CHECK(x == val(from, 11, 0), "rsend got %d", x);
  /* Sendrecv_replace with a strided type: every 3rd of 30 ints. */
  int a[30];
  MPI_Datatype v;
  MPI_OK(MPI_Type_vector(10, 1, 3, MPI_INT, &v));
  MPI_OK(MPI_Type_commit(&v));
  for (int i = 0; i < 30; ++i) a[i] = val(wrank, 12, i);
  MPI_Status st;
  MPI_OK(MPI_Sendrecv_replace(a, 1, v, to, 41, from, 41, MPI_COMM_WORLD, &st));
  for (int i = 0; i < 30; ++i)
    CHECK(a[i] == (i % 3 == 0 ? val(from, 12, i) : val(wrank, 12, i)), "replace[%d] = %d", i,
          a[i]);
  CHECK(st.MPI_SOURCE == from && st.MPI_TAG == 41, "replace status");
  MPI_OK(MPI_Type_free(&v));
}

static void freed_receive(void) {
  int first[4] = {-1, -1, -1, -1}, second[4] = {-1, -1, -1, -1}, out[2][4];
  MPI_Request r, s[2];
  MPI_OK(MPI_Irecv(first, 4, MPI_INT, from, 50, MPI_COMM_WORLD, &r));
  MPI_OK(MPI_Request_free(&r));
  CHECK(r == MPI_REQUEST_NULL, "freed receive handle");
  for (int k = 0; k < 2; ++k) {
    for (int i = 0; i < 4; ++i) out[k][i] = val(wrank, 20 + k, i);
    MPI_OK(MPI_Isend(out[k], 4, MPI_INT, to, 50, MPI_COMM_WORLD, &s[k]));
  }
  MPI_OK(MPI_Recv(second, 4, MPI_INT, from, 50, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  MPI_OK(MPI_Waitall(2, s, MPI_STATUSES_IGNORE));
  for (int i = 0; i < 4; ++i) {
    CHECK(first[i] == val(from, 20, i), "freed receive [%d] = %d", i, first[i]);
    CHECK(second[i] == val(from, 21, i), "second receive [%d] = %d", i, second[i]);
  }
}

int main(int argc, char **argv) {
  prog_name = "requests";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  to = (wrank + 1) % wsize;
  from = (wrank - 1 + wsize) % wsize;
  persistent();
  some();
  buffered();
  flushed();
  ready_and_replace();
  get_status();
  freed_receive();
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (wrank == 0) printf("requests ok (%d ranks)\n", wsize);
  MPI_Finalize();
  return 0;
}
