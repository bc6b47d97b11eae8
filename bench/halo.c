/* 1-D halo-exchange stencil (bench/halo.sh): CELLS cells of doubles split
 * over the ranks, STEPS steps of a 3-point average, exchanging one halo
 * cell with each neighbour per step, either non-blocking (Irecv/Isend both
 * ways, then Waitall) or blocking (Sendrecv one way, then the other). Rank
 * 0 prints the slowest rank's time and a checksum (the same for every MPI:
 * the arithmetic is the same).
 *
 *   halo nonblocking|blocking [CELLS] [STEPS]                            */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 2 || (strcmp(argv[1], "nonblocking") && strcmp(argv[1], "blocking"))) {
    if (rank == 0) fprintf(stderr, "usage: halo nonblocking|blocking [CELLS] [STEPS]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int blocking = !strcmp(argv[1], "blocking");
  const long cells = argc > 2 ? atol(argv[2]) : 1000000;
  const int steps = argc > 3 ? atoi(argv[3]) : 100;
  const long n = cells / size;
  double *u = calloc((size_t)n + 2, sizeof *u), *v = calloc((size_t)n + 2, sizeof *v);
  for (long i = 1; i <= n; ++i) u[i] = (double)((rank * n + i) % 97);
  const int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
  const int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int s = 0; s < steps; ++s) {
    if (blocking) {
      MPI_Sendrecv(&u[n], 1, MPI_DOUBLE, right, 0, &u[0], 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
      MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 1, &u[n + 1], 1, MPI_DOUBLE, right, 1,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Request r[4];
      MPI_Irecv(&u[0], 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &r[0]);
      MPI_Irecv(&u[n + 1], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &r[1]);
      MPI_Isend(&u[n], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &r[2]);
      MPI_Isend(&u[1], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &r[3]);
      MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
    }
    for (long i = 1; i <= n; ++i) v[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0;
    double *t = u;
    u = v;
    v = t;
  }
  double t = MPI_Wtime() - t0, slowest = 0, sum = 0, total = 0;
  for (long i = 1; i <= n; ++i) sum += u[i];
  MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Reduce(&sum, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  if (rank == 0) printf("halo_s %.4f checksum %.6e\n", slowest, total);
  free(u);
  free(v);
  MPI_Finalize();
  return 0;
}
