/* Compiled by check_wrappers.sh as strict C99 through mpicc: mpi.h must be
   warning-free under -std=c99 -pedantic -Wall -Wextra -Werror, and a plain
   program must link and run as a singleton (no bcs runtime). */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
  int rank = -1, size = -1, flag = 0, len = 0, tsize = 0;
  char name[MPI_MAX_PROCESSOR_NAME];
  MPI_Status st;
  MPI_Request reqs[2];
  if (MPI_Init(&argc, &argv) != MPI_SUCCESS) return 2;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Initialized(&flag);
  MPI_Get_processor_name(name, &len);
  MPI_Type_size(MPI_DOUBLE, &tsize);
  MPI_Recv(NULL, 0, MPI_BYTE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
  MPI_Barrier(MPI_COMM_WORLD);
  /* Array arguments with the IGNORE constants must not warn at -O2. */
  MPI_Isend(&tsize, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &reqs[0]);
  MPI_Irecv(&len, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &reqs[1]);
  MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
  MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);
  if (rank != 0 || size != 1 || !flag || len <= 0 || tsize != (int)sizeof(double) ||
      st.MPI_SOURCE != MPI_PROC_NULL)
    return 3;
  MPI_Finalize();
  printf("c header ok\n");
  return 0;
}
