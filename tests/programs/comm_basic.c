/* prog_comm_basic: communicators made by MPI_Comm_dup, _split, _split_type,
 * _create and _create_group, used for point-to-point and collectives
 * (and MPI_Comm_idup, _idup_with_info, freed by MPI_Comm_disconnect).
 *
 * Communicators: a dup of MPI_COMM_WORLD; a split by parity with reversed
 * keys (rank order = descending world rank); a dup of that split (so the
 * two parity classes create communicators at the same time); a split_type
 * MPI_COMM_TYPE_SHARED (the ranks of one node manager under bcs: BCS_NODE,
 * the host otherwise); a MPI_Comm_create from the group of the even world
 * ranks (odd ranks get MPI_COMM_NULL); a MPI_Comm_create_group over the odd
 * world ranks; a split with MPI_UNDEFINED for rank 0.
 *
 * On each: the member list (allgather of world ranks, MPI_Group_translate_
 * ranks, MPI_Comm_compare against WORLD); a ring exchange on the new
 * communicator and the same ring on MPI_COMM_WORLD (same processes, same
 * tag), ANY_SOURCE receives posted on WORLD first and sends posted on the
 * new communicator first, so that a runtime that mixed contexts would
 * deliver the wrong payload (status.MPI_SOURCE must be the communicator
 * rank on the new communicator, the world rank on WORLD); MPI_Probe on
 * the new communicator; MPI_Bcast from every root (small and large),
 * MPI_Allreduce, MPI_Gather to every root, MPI_Alltoall, MPI_Barrier; all
 * data verified.
 *
 * Attributes: keyvals with MPI_COMM_DUP_FN, MPI_COMM_NULL_COPY_FN and a
 * counting copy callback, a counting delete callback; MPI_Comm_dup copies
 * what it must, MPI_Comm_free deletes; names and error handlers (the dup
 * inherits MPI_ERRORS_RETURN and reports an error instead of aborting).
 * Finally 16 dup/use/free rounds. Rank 0 prints "comm_basic ok (...)". */
#include <stdint.h>
#include <string.h>

#include "prog_common.h"

#define BIG 1000

static int wrank, wsize;
static long nchecked; /* communicators exercised by this rank */

/* ---------------------------------------------------------------- exercise */

/* Everything on communicator `c` (NULL is skipped); `expect` holds its
   members' world ranks in communicator rank order, `n` of them. Each call
   uses its own tag (several run at once on disjoint communicators, and a
   fast member may already be in the next one). */
static void exercise(MPI_Comm c, const char *what, const int *expect, int n) {
  static int phase;
  const int TAG = 7 + phase++;
  int rank = -1, size = -1, i, r, cmp = -1, flag = 0;
  int *wr, *buf, *all, *sb, *rb;
  MPI_Group wg, cg;
  MPI_Request req[4];
  MPI_Status st[4];
  int in_c = -1, in_w = -1, out_c, out_w, left, right;
  if (c == MPI_COMM_NULL) return;
  ++nchecked;
  MPI_OK(MPI_Comm_rank(c, &rank));
  MPI_OK(MPI_Comm_size(c, &size));
  CHECK(size == n, "%s: size %d, want %d", what, size, n);
  CHECK(rank >= 0 && rank < n && expect[rank] == wrank, "%s: rank %d is not world rank %d", what,
        rank, wrank);

  /* Members: allgather of world ranks and the group translation. */
  wr = malloc(sizeof(int) * (size_t)n);
  all = malloc(sizeof(int) * (size_t)n);
  buf = malloc(sizeof(int) * BIG);
  sb = malloc(sizeof(int) * (size_t)n);
  rb = malloc(sizeof(int) * (size_t)n);
  CHECK(wr && all && buf && sb && rb, "out of memory");
  MPI_OK(MPI_Allgather(&wrank, 1, MPI_INT, wr, 1, MPI_INT, c));
  for (i = 0; i < n; ++i) CHECK(wr[i] == expect[i], "%s: member %d is %d, want %d", what, i, wr[i], expect[i]);
  MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
  MPI_OK(MPI_Comm_group(c, &cg));
  for (i = 0; i < n; ++i) all[i] = i;
  MPI_OK(MPI_Group_translate_ranks(cg, n, all, wg, sb));
  for (i = 0; i < n; ++i) CHECK(sb[i] == expect[i], "%s: translate %d -> %d, want %d", what, i, sb[i], expect[i]);
  MPI_OK(MPI_Group_free(&cg));
  MPI_OK(MPI_Group_free(&wg));
  MPI_OK(MPI_Comm_compare(c, MPI_COMM_WORLD, &cmp));
  {
    int same = n == wsize, set = n == wsize;
    for (i = 0; i < n; ++i) same = same && expect[i] == i;
    const int want = c == MPI_COMM_WORLD ? MPI_IDENT
                     : same          ? MPI_CONGRUENT
                     : set           ? MPI_SIMILAR
                                     : MPI_UNEQUAL;
    CHECK(cmp == want, "%s: compare with WORLD %d, want %d", what, cmp, want);
  }
  MPI_OK(MPI_Comm_test_inter(c, &flag));
  CHECK(flag == 0, "%s: an intercommunicator?", what);

  /* The same ring on c and on WORLD, same tag, interleaved. */
  left = (rank + n - 1) % n;
  right = (rank + 1) % n;
  out_c = 100000 + wrank;
  out_w = 200000 + wrank;
  if (c != MPI_COMM_WORLD) {
    MPI_OK(MPI_Irecv(&in_w, 1, MPI_INT, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, &req[0]));
  } else { /* WORLD itself: no twin */
    in_w = 200000 + expect[left];
    req[0] = MPI_REQUEST_NULL;
    req[3] = MPI_REQUEST_NULL;
  }
  MPI_OK(MPI_Irecv(&in_c, 1, MPI_INT, MPI_ANY_SOURCE, TAG, c, &req[1]));
  MPI_OK(MPI_Isend(&out_c, 1, MPI_INT, right, TAG, c, &req[2]));
  if (c != MPI_COMM_WORLD)
    MPI_OK(MPI_Isend(&out_w, 1, MPI_INT, expect[right], TAG, MPI_COMM_WORLD, &req[3]));
  MPI_OK(MPI_Waitall(4, req, st));
  if (c == MPI_COMM_WORLD) st[0].MPI_SOURCE = expect[left];
  CHECK(in_w == 200000 + expect[left], "%s: WORLD ring got %d, want %d", what, in_w,
        200000 + expect[left]);
  CHECK(st[0].MPI_SOURCE == expect[left], "%s: WORLD ring source %d, want %d", what,
        st[0].MPI_SOURCE, expect[left]);
  CHECK(in_c == 100000 + expect[left], "%s: ring got %d, want %d", what, in_c, 100000 + expect[left]);
  CHECK(st[1].MPI_SOURCE == left && st[1].MPI_TAG == TAG, "%s: ring source %d tag %d, want %d", what,
        st[1].MPI_SOURCE, st[1].MPI_TAG, left);

  /* Probe, then receive, a large message from the left (tag reused). */
  for (i = 0; i < BIG; ++i) buf[i] = wrank * BIG + i;
  MPI_OK(MPI_Isend(buf, BIG, MPI_INT, right, TAG, c, &req[0]));
  MPI_OK(MPI_Probe(MPI_ANY_SOURCE, TAG, c, &st[1]));
  CHECK(st[1].MPI_SOURCE == left, "%s: probe source %d, want %d", what, st[1].MPI_SOURCE, left);
  MPI_OK(MPI_Get_count(&st[1], MPI_INT, &r));
  CHECK(r == BIG, "%s: probe count %d", what, r);
  {
    int *in = malloc(sizeof(int) * BIG);
    CHECK(in != NULL, "out of memory");
    MPI_OK(MPI_Recv(in, BIG, MPI_INT, left, TAG, c, &st[1]));
    for (i = 0; i < BIG; ++i)
      CHECK(in[i] == expect[left] * BIG + i, "%s: big message [%d] = %d", what, i, in[i]);
    free(in);
  }
  MPI_OK(MPI_Wait(&req[0], MPI_STATUS_IGNORE));

  /* Bcast from every root: one int (inline) and BIG ints. */
  for (r = 0; r < n; ++r) {
    int v = rank == r ? 31 * r + 5 : -1;
    MPI_OK(MPI_Bcast(&v, 1, MPI_INT, r, c));
    CHECK(v == 31 * r + 5, "%s: bcast root %d got %d", what, r, v);
    for (i = 0; i < BIG; ++i) buf[i] = rank == r ? r * 7 + i : -1;
    MPI_OK(MPI_Bcast(buf, BIG, MPI_INT, r, c));
    for (i = 0; i < BIG; ++i) CHECK(buf[i] == r * 7 + i, "%s: bcast root %d [%d] = %d", what, r, i, buf[i]);
  }

  /* Allreduce: sum and max of the members' world ranks. */
  {
    long sum = 0, want = 0;
    int mx = -1, wmx = -1;
    for (i = 0; i < n; ++i) {
      want += expect[i];
      if (expect[i] > wmx) wmx = expect[i];
    }
    long mine = wrank;
    MPI_OK(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, c));
    MPI_OK(MPI_Allreduce(&wrank, &mx, 1, MPI_INT, MPI_MAX, c));
    CHECK(sum == want && mx == wmx, "%s: allreduce sum %ld max %d, want %ld %d", what, sum, mx, want, wmx);
  }

  /* Gather to every root. */
  for (r = 0; r < n; ++r) {
    int v = wrank * 3 + r;
    for (i = 0; i < n; ++i) all[i] = -1;
    MPI_OK(MPI_Gather(&v, 1, MPI_INT, rank == r ? all : NULL, 1, MPI_INT, r, c));
    if (rank == r)
      for (i = 0; i < n; ++i) CHECK(all[i] == expect[i] * 3 + r, "%s: gather root %d [%d] = %d", what, r, i, all[i]);
  }

  /* Alltoall: block j from i is i*1000 + j (communicator ranks). */
  for (i = 0; i < n; ++i) {
    sb[i] = rank * 1000 + i;
    rb[i] = -1;
  }
  MPI_OK(MPI_Alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, c));
  for (i = 0; i < n; ++i) CHECK(rb[i] == i * 1000 + rank, "%s: alltoall [%d] = %d", what, i, rb[i]);
  MPI_OK(MPI_Barrier(c));
  free(wr);
  free(all);
  free(buf);
  free(sb);
  free(rb);
}

/* ---------------------------------------------------------------- attributes */

static int copies, deletes;

static int count_copy(MPI_Comm old, int kv, void *extra, void *in, void *out, int *flag) {
  (void)old;
  (void)kv;
  CHECK(extra == (void *)&copies, "copy callback: extra_state %p", extra);
  ++copies;
  *(void **)out = (char *)in + 1;
  *flag = 1;
  return MPI_SUCCESS;
}

static int count_delete(MPI_Comm c, int kv, void *val, void *extra) {
  (void)c;
  (void)kv;
  (void)val;
  (void)extra;
  ++deletes;
  return MPI_SUCCESS;
}

static void attributes(void) {
  static char a, b, d;
  int kdup, knull, kcount, flag = 0, len = 0;
  void *v = NULL;
  MPI_Comm base, copy;
  MPI_Errhandler h;
  char name[MPI_MAX_OBJECT_NAME];
  MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &base));
  MPI_OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, count_delete, &kdup, NULL));
  MPI_OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &knull, NULL));
  MPI_OK(MPI_Comm_create_keyval(count_copy, count_delete, &kcount, &copies));
  MPI_OK(MPI_Comm_set_attr(base, kdup, &a));
  MPI_OK(MPI_Comm_set_attr(base, knull, &b));
  MPI_OK(MPI_Comm_set_attr(base, kcount, &d));
  MPI_OK(MPI_Comm_set_name(base, "base"));
  MPI_OK(MPI_Comm_set_errhandler(base, MPI_ERRORS_RETURN));
  MPI_OK(MPI_Comm_dup(base, &copy));
  CHECK(copies == 1, "copy callback ran %d times", copies);
  MPI_OK(MPI_Comm_get_attr(copy, kdup, &v, &flag));
  CHECK(flag && v == &a, "MPI_COMM_DUP_FN: flag %d value %p", flag, v);
  MPI_OK(MPI_Comm_get_attr(copy, knull, &v, &flag));
  CHECK(!flag, "MPI_COMM_NULL_COPY_FN copied the attribute");
  MPI_OK(MPI_Comm_get_attr(copy, kcount, &v, &flag));
  CHECK(flag && v == &d + 1, "copy callback value %p", v);
  MPI_OK(MPI_Comm_get_attr(copy, MPI_TAG_UB, &v, &flag));
  CHECK(flag && *(int *)v >= 32767, "MPI_TAG_UB on a dup");
  MPI_OK(MPI_Comm_get_name(copy, name, &len));
  CHECK(len == 0 && name[0] == '\0', "a dup inherited the name '%s'", name);
  MPI_OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
  CHECK(strcmp(name, "MPI_COMM_WORLD") == 0, "WORLD is named '%s'", name);
  MPI_OK(MPI_Comm_get_errhandler(copy, &h));
  CHECK(h == MPI_ERRORS_RETURN, "the dup did not inherit MPI_ERRORS_RETURN");
  CHECK(MPI_Send(&a, 1, MPI_CHAR, wsize + 5, 0, copy) == MPI_ERR_RANK, "bad rank not reported");
  MPI_OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h));
  CHECK(h == MPI_ERRORS_ARE_FATAL, "WORLD's handler changed");
  MPI_OK(MPI_Comm_delete_attr(base, knull));
  CHECK(deletes == 1, "delete_attr: %d deletes", deletes);
  MPI_OK(MPI_Comm_free(&copy));
  CHECK(copy == MPI_COMM_NULL, "freed handle not MPI_COMM_NULL");
  CHECK(deletes == 3, "free of the dup: %d deletes, want 3", deletes);
  MPI_OK(MPI_Comm_free_keyval(&kdup));
  CHECK(kdup == MPI_KEYVAL_INVALID, "freed keyval not MPI_KEYVAL_INVALID");
  MPI_OK(MPI_Comm_free(&base));  /* still runs kdup's delete callback */
  CHECK(deletes == 5, "free of the base: %d deletes, want 5", deletes);
  MPI_OK(MPI_Comm_free_keyval(&knull));
  MPI_OK(MPI_Comm_free_keyval(&kcount));
}

/* ---------------------------------------------------------------- main */

static void node_name(char *out, size_t cap) {
  const char *e = getenv("BCS_NODE");
  int len = 0;
  char host[MPI_MAX_PROCESSOR_NAME];
  memset(out, 0, cap);
  if (e && *e) {
    snprintf(out, cap, "%s", e);
    return;
  }
  MPI_OK(MPI_Get_processor_name(host, &len));
  snprintf(out, cap, "%.63s", host);
}

int main(int argc, char **argv) {
  MPI_Comm dup, parity, parity_dup, shared, evens, odds, undef;
  MPI_Group wg, eg, og;
  int *expect, *e2, n = 0, i, round, node_ranks = 0;
  char (*names)[64];
  prog_name = "comm_basic";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  expect = malloc(sizeof(int) * (size_t)wsize);
  e2 = malloc(sizeof(int) * (size_t)wsize);
  names = malloc(64 * (size_t)wsize);
  CHECK(expect && e2 && names, "out of memory");

  /* WORLD itself, and a dup. */
  for (i = 0; i < wsize; ++i) expect[i] = i;
  exercise(MPI_COMM_WORLD, "MPI_COMM_WORLD", expect, wsize);
  MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  exercise(dup, "dup(WORLD)", expect, wsize);

  /* MPI_Comm_idup must not block: rank 0 sits in receives from everyone
     else, who post their idup first and only then send. A blocking idup
     deadlocks here (caught by the story's timeout). Two idups in flight at
     once must get different communicators. */
  {
    MPI_Comm idup1 = MPI_COMM_NULL, idup2 = MPI_COMM_NULL;
    MPI_Request ireq[2];
    int token = wrank, got, res = -1;
    if (wrank == 0) {
      for (i = 1; i < wsize; ++i) {
        MPI_OK(MPI_Recv(&got, 1, MPI_INT, i, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(got == i, "idup: rank 0 received %d from %d", got, i);
      }
      MPI_OK(MPI_Comm_idup(MPI_COMM_WORLD, &idup1, &ireq[0]));
      MPI_OK(MPI_Comm_idup(dup, &idup2, &ireq[1]));
    } else {
      MPI_OK(MPI_Comm_idup(MPI_COMM_WORLD, &idup1, &ireq[0]));
      MPI_OK(MPI_Comm_idup(dup, &idup2, &ireq[1]));
      MPI_OK(MPI_Ssend(&token, 1, MPI_INT, 0, 99, MPI_COMM_WORLD));
    }
    MPI_OK(MPI_Waitall(2, ireq, MPI_STATUSES_IGNORE));
    MPI_OK(MPI_Comm_compare(idup1, idup2, &res));
    CHECK(res == MPI_CONGRUENT, "idup: two idups compare %d, want MPI_CONGRUENT", res);
    exercise(idup1, "idup(WORLD)", expect, wsize);
    exercise(idup2, "idup(dup(WORLD))", expect, wsize);
    MPI_OK(MPI_Comm_free(&idup1));
    MPI_OK(MPI_Comm_free(&idup2));
  }

  /* MPI 4.0's MPI_Comm_idup_with_info, and MPI_Comm_disconnect (a
     collective free) of the result; disconnecting WORLD is an error. */
  {
    MPI_Comm withinfo = MPI_COMM_NULL;
    MPI_Request ireq;
    int cls = 0;
    MPI_OK(MPI_Comm_idup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &withinfo, &ireq));
    MPI_OK(MPI_Wait(&ireq, MPI_STATUS_IGNORE));
    exercise(withinfo, "idup_with_info(WORLD)", expect, wsize);
    MPI_OK(MPI_Comm_disconnect(&withinfo));
    CHECK(withinfo == MPI_COMM_NULL, "disconnect left the handle");
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Error_class(MPI_Comm_disconnect(&w), &cls));
    CHECK(cls == MPI_ERR_COMM && w == MPI_COMM_WORLD, "disconnect(WORLD): class %d", cls);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    /* Nobody here was spawned: no parent. */
    MPI_Comm parent = MPI_COMM_WORLD;
    MPI_OK(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL, "MPI_Comm_get_parent gave 0x%x", (unsigned)parent);
  }

  /* Parity, reversed keys: descending world ranks of my parity. */
  MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, -wrank, &parity));
  n = 0;
  for (i = wsize - 1; i >= 0; --i)
    if (i % 2 == wrank % 2) expect[n++] = i;
  exercise(parity, "split(parity)", expect, n);
  MPI_OK(MPI_Comm_dup(parity, &parity_dup));
  exercise(parity_dup, "dup(split(parity))", expect, n);
  for (i = 0; i < wsize; ++i) expect[i] = i;
  exercise(dup, "dup(WORLD) again", expect, wsize);

  /* The ranks of my node (manager). */
  node_name(names[wrank], 64);
  MPI_OK(MPI_Allgather(MPI_IN_PLACE, 64, MPI_CHAR, names, 64, MPI_CHAR, MPI_COMM_WORLD));
  MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wrank, MPI_INFO_NULL, &shared));
  n = 0;
  for (i = 0; i < wsize; ++i)
    if (strcmp(names[i], names[wrank]) == 0) e2[n++] = i;
  exercise(shared, "split_type(SHARED)", e2, n);
  node_ranks = n;

  /* MPI_Comm_create from the even world ranks; create_group of the odd. */
  MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
  {
    int range[1][3];
    range[0][0] = 0;
    range[0][1] = wsize - 1;
    range[0][2] = 2;
    MPI_OK(MPI_Group_range_incl(wg, 1, range, &eg));
  }
  MPI_OK(MPI_Group_difference(wg, eg, &og));
  MPI_OK(MPI_Comm_create(MPI_COMM_WORLD, eg, &evens));
  CHECK((evens == MPI_COMM_NULL) == (wrank % 2 == 1), "create: odd rank got a communicator or even none");
  n = 0;
  for (i = 0; i < wsize; i += 2) expect[n++] = i;
  exercise(evens, "create(evens)", expect, n);
  if (wrank % 2 == 1) {
    MPI_OK(MPI_Comm_create_group(MPI_COMM_WORLD, og, 55, &odds));
    n = 0;
    for (i = 1; i < wsize; i += 2) expect[n++] = i;
    exercise(odds, "create_group(odds)", expect, n);
    /* The even ranks are busy with their own communicator meanwhile. */
  } else {
    MPI_Comm tmp;
    odds = MPI_COMM_NULL;
    n = 0;
    for (i = 0; i < wsize; i += 2) expect[n++] = i;
    MPI_OK(MPI_Comm_dup(evens, &tmp));
    exercise(tmp, "dup(create(evens))", expect, n);
    MPI_OK(MPI_Comm_free(&tmp));
  }

  /* Rank 0 stays out of a split. */
  MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, wrank == 0 ? MPI_UNDEFINED : 1, 0, &undef));
  CHECK((undef == MPI_COMM_NULL) == (wrank == 0), "split with MPI_UNDEFINED");
  n = 0;
  for (i = 1; i < wsize; ++i) expect[n++] = i;
  exercise(undef, "split(without rank 0)", expect, n);

  attributes();

  /* Many communicators: dup, use, free. */
  for (round = 0; round < 16; ++round) {
    MPI_Comm t;
    int s = 0;
    MPI_OK(MPI_Comm_dup(round % 2 ? parity : MPI_COMM_WORLD, &t));
    MPI_OK(MPI_Allreduce(&round, &s, 1, MPI_INT, MPI_SUM, t));
    MPI_OK(MPI_Comm_size(t, &n));
    CHECK(s == round * n, "round %d: allreduce %d", round, s);
    MPI_OK(MPI_Comm_free(&t));
  }

  /* 600 dups of one communicator, mixed with idups: most take a context
     reserved at an earlier exchange (no exchange of their own). Each must
     be its own context: a ring message sent on every dup, all posted before
     any is received, arrives on its own dup with its own value. */
  {
    enum { NDUP = 600 };
    MPI_Comm *d = malloc(sizeof(MPI_Comm) * NDUP);
    MPI_Request *rq = malloc(sizeof(MPI_Request) * NDUP);
    int *got = malloc(sizeof(int) * NDUP), *val = malloc(sizeof(int) * NDUP);
    CHECK(d && rq && got && val, "no memory");
    for (int i = 0; i < NDUP; ++i) {
      if (i % 97 == 5) {
        MPI_Request r;
        MPI_OK(MPI_Comm_idup(parity, &d[i], &r));
        MPI_OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
      } else {
        MPI_OK(MPI_Comm_dup(parity, &d[i]));
      }
    }
    int pr, ps;
    MPI_OK(MPI_Comm_rank(parity, &pr));
    MPI_OK(MPI_Comm_size(parity, &ps));
    for (int i = 0; i < NDUP; ++i) {
      val[i] = i * 1000 + pr;
      MPI_OK(MPI_Irecv(&got[i], 1, MPI_INT, (pr + ps - 1) % ps, 3, d[i], &rq[i]));
    }
    for (int i = NDUP - 1; i >= 0; --i) MPI_OK(MPI_Send(&val[i], 1, MPI_INT, (pr + 1) % ps, 3, d[i]));
    MPI_OK(MPI_Waitall(NDUP, rq, MPI_STATUSES_IGNORE));
    for (int i = 0; i < NDUP; ++i) {
      CHECK(got[i] == i * 1000 + (pr + ps - 1) % ps, "dup %d got %d", i, got[i]);
      MPI_OK(MPI_Comm_free(&d[i]));
    }
    free(d);
    free(rq);
    free(got);
    free(val);
  }

  MPI_OK(MPI_Group_free(&wg));
  MPI_OK(MPI_Group_free(&eg));
  MPI_OK(MPI_Group_free(&og));
  MPI_OK(MPI_Comm_free(&dup));
  MPI_OK(MPI_Comm_free(&parity));
  MPI_OK(MPI_Comm_free(&parity_dup));
  MPI_OK(MPI_Comm_free(&shared));
  if (evens != MPI_COMM_NULL) MPI_OK(MPI_Comm_free(&evens));
  if (odds != MPI_COMM_NULL) MPI_OK(MPI_Comm_free(&odds));
  if (undef != MPI_COMM_NULL) MPI_OK(MPI_Comm_free(&undef));
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (wrank == 0)
    printf("comm_basic ok (%d ranks, %ld communicators exercised by rank 0, %d ranks on its node)\n",
           wsize, nchecked, node_ranks);
  free(expect);
  free(e2);
  free(names);
  MPI_Finalize();
  return 0;
}
