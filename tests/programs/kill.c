/* prog_kill R: after MPI_Init, rank R (default 1) kills itself with SIGKILL;
   every other rank blocks in an MPI_Recv from R. The runtime must notice the
   death and end the job instead of hanging. */
#include <signal.h>

#include "prog_common.h"

int main(int argc, char **argv) {
  int rank, size, victim, x = 0;
  prog_name = "prog_kill";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  victim = (int)arg_long(argc, argv, 1, size > 1 ? 1 : 0);
  CHECK(victim >= 0 && victim < size, "rank %d out of range", victim);
  if (rank == victim) {
    fprintf(stderr, "prog_kill: rank %d raising SIGKILL\n", rank);
    fflush(stderr);
    raise(SIGKILL);
  }
  MPI_Recv(&x, 1, MPI_INT, victim, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  fprintf(stderr, "prog_kill: rank %d: MPI_Recv from the killed rank %d returned\n", rank, victim);
  return 4;
}
