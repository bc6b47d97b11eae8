/* prog_flood [N]: rank 0 posts N (default 10000) small MPI_Isends to rank 1
   before rank 1 has posted anything (a barrier separates them); rank 1 then
   posts N MPI_Irecvs, more than the runtime's request table holds, and both
   wait for all. Every message must arrive, in order, with its value. Rank 0
   prints "flood ok". */
#include <stdlib.h>

#include "prog_common.h"

int main(int argc, char **argv) {
  int rank, size;
  prog_name = "prog_flood";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  const int n = (int)arg_long(argc, argv, 1, 10000);
  int *buf = malloc(sizeof(int) * (size_t)n);
  MPI_Request *q = malloc(sizeof(MPI_Request) * (size_t)n);
  CHECK(buf && q, "out of memory");
  if (size >= 2 && rank == 0) {
    for (int i = 0; i < n; ++i) {
      buf[i] = 3 * i + 1;
      MPI_OK(MPI_Isend(&buf[i], 1, MPI_INT, 1, i % 100, MPI_COMM_WORLD, &q[i]));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Waitall(n, q, MPI_STATUSES_IGNORE));
  } else if (size >= 2 && rank == 1) {
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < n; ++i) {
      buf[i] = -1;
      MPI_OK(MPI_Irecv(&buf[i], 1, MPI_INT, 0, i % 100, MPI_COMM_WORLD, &q[i]));
    }
    MPI_OK(MPI_Waitall(n, q, MPI_STATUSES_IGNORE));
    for (int i = 0; i < n; ++i) CHECK(buf[i] == 3 * i + 1, "message %d: got %d", i, buf[i]);
  } else {
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  }
  free(buf);
  free(q);
  MPI_OK(MPI_Finalize());
  if (rank == 0) printf("flood ok (%d ranks, %d messages)\n", size, n);
  return 0;
}
