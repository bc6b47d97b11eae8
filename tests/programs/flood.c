/* prog_flood [N]: rank 0 posts N (default 10000) small MPI_Isends to rank 1
   before rank 1 has posted anything (a barrier separates them); rank 1 then
   posts N MPI_Irecvs, more than the runtime's request table holds, and both
   wait for all. Every message must arrive, in order, with its value. Rank 0
   prints "flood ok".

   prog_flood N mutual: ranks 0 and 1 each post N MPI_Isends to the other,
   then N MPI_Irecvs, then wait for all: each floods the other before it
   receives anything. A barrier after the first N/2 sends (every rank takes
   part) makes sure both have that many waiting unmatched before either
   posts the rest. With a receiver bound below N/2 (bcs run
   --max-unexpected) the rest of at least one rank's sends are held back,
   and its receives must still get past them. Rank 0 prints "mutual flood
   ok". */
#include <stdlib.h>
#include <string.h>

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
  if (argc > 2 && strcmp(argv[2], "mutual") == 0) {
    int *in = malloc(sizeof(int) * (size_t)n);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * (size_t)n);
    CHECK(in && rq, "out of memory");
    const int peer = 1 - rank;
    if (rank < 2 && size >= 2)
      for (int i = 0; i < n / 2; ++i) {
        buf[i] = 1000000 * rank + i;
        MPI_OK(MPI_Isend(&buf[i], 1, MPI_INT, peer, i % 7, MPI_COMM_WORLD, &q[i]));
      }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank < 2 && size >= 2) {
      for (int i = n / 2; i < n; ++i) {
        buf[i] = 1000000 * rank + i;
        MPI_OK(MPI_Isend(&buf[i], 1, MPI_INT, peer, i % 7, MPI_COMM_WORLD, &q[i]));
      }
      for (int i = 0; i < n; ++i) {
        in[i] = -1;
        MPI_OK(MPI_Irecv(&in[i], 1, MPI_INT, peer, i % 7, MPI_COMM_WORLD, &rq[i]));
      }
      MPI_OK(MPI_Waitall(n, q, MPI_STATUSES_IGNORE));
      MPI_OK(MPI_Waitall(n, rq, MPI_STATUSES_IGNORE));
      for (int i = 0; i < n; ++i)
        CHECK(in[i] == 1000000 * peer + i, "message %d from rank %d: got %d", i, peer, in[i]);
    }
    free(in);
    free(rq);
    free(buf);
    free(q);
    MPI_OK(MPI_Finalize());
    if (rank == 0) printf("mutual flood ok (%d messages each way)\n", n);
    return 0;
  }
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
