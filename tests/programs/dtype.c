/* Derived datatypes in point-to-point traffic, every byte checked:
   - a strided column (MPI_Type_vector) sent to a contiguous receive and
     back, between every pair of ranks (rank r sends to r+1, ring);
   - records as a struct type (MPI_Type_create_struct + resized, extent =
     sizeof the C struct), and their (int, double) part received into a
     struct-of-arrays layout of the same type signature;
   - a 3-D subarray (halo face) of a cube, received as its plain elements;
   - a message of several MiB of a vector type, crossing chunk boundaries,
     with MPI_Get_count / MPI_Get_elements on the status;
   - MPI_Pack / MPI_Unpack across ranks (sent as MPI_PACKED);
   - external32: the bytes of int, long (4 bytes), long double (IEEE quad),
     MPI_DOUBLE_INT and a strided vector, and the round trip back; the
     extent of a struct of a complex follows the alignment of its parts;
   - blocking Bcast / Gather / Allreduce on a type with holes (staged),
     every root (the v, w and non-blocking forms are in coll_holes.c). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prog_common.h"

static int wrank, wsize;

static double v(int r, long i) { return r * 1.0e7 + (double)i; }
static int val_i(int r, int i) { return r * 1000 + i; }

static void column(void) {
  /* A 64 x 16 matrix of doubles; column c of rank r goes to rank r+1. */
  enum { R = 64, C = 16 };
  double m[R][C], col[R], back[R][C];
  MPI_Datatype column_t;
  const int to = (wrank + 1) % wsize, from = (wrank - 1 + wsize) % wsize;
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) m[i][j] = v(wrank, i * C + j);
  MPI_OK(MPI_Type_vector(R, 1, C, MPI_DOUBLE, &column_t));
  MPI_OK(MPI_Type_commit(&column_t));
  const int c = wrank % C;
  MPI_Request q;
  MPI_OK(MPI_Irecv(col, R, MPI_DOUBLE, from, 1, MPI_COMM_WORLD, &q));
  MPI_OK(MPI_Send(&m[0][c], 1, column_t, to, 1, MPI_COMM_WORLD));
  MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
  const int fc = from % C;
  for (int i = 0; i < R; ++i)
    CHECK(col[i] == v(from, i * C + fc), "column elem %d: %g", i, col[i]);
  /* ... and back: contiguous send into a strided receive. Other columns untouched. */
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) back[i][j] = -1.0;
  MPI_Status st;
  MPI_OK(MPI_Irecv(&back[0][3], 1, column_t, to, 2, MPI_COMM_WORLD, &q));
  MPI_OK(MPI_Send(col, R, MPI_DOUBLE, from, 2, MPI_COMM_WORLD));
  MPI_OK(MPI_Wait(&q, &st));
  int n = -1;
  MPI_OK(MPI_Get_count(&st, column_t, &n));
  CHECK(n == 1, "get_count(column) %d", n);
  MPI_OK(MPI_Get_elements(&st, column_t, &n));
  CHECK(n == R, "get_elements(column) %d", n);
  /* rank `to` received my column c from me and sent it back to me. */
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j)
      CHECK(back[i][j] == (j == 3 ? v(wrank, i * C + c) : -1.0), "back[%d][%d] = %g", i, j,
            back[i][j]);
  MPI_OK(MPI_Type_free(&column_t));
  CHECK(column_t == MPI_DATATYPE_NULL, "freed handle not NULL");
}

struct rec {
  int id;
  double x;
  char tag[3];
};

static void records(void) {
  /* N records {int; double; char[3]} as a struct type resized to the C
     struct, then the (int, double) part of them received into a
     struct-of-arrays layout: the same type signature, another layout. */
  enum { N = 50 };
  struct rec out[N], in[N];
  struct {
    double x[N];
    int id[N];
  } soa;
  MPI_Datatype rec_t, rec_rt;
  int bl[3] = {1, 1, 3};
  MPI_Aint d[3], base;
  MPI_Datatype ts[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
  memset(out, 0, sizeof out);
  MPI_OK(MPI_Get_address(&out[0], &base));
  MPI_OK(MPI_Get_address(&out[0].id, &d[0]));
  MPI_OK(MPI_Get_address(&out[0].x, &d[1]));
  MPI_OK(MPI_Get_address(&out[0].tag, &d[2]));
  for (int i = 0; i < 3; ++i) d[i] -= base;
  MPI_OK(MPI_Type_create_struct(3, bl, d, ts, &rec_t));
  MPI_Aint lb, ext;
  MPI_OK(MPI_Type_get_extent(rec_t, &lb, &ext));
  CHECK(lb == 0 && ext == (MPI_Aint)sizeof(struct rec), "struct extent %ld, want %zu", (long)ext,
        sizeof(struct rec));
  MPI_OK(MPI_Type_create_resized(rec_t, 0, sizeof(struct rec), &rec_rt));
  MPI_OK(MPI_Type_commit(&rec_rt));
  for (int i = 0; i < N; ++i) {
    out[i].id = wrank * 1000 + i;
    out[i].x = v(wrank, i);
    memcpy(out[i].tag, "abc", 3);
    out[i].tag[i % 3] = (char)('A' + wrank % 26);
  }
  memset(in, 0, sizeof in);
  const int to = (wrank + 1) % wsize, from = (wrank - 1 + wsize) % wsize;
  MPI_OK(MPI_Sendrecv(out, N, rec_rt, to, 3, in, N, rec_rt, from, 3, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE));
  for (int i = 0; i < N; ++i) {
    CHECK(in[i].id == from * 1000 + i && in[i].x == v(from, i), "record %d: %d %g", i, in[i].id,
          in[i].x);
    CHECK(in[i].tag[i % 3] == (char)('A' + from % 26), "record %d tag", i);
  }
  /* The same data as (int, double) pairs into two separate arrays: an
     hindexed receive type of the same signature (int, double)*N. */
  MPI_Datatype soa_t;
  int bl2[2 * N];
  MPI_Aint d2[2 * N];
  MPI_Datatype t2[2 * N];
  MPI_Aint sbase;
  MPI_OK(MPI_Get_address(&soa, &sbase));
  for (int i = 0; i < N; ++i) {
    bl2[2 * i] = bl2[2 * i + 1] = 1;
    MPI_OK(MPI_Get_address(&soa.id[i], &d2[2 * i]));
    MPI_OK(MPI_Get_address(&soa.x[i], &d2[2 * i + 1]));
    d2[2 * i] -= sbase;
    d2[2 * i + 1] -= sbase;
    t2[2 * i] = MPI_INT;
    t2[2 * i + 1] = MPI_DOUBLE;
  }
  MPI_OK(MPI_Type_create_struct(2 * N, bl2, d2, t2, &soa_t));
  MPI_OK(MPI_Type_commit(&soa_t));
  /* send side: records with only (id, x): a struct of 2 of the 3 fields */
  MPI_Datatype pair_t, pair_rt;
  MPI_OK(MPI_Type_create_struct(2, bl, d, ts, &pair_t));
  MPI_OK(MPI_Type_create_resized(pair_t, 0, sizeof(struct rec), &pair_rt));
  MPI_OK(MPI_Type_commit(&pair_rt));
  MPI_OK(MPI_Sendrecv(out, N, pair_rt, to, 4, &soa, 1, soa_t, from, 4, MPI_COMM_WORLD,
                      MPI_STATUS_IGNORE));
  for (int i = 0; i < N; ++i)
    CHECK(soa.id[i] == from * 1000 + i && soa.x[i] == v(from, i), "soa %d: %d %g", i, soa.id[i],
          soa.x[i]);
  MPI_OK(MPI_Type_free(&rec_t));
  MPI_OK(MPI_Type_free(&rec_rt));
  MPI_OK(MPI_Type_free(&soa_t));
  MPI_OK(MPI_Type_free(&pair_t));
  MPI_OK(MPI_Type_free(&pair_rt));
}

static void face(void) {
  /* The x = 1 face (interior part) of a 6x7x8 int cube (C order). */
  enum { X = 6, Y = 7, Z = 8 };
  int cube[X][Y][Z], got[(Y - 2) * (Z - 2)];
  int sizes[3] = {X, Y, Z}, sub[3] = {1, Y - 2, Z - 2}, start[3] = {1, 1, 1};
  MPI_Datatype face_t;
  for (int i = 0; i < X; ++i)
    for (int j = 0; j < Y; ++j)
      for (int k = 0; k < Z; ++k) cube[i][j][k] = wrank * 100000 + i * 10000 + j * 100 + k;
  MPI_OK(MPI_Type_create_subarray(3, sizes, sub, start, MPI_ORDER_C, MPI_INT, &face_t));
  MPI_OK(MPI_Type_commit(&face_t));
  MPI_Aint lb, ext;
  MPI_OK(MPI_Type_get_extent(face_t, &lb, &ext));
  CHECK(lb == 0 && ext == (MPI_Aint)sizeof cube, "subarray extent %ld", (long)ext);
  const int to = (wrank + 1) % wsize, from = (wrank - 1 + wsize) % wsize;
  MPI_OK(MPI_Sendrecv(cube, 1, face_t, to, 5, got, (Y - 2) * (Z - 2), MPI_INT, from, 5,
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  for (int j = 1, n = 0; j < Y - 1; ++j)
    for (int k = 1; k < Z - 1; ++k, ++n)
      CHECK(got[n] == from * 100000 + 10000 + j * 100 + k, "face (%d,%d): %d", j, k, got[n]);
  MPI_OK(MPI_Type_free(&face_t));
}

static void large(void) {
  /* Every other double of a 2 * 3 Mi array: 24 MiB of data described, 24
     MiB packed, chunked by the runtime. */
  const long N = 3L << 20;
  double *src = malloc(sizeof(double) * (size_t)(2 * N)), *dst = malloc(sizeof(double) * (size_t)(2 * N));
  CHECK(src && dst, "malloc");
  MPI_Datatype every_other;
  MPI_OK(MPI_Type_vector((int)N, 1, 2, MPI_DOUBLE, &every_other));
  MPI_OK(MPI_Type_commit(&every_other));
  for (long i = 0; i < 2 * N; ++i) {
    src[i] = v(wrank, i);
    dst[i] = -2.0;
  }
  const int to = (wrank + 1) % wsize, from = (wrank - 1 + wsize) % wsize;
  MPI_Status st;
  MPI_Request q;
  /* received into the odd slots: the type shifted by one double */
  MPI_OK(MPI_Irecv(dst + 1, 1, every_other, from, 6, MPI_COMM_WORLD, &q));
  MPI_OK(MPI_Send(src, 1, every_other, to, 6, MPI_COMM_WORLD));
  MPI_OK(MPI_Wait(&q, &st));
  int n = -1;
  MPI_OK(MPI_Get_elements(&st, MPI_DOUBLE, &n));
  CHECK(n == N, "get_elements(double) %d", n);
  for (long i = 0; i < 2 * N; ++i)
    CHECK(dst[i] == (i % 2 ? v(from, i - 1) : -2.0), "large[%ld] = %g", i, dst[i]);
  MPI_OK(MPI_Type_free(&every_other));
  free(src);
  free(dst);
}

static void packed(void) {
  int a[10], b[10], pos = 0, size = 0;
  double x = v(wrank, 7), y = 0;
  char buf[256];
  for (int i = 0; i < 10; ++i) a[i] = wrank * 10 + i;
  MPI_OK(MPI_Pack_size(10, MPI_INT, MPI_COMM_WORLD, &size));
  CHECK(size == 40, "pack_size %d", size);
  MPI_OK(MPI_Pack(a, 10, MPI_INT, buf, sizeof buf, &pos, MPI_COMM_WORLD));
  MPI_OK(MPI_Pack(&x, 1, MPI_DOUBLE, buf, sizeof buf, &pos, MPI_COMM_WORLD));
  const int to = (wrank + 1) % wsize, from = (wrank - 1 + wsize) % wsize;
  char rbuf[256];
  MPI_OK(MPI_Sendrecv(buf, pos, MPI_PACKED, to, 7, rbuf, sizeof rbuf, MPI_PACKED, from, 7,
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  int rpos = 0;
  MPI_OK(MPI_Unpack(rbuf, sizeof rbuf, &rpos, b, 10, MPI_INT, MPI_COMM_WORLD));
  MPI_OK(MPI_Unpack(rbuf, sizeof rbuf, &rpos, &y, 1, MPI_DOUBLE, MPI_COMM_WORLD));
  for (int i = 0; i < 10; ++i) CHECK(b[i] == from * 10 + i, "unpacked %d: %d", i, b[i]);
  CHECK(y == v(from, 7), "unpacked double %g", y);
}

static void external32(void) {
  /* Known encodings (MPI-3.1 13.5.2): big-endian, MPI_LONG in 4 bytes. */
  int ints[2] = {1, -2};
  long longs[2] = {1, -2};
  long double lds[2] = {1.0L, -2.0L};
  struct { double d; int i; } di = {2.0, -3};
  const unsigned char int_ext[8] = {0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe};
  const unsigned char ld_ext[32] = {0x3f, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                    0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  const unsigned char di_ext[12] = {0x40, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfd};
  unsigned char buf[64];
  MPI_Aint pos = 0, size = 0;
  MPI_OK(MPI_Pack_external_size("external32", 2, MPI_LONG, &size));
  CHECK(size == 8, "external32 size of 2 longs %ld", (long)size);
  MPI_OK(MPI_Pack_external("external32", ints, 2, MPI_INT, buf, sizeof buf, &pos));
  CHECK(pos == 8 && memcmp(buf, int_ext, 8) == 0, "external32 ints");
  pos = 0;
  MPI_OK(MPI_Pack_external("external32", longs, 2, MPI_LONG, buf, sizeof buf, &pos));
  CHECK(pos == 8 && memcmp(buf, int_ext, 8) == 0, "external32 longs");
  long lback[2] = {0, 0};
  pos = 0;
  MPI_OK(MPI_Unpack_external("external32", buf, 8, &pos, lback, 2, MPI_LONG));
  CHECK(lback[0] == 1 && lback[1] == -2, "external32 longs back %ld %ld", lback[0], lback[1]);
  pos = 0;
  MPI_OK(MPI_Pack_external("external32", lds, 2, MPI_LONG_DOUBLE, buf, sizeof buf, &pos));
  CHECK(pos == 32 && memcmp(buf, ld_ext, 32) == 0, "external32 long doubles");
  long double ldback[2] = {0, 0};
  pos = 0;
  MPI_OK(MPI_Unpack_external("external32", buf, 32, &pos, ldback, 2, MPI_LONG_DOUBLE));
  CHECK(ldback[0] == 1.0L && ldback[1] == -2.0L, "external32 long doubles back");
  pos = 0;
  MPI_OK(MPI_Pack_external("external32", &di, 1, MPI_DOUBLE_INT, buf, sizeof buf, &pos));
  CHECK(pos == 12 && memcmp(buf, di_ext, 12) == 0, "external32 double_int");
  /* A vector of every other int: only the elements travel. */
  int grid[8], back[8];
  for (int i = 0; i < 8; ++i) grid[i] = i * 0x01010101;
  MPI_Datatype evens;
  MPI_OK(MPI_Type_vector(4, 1, 2, MPI_INT, &evens));
  MPI_OK(MPI_Type_commit(&evens));
  pos = 0;
  MPI_OK(MPI_Pack_external("external32", grid, 1, evens, buf, sizeof buf, &pos));
  CHECK(pos == 16 && buf[4] == 2 && buf[7] == 2, "external32 vector");
  memset(back, 0, sizeof back);
  pos = 0;
  MPI_OK(MPI_Unpack_external("external32", buf, 16, &pos, back, 1, evens));
  for (int i = 0; i < 8; ++i) CHECK(back[i] == (i % 2 ? 0 : grid[i]), "external32 back [%d]", i);
  MPI_OK(MPI_Type_free(&evens));
  /* Wrong representation name, short buffer. */
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int cls = 0;
  pos = 0;
  MPI_Error_class(MPI_Pack_external("native", ints, 2, MPI_INT, buf, sizeof buf, &pos), &cls);
  CHECK(cls == MPI_ERR_ARG, "datarep native: class %d", cls);
  MPI_Error_class(MPI_Pack_external("external32", ints, 2, MPI_INT, buf, 6, &pos), &cls);
  CHECK(cls == MPI_ERR_TRUNCATE && pos == 0, "short buffer: class %d", cls);
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  /* struct { char; float _Complex; } is 12 bytes: the complex aligns to 4. */
  int one[2] = {1, 1};
  MPI_Aint disp[2] = {0, 4}, lb, ext;
  MPI_Datatype parts[2] = {MPI_CHAR, MPI_C_FLOAT_COMPLEX}, st;
  MPI_OK(MPI_Type_create_struct(2, one, disp, parts, &st));
  MPI_OK(MPI_Type_get_extent(st, &lb, &ext));
  CHECK(lb == 0 && ext == 12, "struct with a float complex: extent %ld", (long)ext);
  MPI_OK(MPI_Type_free(&st));
}

static void collectives(void) {
  /* Blocking collectives stage types with holes: every other int. */
  enum { K = 16 };
  int a[2 * K], all[2 * K * 64], sum[2 * K];
  MPI_Datatype evens;
  MPI_OK(MPI_Type_vector(K, 1, 2, MPI_INT, &evens));
  MPI_OK(MPI_Type_commit(&evens));
  for (int root = 0; root < wsize; ++root) {
    for (int i = 0; i < 2 * K; ++i) a[i] = wrank == root ? val_i(root, i) : -1;
    MPI_OK(MPI_Bcast(a, 1, evens, root, MPI_COMM_WORLD));
    for (int i = 0; i < 2 * K; ++i)
      CHECK(a[i] == (i % 2 == 0 || wrank == root ? val_i(root, i) : -1), "bcast root %d [%d] = %d",
            root, i, a[i]);
  }
  /* Gather the even ints of every rank into a contiguous array at rank 0. */
  for (int i = 0; i < 2 * K; ++i) a[i] = val_i(wrank, i);
  CHECK(wsize <= 64, "too many ranks");
  MPI_OK(MPI_Gather(a, 1, evens, all, K, MPI_INT, 0, MPI_COMM_WORLD));
  if (wrank == 0)
    for (int r = 0; r < wsize; ++r)
      for (int i = 0; i < K; ++i)
        CHECK(all[r * K + i] == val_i(r, 2 * i), "gather r %d [%d] = %d", r, i, all[r * K + i]);
  /* Allreduce over the even ints: odd ones keep their value. */
  for (int i = 0; i < 2 * K; ++i) sum[i] = -5;
  MPI_OK(MPI_Allreduce(a, sum, 1, evens, MPI_SUM, MPI_COMM_WORLD));
  for (int i = 0; i < 2 * K; ++i) {
    long want = 0;
    for (int r = 0; r < wsize; ++r) want += val_i(r, i);
    CHECK(sum[i] == (i % 2 == 0 ? want : -5), "allreduce [%d] = %d, want %ld", i, sum[i], want);
  }
  MPI_OK(MPI_Type_free(&evens));
}

int main(int argc, char **argv) {
  prog_name = "dtype";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  column();
  records();
  face();
  large();
  packed();
  external32();
  collectives();
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (wrank == 0) printf("dtype ok (%d ranks)\n", wsize);
  MPI_Finalize();
  return 0;
}
