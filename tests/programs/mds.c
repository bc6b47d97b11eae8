/* mds: the MMDS story's program (tests/integration/mds_test.cc). ITERS steps
 * of: a short computation, a ring exchange with MPI_Sendrecv, a non-blocking
 * exchange with both neighbours (MPI_Isend, MPI_Irecv, MPI_Waitall) and an
 * MPI_Barrier. Every rank measures its own run time, from MPI_Init's return
 * to the call of MPI_Finalize, and prints
 *   mds rank R run_ns T
 * then rank 0 prints "mds ok (N ranks, ITERS steps)".
 *   mds [ITERS]   (default 50) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char** argv) {
  int rank, size, i, k;
  long long t0, t1;
  const int iters = argc > 1 ? atoi(argv[1]) : 50;
  volatile double x = 1.0;
  MPI_Init(&argc, &argv);
  t0 = now_ns();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (i = 0; i < iters; ++i) {
    const int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double out[4] = {rank, i, 0, 0}, in[4], a[2], b[2];
    MPI_Request req[4];
    for (k = 0; k < 20000 * (rank + 1); ++k) x = x * 1.0000001 + 1e-9; /* compute */
    MPI_Sendrecv(out, 4, MPI_DOUBLE, right, 1, in, 4, MPI_DOUBLE, left, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if ((int)in[0] != left || (int)in[1] != i) {
      fprintf(stderr, "mds: rank %d: ring step %d got %g/%g\n", rank, i, in[0], in[1]);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Irecv(&a[0], 1, MPI_DOUBLE, left, 2, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(&a[1], 1, MPI_DOUBLE, right, 3, MPI_COMM_WORLD, &req[1]);
    b[0] = b[1] = rank;
    MPI_Isend(&b[0], 1, MPI_DOUBLE, right, 2, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(&b[1], 1, MPI_DOUBLE, left, 3, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  t1 = now_ns();
  MPI_Finalize();
  /* After MPI_Finalize: writing to a pipe may block, and that time is not
   * the run time the MMDS covers. */
  printf("mds rank %d run_ns %lld\n", rank, t1 - t0);
  if (rank == 0) printf("mds ok (%d ranks, %d steps)\n", size, iters);
  return 0;
}
