/* A job that computes, then only communicates (strobe_test.cc, the strobe
 * receiver's priority). Two ranks. Both compute (spin, no MPI call) until
 * the file argv[1] exists; rank 0 says "computing" first. Then they
 * ping-pong 8 bytes, with no computation between the calls, until the
 * file argv[2] exists; rank 0 says "ping-ponging" once they started, and
 * tells rank 1 in each message whether to go on. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 3 || size != 2) {
    if (rank == 0) fprintf(stderr, "usage: it_computes GO_FILE STOP_FILE (2 ranks)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (rank == 0) {
    printf("computing\n");
    fflush(stdout);
  }
  volatile unsigned long work = 0;
  while (access(argv[1], F_OK) != 0)
    for (int i = 0; i < 100000; ++i) work = work + (unsigned long)i;
  MPI_Barrier(MPI_COMM_WORLD);
  long go = 1, rounds = 0;
  while (go) {
    if (rank == 0) {
      go = access(argv[2], F_OK) != 0;
      MPI_Send(&go, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(&go, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (++rounds == 1) {
        printf("ping-ponging\n");
        fflush(stdout);
      }
    } else {
      MPI_Recv(&go, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(&go, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD);
    }
  }
  if (rank == 0) printf("done after %ld round trips\n", rounds);
  MPI_Finalize();
  return 0;
}
