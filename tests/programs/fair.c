/* Fair chunking (issue 8): an 8-byte message is not held behind another
 * pair's large transfer.
 *
 * Rank 0 starts sending SIZE bytes (default 1 GiB) to rank 1, then tells
 * rank 2 it has; rank 2 then sends 8 bytes to rank 1. Rank 1 posted the
 * large receive first, then receives the small message. When the small one
 * has arrived, the large one must still be under way (it needs SIZE /
 * budget slices, 512 at the default 2 MiB): with FIFO chunking over all
 * transfers into a node, the small message would have waited for every
 * byte of it. Finally every byte of the large message is checked.
 *
 *   fair [SIZE_MIB]      (3 ranks)                                       */
#include <stdint.h>
#include <string.h>

#include "prog_common.h"

int main(int argc, char **argv) {
  prog_name = "fair";
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(size == 3, "needs 3 ranks, has %d", size);
  const size_t bytes = (size_t)arg_long(argc, argv, 1, 1024) << 20;
  const int count = (int)(bytes / sizeof(uint64_t));
  const uint64_t small_value = 0x5a5a5a5a12345678ull;
  if (rank == 0) {
    uint64_t *big = malloc(bytes);
    CHECK(big != NULL, "malloc %zu", bytes);
    for (int i = 0; i < count; ++i) big[i] = (uint64_t)i * 2654435761u;
    MPI_Request r;
    MPI_OK(MPI_Isend(big, count, MPI_UINT64_T, 1, 1, MPI_COMM_WORLD, &r));
    const int go = 1;
    MPI_OK(MPI_Send(&go, 1, MPI_INT, 2, 2, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    free(big);
  } else if (rank == 1) {
    uint64_t *big = malloc(bytes);
    CHECK(big != NULL, "malloc %zu", bytes);
    memset(big, 0, bytes);
    MPI_Request r;
    MPI_OK(MPI_Irecv(big, count, MPI_UINT64_T, 0, 1, MPI_COMM_WORLD, &r));
    uint64_t small = 0;
    MPI_OK(MPI_Recv(&small, 1, MPI_UINT64_T, 2, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(small == small_value, "small message %llx", (unsigned long long)small);
    int done = 0;
    MPI_OK(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
    CHECK(!done, "the %zu MiB transfer finished before the 8-byte message that came after it "
                 "(the small message waited behind it)", bytes >> 20);
    MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < count; ++i)
      CHECK(big[i] == (uint64_t)i * 2654435761u, "byte %zu of the large message", (size_t)i * 8);
    free(big);
  } else {
    int go = 0;
    MPI_OK(MPI_Recv(&go, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Send(&small_value, 1, MPI_UINT64_T, 1, 3, MPI_COMM_WORLD));
  }
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("fair ok (%d ranks)\n", size);
  MPI_Finalize();
  return 0;
}
