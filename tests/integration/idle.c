/* A job that computes instead of communicating: after a barrier every rank
 * sleeps (argv[1] seconds, default 2), outside MPI, then meets the others
 * at a barrier; argv[2] times (default 1). What the runtime does meanwhile
 * is overhead. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const double secs = argc > 1 ? atof(argv[1]) : 2.0;
  const int rounds = argc > 2 ? atoi(argv[2]) : 1;
  MPI_Barrier(MPI_COMM_WORLD);
  for (int i = 0; i < rounds; ++i) {
    struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
    nanosleep(&ts, NULL);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (rank == 0) printf("idle ok\n");
  MPI_Finalize();
  return 0;
}
