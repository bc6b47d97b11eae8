// Downstream test program in C++: rank, size and an allreduce.
#include <mpi.h>

#include <cstdio>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("hello c++ %d/%d sum %d\n", rank, size, sum);
  MPI_Finalize();
  return sum == size * (size - 1) / 2 ? 0 : 1;
}
