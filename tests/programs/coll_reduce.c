/* prog_coll_reduce: the reducing collectives against a serial reference.
 *
 * MPI_Reduce, MPI_Allreduce, MPI_Reduce_scatter, MPI_Reduce_scatter_block,
 * MPI_Scan, MPI_Exscan and MPI_Reduce_local, with every predefined op on
 * every predefined C type MPI-3.1 (5.9.2) allows it on:
 *   C integer   MPI_SIGNED_CHAR .. MPI_UNSIGNED_LONG_LONG, MPI_INT8_T ..
 *               MPI_UINT64_T: SUM PROD MIN MAX LAND LOR LXOR BAND BOR BXOR
 *   multi-lang. MPI_AINT, MPI_OFFSET, MPI_COUNT: SUM PROD MIN MAX BAND BOR BXOR
 *   floating    MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE: SUM PROD MIN MAX
 *   logical     MPI_C_BOOL: LAND LOR LXOR
 *   complex     MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX,
 *               MPI_C_LONG_DOUBLE_COMPLEX: SUM PROD
 *   byte        MPI_BYTE: BAND BOR BXOR
 *   pairs       MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_2INT,
 *               MPI_SHORT_INT, MPI_LONG_DOUBLE_INT: MINLOC MAXLOC
 * plus two user-defined ops (MPI_Op_create/MPI_Op_free): a commutative one
 * on MPI_INT (a + b + 2ab, wrapping) and a NON-commutative one on
 * MPI_UNSIGNED (the product of 2x2 byte matrices mod 256, packed in 32
 * bits), whose results depend on rank order.
 *
 * Every input is a deterministic function of (round, type, op, rank,
 * index), so each rank computes the expected result itself by folding the
 * inputs in rank order (the serial reference). Integer results must be
 * bit-exact: the reference computes in uint64_t and truncates to the type,
 * so unsigned SUM and PROD use the full range and must wrap; signed SUM and
 * PROD inputs are chosen so that no partial result overflows (signed
 * overflow is undefined in C, whose operators define MPI's ops), while MIN,
 * MAX and the bitwise ops use the full signed range. Floating inputs are
 * small dyadic numbers (sums of multiples of 1/4, products of
 * +-{1, 1.25, 1.5} * 2^e, Gaussian integers), so the exact result does not
 * depend on the order of evaluation. MINLOC/MAXLOC
 * inputs tie often (values in -1..2): the lower index must win. Logical
 * ops see zeros and non-zero values whose low byte is 0. The bytes after
 * every result must stay untouched.
 *
 * Sections (collective calls at 8 ranks in brackets; the success line says
 * the total):
 *   A  every (type, op) pair: Reduce (root and MPI_IN_PLACE rotate),
 *      Allreduce (count 7), Allreduce MPI_IN_PLACE (count 1),
 *      Reduce_scatter_block (1 per rank), Reduce_scatter (uneven counts
 *      with zeros), Scan, Exscan (in place or not, alternating), and
 *      MPI_Reduce_local.                                          [~1660]
 *   B  every pair: Allreduce and Reduce_local of 1024 elements; every type:
 *      Allreduce and Reduce_local of 0 elements.                   [~270]
 *   C  for a few pairs, counts 0, 1, 7, 1024: Reduce at every root with
 *      and without MPI_IN_PLACE, and every other collective with and
 *      without MPI_IN_PLACE; on MPI_COMM_WORLD and MPI_COMM_SELF.  [~760]
 *   D  random-looking, non-exact floating inputs (float, double, long
 *      double, the complex types; SUM and PROD, 1024 elements): every rank
 *      must get bit-identical MPI_Allreduce results (compared with rank
 *      0's, broadcast), close to the serial result.                 [~24]
 *   E  the user-defined ops at counts 0, 1, 7, 1024: Reduce at every root,
 *      Allreduce, Scan (with and without MPI_IN_PLACE), Exscan,
 *      Reduce_scatter_block, Reduce_scatter, Reduce_local.         [~120]
 *
 * Under Open MPI only (never under bcs), known Open MPI defects are probed
 * at start and worked around by narrowing the affected inputs, with a note
 * on stderr: see quirk_usat and quirk_minmax.
 *
 * A failed check names the rank, collective, communicator, op, type,
 * count, root, in-place flag and the first wrong element (got and want).
 * Rank 0 prints "coll_reduce ok (...)". */
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "prog_common.h"

#include "coll_reduce_model.h"

/* ------------------------------------------------------------ running one call */
static unsigned char *alloc_bytes(size_t n) {
  unsigned char *p = (unsigned char *)malloc(n + TAIL);
  CHECK(p != NULL, "out of memory (%zu bytes)", n);
  memset(p, SENTINEL, n + TAIL);
  return p;
}
static void check_untouched(const unsigned char *p, size_t from, size_t to, const char *what) {
  size_t i;
  for (i = from; i < to; ++i) {
    if (p[i] != SENTINEL) {
      char g[32], w[32], where[160];
      snprintf(g, sizeof g, "0x%02x", p[i]);
      snprintf(w, sizeof w, "0x%02x", SENTINEL);
      snprintf(where, sizeof where, "%s byte %zu (after the result, must stay untouched)", what, i);
      fail(where, g, w);
    }
  }
}
static void check_elems(int t, const unsigned char *buf, int n, int base, int lo, int hi,
                        const char *what) {
  const size_t es = types[t].size;
  int k;
  for (k = 0; k < n; ++k) {
    const val_t want = fold(t, cur.o, lo, hi, base + k), got = ld(t, buf + es * (size_t)k);
    if (!same(t, got, want)) {
      char g[128], w[128], where[160];
      show(t, got, g, sizeof g);
      show(t, want, w, sizeof w);
      snprintf(where, sizeof where, "%s element %d (ranks %d..%d folded)", what, k, lo, hi - 1);
      fail(where, g, w);
    }
  }
}

static void begin(const char *comm_name, int t, int o, int coll, int count, int root, int inplace) {
  cur.comm = comm_name;
  cur.t = t;
  cur.o = o;
  cur.coll = coll_name[coll];
  cur.count = count;
  cur.root = root;
  cur.inplace = inplace;
  ++cur.round;
  if (coll != C_LOCAL) ++ncoll;
}

/* Uneven receive counts of MPI_Reduce_scatter, with zeros. */
static int rsc(int c, int i) { return ((i * 3 + 1) % 5) * c / 4; }

static void run_coll(MPI_Comm comm, const char *comm_name, int t, int o, int coll, int count,
                     int root, int inplace) {
  const tinfo *ti = &types[t];
  const size_t es = ti->size;
  const MPI_Op op = op_handle[o];
  int rank, size, nin = count, nres = count, base = 0, lo = 0, hi, k, i;
  int *rc = NULL;
  unsigned char *sbuf, *rbuf;
  size_t rbytes;
  const void *sarg;
  MPI_OK(MPI_Comm_rank(comm, &rank));
  MPI_OK(MPI_Comm_size(comm, &size));
  hi = size;
  begin(comm_name, t, o, coll, count, coll == C_REDUCE ? root : -1, inplace);
  switch (coll) {
    case C_SCAN: hi = rank + 1; break;
    case C_EXSCAN: hi = rank; break;
    case C_RSB: nin = count * size; base = rank * count; break;
    case C_RS:
      rc = (int *)malloc(sizeof(int) * (size_t)size);
      CHECK(rc != NULL, "out of memory");
      for (nin = 0, i = 0; i < size; ++i) {
        rc[i] = rsc(count, i);
        if (i < rank) base += rc[i];
        nin += rc[i];
      }
      nres = rc[rank];
      break;
    default: break;
  }
  sbuf = alloc_bytes(es * (size_t)nin);
  for (k = 0; k < nin; ++k) st(t, sbuf + es * (size_t)k, gen(t, o, rank, k));
  /* in place, the receive buffer holds the input */
  if (coll == C_REDUCE && rank != root) inplace = 0;
  rbytes = es * (size_t)(inplace ? nin : nres);
  rbuf = alloc_bytes(rbytes);
  if (inplace) memcpy(rbuf, sbuf, es * (size_t)nin);
  sarg = inplace ? MPI_IN_PLACE : sbuf;
  switch (coll) {
    case C_REDUCE:
      if (rank == root) MPI_OK(MPI_Reduce(sarg, rbuf, count, ti->dt, op, root, comm));
      else MPI_OK(MPI_Reduce(sbuf, NULL, count, ti->dt, op, root, comm));
      break;
    case C_ALLREDUCE: MPI_OK(MPI_Allreduce(sarg, rbuf, count, ti->dt, op, comm)); break;
    case C_RSB: MPI_OK(MPI_Reduce_scatter_block(sarg, rbuf, count, ti->dt, op, comm)); break;
    case C_RS: MPI_OK(MPI_Reduce_scatter(sarg, rbuf, rc, ti->dt, op, comm)); break;
    case C_SCAN: MPI_OK(MPI_Scan(sarg, rbuf, count, ti->dt, op, comm)); break;
    case C_EXSCAN: MPI_OK(MPI_Exscan(sarg, rbuf, count, ti->dt, op, comm)); break;
    default: break;
  }
  if (!(coll == C_REDUCE && rank != root)) {
    /* Exscan leaves rank 0's result undefined; a reduce-scatter in place
       may use the whole buffer beyond its own block. */
    if (!(coll == C_EXSCAN && rank == 0)) check_elems(t, rbuf, nres, base, lo, hi, "result");
    check_untouched(rbuf, (inplace && (coll == C_RS || coll == C_RSB)) ? rbytes : es * (size_t)nres,
                    rbytes + TAIL, "receive buffer");
  }
  free(sbuf);
  free(rbuf);
  free(rc);
}

/* MPI_Reduce_local: inout = x2; inout = x1 op inout; inout = x0 op inout,
   which must give x0 op x1 op x2 (the order matters for the matrix op). */
static void run_local(int t, int o, int count) {
  const tinfo *ti = &types[t];
  const size_t es = ti->size;
  unsigned char *in = alloc_bytes(es * (size_t)count), *io = alloc_bytes(es * (size_t)count);
  int k, r;
  begin("(local)", t, o, C_LOCAL, count, -1, 0);
  for (k = 0; k < count; ++k) st(t, io + es * (size_t)k, gen(t, o, 2, k));
  for (r = 1; r >= 0; --r) {
    for (k = 0; k < count; ++k) st(t, in + es * (size_t)k, gen(t, o, r, k));
    MPI_OK(MPI_Reduce_local(in, io, count, ti->dt, op_handle[o]));
  }
  check_elems(t, io, count, 0, 0, 3, "inoutbuf");
  check_untouched(io, es * (size_t)count, es * (size_t)count + TAIL, "inoutbuf");
  free(in);
  free(io);
}

/* ------------------------------------------------------------ section D */
/* Non-exact inputs: all ranks must agree bit for bit, and be close to the
   serial result. */
static long double nonexact(int o, uint64_t h) {
  const long double f = (long double)(h >> 11) / 9007199254740992.0L; /* [0, 1) */
  if (o == O_PROD) return 1.0L + (f - 0.5L) * 0.2L;
  return (f - 0.5L) * ldexpl(1.0L, (int)((h >> 3) % 21) - 10);
}
static void run_nonexact(int t, int o, int inplace) {
  const tinfo *ti = &types[t];
  const size_t es = ti->size;
  const int count = 1024;
  const int cplx = ti->kind == K_CPLX;
  const long double eps = ti->w == F_FLOAT ? FLT_EPSILON : ti->w == F_DOUBLE ? DBL_EPSILON : LDBL_EPSILON;
  int rank, size, k, r;
  unsigned char *sbuf = alloc_bytes(es * count), *rbuf = alloc_bytes(es * count),
                *ref = alloc_bytes(es * count);
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  begin("MPI_COMM_WORLD", t, o, C_ALLREDUCE, count, -1, inplace);
  for (k = 0; k < count; ++k) {
    val_t v;
    memset(&v, 0, sizeof v);
    v.re = nonexact(o, h64(t, o, rank, 2 * k));
    if (cplx) v.im = nonexact(o, h64(t, o, rank, 2 * k + 1));
    st(t, (inplace ? rbuf : sbuf) + es * (size_t)k, v);
  }
  MPI_OK(MPI_Allreduce(inplace ? MPI_IN_PLACE : sbuf, rbuf, count, ti->dt, op_handle[o],
                       MPI_COMM_WORLD));
  check_untouched(rbuf, es * count, es * count + TAIL, "receive buffer");
  if (rank == 0) memcpy(ref, rbuf, es * count);
  ++ncoll;
  MPI_OK(MPI_Bcast(ref, count, ti->dt, 0, MPI_COMM_WORLD));
  for (k = 0; k < count; ++k) {
    const val_t got = ld(t, rbuf + es * (size_t)k), r0 = ld(t, ref + es * (size_t)k);
    long double sre = 0, sim = 0, mag = 0, pre = 1, pim = 0;
    char g[128], w[128], where[160];
    /* bit-identical to rank 0 (values compared: long double has padding) */
    if (!same(t, got, r0) || signbit(got.re) != signbit(r0.re) ||
        (cplx && signbit(got.im) != signbit(r0.im))) {
      show(t, got, g, sizeof g);
      show(t, r0, w, sizeof w);
      snprintf(where, sizeof where, "element %d differs from rank 0's result (non-exact inputs)", k);
      fail(where, g, w);
    }
    /* close to the serial result */
    for (r = 0; r < size; ++r) {
      const long double xr = nonexact(o, h64(t, o, r, 2 * k));
      const long double xi = cplx ? nonexact(o, h64(t, o, r, 2 * k + 1)) : 0;
      if (o == O_SUM) {
        sre += xr;
        sim += xi;
        mag += fabsl(xr) + fabsl(xi);
      } else {
        const long double nre = pre * xr - pim * xi, nim = pre * xi + pim * xr;
        pre = nre;
        pim = nim;
      }
    }
    if (o == O_PROD) mag = fabsl(pre) + fabsl(pim);
    if (fabsl(got.re - (o == O_SUM ? sre : pre)) + fabsl(got.im - (o == O_SUM ? sim : pim)) >
        8 * (size + 1) * eps * mag) {
      val_t s;
      memset(&s, 0, sizeof s);
      s.re = o == O_SUM ? sre : pre;
      s.im = o == O_SUM ? sim : pim;
      show(t, got, g, sizeof g);
      show(t, s, w, sizeof w);
      snprintf(where, sizeof where, "element %d is far from the serial result", k);
      fail(where, g, w);
    }
  }
  free(sbuf);
  free(rbuf);
  free(ref);
}

/* ------------------------------------------------------------ Open MPI quirks */
static void probe_open_mpi(int rank) {
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0, t, k, w;
  enum { N = 64 };
  unsigned char a[N * 8], b[N * 8];
  MPI_OK(MPI_Get_library_version(lib, &len));
  if (strstr(lib, "Open MPI") == NULL) return;
  for (w = 1; w <= 2; ++w) {
    const MPI_Datatype dt = w == 1 ? MPI_UINT8_T : MPI_UINT16_T;
    for (k = 0; k < N; ++k) {
      st_int(a + w * k, w, (UINT64_C(1) << (8 * w)) - 2);
      st_int(b + w * k, w, 3);
    }
    MPI_OK(MPI_Reduce_local(a, b, N, dt, MPI_SUM));
    for (k = 0; k < N; ++k) quirk_usat[w] |= ld_int(b + w * k, w, 0) != 1;
    if (quirk_usat[w] && rank == 0)
      fprintf(stderr, "prog_coll_reduce: note: this Open MPI saturates MPI_SUM of %d-byte unsigned "
                      "integers; those inputs are kept from overflowing\n", w);
  }
  for (t = 0; t < NTYPES; ++t) {
    const tinfo *ti = &types[t];
    uint64_t top;
    if (ti->kind != K_SINT && ti->kind != K_UINT) continue;
    top = UINT64_C(1) << (8 * ti->w - 1);
    for (k = 0; k < N; ++k) {
      st_int(a + ti->w * k, ti->w, top);
      st_int(b + ti->w * k, ti->w, 1);
    }
    MPI_OK(MPI_Reduce_local(a, b, N, ti->dt, MPI_MIN));
    for (k = 0; k < N; ++k)
      quirk_minmax[t] |= ld_int(b + ti->w * k, ti->w, 0) != (ti->kind == K_SINT ? top : 1);
    if (quirk_minmax[t] && rank == 0)
      fprintf(stderr, "prog_coll_reduce: note: this Open MPI gets the signedness of %s wrong in "
                      "MPI_MIN/MPI_MAX; those inputs keep the top bit clear\n", ti->name);
  }
}

/* ------------------------------------------------------------ main */
static int type_index(MPI_Datatype dt) {
  int t;
  for (t = 0; t < NTYPES; ++t)
    if (types[t].dt == dt) return t;
  return -1;
}

int main(int argc, char **argv) {
  int rank, size, t, o, p = 0, ci, root, ip, commute = -1;
  static const int counts[] = {0, 1, 7, 1024};
  prog_name = "prog_coll_reduce";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  init_bounds(size);
  probe_open_mpi(rank);
  T_INT = type_index(MPI_INT);
  T_UNSIGNED = type_index(MPI_UNSIGNED);
  op_handle[O_SUM] = MPI_SUM;
  op_handle[O_PROD] = MPI_PROD;
  op_handle[O_MIN] = MPI_MIN;
  op_handle[O_MAX] = MPI_MAX;
  op_handle[O_LAND] = MPI_LAND;
  op_handle[O_LOR] = MPI_LOR;
  op_handle[O_LXOR] = MPI_LXOR;
  op_handle[O_BAND] = MPI_BAND;
  op_handle[O_BOR] = MPI_BOR;
  op_handle[O_BXOR] = MPI_BXOR;
  op_handle[O_MINLOC] = MPI_MINLOC;
  op_handle[O_MAXLOC] = MPI_MAXLOC;
  MPI_OK(MPI_Op_create(ucomm_fn, 1, &op_handle[O_UCOMM]));
  MPI_OK(MPI_Op_create(umat_fn, 0, &op_handle[O_UMAT]));
  MPI_OK(MPI_Op_commutative(op_handle[O_UCOMM], &commute));
  CHECK(commute == 1, "MPI_Op_commutative of the commutative user op gave %d", commute);
  MPI_OK(MPI_Op_commutative(op_handle[O_UMAT], &commute));
  CHECK(commute == 0, "MPI_Op_commutative of the non-commutative user op gave %d", commute);
  MPI_OK(MPI_Op_commutative(MPI_SUM, &commute));
  CHECK(commute == 1, "MPI_Op_commutative(MPI_SUM) gave %d", commute);

  /* A: every (type, predefined op) pair, count 7 (1 for two of the calls). */
  for (t = 0; t < NTYPES; ++t) {
    for (o = 0; o < O_UCOMM; ++o) {
      if (!op_allowed(t, o)) continue;
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_REDUCE, 7, p % size, (p / size) % 2);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_ALLREDUCE, 7, -1, 0);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_ALLREDUCE, 1, -1, 1);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_RSB, 1, -1, p % 2);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_RS, 7, -1, (p + 1) % 2);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_SCAN, 7, -1, p % 2);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_EXSCAN, 7, -1, (p + 1) % 2);
      run_local(t, o, 7);
      ++p;
    }
  }
  /* B: 1024 elements for every pair, 0 elements for every type. */
  for (t = 0, p = 0; t < NTYPES; ++t) {
    int first = -1;
    for (o = 0; o < O_UCOMM; ++o) {
      if (!op_allowed(t, o)) continue;
      if (first < 0) first = o;
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_ALLREDUCE, 1024, -1, p++ % 2);
      run_local(t, o, 1024);
    }
    run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, first, C_ALLREDUCE, 0, -1, 0);
    run_local(t, first, 0);
  }
  /* C: every collective, count, root and in-place variant for a few pairs. */
  {
    static const struct {
      MPI_Datatype dt;
      int o;
    } sel[] = {{MPI_INT, O_SUM},
               {MPI_DOUBLE, O_MAX},
               {MPI_UINT8_T, O_BXOR},
               {MPI_DOUBLE_INT, O_MINLOC},
               {MPI_C_DOUBLE_COMPLEX, O_PROD}};
    int s, c, w;
    for (w = 0; w < 2; ++w) {
      const MPI_Comm comm = w == 0 ? MPI_COMM_WORLD : MPI_COMM_SELF;
      const char *cn = w == 0 ? "MPI_COMM_WORLD" : "MPI_COMM_SELF";
      int csize;
      MPI_OK(MPI_Comm_size(comm, &csize));
      for (s = 0; s < (int)(sizeof sel / sizeof sel[0]); ++s) {
        t = type_index(sel[s].dt);
        CHECK(t >= 0, "type table");
        for (ci = 0; ci < 4; ++ci) {
          for (root = 0; root < csize; ++root)
            for (ip = 0; ip < 2; ++ip) run_coll(comm, cn, t, sel[s].o, C_REDUCE, counts[ci], root, ip);
          for (c = C_ALLREDUCE; c <= C_EXSCAN; ++c)
            for (ip = 0; ip < 2; ++ip) run_coll(comm, cn, t, sel[s].o, c, counts[ci], -1, ip);
        }
      }
    }
  }
  /* D: non-exact floating inputs must give bit-identical results everywhere. */
  {
    static const MPI_Datatype fl[] = {MPI_FLOAT, MPI_DOUBLE, MPI_LONG_DOUBLE, MPI_C_FLOAT_COMPLEX,
                                      MPI_C_DOUBLE_COMPLEX, MPI_C_LONG_DOUBLE_COMPLEX};
    int i;
    for (i = 0; i < (int)(sizeof fl / sizeof fl[0]); ++i) {
      t = type_index(fl[i]);
      run_nonexact(t, O_SUM, 0);
      run_nonexact(t, O_PROD, 1);
    }
  }
  /* E: user-defined ops, commutative and not. */
  for (o = O_UCOMM; o <= O_UMAT; ++o) {
    t = o == O_UCOMM ? T_INT : T_UNSIGNED;
    for (ci = 0; ci < 4; ++ci) {
      const int c = counts[ci];
      for (root = 0; root < size; ++root)
        run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_REDUCE, c, root, root % 2);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_ALLREDUCE, c, -1, 0);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_ALLREDUCE, c, -1, 1);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_SCAN, c, -1, 0);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_SCAN, c, -1, 1);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_EXSCAN, c, -1, ci % 2);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_RSB, c, -1, ci % 2);
      run_coll(MPI_COMM_WORLD, "MPI_COMM_WORLD", t, o, C_RS, c, -1, (ci + 1) % 2);
      run_local(t, o, c);
    }
  }
  MPI_OK(MPI_Op_free(&op_handle[O_UCOMM]));
  MPI_OK(MPI_Op_free(&op_handle[O_UMAT]));
  CHECK(op_handle[O_UCOMM] == MPI_OP_NULL && op_handle[O_UMAT] == MPI_OP_NULL,
        "MPI_Op_free did not set the handles to MPI_OP_NULL");

  MPI_OK(MPI_Finalize());
  if (rank == 0) printf("coll_reduce ok (%d ranks, %ld collective calls per rank)\n", size, ncoll);
  return 0;
}
