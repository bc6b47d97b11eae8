/* Every rank announces its pid, then waits forever for a message that no
 * rank sends: a job that can only end by a kill, a timeout or a failure. */
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char** argv) {
  int rank, x;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  printf("rank %d pid %d blocking\n", rank, (int)getpid());
  fflush(stdout);
  MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Finalize();
  return 0;
}
