/* periodic: the paper's §5.3 experiment (tests/integration/mds_test.cc):
 * BARRIERS times, every rank computes for COMPUTE_US (a busy loop on its
 * own clock) and then calls MPI_Barrier, so a collective is scheduled once
 * per COMPUTE_US worth of slices. Rank 0 prints "periodic ok (N barriers)".
 *   periodic COMPUTE_US BARRIERS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  int rank, i;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 3) {
    if (rank == 0) fprintf(stderr, "usage: periodic COMPUTE_US BARRIERS\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const double compute = atof(argv[1]);
  const int n = atoi(argv[2]);
  for (i = 0; i < n; ++i) {
    const double t0 = now_us();
    while (now_us() - t0 < compute) {
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  if (rank == 0) printf("periodic ok (%d barriers)\n", n);
  MPI_Finalize();
  return 0;
}
