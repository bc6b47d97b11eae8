/* Process topologies and neighbourhood collectives, every result checked
   against the truth computed here from the rank numbers alone:
   - a 2-D periodic grid (MPI_Dims_create): coordinates, MPI_Cart_rank,
     MPI_Cart_shift, a halo exchange with MPI_Sendrecv in both dimensions;
   - MPI_Cart_sub rows and columns, each with an allreduce of its members;
   - a non-periodic 1-D grid: MPI_PROC_NULL at the ends;
   - a distributed graph made with MPI_Dist_graph_create (each rank names
     edges of other ranks) and with _adjacent, queried and checked;
   - neighbourhood allgather(v) and alltoall(v,w), blocking and non-blocking,
     on the grid and on the graph (duplicate neighbours included: a periodic
     dimension of size 1 or 2 names the same rank twice). */
#include <stdlib.h>
#include <string.h>

#include "prog_common.h"

static int wrank, wsize;

/* Value rank r sends in slot j of call `round`. */
static int val(int r, int j, int round) { return 1000000 * round + 1000 * r + j; }

static void grid(void) {
  int dims[2] = {0, 0}, periods[2] = {1, 1}, coords[2], c2[2], r, src, dst;
  MPI_Comm cart, row, col;
  MPI_OK(MPI_Dims_create(wsize, 2, dims));
  CHECK(dims[0] * dims[1] == wsize && dims[0] >= dims[1], "dims %d x %d", dims[0], dims[1]);
  MPI_OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
  int status = -1, nd = -1, me;
  MPI_OK(MPI_Topo_test(cart, &status));
  CHECK(status == MPI_CART, "topo_test %d", status);
  MPI_OK(MPI_Cartdim_get(cart, &nd));
  CHECK(nd == 2, "cartdim %d", nd);
  MPI_OK(MPI_Comm_rank(cart, &me));
  MPI_OK(MPI_Cart_coords(cart, me, 2, coords));
  CHECK(coords[0] == me / dims[1] && coords[1] == me % dims[1], "coords (%d,%d) of %d", coords[0],
        coords[1], me);
  MPI_OK(MPI_Cart_rank(cart, coords, &r));
  CHECK(r == me, "cart_rank %d, want %d", r, me);
  c2[0] = coords[0] + dims[0]; /* periodic: wraps */
  c2[1] = coords[1] - dims[1];
  MPI_OK(MPI_Cart_rank(cart, c2, &r));
  CHECK(r == me, "wrapped cart_rank %d, want %d", r, me);
  /* Halo exchange: send my rank up/right, receive from down/left. */
  for (int d = 0; d < 2; ++d) {
    MPI_OK(MPI_Cart_shift(cart, d, 1, &src, &dst));
    int want_dst[2] = {coords[0], coords[1]}, want_src[2] = {coords[0], coords[1]};
    want_dst[d] = (coords[d] + 1) % dims[d];
    want_src[d] = (coords[d] - 1 + dims[d]) % dims[d];
    int wd = want_dst[0] * dims[1] + want_dst[1], ws = want_src[0] * dims[1] + want_src[1];
    CHECK(dst == wd && src == ws, "shift dim %d: src %d dst %d, want %d %d", d, src, dst, ws, wd);
    int out = val(me, d, 1), in = -1;
    MPI_OK(MPI_Sendrecv(&out, 1, MPI_INT, dst, 5, &in, 1, MPI_INT, src, 5, cart,
                        MPI_STATUS_IGNORE));
    CHECK(in == val(ws, d, 1), "halo dim %d: got %d, want %d", d, in, val(ws, d, 1));
  }
  /* Rows (keep dim 1) and columns (keep dim 0): sum of the members' ranks. */
  int keep_row[2] = {0, 1}, keep_col[2] = {1, 0}, sum = 0, rs, want = 0;
  MPI_OK(MPI_Cart_sub(cart, keep_row, &row));
  MPI_OK(MPI_Comm_size(row, &rs));
  CHECK(rs == dims[1], "row size %d", rs);
  MPI_OK(MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, row));
  for (int j = 0; j < dims[1]; ++j) want += coords[0] * dims[1] + j;
  CHECK(sum == want, "row sum %d, want %d", sum, want);
  MPI_OK(MPI_Cart_sub(cart, keep_col, &col));
  MPI_OK(MPI_Comm_size(col, &rs));
  CHECK(rs == dims[0], "col size %d", rs);
  MPI_OK(MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, col));
  want = 0;
  for (int i = 0; i < dims[0]; ++i) want += i * dims[1] + coords[1];
  CHECK(sum == want, "col sum %d, want %d", sum, want);
  MPI_OK(MPI_Cartdim_get(col, &nd));
  CHECK(nd == 1, "sub cartdim %d", nd);

  /* Neighbour alltoall on the grid: slots (d,-1),(d,+1) per dimension. */
  int nb[4], sb[4], rb[4], cnt[4] = {1, 1, 1, 1}, dsp[4] = {0, 1, 2, 3};
  for (int d = 0; d < 2; ++d) MPI_OK(MPI_Cart_shift(cart, d, 1, &nb[2 * d], &nb[2 * d + 1]));
  for (int j = 0; j < 4; ++j) sb[j] = val(me, j, 2);
  for (int nbl = 0; nbl < 2; ++nbl) {
    MPI_Request q;
    memset(rb, 0xff, sizeof rb);
    if (nbl) {
      MPI_OK(MPI_Ineighbor_alltoallv(sb, cnt, dsp, MPI_INT, rb, cnt, dsp, MPI_INT, cart, &q));
      MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    } else {
      MPI_OK(MPI_Neighbor_alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, cart));
    }
    for (int j = 0; j < 4; ++j) {
      /* Slot j = (d, s) comes from peer p = nb[j], which sent it from its
         slot (d, 1 - s): what goes in the + direction of a dimension
         arrives from the - direction (MPICH's ring_neighbor_alltoall
         checks the same where a periodic dimension of size 1 or 2 names
         one peer twice). */
      const int p = nb[j], slot = (j & ~1) | (1 - (j & 1));
      CHECK(rb[j] == val(p, slot, 2), "%salltoall slot %d: got %d, want %d", nbl ? "i" : "", j,
            rb[j], val(p, slot, 2));
    }
  }
  /* Neighbour allgather: every slot gets the peer's one value. */
  {
    int one = val(me, 9, 3), got[4];
    MPI_Request q;
    MPI_OK(MPI_Ineighbor_allgather(&one, 1, MPI_INT, got, 1, MPI_INT, cart, &q));
    MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    for (int j = 0; j < 4; ++j)
      CHECK(got[j] == val(nb[j], 9, 3), "allgather slot %d: %d", j, got[j]);
  }
  MPI_OK(MPI_Comm_free(&row));
  MPI_OK(MPI_Comm_free(&col));
  MPI_OK(MPI_Comm_free(&cart));
}

static void line(void) {
  /* Non-periodic 1-D: the ends see MPI_PROC_NULL and keep their receive blocks. */
  int dims[1] = {wsize}, periods[1] = {0}, me, src, dst;
  MPI_Comm cart, dup;
  MPI_OK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 1, &cart));
  MPI_OK(MPI_Comm_dup(cart, &dup)); /* a dup keeps the topology */
  MPI_OK(MPI_Comm_rank(dup, &me));
  MPI_OK(MPI_Cart_shift(dup, 0, 1, &src, &dst));
  CHECK(src == (me == 0 ? MPI_PROC_NULL : me - 1), "src %d", src);
  CHECK(dst == (me == wsize - 1 ? MPI_PROC_NULL : me + 1), "dst %d", dst);
  int sb[2] = {val(me, 0, 4), val(me, 1, 4)}, rb[2] = {-7, -7};
  MPI_OK(MPI_Neighbor_alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, dup));
  /* slot 0 = left neighbour, which sent me its slot 1 (right). */
  CHECK(rb[0] == (src == MPI_PROC_NULL ? -7 : val(src, 1, 4)), "line left %d", rb[0]);
  CHECK(rb[1] == (dst == MPI_PROC_NULL ? -7 : val(dst, 0, 4)), "line right %d", rb[1]);
  /* Out of the grid: MPI_ERR_ARG from Cart_rank under ERRORS_RETURN. */
  int bad[1] = {wsize}, r;
  MPI_OK(MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN));
  CHECK(MPI_Cart_rank(dup, bad, &r) == MPI_ERR_ARG, "cart_rank off the line");
  CHECK(MPI_Graphdims_get(dup, &r, &r) == MPI_ERR_TOPOLOGY, "graphdims on a cart");
  MPI_OK(MPI_Comm_free(&dup));
  MPI_OK(MPI_Comm_free(&cart));
}

/* Edges of the test graph: rank r -> (r+1) % n and r -> (r*3+2) % n (maybe a
   duplicate or a self loop), weight 10*r + k. */
static int edge_to(int r, int k) { return k == 0 ? (r + 1) % wsize : (r * 3 + 2) % wsize; }

static void graph(void) {
  /* Every rank names the edges of rank (wrank + 1) % n, so no rank names its own. */
  const int owner = (wrank + 1) % wsize;
  int nodes[1] = {owner}, degrees[1] = {2}, targets[2], weights[2];
  for (int k = 0; k < 2; ++k) {
    targets[k] = edge_to(owner, k);
    weights[k] = 10 * owner + k;
  }
  MPI_Comm g, ga;
  MPI_OK(MPI_Dist_graph_create(MPI_COMM_WORLD, 1, nodes, degrees, targets, weights, MPI_INFO_NULL,
                               0, &g));
  int in, out, weighted, status;
  MPI_OK(MPI_Topo_test(g, &status));
  CHECK(status == MPI_DIST_GRAPH, "topo_test %d", status);
  MPI_OK(MPI_Dist_graph_neighbors_count(g, &in, &out, &weighted));
  int want_in = 0;
  for (int r = 0; r < wsize; ++r)
    for (int k = 0; k < 2; ++k) want_in += edge_to(r, k) == wrank;
  CHECK(out == 2 && in == want_in && weighted, "counts in %d out %d w %d (want %d 2 1)", in, out,
        weighted, want_in);
  int *srcs = malloc(sizeof(int) * (size_t)(in + 1)), *sw = malloc(sizeof(int) * (size_t)(in + 1));
  int dsts[2], dw[2];
  MPI_OK(MPI_Dist_graph_neighbors(g, in, srcs, sw, 2, dsts, dw));
  for (int k = 0; k < 2; ++k)
    CHECK(dsts[k] == edge_to(wrank, k) && dw[k] == 10 * wrank + k, "out edge %d: %d w %d", k,
          dsts[k], dw[k]);
  /* In-edges: each (r, k) with edge_to(r, k) == me exactly once, weight 10r+k. */
  for (int r = 0, i; r < wsize; ++r)
    for (int k = 0; k < 2; ++k) {
      if (edge_to(r, k) != wrank) continue;
      for (i = 0; i < in; ++i)
        if (srcs[i] == r && sw[i] == 10 * r + k) break;
      CHECK(i < in, "in-edge from %d (k=%d) missing", r, k);
    }
  /* The same graph given adjacently: sources in the order found above. */
  MPI_OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, in, srcs, MPI_UNWEIGHTED, 2, dsts,
                                        MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &ga));
  MPI_OK(MPI_Dist_graph_neighbors_count(ga, &in, &out, &weighted));
  CHECK(!weighted, "adjacent graph is unweighted");
  /* Neighbour allgatherv on the adjacent graph: slot i gets srcs[i]'s value,
     stored at displacement 2*i. */
  {
    int one = val(wrank, 0, 5);
    int *rcv = malloc(sizeof(int) * (size_t)(2 * in + 1)), *rc = malloc(sizeof(int) * (size_t)(in + 1)),
        *dp = malloc(sizeof(int) * (size_t)(in + 1));
    for (int i = 0; i < in; ++i) {
      rc[i] = 1;
      dp[i] = 2 * i;
      rcv[2 * i] = rcv[2 * i + 1] = -1;
    }
    MPI_OK(MPI_Neighbor_allgatherv(&one, 1, MPI_INT, rcv, rc, dp, MPI_INT, ga));
    for (int i = 0; i < in; ++i)
      CHECK(rcv[2 * i] == val(srcs[i], 0, 5) && rcv[2 * i + 1] == -1, "allgatherv slot %d: %d", i,
            rcv[2 * i]);
    free(rcv);
    free(rc);
    free(dp);
  }
  /* Neighbour alltoallw on the adjacent graph: out-slot k sends (k+1) ints
     of value val(me, k, 6); in-slot i receives from srcs[i] the block of its
     slot naming me (the k-th occurrence pairs with the k-th). */
  {
    int sbuf[3], scount[2] = {1, 2}, rcounts_max = 2 * in + 1;
    MPI_Aint sd[2] = {0, sizeof(int)};
    MPI_Datatype st[2] = {MPI_INT, MPI_INT};
    int *rbuf = malloc(sizeof(int) * (size_t)rcounts_max * 2), *rcount = malloc(sizeof(int) * (size_t)(in + 1));
    MPI_Aint *rd = malloc(sizeof(MPI_Aint) * (size_t)(in + 1));
    MPI_Datatype *rt = malloc(sizeof(MPI_Datatype) * (size_t)(in + 1));
    sbuf[0] = val(wrank, 0, 6);
    sbuf[1] = sbuf[2] = val(wrank, 1, 6);
    int *which = malloc(sizeof(int) * (size_t)(in + 1));
    for (int i = 0, off = 0; i < in; ++i) {
      /* which out-slot of srcs[i] this in-slot pairs with */
      int occ = 0, k, seen = 0;
      for (int j = 0; j < i; ++j) occ += srcs[j] == srcs[i];
      for (k = 0; k < 2; ++k)
        if (edge_to(srcs[i], k) == wrank && seen++ == occ) break;
      CHECK(k < 2, "no out-slot of %d pairs with in-slot %d", srcs[i], i);
      which[i] = k;
      rcount[i] = k + 1;
      rd[i] = (MPI_Aint)(off * (int)sizeof(int));
      rt[i] = MPI_INT;
      off += k + 1;
    }
    MPI_Request q;
    MPI_OK(MPI_Ineighbor_alltoallw(sbuf, scount, sd, st, rbuf, rcount, rd, rt, ga, &q));
    MPI_OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    for (int i = 0; i < in; ++i)
      for (int e = 0; e < rcount[i]; ++e) {
        const int got = rbuf[rd[i] / (MPI_Aint)sizeof(int) + e];
        CHECK(got == val(srcs[i], which[i], 6), "alltoallw in-slot %d elem %d: %d", i, e, got);
      }
    free(rbuf);
    free(rcount);
    free(rd);
    free(rt);
    free(which);
  }
  free(srcs);
  free(sw);
  MPI_OK(MPI_Comm_free(&ga));
  MPI_OK(MPI_Comm_free(&g));
}

int main(int argc, char **argv) {
  prog_name = "topo";
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  grid();
  line();
  graph();
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (wrank == 0) printf("topo ok (%d ranks)\n", wsize);
  MPI_Finalize();
  return 0;
}
