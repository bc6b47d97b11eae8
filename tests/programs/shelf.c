/* prog_shelf: receives of messages that arrived before them. Small ones are
   taken from the unexpected shelf without a slice (segment.h, Shelf); what
   must hold whichever way a receive gets its message is checked here.
   Rank 1 sends to rank 0; every other rank only takes part in the
   barriers. Rank 0 prints "shelf ok (N ranks, M messages)".

   1. Order per key. Rank 1 sends N messages before a barrier, tag i % 3,
      each carrying i: small ones, a 64 KiB MPI_Isend every 50th, and an
      MPI_Issend every 70th. Rank 0 then receives tag 2, then 0, then 1, each tag's
      messages in order: every one must carry the next i of its tag
      (non-overtaking), at its size.
   2. Non-blocking receives take from the shelf too: 100 small messages with
      tag 7, received by 100 MPI_Irecvs, in order.
   3. A receive still open comes first: rank 0 posts an MPI_Irecv(1, 8) into
      a strided datatype, which only the node manager matches, before
      MPI_Recv(1, 8), with two tag-8 messages waiting. The first must go to
      the MPI_Irecv, the second to the MPI_Recv.
   4. Truncation: 16 bytes into an 8-byte MPI_Recv gives MPI_ERR_TRUNCATE
      and the first 8 bytes.
   5. MPI_ANY_TAG from rank 1: small tag 20, 64 KiB tag 21, small tag 20,
      small tag 22 arrive in that order, whichever way each is received.
   6. A probe (MPI_Iprobe of a tag, MPI_Probe of any tag) says what the
      receive of its tag then gets, in send order.
   7. MPI_ANY_SOURCE (tag 40, or any tag every other time): each rank but 0
      sends three, rank 1's second one 64 KiB; each source's arrive in its
      order.
   8. A cancel and a receive: R rounds of one small MPI_Isend (tag 100 +
      round), cancelled by its sender just after a barrier, while rank 0
      receives it with MPI_Irecv (even rounds) or after it heard how the
      cancel went (odd rounds). Exactly one of them wins: the receive
      completes with the message, or the cancel succeeds and the receive
      can be cancelled. */
#include <string.h>

#include "prog_common.h"

#define BIG 65536
#define MAX_RANKS 64

static void order_per_key(int rank, int n) {
  int *small = malloc(sizeof(int) * (size_t)(n + 1));
  MPI_Request *q = malloc(sizeof(MPI_Request) * (size_t)(n + 1));
  char *big = malloc((size_t)BIG * (size_t)(n / 50 + 1));  /* one per large send */
  CHECK(small && q && big, "out of memory");
  int nq = 0;
  if (rank == 1)
    for (int i = 0; i < n; ++i) {
      small[i] = i;
      if (i % 50 == 0) {  /* sent before the barrier, received after: not blocking */
        char *b = big + (size_t)BIG * (size_t)(i / 50);
        memcpy(b, &i, sizeof i);
        MPI_OK(MPI_Isend(b, BIG, MPI_CHAR, 0, i % 3, MPI_COMM_WORLD, &q[nq++]));
      } else if (i % 70 == 0) {
        MPI_OK(MPI_Issend(&small[i], 1, MPI_INT, 0, i % 3, MPI_COMM_WORLD, &q[nq++]));
      } else {
        MPI_OK(MPI_Send(&small[i], 1, MPI_INT, 0, i % 3, MPI_COMM_WORLD));
      }
    }
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    static char in[BIG];
    const int tags[3] = {2, 0, 1};
    for (int t = 0; t < 3; ++t)
      for (int i = tags[t]; i < n; i += 3) {
        MPI_Status s;
        MPI_OK(MPI_Recv(in, BIG, MPI_CHAR, 1, tags[t], MPI_COMM_WORLD, &s));
        int got, count;
        memcpy(&got, in, sizeof got);
        MPI_OK(MPI_Get_count(&s, MPI_CHAR, &count));
        CHECK(got == i, "tag %d: expected message %d, got %d (overtaken)", tags[t], i, got);
        CHECK(count == (i % 50 == 0 ? BIG : (int)sizeof(int)), "message %d: %d bytes", i, count);
        CHECK(s.MPI_SOURCE == 1 && s.MPI_TAG == tags[t], "message %d: source %d tag %d", i,
              s.MPI_SOURCE, s.MPI_TAG);
      }
  }
  MPI_OK(MPI_Waitall(nq, q, MPI_STATUSES_IGNORE));
  free(small);
  free(q);
  free(big);
}

static void nonblocking(int rank) {
  int v[100];
  MPI_Request q[100];
  if (rank == 1)
    for (int i = 0; i < 100; ++i) {
      v[i] = 1000 + i;
      MPI_OK(MPI_Send(&v[i], 1, MPI_INT, 0, 7, MPI_COMM_WORLD));
    }
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    for (int i = 0; i < 100; ++i) MPI_OK(MPI_Irecv(&v[i], 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &q[i]));
    MPI_OK(MPI_Waitall(100, q, MPI_STATUSES_IGNORE));
    for (int i = 0; i < 100; ++i) CHECK(v[i] == 1000 + i, "Irecv %d got %d", i, v[i]);
  }
}

static void open_receive_first(int rank) {
  int a = 1, b = 2;
  if (rank == 1) {
    MPI_OK(MPI_Send(&a, 1, MPI_INT, 0, 8, MPI_COMM_WORLD));
    MPI_OK(MPI_Send(&b, 1, MPI_INT, 0, 8, MPI_COMM_WORLD));
  }
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    int x[3] = {0, 0, 0}, y = 0;
    MPI_Request q;
    MPI_Datatype strided;
    MPI_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &strided));
    MPI_OK(MPI_Type_commit(&strided));
    MPI_OK(MPI_Irecv(x, 1, strided, 1, 8, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Recv(&y, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    CHECK(x[0] == 1 && y == 2, "the open MPI_Irecv got %d, the later MPI_Recv %d (want 1, 2)", x[0],
          y);
    MPI_OK(MPI_Type_free(&strided));
  }
}

static void truncation(int rank) {
  int out[4] = {11, 22, 33, 44};
  if (rank == 1) MPI_OK(MPI_Send(out, 4, MPI_INT, 0, 9, MPI_COMM_WORLD));
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    int in[4] = {0, 0, -1, -1};
    MPI_Status s;
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    const int e = MPI_Recv(in, 2, MPI_INT, 1, 9, MPI_COMM_WORLD, &s);
    int cls = MPI_SUCCESS;
    MPI_Error_class(e, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "16 bytes into 8: error class %d", cls);
    CHECK(in[0] == 11 && in[1] == 22 && in[2] == -1, "truncated: %d %d %d", in[0], in[1], in[2]);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  }
}

static void any_tag(int rank) {
  static char big[BIG];
  int v[4] = {1, 2, 3, 4};
  MPI_Request q;
  if (rank == 1) {
    memcpy(big, &v[1], sizeof v[1]);
    MPI_OK(MPI_Send(&v[0], 1, MPI_INT, 0, 20, MPI_COMM_WORLD));
    MPI_OK(MPI_Isend(big, BIG, MPI_CHAR, 0, 21, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Send(&v[2], 1, MPI_INT, 0, 20, MPI_COMM_WORLD));
    MPI_OK(MPI_Send(&v[3], 1, MPI_INT, 0, 22, MPI_COMM_WORLD));
  }
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    static char in[BIG];
    const int tags[4] = {20, 21, 20, 22};
    for (int i = 0; i < 4; ++i) {
      MPI_Status s;
      int got = 0;
      MPI_OK(MPI_Recv(in, BIG, MPI_CHAR, 1, MPI_ANY_TAG, MPI_COMM_WORLD, &s));
      memcpy(&got, in, sizeof got);
      CHECK(got == v[i] && s.MPI_TAG == tags[i], "ANY_TAG receive %d got %d with tag %d", i, got,
            s.MPI_TAG);
    }
  }
  if (rank == 1) MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
}

static void probe_then_receive(int rank) {
  int v[10];
  if (rank == 1)
    for (int i = 0; i < 10; ++i) {
      v[i] = 100 + i;
      MPI_OK(MPI_Send(&v[i], 1, MPI_INT, 0, 30 + i % 2, MPI_COMM_WORLD));
    }
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0)
    for (int i = 0; i < 10; ++i) {
      MPI_Status s;
      int flag = 0, count = 0, got = 0;
      if (i % 2) {
        MPI_OK(MPI_Probe(1, MPI_ANY_TAG, MPI_COMM_WORLD, &s));
      } else {
        while (!flag) MPI_OK(MPI_Iprobe(1, 30, MPI_COMM_WORLD, &flag, &s));
      }
      MPI_OK(MPI_Get_count(&s, MPI_INT, &count));
      CHECK(count == 1 && s.MPI_TAG == 30 + i % 2, "probe %d: %d ints, tag %d", i, count, s.MPI_TAG);
      MPI_OK(MPI_Recv(&got, 1, MPI_INT, 1, s.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK(got == 100 + i, "probe %d, then a receive of its tag: got %d", i, got);
    }
}

static void any_source(int rank, int size) {
  static char big[BIG];
  int v[3] = {1, 2, 3};
  MPI_Request q = MPI_REQUEST_NULL;
  if (rank > 0) {
    /* Rank 1: small, 64 KiB, small; the others: two small ones. */
    MPI_OK(MPI_Send(&v[0], 1, MPI_INT, 0, 40, MPI_COMM_WORLD));
    if (rank == 1) {
      memcpy(big, &v[1], sizeof v[1]);
      MPI_OK(MPI_Isend(big, BIG, MPI_CHAR, 0, 40, MPI_COMM_WORLD, &q));
    } else {
      MPI_OK(MPI_Send(&v[1], 1, MPI_INT, 0, 40, MPI_COMM_WORLD));
    }
    MPI_OK(MPI_Send(&v[2], 1, MPI_INT, 0, 40, MPI_COMM_WORLD));
  }
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) {
    static char in[BIG];
    int next[MAX_RANKS];
    CHECK(size <= MAX_RANKS, "at most %d ranks", MAX_RANKS);
    for (int r = 0; r < size; ++r) next[r] = 1;
    for (int i = 0; i < 3 * (size - 1); ++i) {
      MPI_Status s;
      int got = 0;
      MPI_OK(MPI_Recv(in, BIG, MPI_CHAR, MPI_ANY_SOURCE, i % 2 ? MPI_ANY_TAG : 40, MPI_COMM_WORLD,
                      &s));
      memcpy(&got, in, sizeof got);
      CHECK(s.MPI_SOURCE > 0 && s.MPI_SOURCE < size && got == next[s.MPI_SOURCE],
            "any-source receive %d: %d from %d, want %d from it (overtaken)", i, got, s.MPI_SOURCE,
            s.MPI_SOURCE > 0 && s.MPI_SOURCE < size ? next[s.MPI_SOURCE] : -1);
      ++next[s.MPI_SOURCE];
    }
  }
  MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
}

static void cancel_race(int rank, int rounds) {
  int received = 0, cancelled = 0;
  for (int r = 0; r < rounds; ++r) {
    int v = 5000 + r, in = 0, flag = 0;
    MPI_Request q;
    if (rank == 1) MPI_OK(MPI_Isend(&v, 1, MPI_INT, 0, 100 + r, MPI_COMM_WORLD, &q));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 1) {
      MPI_Status s;
      MPI_OK(MPI_Cancel(&q));
      MPI_OK(MPI_Wait(&q, &s));
      MPI_OK(MPI_Test_cancelled(&s, &flag));
      MPI_OK(MPI_Send(&flag, 1, MPI_INT, 0, 99, MPI_COMM_WORLD));
    } else if (rank == 0) {
      MPI_Status s;
      int was_cancelled = 0, got = 0;
      /* Even rounds receive at once, odd ones once the cancel is over. */
      if (r % 2 == 0) MPI_OK(MPI_Irecv(&in, 1, MPI_INT, 1, 100 + r, MPI_COMM_WORLD, &q));
      MPI_OK(MPI_Recv(&was_cancelled, 1, MPI_INT, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      if (r % 2) MPI_OK(MPI_Irecv(&in, 1, MPI_INT, 1, 100 + r, MPI_COMM_WORLD, &q));
      if (was_cancelled) {
        MPI_OK(MPI_Cancel(&q));
        MPI_OK(MPI_Wait(&q, &s));
        MPI_OK(MPI_Test_cancelled(&s, &got));
        CHECK(got, "round %d: the send was cancelled, yet its receive completed (%d)", r, in);
        ++cancelled;
      } else {
        MPI_OK(MPI_Wait(&q, &s));
        CHECK(in == v, "round %d: received %d, want %d", r, in, v);
        ++received;
      }
    }
  }
  if (rank == 0) printf("cancel race: %d received, %d cancelled\n", received, cancelled);
}

int main(int argc, char **argv) {
  int rank, size;
  prog_name = "prog_shelf";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 2, "needs 2 ranks, has %d", size);
  const int n = (int)arg_long(argc, argv, 1, 300);
  order_per_key(rank, n);
  nonblocking(rank);
  open_receive_first(rank);
  truncation(rank);
  any_tag(rank);
  probe_then_receive(rank);
  any_source(rank, size);
  cancel_race(rank, (int)arg_long(argc, argv, 2, 20));
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("shelf ok (%d ranks, %d messages)\n", size, n);
  MPI_OK(MPI_Finalize());
  return 0;
}
