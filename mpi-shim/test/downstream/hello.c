/* Downstream test program: prints its rank, the size, a sum over all ranks
   and the variable BCS_DOWNSTREAM_GREETING, so the test can check each. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int rank, size, sum = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const char *g = getenv("BCS_DOWNSTREAM_GREETING");
  printf("hello c %d/%d sum %d %s\n", rank, size, sum, g ? g : "-");
  MPI_Finalize();
  return sum == size * (size - 1) / 2 ? 0 : 1;
}
