/* Receives of messages that arrived before them (bench/unexpected.sh).
 *
 *   unexpected backlog N   rank 1 sends N 8-byte messages to rank 0 before a
 *                          barrier; rank 0 then receives them in order, and
 *                          prints the time per receive
 *   unexpected gather R    R rounds of MPICH's pt2pt/sendflood pattern: every
 *                          rank but 0 sends 16 bytes to rank 0 and receives
 *                          16 back; rank 0 receives from each in turn, then
 *                          sends to each; prints the time per round
 *
 * Every value is checked (a wrong one aborts the job). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int backlog = argc > 1 && !strcmp(argv[1], "backlog");
  if (argc < 2 || (!backlog && strcmp(argv[1], "gather")) || size < 2) {
    if (rank == 0) fprintf(stderr, "usage: unexpected backlog N | gather R (2 ranks or more)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const long n = argc > 2 ? atol(argv[2]) : 10000;
  if (backlog) {
    if (rank == 1)
      for (long i = 0; i < n; ++i) MPI_Send(&i, 1, MPI_LONG, 0, 5, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      const double t0 = MPI_Wtime();
      for (long i = 0; i < n; ++i) {
        long v = -1;
        MPI_Recv(&v, 1, MPI_LONG, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (v != i) {
          fprintf(stderr, "backlog: message %ld carried %ld\n", i, v);
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
      }
      printf("backlog_us %.3f\n", (MPI_Wtime() - t0) / (double)n * 1e6);
    }
  } else {
    int b[4] = {0, 0, 0, 0};
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (long i = 0; i < n; ++i) {
      if (rank == 0) {
        for (int j = 1; j < size; ++j) {
          MPI_Recv(b, 4, MPI_INT, j, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          if (b[0] != j || b[1] != (int)i) {
            fprintf(stderr, "gather: round %ld from %d carried %d %d\n", i, j, b[0], b[1]);
            MPI_Abort(MPI_COMM_WORLD, 1);
          }
        }
        for (int j = 1; j < size; ++j) {
          b[0] = 0;
          b[1] = (int)i;
          MPI_Send(b, 4, MPI_INT, j, 9, MPI_COMM_WORLD);
        }
      } else {
        b[0] = rank;
        b[1] = (int)i;
        MPI_Send(b, 4, MPI_INT, 0, 9, MPI_COMM_WORLD);
        MPI_Recv(b, 4, MPI_INT, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (b[1] != (int)i) {
          fprintf(stderr, "gather: rank %d round %ld got %d\n", rank, i, b[1]);
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
      }
    }
    if (rank == 0) printf("gather_us %.3f\n", (MPI_Wtime() - t0) / (double)n * 1e6);
  }
  MPI_Finalize();
  return 0;
}
