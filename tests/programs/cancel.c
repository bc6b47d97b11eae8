/* MPI_Cancel and generalized requests, between rank pairs (2k, 2k+1):
   - a receive nobody sends to is cancelled: the wait returns, the status
     says cancelled;
   - a receive that already matched is not cancelled: it gets its data;
   - a 1 MiB send the receiver has not asked for is cancelled (the receiver
     is told so and never receives it); one whose receive was posted first
     is not cancelled and arrives whole;
   - the same for small sends, which travel inside their descriptor and are
     complete as soon as posted: an unmatched one is still cancelled (also
     when cancelled twice, when sent with MPI_Ibsend, or started from
     MPI_Send_init), one already received is not;
   - a generalized request: not complete before MPI_Grequest_complete, its
     query function fills the status, its free function runs at the wait,
     its cancel function runs on MPI_Cancel; waiting for one nobody can
     complete returns MPI_ERR_REQUEST instead of hanging;
   - MPI_Status_set_cancelled / MPI_Test_cancelled. */
#include <stdlib.h>
#include <string.h>

#include "prog_common.h"

enum { BIG = 1 << 18 }; /* ints: 1 MiB */

static int freed, cancelled_with = -1;
static int query(void *extra, MPI_Status *st) {
  st->MPI_SOURCE = *(int *)extra;
  st->MPI_TAG = 42;
  MPI_Status_set_elements(st, MPI_INT, 3);
  MPI_Status_set_cancelled(st, 0);
  return MPI_SUCCESS;
}
static int release(void *extra) {
  (void)extra;
  ++freed;
  return MPI_SUCCESS;
}
static int cancel_fn(void *extra, int complete) {
  (void)extra;
  cancelled_with = complete;
  return MPI_SUCCESS;
}

static void generalized(void) {
  int who = 7, flag = -1, n = -1;
  MPI_Request q;
  MPI_Status st;
  MPI_OK(MPI_Grequest_start(query, release, cancel_fn, &who, &q));
  MPI_OK(MPI_Test(&q, &flag, &st));
  CHECK(flag == 0, "generalized request complete before MPI_Grequest_complete");
  MPI_OK(MPI_Request_get_status(q, &flag, &st));
  CHECK(flag == 0, "MPI_Request_get_status: complete before MPI_Grequest_complete");
  MPI_OK(MPI_Cancel(&q));
  CHECK(cancelled_with == 0, "cancel function got complete = %d", cancelled_with);
  MPI_OK(MPI_Grequest_complete(q));
  MPI_OK(MPI_Wait(&q, &st));
  MPI_Get_count(&st, MPI_INT, &n);
  CHECK(q == MPI_REQUEST_NULL && st.MPI_SOURCE == 7 && st.MPI_TAG == 42 && n == 3,
        "generalized status %d %d %d", st.MPI_SOURCE, st.MPI_TAG, n);
  CHECK(freed == 1, "free function ran %d times", freed);
  /* Waitall over one that is not complete: an error, not a hang. */
  MPI_Request two[2];
  MPI_OK(MPI_Grequest_start(query, release, NULL, &who, &two[0]));
  MPI_OK(MPI_Grequest_start(query, release, NULL, &who, &two[1]));
  MPI_OK(MPI_Grequest_complete(two[0]));
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  int cls = 0;
  MPI_Error_class(MPI_Waitall(2, two, MPI_STATUSES_IGNORE), &cls);
  CHECK(cls == MPI_ERR_REQUEST, "waitall on an incomplete generalized request: class %d", cls);
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL));
  MPI_OK(MPI_Grequest_complete(two[1]));
  MPI_OK(MPI_Waitall(2, two, MPI_STATUSES_IGNORE));
  CHECK(freed == 3, "free function ran %d times", freed);
  MPI_OK(MPI_Status_set_cancelled(&st, 1));
  MPI_OK(MPI_Test_cancelled(&st, &flag));
  CHECK(flag == 1, "status_set_cancelled");
}

/* The receiver of `tag` learns whether the sender cancelled it, and
   receives it if not; a cancelled message must be gone. */
static void settle(int rank, int peer, int tag, int cancelled) {
  int flag = cancelled, x = -1;
  if (rank % 2 == 0) {
    MPI_OK(MPI_Send(&flag, 1, MPI_INT, peer, 1000 + tag, MPI_COMM_WORLD));
    return;
  }
  MPI_OK(MPI_Recv(&flag, 1, MPI_INT, peer, 1000 + tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  if (!flag) {
    MPI_OK(MPI_Recv(&x, 1, MPI_INT, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(x == tag * 10 + peer, "uncancelled small send %d carried %d", tag, x);
  }
  MPI_OK(MPI_Iprobe(peer, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
  MPI_OK(MPI_Iprobe(peer, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
  CHECK(!flag, "the cancelled small send %d is still there to receive", tag);
}

/* Small (inline) sends: complete when posted, cancellable until received. */
static void small_sends(int rank, int peer) {
  MPI_Request q;
  MPI_Status st;
  int flag = -1, v = 0;
  /* Unmatched, cancelled twice (the second is a no-op). */
  if (rank % 2 == 0) {
    v = 21 * 10 + rank;
    MPI_OK(MPI_Isend(&v, 1, MPI_INT, peer, 21, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Cancel(&q));
    MPI_OK(MPI_Cancel(&q));
    MPI_OK(MPI_Wait(&q, &st));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 1, "unmatched small send not cancelled");
  }
  settle(rank, peer, 21, flag);
  /* Already received: the cancel comes too late, the send stands. */
  if (rank % 2 == 0) {
    v = 22 * 10 + rank;
    MPI_OK(MPI_Isend(&v, 1, MPI_INT, peer, 22, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Recv(&flag, 1, MPI_INT, peer, 23, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Cancel(&q));
    MPI_OK(MPI_Wait(&q, &st));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 0, "a received small send was cancelled");
  } else {
    MPI_OK(MPI_Recv(&v, 1, MPI_INT, peer, 22, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(v == 22 * 10 + peer, "small send carried %d", v);
    MPI_OK(MPI_Send(&v, 1, MPI_INT, peer, 23, MPI_COMM_WORLD));
  }
  /* Buffered, small and 1 MiB: cancelled through the buffered message. */
  if (rank % 2 == 0) {
    enum { N = 1 << 18 };
    int *b = malloc(sizeof(int) * N), size = (int)sizeof(int) * N + 2 * MPI_BSEND_OVERHEAD + 64;
    char *att = malloc((size_t)size);
    MPI_OK(MPI_Buffer_attach(att, size));
    v = 24 * 10 + rank;
    MPI_OK(MPI_Ibsend(&v, 1, MPI_INT, peer, 24, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Cancel(&q));
    MPI_OK(MPI_Wait(&q, &st));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 1, "unmatched small Ibsend not cancelled");
    MPI_OK(MPI_Ibsend(b, N, MPI_INT, peer, 25, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Cancel(&q));
    MPI_OK(MPI_Wait(&q, &st));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 1, "unmatched 1 MiB Ibsend not cancelled");
    void *back;
    int back_size;
    MPI_OK(MPI_Buffer_detach(&back, &back_size));
    CHECK(back == att && back_size == size, "detach gave %p/%d", back, back_size);
    free(att);
    free(b);
  }
  settle(rank, peer, 24, 1);
  settle(rank, peer, 25, 1);
  /* Persistent: each round's send may be cancelled. */
  if (rank % 2 == 0) {
    v = 26 * 10 + rank;
    MPI_OK(MPI_Send_init(&v, 1, MPI_INT, peer, 26, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Start(&q));
    MPI_OK(MPI_Cancel(&q));
    MPI_OK(MPI_Wait(&q, &st));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 1, "unmatched persistent small send not cancelled");
    MPI_OK(MPI_Start(&q));
    MPI_OK(MPI_Wait(&q, &st));
    MPI_OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag == 0, "a persistent round nobody cancelled says cancelled");
    MPI_OK(MPI_Request_free(&q));
  }
  settle(rank, peer, 26, 0);
}

int main(int argc, char **argv) {
  prog_name = "cancel";
  /* The full-table case below fills the table: 4096 slots, not 2^21. */
  setenv("BCS_MAX_REQUESTS", "4096", 1);
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  generalized();
  const int peer = rank ^ 1;
  MPI_Request q;
  MPI_Status st;
  int flag = -1, x = 0;
  /* A receive nothing matches. */
  MPI_OK(MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &q));
  MPI_OK(MPI_Cancel(&q));
  MPI_OK(MPI_Wait(&q, &st));
  MPI_OK(MPI_Test_cancelled(&st, &flag));
  CHECK(flag == 1, "unmatched receive not cancelled");
  int *big = malloc(sizeof(int) * BIG);
  if (peer < size) {
    /* A receive that matched before the cancel. */
    if (rank % 2) MPI_OK(MPI_Send(&rank, 1, MPI_INT, peer, 5, MPI_COMM_WORLD));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank % 2 == 0) {
      MPI_OK(MPI_Irecv(&x, 1, MPI_INT, peer, 5, MPI_COMM_WORLD, &q));
      MPI_OK(MPI_Cancel(&q));
      MPI_OK(MPI_Wait(&q, &st));
      MPI_OK(MPI_Test_cancelled(&st, &flag));
      CHECK(flag == 0 && x == peer, "matched receive: cancelled %d, got %d", flag, x);
    }
    /* A send nobody asked for: cancelled; the receiver learns it. */
    if (rank % 2 == 0) {
      for (int i = 0; i < BIG; ++i) big[i] = i ^ rank;
      MPI_OK(MPI_Isend(big, BIG, MPI_INT, peer, 7, MPI_COMM_WORLD, &q));
      MPI_OK(MPI_Cancel(&q));
      MPI_OK(MPI_Wait(&q, &st));
      MPI_OK(MPI_Test_cancelled(&st, &flag));
      CHECK(flag == 1, "unmatched 1 MiB send not cancelled");
      MPI_OK(MPI_Send(&flag, 1, MPI_INT, peer, 8, MPI_COMM_WORLD));
    } else {
      MPI_OK(MPI_Recv(&flag, 1, MPI_INT, peer, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      if (!flag) MPI_OK(MPI_Recv(big, BIG, MPI_INT, peer, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      MPI_OK(MPI_Iprobe(peer, 7, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
      MPI_OK(MPI_Iprobe(peer, 7, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
      CHECK(!flag, "the cancelled send is still there to receive");
    }
    /* A send whose receive was posted first: not cancelled, arrives whole. */
    if (rank % 2 == 0) {
      for (int i = 0; i < BIG; ++i) big[i] = i * 3 + rank;
      MPI_OK(MPI_Isend(big, BIG, MPI_INT, peer, 9, MPI_COMM_WORLD, &q));
      MPI_OK(MPI_Recv(&x, 1, MPI_INT, peer, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      MPI_OK(MPI_Cancel(&q));
      MPI_OK(MPI_Wait(&q, &st));
      MPI_OK(MPI_Test_cancelled(&st, &flag));
      CHECK(flag == 0, "a matched send was cancelled");
    } else {
      MPI_OK(MPI_Irecv(big, BIG, MPI_INT, peer, 9, MPI_COMM_WORLD, &q));
      MPI_OK(MPI_Send(&rank, 1, MPI_INT, peer, 10, MPI_COMM_WORLD));
      MPI_OK(MPI_Wait(&q, &st));
      MPI_OK(MPI_Test_cancelled(&st, &flag));
      CHECK(flag == 0, "received data marked cancelled");
      for (int i = 0; i < BIG; ++i) CHECK(big[i] == i * 3 + peer, "big[%d] = %d", i, big[i]);
    }
    small_sends(rank, peer);
  } else {
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  }
  free(big);
  /* MPI_Sendrecv whose send half finds no free request slot (every slot
     but one held by receives nothing matches): the call fails and takes
     its receive back; after the receives are cancelled it works again. */
  {
    enum { SLOTS = 4096 };
    MPI_Request *held = malloc(sizeof(MPI_Request) * SLOTS);
    int n = 0, sink = 0, one = 1, got = 0, lost = 0;
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    while (n < SLOTS - 1 &&
           MPI_Irecv(&sink, 1, MPI_INT, MPI_ANY_SOURCE, 31, MPI_COMM_WORLD, &held[n]) == MPI_SUCCESS)
      ++n;
    /* All but the few slots the runtime holds itself (one per pending
       non-blocking probe: the Iprobe loops above left five). */
    CHECK(n >= SLOTS - 8, "only %d receives could be posted", n);
    const int e = MPI_Sendrecv(&one, 1, MPI_INT, rank, 32, &lost, 1, MPI_INT, rank, 32,
                               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(e != MPI_SUCCESS, "sendrecv without a free slot succeeded");
    for (int i = 0; i < n; ++i) MPI_OK(MPI_Cancel(&held[i]));
    MPI_OK(MPI_Waitall(n, held, MPI_STATUSES_IGNORE));
    MPI_OK(MPI_Sendrecv(&one, 1, MPI_INT, rank, 32, &got, 1, MPI_INT, rank, 32, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
    CHECK(got == 1 && lost == 0, "sendrecv after the receives were cancelled got %d (%d)", got,
          lost);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    free(held);
  }
  /* Errors: cancelling MPI_REQUEST_NULL. */
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  q = MPI_REQUEST_NULL;
  int cls = 0;
  MPI_Error_class(MPI_Cancel(&q), &cls);
  CHECK(cls == MPI_ERR_REQUEST, "cancel of MPI_REQUEST_NULL: class %d", cls);
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("cancel ok (%d ranks)\n", size);
  MPI_Finalize();
  return 0;
}
