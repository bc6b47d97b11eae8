/* prog_probe: MPI_Probe / MPI_Get_count / MPI_Recv of messages of unknown
   size, then an MPI_Iprobe polling loop.
   Phase 1: every rank (0 included) sends K messages (default 5, argv[1]) to
   rank 0 with sizes known only to the sender; rank 0 probes with wildcards,
   allocates exactly MPI_Get_count ints and receives from status.MPI_SOURCE /
   MPI_TAG. Phase 2: each rank > 0 (or rank 0 itself in a one-rank job) sends
   one more message; rank 0 polls MPI_Iprobe on it until the flag is set.
   Rank 0 prints "probe ok". */
#include "prog_common.h"

static int msg_ints(int src, int k) { return 1 + src * 37 + k * 101; }  /* up to several KiB */

int main(int argc, char **argv) {
  int rank, size, k, i;
  long kmsg;
  MPI_Request *reqs;
  int **bufs;
  prog_name = "prog_probe";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  kmsg = arg_long(argc, argv, 1, 5);

  reqs = (MPI_Request *)malloc(sizeof(MPI_Request) * (size_t)(kmsg + 1));
  bufs = (int **)malloc(sizeof(int *) * (size_t)(kmsg + 1));
  CHECK(reqs && bufs, "out of memory");
  for (k = 0; k < kmsg; ++k) {
    const int n = msg_ints(rank, k);
    bufs[k] = (int *)malloc(sizeof(int) * (size_t)n);
    CHECK(bufs[k] != NULL, "out of memory");
    for (i = 0; i < n; ++i) bufs[k][i] = rank * 7919 + k * 131 + i;
    MPI_OK(MPI_Isend(bufs[k], n, MPI_INT, 0, 100 + k, MPI_COMM_WORLD, &reqs[k]));
  }

  if (rank == 0) {
    long total = (long)size * kmsg, m;
    for (m = 0; m < total; ++m) {
      MPI_Status st, st2;
      int count, src, tag, *in;
      MPI_OK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
      src = st.MPI_SOURCE;
      tag = st.MPI_TAG;
      CHECK(src >= 0 && src < size && tag >= 100 && tag < 100 + kmsg, "probe: source %d tag %d",
            src, tag);
      MPI_OK(MPI_Get_count(&st, MPI_INT, &count));
      CHECK(count == msg_ints(src, tag - 100), "probe: source %d tag %d count %d want %d", src,
            tag, count, msg_ints(src, tag - 100));
      in = (int *)malloc(sizeof(int) * (size_t)count);
      CHECK(in != NULL, "out of memory");
      MPI_OK(MPI_Recv(in, count, MPI_INT, src, tag, MPI_COMM_WORLD, &st2));
      CHECK(st2.MPI_SOURCE == src && st2.MPI_TAG == tag, "recv status %d/%d", st2.MPI_SOURCE,
            st2.MPI_TAG);
      MPI_OK(MPI_Get_count(&st2, MPI_INT, &count));
      CHECK(count == msg_ints(src, tag - 100), "recv count %d", count);
      for (i = 0; i < count; ++i)
        CHECK(in[i] == src * 7919 + (tag - 100) * 131 + i, "source %d tag %d: int %d is %d", src,
              tag, i, in[i]);
      free(in);
    }
  }
  MPI_OK(MPI_Waitall((int)kmsg, reqs, MPI_STATUSES_IGNORE));
  /* Phase 1's wildcard probes must not see phase 2's message. */
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

  /* Phase 2: MPI_Iprobe polling. */
  {
    const int sender = size > 1 ? 1 : 0;
    int payload = 4242, got = 0, flag = 0;
    long polls = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Status st;
    if (rank == sender)
      MPI_OK(MPI_Isend(&payload, 1, MPI_INT, 0, 999, MPI_COMM_WORLD, &req));
    if (rank == 0) {
      while (!flag) {
        MPI_OK(MPI_Iprobe(sender, 999, MPI_COMM_WORLD, &flag, &st));
        ++polls;
      }
      CHECK(st.MPI_SOURCE == sender && st.MPI_TAG == 999, "iprobe status %d/%d", st.MPI_SOURCE,
            st.MPI_TAG);
      MPI_OK(MPI_Get_count(&st, MPI_INT, &got));
      CHECK(got == 1, "iprobe count %d", got);
      MPI_OK(MPI_Recv(&got, 1, MPI_INT, sender, 999, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK(got == 4242, "iprobe payload %d", got);
    }
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    if (rank == 0) printf("iprobe found the message after %ld polls\n", polls);
  }

  MPI_OK(MPI_Finalize());
  if (rank == 0) printf("probe ok\n");
  for (k = 0; k < kmsg; ++k) free(bufs[k]);
  free(bufs);
  free(reqs);
  return 0;
}
