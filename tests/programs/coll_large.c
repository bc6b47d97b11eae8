/* prog_coll_large: collectives on large buffers, every element checked.
 *
 *   MPI_Bcast      1 Mi doubles (8 MiB) from rank 0, then from the last rank
 *   MPI_Allreduce  SUM of 1 Mi int64_t (MPI_INT64_T), then of 1 Mi doubles;
 *                  the inputs make every sum exact (no overflow, no
 *                  rounding), so the result is compared exactly
 *   MPI_Allgather  1 Mi bytes in total per rank: each rank contributes
 *                  1 Mi / size bytes (MPI_BYTE)
 *   MPI_Alltoall   256 Ki ints in total per rank: 256 Ki / size ints to
 *                  every rank (MPI_INT), then the same with MPI_IN_PLACE,
 *                  and MPI_Alltoallv in place (MPICH's alltoall1 found
 *                  blocks overwritten before they were sent, on 2 NMs)
 *
 * Every value depends on its source, its destination (for alltoall) and
 * its index, so each rank computes the expected buffers itself. The bytes
 * after each receive buffer must stay untouched. A failed check names the
 * rank, the collective and the first wrong element. Rank 0 prints
 * "coll_large ok (...)". */
#include <stdint.h>
#include <string.h>

#include "prog_common.h"

#define MI (1 << 20)
#define KI256 (256 * 1024)
#define TAIL 64
#define SENTINEL 0xA5

static long ncoll;

static void *alloc_bytes(size_t n) {
  unsigned char *p = (unsigned char *)malloc(n + TAIL);
  CHECK(p != NULL, "out of memory (%zu bytes)", n);
  memset(p, SENTINEL, n + TAIL);
  return p;
}
static void check_tail(const char *coll, const void *buf, size_t n) {
  const unsigned char *p = (const unsigned char *)buf + n;
  int i;
  for (i = 0; i < TAIL; ++i)
    CHECK(p[i] == SENTINEL, "%s: byte %zu after the %zu-byte result was written (0x%02x)", coll,
          (size_t)i, n, p[i]);
}
static uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

static double bval(int root, int i) { return (double)mix((uint32_t)i * 2654435761u + (uint32_t)root) * 0.125 - 1e8; }
static int64_t ival(int r, int i) { return (int64_t)i * 1000003 - (int64_t)r * 7919 + (int64_t)(i % 13) * r; }
static double dval(int r, int i) { return (double)((i % 4096) - 2048 + r * 3) * 0.25; }
static unsigned char gval(int r, int i) { return (unsigned char)mix((uint32_t)r * 0x9e3779b1u ^ (uint32_t)i); }
static int aval(int src, int dst, int i) {
  return (int)(mix(((uint32_t)src * 0x85ebca77u + (uint32_t)dst * 0xc2b2ae3du) ^ (uint32_t)i) & 0x7fffffff);
}

static void test_bcast(int rank, int root) {
  double *buf = (double *)alloc_bytes(sizeof(double) * MI);
  int i;
  if (rank == root)
    for (i = 0; i < MI; ++i) buf[i] = bval(root, i);
  ++ncoll;
  MPI_OK(MPI_Bcast(buf, MI, MPI_DOUBLE, root, MPI_COMM_WORLD));
  for (i = 0; i < MI; ++i)
    CHECK(buf[i] == bval(root, i), "MPI_Bcast of %d doubles from root %d: element %d is %.17g, want %.17g",
          MI, root, i, buf[i], bval(root, i));
  check_tail("MPI_Bcast", buf, sizeof(double) * MI);
  free(buf);
}

int main(int argc, char **argv) {
  int rank, size, i, r;
  prog_name = "prog_coll_large";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));

  test_bcast(rank, 0);
  test_bcast(rank, size - 1);

  { /* Allreduce SUM of 1 Mi int64_t */
    int64_t *in = (int64_t *)alloc_bytes(sizeof(int64_t) * MI);
    int64_t *out = (int64_t *)alloc_bytes(sizeof(int64_t) * MI);
    for (i = 0; i < MI; ++i) in[i] = ival(rank, i);
    ++ncoll;
    MPI_OK(MPI_Allreduce(in, out, MI, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD));
    for (i = 0; i < MI; ++i) {
      int64_t want = 0;
      for (r = 0; r < size; ++r) want += ival(r, i);
      CHECK(out[i] == want, "MPI_Allreduce SUM of %d MPI_INT64_T: element %d is %lld, want %lld", MI,
            i, (long long)out[i], (long long)want);
    }
    check_tail("MPI_Allreduce (MPI_INT64_T)", out, sizeof(int64_t) * MI);
    free(in);
    free(out);
  }
  { /* Allreduce SUM of 1 Mi doubles, exact */
    double *in = (double *)alloc_bytes(sizeof(double) * MI);
    double *out = (double *)alloc_bytes(sizeof(double) * MI);
    for (i = 0; i < MI; ++i) in[i] = dval(rank, i);
    ++ncoll;
    MPI_OK(MPI_Allreduce(in, out, MI, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (i = 0; i < MI; ++i) {
      double want = 0;
      for (r = 0; r < size; ++r) want += dval(r, i);
      CHECK(out[i] == want, "MPI_Allreduce SUM of %d MPI_DOUBLE: element %d is %.17g, want %.17g", MI,
            i, out[i], want);
    }
    check_tail("MPI_Allreduce (MPI_DOUBLE)", out, sizeof(double) * MI);
    free(in);
    free(out);
  }
  { /* Allgather: 1 Mi bytes per rank in total */
    const int n = MI / size;
    unsigned char *in = (unsigned char *)alloc_bytes((size_t)n);
    unsigned char *out = (unsigned char *)alloc_bytes((size_t)n * (size_t)size);
    for (i = 0; i < n; ++i) in[i] = gval(rank, i);
    ++ncoll;
    MPI_OK(MPI_Allgather(in, n, MPI_BYTE, out, n, MPI_BYTE, MPI_COMM_WORLD));
    for (r = 0; r < size; ++r)
      for (i = 0; i < n; ++i)
        CHECK(out[(size_t)r * n + i] == gval(r, i),
              "MPI_Allgather of %d bytes per rank: byte %d from rank %d is 0x%02x, want 0x%02x", n, i,
              r, out[(size_t)r * n + i], gval(r, i));
    check_tail("MPI_Allgather", out, (size_t)n * (size_t)size);
    free(in);
    free(out);
  }
  { /* Alltoall: 256 Ki ints per rank in total */
    const int n = KI256 / size;
    int *in = (int *)alloc_bytes(sizeof(int) * (size_t)n * (size_t)size);
    int *out = (int *)alloc_bytes(sizeof(int) * (size_t)n * (size_t)size);
    for (r = 0; r < size; ++r)
      for (i = 0; i < n; ++i) in[(size_t)r * n + i] = aval(rank, r, i);
    ++ncoll;
    MPI_OK(MPI_Alltoall(in, n, MPI_INT, out, n, MPI_INT, MPI_COMM_WORLD));
    for (r = 0; r < size; ++r)
      for (i = 0; i < n; ++i)
        CHECK(out[(size_t)r * n + i] == aval(r, rank, i),
              "MPI_Alltoall of %d ints per pair: int %d from rank %d is %d, want %d", n, i, r,
              out[(size_t)r * n + i], aval(r, rank, i));
    check_tail("MPI_Alltoall", out, sizeof(int) * (size_t)n * (size_t)size);
    /* In place: the blocks to send are the receive buffer's; a collective
     * moved in rounds must not write a received block over one it has not
     * sent yet. */
    for (r = 0; r < size; ++r)
      for (i = 0; i < n; ++i) out[(size_t)r * n + i] = aval(rank, r, i);
    ++ncoll;
    MPI_OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, out, n, MPI_INT, MPI_COMM_WORLD));
    for (r = 0; r < size; ++r)
      for (i = 0; i < n; ++i)
        CHECK(out[(size_t)r * n + i] == aval(r, rank, i),
              "MPI_Alltoall in place of %d ints per pair: int %d from rank %d is %d, want %d", n, i,
              r, out[(size_t)r * n + i], aval(r, rank, i));
    check_tail("MPI_Alltoall in place", out, sizeof(int) * (size_t)n * (size_t)size);
    {
      /* Alltoallv in place, the blocks in reverse order in the buffer. */
      int *cnt = (int *)malloc(sizeof(int) * (size_t)size);
      int *dsp = (int *)malloc(sizeof(int) * (size_t)size);
      CHECK(cnt && dsp, "out of memory");
      for (r = 0; r < size; ++r) {
        cnt[r] = n;
        dsp[r] = (size - 1 - r) * n;
        for (i = 0; i < n; ++i) out[(size_t)dsp[r] + i] = aval(rank, r, i);
      }
      ++ncoll;
      MPI_OK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, out, cnt, dsp, MPI_INT,
                           MPI_COMM_WORLD));
      for (r = 0; r < size; ++r)
        for (i = 0; i < n; ++i)
          CHECK(out[(size_t)dsp[r] + i] == aval(r, rank, i),
                "MPI_Alltoallv in place of %d ints per pair: int %d from rank %d is %d, want %d", n,
                i, r, out[(size_t)dsp[r] + i], aval(r, rank, i));
      check_tail("MPI_Alltoallv in place", out, sizeof(int) * (size_t)n * (size_t)size);
      free(cnt);
      free(dsp);
    }
    free(in);
    free(out);
  }

  MPI_OK(MPI_Finalize());
  if (rank == 0) printf("coll_large ok (%d ranks, %ld collective calls per rank)\n", size, ncoll);
  return 0;
}
