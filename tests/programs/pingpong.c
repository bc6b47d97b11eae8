/* prog_pingpong: rank 0 <-> rank 1 ping-pong over a list of message sizes.
 *
 *   prog_pingpong [--iters N] [SIZE...]         verify mode (default)
 *   prog_pingpong --bench ITER [SIZE...]        latency mode
 *
 * SIZE accepts k/K (KiB) and m/M (MiB) suffixes. Default sizes straddle the
 * 192-byte inline and the 4 KiB eager limit and go up to 16 MiB (chunked
 * over several slices).
 * Verify mode checks every byte of every message against a pattern that
 * depends on size, iteration, direction and offset, and prints
 * "pingpong ok". Latency mode prints one "size_bytes latency_us" line per
 * size (half round trip, mean over ITER round trips after a warm-up).
 *
 * Plain MPI on purpose: bench/ builds this same file with other MPIs'
 * mpicc (e.g. mpicc.openmpi) to compare. Ranks other than 0 and 1 idle. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const size_t default_sizes[] = {0,     1,       8,       191,      192,      193,
                                       1024,  4095,    4096,    4097,     65536,    1 << 20,
                                       4 << 20, 16 << 20};

static int rank;

static void fail(const char *what, size_t size, long iter, size_t at, int got, int want) {
  fprintf(stderr,
          "prog_pingpong: rank %d: %s (size %zu, iteration %ld, byte %zu: got %d, want %d)\n",
          rank, what, size, iter, at, got, want);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

static unsigned char pat(size_t i, size_t size, long iter, int dir) {
  return (unsigned char)(i + (i >> 8) * 7 + (i >> 16) * 13 + size * 3 + (size_t)iter * 29 +
                         (size_t)dir * 101);
}

static void fill(unsigned char *b, size_t size, long iter, int dir) {
  size_t i;
  for (i = 0; i < size; ++i) b[i] = pat(i, size, iter, dir);
}

static void verify(const unsigned char *b, size_t size, long iter, int dir,
                   const MPI_Status *st, int peer, int tag) {
  size_t i;
  int count = -1;
  MPI_Get_count(st, MPI_BYTE, &count);
  if (count != (int)size) fail("wrong count", size, iter, 0, count, (int)size);
  if (st->MPI_SOURCE != peer) fail("wrong source", size, iter, 0, st->MPI_SOURCE, peer);
  if (st->MPI_TAG != tag) fail("wrong tag", size, iter, 0, st->MPI_TAG, tag);
  for (i = 0; i < size; ++i)
    if (b[i] != pat(i, size, iter, dir)) fail("corrupt byte", size, iter, i, b[i], pat(i, size, iter, dir));
}

static int parse_size(const char *s, size_t *out) {
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return 0;
  if (*end == 'k' || *end == 'K') {
    v <<= 10;
    ++end;
  } else if (*end == 'm' || *end == 'M') {
    v <<= 20;
    ++end;
  }
  if (*end != '\0' || v > 0x7fffffffull) return 0;
  *out = (size_t)v;
  return 1;
}

/* One round trip of `size` bytes; `check` verifies both directions. */
static void round_trip(unsigned char *sbuf, unsigned char *rbuf, size_t size, long iter,
                       int check) {
  MPI_Status st;
  const int n = (int)size;
  if (rank == 0) {
    if (check) fill(sbuf, size, iter, 0);
    MPI_Send(sbuf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
    MPI_Recv(rbuf, n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &st);
    if (check) verify(rbuf, size, iter, 1, &st, 1, 2);
  } else {
    MPI_Recv(rbuf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &st);
    if (check) {
      verify(rbuf, size, iter, 0, &st, 0, 1);
      fill(sbuf, size, iter, 1);
    }
    MPI_Send(sbuf, n, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
  }
}

int main(int argc, char **argv) {
  int size_world, i, nsizes = 0;
  long bench = 0, iters = 3;
  size_t *sizes = (size_t *)malloc(sizeof(size_t) * (size_t)(argc + 16));
  size_t s, maxsize = 0;
  unsigned char *sbuf, *rbuf;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size_world);
  for (i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--bench") == 0 && i + 1 < argc) {
      bench = atol(argv[++i]);
    } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = atol(argv[++i]);
    } else if (parse_size(argv[i], &sizes[nsizes])) {
      ++nsizes;
    } else {
      if (rank == 0) fprintf(stderr, "prog_pingpong: bad argument '%s'\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  if (size_world < 2) {
    if (rank == 0) fprintf(stderr, "prog_pingpong: needs at least 2 ranks\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (nsizes == 0) {
    nsizes = (int)(sizeof default_sizes / sizeof default_sizes[0]);
    for (i = 0; i < nsizes; ++i) sizes[i] = default_sizes[i];
  }
  if (iters < 1) iters = 1;
  for (i = 0; i < nsizes; ++i)
    if (sizes[i] > maxsize) maxsize = sizes[i];
  sbuf = (unsigned char *)malloc(maxsize ? maxsize : 1);
  rbuf = (unsigned char *)malloc(maxsize ? maxsize : 1);
  if (!sbuf || !rbuf) {
    fprintf(stderr, "prog_pingpong: rank %d: out of memory\n", rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(sbuf, 0, maxsize ? maxsize : 1);

  if (rank < 2) {
    for (i = 0; i < nsizes; ++i) {
      long it;
      s = sizes[i];
      if (!bench) {
        for (it = 0; it < iters; ++it) round_trip(sbuf, rbuf, s, it, 1);
      } else {
        const long warm = bench / 10 > 2 ? bench / 10 : 2;
        double t0, t1;
        for (it = 0; it < warm; ++it) round_trip(sbuf, rbuf, s, it, 0);
        t0 = MPI_Wtime();
        for (it = 0; it < bench; ++it) round_trip(sbuf, rbuf, s, it, 0);
        t1 = MPI_Wtime();
        round_trip(sbuf, rbuf, s, bench, 1);  /* the path measured also delivers right */
        if (rank == 0) {
          printf("%zu %.3f\n", s, (t1 - t0) * 1e6 / (2.0 * (double)bench));
          fflush(stdout);
        }
      }
    }
  }
  MPI_Finalize();
  if (rank == 0 && !bench) printf("pingpong ok\n");
  free(sbuf);
  free(rbuf);
  free(sizes);
  return 0;
}
