/* Load without loss, every message checked:
     load window N   N 8-byte messages between rank pairs (2k, 2k+1), in
                     MPI_Isend/MPI_Irecv windows of 64
     load barrier N  N barriers
     load a2a N [MS] every rank sends N longs to every rank (itself too) by
                     point-to-point, all posted before any wait; with MS,
                     rank r computes r*MS ms between posting and waiting
                     (large messages then land both while their receiver
                     waits - the receiving rank copies - and while it
                     computes - the node managers copy)
   The same program, with large N, is the sanitizer load run
   (tests/README.md: -DBCS_SANITIZE). */
#include <string.h>

#include "prog_common.h"

int main(int argc, char **argv) {
  prog_name = "load";
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argc > 1 ? argv[1] : "window";
  const long n = arg_long(argc, argv, 2, 10000);
  long errs = 0;
  if (!strcmp(mode, "window")) {
    enum { W = 64 };
    long sbuf[W], rbuf[W];
    MPI_Request rq[2 * W];
    const int peer = rank ^ 1;
    if (peer < size) {
      for (long base = 0; base < n; base += W) {
        for (int k = 0; k < W; k++) {
          sbuf[k] = base + k + rank * 1000000007L;
          MPI_OK(MPI_Irecv(&rbuf[k], 1, MPI_LONG, peer, k, MPI_COMM_WORLD, &rq[k]));
          MPI_OK(MPI_Isend(&sbuf[k], 1, MPI_LONG, peer, k, MPI_COMM_WORLD, &rq[W + k]));
        }
        MPI_OK(MPI_Waitall(2 * W, rq, MPI_STATUSES_IGNORE));
        for (int k = 0; k < W; k++) errs += rbuf[k] != base + k + peer * 1000000007L;
      }
    }
  } else if (!strcmp(mode, "barrier")) {
    for (long i = 0; i < n; i++) MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  } else if (!strcmp(mode, "a2a")) {
    long *s = malloc(sizeof(long) * (size_t)size * (size_t)n);
    long *r = malloc(sizeof(long) * (size_t)size * (size_t)n);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * 2 * (size_t)size);
    CHECK(s && r && rq, "no memory");
    for (int p = 0; p < size; p++)
      for (long i = 0; i < n; i++) s[p * n + i] = rank * 1000003L + p * 101L + i;
    for (int p = 0; p < size; p++) {
      MPI_OK(MPI_Irecv(r + p * n, (int)n, MPI_LONG, p, 5, MPI_COMM_WORLD, &rq[p]));
      MPI_OK(MPI_Isend(s + p * n, (int)n, MPI_LONG, p, 5, MPI_COMM_WORLD, &rq[size + p]));
    }
    const long ms = arg_long(argc, argv, 3, 0);
    if (ms > 0) {  /* computing, outside MPI */
      const double until = MPI_Wtime() + 1e-3 * (double)(ms * rank);
      volatile double x = 1.0;
      while (MPI_Wtime() < until) x = x * 1.0000001 + 1e-9;
    }
    MPI_OK(MPI_Waitall(2 * size, rq, MPI_STATUSES_IGNORE));
    for (int p = 0; p < size; p++)
      for (long i = 0; i < n; i++) errs += r[p * n + i] != p * 1000003L + rank * 101L + i;
    free(s);
    free(r);
    free(rq);
  } else {
    CHECK(0, "unknown mode %s (window, barrier, a2a)", mode);
  }
  long all = 0;
  MPI_OK(MPI_Allreduce(&errs, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
  CHECK(all == 0, "%ld wrong values", all);
  if (rank == 0) printf("load ok (%d ranks, %s %ld)\n", size, mode, n);
  MPI_Finalize();
  return 0;
}
