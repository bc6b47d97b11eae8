/* prog_ssend: synchronous sends complete only once matched.
 *
 * Rank 0 starts MPI_Issend(tag 1) to rank 1, which does not post the
 * matching receive until rank 0 tells it to (tag 2). So when rank 0 tests
 * the Issend before telling it, the send cannot be complete: a runtime that
 * completed it (as a buffered small send would) fails the check. No timing
 * is involved: the order of events makes the answer certain.
 * Then blocking MPI_Ssend exchanges of 0 B, 8 B and 64 KiB check the data. */
#include <string.h>

#include "prog_common.h"

int main(int argc, char **argv) {
  int rank, size, flag = 1, go = 1, x = 42, y = 0;
  MPI_Request req;
  static char buf[65536], got[65536];
  const int sizes[] = {0, 8, 65536};
  prog_name = "prog_ssend";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 2, "needs 2 ranks, got %d", size);
  if (rank == 0) {
    MPI_OK(MPI_Issend(&x, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &req));
    MPI_OK(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    CHECK(!flag, "MPI_Issend completed before rank 1 posted its receive");
    MPI_OK(MPI_Send(&go, 1, MPI_INT, 1, 2, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
  } else if (rank == 1) {
    MPI_OK(MPI_Recv(&go, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Recv(&y, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(y == 42, "Issend delivered %d, want 42", y);
  }
  for (int i = 0; i < 3; ++i) {
    const int n = sizes[i];
    if (rank == 0) {
      for (int k = 0; k < n; ++k) buf[k] = (char)(k * 7 + n);
      MPI_OK(MPI_Ssend(buf, n, MPI_CHAR, 1, 10 + i, MPI_COMM_WORLD));
    } else if (rank == 1) {
      MPI_Status st;
      int count = -1;
      memset(got, 0, sizeof got);
      MPI_OK(MPI_Recv(got, n, MPI_CHAR, 0, 10 + i, MPI_COMM_WORLD, &st));
      MPI_OK(MPI_Get_count(&st, MPI_CHAR, &count));
      CHECK(count == n, "Ssend of %d bytes delivered %d", n, count);
      for (int k = 0; k < n; ++k) CHECK(got[k] == (char)(k * 7 + n), "byte %d of %d wrong", k, n);
    }
  }
  MPI_OK(MPI_Finalize());
  if (rank == 0) printf("ssend ok\n");
  return 0;
}
