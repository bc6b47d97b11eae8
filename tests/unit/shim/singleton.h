// Shared by the shim's unit tests: libmpi in singleton mode (not started by
// bcs, so rank 0 of 1), initialised once per test binary, with errors
// returned instead of aborting.
#pragma once

#include <mpi.h>

#include <cstdlib>

#include <gtest/gtest.h>

class SingletonMpi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      unsetenv("BCS_SEGMENT_FD");
      ASSERT_EQ(MPI_Init(nullptr, nullptr), MPI_SUCCESS);
    }
  }
  void SetUp() override {
    ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), MPI_SUCCESS);
    ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN), MPI_SUCCESS);
  }
};
