/* Matched probes, between rank pairs (2k, 2k+1; an odd last rank only
   checks MPI_PROC_NULL):
   - MPI_Mprobe takes a message out of matching: a receive posted after it
     for the same source and tag gets the next message, not the probed one;
   - MPI_Mrecv / MPI_Imrecv deliver the probed message (also into a strided
     datatype); MPI_Improbe eventually finds a message;
   - the MPI_ERROR field of a status is left alone by successful calls;
   - MPI_PROC_NULL gives MPI_MESSAGE_NO_PROC, whose receive is empty;
   - a too-small MPI_Mrecv buffer returns MPI_ERR_TRUNCATE;
   - MPI_Mrecv of MPI_MESSAGE_NULL returns an error. */
#include <string.h>

#include "prog_common.h"

int main(int argc, char **argv) {
  prog_name = "mprobe";
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int peer = rank ^ 1;
  MPI_Message msg;
  MPI_Status st;
  int buf[8];
  /* MPI_PROC_NULL */
  MPI_OK(MPI_Mprobe(MPI_PROC_NULL, 1, MPI_COMM_WORLD, &msg, &st));
  CHECK(msg == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL, "proc null mprobe");
  st.MPI_ERROR = MPI_ERR_DIMS;
  MPI_OK(MPI_Mrecv(buf, 8, MPI_INT, &msg, &st));
  int n = -1;
  MPI_Get_count(&st, MPI_INT, &n);
  CHECK(msg == MPI_MESSAGE_NULL && n == 0 && st.MPI_ERROR == MPI_ERR_DIMS, "proc null mrecv");
  if (peer < size) {
    if (rank % 2 == 0) {
      for (int k = 0; k < 4; ++k) {
        int v[4] = {rank * 100 + k, k, -k, 7};
        MPI_OK(MPI_Send(v, 4, MPI_INT, peer, k < 2 ? 5 : 6 + (k == 3), MPI_COMM_WORLD));
      }
    } else {
      /* Message 0 (tag 5) is probed; the receive posted next gets message 1. */
      st.MPI_ERROR = MPI_ERR_DIMS;
      MPI_OK(MPI_Mprobe(peer, 5, MPI_COMM_WORLD, &msg, &st));
      CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 5 && st.MPI_ERROR == MPI_ERR_DIMS,
            "mprobe status %d %d %d", st.MPI_SOURCE, st.MPI_TAG, st.MPI_ERROR);
      MPI_Get_count(&st, MPI_INT, &n);
      CHECK(n == 4, "mprobe count %d", n);
      int other[4] = {0};
      MPI_Request q;
      MPI_OK(MPI_Irecv(other, 4, MPI_INT, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &q));
      memset(buf, 0, sizeof buf);
      st.MPI_ERROR = MPI_ERR_TOPOLOGY;
      MPI_OK(MPI_Mrecv(buf, 4, MPI_INT, &msg, &st));
      CHECK(msg == MPI_MESSAGE_NULL && st.MPI_ERROR == MPI_ERR_TOPOLOGY, "mrecv status");
      CHECK(buf[0] == peer * 100 && buf[1] == 0, "mrecv got message %d", buf[1]);
      MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
      CHECK(other[0] == peer * 100 + 1, "the later receive got message %d", other[1]);
      /* Improbe until message 2 (tag 6) is seen, then Imrecv into every
         other int of buf. */
      int found = 0;
      while (!found) MPI_OK(MPI_Improbe(peer, 6, MPI_COMM_WORLD, &found, &msg, &st));
      MPI_Datatype evens;
      MPI_OK(MPI_Type_vector(4, 1, 2, MPI_INT, &evens));
      MPI_OK(MPI_Type_commit(&evens));
      for (int i = 0; i < 8; ++i) buf[i] = -99;
      MPI_OK(MPI_Imrecv(buf, 1, evens, &msg, &q));
      MPI_OK(MPI_Type_free(&evens)); /* freed while the receive is pending */
      MPI_OK(MPI_Wait(&q, &st));
      CHECK(st.MPI_TAG == 6 && buf[0] == peer * 100 + 2 && buf[2] == 2 && buf[4] == -2 &&
                buf[6] == 7 && buf[1] == -99 && buf[7] == -99,
            "imrecv into a vector: %d %d %d %d", buf[0], buf[2], buf[4], buf[6]);
      /* Message 3 (tag 7) into a buffer of 2 ints: truncated. */
      MPI_OK(MPI_Mprobe(peer, 7, MPI_COMM_WORLD, &msg, &st));
      MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
      int cls = 0;
      MPI_Error_class(MPI_Mrecv(buf, 2, MPI_INT, &msg, &st), &cls);
      CHECK(cls == MPI_ERR_TRUNCATE, "truncated mrecv: class %d", cls);
      CHECK(buf[0] == peer * 100 + 3, "truncated mrecv data %d", buf[0]);
      msg = MPI_MESSAGE_NULL;
      CHECK(MPI_Mrecv(buf, 2, MPI_INT, &msg, &st) != MPI_SUCCESS, "mrecv of MPI_MESSAGE_NULL");
      MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    }
  }
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("mprobe ok (%d ranks)\n", size);
  MPI_Finalize();
  return 0;
}
