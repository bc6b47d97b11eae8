/* prog_abort [R [C]]: rank R (default 0) calls MPI_Abort(MPI_COMM_WORLD, C)
   (C default 7) after MPI_Init; every other rank blocks in an MPI_Recv from
   R. The job must end with exit code C and say which rank aborted. */
#include "prog_common.h"

int main(int argc, char **argv) {
  int rank, size, who, code, x = 0;
  prog_name = "prog_abort";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  who = (int)arg_long(argc, argv, 1, 0);
  code = (int)arg_long(argc, argv, 2, 7);
  CHECK(who >= 0 && who < size, "rank %d out of range", who);
  if (rank == who) {
    printf("prog_abort: rank %d calling MPI_Abort(MPI_COMM_WORLD, %d)\n", rank, code);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, code);
    fprintf(stderr, "prog_abort: MPI_Abort returned\n");
    return 4;
  }
  MPI_Recv(&x, 1, MPI_INT, who, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  fprintf(stderr, "prog_abort: rank %d: MPI_Recv from the aborted rank %d returned\n", rank, who);
  return 4;
}
