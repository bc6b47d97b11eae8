// libmpi groups in singleton mode: the world group is {this process}, so
// the algebra runs on {0} and the empty group; the error classes of every
// invalid argument. The algebra on N processes is tests/programs/
// comm_groups.c.
#include <mpi.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "singleton.h"

namespace {

class Group : public SingletonMpi {
 protected:
  void SetUp() override {
    SingletonMpi::SetUp();
    ASSERT_EQ(MPI_Comm_group(MPI_COMM_WORLD, &world_), MPI_SUCCESS);
  }
  void TearDown() override { EXPECT_EQ(MPI_Group_free(&world_), MPI_SUCCESS); }
  MPI_Group world_ = MPI_GROUP_NULL;
};

int size_of(MPI_Group g) {
  int n = -1;
  EXPECT_EQ(MPI_Group_size(g, &n), MPI_SUCCESS);
  return n;
}

int rank_in(MPI_Group g) {
  int r = -5;
  EXPECT_EQ(MPI_Group_rank(g, &r), MPI_SUCCESS);
  return r;
}

int compare(MPI_Group a, MPI_Group b) {
  int c = -1;
  EXPECT_EQ(MPI_Group_compare(a, b, &c), MPI_SUCCESS);
  return c;
}

TEST_F(Group, WorldAndEmpty) {
  EXPECT_EQ(size_of(world_), 1);
  EXPECT_EQ(rank_in(world_), 0);
  EXPECT_EQ(size_of(MPI_GROUP_EMPTY), 0);
  EXPECT_EQ(rank_in(MPI_GROUP_EMPTY), MPI_UNDEFINED);
  MPI_Group self;
  ASSERT_EQ(MPI_Comm_group(MPI_COMM_SELF, &self), MPI_SUCCESS);
  EXPECT_NE(self, world_);  // a new handle
  EXPECT_EQ(compare(self, world_), MPI_IDENT);
  EXPECT_EQ(compare(MPI_GROUP_EMPTY, world_), MPI_UNEQUAL);
  EXPECT_EQ(compare(MPI_GROUP_EMPTY, MPI_GROUP_EMPTY), MPI_IDENT);
  ASSERT_EQ(MPI_Group_free(&self), MPI_SUCCESS);
  EXPECT_EQ(self, MPI_GROUP_NULL);
  // MPI_GROUP_EMPTY may be freed: only the handle is cleared.
  MPI_Group e = MPI_GROUP_EMPTY;
  ASSERT_EQ(MPI_Group_free(&e), MPI_SUCCESS);
  EXPECT_EQ(e, MPI_GROUP_NULL);
  EXPECT_EQ(size_of(MPI_GROUP_EMPTY), 0);
}

TEST_F(Group, SetOperations) {
  MPI_Group g;
  ASSERT_EQ(MPI_Group_union(world_, MPI_GROUP_EMPTY, &g), MPI_SUCCESS);
  EXPECT_EQ(compare(g, world_), MPI_IDENT);
  ASSERT_EQ(MPI_Group_free(&g), MPI_SUCCESS);
  ASSERT_EQ(MPI_Group_union(MPI_GROUP_EMPTY, world_, &g), MPI_SUCCESS);
  EXPECT_EQ(compare(g, world_), MPI_IDENT);
  ASSERT_EQ(MPI_Group_free(&g), MPI_SUCCESS);
  ASSERT_EQ(MPI_Group_union(world_, world_, &g), MPI_SUCCESS);
  EXPECT_EQ(size_of(g), 1);
  ASSERT_EQ(MPI_Group_free(&g), MPI_SUCCESS);
  ASSERT_EQ(MPI_Group_intersection(world_, world_, &g), MPI_SUCCESS);
  EXPECT_EQ(compare(g, world_), MPI_IDENT);
  ASSERT_EQ(MPI_Group_free(&g), MPI_SUCCESS);
  // Empty results are MPI_GROUP_EMPTY.
  ASSERT_EQ(MPI_Group_intersection(world_, MPI_GROUP_EMPTY, &g), MPI_SUCCESS);
  EXPECT_EQ(g, MPI_GROUP_EMPTY);
  ASSERT_EQ(MPI_Group_difference(world_, world_, &g), MPI_SUCCESS);
  EXPECT_EQ(g, MPI_GROUP_EMPTY);
  ASSERT_EQ(MPI_Group_difference(world_, MPI_GROUP_EMPTY, &g), MPI_SUCCESS);
  EXPECT_EQ(compare(g, world_), MPI_IDENT);
  EXPECT_EQ(rank_in(g), 0);
  ASSERT_EQ(MPI_Group_free(&g), MPI_SUCCESS);
}

TEST_F(Group, InclExclRanges) {
  MPI_Group g;
  const int zero[1] = {0};
  ASSERT_EQ(MPI_Group_incl(world_, 1, zero, &g), MPI_SUCCESS);
  EXPECT_EQ(compare(g, world_), MPI_IDENT);
  ASSERT_EQ(MPI_Group_free(&g), MPI_SUCCESS);
  ASSERT_EQ(MPI_Group_incl(world_, 0, nullptr, &g), MPI_SUCCESS);
  EXPECT_EQ(g, MPI_GROUP_EMPTY);
  ASSERT_EQ(MPI_Group_excl(world_, 1, zero, &g), MPI_SUCCESS);
  EXPECT_EQ(g, MPI_GROUP_EMPTY);
  ASSERT_EQ(MPI_Group_excl(world_, 0, nullptr, &g), MPI_SUCCESS);
  EXPECT_EQ(compare(g, world_), MPI_IDENT);
  ASSERT_EQ(MPI_Group_free(&g), MPI_SUCCESS);
  int r1[1][3] = {{0, 0, 1}};
  ASSERT_EQ(MPI_Group_range_incl(world_, 1, r1, &g), MPI_SUCCESS);
  EXPECT_EQ(compare(g, world_), MPI_IDENT);
  ASSERT_EQ(MPI_Group_free(&g), MPI_SUCCESS);
  int r2[1][3] = {{0, 0, -4}};
  ASSERT_EQ(MPI_Group_range_excl(world_, 1, r2, &g), MPI_SUCCESS);
  EXPECT_EQ(g, MPI_GROUP_EMPTY);
  ASSERT_EQ(MPI_Group_range_incl(world_, 0, nullptr, &g), MPI_SUCCESS);
  EXPECT_EQ(g, MPI_GROUP_EMPTY);
}

TEST_F(Group, TranslateRanks) {
  const int in[3] = {0, MPI_PROC_NULL, 0};
  int out[3] = {-9, -9, -9};
  ASSERT_EQ(MPI_Group_translate_ranks(world_, 3, in, world_, out), MPI_SUCCESS);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], MPI_PROC_NULL);
  EXPECT_EQ(out[2], 0);
  ASSERT_EQ(MPI_Group_translate_ranks(world_, 1, in, MPI_GROUP_EMPTY, out), MPI_SUCCESS);
  EXPECT_EQ(out[0], MPI_UNDEFINED);
  EXPECT_EQ(MPI_Group_translate_ranks(world_, 0, nullptr, world_, nullptr), MPI_SUCCESS);
  const int bad[1] = {1};
  EXPECT_EQ(MPI_Group_translate_ranks(world_, 1, bad, world_, out), MPI_ERR_RANK);
  EXPECT_EQ(MPI_Group_translate_ranks(MPI_GROUP_EMPTY, 1, in, world_, out), MPI_ERR_RANK);
  EXPECT_EQ(MPI_Group_translate_ranks(world_, -1, in, world_, out), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Group_translate_ranks(world_, 1, nullptr, world_, out), MPI_ERR_ARG);
}

TEST_F(Group, ErrorClasses) {
  MPI_Group g = MPI_GROUP_NULL;
  int n;
  for (MPI_Group bad : {MPI_GROUP_NULL, static_cast<MPI_Group>(0x48001234),
                        static_cast<MPI_Group>(MPI_COMM_WORLD)}) {
    EXPECT_EQ(MPI_Group_size(bad, &n), MPI_ERR_GROUP);
    EXPECT_EQ(MPI_Group_rank(bad, &n), MPI_ERR_GROUP);
    EXPECT_EQ(MPI_Group_compare(bad, world_, &n), MPI_ERR_GROUP);
    EXPECT_EQ(MPI_Group_union(world_, bad, &g), MPI_ERR_GROUP);
    EXPECT_EQ(MPI_Group_intersection(bad, world_, &g), MPI_ERR_GROUP);
    EXPECT_EQ(MPI_Group_difference(bad, bad, &g), MPI_ERR_GROUP);
    EXPECT_EQ(MPI_Group_incl(bad, 0, nullptr, &g), MPI_ERR_GROUP);
    MPI_Group b = bad;
    EXPECT_EQ(MPI_Group_free(&b), MPI_ERR_GROUP);
  }
  const int one[1] = {1}, neg[1] = {-1}, twice[2] = {0, 0};
  EXPECT_EQ(MPI_Group_incl(world_, 1, one, &g), MPI_ERR_RANK);
  EXPECT_EQ(MPI_Group_incl(world_, 1, neg, &g), MPI_ERR_RANK);
  EXPECT_EQ(MPI_Group_excl(world_, 1, one, &g), MPI_ERR_RANK);
  EXPECT_EQ(MPI_Group_incl(world_, 2, twice, &g), MPI_ERR_ARG);  // n > group size
  EXPECT_EQ(MPI_Group_incl(world_, -1, one, &g), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Group_incl(world_, 1, nullptr, &g), MPI_ERR_ARG);
  int stride0[1][3] = {{0, 0, 0}}, out_of_range[1][3] = {{0, 3, 1}}, dup[2][3] = {{0, 0, 1}, {0, 0, 1}};
  EXPECT_EQ(MPI_Group_range_incl(world_, 1, stride0, &g), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Group_range_incl(world_, 1, out_of_range, &g), MPI_ERR_RANK);
  EXPECT_EQ(MPI_Group_range_excl(world_, 2, dup, &g), MPI_ERR_RANK);
  EXPECT_EQ(MPI_Group_range_incl(world_, -2, dup, &g), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Group_size(world_, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Group_union(world_, world_, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Group_free(nullptr), MPI_ERR_ARG);
  // A freed group handle is invalid.
  ASSERT_EQ(MPI_Comm_group(MPI_COMM_SELF, &g), MPI_SUCCESS);
  const MPI_Group stale = g;
  ASSERT_EQ(MPI_Group_free(&g), MPI_SUCCESS);
  EXPECT_EQ(MPI_Group_size(stale, &n), MPI_ERR_GROUP);
  // Errors go through MPI_COMM_WORLD's handler.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  EXPECT_EXIT(MPI_Group_size(MPI_GROUP_NULL, &n), ::testing::ExitedWithCode(MPI_ERR_GROUP),
              "MPI_Group_size: MPI_ERR_GROUP: invalid group .*MPI_GROUP_NULL");
}

}  // namespace
