/* Downstream test program: prints its rank, the size, a sum over all ranks,
   the variable BCS_DOWNSTREAM_GREETING and its node manager (BCS_NODE), so
   the test can check each ("-" for an unset variable). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v ? v : "-";
}

int main(int argc, char **argv) {
  int rank, size, sum = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("hello c %d/%d sum %d %s on %s\n", rank, size, sum, env("BCS_DOWNSTREAM_GREETING"),
         env("BCS_NODE"));
  MPI_Finalize();
  return sum == size * (size - 1) / 2 ? 0 : 1;
}
