/* prog_truncate: receiving a message longer than the receive buffer.
 *
 *   prog_truncate          MPI_ERRORS_RETURN: MPI_Recv and MPI_Irecv+MPI_Wait
 *                          must return MPI_ERR_TRUNCATE (class and
 *                          status.MPI_ERROR), for an inline-sized and a large
 *                          message; prints "truncate ok".
 *   prog_truncate fatal    default handler (MPI_ERRORS_ARE_FATAL): the
 *                          receiver's MPI_Recv must abort the job, with a
 *                          message naming the rank and MPI_Recv. Reaching the
 *                          end is a failure (exit 3).
 *
 * Rank 1 receives what rank 0 sends (rank 0 sends to itself in a one-rank
 * job). Other ranks only take part in MPI_Finalize. */
#include <string.h>

#include "prog_common.h"

#define SMALL 40   /* ints: 160 bytes, inline */
#define LARGE 4000 /* ints: 16000 bytes, read from the sender's memory */
#define CAP 10     /* ints the receiver has room for */

int main(int argc, char **argv) {
  int rank, size, receiver, fatal, i, is_bcs = 0;
  int small[SMALL], large[LARGE];
  prog_name = "prog_truncate";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  fatal = argc > 1 && strcmp(argv[1], "fatal") == 0;
  receiver = size > 1 ? 1 : 0;
  for (i = 0; i < SMALL; ++i) small[i] = i;
  for (i = 0; i < LARGE; ++i) large[i] = i;

  if (fatal) {
    MPI_Request req = MPI_REQUEST_NULL;
    if (rank == 0) MPI_OK(MPI_Isend(large, LARGE, MPI_INT, receiver, 1, MPI_COMM_WORLD, &req));
    if (rank == receiver) {
      int in[CAP];
      MPI_Recv(in, CAP, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      fprintf(stderr, "prog_truncate: rank %d: MPI_Recv returned after truncation in fatal mode\n",
              rank);
      return 3;
    }
    /* The job is expected to end with the receiver's abort. */
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 3;
  }

  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  {
    /* MPI only requires status.MPI_ERROR from multi-request calls; bcs also
       sets it for single ones, so check it there only. */
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_OK(MPI_Get_library_version(lib, &len));
    is_bcs = strncmp(lib, "bcs ", 4) == 0;
  }
  {
    MPI_Request sreq[4];
    int nsend = 0;
    if (rank == 0) {
      /* Two of each: one for MPI_Recv, one for MPI_Irecv + MPI_Wait. */
      MPI_OK(MPI_Isend(small, SMALL, MPI_INT, receiver, 1, MPI_COMM_WORLD, &sreq[nsend++]));
      MPI_OK(MPI_Isend(large, LARGE, MPI_INT, receiver, 2, MPI_COMM_WORLD, &sreq[nsend++]));
      MPI_OK(MPI_Isend(small, SMALL, MPI_INT, receiver, 3, MPI_COMM_WORLD, &sreq[nsend++]));
      MPI_OK(MPI_Isend(large, LARGE, MPI_INT, receiver, 4, MPI_COMM_WORLD, &sreq[nsend++]));
    }
    if (rank == receiver) {
      int tag;
      for (tag = 1; tag <= 4; ++tag) {
        int in[CAP], rc, cls = -1, count = -1;
        MPI_Status st;
        memset(&st, 0, sizeof st);
        if (tag <= 2) {
          rc = MPI_Recv(in, CAP, MPI_INT, 0, tag, MPI_COMM_WORLD, &st);
        } else {
          MPI_Request r;
          MPI_OK(MPI_Irecv(in, CAP, MPI_INT, 0, tag, MPI_COMM_WORLD, &r));
          rc = MPI_Wait(&r, &st);
          CHECK(r == MPI_REQUEST_NULL, "tag %d: request not freed", tag);
        }
        MPI_OK(MPI_Error_class(rc, &cls));
        CHECK(cls == MPI_ERR_TRUNCATE, "tag %d: error class %d, want MPI_ERR_TRUNCATE", tag, cls);
        CHECK(!is_bcs || st.MPI_ERROR == MPI_ERR_TRUNCATE, "tag %d: status.MPI_ERROR %d", tag, st.MPI_ERROR);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == tag, "tag %d: status %d/%d", tag, st.MPI_SOURCE,
              st.MPI_TAG);
        /* What fitted was delivered (bcs counts the bytes delivered; other
           MPIs may report the message size). */
        MPI_OK(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(!is_bcs || count == CAP, "tag %d: count %d, want %d", tag, count, CAP);
        if (!is_bcs) count = 0;  /* other MPIs: contents after truncation unspecified */
        for (i = 0; i < count; ++i) CHECK(in[i] == i, "tag %d: int %d is %d", tag, i, in[i]);
      }
    }
    if (rank == 0) MPI_OK(MPI_Waitall(nsend, sreq, MPI_STATUSES_IGNORE));
  }
  /* A correct receive still works after the errors. */
  if (rank == 0) MPI_OK(MPI_Send(small, SMALL, MPI_INT, receiver, 5, MPI_COMM_WORLD));
  if (rank == receiver) {
    int in[SMALL];
    MPI_OK(MPI_Recv(in, SMALL, MPI_INT, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (i = 0; i < SMALL; ++i) CHECK(in[i] == i, "int %d is %d", i, in[i]);
  }
  MPI_OK(MPI_Finalize());
  if (rank == 0) printf("truncate ok\n");
  return 0;
}
