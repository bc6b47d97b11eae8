/* A job that computes instead of communicating: after a barrier every rank
 * sleeps (argv[1] seconds, default 2), outside MPI, then meets the others
 * at a barrier; argv[2] times (default 1). What the runtime does meanwhile
 * is overhead.
 * With argv[3] "post": rank 0 waits in MPI_Recv instead, each round, for
 * the 8 bytes rank 1 sends after its sleep; rank 1 goes back to sleeping
 * (computing) at once, never blocked, and the last rank meets at a barrier.
 * With argv[3] "coll": every rank sleeps, posts an MPI_Iallreduce, sleeps
 * again (computing while the collective is in flight, no MPI call), then
 * tests it, waits for it if need be, and checks the sum, each round. Rank 0
 * says in how many rounds some rank's test found it done. (Not rank 0's
 * alone: the ranks need not post at once, and a rank that posts first and
 * computes no longer than the other lags may test before the last post.
 * The last member's test, a full computation after its post, finds the
 * collective done if its slice started then.) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char** argv) {
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const double secs = argc > 1 ? atof(argv[1]) : 2.0;
  const int rounds = argc > 2 ? atoi(argv[2]) : 1;
  const int post = argc > 3 && strcmp(argv[3], "post") == 0;
  const int coll = argc > 3 && strcmp(argv[3], "coll") == 0;
  struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
  MPI_Barrier(MPI_COMM_WORLD);
  int done_early = 0;
  unsigned char* found = calloc(rounds > 0 ? (size_t)rounds : 1, 1);
  unsigned char* found_any = calloc(rounds > 0 ? (size_t)rounds : 1, 1);
  if (!found || !found_any) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int i = 0; i < rounds; ++i) {
    if (coll) {
      int size;
      long mine = rank + i, sum = -1;
      MPI_Request rq;
      MPI_Comm_size(MPI_COMM_WORLD, &size);
      nanosleep(&ts, NULL);
      MPI_Iallreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &rq);
      nanosleep(&ts, NULL);
      int flag = 0;
      MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
      found[i] = (unsigned char)flag;
      if (!flag) MPI_Wait(&rq, MPI_STATUS_IGNORE);
      if (sum != (long)size * (size - 1) / 2 + (long)size * i) {
        fprintf(stderr, "round %d: rank %d got the sum %ld\n", i, rank, sum);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      continue;
    }
    if (post && rank == 0) {
      long got = -1;
      MPI_Recv(&got, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (got != i) {
        fprintf(stderr, "round %d: got %ld\n", i, got);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      continue;
    }
    nanosleep(&ts, NULL);
    if (post) {
      long v = i;
      if (rank == 1) MPI_Send(&v, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD);
    } else {
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  if (post) MPI_Barrier(MPI_COMM_WORLD);
  if (coll && rounds > 0) {
    MPI_Reduce(found, found_any, rounds, MPI_UNSIGNED_CHAR, MPI_BOR, 0, MPI_COMM_WORLD);
    for (int i = 0; i < rounds; ++i) done_early += found_any[i] != 0;
  }
  free(found);
  free(found_any);
  if (rank == 0 && coll) printf("coll done before the wait: %d of %d\n", done_early, rounds);
  if (rank == 0) printf("idle ok\n");
  MPI_Finalize();
  return 0;
}
