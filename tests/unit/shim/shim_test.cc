// libmpi (mpi-shim) in singleton mode: the program is not started by bcs
// (no BCS_SEGMENT_FD), so it is rank 0 of 1 and everything that needs no
// runtime must work. Mostly argument checking: every invalid argument must be
// reported with the right MPI error class before anything is posted.
#include <mpi.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "singleton.h"

namespace {

class Shim : public SingletonMpi {
 protected:
  int buf_[16] = {};
  MPI_Status st_{};
};

TEST_F(Shim, SingletonIsRankZeroOfOne) {
  int rank = -1, size = -1, flag = 0;
  ASSERT_EQ(MPI_Comm_rank(MPI_COMM_WORLD, &rank), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_size(MPI_COMM_WORLD, &size), MPI_SUCCESS);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(size, 1);
  ASSERT_EQ(MPI_Comm_rank(MPI_COMM_SELF, &rank), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_size(MPI_COMM_SELF, &size), MPI_SUCCESS);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(size, 1);
  EXPECT_EQ(MPI_Initialized(&flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(MPI_Finalized(&flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(MPI_Barrier(MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(MPI_Barrier(MPI_COMM_SELF), MPI_SUCCESS);
  int v = 0, sv = 0;
  EXPECT_EQ(MPI_Get_version(&v, &sv), MPI_SUCCESS);
  EXPECT_EQ(v, 3);
  EXPECT_EQ(sv, 1);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  EXPECT_EQ(MPI_Get_processor_name(name, &len), MPI_SUCCESS);
  EXPECT_GT(len, 0);
  EXPECT_EQ(static_cast<size_t>(len), std::strlen(name));
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  EXPECT_EQ(MPI_Get_library_version(lib, &len), MPI_SUCCESS);
  EXPECT_NE(std::string(lib).find("bcs"), std::string::npos);
  int provided = -1;
  EXPECT_EQ(MPI_Query_thread(&provided), MPI_SUCCESS);
  EXPECT_EQ(provided, MPI_THREAD_SINGLE);
  EXPECT_EQ(MPI_Is_thread_main(&flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);
}

TEST_F(Shim, ProfilingNamesAreTheSameFunctions) {
  int rank = -1;
  EXPECT_EQ(PMPI_Comm_rank(MPI_COMM_WORLD, &rank), MPI_SUCCESS);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(PMPI_Comm_rank(MPI_COMM_NULL, &rank), MPI_ERR_COMM);
}

TEST_F(Shim, InvalidCommunicator) {
  for (MPI_Comm bad : {MPI_COMM_NULL, static_cast<MPI_Comm>(12345), static_cast<MPI_Comm>(MPI_INT)}) {
    int r;
    EXPECT_EQ(MPI_Send(buf_, 1, MPI_INT, 0, 0, bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Recv(buf_, 1, MPI_INT, 0, 0, bad, &st_), MPI_ERR_COMM);
    MPI_Request req = MPI_REQUEST_NULL;
    EXPECT_EQ(MPI_Isend(buf_, 1, MPI_INT, 0, 0, bad, &req), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Irecv(buf_, 1, MPI_INT, 0, 0, bad, &req), MPI_ERR_COMM);
    EXPECT_EQ(req, MPI_REQUEST_NULL);
    EXPECT_EQ(MPI_Comm_rank(bad, &r), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Comm_size(bad, &r), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Barrier(bad), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Probe(0, 0, bad, &st_), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Iprobe(0, 0, bad, &r, &st_), MPI_ERR_COMM);
    EXPECT_EQ(MPI_Comm_set_errhandler(bad, MPI_ERRORS_RETURN), MPI_ERR_COMM);
  }
  // The communicator is checked first, before count and type.
  EXPECT_EQ(MPI_Send(buf_, -1, MPI_DATATYPE_NULL, 99, -7, MPI_COMM_NULL), MPI_ERR_COMM);
}

TEST_F(Shim, InvalidCount) {
  MPI_Request req;
  EXPECT_EQ(MPI_Send(buf_, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
  EXPECT_EQ(MPI_Recv(buf_, -1, MPI_INT, 0, 0, MPI_COMM_WORLD, &st_), MPI_ERR_COUNT);
  EXPECT_EQ(MPI_Isend(buf_, -3, MPI_INT, 0, 0, MPI_COMM_WORLD, &req), MPI_ERR_COUNT);
  EXPECT_EQ(MPI_Irecv(buf_, -3, MPI_INT, 0, 0, MPI_COMM_WORLD, &req), MPI_ERR_COUNT);
  EXPECT_EQ(MPI_Waitall(-1, &req, MPI_STATUSES_IGNORE), MPI_ERR_COUNT);
}

TEST_F(Shim, InvalidDatatype) {
  MPI_Request req;
  for (MPI_Datatype bad : {MPI_DATATYPE_NULL, static_cast<MPI_Datatype>(MPI_COMM_WORLD),
                           static_cast<MPI_Datatype>(0x4c0000ff), static_cast<MPI_Datatype>(7)}) {
    int n;
    EXPECT_EQ(MPI_Send(buf_, 1, bad, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    EXPECT_EQ(MPI_Recv(buf_, 1, bad, 0, 0, MPI_COMM_WORLD, &st_), MPI_ERR_TYPE);
    EXPECT_EQ(MPI_Isend(buf_, 1, bad, 0, 0, MPI_COMM_WORLD, &req), MPI_ERR_TYPE);
    EXPECT_EQ(MPI_Type_size(bad, &n), MPI_ERR_TYPE);
    EXPECT_EQ(MPI_Get_count(&st_, bad, &n), MPI_ERR_TYPE);
  }
}

TEST_F(Shim, AnEmptyMessageMayNameAnyDatatype) {
  // MPICH's pt2pt/recvnull: count 0 with MPI_DATATYPE_NULL is not an error.
  MPI_Request req;
  EXPECT_EQ(MPI_Irecv(nullptr, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 10, MPI_COMM_WORLD, &req), MPI_SUCCESS);
  EXPECT_EQ(MPI_Wait(&req, &st_), MPI_SUCCESS);
  EXPECT_EQ(st_.MPI_SOURCE, MPI_PROC_NULL);
  EXPECT_EQ(MPI_Send(nullptr, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 10, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(MPI_Recv(nullptr, 0, MPI_DATATYPE_NULL, MPI_PROC_NULL, 10, MPI_COMM_WORLD, &st_), MPI_SUCCESS);
  EXPECT_EQ(st_.MPI_SOURCE, MPI_PROC_NULL);
  EXPECT_EQ(st_.MPI_TAG, MPI_ANY_TAG);
}

TEST_F(Shim, InvalidBuffer) {
  EXPECT_EQ(MPI_Send(nullptr, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_BUFFER);
  EXPECT_EQ(MPI_Recv(nullptr, 4, MPI_INT, 0, 0, MPI_COMM_WORLD, &st_), MPI_ERR_BUFFER);
  // A NULL buffer is fine with count 0.
  EXPECT_EQ(MPI_Send(nullptr, 0, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD), MPI_SUCCESS);
}

TEST_F(Shim, InvalidRank) {
  MPI_Request req;
  for (int bad : {1, 2, -5, MPI_ANY_SOURCE}) {
    EXPECT_EQ(MPI_Send(buf_, 1, MPI_INT, bad, 0, MPI_COMM_WORLD), MPI_ERR_RANK) << bad;
    EXPECT_EQ(MPI_Isend(buf_, 1, MPI_INT, bad, 0, MPI_COMM_WORLD, &req), MPI_ERR_RANK) << bad;
    EXPECT_EQ(MPI_Send(buf_, 1, MPI_INT, bad, 0, MPI_COMM_SELF), MPI_ERR_RANK) << bad;
  }
  for (int bad : {1, -5}) {
    int flag;
    EXPECT_EQ(MPI_Recv(buf_, 1, MPI_INT, bad, 0, MPI_COMM_WORLD, &st_), MPI_ERR_RANK);
    EXPECT_EQ(MPI_Irecv(buf_, 1, MPI_INT, bad, 0, MPI_COMM_WORLD, &req), MPI_ERR_RANK);
    EXPECT_EQ(MPI_Probe(bad, 0, MPI_COMM_WORLD, &st_), MPI_ERR_RANK);
    EXPECT_EQ(MPI_Iprobe(bad, 0, MPI_COMM_WORLD, &flag, &st_), MPI_ERR_RANK);
  }
}

TEST_F(Shim, InvalidTag) {
  MPI_Request req;
  const int tag_ub = (1 << 30) - 1;
  for (int bad : {-1, -2, tag_ub + 1}) {
    EXPECT_EQ(MPI_Send(buf_, 1, MPI_INT, 0, bad, MPI_COMM_WORLD), MPI_ERR_TAG) << bad;
    EXPECT_EQ(MPI_Isend(buf_, 1, MPI_INT, 0, bad, MPI_COMM_WORLD, &req), MPI_ERR_TAG) << bad;
  }
  for (int bad : {-2, tag_ub + 1}) {
    EXPECT_EQ(MPI_Recv(buf_, 1, MPI_INT, 0, bad, MPI_COMM_WORLD, &st_), MPI_ERR_TAG) << bad;
    EXPECT_EQ(MPI_Irecv(buf_, 1, MPI_INT, 0, bad, MPI_COMM_WORLD, &req), MPI_ERR_TAG) << bad;
  }
  // Boundaries are valid; MPI_ANY_TAG is valid on receive.
  EXPECT_EQ(MPI_Send(buf_, 1, MPI_INT, MPI_PROC_NULL, tag_ub, MPI_COMM_WORLD), MPI_SUCCESS);
  EXPECT_EQ(MPI_Recv(buf_, 1, MPI_INT, MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &st_),
            MPI_SUCCESS);
  void* val = nullptr;
  int flag = 0;
  ASSERT_EQ(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &val, &flag), MPI_SUCCESS);
  ASSERT_EQ(flag, 1);
  EXPECT_EQ(*static_cast<int*>(val), tag_ub);
}

TEST_F(Shim, InvalidRequest) {
  MPI_Request bogus = 0x2c001234;
  int flag, index;
  EXPECT_EQ(MPI_Wait(&bogus, &st_), MPI_ERR_REQUEST);
  EXPECT_EQ(MPI_Test(&bogus, &flag, &st_), MPI_ERR_REQUEST);
  MPI_Request arr[3] = {MPI_REQUEST_NULL, 42, MPI_REQUEST_NULL};
  EXPECT_EQ(MPI_Waitall(3, arr, MPI_STATUSES_IGNORE), MPI_ERR_REQUEST);
  EXPECT_EQ(MPI_Testall(3, arr, &flag, MPI_STATUSES_IGNORE), MPI_ERR_REQUEST);
  EXPECT_EQ(MPI_Waitany(3, arr, &index, &st_), MPI_ERR_REQUEST);
  EXPECT_EQ(MPI_Testany(3, arr, &index, &flag, &st_), MPI_ERR_REQUEST);
  EXPECT_EQ(MPI_Wait(nullptr, &st_), MPI_ERR_REQUEST);
  MPI_Request null = MPI_REQUEST_NULL;
  EXPECT_EQ(MPI_Request_free(&null), MPI_ERR_REQUEST);
  // A completed request handle is stale.
  MPI_Request req;
  ASSERT_EQ(MPI_Isend(buf_, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &req), MPI_SUCCESS);
  const MPI_Request stale = req;
  ASSERT_EQ(MPI_Wait(&req, MPI_STATUS_IGNORE), MPI_SUCCESS);
  EXPECT_EQ(req, MPI_REQUEST_NULL);
  req = stale;
  EXPECT_EQ(MPI_Wait(&req, MPI_STATUS_IGNORE), MPI_ERR_REQUEST);
}

TEST_F(Shim, ProcNullCompletesAtOnce) {
  st_.MPI_SOURCE = 123;
  ASSERT_EQ(MPI_Recv(buf_, 4, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, &st_), MPI_SUCCESS);
  EXPECT_EQ(st_.MPI_SOURCE, MPI_PROC_NULL);
  EXPECT_EQ(st_.MPI_TAG, MPI_ANY_TAG);
  int count = -1;
  ASSERT_EQ(MPI_Get_count(&st_, MPI_INT, &count), MPI_SUCCESS);
  EXPECT_EQ(count, 0);
  ASSERT_EQ(MPI_Send(buf_, 4, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD), MPI_SUCCESS);

  MPI_Request reqs[3];
  ASSERT_EQ(MPI_Isend(buf_, 4, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &reqs[0]), MPI_SUCCESS);
  reqs[1] = MPI_REQUEST_NULL;
  ASSERT_EQ(MPI_Irecv(buf_, 4, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &reqs[2]), MPI_SUCCESS);
  int index = -1, flag = 0;
  ASSERT_EQ(MPI_Waitany(3, reqs, &index, &st_), MPI_SUCCESS);
  EXPECT_EQ(index, 0);
  EXPECT_EQ(reqs[0], MPI_REQUEST_NULL);
  MPI_Status sts[3];
  ASSERT_EQ(MPI_Testall(3, reqs, &flag, sts), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(sts[2].MPI_SOURCE, MPI_PROC_NULL);
  EXPECT_EQ(reqs[2], MPI_REQUEST_NULL);
  // All null: Testany is complete with no index.
  ASSERT_EQ(MPI_Testany(3, reqs, &index, &flag, &st_), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(index, MPI_UNDEFINED);
  ASSERT_EQ(MPI_Waitany(3, reqs, &index, &st_), MPI_SUCCESS);
  EXPECT_EQ(index, MPI_UNDEFINED);

  ASSERT_EQ(MPI_Sendrecv(buf_, 1, MPI_INT, MPI_PROC_NULL, 0, buf_ + 1, 1, MPI_INT, MPI_PROC_NULL,
                         0, MPI_COMM_WORLD, &st_),
            MPI_SUCCESS);
  EXPECT_EQ(st_.MPI_SOURCE, MPI_PROC_NULL);
  ASSERT_EQ(MPI_Iprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &flag, &st_), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);

  ASSERT_EQ(MPI_Isend(buf_, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &reqs[0]), MPI_SUCCESS);
  ASSERT_EQ(MPI_Request_free(&reqs[0]), MPI_SUCCESS);
  EXPECT_EQ(reqs[0], MPI_REQUEST_NULL);
}

TEST_F(Shim, SingletonPointToPointSaysBcsRun) {
  EXPECT_EQ(MPI_Send(buf_, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_OTHER);
  EXPECT_EQ(MPI_Recv(buf_, 1, MPI_INT, 0, 0, MPI_COMM_SELF, &st_), MPI_ERR_OTHER);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  EXPECT_EXIT(MPI_Send(buf_, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), ::testing::ExitedWithCode(MPI_ERR_OTHER),
              "bcs: rank 0: MPI_Send: MPI_ERR_OTHER: .*`bcs run`");
}

TEST_F(Shim, GetCount) {
  MPI_Status st{};
  st.bcs_count = 12;
  int n = -1;
  ASSERT_EQ(MPI_Get_count(&st, MPI_INT, &n), MPI_SUCCESS);
  EXPECT_EQ(n, 3);
  ASSERT_EQ(MPI_Get_count(&st, MPI_DOUBLE, &n), MPI_SUCCESS);
  EXPECT_EQ(n, MPI_UNDEFINED);
  ASSERT_EQ(MPI_Get_elements(&st, MPI_SHORT, &n), MPI_SUCCESS);
  EXPECT_EQ(n, 6);
  st.bcs_count = 10;
  ASSERT_EQ(MPI_Get_count(&st, MPI_INT, &n), MPI_SUCCESS);
  EXPECT_EQ(n, MPI_UNDEFINED);
  EXPECT_EQ(MPI_Get_count(MPI_STATUS_IGNORE, MPI_INT, &n), MPI_ERR_ARG);
}

TEST_F(Shim, ErrorClassesAndStrings) {
  const int classes[] = {MPI_SUCCESS,       MPI_ERR_BUFFER,  MPI_ERR_COUNT,    MPI_ERR_TYPE,
                         MPI_ERR_TAG,       MPI_ERR_COMM,    MPI_ERR_RANK,     MPI_ERR_ROOT,
                         MPI_ERR_GROUP,     MPI_ERR_OP,      MPI_ERR_TOPOLOGY, MPI_ERR_DIMS,
                         MPI_ERR_ARG,       MPI_ERR_UNKNOWN, MPI_ERR_TRUNCATE, MPI_ERR_OTHER,
                         MPI_ERR_INTERN,    MPI_ERR_IN_STATUS, MPI_ERR_PENDING, MPI_ERR_REQUEST};
  for (int c : classes) {
    int cls = -1, len = 0;
    char s[MPI_MAX_ERROR_STRING];
    ASSERT_EQ(MPI_Error_class(c, &cls), MPI_SUCCESS);
    EXPECT_EQ(cls, c);
    ASSERT_EQ(MPI_Error_string(c, s, &len), MPI_SUCCESS);
    EXPECT_EQ(static_cast<size_t>(len), std::strlen(s));
    EXPECT_GT(len, 0);
    EXPECT_LE(c, MPI_ERR_LASTCODE);
  }
  char s[MPI_MAX_ERROR_STRING];
  int len = 0, cls = 0;
  ASSERT_EQ(MPI_Error_string(MPI_ERR_TRUNCATE, s, &len), MPI_SUCCESS);
  EXPECT_NE(std::string(s).find("MPI_ERR_TRUNCATE"), std::string::npos);
  EXPECT_NE(std::string(s).find("truncated"), std::string::npos);
  EXPECT_EQ(MPI_Error_class(9999, &cls), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Error_string(-3, s, &len), MPI_ERR_ARG);
}

TEST_F(Shim, ErrorHandlers) {
  MPI_Errhandler h = MPI_ERRHANDLER_NULL;
  ASSERT_EQ(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h), MPI_SUCCESS);
  EXPECT_EQ(h, MPI_ERRORS_RETURN);
  EXPECT_EQ(MPI_Comm_set_errhandler(MPI_COMM_WORLD, static_cast<MPI_Errhandler>(5)), MPI_ERR_ARG);
  // Handlers are per communicator.
  ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL), MPI_SUCCESS);
  EXPECT_EQ(MPI_Send(buf_, 1, MPI_INT, 3, 0, MPI_COMM_SELF), MPI_ERR_RANK);
  ASSERT_EQ(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h), MPI_SUCCESS);
  EXPECT_EQ(h, MPI_ERRORS_ARE_FATAL);
  // Fatal: names the rank, the call and the class; exits with the class.
  EXPECT_EXIT(MPI_Send(buf_, 1, MPI_INT, 3, 0, MPI_COMM_WORLD),
              ::testing::ExitedWithCode(MPI_ERR_RANK), "bcs: rank 0: MPI_Send: MPI_ERR_RANK: ");
  EXPECT_EXIT(MPI_Recv(buf_, 1, MPI_INT, 0, -5, MPI_COMM_WORLD, &st_),
              ::testing::ExitedWithCode(MPI_ERR_TAG), "bcs: rank 0: MPI_Recv: MPI_ERR_TAG: ");
}

TEST_F(Shim, WtimeIsMonotonic) {
  double prev = MPI_Wtime();
  for (int i = 0; i < 1000; ++i) {
    const double t = MPI_Wtime();
    ASSERT_GE(t, prev);
    prev = t;
  }
  EXPECT_GT(MPI_Wtick(), 0.0);
  EXPECT_LT(MPI_Wtick(), 1.0);
}

TEST_F(Shim, TypeSizeOfPredefinedTypes) {
  struct Case {
    MPI_Datatype t;
    int size;
  } cases[] = {
      {MPI_CHAR, 1},
      {MPI_SIGNED_CHAR, 1},
      {MPI_UNSIGNED_CHAR, 1},
      {MPI_BYTE, 1},
      {MPI_SHORT, sizeof(short)},
      {MPI_UNSIGNED_SHORT, sizeof(unsigned short)},
      {MPI_INT, sizeof(int)},
      {MPI_UNSIGNED, sizeof(unsigned)},
      {MPI_LONG, sizeof(long)},
      {MPI_UNSIGNED_LONG, sizeof(unsigned long)},
      {MPI_LONG_LONG_INT, sizeof(long long)},
      {MPI_LONG_LONG, sizeof(long long)},
      {MPI_UNSIGNED_LONG_LONG, sizeof(unsigned long long)},
      {MPI_FLOAT, sizeof(float)},
      {MPI_DOUBLE, sizeof(double)},
      {MPI_LONG_DOUBLE, sizeof(long double)},
      {MPI_WCHAR, sizeof(wchar_t)},
      {MPI_C_BOOL, 1},
      {MPI_INT8_T, 1},
      {MPI_INT16_T, 2},
      {MPI_INT32_T, 4},
      {MPI_INT64_T, 8},
      {MPI_UINT8_T, 1},
      {MPI_UINT16_T, 2},
      {MPI_UINT32_T, 4},
      {MPI_UINT64_T, 8},
      {MPI_AINT, sizeof(MPI_Aint)},
      {MPI_OFFSET, sizeof(MPI_Offset)},
      {MPI_COUNT, sizeof(MPI_Count)},
      {MPI_PACKED, 1},
      {MPI_C_FLOAT_COMPLEX, 2 * sizeof(float)},
      {MPI_C_DOUBLE_COMPLEX, 2 * sizeof(double)},
      {MPI_2INT, 2 * sizeof(int)},
      // Pair types are MPI structs: the size is the sum of the parts.
      {MPI_DOUBLE_INT, sizeof(double) + sizeof(int)},
      {MPI_SHORT_INT, sizeof(short) + sizeof(int)},
      {MPI_LONG_DOUBLE_INT, sizeof(long double) + sizeof(int)},
  };
  for (const auto& c : cases) {
    int size = -1;
    ASSERT_EQ(MPI_Type_size(c.t, &size), MPI_SUCCESS) << std::hex << c.t;
    EXPECT_EQ(size, c.size) << std::hex << c.t;
  }
  EXPECT_EQ(sizeof(MPI_Aint), sizeof(void*));
}

TEST_F(Shim, PairTypesHaveTheCStructsExtentAndTwoElements) {
  struct DI {
    double v;
    int i;
  };
  struct SI {
    short v;
    int i;
  };
  MPI_Aint lb = -1, ext = -1, tlb = -1, text = -1;
  ASSERT_EQ(MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &ext), MPI_SUCCESS);
  EXPECT_EQ(lb, 0);
  EXPECT_EQ(ext, static_cast<MPI_Aint>(sizeof(DI)));
  ASSERT_EQ(MPI_Type_get_true_extent(MPI_DOUBLE_INT, &tlb, &text), MPI_SUCCESS);
  EXPECT_EQ(text, static_cast<MPI_Aint>(sizeof(double) + sizeof(int)));
  ASSERT_EQ(MPI_Type_get_extent(MPI_SHORT_INT, &lb, &ext), MPI_SUCCESS);
  EXPECT_EQ(ext, static_cast<MPI_Aint>(sizeof(SI)));
  // Two packed pairs are four basic elements.
  MPI_Status st;
  ASSERT_EQ(MPI_Status_set_elements(&st, MPI_DOUBLE_INT, 4), MPI_SUCCESS);
  int n = -1;
  ASSERT_EQ(MPI_Get_count(&st, MPI_DOUBLE_INT, &n), MPI_SUCCESS);
  EXPECT_EQ(n, 2);
  ASSERT_EQ(MPI_Get_elements(&st, MPI_DOUBLE_INT, &n), MPI_SUCCESS);
  EXPECT_EQ(n, 4);
  // MINLOC over the padded C structs, through MPI_Reduce_local.
  DI in[2] = {{1.0, 7}, {5.0, 1}}, io[2] = {{1.0, 3}, {2.0, 9}};
  ASSERT_EQ(MPI_Reduce_local(in, io, 2, MPI_DOUBLE_INT, MPI_MINLOC), MPI_SUCCESS);
  EXPECT_EQ(io[0].v, 1.0);
  EXPECT_EQ(io[0].i, 3);
  EXPECT_EQ(io[1].v, 2.0);
  EXPECT_EQ(io[1].i, 9);
}

// Calls outside MPI_Init..MPI_Finalize: MPI_ERR_OTHER, through the fatal
// handler (no communicator handler applies yet). Runs in a fresh process.
TEST(ShimLifecycle, CallBeforeInitIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int init = 1;
        MPI_Initialized(&init);
        if (init) std::exit(100);  // not a fresh process: the check would be meaningless
        int x = 0;
        MPI_Send(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
      },
      ::testing::ExitedWithCode(MPI_ERR_OTHER), "MPI_Send: MPI_ERR_OTHER: called before MPI_Init");
}

TEST(ShimLifecycle, CallAfterFinalizeIsFatalAndInitThreadCapsTheLevel) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        unsetenv("BCS_SEGMENT_FD");
        int provided = -1;
        if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
          std::exit(101);
        if (provided != MPI_THREAD_SERIALIZED) std::exit(102);
        if (MPI_Finalize() != MPI_SUCCESS) std::exit(103);
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin) std::exit(104);
        MPI_Barrier(MPI_COMM_WORLD);
      },
      ::testing::ExitedWithCode(MPI_ERR_OTHER),
      "MPI_Barrier: MPI_ERR_OTHER: called after MPI_Finalize");
}

}  // namespace
