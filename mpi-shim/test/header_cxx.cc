// Compiled by check_wrappers.sh as C++17 through mpicxx: mpi.h must be
// warning-free under -Wall -Wextra -Werror and link from C++.
#include <mpi.h>

#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<MPI_Request> reqs(2, MPI_REQUEST_NULL);
  MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  double t0 = MPI_Wtime();
  double t1 = MPI_Wtime();
  MPI_Finalize();
  if (rank != 0 || t1 < t0) return 3;
  std::printf("c++ header ok\n");
  return 0;
}
