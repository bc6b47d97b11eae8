/* A deadlock to be named (bcs kill's report): rank 0 sends tag 7 to rank 1
 * and waits for tag 8 from it; rank 1 waits for tag 9 from rank 0; any
 * other rank waits in a barrier nobody else joins. Each receive is posted
 * before a barrier that every rank passes, so by the time a rank prints
 * "deadlocked" its receive (posted earlier in its ring) is with its node
 * manager: a kill that waits for every rank's line finds them all. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  int rank, x = 0, y = 0;
  MPI_Request req = MPI_REQUEST_NULL;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    MPI_Send(&x, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
    MPI_Irecv(&y, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, &req);
  } else if (rank == 1) {
    MPI_Irecv(&y, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, &req);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  printf("rank %d deadlocked\n", rank);
  fflush(stdout);
  if (req != MPI_REQUEST_NULL)
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  else
    MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
