/* prog_sendrecv: ring shift with MPI_Sendrecv: each rank sends to rank+1 and
   receives from rank-1, for several sizes (inline and large) and I
   iterations (default 5, argv[1]); every payload is verified. A shift of
   zero (one-rank job) sends to itself. Rank 0 prints "sendrecv ok". */
#include "prog_common.h"

static const int sizes[] = {0, 1, 48, 49, 1000, 100000};

static int val(int src, int it, int s, int i) { return (src * 1009 + it * 31 + s) * 65537 + i; }

int main(int argc, char **argv) {
  int rank, size, it, s, i;
  long iters;
  int *out, *in;
  prog_name = "prog_sendrecv";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  iters = arg_long(argc, argv, 1, 5);
  out = (int *)malloc(sizeof(int) * 100000);
  in = (int *)malloc(sizeof(int) * 100000);
  CHECK(out && in, "out of memory");
  for (it = 0; it < iters; ++it) {
    for (s = 0; s < (int)(sizeof sizes / sizeof sizes[0]); ++s) {
      const int n = sizes[s], next = (rank + 1) % size, prev = (rank + size - 1) % size;
      MPI_Status st;
      int count = -1;
      for (i = 0; i < n; ++i) out[i] = val(rank, it, s, i);
      MPI_OK(MPI_Sendrecv(out, n, MPI_INT, next, s, in, 100000, MPI_INT, prev, s, MPI_COMM_WORLD,
                          &st));
      CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == s, "status %d/%d", st.MPI_SOURCE, st.MPI_TAG);
      MPI_OK(MPI_Get_count(&st, MPI_INT, &count));
      CHECK(count == n, "size %d: count %d", n, count);
      for (i = 0; i < n; ++i)
        CHECK(in[i] == val(prev, it, s, i), "size %d iteration %d: int %d is %d", n, it, i, in[i]);
    }
  }
  MPI_OK(MPI_Finalize());
  if (rank == 0) printf("sendrecv ok (%d ranks, %ld iterations)\n", size, iters);
  free(out);
  free(in);
  return 0;
}
