/* prog_barrier: MPI_Barrier B times (default 100, argv[1]).
 *
 * The real check: no rank leaves barrier k before every rank entered it.
 * Ranks on rank 0's host share a memfd of counters (opened through
 * /proc/<pid>/fd of rank 0, so nothing is left behind if the job dies):
 * each increments entered[k] right before barrier k and, right after
 * leaving it, requires entered[k] to equal the number of sharing ranks.
 * Rank k % size arrives late (it first does a self send/receive, which
 * takes the runtime at least a slice), so an early exit would be seen.
 *
 * Message pattern: before barrier k every rank sends k to its right
 * neighbour (tag k) and receives it after the barrier, so barriers and
 * point-to-point traffic of the same communicator must not interfere.
 * Rank 0 prints "barrier ok". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prog_common.h"

struct setup {
  char host[MPI_MAX_PROCESSOR_NAME];
  int pid;
  int fd;
};

int main(int argc, char **argv) {
  int rank, size, k, p, mapped = 0, sharers = 0, len;
  long nbar;
  int *entered = NULL;
  size_t bytes;
  struct setup su;
  char host[MPI_MAX_PROCESSOR_NAME];
  prog_name = "prog_barrier";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  nbar = arg_long(argc, argv, 1, 100);
  CHECK(nbar > 0, "B must be positive");
  bytes = sizeof(int) * (size_t)(nbar + 1);
  MPI_OK(MPI_Get_processor_name(host, &len));

  /* Setup: rank 0 creates the counters and tells everyone where they are. */
  memset(&su, 0, sizeof su);
  if (rank == 0) {
    int fd = memfd_create("prog_barrier", 0);
    CHECK(fd >= 0, "memfd_create failed");
    CHECK(ftruncate(fd, (off_t)bytes) == 0, "ftruncate failed");
    memcpy(su.host, host, sizeof su.host);
    su.pid = (int)getpid();
    su.fd = fd;
    for (p = 1; p < size; ++p) MPI_OK(MPI_Send(&su, (int)sizeof su, MPI_BYTE, p, 0, MPI_COMM_WORLD));
  } else {
    MPI_OK(MPI_Recv(&su, (int)sizeof su, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  }
  if (strcmp(su.host, host) == 0) {
    char path[64];
    int fd;
    snprintf(path, sizeof path, "/proc/%d/fd/%d", su.pid, su.fd);
    fd = rank == 0 ? su.fd : open(path, O_RDWR);
    if (fd >= 0) {
      void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) {
        entered = (int *)m;
        mapped = 1;
      }
      if (rank != 0) close(fd);
    }
    if (!mapped) fprintf(stderr, "prog_barrier: rank %d: cannot map %s, shared check skipped\n", rank, path);
  }
  /* Everyone learns how many ranks share the counters. */
  if (rank == 0) {
    sharers = mapped;
    for (p = 1; p < size; ++p) {
      int m;
      MPI_OK(MPI_Recv(&m, 1, MPI_INT, p, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      sharers += m;
    }
    for (p = 1; p < size; ++p) MPI_OK(MPI_Send(&sharers, 1, MPI_INT, p, 2, MPI_COMM_WORLD));
  } else {
    MPI_OK(MPI_Send(&mapped, 1, MPI_INT, 0, 1, MPI_COMM_WORLD));
    MPI_OK(MPI_Recv(&sharers, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  }

  for (k = 1; k <= nbar; ++k) {
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int out = k, in = -1, delay = -1;
    MPI_Request req;
    MPI_Status st;
    MPI_OK(MPI_Isend(&out, 1, MPI_INT, next, k, MPI_COMM_WORLD, &req));
    if (rank == k % size) {
      /* Arrive late: a self round trip costs the runtime at least a slice. */
      MPI_Request sreq;
      MPI_OK(MPI_Isend(&k, 1, MPI_INT, rank, 0x7000 + k, MPI_COMM_WORLD, &sreq));
      MPI_OK(MPI_Recv(&delay, 1, MPI_INT, rank, 0x7000 + k, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      MPI_OK(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
      CHECK(delay == k, "self message %d", delay);
    }
    if (mapped) __atomic_add_fetch(&entered[k], 1, __ATOMIC_SEQ_CST);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (mapped) {
      const int seen = __atomic_load_n(&entered[k], __ATOMIC_SEQ_CST);
      CHECK(seen == sharers, "left barrier %d when only %d of %d ranks had entered it", k, seen,
            sharers);
    }
    MPI_OK(MPI_Recv(&in, 1, MPI_INT, prev, k, MPI_COMM_WORLD, &st));
    CHECK(in == k && st.MPI_SOURCE == prev, "barrier %d: got %d from %d", k, in, st.MPI_SOURCE);
    MPI_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
  }
  if (mapped) munmap(entered, bytes);
  MPI_OK(MPI_Finalize());
  if (rank == 0)
    printf("barrier ok (%d ranks, %ld barriers, %d ranks checked through shared memory)\n", size,
           nbar, sharers);
  return 0;
}
