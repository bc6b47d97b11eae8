// Topologies in singleton mode (one process): MPI_Dims_create against the
// balanced decompositions MPI asks for, one-process grids and graphs, and
// the error classes of bad arguments. Grids across processes are checked by
// tests/programs/topo.c under bcs run.
#include <mpi.h>

#include <vector>

#include <gtest/gtest.h>

#include "singleton.h"

namespace {

class Topo : public SingletonMpi {};

std::vector<int> dims_of(int n, std::vector<int> d) {
  EXPECT_EQ(MPI_Dims_create(n, static_cast<int>(d.size()), d.data()), MPI_SUCCESS) << n;
  return d;
}

TEST_F(Topo, DimsCreateIsBalancedAndNonIncreasing) {
  EXPECT_EQ(dims_of(12, {0, 0}), (std::vector<int>{4, 3}));
  EXPECT_EQ(dims_of(16, {0, 0, 0}), (std::vector<int>{4, 2, 2}));
  EXPECT_EQ(dims_of(7, {0, 0}), (std::vector<int>{7, 1}));
  EXPECT_EQ(dims_of(72, {0, 0}), (std::vector<int>{9, 8}));
  EXPECT_EQ(dims_of(1, {0, 0, 0}), (std::vector<int>{1, 1, 1}));
  // Equal spread: the one whose smallest factors are largest (MPICH's pick).
  EXPECT_EQ(dims_of(10800, {0, 0, 0}), (std::vector<int>{27, 20, 20}));
  EXPECT_EQ(dims_of(98784, {0, 0, 0, 0, 0}), (std::vector<int>{14, 14, 9, 8, 7}));
  // Fixed entries stay; the free ones share the rest.
  EXPECT_EQ(dims_of(24, {0, 3, 0}), (std::vector<int>{4, 3, 2}));
  EXPECT_EQ(dims_of(6, {2, 3}), (std::vector<int>{2, 3}));
}

TEST_F(Topo, DimsCreateErrors) {
  std::vector<int> d{0, 5};
  EXPECT_EQ(MPI_Dims_create(12, 2, d.data()), MPI_ERR_DIMS);  // 5 does not divide 12
  d = {-1, 0};
  EXPECT_EQ(MPI_Dims_create(12, 2, d.data()), MPI_ERR_DIMS);
  EXPECT_EQ(MPI_Dims_create(12, -1, d.data()), MPI_ERR_DIMS);
  EXPECT_EQ(MPI_Dims_create(0, 2, d.data()), MPI_ERR_ARG);
  d = {2, 2};
  EXPECT_EQ(MPI_Dims_create(6, 2, d.data()), MPI_ERR_DIMS);  // no free entry, 4 != 6
}

TEST_F(Topo, OneProcessPeriodicGridIsItsOwnNeighbour) {
  int dims[2] = {1, 1}, periods[2] = {1, 0}, src = -5, dst = -5;
  MPI_Comm cart;
  ASSERT_EQ(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart), MPI_SUCCESS);
  ASSERT_NE(cart, MPI_COMM_NULL);
  ASSERT_EQ(MPI_Cart_shift(cart, 0, 1, &src, &dst), MPI_SUCCESS);
  EXPECT_EQ(src, 0);
  EXPECT_EQ(dst, 0);
  ASSERT_EQ(MPI_Cart_shift(cart, 1, 1, &src, &dst), MPI_SUCCESS);  // not periodic
  EXPECT_EQ(src, MPI_PROC_NULL);
  EXPECT_EQ(dst, MPI_PROC_NULL);
  // Neighbour alltoall: slots (0,-1),(0,+1) are this process; (1,*) are PROC_NULL.
  int sb[4] = {10, 11, 12, 13}, rb[4] = {-1, -1, -1, -1};
  ASSERT_EQ(MPI_Neighbor_alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, cart), MPI_SUCCESS);
  // What goes out in the + direction arrives in the - slot of the receiver
  // (here the same process), and the other way round: pairing by direction.
  EXPECT_EQ(rb[0], 11);
  EXPECT_EQ(rb[1], 10);
  EXPECT_EQ(rb[2], -1);  // PROC_NULL slots untouched
  EXPECT_EQ(rb[3], -1);
  MPI_Comm dup;
  ASSERT_EQ(MPI_Comm_dup(cart, &dup), MPI_SUCCESS);
  int status = -1;
  ASSERT_EQ(MPI_Topo_test(dup, &status), MPI_SUCCESS);
  EXPECT_EQ(status, MPI_CART);
  ASSERT_EQ(MPI_Topo_test(MPI_COMM_WORLD, &status), MPI_SUCCESS);
  EXPECT_EQ(status, MPI_UNDEFINED);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&cart);
}

TEST_F(Topo, GridLargerThanTheCommunicatorIsRefused) {
  int dims[2] = {2, 1}, periods[2] = {0, 0};
  // A refused call leaves MPI_COMM_NULL, not whatever the handle held.
  MPI_Comm cart = MPI_COMM_WORLD;
  EXPECT_EQ(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart), MPI_ERR_TOPOLOGY);
  EXPECT_EQ(cart, MPI_COMM_NULL);
  dims[0] = 0;
  cart = MPI_COMM_WORLD;
  EXPECT_EQ(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart), MPI_ERR_DIMS);
  EXPECT_EQ(cart, MPI_COMM_NULL);
  const int index[1] = {2}, edges[2] = {0, 5};
  MPI_Comm graph = MPI_COMM_WORLD;
  EXPECT_NE(MPI_Graph_create(MPI_COMM_WORLD, 1, index, edges, 0, &graph), MPI_SUCCESS);
  EXPECT_EQ(graph, MPI_COMM_NULL);
}

TEST_F(Topo, CallsOnTheWrongTopologyRaiseMpiErrTopology) {
  int nd = -1;
  EXPECT_EQ(MPI_Cartdim_get(MPI_COMM_WORLD, &nd), MPI_ERR_TOPOLOGY);
  int in, out, w;
  EXPECT_EQ(MPI_Dist_graph_neighbors_count(MPI_COMM_WORLD, &in, &out, &w), MPI_ERR_TOPOLOGY);
  int x = 0;
  EXPECT_EQ(MPI_Neighbor_allgather(&x, 1, MPI_INT, &x, 1, MPI_INT, MPI_COMM_WORLD),
            MPI_ERR_TOPOLOGY);
}

TEST_F(Topo, OneNodeGraph) {
  int index[1] = {1}, edges[1] = {0}, nn = -1, ne = -1, nb = -1;
  MPI_Comm g;
  ASSERT_EQ(MPI_Graph_create(MPI_COMM_WORLD, 1, index, edges, 0, &g), MPI_SUCCESS);
  ASSERT_EQ(MPI_Graphdims_get(g, &nn, &ne), MPI_SUCCESS);
  EXPECT_EQ(nn, 1);
  EXPECT_EQ(ne, 1);
  ASSERT_EQ(MPI_Graph_neighbors_count(g, 0, &nb), MPI_SUCCESS);
  EXPECT_EQ(nb, 1);
  EXPECT_EQ(MPI_Graph_neighbors_count(g, 1, &nb), MPI_ERR_RANK);
  int bad_edges[1] = {3};
  MPI_Comm g2;
  EXPECT_EQ(MPI_Graph_create(MPI_COMM_WORLD, 1, index, bad_edges, 0, &g2), MPI_ERR_ARG);
  MPI_Comm_free(&g);
}

}  // namespace
