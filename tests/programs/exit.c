/* prog_exit R C: after MPI_Init, rank R (default 1) exits with code C
   (default 3) without MPI_Finalize; every other rank blocks in an MPI_Recv
   from R that can never complete. The runtime must end the job (and report
   R's exit code) instead of hanging. */
#include "prog_common.h"

int main(int argc, char **argv) {
  int rank, size, victim, code, x = 0;
  prog_name = "prog_exit";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  victim = (int)arg_long(argc, argv, 1, size > 1 ? 1 : 0);
  code = (int)arg_long(argc, argv, 2, 3);
  CHECK(victim >= 0 && victim < size, "rank %d out of range", victim);
  if (rank == victim) {
    fprintf(stderr, "prog_exit: rank %d exiting with code %d\n", rank, code);
    fflush(stderr);
    exit(code);
  }
  MPI_Recv(&x, 1, MPI_INT, victim, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  fprintf(stderr, "prog_exit: rank %d: MPI_Recv from the exited rank %d returned\n", rank, victim);
  return 4;
}
