/* Nondeterministic on purpose (record and replay, issue 10): workers send
   after random delays (seeded per process and run), and rank 0 observes
   the arrival order in one of three ways, printing a hash of what it saw:
     master N  -- N results per worker received with MPI_ANY_SOURCE/ANY_TAG;
     poll N    -- N rounds of one MPI_Irecv per worker, completed with a
                  MPI_Testsome polling loop, then MPI_Testany, then MPI_Waitany,
                  then an MPI_Request_get_status loop;
     iprobe N  -- N messages per worker found by an MPI_Iprobe(ANY_SOURCE)
                  loop (the unsuccessful probes are counted into the hash too);
     wtime N   -- as master, and the MPI_Wtime reading at each arrival goes
                  into the hash (replayed only if recorded with --record-wtime).
   A third argument `serialized` starts MPI with MPI_Init_thread(...,
   MPI_THREAD_SERIALIZED) instead (one thread all the same).
   A plain run prints a different hash from one run to the next; a replay
   of a recording prints the recorded one. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prog_common.h"

static uint64_t hash = 1469598103934665603ull;
static void mix(uint64_t v) {
  for (int i = 0; i < 8; ++i) hash = (hash ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
}

static void worker(int n) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  srand((unsigned)(t.tv_nsec ^ (getpid() << 8) ^ rank));
  for (int i = 0; i < n; ++i) {
    usleep((useconds_t)(rand() % 3000));
    int v = rank * 1000 + i;
    MPI_OK(MPI_Send(&v, 1, MPI_INT, 0, rank, MPI_COMM_WORLD));
  }
}

int main(int argc, char **argv) {
  prog_name = "nondet";
  if (argc > 3 && strcmp(argv[3], "serialized") == 0) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    CHECK(provided == MPI_THREAD_SERIALIZED, "MPI_THREAD_SERIALIZED not provided");
  } else {
    MPI_Init(&argc, &argv);
  }
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argc > 1 ? argv[1] : "master";
  const int n = (int)arg_long(argc, argv, 2, 5);
  CHECK(size >= 2, "needs at least 2 ranks");
  if (rank != 0) {
    worker(n);
    MPI_Finalize();
    return 0;
  }
  const int workers = size - 1, total = n * workers;
  if (strcmp(mode, "master") == 0 || strcmp(mode, "wtime") == 0) {
    const int clock = strcmp(mode, "wtime") == 0;
    for (int i = 0; i < total; ++i) {
      int v;
      MPI_Status st;
      MPI_OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
      CHECK(st.MPI_TAG == st.MPI_SOURCE && v / 1000 == st.MPI_SOURCE, "message %d from %d", v, st.MPI_SOURCE);
      mix((uint64_t)v);
      if (clock) {
        const double t = MPI_Wtime();
        uint64_t bits;
        memcpy(&bits, &t, sizeof bits);
        mix(bits);
      }
    }
  } else if (strcmp(mode, "poll") == 0) {
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * (size_t)workers);
    int *vals = malloc(sizeof(int) * (size_t)workers), *idx = malloc(sizeof(int) * (size_t)workers);
    for (int round = 0; round < n; ++round) {
      for (int w = 0; w < workers; ++w)
        MPI_OK(MPI_Irecv(&vals[w], 1, MPI_INT, MPI_ANY_SOURCE, w + 1, MPI_COMM_WORLD, &reqs[w]));
      int left = workers;
      uint64_t polls = 0;
      while (left > 0) {
        int out = 0;
        if (round % 4 == 3) {
          for (int w = 0; w < workers; ++w) {
            if (reqs[w] == MPI_REQUEST_NULL) continue;
            int flag = 0;
            MPI_OK(MPI_Request_get_status(reqs[w], &flag, MPI_STATUS_IGNORE));
            if (!flag) continue;
            MPI_OK(MPI_Wait(&reqs[w], MPI_STATUS_IGNORE));
            mix((uint64_t)vals[w]);
            ++out;
          }
        } else if (round % 4 == 0) {
          MPI_OK(MPI_Testsome(workers, reqs, &out, idx, MPI_STATUSES_IGNORE));
          for (int k = 0; k < out; ++k) mix((uint64_t)vals[idx[k]]);
        } else if (round % 4 == 1) {
          int flag = 0, i = -1;
          MPI_OK(MPI_Testany(workers, reqs, &i, &flag, MPI_STATUS_IGNORE));
          if (flag && i != MPI_UNDEFINED) {
            out = 1;
            mix((uint64_t)vals[i]);
          }
        } else {
          int i = -1;
          MPI_OK(MPI_Waitany(workers, reqs, &i, MPI_STATUS_IGNORE));
          out = 1;
          mix((uint64_t)vals[i]);
        }
        if (out == 0) ++polls;
        left -= out;
      }
      mix(polls);
    }
    free(reqs);
    free(vals);
    free(idx);
  } else if (strcmp(mode, "iprobe") == 0) {
    uint64_t misses = 0;
    for (int got = 0; got < total;) {
      int flag = 0;
      MPI_Status st;
      MPI_OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
      if (!flag) {
        ++misses;
        continue;
      }
      int v;
      MPI_OK(MPI_Recv(&v, 1, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      mix((uint64_t)v);
      ++got;
    }
    mix(misses);
  } else {
    CHECK(0, "unknown mode %s", mode);
  }
  printf("nondet %s hash %016llx\n", mode, (unsigned long long)hash);
  MPI_Finalize();
  return 0;
}
