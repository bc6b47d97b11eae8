// Downstream test program in C++ (standard library included, so mpicxx
// must link it): rank, size and an allreduce, as hello.c.
#include <mpi.h>

#include <iostream>
#include <numeric>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, sum = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::vector<int> ranks(static_cast<size_t>(size));
  std::iota(ranks.begin(), ranks.end(), 0);
  const int expect = std::accumulate(ranks.begin(), ranks.end(), 0);
  std::cout << "hello c++ " + std::to_string(rank) + "/" + std::to_string(size) + " sum " +
                   std::to_string(sum) + "\n"
            << std::flush;
  MPI_Finalize();
  return sum == expect ? 0 : 1;
}
