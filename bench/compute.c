/* Runtime overhead when ranks do not communicate (bench/idle.sh).
 *
 *   compute work N    every rank runs N iterations of a fixed arithmetic
 *                     loop between two barriers; rank 0 prints the slowest
 *                     rank's wall time ("work_s SECONDS")
 *   compute sleep S   every rank sleeps S seconds between two barriers,
 *                     after printing "sleeping" (rank 0), so a script can
 *                     sample the daemons' CPU while no rank runs
 *
 * Built with our mpicc and with a peer's, like coll_bench.c. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double spin(long n) {
  volatile double x = 1.0;
  for (long i = 0; i < n; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

int main(int argc, char** argv) {
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 3 || (strcmp(argv[1], "work") && strcmp(argv[1], "sleep"))) {
    if (rank == 0) fprintf(stderr, "usage: compute work N | compute sleep SECONDS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (!strcmp(argv[1], "work")) {
    const double t0 = MPI_Wtime();
    spin(atol(argv[2]));
    double t = MPI_Wtime() - t0, slowest = 0;
    MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("work_s %.4f\n", slowest);
  } else {
    const double s = atof(argv[2]);
    if (rank == 0) {
      printf("sleeping\n");
      fflush(stdout);
    }
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
