/* A message buffer that is not mapped: rank 0 sends 8 KiB from an address
   it does not have to rank 1 (past the 4 KiB eager limit: the node manager
   reads it, where an eager or inline send is copied by the rank itself). Both
   calls return MPI_ERR_BUFFER ("bad address"), not "peer gone", and the job
   goes on: a good message follows. Needs 2 ranks. */
#include <stdint.h>

#include "prog_common.h"

int main(int argc, char **argv) {
  prog_name = "badbuf";
  MPI_Init(&argc, &argv);
  int rank, size, cls = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(size == 2, "needs 2 ranks");
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  static char buf[8192];
  void *bad = (void *)(uintptr_t)0x1000; /* the first pages are never mapped */
  if (rank == 0) {
    MPI_Error_class(MPI_Send(bad, 8192, MPI_CHAR, 1, 1, MPI_COMM_WORLD), &cls);
    CHECK(cls == MPI_ERR_BUFFER, "send from a bad address: class %d", cls);
    MPI_OK(MPI_Send(buf, 8192, MPI_CHAR, 1, 2, MPI_COMM_WORLD));
  } else {
    MPI_Error_class(MPI_Recv(buf, 8192, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE), &cls);
    CHECK(cls == MPI_ERR_BUFFER, "receive of a message from a bad address: class %d", cls);
    MPI_OK(MPI_Recv(buf, 8192, MPI_CHAR, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  }
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("badbuf ok (%d ranks)\n", size);
  MPI_Finalize();
  return 0;
}
