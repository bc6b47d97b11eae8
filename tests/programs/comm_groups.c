/* prog_comm_groups: the group algebra on the world group of N processes,
 * and communicators made from groups.
 *
 * Groups: the world group W, the even ranks E (range_incl with stride 2),
 * the odd ranks O (difference W \ E), W reversed (incl), and from them
 * union, intersection, difference, incl, excl, range_incl and range_excl
 * with negative strides. Each result is checked member by member (its
 * translation to W), with MPI_Group_size, _rank (MPI_UNDEFINED outside),
 * _compare (MPI_IDENT / MPI_SIMILAR / MPI_UNEQUAL) and
 * _translate_ranks (MPI_PROC_NULL, MPI_UNDEFINED).
 *
 * Communicators: MPI_Comm_create(WORLD, reversed W) (ranks reversed;
 * an MPI_Scan checks that the runtime combines in the new rank order);
 * one MPI_Comm_create where the evens pass E and the odds pass O (two
 * disjoint communicators from one call); a chain of MPI_Comm_create_group
 * over the pairs {i, i+1} (each rank is in two, leaders all differ; one
 * allreduce on each); a split with all-equal colour and key (congruent to
 * WORLD) and a split of the reversed communicator by rank % 3 with key 0
 * (order of the reversed communicator). Rank 0 prints "comm_groups ok". */
#include <stdint.h>
#include <string.h>

#include "prog_common.h"

static int wrank, wsize;
static MPI_Group W;

/* Group g has exactly the world ranks want[0..n-1], in that order. */
static void expect_group(MPI_Group g, const char *what, const int *want, int n) {
  int size = -1, rank = -2, i, *r = NULL, *t = NULL, mine = MPI_UNDEFINED, cmp = -1;
  MPI_OK(MPI_Group_size(g, &size));
  CHECK(size == n, "%s: size %d, want %d", what, size, n);
  if (n > 0) {
    r = malloc(sizeof(int) * (size_t)n);
    t = malloc(sizeof(int) * (size_t)n);
    CHECK(r && t, "out of memory");
    for (i = 0; i < n; ++i) r[i] = i;
    MPI_OK(MPI_Group_translate_ranks(g, n, r, W, t));
    for (i = 0; i < n; ++i) {
      CHECK(t[i] == want[i], "%s: member %d is world rank %d, want %d", what, i, t[i], want[i]);
      if (want[i] == wrank) mine = i;
    }
  }
  MPI_OK(MPI_Group_rank(g, &rank));
  CHECK(rank == mine, "%s: my rank %d, want %d", what, rank, mine);
  MPI_OK(MPI_Group_compare(g, g, &cmp));
  CHECK(cmp == MPI_IDENT, "%s: not identical to itself", what);
  free(r);
  free(t);
}

static void expect_compare(MPI_Group a, MPI_Group b, int want, const char *what) {
  int cmp = -1;
  MPI_OK(MPI_Group_compare(a, b, &cmp));
  CHECK(cmp == want, "%s: compare %d, want %d", what, cmp, want);
  MPI_OK(MPI_Group_compare(b, a, &cmp));
  CHECK(cmp == want, "%s: compare (swapped) %d, want %d", what, cmp, want);
}

int main(int argc, char **argv) {
  MPI_Group E, O, R, g, g2;
  MPI_Comm rc, eo, c;
  int *want, *tmp, n, i, cmp, r, ne, no;
  prog_name = "comm_groups";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  want = malloc(sizeof(int) * (size_t)(2 * wsize + 2));
  tmp = malloc(sizeof(int) * (size_t)(2 * wsize + 2));
  CHECK(want && tmp, "out of memory");

  MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &W));
  for (i = 0; i < wsize; ++i) want[i] = i;
  expect_group(W, "W", want, wsize);

  /* E = range_incl (0, N-1, 2); O = W \ E. */
  {
    int range[1][3];
    range[0][0] = 0;
    range[0][1] = wsize - 1;
    range[0][2] = 2;
    MPI_OK(MPI_Group_range_incl(W, 1, range, &E));
  }
  ne = 0;
  for (i = 0; i < wsize; i += 2) want[ne++] = i;
  expect_group(E, "E", want, ne);
  MPI_OK(MPI_Group_difference(W, E, &O));
  no = 0;
  for (i = 1; i < wsize; i += 2) want[no++] = i;
  expect_group(O, "O", want, no);

  /* R = W reversed. */
  for (i = 0; i < wsize; ++i) tmp[i] = wsize - 1 - i;
  MPI_OK(MPI_Group_incl(W, wsize, tmp, &R));
  expect_group(R, "R", tmp, wsize);
  expect_compare(R, W, wsize > 1 ? MPI_SIMILAR : MPI_IDENT, "R vs W");
  expect_compare(E, W, wsize > 1 ? MPI_UNEQUAL : MPI_IDENT, "E vs W");

  /* E u O: the evens, then the odds. */
  MPI_OK(MPI_Group_union(E, O, &g));
  n = 0;
  for (i = 0; i < wsize; i += 2) want[n++] = i;
  for (i = 1; i < wsize; i += 2) want[n++] = i;
  expect_group(g, "E u O", want, n);
  expect_compare(g, W, wsize > 2 ? MPI_SIMILAR : MPI_IDENT, "E u O vs W");
  MPI_OK(MPI_Group_free(&g));
  CHECK(g == MPI_GROUP_NULL, "freed group is not MPI_GROUP_NULL");

  /* R u E = R (E adds nothing); E u R = E, then the odds in R's order. */
  MPI_OK(MPI_Group_union(R, E, &g));
  expect_compare(g, R, MPI_IDENT, "R u E vs R");
  MPI_OK(MPI_Group_free(&g));
  MPI_OK(MPI_Group_union(E, R, &g));
  n = 0;
  for (i = 0; i < wsize; i += 2) want[n++] = i;
  for (i = wsize - 1; i >= 0; --i)
    if (i % 2) want[n++] = i;
  expect_group(g, "E u R", want, n);
  MPI_OK(MPI_Group_free(&g));

  /* R n E: the evens in R's order; E n O is empty. */
  MPI_OK(MPI_Group_intersection(R, E, &g));
  n = 0;
  for (i = wsize - 1; i >= 0; --i)
    if (i % 2 == 0) want[n++] = i;
  expect_group(g, "R n E", want, n);
  expect_compare(g, E, ne > 1 ? MPI_SIMILAR : MPI_IDENT, "R n E vs E");
  MPI_OK(MPI_Group_free(&g));
  MPI_OK(MPI_Group_intersection(E, O, &g));
  expect_group(g, "E n O", want, 0);
  MPI_OK(MPI_Group_free(&g));

  /* R \ O: the evens in R's order. */
  MPI_OK(MPI_Group_difference(R, O, &g));
  MPI_OK(MPI_Group_intersection(R, E, &g2));
  expect_compare(g, g2, MPI_IDENT, "R \\ O vs R n E");
  MPI_OK(MPI_Group_free(&g));
  MPI_OK(MPI_Group_free(&g2));

  /* excl of the first and last rank of R. */
  tmp[0] = 0;
  tmp[1] = wsize - 1;
  MPI_OK(MPI_Group_excl(R, wsize > 1 ? 2 : 1, tmp, &g));
  n = 0;
  for (i = wsize - 2; i >= 1; --i) want[n++] = i;
  expect_group(g, "R excl ends", want, n);
  MPI_OK(MPI_Group_free(&g));

  /* range_incl with a negative stride and two triplets; range_excl. */
  {
    int ranges[2][3];
    ranges[0][0] = wsize - 1; /* N-1, N-4, ... */
    ranges[0][1] = 0;
    ranges[0][2] = -3;
    ranges[1][0] = wsize - 2; /* then (N-2, N-2, 1) if N >= 2 */
    ranges[1][1] = wsize - 2;
    ranges[1][2] = 1;
    n = 0;
    for (i = wsize - 1; i >= 0; i -= 3) want[n++] = i;
    if (wsize >= 2) want[n++] = wsize - 2;
    MPI_OK(MPI_Group_range_incl(W, wsize >= 2 ? 2 : 1, ranges, &g));
    expect_group(g, "range_incl", want, n);
    MPI_OK(MPI_Group_free(&g));
    MPI_OK(MPI_Group_range_excl(W, wsize >= 2 ? 2 : 1, ranges, &g));
    r = 0;
    for (i = 0; i < wsize; ++i) {
      int out = (wsize - 1 - i) % 3 == 0 || (wsize >= 2 && i == wsize - 2);
      if (!out) want[r++] = i;
    }
    expect_group(g, "range_excl", want, r);
    MPI_OK(MPI_Group_free(&g));
  }

  /* translate_ranks: W -> E (i/2 or MPI_UNDEFINED), MPI_PROC_NULL. */
  for (i = 0; i < wsize; ++i) tmp[i] = i;
  tmp[wsize] = MPI_PROC_NULL;
  MPI_OK(MPI_Group_translate_ranks(W, wsize + 1, tmp, E, want));
  for (i = 0; i < wsize; ++i)
    CHECK(want[i] == (i % 2 ? MPI_UNDEFINED : i / 2), "translate W->E %d = %d", i, want[i]);
  CHECK(want[wsize] == MPI_PROC_NULL, "translate of MPI_PROC_NULL = %d", want[wsize]);

  /* ---------------------------------------------------- communicators */

  /* create(WORLD, R): reversed ranks; a scan in the new order. */
  MPI_OK(MPI_Comm_create(MPI_COMM_WORLD, R, &rc));
  MPI_OK(MPI_Comm_rank(rc, &r));
  CHECK(r == wsize - 1 - wrank, "reversed communicator: rank %d", r);
  MPI_OK(MPI_Comm_compare(rc, MPI_COMM_WORLD, &cmp));
  CHECK(cmp == (wsize > 1 ? MPI_SIMILAR : MPI_CONGRUENT), "reversed vs WORLD: %d", cmp);
  MPI_OK(MPI_Comm_group(rc, &g));
  expect_compare(g, R, MPI_IDENT, "group of the reversed communicator");
  MPI_OK(MPI_Group_free(&g));
  {
    int s = -1, x = -1;
    MPI_OK(MPI_Scan(&r, &s, 1, MPI_INT, MPI_SUM, rc));
    CHECK(s == r * (r + 1) / 2, "scan on the reversed communicator: %d", s);
    MPI_OK(MPI_Exscan(&wrank, &x, 1, MPI_INT, MPI_MAX, rc));
    CHECK(r == 0 || x == wsize - 1, "exscan max: %d", x);
  }

  /* One MPI_Comm_create call, two disjoint communicators. */
  MPI_OK(MPI_Comm_create(MPI_COMM_WORLD, wrank % 2 ? O : E, &eo));
  CHECK(eo != MPI_COMM_NULL, "create with E/O: no communicator");
  MPI_OK(MPI_Comm_size(eo, &n));
  CHECK(n == (wrank % 2 ? no : ne), "E/O communicator size %d", n);
  {
    int v = wrank, s = 0, want_s = 0;
    MPI_OK(MPI_Bcast(&v, 1, MPI_INT, n - 1, eo));
    CHECK(v == (wrank % 2 ? 2 * no - 1 : 2 * ne - 2), "E/O bcast from the last: %d", v);
    for (i = wrank % 2; i < wsize; i += 2) want_s += i;
    MPI_OK(MPI_Allreduce(&wrank, &s, 1, MPI_INT, MPI_SUM, eo));
    CHECK(s == want_s, "E/O allreduce %d, want %d", s, want_s);
  }

  /* A chain of create_group over the pairs {i, i+1}. */
  for (i = wrank - 1; i <= wrank; ++i) {
    MPI_Group pair;
    int members[2], s = 0;
    if (i < 0 || i + 1 >= wsize) continue;
    members[0] = i;
    members[1] = i + 1;
    MPI_OK(MPI_Group_incl(W, 2, members, &pair));
    MPI_OK(MPI_Comm_create_group(MPI_COMM_WORLD, pair, 1000 + i, &c));
    CHECK(c != MPI_COMM_NULL, "create_group {%d, %d}: no communicator", i, i + 1);
    MPI_OK(MPI_Allreduce(&wrank, &s, 1, MPI_INT, MPI_SUM, c));
    CHECK(s == 2 * i + 1, "pair {%d, %d}: allreduce %d", i, i + 1, s);
    MPI_OK(MPI_Comm_free(&c));
    MPI_OK(MPI_Group_free(&pair));
  }

  /* Splits: all alike (congruent to WORLD); the reversed one by rank % 3. */
  MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, 3, 0, &c));
  MPI_OK(MPI_Comm_compare(c, MPI_COMM_WORLD, &cmp));
  CHECK(cmp == MPI_CONGRUENT, "split with one colour vs WORLD: %d", cmp);
  MPI_OK(MPI_Comm_free(&c));
  MPI_OK(MPI_Comm_split(rc, wrank % 3, 0, &c));
  MPI_OK(MPI_Comm_group(c, &g));
  n = 0;
  for (i = wsize - 1; i >= 0; --i)
    if (i % 3 == wrank % 3) want[n++] = i;
  expect_group(g, "split(reversed, rank % 3)", want, n);
  {
    int *got = malloc(sizeof(int) * (size_t)n);
    CHECK(got != NULL, "out of memory");
    MPI_OK(MPI_Allgather(&wrank, 1, MPI_INT, got, 1, MPI_INT, c));
    for (i = 0; i < n; ++i) CHECK(got[i] == want[i], "split(reversed): member %d = %d", i, got[i]);
    free(got);
  }
  MPI_OK(MPI_Group_free(&g));
  MPI_OK(MPI_Comm_free(&c));

  MPI_OK(MPI_Comm_free(&rc));
  MPI_OK(MPI_Comm_free(&eo));
  MPI_OK(MPI_Group_free(&R));
  MPI_OK(MPI_Group_free(&E));
  MPI_OK(MPI_Group_free(&O));
  MPI_OK(MPI_Group_free(&W));
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (wrank == 0) printf("comm_groups ok (%d ranks)\n", wsize);
  free(want);
  free(tmp);
  MPI_Finalize();
  return 0;
}
