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
 * collective done if its slice started then.)
 * With argv[3] "large" (2 ranks): each round rank 1 posts an MPI_Irecv of
 * 256 KiB, meets rank 0 at a barrier (so that the runtime has it) and
 * computes; rank 0 computes a tenth of the time, posts the MPI_Isend and
 * computes the whole time. Then each tests its request once, waits for
 * it, and rank 1 checks the bytes. Rank 1 says in how many rounds its
 * test found the message there: moved while both computed.
 * With argv[3] "poll" (2 ranks): each round rank 0 posts an MPI_Irecv of 8
 * bytes, meets rank 1 at a barrier and calls MPI_Test until it completes;
 * rank 1 computes a tenth of the time, sends, and computes the whole
 * time. Rank 0 says in how many rounds its poll found the message before
 * rank 1 stopped computing (rank 1 sends the CLOCK_MONOTONIC time it
 * stopped; both ranks are on one host).
 * With argv[4] "announce": rank 0 prints "idle started" as round 10
 * begins (a story acts on it, well into the job's pacing); argv[3] may then
 * be any other word for the plain mode. */
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
  const int large = argc > 3 && strcmp(argv[3], "large") == 0;
  const int poll = argc > 3 && strcmp(argv[3], "poll") == 0;
  struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
  const double tenth = secs / 10;
  struct timespec ts10 = {(time_t)tenth, (long)((tenth - (double)(time_t)tenth) * 1e9)};
  enum { kLarge = 256 * 1024 };
  unsigned char* big = large ? malloc(kLarge) : NULL;
  if (large && !big) MPI_Abort(MPI_COMM_WORLD, 1);
  int served = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const int announce = rank == 0 && argc > 4 && strcmp(argv[4], "announce") == 0;
  int done_early = 0;
  unsigned char* found = calloc(rounds > 0 ? (size_t)rounds : 1, 1);
  unsigned char* found_any = calloc(rounds > 0 ? (size_t)rounds : 1, 1);
  if (!found || !found_any) MPI_Abort(MPI_COMM_WORLD, 1);
  for (int i = 0; i < rounds; ++i) {
    if (announce && i == 10) {
      printf("idle started\n");
      fflush(stdout);
    }
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
    if (large) {
      MPI_Request rq;
      int flag = 0;
      if (rank == 1) {
        memset(big, 0, kLarge);
        MPI_Irecv(big, kLarge, MPI_UNSIGNED_CHAR, 0, i, MPI_COMM_WORLD, &rq);
        MPI_Barrier(MPI_COMM_WORLD);
        nanosleep(&ts10, NULL);
        nanosleep(&ts, NULL);
      } else {
        for (int k = 0; k < kLarge; ++k) big[k] = (unsigned char)(k * 7 + i);
        MPI_Barrier(MPI_COMM_WORLD);
        nanosleep(&ts10, NULL);
        MPI_Isend(big, kLarge, MPI_UNSIGNED_CHAR, 1, i, MPI_COMM_WORLD, &rq);
        nanosleep(&ts, NULL);
      }
      MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
      if (!flag) MPI_Wait(&rq, MPI_STATUS_IGNORE);
      if (rank == 1) {
        served += flag;
        for (int k = 0; k < kLarge; ++k)
          if (big[k] != (unsigned char)(k * 7 + i)) {
            fprintf(stderr, "round %d: byte %d is %d\n", i, k, big[k]);
            MPI_Abort(MPI_COMM_WORLD, 1);
          }
      }
      MPI_Barrier(MPI_COMM_WORLD);
      continue;
    }
    if (poll) {
      struct timespec at;
      double stopped = 0;
      if (rank == 0) {
        long got = -1;
        MPI_Request rq;
        int flag = 0;
        MPI_Irecv(&got, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD, &rq);
        MPI_Barrier(MPI_COMM_WORLD);
        while (!flag) MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
        clock_gettime(CLOCK_MONOTONIC, &at);
        if (got != i) {
          fprintf(stderr, "round %d: got %ld\n", i, got);
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Recv(&stopped, 1, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        served += (double)at.tv_sec + (double)at.tv_nsec * 1e-9 < stopped;
      } else {
        long v = i;
        MPI_Barrier(MPI_COMM_WORLD);
        nanosleep(&ts10, NULL);
        MPI_Send(&v, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD);
        nanosleep(&ts, NULL);
        clock_gettime(CLOCK_MONOTONIC, &at);
        stopped = (double)at.tv_sec + (double)at.tv_nsec * 1e-9;
        MPI_Send(&stopped, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
      }
      MPI_Barrier(MPI_COMM_WORLD);
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
  if (rank == 1 && large) printf("moved while computing: %d of %d\n", served, rounds);
  if (rank == 0 && poll) printf("polled in while computing: %d of %d\n", served, rounds);
  free(big);
  if (rank == 0) printf("idle ok\n");
  MPI_Finalize();
  return 0;
}
