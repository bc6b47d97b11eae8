// libmpi error handlers and error codes in singleton mode: user handlers
// (MPI_Comm_create_errhandler) called with the right communicator and code
// from the errors of many calls, also of calls without a communicator (they
// use MPI_COMM_WORLD's handler); inheritance, MPI_Comm_call_errhandler, the
// reference counting of MPI_Errhandler_free; user error classes, codes and
// strings and the MPI_LASTUSEDCODE attribute.
#include <mpi.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "singleton.h"

namespace {

// What the recording handler saw, in order.
struct Call {
  MPI_Comm comm;
  int code;
};
std::vector<Call>& calls() {
  static std::vector<Call> c;
  return c;
}

void record(MPI_Comm* comm, int* code, ...) { calls().push_back(Call{*comm, *code}); }

// A handler that uses MPI itself: turns the code into its string.
std::string& last_string() {
  static std::string s;
  return s;
}
void stringify(MPI_Comm*, int* code, ...) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(*code, s, &len) == MPI_SUCCESS) last_string().assign(s, len);
}

class Errh : public SingletonMpi {
 protected:
  void SetUp() override {
    SingletonMpi::SetUp();
    calls().clear();
    ASSERT_EQ(MPI_Comm_create_errhandler(record, &rec_), MPI_SUCCESS);
  }
  void TearDown() override {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    for (MPI_Comm& c : comms_)
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
    if (rec_ != MPI_ERRHANDLER_NULL) MPI_Errhandler_free(&rec_);
  }
  MPI_Comm dup(MPI_Comm of) {
    MPI_Comm d = MPI_COMM_NULL;
    EXPECT_EQ(MPI_Comm_dup(of, &d), MPI_SUCCESS);
    comms_.push_back(d);
    return d;
  }
  MPI_Errhandler rec_ = MPI_ERRHANDLER_NULL;
  std::vector<MPI_Comm> comms_;
};

TEST_F(Errh, UserHandlerSeesTheCommunicatorAndTheCodeOfEveryError) {
  const MPI_Comm d = dup(MPI_COMM_WORLD);
  ASSERT_EQ(MPI_Comm_set_errhandler(d, rec_), MPI_SUCCESS);
  int x = 0;
  // Point-to-point, collective, communicator creation, attributes, a stub:
  // each returns its class after the handler saw it, on `d`.
  EXPECT_EQ(MPI_Send(&x, 1, MPI_INT, 5, 0, d), MPI_ERR_RANK);
  EXPECT_EQ(MPI_Recv(&x, 1, MPI_INT, 0, -7, d, MPI_STATUS_IGNORE), MPI_ERR_TAG);
  EXPECT_EQ(MPI_Bcast(&x, 1, MPI_INT, 3, d), MPI_ERR_ROOT);
  EXPECT_EQ(MPI_Allreduce(&x, &x, -1, MPI_INT, MPI_SUM, d), MPI_ERR_COUNT);
  MPI_Comm out = MPI_COMM_NULL;
  EXPECT_EQ(MPI_Comm_split(d, -4, 0, &out), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_set_attr(d, 12345, nullptr), MPI_ERR_KEYVAL);
  MPI_Win win;
  EXPECT_EQ(MPI_Win_create(&x, sizeof x, 1, MPI_INFO_NULL, d, &win), MPI_ERR_UNSUPPORTED_OPERATION);
  const int want[] = {MPI_ERR_RANK, MPI_ERR_TAG, MPI_ERR_ROOT, MPI_ERR_COUNT,
                      MPI_ERR_ARG,  MPI_ERR_KEYVAL, MPI_ERR_UNSUPPORTED_OPERATION};
  ASSERT_EQ(calls().size(), std::size(want));
  for (size_t i = 0; i < calls().size(); ++i) {
    EXPECT_EQ(calls()[i].comm, d) << i;
    EXPECT_EQ(calls()[i].code, want[i]) << i;
  }
  // WORLD kept MPI_ERRORS_RETURN: its errors do not reach the handler.
  calls().clear();
  EXPECT_EQ(MPI_Send(&x, 1, MPI_INT, 5, 0, MPI_COMM_WORLD), MPI_ERR_RANK);
  EXPECT_TRUE(calls().empty());
}

TEST_F(Errh, CallsWithoutACommunicatorUseWorldsHandler) {
  ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_WORLD, rec_), MPI_SUCCESS);
  MPI_Info bad_info = MPI_INFO_NULL;
  EXPECT_EQ(MPI_Info_free(&bad_info), MPI_ERR_INFO);
  int cls = 0;
  EXPECT_EQ(MPI_Error_class(-5, &cls), MPI_ERR_ARG);
  MPI_Group wg = MPI_GROUP_NULL, g = MPI_GROUP_NULL;
  ASSERT_EQ(MPI_Comm_group(MPI_COMM_WORLD, &wg), MPI_SUCCESS);
  const int ranks[] = {7};
  EXPECT_EQ(MPI_Group_incl(wg, 1, ranks, &g), MPI_ERR_RANK);
  ASSERT_EQ(MPI_Group_free(&wg), MPI_SUCCESS);
  int rank = 0;
  // An invalid communicator has no handler of its own: WORLD's applies.
  EXPECT_EQ(MPI_Comm_rank(MPI_COMM_NULL, &rank), MPI_ERR_COMM);
  void* p = nullptr;
  EXPECT_EQ(MPI_Alloc_mem(-1, MPI_INFO_NULL, &p), MPI_ERR_ARG);
  const int want[] = {MPI_ERR_INFO, MPI_ERR_ARG, MPI_ERR_RANK, MPI_ERR_COMM, MPI_ERR_ARG};
  ASSERT_EQ(calls().size(), std::size(want));
  for (size_t i = 0; i < calls().size(); ++i) {
    EXPECT_EQ(calls()[i].comm, MPI_COMM_WORLD) << i;
    EXPECT_EQ(calls()[i].code, want[i]) << i;
  }
}

TEST_F(Errh, NewCommunicatorsInheritTheHandler) {
  const MPI_Comm d = dup(MPI_COMM_WORLD);
  ASSERT_EQ(MPI_Comm_set_errhandler(d, rec_), MPI_SUCCESS);
  const MPI_Comm dd = dup(d);
  MPI_Comm s = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_split(d, 0, 0, &s), MPI_SUCCESS);
  comms_.push_back(s);
  for (MPI_Comm c : {dd, s}) {
    MPI_Errhandler h = MPI_ERRHANDLER_NULL;
    ASSERT_EQ(MPI_Comm_get_errhandler(c, &h), MPI_SUCCESS);
    EXPECT_EQ(h, rec_);
    ASSERT_EQ(MPI_Errhandler_free(&h), MPI_SUCCESS);  // get gave a reference of our own
    EXPECT_EQ(h, MPI_ERRHANDLER_NULL);
  }
  EXPECT_EQ(MPI_Comm_call_errhandler(dd, MPI_ERR_OTHER), MPI_SUCCESS);
  EXPECT_EQ(MPI_Barrier(MPI_COMM_NULL), MPI_ERR_COMM);  // WORLD's handler: returns
  int x = 0;
  EXPECT_EQ(MPI_Send(&x, 1, MPI_INT, 2, 0, s), MPI_ERR_RANK);
  ASSERT_EQ(calls().size(), 2u);
  EXPECT_EQ(calls()[0].comm, dd);
  EXPECT_EQ(calls()[0].code, MPI_ERR_OTHER);
  EXPECT_EQ(calls()[1].comm, s);
  EXPECT_EQ(calls()[1].code, MPI_ERR_RANK);
}

TEST_F(Errh, CallErrhandler) {
  // MPI_ERRORS_RETURN: nothing to call, MPI_SUCCESS.
  EXPECT_EQ(MPI_Comm_call_errhandler(MPI_COMM_SELF, MPI_ERR_TRUNCATE), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_SELF, rec_), MPI_SUCCESS);
  int cls = 0, code = 0;
  ASSERT_EQ(MPI_Add_error_class(&cls), MPI_SUCCESS);
  ASSERT_EQ(MPI_Add_error_code(cls, &code), MPI_SUCCESS);
  EXPECT_EQ(MPI_Comm_call_errhandler(MPI_COMM_SELF, code), MPI_SUCCESS);
  EXPECT_EQ(MPI_Comm_call_errhandler(MPI_COMM_SELF, MPI_ERR_TRUNCATE), MPI_SUCCESS);
  ASSERT_EQ(calls().size(), 2u);
  EXPECT_EQ(calls()[0].comm, MPI_COMM_SELF);
  EXPECT_EQ(calls()[0].code, code);
  EXPECT_EQ(calls()[1].code, MPI_ERR_TRUNCATE);
  // Invalid arguments go through the handler MPI says applies.
  calls().clear();
  EXPECT_EQ(MPI_Comm_call_errhandler(MPI_COMM_SELF, 99999), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_call_errhandler(MPI_COMM_NULL, MPI_ERR_OTHER), MPI_ERR_COMM);
  ASSERT_EQ(calls().size(), 1u);  // the second is WORLD's (ERRORS_RETURN)
  EXPECT_EQ(calls()[0].code, MPI_ERR_ARG);
}

TEST_F(Errh, AHandlerMayCallMpi) {
  MPI_Errhandler h;
  ASSERT_EQ(MPI_Comm_create_errhandler(stringify, &h), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_SELF, h), MPI_SUCCESS);
  ASSERT_EQ(MPI_Errhandler_free(&h), MPI_SUCCESS);
  int x = 0;
  EXPECT_EQ(MPI_Send(&x, 1, MPI_INT, 0, -3, MPI_COMM_SELF), MPI_ERR_TAG);
  EXPECT_EQ(last_string().rfind("MPI_ERR_TAG", 0), 0u) << last_string();
}

TEST_F(Errh, FreeKeepsTheHandlerWhileAttached) {
  MPI_Comm d = dup(MPI_COMM_WORLD);
  MPI_Errhandler h;
  ASSERT_EQ(MPI_Comm_create_errhandler(record, &h), MPI_SUCCESS);
  const MPI_Errhandler handle = h;
  ASSERT_EQ(MPI_Comm_set_errhandler(d, h), MPI_SUCCESS);
  ASSERT_EQ(MPI_Errhandler_free(&h), MPI_SUCCESS);
  EXPECT_EQ(h, MPI_ERRHANDLER_NULL);
  // Still attached: still called, still a valid handle.
  EXPECT_EQ(MPI_Comm_call_errhandler(d, MPI_ERR_OTHER), MPI_SUCCESS);
  EXPECT_EQ(calls().size(), 1u);
  EXPECT_EQ(MPI_Comm_set_errhandler(MPI_COMM_SELF, handle), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN), MPI_SUCCESS);
  // Freed by the application and attached nowhere: gone.
  ASSERT_EQ(MPI_Comm_free(&d), MPI_SUCCESS);
  comms_.clear();
  EXPECT_EQ(MPI_Comm_set_errhandler(MPI_COMM_SELF, handle), MPI_ERR_ARG);
  h = handle;
  EXPECT_EQ(MPI_Errhandler_free(&h), MPI_ERR_ARG);
}

TEST_F(Errh, InvalidHandlers) {
  MPI_Errhandler h;
  EXPECT_EQ(MPI_Comm_create_errhandler(nullptr, &h), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_create_errhandler(record, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRHANDLER_NULL), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_set_errhandler(MPI_COMM_WORLD, rec_ + 1000), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_get_errhandler(MPI_COMM_WORLD, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Errhandler_free(nullptr), MPI_ERR_ARG);
  // Freeing a predefined handler only clears the handle.
  h = MPI_ERRORS_RETURN;
  EXPECT_EQ(MPI_Errhandler_free(&h), MPI_SUCCESS);
  EXPECT_EQ(h, MPI_ERRHANDLER_NULL);
  MPI_Errhandler x;
  ASSERT_EQ(MPI_Comm_create_errhandler(record, &x), MPI_SUCCESS);
  MPI_Errhandler y = x;
  ASSERT_EQ(MPI_Errhandler_free(&x), MPI_SUCCESS);
  EXPECT_EQ(MPI_Errhandler_free(&y), MPI_ERR_ARG);  // freed twice
}

TEST_F(Errh, UserClassesCodesAndStrings) {
  int last0 = 0, flag = 0;
  int* lastp = nullptr;
  ASSERT_EQ(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &lastp, &flag), MPI_SUCCESS);
  ASSERT_EQ(flag, 1);
  last0 = *lastp;
  EXPECT_GE(last0, MPI_ERR_LASTCODE);
  int cls = 0, c1 = 0, c2 = 0, argcode = 0;
  ASSERT_EQ(MPI_Add_error_class(&cls), MPI_SUCCESS);
  EXPECT_GT(cls, MPI_ERR_LASTCODE);
  ASSERT_EQ(MPI_Add_error_code(cls, &c1), MPI_SUCCESS);
  ASSERT_EQ(MPI_Add_error_code(cls, &c2), MPI_SUCCESS);
  ASSERT_EQ(MPI_Add_error_code(MPI_ERR_ARG, &argcode), MPI_SUCCESS);
  EXPECT_NE(c1, c2);
  EXPECT_GT(c1, MPI_ERR_LASTCODE);
  ASSERT_EQ(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &lastp, &flag), MPI_SUCCESS);
  EXPECT_EQ(*lastp, last0 + 4);
  EXPECT_EQ(*lastp, argcode);
  int out = -1;
  ASSERT_EQ(MPI_Error_class(cls, &out), MPI_SUCCESS);
  EXPECT_EQ(out, cls);
  ASSERT_EQ(MPI_Error_class(c2, &out), MPI_SUCCESS);
  EXPECT_EQ(out, cls);
  ASSERT_EQ(MPI_Error_class(argcode, &out), MPI_SUCCESS);
  EXPECT_EQ(out, MPI_ERR_ARG);
  // Strings: "" until set, then exactly the application's; replaceable.
  char s[MPI_MAX_ERROR_STRING];
  int len = -1;
  std::memset(s, 'x', sizeof s);
  ASSERT_EQ(MPI_Error_string(c1, s, &len), MPI_SUCCESS);
  EXPECT_STREQ(s, "");
  EXPECT_EQ(len, 0);
  ASSERT_EQ(MPI_Add_error_string(cls, "the disk is full of cats"), MPI_SUCCESS);
  ASSERT_EQ(MPI_Add_error_string(c1, "first\n"), MPI_SUCCESS);
  ASSERT_EQ(MPI_Add_error_string(c1, "cat number 1"), MPI_SUCCESS);
  ASSERT_EQ(MPI_Error_string(c1, s, &len), MPI_SUCCESS);
  EXPECT_STREQ(s, "cat number 1");
  EXPECT_EQ(len, 12);
  ASSERT_EQ(MPI_Error_string(cls, s, &len), MPI_SUCCESS);
  EXPECT_STREQ(s, "the disk is full of cats");
  // Errors.
  EXPECT_EQ(MPI_Add_error_string(MPI_ERR_ARG, "mine"), MPI_ERR_ARG);  // predefined
  EXPECT_EQ(MPI_Add_error_string(*lastp + 1, "mine"), MPI_ERR_ARG);    // not made yet
  EXPECT_EQ(MPI_Add_error_string(c1, nullptr), MPI_ERR_ARG);
  const std::string too_long(MPI_MAX_ERROR_STRING, 'a');
  EXPECT_EQ(MPI_Add_error_string(c1, too_long.c_str()), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Add_error_string(c1, too_long.substr(1).c_str()), MPI_SUCCESS);
  EXPECT_EQ(MPI_Add_error_code(c1, &out), MPI_ERR_ARG);  // a code, not a class
  EXPECT_EQ(MPI_Add_error_code(*lastp + 10, &out), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Add_error_code(MPI_SUCCESS, &out), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Add_error_class(nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Error_class(*lastp + 1, &out), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Error_string(*lastp + 1, s, &len), MPI_ERR_ARG);
}

// With MPI_ERRORS_ARE_FATAL a user code ends the job, named by its string,
// with its class as exit code. (The death-test child runs the test body
// again in a fresh process, so it makes its own class: the exit code is
// checked to be a user class, the class itself by the message.)
bool exited_with_user_class(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) > MPI_ERR_LASTCODE;
}

TEST_F(Errh, FatalUserCodeNamesItsString) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int cls = 0, code = 0;
  ASSERT_EQ(MPI_Add_error_class(&cls), MPI_SUCCESS);
  ASSERT_EQ(MPI_Add_error_code(cls, &code), MPI_SUCCESS);
  ASSERT_EQ(MPI_Add_error_string(code, "MY ERROR"), MPI_SUCCESS);
  ASSERT_LT(cls, 256);
  const MPI_Comm d = dup(MPI_COMM_WORLD);
  ASSERT_EQ(MPI_Comm_set_errhandler(d, MPI_ERRORS_ARE_FATAL), MPI_SUCCESS);
  EXPECT_EXIT(MPI_Comm_call_errhandler(d, code), exited_with_user_class,
              "bcs: rank 0: MPI_Comm_call_errhandler: MY ERROR: error code [0-9]+ raised by the "
              "application");
  // Without a string: named by number.
  int bare = 0;
  ASSERT_EQ(MPI_Add_error_code(cls, &bare), MPI_SUCCESS);
  EXPECT_EXIT(MPI_Comm_call_errhandler(d, bare), exited_with_user_class,
              "MPI_Comm_call_errhandler: user error code [0-9]+: ");
}

// A handler that raises an error through itself again ends the job
// instead of recursing without end.
void raise_again(MPI_Comm* comm, int*, ...) {
  int x = 0;
  MPI_Send(&x, 1, MPI_INT, 0, -1, *comm);
}

TEST_F(Errh, RunawayHandlerEndsTheJob) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  MPI_Errhandler h;
  ASSERT_EQ(MPI_Comm_create_errhandler(raise_again, &h), MPI_SUCCESS);
  const MPI_Comm d = dup(MPI_COMM_SELF);
  ASSERT_EQ(MPI_Comm_set_errhandler(d, h), MPI_SUCCESS);
  ASSERT_EQ(MPI_Errhandler_free(&h), MPI_SUCCESS);
  int x = 0;
  EXPECT_EXIT(MPI_Send(&x, 1, MPI_INT, 0, -1, d), ::testing::ExitedWithCode(MPI_ERR_TAG),
              "MPI_Send: MPI_ERR_TAG: .*the user error handler kept raising errors");
}

// MPICH's test of MPI_Errhandler_free on predefined communicators at
// finalize: a user handler on WORLD and SELF, freed, then MPI_Finalize.
TEST(ErrhFinalize, UserHandlersOnPredefinedCommunicators) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        unsetenv("BCS_SEGMENT_FD");
        if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) std::exit(101);
        MPI_Errhandler h;
        MPI_Comm_create_errhandler(record, &h);
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, h);
        MPI_Comm_set_errhandler(MPI_COMM_SELF, h);
        MPI_Errhandler_free(&h);
        if (MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER) != MPI_SUCCESS) std::exit(102);
        if (calls().size() != 1) std::exit(103);
        if (MPI_Finalize() != MPI_SUCCESS) std::exit(104);
        std::exit(42);
      },
      ::testing::ExitedWithCode(42), "");
}

}  // namespace
