/* prog_coll_basic: the data-moving collectives against a serial reference.
 *
 * MPI_Barrier, MPI_Bcast, MPI_Gather(v), MPI_Scatter(v), MPI_Allgather(v),
 * MPI_Alltoall(v) and MPI_Alltoallw (predefined types only), for counts 0,
 * 1, 7 and 1024 elements of MPI_INT, MPI_DOUBLE and MPI_BYTE, every root,
 * with the MPI_IN_PLACE variants MPI allows (gather(v) and scatter(v) at
 * the root, allgather(v), alltoall(v)), on MPI_COMM_WORLD and MPI_COMM_SELF.
 *
 * Every element is a deterministic function f(source, destination, index,
 * round) of who sent it, for whom, where, and in which call (the round
 * advances with every collective), so each rank builds the whole expected
 * receive buffer locally (the serial reference) and compares it byte by
 * byte, including what must stay untouched: the bytes after every result,
 * and the gaps that the displacements of the v variants leave between
 * blocks. v counts are uneven and include zeros; v blocks are laid out in
 * rank order or in reverse, with gaps before, between and after them.
 * Arguments that MPI says are not significant (receive buffers of
 * non-roots, send arguments with MPI_IN_PLACE) are passed as NULL / 0 /
 * MPI_DATATYPE_NULL, so a runtime that reads them is caught.
 *
 * Under Open MPI only, MPI_Alltoallw on a one-member communicator uses
 * displacement 0 (an Open MPI coll/self defect, see t_alltoallw).
 *
 * A failed check names the rank, the collective, communicator, type,
 * count, root, in-place flag, and the first wrong element (which block,
 * got and want). Rank 0 prints "coll_basic ok (...)" with the number of
 * collective calls each rank made. */
#include <stdint.h>
#include <string.h>

#include "prog_common.h"

enum { T_INT, T_DOUBLE, T_BYTE, NTYPES };
static const struct {
  MPI_Datatype dt;
  const char *name;
  size_t size;
} types[NTYPES] = {{MPI_INT, "MPI_INT", sizeof(int)},
                   {MPI_DOUBLE, "MPI_DOUBLE", sizeof(double)},
                   {MPI_BYTE, "MPI_BYTE", 1}};
static const int counts[] = {0, 1, 7, 1024};
#define NCOUNTS ((int)(sizeof counts / sizeof counts[0]))

#define SENTINEL 0xA5 /* every byte a collective must not write */
#define TAIL 24       /* bytes after every receive buffer that must stay untouched */
#define GAP 3         /* elements between v blocks (and before the first, after the last) */

static long ncoll;       /* collective calls made by this rank */
static int is_open_mpi; /* for a workaround of an Open MPI bug, see t_alltoallw */

/* The call being checked, for failure messages. */
static struct {
  const char *coll, *comm;
  int type, count, root, inplace;
  unsigned round;
} cur;

static void begin(const char *coll, int root, int inplace) {
  cur.coll = coll;
  cur.root = root;
  cur.inplace = inplace;
  ++cur.round;
  ++ncoll;
}

/* ---------------------------------------------------------------- values */
static uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
/* Element `k` that `src` contributes for `dst` (-1: for everyone). */
static uint32_t f(int src, int dst, int k) {
  return mix((uint32_t)src * 0x9e3779b1u ^ mix((uint32_t)dst * 0x85ebca77u + cur.round) ^
             mix((uint32_t)k + 0x27d4eb2fu));
}
static void put(int t, unsigned char *p, uint32_t h) {
  if (t == T_INT) {
    int v = (int)(h & 0x7fffffffu) - 0x40000000;
    memcpy(p, &v, sizeof v);
  } else if (t == T_DOUBLE) {
    double v = ((double)h - 2147483648.0) * 0.125;
    memcpy(p, &v, sizeof v);
  } else {
    *p = (unsigned char)(h ^ (h >> 11));
  }
}
/* Fills n elements of type t at p with f(src, dst, 0..n-1). */
static void fill(int t, unsigned char *p, int n, int src, int dst) {
  int k;
  for (k = 0; k < n; ++k) put(t, p + (size_t)k * types[t].size, f(src, dst, k));
}
static void show(int t, const unsigned char *p, char *out, size_t cap) {
  if (t == T_INT) {
    int v;
    memcpy(&v, p, sizeof v);
    snprintf(out, cap, "%d", v);
  } else if (t == T_DOUBLE) {
    double v;
    memcpy(&v, p, sizeof v);
    snprintf(out, cap, "%.17g", v);
  } else {
    snprintf(out, cap, "0x%02x", *p);
  }
}

/* ---------------------------------------------------------------- checking */
/* Where the blocks of a buffer are (bytes), whose they are, and their type. */
typedef struct {
  int n;
  size_t *start, *end;
  int *owner, *type;
} blocks_t;

static blocks_t blocks_new(int n) {
  blocks_t b;
  b.n = 0;
  b.start = (size_t *)malloc(sizeof(size_t) * (size_t)(n + 1));
  b.end = (size_t *)malloc(sizeof(size_t) * (size_t)(n + 1));
  b.owner = (int *)malloc(sizeof(int) * (size_t)(n + 1));
  b.type = (int *)malloc(sizeof(int) * (size_t)(n + 1));
  CHECK(b.start && b.end && b.owner && b.type, "out of memory");
  return b;
}
static void blocks_add(blocks_t *b, size_t start, size_t bytes, int owner, int type) {
  b->start[b->n] = start;
  b->end[b->n] = start + bytes;
  b->owner[b->n] = owner;
  b->type[b->n] = type;
  ++b->n;
}
static void blocks_free(blocks_t *b) {
  free(b->start);
  free(b->end);
  free(b->owner);
  free(b->type);
}

/* Compares `got` with the reference `want` (nbytes, TAIL included) and on
   the first difference says where it is and aborts. `what` names the
   buffer; `who` says what a block's owner is ("from rank", "for rank"). */
static void verify(const char *what, const unsigned char *got, const unsigned char *want,
                   size_t nbytes, const blocks_t *bl, const char *who) {
  size_t off, i;
  char g[64], w[64], where[160];
  if (memcmp(got, want, nbytes) == 0) return;
  for (off = 0; got[off] == want[off]; ++off) {
  }
  snprintf(where, sizeof where, "byte %zu (outside every block, must stay untouched)", off);
  snprintf(g, sizeof g, "0x%02x", got[off]);
  snprintf(w, sizeof w, "0x%02x", want[off]);
  for (i = 0; bl && i < (size_t)bl->n; ++i) {
    if (off >= bl->start[i] && off < bl->end[i]) {
      const int t = bl->type[i];
      const size_t e = (off - bl->start[i]) / types[t].size;
      const size_t at = bl->start[i] + e * types[t].size;
      snprintf(where, sizeof where, "element %zu (%s) of the block %s %d (byte %zu)", e,
               types[t].name, who, bl->owner[i], at);
      show(t, got + at, g, sizeof g);
      show(t, want + at, w, sizeof w);
      break;
    }
  }
  CHECK(0,
        "%s on %s: type %s count %d root %d%s (round %u): %s: first wrong: %s is %s, want %s",
        cur.coll, cur.comm, types[cur.type].name, cur.count, cur.root,
        cur.inplace ? " MPI_IN_PLACE" : "", cur.round, what, where, g, w);
}

static unsigned char *alloc_bytes(size_t n) {
  unsigned char *p = (unsigned char *)malloc(n + TAIL + 1);
  CHECK(p != NULL, "out of memory (%zu bytes)", n);
  memset(p, SENTINEL, n + TAIL + 1);
  return p;
}

/* ---------------------------------------------------------------- layouts */
/* Uneven counts with zeros: c/2, 2c, c, 0, 3c/2, c/2, 2c, c, ... */
static int vcount(int c, int i) { return ((i * 3 + 1) % 5) * c / 2; }
/* Alltoallv: i sends a2c(c, i, j) elements to j. */
static int a2c(int c, int i, int j) { return ((i * 3 + j * 2 + 1) % 5) * c / 2; }
/* Symmetric counts for in-place alltoallv (i->j as much as j->i). */
static int a2s(int c, int i, int j) { return (((i + j) * 3 + (i * j) % 2 + 1) % 5) * c / 2; }

/* Displacements (elements) of n blocks with GAP elements before, between
   and after them, in rank order or reversed. Returns the total elements. */
static int layout(const int *cnt, int n, int reverse, int *displ) {
  int i, pos = GAP;
  for (i = 0; i < n; ++i) {
    const int b = reverse ? n - 1 - i : i;
    displ[b] = pos;
    pos += cnt[b] + GAP;
  }
  return pos;
}

/* ---------------------------------------------------------------- the tests */
typedef struct {
  MPI_Comm comm;
  int rank, size, t, c;
  size_t es;
  MPI_Datatype dt;
} env_t;

static void t_barrier(const env_t *e) {
  begin("MPI_Barrier", -1, 0);
  MPI_OK(MPI_Barrier(e->comm));
}

static void t_bcast(const env_t *e, int root) {
  const size_t n = (size_t)e->c * e->es;
  unsigned char *buf = alloc_bytes(n), *want = alloc_bytes(n);
  blocks_t bl = blocks_new(1);
  begin("MPI_Bcast", root, 0);
  fill(e->t, want, e->c, root, -1);
  if (e->rank == root) memcpy(buf, want, n);
  MPI_OK(MPI_Bcast(buf, e->c, e->dt, root, e->comm));
  blocks_add(&bl, 0, n, root, e->t);
  verify("buffer", buf, want, n + TAIL, &bl, "from rank");
  blocks_free(&bl);
  free(buf);
  free(want);
}

static void t_gather(const env_t *e, int root, int inplace) {
  const size_t blk = (size_t)e->c * e->es, n = blk * (size_t)e->size;
  unsigned char *sbuf = alloc_bytes(blk), *rbuf = NULL, *want = NULL;
  int i;
  begin("MPI_Gather", root, inplace);
  fill(e->t, sbuf, e->c, e->rank, root);
  if (e->rank == root) {
    blocks_t bl = blocks_new(e->size);
    rbuf = alloc_bytes(n);
    want = alloc_bytes(n);
    for (i = 0; i < e->size; ++i) {
      fill(e->t, want + blk * (size_t)i, e->c, i, root);
      blocks_add(&bl, blk * (size_t)i, blk, i, e->t);
    }
    if (inplace) {
      memcpy(rbuf + blk * (size_t)root, sbuf, blk);
      MPI_OK(MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, e->c, e->dt, root, e->comm));
    } else {
      MPI_OK(MPI_Gather(sbuf, e->c, e->dt, rbuf, e->c, e->dt, root, e->comm));
    }
    verify("receive buffer", rbuf, want, n + TAIL, &bl, "from rank");
    blocks_free(&bl);
  } else {
    MPI_OK(MPI_Gather(sbuf, e->c, e->dt, NULL, 0, MPI_DATATYPE_NULL, root, e->comm));
  }
  free(sbuf);
  free(rbuf);
  free(want);
}

static void t_gatherv(const env_t *e, int root, int inplace) {
  int *cnt = (int *)malloc(sizeof(int) * (size_t)e->size);
  int *displ = (int *)malloc(sizeof(int) * (size_t)e->size);
  int i, total;
  size_t mine;
  unsigned char *sbuf, *rbuf = NULL, *want = NULL;
  CHECK(cnt && displ, "out of memory");
  begin("MPI_Gatherv", root, inplace);
  for (i = 0; i < e->size; ++i) cnt[i] = vcount(e->c, i);
  total = layout(cnt, e->size, root % 2, displ);
  mine = (size_t)cnt[e->rank] * e->es;
  sbuf = alloc_bytes(mine);
  fill(e->t, sbuf, cnt[e->rank], e->rank, root);
  if (e->rank == root) {
    const size_t n = (size_t)total * e->es;
    blocks_t bl = blocks_new(e->size);
    rbuf = alloc_bytes(n);
    want = alloc_bytes(n);
    for (i = 0; i < e->size; ++i) {
      fill(e->t, want + (size_t)displ[i] * e->es, cnt[i], i, root);
      blocks_add(&bl, (size_t)displ[i] * e->es, (size_t)cnt[i] * e->es, i, e->t);
    }
    if (inplace) {
      memcpy(rbuf + (size_t)displ[root] * e->es, sbuf, mine);
      MPI_OK(MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, cnt, displ, e->dt, root,
                         e->comm));
    } else {
      MPI_OK(MPI_Gatherv(sbuf, cnt[e->rank], e->dt, rbuf, cnt, displ, e->dt, root, e->comm));
    }
    verify("receive buffer", rbuf, want, n + TAIL, &bl, "from rank");
    blocks_free(&bl);
  } else {
    MPI_OK(MPI_Gatherv(sbuf, cnt[e->rank], e->dt, NULL, NULL, NULL, MPI_DATATYPE_NULL, root,
                       e->comm));
  }
  free(sbuf);
  free(rbuf);
  free(want);
  free(cnt);
  free(displ);
}

static void t_scatter(const env_t *e, int root, int inplace) {
  const size_t blk = (size_t)e->c * e->es, n = blk * (size_t)e->size;
  unsigned char *rbuf = alloc_bytes(blk), *want = alloc_bytes(blk);
  blocks_t bl = blocks_new(e->size);
  int i;
  begin("MPI_Scatter", root, inplace);
  fill(e->t, want, e->c, root, e->rank);
  if (e->rank == root) {
    unsigned char *sbuf = alloc_bytes(n), *sref = alloc_bytes(n);
    blocks_t sb = blocks_new(e->size);
    for (i = 0; i < e->size; ++i) {
      fill(e->t, sref + blk * (size_t)i, e->c, root, i);
      blocks_add(&sb, blk * (size_t)i, blk, i, e->t);
    }
    memcpy(sbuf, sref, n);
    if (inplace) {
      MPI_OK(MPI_Scatter(sbuf, e->c, e->dt, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, e->comm));
    } else {
      MPI_OK(MPI_Scatter(sbuf, e->c, e->dt, rbuf, e->c, e->dt, root, e->comm));
    }
    /* The root's own block stays where it is; the send buffer is read only. */
    verify("send buffer (must be unchanged)", sbuf, sref, n + TAIL, &sb, "for rank");
    blocks_free(&sb);
    free(sbuf);
    free(sref);
  } else {
    MPI_OK(MPI_Scatter(NULL, 0, MPI_DATATYPE_NULL, rbuf, e->c, e->dt, root, e->comm));
  }
  if (!(inplace && e->rank == root)) {
    blocks_add(&bl, 0, blk, root, e->t);
    verify("receive buffer", rbuf, want, blk + TAIL, &bl, "from rank");
  }
  blocks_free(&bl);
  free(rbuf);
  free(want);
}

static void t_scatterv(const env_t *e, int root, int inplace) {
  int *cnt = (int *)malloc(sizeof(int) * (size_t)e->size);
  int *displ = (int *)malloc(sizeof(int) * (size_t)e->size);
  int i, total;
  size_t mine;
  unsigned char *rbuf, *want;
  blocks_t bl = blocks_new(1);
  CHECK(cnt && displ, "out of memory");
  begin("MPI_Scatterv", root, inplace);
  for (i = 0; i < e->size; ++i) cnt[i] = vcount(e->c, (i + 2) % e->size);
  total = layout(cnt, e->size, (root + 1) % 2, displ);
  mine = (size_t)cnt[e->rank] * e->es;
  rbuf = alloc_bytes(mine);
  want = alloc_bytes(mine);
  fill(e->t, want, cnt[e->rank], root, e->rank);
  if (e->rank == root) {
    const size_t n = (size_t)total * e->es;
    unsigned char *sbuf = alloc_bytes(n), *sref = alloc_bytes(n);
    blocks_t sb = blocks_new(e->size);
    for (i = 0; i < e->size; ++i) {
      fill(e->t, sref + (size_t)displ[i] * e->es, cnt[i], root, i);
      blocks_add(&sb, (size_t)displ[i] * e->es, (size_t)cnt[i] * e->es, i, e->t);
    }
    memcpy(sbuf, sref, n);
    if (inplace) {
      MPI_OK(MPI_Scatterv(sbuf, cnt, displ, e->dt, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root,
                          e->comm));
    } else {
      MPI_OK(MPI_Scatterv(sbuf, cnt, displ, e->dt, rbuf, cnt[e->rank], e->dt, root, e->comm));
    }
    verify("send buffer (must be unchanged)", sbuf, sref, n + TAIL, &sb, "for rank");
    blocks_free(&sb);
    free(sbuf);
    free(sref);
  } else {
    MPI_OK(MPI_Scatterv(NULL, NULL, NULL, MPI_DATATYPE_NULL, rbuf, cnt[e->rank], e->dt, root,
                        e->comm));
  }
  if (!(inplace && e->rank == root)) {
    blocks_add(&bl, 0, mine, root, e->t);
    verify("receive buffer", rbuf, want, mine + TAIL, &bl, "from rank");
  }
  blocks_free(&bl);
  free(rbuf);
  free(want);
  free(cnt);
  free(displ);
}

static void t_allgather(const env_t *e, int inplace) {
  const size_t blk = (size_t)e->c * e->es, n = blk * (size_t)e->size;
  unsigned char *sbuf = alloc_bytes(blk), *rbuf = alloc_bytes(n), *want = alloc_bytes(n);
  blocks_t bl = blocks_new(e->size);
  int i;
  begin("MPI_Allgather", -1, inplace);
  fill(e->t, sbuf, e->c, e->rank, -1);
  for (i = 0; i < e->size; ++i) {
    fill(e->t, want + blk * (size_t)i, e->c, i, -1);
    blocks_add(&bl, blk * (size_t)i, blk, i, e->t);
  }
  if (inplace) {
    memcpy(rbuf + blk * (size_t)e->rank, sbuf, blk);
    MPI_OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, e->c, e->dt, e->comm));
  } else {
    MPI_OK(MPI_Allgather(sbuf, e->c, e->dt, rbuf, e->c, e->dt, e->comm));
  }
  verify("receive buffer", rbuf, want, n + TAIL, &bl, "from rank");
  blocks_free(&bl);
  free(sbuf);
  free(rbuf);
  free(want);
}

static void t_allgatherv(const env_t *e, int inplace) {
  int *cnt = (int *)malloc(sizeof(int) * (size_t)e->size);
  int *displ = (int *)malloc(sizeof(int) * (size_t)e->size);
  int i, total;
  size_t n, mine;
  unsigned char *sbuf, *rbuf, *want;
  blocks_t bl = blocks_new(e->size);
  CHECK(cnt && displ, "out of memory");
  begin("MPI_Allgatherv", -1, inplace);
  for (i = 0; i < e->size; ++i) cnt[i] = vcount(e->c, i + 1);
  total = layout(cnt, e->size, inplace, displ);
  n = (size_t)total * e->es;
  mine = (size_t)cnt[e->rank] * e->es;
  sbuf = alloc_bytes(mine);
  rbuf = alloc_bytes(n);
  want = alloc_bytes(n);
  fill(e->t, sbuf, cnt[e->rank], e->rank, -1);
  for (i = 0; i < e->size; ++i) {
    fill(e->t, want + (size_t)displ[i] * e->es, cnt[i], i, -1);
    blocks_add(&bl, (size_t)displ[i] * e->es, (size_t)cnt[i] * e->es, i, e->t);
  }
  if (inplace) {
    memcpy(rbuf + (size_t)displ[e->rank] * e->es, sbuf, mine);
    MPI_OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, cnt, displ, e->dt, e->comm));
  } else {
    MPI_OK(MPI_Allgatherv(sbuf, cnt[e->rank], e->dt, rbuf, cnt, displ, e->dt, e->comm));
  }
  verify("receive buffer", rbuf, want, n + TAIL, &bl, "from rank");
  blocks_free(&bl);
  free(sbuf);
  free(rbuf);
  free(want);
  free(cnt);
  free(displ);
}

static void t_alltoall(const env_t *e, int inplace) {
  const size_t blk = (size_t)e->c * e->es, n = blk * (size_t)e->size;
  unsigned char *sbuf = alloc_bytes(n), *rbuf = alloc_bytes(n), *want = alloc_bytes(n);
  blocks_t bl = blocks_new(e->size);
  int i;
  begin("MPI_Alltoall", -1, inplace);
  for (i = 0; i < e->size; ++i) {
    fill(e->t, sbuf + blk * (size_t)i, e->c, e->rank, i);
    fill(e->t, want + blk * (size_t)i, e->c, i, e->rank);
    blocks_add(&bl, blk * (size_t)i, blk, i, e->t);
  }
  if (inplace) {
    memcpy(rbuf, sbuf, n);
    MPI_OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, e->c, e->dt, e->comm));
  } else {
    MPI_OK(MPI_Alltoall(sbuf, e->c, e->dt, rbuf, e->c, e->dt, e->comm));
  }
  verify("receive buffer", rbuf, want, n + TAIL, &bl, "from rank");
  blocks_free(&bl);
  free(sbuf);
  free(rbuf);
  free(want);
}

static void t_alltoallv(const env_t *e, int inplace) {
  const int n = e->size, me = e->rank;
  int *scnt = (int *)malloc(sizeof(int) * (size_t)n), *sdsp = (int *)malloc(sizeof(int) * (size_t)n);
  int *rcnt = (int *)malloc(sizeof(int) * (size_t)n), *rdsp = (int *)malloc(sizeof(int) * (size_t)n);
  int i, stotal, rtotal;
  unsigned char *sbuf, *rbuf, *want;
  blocks_t bl = blocks_new(n);
  CHECK(scnt && sdsp && rcnt && rdsp, "out of memory");
  begin("MPI_Alltoallv", -1, inplace);
  for (i = 0; i < n; ++i) {
    scnt[i] = inplace ? a2s(e->c, me, i) : a2c(e->c, me, i);
    rcnt[i] = inplace ? a2s(e->c, i, me) : a2c(e->c, i, me);
  }
  stotal = layout(scnt, n, 1, sdsp);
  rtotal = layout(rcnt, n, 0, rdsp);
  sbuf = alloc_bytes((size_t)stotal * e->es);
  rbuf = alloc_bytes((size_t)rtotal * e->es);
  want = alloc_bytes((size_t)rtotal * e->es);
  for (i = 0; i < n; ++i) {
    fill(e->t, sbuf + (size_t)sdsp[i] * e->es, scnt[i], me, i);
    fill(e->t, want + (size_t)rdsp[i] * e->es, rcnt[i], i, me);
    blocks_add(&bl, (size_t)rdsp[i] * e->es, (size_t)rcnt[i] * e->es, i, e->t);
  }
  if (inplace) {
    /* What goes to rank i sits where rank i's data will land. */
    for (i = 0; i < n; ++i) fill(e->t, rbuf + (size_t)rdsp[i] * e->es, rcnt[i], me, i);
    MPI_OK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, rbuf, rcnt, rdsp, e->dt,
                         e->comm));
  } else {
    MPI_OK(MPI_Alltoallv(sbuf, scnt, sdsp, e->dt, rbuf, rcnt, rdsp, e->dt, e->comm));
  }
  verify("receive buffer", rbuf, want, (size_t)rtotal * e->es + TAIL, &bl, "from rank");
  blocks_free(&bl);
  free(sbuf);
  free(rbuf);
  free(want);
  free(scnt);
  free(sdsp);
  free(rcnt);
  free(rdsp);
}

/* Alltoallw: the block from i to j has type types[(i + j + t) % 3] and
   a2c(c, i, j) elements; displacements are in bytes, 8-aligned, with gaps. */
static void t_alltoallw(const env_t *e) {
  const int n = e->size, me = e->rank;
  int *scnt = (int *)malloc(sizeof(int) * (size_t)n), *sdsp = (int *)malloc(sizeof(int) * (size_t)n);
  int *rcnt = (int *)malloc(sizeof(int) * (size_t)n), *rdsp = (int *)malloc(sizeof(int) * (size_t)n);
  int *st = (int *)malloc(sizeof(int) * (size_t)n), *rt = (int *)malloc(sizeof(int) * (size_t)n);
  MPI_Datatype *sdt = (MPI_Datatype *)malloc(sizeof(MPI_Datatype) * (size_t)n);
  MPI_Datatype *rdt = (MPI_Datatype *)malloc(sizeof(MPI_Datatype) * (size_t)n);
  int i;
  /* Open MPI 4.1's coll/self (every one-member communicator) multiplies
     the byte displacements of MPI_Alltoallw by the type extent, so it
     reads and writes the wrong place (heap corruption with a nonzero
     displacement). Only there, the single block starts at offset 0. */
  const int zero_displ = n == 1 && is_open_mpi;
  size_t spos = zero_displ ? 0 : 8, rpos = zero_displ ? 0 : 16;
  unsigned char *sbuf, *rbuf, *want;
  blocks_t bl = blocks_new(n);
  CHECK(scnt && sdsp && rcnt && rdsp && st && rt && sdt && rdt, "out of memory");
  begin("MPI_Alltoallw", -1, 0);
  for (i = n - 1; i >= 0; --i) { /* send blocks in reverse order */
    st[i] = (me + i + e->t) % NTYPES;
    sdt[i] = types[st[i]].dt;
    scnt[i] = a2c(e->c, me, i);
    sdsp[i] = (int)spos;
    spos += ((size_t)scnt[i] * types[st[i]].size + 7) / 8 * 8 + 8;
  }
  for (i = 0; i < n; ++i) {
    rt[i] = (i + me + e->t) % NTYPES;
    rdt[i] = types[rt[i]].dt;
    rcnt[i] = a2c(e->c, i, me);
    rdsp[i] = (int)rpos;
    rpos += ((size_t)rcnt[i] * types[rt[i]].size + 7) / 8 * 8 + 8;
  }
  sbuf = alloc_bytes(spos);
  rbuf = alloc_bytes(rpos);
  want = alloc_bytes(rpos);
  for (i = 0; i < n; ++i) {
    fill(st[i], sbuf + sdsp[i], scnt[i], me, i);
    fill(rt[i], want + rdsp[i], rcnt[i], i, me);
    blocks_add(&bl, (size_t)rdsp[i], (size_t)rcnt[i] * types[rt[i]].size, i, rt[i]);
  }
  MPI_OK(MPI_Alltoallw(sbuf, scnt, sdsp, sdt, rbuf, rcnt, rdsp, rdt, e->comm));
  verify("receive buffer", rbuf, want, rpos + TAIL, &bl, "from rank");
  blocks_free(&bl);
  free(sbuf);
  free(rbuf);
  free(want);
  free(scnt);
  free(sdsp);
  free(rcnt);
  free(rdsp);
  free(st);
  free(rt);
  free(sdt);
  free(rdt);
}

static void run_all(MPI_Comm comm, const char *comm_name) {
  env_t e;
  int t, ci, root, ip;
  e.comm = comm;
  MPI_OK(MPI_Comm_rank(comm, &e.rank));
  MPI_OK(MPI_Comm_size(comm, &e.size));
  cur.comm = comm_name;
  for (t = 0; t < NTYPES; ++t) {
    for (ci = 0; ci < NCOUNTS; ++ci) {
      e.t = t;
      e.c = counts[ci];
      e.es = types[t].size;
      e.dt = types[t].dt;
      cur.type = t;
      cur.count = e.c;
      t_barrier(&e);
      for (root = 0; root < e.size; ++root) {
        t_bcast(&e, root);
        for (ip = 0; ip < 2; ++ip) {
          t_gather(&e, root, ip);
          t_gatherv(&e, root, ip);
          t_scatter(&e, root, ip);
          t_scatterv(&e, root, ip);
        }
      }
      for (ip = 0; ip < 2; ++ip) {
        t_allgather(&e, ip);
        t_allgatherv(&e, ip);
        t_alltoall(&e, ip);
        t_alltoallv(&e, ip);
      }
      t_alltoallw(&e);
    }
  }
}

int main(int argc, char **argv) {
  int rank, size;
  prog_name = "prog_coll_basic";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_OK(MPI_Get_library_version(lib, &len));
    is_open_mpi = strstr(lib, "Open MPI") != NULL;
  }
  run_all(MPI_COMM_WORLD, "MPI_COMM_WORLD");
  run_all(MPI_COMM_SELF, "MPI_COMM_SELF");
  MPI_OK(MPI_Finalize());
  if (rank == 0) printf("coll_basic ok (%d ranks, %ld collective calls per rank)\n", size, ncoll);
  return 0;
}
