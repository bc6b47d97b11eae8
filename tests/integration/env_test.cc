// Integration stories for error handlers and the environment: the
// tests/programs/errhandler.c program under real `bcs run` jobs. A user
// error handler on a sub-communicator spanning node managers is called for
// argument errors, runtime errors and MPI_Comm_call_errhandler; MPI_Abort on
// a sub-communicator ends the whole job with its code. After each story no
// process of ours survives and no /dev/shm entry appears.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness.h"
#include "story.h"

using bcs::test::bcs_run;
using bcs::test::describe;
using bcs::test::prog;
using testing::HasSubstr;

namespace {

using EnvStory = bcs::test::Story;

TEST_F(EnvStory, UserErrorHandlerOnASubCommunicatorAcrossNodeManagers) {
  for (int n : {2, 4}) {
    auto r = bcs_run({"-n", std::to_string(n), "--nodes", "2", prog("prog_errhandler")});
    ASSERT_EQ(r.status, 0) << describe(r);
    EXPECT_FALSE(r.timed_out) << describe(r);
    EXPECT_EQ(bcs::test::count(r.out, "errhandler ok (" + std::to_string(n) + " ranks)"), 1u)
        << describe(r);
    expect_nothing_left_now();
  }
}

TEST_F(EnvStory, MpiAbortOnASubCommunicatorEndsTheWholeJob) {
  // Rank 1 aborts on its pair {0, 1}; ranks 2 and 3 (another pair, another
  // communicator) wait on WORLD: they must be ended too.
  auto r = bcs_run({"-n", "4", "--nodes", "2", prog("prog_errhandler"), "abort", "23"});
  EXPECT_EQ(r.status, 23) << describe(r);
  EXPECT_FALSE(r.timed_out) << describe(r);
  EXPECT_THAT(r.out, HasSubstr("rank 1 calling MPI_Abort(pair, 23)"));
  EXPECT_THAT(r.err, HasSubstr("MPI_Abort"));
  EXPECT_THAT(r.err, HasSubstr("rank 1"));
  EXPECT_THAT(r.err, testing::Not(HasSubstr("returned"))) << describe(r);
  expect_nothing_left_now();
}

}  // namespace
