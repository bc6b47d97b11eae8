/* prog_coll_nonblocking: non-blocking collectives.
 *
 *   prog_coll_nonblocking            parts 1 and 2
 *   prog_coll_nonblocking overlap    parts 1, 2 and 3
 *
 * 1. Many at once. Each round posts, in the same order on every rank,
 *    MPI_Ibarrier, MPI_Ibcast, MPI_Ireduce, MPI_Iallreduce, MPI_Igather,
 *    MPI_Igatherv, MPI_Iscatter, MPI_Iscatterv, MPI_Iallgather,
 *    MPI_Iallgatherv, MPI_Ialltoall, MPI_Ialltoallv, MPI_Ireduce_scatter,
 *    MPI_Ireduce_scatter_block, MPI_Iscan and MPI_Iexscan (16 requests,
 *    separate buffers), then completes them all: MPI_Waitall, or MPI_Wait
 *    in reverse order, or MPI_Waitany, or MPI_Testall polling (by round).
 *    Every result is compared with the serial reference; the root rotates,
 *    counts are 0, 1, 7 and 1000 ints; some rounds use MPI_IN_PLACE
 *    (Iallreduce, Iallgather, Ialltoall, Iscan).
 * 2. Collectives never match point-to-point messages. Every rank posts
 *    MPI_Irecv(MPI_ANY_SOURCE, MPI_ANY_TAG) wildcards, runs blocking and
 *    non-blocking collectives on MPI_COMM_WORLD (the wildcards must still be
 *    pending: MPI_Test gives flag 0), then sends to its right neighbour
 *    messages with tags 0, 1, 2, ... (small and large), runs more
 *    collectives while they are in flight, and checks that the wildcards got
 *    exactly those messages, in order. Then an MPI_Iallreduce stays pending
 *    while the ranks exchange MPI_Sendrecv messages with the same tags.
 * 3. Overlap ("overlap" argument). Post MPI_Iallreduce (64 ints, then 64 Ki
 *    ints) and compute without any MPI call: a busy loop on the wall clock
 *    (clock_gettime) that reads the result buffer through a volatile
 *    pointer until it holds the expected values, for at most 2 s. Once the
 *    values are there (plus a 10 ms grace, still without MPI calls, for the
 *    runtime to mark the request complete after writing the data), a single
 *    MPI_Test must return flag = 1. If the values never appear, the runtime
 *    does not progress collectives on its own and the check fails. (Reading
 *    a pending receive buffer is outside what MPI promises; it is done here
 *    on purpose, read-only, and the values count only after MPI_Test.) Open MPI
 *    does not pass this part (it progresses only inside MPI calls), which
 *    is why it is selected by the argument.
 *
 * Rank 0 prints "coll_nonblocking ok (...)". */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "prog_common.h"

static long ncoll;
static int rank, size;

static uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
/* Element k from src for dst in round q (dst -1: for everyone). */
static int val(int q, int src, int dst, int k) {
  return (int)(mix(((uint32_t)q * 0x9e3779b1u) ^ mix((uint32_t)src * 0x85ebca77u + (uint32_t)(dst + 1)) ^
                   ((uint32_t)k * 0xc2b2ae3du)) % 2001u) - 1000;
}
static int vcount(int c, int i) { return ((i * 3 + 1) % 5) * c / 2; }
static int a2c(int c, int i, int j) { return ((i * 3 + j * 2 + 1) % 5) * c / 2; }

static int *ints(size_t n) {
  int *p = (int *)malloc(sizeof(int) * (n + 1));
  size_t i;
  CHECK(p != NULL, "out of memory");
  for (i = 0; i <= n; ++i) p[i] = -7777777; /* no result is ever this */
  return p;
}

enum {
  R_BARRIER, R_BCAST, R_REDUCE, R_ALLREDUCE, R_GATHER, R_GATHERV, R_SCATTER, R_SCATTERV,
  R_ALLGATHER, R_ALLGATHERV, R_ALLTOALL, R_ALLTOALLV, R_RS, R_RSB, R_SCAN, R_EXSCAN, NREQ
};
static const char *rname[NREQ] = {
    "MPI_Ibarrier",   "MPI_Ibcast",      "MPI_Ireduce",    "MPI_Iallreduce",
    "MPI_Igather",    "MPI_Igatherv",    "MPI_Iscatter",   "MPI_Iscatterv",
    "MPI_Iallgather", "MPI_Iallgatherv", "MPI_Ialltoall",  "MPI_Ialltoallv",
    "MPI_Ireduce_scatter", "MPI_Ireduce_scatter_block", "MPI_Iscan", "MPI_Iexscan"};

static struct {
  int q, c, root, inplace;
  const char *how;
} cur;

/* A check on collective `coll` of the current round; fmt takes one or more
   arguments. */
#define EXPECT(coll, cond, fmt, ...)                                                              \
  CHECK(cond, "%s (round %d, count %d, root %d%s, completed by %s): " fmt, rname[coll], cur.q,   \
        cur.c, cur.root, cur.inplace ? ", some MPI_IN_PLACE" : "", cur.how, __VA_ARGS__)

/* Sum over ranks lo..hi-1 of val(q, r, -1, k). */
static int ssum(int lo, int hi, int k) {
  int r, s = 0;
  for (r = lo; r < hi; ++r) s += val(cur.q, r, -1, k);
  return s;
}

static void round_all(int q) {
  static const int counts[] = {1, 7, 1000, 0};
  const int c = counts[q % 4], root = (q * 3 + 1) % size, ip = q % 2, me = rank, n = size;
  MPI_Request req[NREQ];
  int i, k, r, done;
  /* buffers */
  int *bc = ints((size_t)c), *rd_s = ints((size_t)c), *rd_r = ints((size_t)c);
  int *ar_s = ints((size_t)c), *ar_r = ints((size_t)c);
  int *g_s = ints((size_t)c), *g_r = ints((size_t)c * n);
  int *vc = (int *)malloc(sizeof(int) * n), *vd = (int *)malloc(sizeof(int) * n);
  int *gv_s, *gv_r, *sc_s = ints((size_t)c * n), *sc_r = ints((size_t)c), *scv_s, *scv_r;
  int *ag_s = ints((size_t)c), *ag_r = ints((size_t)c * n), *agv_s, *agv_r;
  int *aa_s = ints((size_t)c * n), *aa_r = ints((size_t)c * n);
  int *sc2 = (int *)malloc(sizeof(int) * n), *sd2 = (int *)malloc(sizeof(int) * n);
  int *rc2 = (int *)malloc(sizeof(int) * n), *rd2 = (int *)malloc(sizeof(int) * n);
  int *aav_s, *aav_r, *rs_s, *rs_r, *rsb_s = ints((size_t)c * n), *rsb_r = ints((size_t)c);
  int *scan_s = ints((size_t)c), *scan_r = ints((size_t)c), *ex_s = ints((size_t)c), *ex_r = ints((size_t)c);
  int vtotal = 0, stot = 0, rtot = 0, rstot = 0, rsbase = 0;
  CHECK(vc && vd && sc2 && sd2 && rc2 && rd2, "out of memory");
  cur.q = q;
  cur.c = c;
  cur.root = root;
  cur.inplace = ip;
  for (i = 0; i < n; ++i) { /* v layout with a gap of 2 before each block */
    vc[i] = vcount(c, i);
    vd[i] = vtotal + 2;
    vtotal += vc[i] + 2;
  }
  for (i = 0; i < n; ++i) {
    sc2[i] = a2c(c, me, i);
    sd2[i] = stot + 1;
    stot += sc2[i] + 1;
    rc2[i] = a2c(c, i, me);
    rd2[i] = rtot + 3;
    rtot += rc2[i] + 3;
  }
  for (i = 0; i < n; ++i) {
    if (i < me) rsbase += vc[i];
    rstot += vc[i];
  }
  gv_s = ints((size_t)vc[me]);
  gv_r = ints((size_t)vtotal);
  scv_s = ints((size_t)vtotal);
  scv_r = ints((size_t)vc[me]);
  agv_s = ints((size_t)vc[me]);
  agv_r = ints((size_t)vtotal);
  aav_s = ints((size_t)stot);
  aav_r = ints((size_t)rtot);
  rs_s = ints((size_t)rstot);
  rs_r = ints((size_t)rstot);

  /* inputs */
  for (k = 0; k < c; ++k) {
    if (me == root) bc[k] = val(q, root, -1, k);
    rd_s[k] = ar_s[k] = scan_s[k] = ex_s[k] = val(q, me, -1, k);
    g_s[k] = val(q, me, root, k);
    ag_s[k] = val(q, me, -1, k);
  }
  if (ip) memcpy(ar_r, ar_s, sizeof(int) * (size_t)c);
  if (ip) memcpy(scan_r, scan_s, sizeof(int) * (size_t)c);
  for (k = 0; k < vc[me]; ++k) gv_s[k] = agv_s[k] = val(q, me, root, k);
  for (r = 0; r < n; ++r) {
    for (k = 0; k < c; ++k) {
      sc_s[r * c + k] = val(q, root, r, k);
      aa_s[r * c + k] = val(q, me, r, k);
      rsb_s[r * c + k] = val(q, me, -1, r * c + k);
    }
    for (k = 0; k < vc[r]; ++k) scv_s[vd[r] + k] = val(q, root, r, k);
    for (k = 0; k < sc2[r]; ++k) aav_s[sd2[r] + k] = val(q, me, r, k);
  }
  if (ip) memcpy(ag_r + (size_t)me * c, ag_s, sizeof(int) * (size_t)c);
  if (ip) memcpy(aa_r, aa_s, sizeof(int) * (size_t)c * n);
  for (k = 0; k < rstot; ++k) rs_s[k] = val(q, me, -1, k);

  /* post everything */
  MPI_OK(MPI_Ibarrier(MPI_COMM_WORLD, &req[R_BARRIER]));
  MPI_OK(MPI_Ibcast(bc, c, MPI_INT, root, MPI_COMM_WORLD, &req[R_BCAST]));
  MPI_OK(MPI_Ireduce(rd_s, me == root ? rd_r : NULL, c, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD,
                     &req[R_REDUCE]));
  MPI_OK(MPI_Iallreduce(ip ? MPI_IN_PLACE : ar_s, ar_r, c, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                        &req[R_ALLREDUCE]));
  MPI_OK(MPI_Igather(g_s, c, MPI_INT, me == root ? g_r : NULL, c, MPI_INT, root, MPI_COMM_WORLD,
                     &req[R_GATHER]));
  MPI_OK(MPI_Igatherv(gv_s, vc[me], MPI_INT, me == root ? gv_r : NULL, vc, vd, MPI_INT, root,
                      MPI_COMM_WORLD, &req[R_GATHERV]));
  MPI_OK(MPI_Iscatter(me == root ? sc_s : NULL, c, MPI_INT, sc_r, c, MPI_INT, root, MPI_COMM_WORLD,
                      &req[R_SCATTER]));
  MPI_OK(MPI_Iscatterv(me == root ? scv_s : NULL, vc, vd, MPI_INT, scv_r, vc[me], MPI_INT, root,
                       MPI_COMM_WORLD, &req[R_SCATTERV]));
  MPI_OK(MPI_Iallgather(ip ? MPI_IN_PLACE : ag_s, c, MPI_INT, ag_r, c, MPI_INT, MPI_COMM_WORLD,
                        &req[R_ALLGATHER]));
  MPI_OK(MPI_Iallgatherv(agv_s, vc[me], MPI_INT, agv_r, vc, vd, MPI_INT, MPI_COMM_WORLD,
                         &req[R_ALLGATHERV]));
  MPI_OK(MPI_Ialltoall(ip ? MPI_IN_PLACE : aa_s, c, MPI_INT, aa_r, c, MPI_INT, MPI_COMM_WORLD,
                       &req[R_ALLTOALL]));
  MPI_OK(MPI_Ialltoallv(aav_s, sc2, sd2, MPI_INT, aav_r, rc2, rd2, MPI_INT, MPI_COMM_WORLD,
                        &req[R_ALLTOALLV]));
  MPI_OK(MPI_Ireduce_scatter(rs_s, rs_r, vc, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[R_RS]));
  MPI_OK(MPI_Ireduce_scatter_block(rsb_s, rsb_r, c, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[R_RSB]));
  MPI_OK(MPI_Iscan(ip ? MPI_IN_PLACE : scan_s, scan_r, c, MPI_INT, MPI_SUM, MPI_COMM_WORLD,
                   &req[R_SCAN]));
  MPI_OK(MPI_Iexscan(ex_s, ex_r, c, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[R_EXSCAN]));
  ncoll += NREQ;

  /* complete them */
  switch ((q + q / 4) % 4) { /* over 8 rounds, each way meets two counts */
    case 0:
      cur.how = "MPI_Waitall";
      MPI_OK(MPI_Waitall(NREQ, req, MPI_STATUSES_IGNORE));
      break;
    case 1:
      cur.how = "MPI_Wait in reverse order";
      for (i = NREQ - 1; i >= 0; --i) MPI_OK(MPI_Wait(&req[i], MPI_STATUS_IGNORE));
      break;
    case 2:
      cur.how = "MPI_Waitany";
      for (done = 0; done < NREQ; ++done) {
        int idx = -1;
        MPI_OK(MPI_Waitany(NREQ, req, &idx, MPI_STATUS_IGNORE));
        CHECK(idx >= 0 && idx < NREQ, "MPI_Waitany index %d", idx);
      }
      break;
    default:
      cur.how = "MPI_Testall";
      for (done = 0; !done;) MPI_OK(MPI_Testall(NREQ, req, &done, MPI_STATUSES_IGNORE));
      break;
  }
  for (i = 0; i < NREQ; ++i)
    EXPECT(i, req[i] == MPI_REQUEST_NULL, "%s", "request not freed after completion");

  /* check */
  for (k = 0; k < c; ++k) {
    EXPECT(R_BCAST, bc[k] == val(q, root, -1, k), "element %d is %d", k, bc[k]);
    if (me == root) EXPECT(R_REDUCE, rd_r[k] == ssum(0, n, k), "element %d is %d, want %d", k, rd_r[k], ssum(0, n, k));
    EXPECT(R_ALLREDUCE, ar_r[k] == ssum(0, n, k), "element %d is %d, want %d", k, ar_r[k], ssum(0, n, k));
    EXPECT(R_SCAN, scan_r[k] == ssum(0, me + 1, k), "element %d is %d, want %d", k, scan_r[k], ssum(0, me + 1, k));
    if (me > 0) EXPECT(R_EXSCAN, ex_r[k] == ssum(0, me, k), "element %d is %d, want %d", k, ex_r[k], ssum(0, me, k));
    EXPECT(R_SCATTER, sc_r[k] == val(q, root, me, k), "element %d is %d", k, sc_r[k]);
    {
      int want = 0;
      for (r = 0; r < n; ++r) want += val(q, r, -1, me * c + k);
      EXPECT(R_RSB, rsb_r[k] == want, "element %d is %d, want %d", k, rsb_r[k], want);
    }
  }
  EXPECT(R_BCAST, bc[c] == -7777777, "%s", "wrote past the end");
  EXPECT(R_ALLREDUCE, ar_r[c] == -7777777, "%s", "wrote past the end");
  EXPECT(R_SCATTER, sc_r[c] == -7777777, "%s", "wrote past the end");
  EXPECT(R_RSB, rsb_r[c] == -7777777, "%s", "wrote past the end");
  for (r = 0; r < n; ++r) {
    for (k = 0; k < c; ++k) {
      if (me == root)
        EXPECT(R_GATHER, g_r[r * c + k] == val(q, r, root, k), "element %d from rank %d is %d", k, r, g_r[r * c + k]);
      EXPECT(R_ALLGATHER, ag_r[r * c + k] == val(q, r, -1, k), "element %d from rank %d is %d", k, r, ag_r[r * c + k]);
      EXPECT(R_ALLTOALL, aa_r[r * c + k] == val(q, r, me, k), "element %d from rank %d is %d", k, r, aa_r[r * c + k]);
    }
    for (k = 0; k < vc[r]; ++k) {
      if (me == root)
        EXPECT(R_GATHERV, gv_r[vd[r] + k] == val(q, r, root, k), "element %d from rank %d is %d", k, r, gv_r[vd[r] + k]);
      EXPECT(R_ALLGATHERV, agv_r[vd[r] + k] == val(q, r, root, k), "element %d from rank %d is %d", k, r, agv_r[vd[r] + k]);
    }
    for (k = 0; k < rc2[r]; ++k)
      EXPECT(R_ALLTOALLV, aav_r[rd2[r] + k] == val(q, r, me, k), "element %d from rank %d is %d", k, r, aav_r[rd2[r] + k]);
    /* the gaps before each block stay untouched */
    if (me == root) EXPECT(R_GATHERV, gv_r[vd[r] - 1] == -7777777 && gv_r[vd[r] - 2] == -7777777, "gap before block %d written", r);
    EXPECT(R_ALLGATHERV, agv_r[vd[r] - 1] == -7777777 && agv_r[vd[r] - 2] == -7777777, "gap before block %d written", r);
    EXPECT(R_ALLTOALLV, aav_r[rd2[r] - 1] == -7777777 && aav_r[rd2[r] - 3] == -7777777, "gap before block %d written", r);
  }
  for (k = 0; k < vc[me]; ++k) {
    EXPECT(R_SCATTERV, scv_r[k] == val(q, root, me, k), "element %d is %d", k, scv_r[k]);
    {
      const int want = ssum(0, n, rsbase + k);
      EXPECT(R_RS, rs_r[k] == want, "element %d is %d, want %d", k, rs_r[k], want);
    }
  }
  EXPECT(R_SCATTERV, scv_r[vc[me]] == -7777777, "%s", "wrote past the end");
  EXPECT(R_RS, rs_r[vc[me]] == -7777777, "%s", "wrote past the end");
  if (me == root) EXPECT(R_GATHER, g_r[c * n] == -7777777, "%s", "wrote past the end");
  EXPECT(R_ALLGATHER, ag_r[c * n] == -7777777, "%s", "wrote past the end");
  EXPECT(R_ALLTOALL, aa_r[c * n] == -7777777, "%s", "wrote past the end");
  EXPECT(R_ALLGATHERV, agv_r[vtotal] == -7777777, "%s", "wrote past the end");
  EXPECT(R_ALLTOALLV, aav_r[rtot] == -7777777, "%s", "wrote past the end");

  free(bc); free(rd_s); free(rd_r); free(ar_s); free(ar_r); free(g_s); free(g_r);
  free(vc); free(vd); free(gv_s); free(gv_r); free(sc_s); free(sc_r); free(scv_s); free(scv_r);
  free(ag_s); free(ag_r); free(agv_s); free(agv_r); free(aa_s); free(aa_r);
  free(sc2); free(sd2); free(rc2); free(rd2); free(aav_s); free(aav_r);
  free(rs_s); free(rs_r); free(rsb_s); free(rsb_r); free(scan_s); free(scan_r); free(ex_s); free(ex_r);
}

/* ---------------------------------------------------------------- part 2 */
#define NWILD 4
#define BIG 4000
static int msg_len(int t) { return t % 2 ? BIG : 1 + t; }

static void collectives_between(int q) {
  int x = rank + q, sum = -1, i, flag = 0;
  int *a = ints((size_t)size), *b = ints((size_t)size);
  MPI_Request rq;
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  MPI_OK(MPI_Bcast(&x, 1, MPI_INT, size - 1, MPI_COMM_WORLD));
  CHECK(x == size - 1 + q, "MPI_Bcast between point-to-point messages gave %d", x);
  x = rank;
  MPI_OK(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(sum == size * (size - 1) / 2, "MPI_Allreduce between point-to-point messages gave %d", sum);
  for (i = 0; i < size; ++i) a[i] = rank * 1000 + i;
  MPI_OK(MPI_Alltoall(a, 1, MPI_INT, b, 1, MPI_INT, MPI_COMM_WORLD));
  for (i = 0; i < size; ++i)
    CHECK(b[i] == i * 1000 + rank, "MPI_Alltoall between point-to-point messages: from %d got %d", i, b[i]);
  MPI_OK(MPI_Ibarrier(MPI_COMM_WORLD, &rq));
  MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  MPI_OK(MPI_Iallreduce(&x, &sum, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &rq));
  while (!flag) MPI_OK(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
  CHECK(sum == size - 1, "MPI_Iallreduce between point-to-point messages gave %d", sum);
  ncoll += 6;
  free(a);
  free(b);
}

static void part_p2p(void) {
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  int *in[NWILD], *out[NWILD];
  MPI_Request rr[NWILD], sr[NWILD];
  MPI_Status st[NWILD];
  int t, k, flag;
  for (t = 0; t < NWILD; ++t) {
    in[t] = ints(BIG);
    out[t] = ints(BIG);
    for (k = 0; k < msg_len(t); ++k) out[t][k] = val(99, rank, next, t * BIG + k);
    MPI_OK(MPI_Irecv(in[t], BIG, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &rr[t]));
  }
  collectives_between(0);
  /* Nobody sent a point-to-point message yet: the wildcards must be pending. */
  for (t = 0; t < NWILD; ++t) {
    MPI_OK(MPI_Test(&rr[t], &flag, &st[t]));
    CHECK(!flag, "a wildcard MPI_Irecv (#%d) completed during collectives, before any "
                 "point-to-point send (source %d, tag %d): a collective matched it",
          t, st[t].MPI_SOURCE, st[t].MPI_TAG);
  }
  /* Everyone has looked before anyone sends. */
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  ++ncoll;
  for (t = 0; t < NWILD; ++t)
    MPI_OK(MPI_Isend(out[t], msg_len(t), MPI_INT, next, t, MPI_COMM_WORLD, &sr[t]));
  collectives_between(1); /* while the messages are in flight */
  MPI_OK(MPI_Waitall(NWILD, rr, st));
  MPI_OK(MPI_Waitall(NWILD, sr, MPI_STATUSES_IGNORE));
  for (t = 0; t < NWILD; ++t) {
    int count = -1;
    CHECK(st[t].MPI_SOURCE == prev && st[t].MPI_TAG == t,
          "wildcard receive #%d got source %d tag %d, want %d/%d", t, st[t].MPI_SOURCE,
          st[t].MPI_TAG, prev, t);
    MPI_OK(MPI_Get_count(&st[t], MPI_INT, &count));
    CHECK(count == msg_len(t), "wildcard receive #%d: count %d, want %d", t, count, msg_len(t));
    for (k = 0; k < count; ++k)
      CHECK(in[t][k] == val(99, prev, rank, t * BIG + k), "wildcard receive #%d: int %d is %d", t, k,
            in[t][k]);
  }
  /* A pending Iallreduce while point-to-point messages with the same tags go by. */
  {
    int x[8], s[8], i;
    MPI_Request rq;
    for (i = 0; i < 8; ++i) x[i] = rank + i;
    MPI_OK(MPI_Iallreduce(x, s, 8, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
    ++ncoll;
    for (t = 0; t < NWILD; ++t) {
      MPI_Status s1;
      MPI_OK(MPI_Sendrecv(out[t], msg_len(t), MPI_INT, next, t, in[t], BIG, MPI_INT, MPI_ANY_SOURCE,
                          MPI_ANY_TAG, MPI_COMM_WORLD, &s1));
      CHECK(s1.MPI_SOURCE == prev && s1.MPI_TAG == t, "MPI_Sendrecv #%d next to an MPI_Iallreduce: got source %d tag %d",
            t, s1.MPI_SOURCE, s1.MPI_TAG);
      CHECK(in[t][0] == val(99, prev, rank, t * BIG), "MPI_Sendrecv #%d: wrong payload", t);
    }
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    for (i = 0; i < 8; ++i)
      CHECK(s[i] == size * (size - 1) / 2 + size * i, "MPI_Iallreduce next to point-to-point: element %d is %d", i, s[i]);
  }
  for (t = 0; t < NWILD; ++t) {
    free(in[t]);
    free(out[t]);
  }
}

/* ---------------------------------------------------------------- part 3 */
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Returns the microseconds it took for the result to appear. */
static double overlap(int n) {
  int *x = ints((size_t)n), *y = ints((size_t)n), *want = ints((size_t)n);
  volatile int *vy = y;
  MPI_Request rq;
  double t0, t, seen = -1;
  int i, r, flag = 0;
  for (i = 0; i < n; ++i) {
    x[i] = val(7, rank, -1, i);
    for (want[i] = 0, r = 0; r < size; ++r) want[i] += val(7, r, -1, i);
  }
  MPI_OK(MPI_Iallreduce(x, y, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq));
  ++ncoll;
  /* No MPI call from here until the MPI_Test below. */
  t0 = now();
  for (t = t0; t - t0 < 2.0; t = now()) {
    for (i = 0; i < n && vy[i] == want[i]; ++i) {
    }
    if (i == n) {
      seen = t - t0;
      break;
    }
  }
  if (seen >= 0) {
    const double t1 = now();
    while (now() - t1 < 0.010) {
    }
  }
  MPI_OK(MPI_Test(&rq, &flag, MPI_STATUS_IGNORE));
  CHECK(seen >= 0,
        "overlap: the result of MPI_Iallreduce (%d ints) did not appear within 2 s while the rank "
        "made no MPI call: the runtime does not progress collectives on its own (MPI_Test then "
        "gave flag %d)",
        n, flag);
  CHECK(flag == 1,
        "overlap: the result of MPI_Iallreduce (%d ints) appeared after %.0f us without MPI calls, "
        "but the first MPI_Test gave flag 0",
        n, seen * 1e6);
  if (!flag) MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
  for (i = 0; i < n; ++i) CHECK(y[i] == want[i], "overlap: element %d is %d, want %d", i, y[i], want[i]);
  CHECK(y[n] == -7777777, "overlap: MPI_Iallreduce wrote past the end");
  free(x);
  free(y);
  free(want);
  return seen * 1e6;
}

int main(int argc, char **argv) {
  int q, i, do_overlap = 0;
  double us_small = -1, us_large = -1;
  prog_name = "prog_coll_nonblocking";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  for (i = 1; i < argc; ++i)
    if (strcmp(argv[i], "overlap") == 0) do_overlap = 1;

  for (q = 0; q < 8; ++q) round_all(q);
  part_p2p();
  if (do_overlap) {
    us_small = overlap(64);
    us_large = overlap(64 * 1024);
  }

  MPI_OK(MPI_Finalize());
  if (rank == 0) {
    if (do_overlap)
      printf("coll_nonblocking ok (%d ranks, %ld collective calls per rank, overlap: results "
             "appeared after %.0f us and %.0f us without MPI calls)\n",
             size, ncoll, us_small, us_large);
    else
      printf("coll_nonblocking ok (%d ranks, %ld collective calls per rank)\n", size, ncoll);
  }
  return 0;
}
