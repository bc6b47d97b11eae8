/* The serial model behind coll_reduce.c: the predefined types and ops it
 * checks, the value each rank contributes, the reference combine and fold
 * every result is compared with, the user ops, and the state of the call
 * being checked (for failure messages). Included once, by coll_reduce.c;
 * plain C + MPI like the program. */
#ifndef BCS_COLL_REDUCE_MODEL_H
#define BCS_COLL_REDUCE_MODEL_H

/* ------------------------------------------------------------ types */
enum { K_SINT, K_UINT, K_FLT, K_BOOL, K_CPLX, K_BYTE, K_PAIR };
enum { F_FLOAT, F_DOUBLE, F_LDOUBLE };
enum {
  O_SUM, O_PROD, O_MIN, O_MAX, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR, O_BXOR, O_MINLOC,
  O_MAXLOC, O_UCOMM, O_UMAT, NOPS
};
static const char *op_name[NOPS] = {
    "MPI_SUM",  "MPI_PROD", "MPI_MIN",  "MPI_MAX",    "MPI_LAND",   "MPI_LOR",
    "MPI_LXOR", "MPI_BAND", "MPI_BOR",  "MPI_BXOR",   "MPI_MINLOC", "MPI_MAXLOC",
    "user op a+b+2ab (commutative)", "user op 2x2 matrix product (non-commutative)"};
static MPI_Op op_handle[NOPS];

#define B(o) (1u << (o))
#define OPS_INT                                                                               \
  (B(O_SUM) | B(O_PROD) | B(O_MIN) | B(O_MAX) | B(O_LAND) | B(O_LOR) | B(O_LXOR) | B(O_BAND) | \
   B(O_BOR) | B(O_BXOR))
#define OPS_MULTI (B(O_SUM) | B(O_PROD) | B(O_MIN) | B(O_MAX) | B(O_BAND) | B(O_BOR) | B(O_BXOR))
#define OPS_FLT (B(O_SUM) | B(O_PROD) | B(O_MIN) | B(O_MAX))
#define OPS_BOOL (B(O_LAND) | B(O_LOR) | B(O_LXOR))
#define OPS_CPLX (B(O_SUM) | B(O_PROD))
#define OPS_BYTE (B(O_BAND) | B(O_BOR) | B(O_BXOR))
#define OPS_PAIR (B(O_MINLOC) | B(O_MAXLOC))

typedef struct { float v; int l; } float_int;
typedef struct { double v; int l; } double_int;
typedef struct { long v; int l; } long_int;
typedef struct { int v; int l; } two_int;
typedef struct { short v; int l; } short_int;
typedef struct { long double v; int l; } ldouble_int;

typedef struct {
  MPI_Datatype dt;
  const char *name;
  int kind;
  size_t size; /* C sizeof of one element (the type's extent) */
  int w;       /* integers: bytes; floating and complex: F_* of a component */
  unsigned ops;
  int pkind, pw; /* pairs: kind (K_SINT/K_FLT) and w of the value */
  size_t loff;   /* pairs: offset of the int index */
} tinfo;

#define INT_T(dt, ctype, kind, ops) {dt, #dt, kind, sizeof(ctype), (int)sizeof(ctype), ops, 0, 0, 0}
#define PAIR_T(dt, st, pk, pw) {dt, #dt, K_PAIR, sizeof(st), 0, OPS_PAIR, pk, pw, offsetof(st, l)}

static const tinfo types[] = {
    INT_T(MPI_SIGNED_CHAR, signed char, K_SINT, OPS_INT),
    INT_T(MPI_UNSIGNED_CHAR, unsigned char, K_UINT, OPS_INT),
    INT_T(MPI_SHORT, short, K_SINT, OPS_INT),
    INT_T(MPI_UNSIGNED_SHORT, unsigned short, K_UINT, OPS_INT),
    INT_T(MPI_INT, int, K_SINT, OPS_INT),
    INT_T(MPI_UNSIGNED, unsigned, K_UINT, OPS_INT),
    INT_T(MPI_LONG, long, K_SINT, OPS_INT),
    INT_T(MPI_UNSIGNED_LONG, unsigned long, K_UINT, OPS_INT),
    INT_T(MPI_LONG_LONG_INT, long long, K_SINT, OPS_INT),
    INT_T(MPI_UNSIGNED_LONG_LONG, unsigned long long, K_UINT, OPS_INT),
    INT_T(MPI_INT8_T, int8_t, K_SINT, OPS_INT),
    INT_T(MPI_INT16_T, int16_t, K_SINT, OPS_INT),
    INT_T(MPI_INT32_T, int32_t, K_SINT, OPS_INT),
    INT_T(MPI_INT64_T, int64_t, K_SINT, OPS_INT),
    INT_T(MPI_UINT8_T, uint8_t, K_UINT, OPS_INT),
    INT_T(MPI_UINT16_T, uint16_t, K_UINT, OPS_INT),
    INT_T(MPI_UINT32_T, uint32_t, K_UINT, OPS_INT),
    INT_T(MPI_UINT64_T, uint64_t, K_UINT, OPS_INT),
    INT_T(MPI_AINT, MPI_Aint, K_SINT, OPS_MULTI),
    INT_T(MPI_OFFSET, MPI_Offset, K_SINT, OPS_MULTI),
    INT_T(MPI_COUNT, MPI_Count, K_SINT, OPS_MULTI),
    {MPI_FLOAT, "MPI_FLOAT", K_FLT, sizeof(float), F_FLOAT, OPS_FLT, 0, 0, 0},
    {MPI_DOUBLE, "MPI_DOUBLE", K_FLT, sizeof(double), F_DOUBLE, OPS_FLT, 0, 0, 0},
    {MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", K_FLT, sizeof(long double), F_LDOUBLE, OPS_FLT, 0, 0, 0},
    {MPI_C_BOOL, "MPI_C_BOOL", K_BOOL, sizeof(_Bool), (int)sizeof(_Bool), OPS_BOOL, 0, 0, 0},
    {MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX", K_CPLX, 2 * sizeof(float), F_FLOAT, OPS_CPLX, 0,
     0, 0},
    {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", K_CPLX, 2 * sizeof(double), F_DOUBLE,
     OPS_CPLX, 0, 0, 0},
    {MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX", K_CPLX, 2 * sizeof(long double),
     F_LDOUBLE, OPS_CPLX, 0, 0, 0},
    {MPI_BYTE, "MPI_BYTE", K_BYTE, 1, 1, OPS_BYTE, 0, 0, 0},
    PAIR_T(MPI_FLOAT_INT, float_int, K_FLT, F_FLOAT),
    PAIR_T(MPI_DOUBLE_INT, double_int, K_FLT, F_DOUBLE),
    PAIR_T(MPI_LONG_INT, long_int, K_SINT, (int)sizeof(long)),
    PAIR_T(MPI_2INT, two_int, K_SINT, (int)sizeof(int)),
    PAIR_T(MPI_SHORT_INT, short_int, K_SINT, (int)sizeof(short)),
    PAIR_T(MPI_LONG_DOUBLE_INT, ldouble_int, K_FLT, F_LDOUBLE),
};
#define NTYPES ((int)(sizeof types / sizeof types[0]))
static int T_INT = -1, T_UNSIGNED = -1; /* indices in types[] of MPI_INT, MPI_UNSIGNED */

static int op_allowed(int t, int o) {
  if (o == O_UCOMM) return t == T_INT;
  if (o == O_UMAT) return t == T_UNSIGNED;
  return (types[t].ops & B(o)) != 0;
}

/* ------------------------------------------------------------ the call being checked */
enum { C_REDUCE, C_ALLREDUCE, C_RSB, C_RS, C_SCAN, C_EXSCAN, C_LOCAL };
static const char *coll_name[] = {"MPI_Reduce", "MPI_Allreduce", "MPI_Reduce_scatter_block",
                                  "MPI_Reduce_scatter", "MPI_Scan", "MPI_Exscan",
                                  "MPI_Reduce_local"};
static struct {
  const char *coll, *comm;
  int t, o, count, root, inplace;
  uint64_t round;
} cur;
static long ncoll; /* collective calls made by this rank */

#define SENTINEL 0xA5
#define TAIL 40 /* bytes after every result that must stay untouched */

static void fail(const char *fmt_what, const char *got, const char *want) {
  CHECK(0, "%s on %s: op %s type %s count %d root %d%s (round %llu): %s is %s, want %s", cur.coll,
        cur.comm, op_name[cur.o], types[cur.t].name, cur.count, cur.root,
        cur.inplace ? " MPI_IN_PLACE" : "", (unsigned long long)cur.round, fmt_what, got, want);
}

/* ------------------------------------------------------------ values */
/* One element, whatever its type: integers (and bools, bytes, integer pair
   values) in u, normalised (signed: sign-extended; unsigned: zero-extended);
   floating values in re (and im); the pair index in loc. */
typedef struct {
  uint64_t u;
  long double re, im;
  int loc;
} val_t;

static uint64_t smix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
static uint64_t h64(int t, int o, int r, int k) {
  return smix(smix(cur.round * 0x100000001b3ull + (uint64_t)t * 131u + (uint64_t)o) ^
              smix(((uint64_t)(unsigned)r << 32) | (uint32_t)k));
}

/* Signed overflow is undefined in C (MPI's ops are C's operators), and Open
   MPI's vectorised kernels indeed saturate instead of wrapping
   (open-mpi/ompi#8045, "wontfix"): signed SUM and PROD inputs are chosen
   so that no partial result of up to `nbound` contributions overflows.
   Unsigned types use the full range and must wrap, bit-exact. */
static int nbound = 3;      /* most contributions folded into one element */
static uint64_t prod_m[9];  /* per width in bytes: largest M with M^nbound <= max */
static uint64_t smax(int w) { return (UINT64_C(1) << (8 * w - 1)) - 1; }
static void init_bounds(int size) {
  int w, i;
  nbound = size > 3 ? size : 3;
  for (w = 1; w <= 8; w *= 2) {
    uint64_t m = 1;
    for (;;) {
      uint64_t p = 1;
      int ok = 1;
      for (i = 0; i < nbound && ok; ++i) {
        if (p > smax(w) / (m + 1)) ok = 0;
        else p *= m + 1;
      }
      if (!ok || m >= (UINT64_C(1) << 20)) break;
      ++m;
    }
    prod_m[w] = m;
  }
}

/* Known Open MPI defects, probed at start with MPI_Reduce_local under Open
   MPI only (never under bcs), so that our reference peer passes; each one
   found is reported on stderr by rank 0:
   - quirk_usat[w]: MPI_SUM of unsigned w-byte integers saturates instead of
     wrapping in the vectorised kernels (op/avx, cf. open-mpi/ompi#8045);
     then those SUM inputs are kept from overflowing, like the signed ones.
   - quirk_minmax[t]: MIN/MAX compare type t with the wrong signedness
     (MPI_UNSIGNED_LONG: open-mpi/ompi#10525, #10648; also seen on
     MPI_OFFSET, MPI_COUNT); then those inputs keep their top bit clear. */
static int quirk_usat[9];
static int quirk_minmax[64];

static uint64_t norm(uint64_t u, int w, int sgn) {
  if (w < 8) {
    const uint64_t mask = (UINT64_C(1) << (8 * w)) - 1;
    u &= mask;
    if (sgn && (u >> (8 * w - 1)) & 1) u |= ~mask;
  }
  return u;
}
static int is_signed(int kind) { return kind == K_SINT; }

static uint64_t ld_int(const unsigned char *p, int w, int sgn) {
  uint64_t u = 0;
  /* little and big endian alike: go through the exact-width type */
  switch (w) {
    case 1: { uint8_t v; memcpy(&v, p, 1); u = v; break; }
    case 2: { uint16_t v; memcpy(&v, p, 2); u = v; break; }
    case 4: { uint32_t v; memcpy(&v, p, 4); u = v; break; }
    default: { uint64_t v; memcpy(&v, p, 8); u = v; break; }
  }
  return norm(u, w, sgn);
}
static void st_int(unsigned char *p, int w, uint64_t u) {
  switch (w) {
    case 1: { uint8_t v = (uint8_t)u; memcpy(p, &v, 1); break; }
    case 2: { uint16_t v = (uint16_t)u; memcpy(p, &v, 2); break; }
    case 4: { uint32_t v = (uint32_t)u; memcpy(p, &v, 4); break; }
    default: memcpy(p, &u, 8); break;
  }
}
static size_t flt_size(int fc) {
  return fc == F_FLOAT ? sizeof(float) : fc == F_DOUBLE ? sizeof(double) : sizeof(long double);
}
static long double ld_flt(const unsigned char *p, int fc) {
  if (fc == F_FLOAT) { float v; memcpy(&v, p, sizeof v); return v; }
  if (fc == F_DOUBLE) { double v; memcpy(&v, p, sizeof v); return v; }
  { long double v; memcpy(&v, p, sizeof v); return v; }
}
static void st_flt(unsigned char *p, int fc, long double x) {
  if (fc == F_FLOAT) { float v = (float)x; memcpy(p, &v, sizeof v); }
  else if (fc == F_DOUBLE) { double v = (double)x; memcpy(p, &v, sizeof v); }
  else { memcpy(p, &x, sizeof x); }
}

static val_t ld(int t, const unsigned char *p) {
  const tinfo *ti = &types[t];
  val_t v;
  memset(&v, 0, sizeof v);
  switch (ti->kind) {
    case K_SINT: case K_UINT: v.u = ld_int(p, ti->w, ti->kind == K_SINT); break;
    case K_BYTE: v.u = *p; break;
    case K_BOOL: { _Bool b; memcpy(&b, p, sizeof b); v.u = b; break; }
    case K_FLT: v.re = ld_flt(p, ti->w); break;
    case K_CPLX: v.re = ld_flt(p, ti->w); v.im = ld_flt(p + flt_size(ti->w), ti->w); break;
    case K_PAIR:
      if (ti->pkind == K_FLT) v.re = ld_flt(p, ti->pw);
      else v.u = ld_int(p, ti->pw, 1);
      memcpy(&v.loc, p + ti->loff, sizeof v.loc);
      break;
  }
  return v;
}
static void st(int t, unsigned char *p, val_t v) {
  const tinfo *ti = &types[t];
  switch (ti->kind) {
    case K_SINT: case K_UINT: st_int(p, ti->w, v.u); break;
    case K_BYTE: *p = (unsigned char)v.u; break;
    case K_BOOL: { _Bool b = v.u != 0; memcpy(p, &b, sizeof b); break; }
    case K_FLT: st_flt(p, ti->w, v.re); break;
    case K_CPLX: st_flt(p, ti->w, v.re); st_flt(p + flt_size(ti->w), ti->w, v.im); break;
    case K_PAIR:
      if (ti->pkind == K_FLT) st_flt(p, ti->pw, v.re);
      else st_int(p, ti->pw, v.u);
      memcpy(p + ti->loff, &v.loc, sizeof v.loc);
      break;
  }
}
static int same(int t, val_t a, val_t b) {
  switch (types[t].kind) {
    case K_FLT: return a.re == b.re;
    case K_CPLX: return a.re == b.re && a.im == b.im;
    case K_PAIR: return a.loc == b.loc && (types[t].pkind == K_FLT ? a.re == b.re : a.u == b.u);
    default: return a.u == b.u;
  }
}
static void show(int t, val_t v, char *out, size_t cap) {
  const tinfo *ti = &types[t];
  switch (ti->kind) {
    case K_SINT: snprintf(out, cap, "%lld (0x%llx)", (long long)v.u, (unsigned long long)v.u); break;
    case K_FLT: snprintf(out, cap, "%.21Lg", v.re); break;
    case K_CPLX: snprintf(out, cap, "(%.21Lg, %.21Lg)", v.re, v.im); break;
    case K_PAIR:
      if (ti->pkind == K_FLT) snprintf(out, cap, "(value %.21Lg, index %d)", v.re, v.loc);
      else snprintf(out, cap, "(value %lld, index %d)", (long long)v.u, v.loc);
      break;
    default: snprintf(out, cap, "%llu (0x%llx)", (unsigned long long)v.u, (unsigned long long)v.u);
  }
}

/* Input of rank r, element k, in the current round. */
static val_t gen(int t, int o, int r, int k) {
  const tinfo *ti = &types[t];
  const uint64_t h = h64(t, o, r, k);
  val_t v;
  memset(&v, 0, sizeof v);
  switch (ti->kind) {
    case K_SINT:
    case K_UINT:
      if (o == O_LAND || o == O_LOR || o == O_LXOR) {
        /* zero with probability (k % 5) / 4; non-zero values include ones
           whose low byte is zero */
        if ((int)(h & 3) < k % 5) {
          v.u = 0;
        } else {
          switch ((h >> 2) & 3) {
            case 0: v.u = 1; break;
            case 1: v.u = UINT64_C(1) << (8 * ti->w - 1); break;
            case 2: v.u = ti->w > 1 ? UINT64_C(0x100) : 0x80; break;
            default: v.u = (h >> 8) | 1; break;
          }
        }
      } else if (o == O_SUM && ti->kind == K_SINT) {
        /* No partial sum of up to nbound inputs overflows. */
        const uint64_t s = smax(ti->w) / (uint64_t)nbound;
        v.u = (uint64_t)((int64_t)(h % (2 * s + 1)) - (int64_t)s);
      } else if (o == O_PROD && ti->kind == K_SINT) {
        /* No partial product of up to nbound inputs overflows: magnitudes
           1..M with M^nbound <= max, or (when M would be 1) a 2 from at
           most 8w-2 of the ranks. */
        const uint64_t m = prod_m[ti->w];
        uint64_t mag;
        if (m >= 2) mag = 1 + (h >> 1) % m;
        else mag = (r + k) % nbound < 8 * ti->w - 2 ? 2 : 1;
        v.u = (h & 1) ? (uint64_t)0 - mag : mag;
      } else if (o == O_PROD) {
        v.u = (h >> 3) | ((h & 7) != 0); /* mostly odd, so products stay interesting */
      } else {
        v.u = h;
      }
      if (quirk_minmax[t] && (o == O_MIN || o == O_MAX)) v.u &= ~(UINT64_C(1) << (8 * ti->w - 1));
      if (quirk_usat[ti->w] && ti->kind == K_UINT && o == O_SUM)
        v.u = norm(v.u, ti->w, 0) % (2 * smax(ti->w) / (uint64_t)nbound);
      v.u = norm(v.u, ti->w, ti->kind == K_SINT);
      break;
    case K_BYTE: v.u = h & 0xff; break;
    case K_BOOL: v.u = (int)(h & 3) < k % 5 ? 0 : 1; break;
    case K_FLT:
      if (o == O_SUM) {
        v.re = ((long double)(int64_t)(h % 2001) - 1000) * 0.25L;
      } else if (o == O_PROD) {
        static const long double m[4] = {1.0L, 1.5L, 1.25L, 1.0L};
        v.re = ldexpl(m[(h >> 2) & 3], (int)((h >> 4) % 7) - 3);
        if ((h >> 8) & 1) v.re = -v.re;
      } else {
        v.re = ((long double)(int64_t)(h % 2000001) - 1000000) / 64.0L;
      }
      break;
    case K_CPLX:
      if (o == O_SUM) {
        v.re = (long double)(int64_t)(h % 201) - 100;
        v.im = (long double)(int64_t)((h >> 16) % 201) - 100;
      } else {
        static const long double z[8][2] = {{1, 0},  {0, 1},  {-1, 0}, {0, -1},
                                            {1, 1},  {1, -1}, {2, 0},  {0, 0.5L}};
        v.re = z[h & 7][0];
        v.im = z[h & 7][1];
      }
      break;
    case K_PAIR:
      if (ti->pkind == K_FLT) v.re = (long double)(int64_t)(h % 4) - 1;
      else v.u = (uint64_t)((int64_t)(h % 4) - 1);
      v.loc = (int)((h >> 8) % 40);
      break;
  }
  return v;
}

static uint32_t mat_mul(uint32_t a, uint32_t b) {
  /* 2x2 matrices of bytes [[x0 x1] [x2 x3]], x0 in the low byte, mod 256 */
  const unsigned a0 = a & 255, a1 = (a >> 8) & 255, a2 = (a >> 16) & 255, a3 = a >> 24;
  const unsigned b0 = b & 255, b1 = (b >> 8) & 255, b2 = (b >> 16) & 255, b3 = b >> 24;
  return ((a0 * b0 + a1 * b2) & 255) | ((a0 * b1 + a1 * b3) & 255) << 8 |
         ((a2 * b0 + a3 * b2) & 255) << 16 | (uint32_t)((a2 * b1 + a3 * b3) & 255) << 24;
}

/* a op b, a from the lower ranks. */
static val_t combine(int t, int o, val_t a, val_t b) {
  const tinfo *ti = &types[t];
  const int sgn = is_signed(ti->kind), w = ti->w;
  val_t r = a;
  switch (o) {
    case O_SUM:
      if (ti->kind == K_FLT || ti->kind == K_CPLX) { r.re = a.re + b.re; r.im = a.im + b.im; }
      else r.u = norm(a.u + b.u, w, sgn);
      break;
    case O_PROD:
      if (ti->kind == K_FLT) r.re = a.re * b.re;
      else if (ti->kind == K_CPLX) {
        r.re = a.re * b.re - a.im * b.im;
        r.im = a.re * b.im + a.im * b.re;
      } else r.u = norm(a.u * b.u, w, sgn);
      break;
    case O_MIN:
    case O_MAX: {
      int blt, bgt; /* b below / above a */
      if (ti->kind == K_FLT) {
        blt = b.re < a.re;
        bgt = b.re > a.re;
      } else if (sgn) {
        blt = (int64_t)b.u < (int64_t)a.u;
        bgt = (int64_t)b.u > (int64_t)a.u;
      } else {
        blt = b.u < a.u;
        bgt = b.u > a.u;
      }
      if (o == O_MIN ? blt : bgt) r = b;
      break;
    }
    case O_LAND: r.u = a.u != 0 && b.u != 0; break;
    case O_LOR: r.u = a.u != 0 || b.u != 0; break;
    case O_LXOR: r.u = (a.u != 0) != (b.u != 0); break;
    case O_BAND: r.u = norm(a.u & b.u, w, sgn); break;
    case O_BOR: r.u = norm(a.u | b.u, w, sgn); break;
    case O_BXOR: r.u = norm(a.u ^ b.u, w, sgn); break;
    case O_MINLOC:
    case O_MAXLOC: {
      int cmp; /* <0: a's value wins, >0: b's, 0: tie */
      if (ti->pkind == K_FLT) cmp = a.re < b.re ? -1 : a.re > b.re ? 1 : 0;
      else cmp = (int64_t)a.u < (int64_t)b.u ? -1 : (int64_t)a.u > (int64_t)b.u ? 1 : 0;
      if (o == O_MAXLOC) cmp = -cmp;
      if (cmp > 0) r = b;
      else if (cmp == 0) r.loc = a.loc < b.loc ? a.loc : b.loc;
      break;
    }
    case O_UCOMM: r.u = norm(a.u + b.u + 2 * a.u * b.u, w, sgn); break;
    case O_UMAT: r.u = mat_mul((uint32_t)a.u, (uint32_t)b.u); break;
  }
  return r;
}

/* Element k folded over ranks lo..hi-1 in rank order. */
static val_t fold(int t, int o, int lo, int hi, int k) {
  val_t acc = gen(t, o, lo, k);
  int r;
  for (r = lo + 1; r < hi; ++r) acc = combine(t, o, acc, gen(t, o, r, k));
  return acc;
}

/* ------------------------------------------------------------ user ops */
static void ucomm_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
  int i;
  CHECK(*dt == MPI_INT, "user op a+b+2ab called with a datatype other than MPI_INT");
  for (i = 0; i < *len; ++i) {
    unsigned a, b, c;
    memcpy(&a, (char *)in + sizeof(int) * (size_t)i, sizeof a);
    memcpy(&b, (char *)inout + sizeof(int) * (size_t)i, sizeof b);
    c = a + b + 2u * a * b;
    memcpy((char *)inout + sizeof(int) * (size_t)i, &c, sizeof c);
  }
}
static void umat_fn(void *in, void *inout, int *len, MPI_Datatype *dt) {
  const unsigned *a = (const unsigned *)in;
  unsigned *b = (unsigned *)inout;
  int i;
  CHECK(*dt == MPI_UNSIGNED, "user op matrix product called with a datatype other than MPI_UNSIGNED");
  for (i = 0; i < *len; ++i) b[i] = mat_mul(a[i], b[i]); /* inout = in o inout */
}

#endif /* BCS_COLL_REDUCE_MODEL_H */
