/* ring: rank 0 sends a token around the ring of all ranks; each rank adds
   its rank number, so rank 0 gets back 0 + 1 + ... + (size-1).
   Build: mpicc -o ring ring.c      Run: bcs run -n 4 ./ring */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  int rank, size, token;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  if (rank == 0) {
    MPI_Request req;
    int start = 0;
    /* Isend: in a one-rank job rank 0 is its own neighbour. */
    MPI_Isend(&start, 1, MPI_INT, next, 0, MPI_COMM_WORLD, &req);
    MPI_Recv(&token, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    printf("rank 0: token came back as %d (expected %d)\n", token, size * (size - 1) / 2);
  } else {
    MPI_Recv(&token, 1, MPI_INT, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("rank %d: got %d from rank %d\n", rank, token, prev);
    token += rank;
    MPI_Send(&token, 1, MPI_INT, next, 0, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
