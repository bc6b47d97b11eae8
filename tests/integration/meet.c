/* A job that proves it ran while another job ran (space_test.cc).
 *
 *   it_meet DIR NAME [meet OTHER] [lines N] [hold]
 *
 * Every rank writes its pid into DIR/NAME.rank<R>.pid and prints
 * "NAME rank R pid P on NODE"; then rank 0 writes DIR/NAME.started
 * ("job J": $BCS_JOB).
 * meet OTHER: rank 0 waits (bounded: 30 s, looking every 2 ms) for
 *   DIR/OTHER.started, then writes DIR/NAME.saw and waits (bounded) for
 *   DIR/OTHER.saw. Both jobs get past the meeting only if each saw the
 *   other running: NAME.saw is written while NAME runs, after OTHER started,
 *   and OTHER waits for it while it runs. If the other job does not come,
 *   rank 0 says so on stderr and every rank exits 3.
 * lines N: N numbered lines "NAME line I of N", each after an allreduce
 *   of every rank's (rank + I) whose sum rank 0 checks; with hold, half of
 *   them before the hold and half after.
 * hold: rank 0 writes DIR/NAME.holding and waits (bounded: 90 s) for
 *   DIR/NAME.release, the other ranks in MPI_Bcast meanwhile; if it does
 *   not come, every rank exits 4.
 * Then a ring of 1024 ints per rank whose values depend on NAME and the
 * sender, checked by each receiver, and an allreduce of the wrong values
 * found and of the ranks; rank 0 prints "NAME ok: S ranks, job J, met
 * OTHER|nobody, N lines, ring checked" and every rank exits 0. */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kMeetSeconds = 30, kHoldSeconds = 90, kRing = 1024 };

static const char* dir;
static const char* name;

static void path_of(char* out, size_t n, const char* who, const char* what) {
  snprintf(out, n, "%s/%s.%s", dir, who, what);
}

/* Written whole under a temporary name, then renamed: whoever sees the
 * file sees all of it. */
static int put(const char* who, const char* what, const char* text) {
  char path[4096], tmp[4200];
  path_of(path, sizeof path, who, what);
  snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
  FILE* f = fopen(tmp, "w");
  if (!f) return -1;
  fputs(text, f);
  if (fclose(f) != 0) return -1;
  return rename(tmp, path);
}

/* Whether DIR/WHO.WHAT appears within `seconds`, looking every 2 ms. */
static int await_file(const char* who, const char* what, int seconds) {
  char path[4096];
  path_of(path, sizeof path, who, what);
  const struct timespec step = {0, 2 * 1000 * 1000};
  for (long i = 0; i < (long)seconds * 500; ++i) {
    if (access(path, F_OK) == 0) return 1;
    nanosleep(&step, NULL);
  }
  return access(path, F_OK) == 0;
}

static unsigned long seed_of(const char* s) {
  unsigned long h = 1469598103934665603ul;
  for (; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ul;
  return h;
}

static int value(unsigned long seed, int rank, int i) {
  return (int)((seed >> 7) % 1000003u) * 7 + rank * 4099 + i;
}

/* Every rank leaves with `code` once rank 0 decided it (a broadcast). */
static void leave_if(int code) {
  MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (code) {
    MPI_Finalize();
    exit(code);
  }
}

static void lines(int rank, int size, int from, int to, int total) {
  for (int i = from; i <= to; ++i) {
    long mine = rank + i, sum = -1;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank != 0) continue;
    const long want = (long)size * (size - 1) / 2 + (long)size * i;
    if (sum != want) {
      fprintf(stderr, "it_meet %s: line %d: the allreduce gave %ld, not %ld\n", name, i, sum, want);
      fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 5);
    }
    printf("%s line %d of %d\n", name, i, total);
    fflush(stdout);
  }
}

int main(int argc, char** argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc < 3) {
    if (rank == 0) fprintf(stderr, "usage: it_meet DIR NAME [meet OTHER] [lines N] [hold]\n");
    MPI_Finalize();
    return 2;
  }
  dir = argv[1];
  name = argv[2];
  const char* other = NULL;
  int nlines = 0, hold = 0;
  for (int a = 3; a < argc; ++a) {
    if (strcmp(argv[a], "meet") == 0 && a + 1 < argc)
      other = argv[++a];
    else if (strcmp(argv[a], "lines") == 0 && a + 1 < argc)
      nlines = atoi(argv[++a]);
    else if (strcmp(argv[a], "hold") == 0)
      hold = 1;
    else {
      if (rank == 0) fprintf(stderr, "it_meet: unknown argument %s\n", argv[a]);
      MPI_Finalize();
      return 2;
    }
  }
  const char* job = getenv("BCS_JOB") ? getenv("BCS_JOB") : "?";
  const char* node = getenv("BCS_NODE") ? getenv("BCS_NODE") : "?";

  char text[256], what[64];
  snprintf(text, sizeof text, "%d\n", (int)getpid());
  snprintf(what, sizeof what, "rank%d.pid", rank);
  if (put(name, what, text) != 0) {
    fprintf(stderr, "it_meet %s: rank %d: cannot write %s/%s.%s: %s\n", name, rank, dir, name, what,
            strerror(errno));
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  printf("%s rank %d pid %d on %s\n", name, rank, (int)getpid(), node);
  fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);

  int code = 0;
  if (rank == 0) {
    snprintf(text, sizeof text, "job %s\n", job);
    if (put(name, "started", text) != 0) {
      fprintf(stderr, "it_meet %s: cannot write %s/%s.started: %s\n", name, dir, name,
              strerror(errno));
      code = 2;
    }
  }
  leave_if(code);

  if (other) {
    if (rank == 0) {
      if (!await_file(other, "started", kMeetSeconds)) {
        fprintf(stderr,
                "it_meet %s (job %s): job %s did not start within %d s while this one ran "
                "(no %s/%s.started)\n",
                name, job, other, kMeetSeconds, dir, other);
        code = 3;
      } else if (put(name, "saw", text) != 0) {
        fprintf(stderr, "it_meet %s: cannot write %s/%s.saw\n", name, dir, name);
        code = 3;
      } else if (!await_file(other, "saw", kMeetSeconds)) {
        fprintf(stderr,
                "it_meet %s (job %s): job %s started, but did not see this one running within %d s "
                "(no %s/%s.saw)\n",
                name, job, other, kMeetSeconds, dir, other);
        code = 3;
      }
      fflush(stderr);
    }
    leave_if(code);
  }

  lines(rank, size, 1, hold ? nlines / 2 : nlines, nlines);
  if (hold) {
    if (rank == 0) {
      put(name, "holding", text);
      if (!await_file(name, "release", kHoldSeconds)) {
        fprintf(stderr, "it_meet %s (job %s): %s/%s.release did not appear within %d s\n", name,
                job, dir, name, kHoldSeconds);
        fflush(stderr);
        code = 4;
      }
    }
    leave_if(code);
    lines(rank, size, nlines / 2 + 1, nlines, nlines);
  }

  /* The ring: rank r sends kRing values of its own to r+1 and checks what
   * r-1 sent; the wrong values of all ranks are summed at rank 0. */
  const unsigned long seed = seed_of(name);
  int* out = malloc(sizeof(int) * kRing);
  int* in = malloc(sizeof(int) * kRing);
  if (!out || !in) MPI_Abort(MPI_COMM_WORLD, 2);
  for (int i = 0; i < kRing; ++i) out[i] = value(seed, rank, i);
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Sendrecv(out, kRing, MPI_INT, right, 7, in, kRing, MPI_INT, left, 7, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  long counts[2] = {0, rank}, sums[2] = {-1, -1};
  for (int i = 0; i < kRing; ++i) counts[0] += in[i] != value(seed, left, i);
  MPI_Allreduce(counts, sums, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  free(out);
  free(in);
  if (rank == 0) {
    if (sums[0] != 0 || sums[1] != (long)size * (size - 1) / 2) {
      fprintf(stderr,
              "it_meet %s (job %s): the ring got %ld wrong values, the ranks summed to %ld\n", name,
              job, sums[0], sums[1]);
      fflush(stderr);
      code = 5;
    } else {
      printf("%s ok: %d ranks, job %s, met %s, %d lines, ring checked\n", name, size, job,
             other ? other : "nobody", nlines);
      fflush(stdout);
    }
  }
  leave_if(code);
  MPI_Finalize();
  return 0;
}
