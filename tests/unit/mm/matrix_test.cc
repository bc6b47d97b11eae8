// The Ousterhout matrix: rows of jobs, the active row, slot unification.
#include "matrix.h"

#include <gtest/gtest.h>

namespace bcs::mm {
namespace {

using Ids = std::vector<uint64_t>;

TEST(Matrix, JobsOnTheSameNodesTakeOneRowEach) {
  Matrix m(2);
  EXPECT_EQ(m.place(1, {1, 2}), 0u);
  EXPECT_EQ(m.place(2, {1, 2}), 1u);
  EXPECT_FALSE(m.place(3, {2}).has_value()) << "both rows hold node 2";
  EXPECT_EQ(m.at(0, 1), 1u);
  EXPECT_EQ(m.at(1, 2), 2u);
  EXPECT_EQ(m.at(1, 3), 0u);
}

TEST(Matrix, TheActiveRowRunsAndRotatesToTheNextRowWithAJob) {
  Matrix m(3);
  m.place(1, {1});
  m.place(2, {1});
  EXPECT_EQ(m.runnable(), Ids{1});
  EXPECT_TRUE(m.rotate());
  EXPECT_EQ(m.active(), 1u);
  EXPECT_EQ(m.runnable(), Ids{2});
  // Row 2 is empty: skipped.
  EXPECT_TRUE(m.rotate());
  EXPECT_EQ(m.active(), 0u);
  EXPECT_EQ(m.runnable(), Ids{1});
}

TEST(Matrix, AJobWhoseNodesAreFreeInTheActiveRowRunsThereToo) {
  Matrix m(2);
  m.place(1, {1, 2});  // row 0
  m.place(2, {1, 2});  // row 1
  m.place(3, {3});     // row 0 (free there)
  m.place(4, {2, 3});  // neither row 0 (2, 3 held) ... row 1: 2 held
  EXPECT_FALSE(m.row_of(4).has_value());
  m.rotate();  // row 1 active: job 2 on 1, 2; job 3 (row 0) unified on node 3
  EXPECT_EQ(m.runnable(), (Ids{2, 3}));
}

TEST(Matrix, RunnableJobsNeverShareANode) {
  Matrix m(3);
  m.place(1, {1});     // row 0
  m.place(2, {1, 2});  // row 1
  m.place(3, {2});     // row 0
  m.place(4, {3});     // row 0
  m.place(5, {3, 4});  // row 1
  for (int q = 0; q < 4; ++q, m.rotate()) {
    std::set<uint32_t> used;
    for (uint64_t j : m.runnable())
      for (uint32_t n : m.jobs_of_row(*m.row_of(j)).at(j)) EXPECT_TRUE(used.insert(n).second) << j;
  }
}

TEST(Matrix, ANewJobGoesToTheActiveRowFirst) {
  Matrix m(2);
  m.place(1, {1});
  m.place(2, {1});
  m.rotate();  // row 1 active
  EXPECT_EQ(m.place(3, {2}), 1u);
}

TEST(Matrix, ReservedNodesAreNotTaken) {
  Matrix m(2);
  EXPECT_FALSE(m.place(1, {1, 2}, {2}).has_value());
  EXPECT_EQ(m.place(1, {1}, {2}), 0u);
}

TEST(Matrix, AnEndedJobFreesItsSlots) {
  Matrix m(1);
  m.place(1, {1});
  EXPECT_FALSE(m.place(2, {1}).has_value());
  EXPECT_TRUE(m.remove(1));
  EXPECT_FALSE(m.remove(1));
  EXPECT_EQ(m.place(2, {1}), 0u);
  EXPECT_FALSE(m.rotate()) << "one row: nothing to switch to";
  EXPECT_TRUE(m.remove(2));
  EXPECT_TRUE(m.empty());
}

}  // namespace
}  // namespace bcs::mm
