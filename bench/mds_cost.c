/* The MMDS's cost per MPI call (bench/mds.sh): ITERS calls of MPI_Test on
 * MPI_REQUEST_NULL (a timed call that does nothing else), best of 5 loops;
 * rank 0 prints "mds_call_ns NS".
 *   mds_cost [ITERS]   (default 2000000) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  const long iters = argc > 1 ? atol(argv[1]) : 2000000;
  int rank, flag, round;
  double best = 1e30;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  for (round = 0; round < 5; ++round) {
    MPI_Request r = MPI_REQUEST_NULL;
    const double t0 = MPI_Wtime();
    long i;
    for (i = 0; i < iters; ++i) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    const double t = (MPI_Wtime() - t0) / (double)iters;
    if (t < best) best = t;
  }
  if (rank == 0) printf("mds_call_ns %.2f\n", best * 1e9);
  MPI_Finalize();
  return 0;
}
