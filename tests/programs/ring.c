/* prog_ring: a token goes around all ranks for several laps (default 10,
   argv[1]); every hop adds one, so each rank knows the exact value it must
   receive. Rank 0 prints "ring ok". With "announce" as argv[2], every rank
   prints its pid and rank 0 then "ring started" once every rank is in, and
   every lap also makes an MPI_Allreduce (for tests that act on a running
   job: a rank killed then is noticed by its peers' collective). */
#include <string.h>
#include <unistd.h>

#include "prog_common.h"

int main(int argc, char **argv) {
  int rank, size, lap;
  long laps;
  prog_name = "prog_ring";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  laps = arg_long(argc, argv, 1, 10);
  const int announce = argc > 2 && strcmp(argv[2], "announce") == 0;
  if (announce) {
    printf("rank %d pid %d blocking on the ring\n", rank, (int)getpid());
    fflush(stdout);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
      printf("ring started\n");
      fflush(stdout);
    }
  }
  for (lap = 0; lap < laps; ++lap) {
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    const long base = (long)lap * size;
    long token;
    MPI_Status st;
    if (rank == 0) {
      MPI_Request req;
      long out = base + 1;
      /* Non-blocking so that a one-rank ring (send to self) cannot deadlock. */
      MPI_OK(MPI_Isend(&out, 1, MPI_LONG, next, lap, MPI_COMM_WORLD, &req));
      MPI_OK(MPI_Recv(&token, 1, MPI_LONG, prev, lap, MPI_COMM_WORLD, &st));
      MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
      CHECK(token == base + size, "lap %d: got %ld, want %ld", lap, token, base + size);
    } else {
      MPI_OK(MPI_Recv(&token, 1, MPI_LONG, prev, lap, MPI_COMM_WORLD, &st));
      CHECK(token == base + rank, "lap %d: got %ld, want %ld", lap, token, base + rank);
      token += 1;
      MPI_OK(MPI_Send(&token, 1, MPI_LONG, next, lap, MPI_COMM_WORLD));
    }
    CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == lap, "status source %d tag %d", st.MPI_SOURCE,
          st.MPI_TAG);
    if (announce) {
      int one = 1, all = 0;
      MPI_OK(MPI_Allreduce(&one, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
      CHECK(all == size, "lap %d: allreduce %d", lap, all);
    }
  }
  MPI_OK(MPI_Finalize());
  if (rank == 0) printf("ring ok (%d ranks, %ld laps)\n", size, laps);
  return 0;
}
