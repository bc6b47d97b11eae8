/* prog_fanin: every rank (rank 0 included, through itself) sends N messages
   (default 100, argv[1]) to rank 0, which receives them all with
   MPI_ANY_SOURCE / MPI_ANY_TAG. Checks: each source exactly N times, per
   source in send order (MPI's non-overtaking rule), tag and size as sent.
   Every 10th message is larger than the inline limit so both data paths mix
   within one source's stream. Rank 0 prints "fanin ok". */
#include <string.h>

#include "prog_common.h"

#define BIG 1000 /* ints: 4000 bytes, far above the 192-byte inline limit */

static int msg_len(long seq) { return seq % 10 == 9 ? BIG : 4; }

static void fill(int *m, int rank, long seq) {
  int i, n = msg_len(seq);
  m[0] = rank;
  m[1] = (int)seq;
  for (i = 2; i < n; ++i) m[i] = rank * 1000003 + (int)seq * 31 + i;
}

int main(int argc, char **argv) {
  int rank, size;
  long n, seq;
  MPI_Request *reqs;
  int *out;
  prog_name = "prog_fanin";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  n = arg_long(argc, argv, 1, 100);
  CHECK(n > 0, "N must be positive");

  /* Every message keeps its own buffer until the sends complete. */
  out = (int *)malloc(sizeof(int) * BIG * (size_t)n);
  reqs = (MPI_Request *)malloc(sizeof(MPI_Request) * (size_t)n);
  CHECK(out && reqs, "out of memory");
  for (seq = 0; seq < n; ++seq) {
    int *m = out + BIG * seq;
    fill(m, rank, seq);
    MPI_OK(MPI_Isend(m, msg_len(seq), MPI_INT, 0, (int)(seq % 7), MPI_COMM_WORLD, &reqs[seq]));
  }

  if (rank == 0) {
    long *next = (long *)calloc((size_t)size, sizeof(long));
    int in[BIG], want[BIG];
    long total = (long)size * n, k;
    CHECK(next != NULL, "out of memory");
    for (k = 0; k < total; ++k) {
      MPI_Status st;
      int count, src;
      MPI_OK(MPI_Recv(in, BIG, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
      src = st.MPI_SOURCE;
      CHECK(src >= 0 && src < size, "bad source %d", src);
      CHECK(in[0] == src, "payload says rank %d, status says %d", in[0], src);
      CHECK(next[src] < n, "source %d sent more than %ld messages", src, n);
      CHECK(in[1] == next[src], "source %d: got message %d, want %ld (order broken)", src, in[1],
            next[src]);
      CHECK(st.MPI_TAG == (int)(next[src] % 7), "source %d message %ld: tag %d", src, next[src],
            st.MPI_TAG);
      MPI_OK(MPI_Get_count(&st, MPI_INT, &count));
      CHECK(count == msg_len(next[src]), "source %d message %ld: count %d", src, next[src], count);
      fill(want, src, next[src]);
      CHECK(memcmp(in, want, sizeof(int) * (size_t)count) == 0, "source %d message %ld: corrupt",
            src, next[src]);
      ++next[src];
    }
    for (k = 0; k < size; ++k) CHECK(next[k] == n, "source %ld: %ld messages", k, next[k]);
    free(next);
  }
  MPI_OK(MPI_Waitall((int)n, reqs, MPI_STATUSES_IGNORE));
  MPI_OK(MPI_Finalize());
  if (rank == 0) printf("fanin ok (%d ranks x %ld messages)\n", size, n);
  free(out);
  free(reqs);
  return 0;
}
