// The parts of the MPI-3.1 interface that come from the API list
// (mpi-shim/api/mpi.api): calls not implemented yet raise
// MPI_ERR_UNSUPPORTED_OPERATION naming themselves, the language
// interoperability calls, address arithmetic, every error class's string,
// and the tool information interface. (Every stub is also called once by the
// generated program behind the mpi_stub_calls test.)
#include <mpi.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "singleton.h"

namespace {

class Api : public SingletonMpi {};

TEST_F(Api, UnimplementedCallReturnsUnsupportedOperationUnderErrorsReturn) {
  MPI_Win win = MPI_WIN_NULL;
  int buf = 0;
  EXPECT_EQ(MPI_Win_create(&buf, sizeof buf, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win),
            MPI_ERR_UNSUPPORTED_OPERATION);
  EXPECT_EQ(win, MPI_WIN_NULL);  // nothing pretended
  int cls = -1;
  ASSERT_EQ(MPI_Error_class(MPI_ERR_UNSUPPORTED_OPERATION, &cls), MPI_SUCCESS);
  EXPECT_EQ(cls, MPI_ERR_UNSUPPORTED_OPERATION);
}

TEST_F(Api, UnimplementedCallAbortsNamingRankAndCallUnderTheDefaultHandler) {
  ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL), MPI_SUCCESS);
  MPI_Win win = MPI_WIN_NULL;
  int buf = 0;
  EXPECT_EXIT(MPI_Win_create(&buf, sizeof buf, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win),
              ::testing::ExitedWithCode(MPI_ERR_UNSUPPORTED_OPERATION),
              "rank 0: MPI_Win_create: MPI_ERR_UNSUPPORTED_OPERATION: MPI_Win_create is not "
              "implemented");
}

TEST_F(Api, UnimplementedCallUsesTheHandlerOfItsCommunicator) {
  // WORLD is fatal, SELF returns: a call on SELF must return the error.
  ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL), MPI_SUCCESS);
  MPI_Win win = MPI_WIN_NULL;
  int buf = 0;
  EXPECT_EQ(MPI_Win_create(&buf, sizeof buf, 1, MPI_INFO_NULL, MPI_COMM_SELF, &win),
            MPI_ERR_UNSUPPORTED_OPERATION);
}

TEST_F(Api, FileCallsReturnTheErrorAsTheDefaultFileHandlerSays) {
  ASSERT_EQ(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL), MPI_SUCCESS);
  MPI_File fh = MPI_FILE_NULL;
  EXPECT_EQ(MPI_File_open(MPI_COMM_SELF, "/nonexistent/x", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh),
            MPI_ERR_UNSUPPORTED_OPERATION);
  EXPECT_EQ(fh, MPI_FILE_NULL);
}

TEST_F(Api, HandlesConvertToFortranAndBack) {
  EXPECT_EQ(MPI_Comm_f2c(MPI_Comm_c2f(MPI_COMM_WORLD)), MPI_COMM_WORLD);
  EXPECT_EQ(MPI_Type_f2c(MPI_Type_c2f(MPI_DOUBLE)), MPI_DOUBLE);
  EXPECT_EQ(MPI_Op_f2c(MPI_Op_c2f(MPI_SUM)), MPI_SUM);
  EXPECT_EQ(MPI_Group_f2c(MPI_Group_c2f(MPI_GROUP_EMPTY)), MPI_GROUP_EMPTY);
  EXPECT_EQ(MPI_Request_f2c(MPI_Request_c2f(MPI_REQUEST_NULL)), MPI_REQUEST_NULL);
  EXPECT_EQ(MPI_Info_f2c(MPI_Info_c2f(MPI_INFO_NULL)), MPI_INFO_NULL);
  EXPECT_EQ(MPI_Errhandler_f2c(MPI_Errhandler_c2f(MPI_ERRORS_RETURN)), MPI_ERRORS_RETURN);
  EXPECT_EQ(MPI_Message_f2c(MPI_Message_c2f(MPI_MESSAGE_NO_PROC)), MPI_MESSAGE_NO_PROC);
  EXPECT_EQ(MPI_Win_f2c(MPI_Win_c2f(MPI_WIN_NULL)), MPI_WIN_NULL);
  EXPECT_EQ(MPI_File_f2c(MPI_File_c2f(MPI_FILE_NULL)), MPI_FILE_NULL);
}

TEST_F(Api, StatusConvertsToFortranAndBackKeepingLargeCounts) {
  MPI_Status st{};
  st.MPI_SOURCE = 3;
  st.MPI_TAG = 77;
  st.MPI_ERROR = MPI_ERR_TRUNCATE;
  st.bcs_count = (5LL << 32) + 12345;  // more than 2^32 bytes
  MPI_Fint f[MPI_STATUS_SIZE];
  ASSERT_EQ(MPI_Status_c2f(&st, f), MPI_SUCCESS);
  MPI_Status back{};
  ASSERT_EQ(MPI_Status_f2c(f, &back), MPI_SUCCESS);
  EXPECT_EQ(back.MPI_SOURCE, 3);
  EXPECT_EQ(back.MPI_TAG, 77);
  EXPECT_EQ(back.MPI_ERROR, MPI_ERR_TRUNCATE);
  EXPECT_EQ(back.bcs_count, st.bcs_count);
  EXPECT_EQ(MPI_Status_c2f(MPI_STATUS_IGNORE, f), MPI_ERR_ARG);
}

TEST_F(Api, AddressArithmetic) {
  char block[64];
  MPI_Aint a = reinterpret_cast<MPI_Aint>(&block[0]);
  MPI_Aint b = reinterpret_cast<MPI_Aint>(&block[40]);
  EXPECT_EQ(MPI_Aint_diff(b, a), 40);
  EXPECT_EQ(MPI_Aint_add(a, 40), b);
  EXPECT_EQ(MPI_Aint_add(b, -40), a);
}

TEST_F(Api, EveryErrorClassHasAStringNamingIt) {
  for (int cls = MPI_SUCCESS; cls <= MPI_ERR_LASTCODE; ++cls) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    ASSERT_EQ(MPI_Error_string(cls, s, &len), MPI_SUCCESS) << cls;
    EXPECT_EQ(static_cast<size_t>(len), std::strlen(s));
    EXPECT_EQ(std::string(s).rfind("MPI_", 0), 0u) << cls << ": " << s;
  }
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  ASSERT_EQ(MPI_Error_string(MPI_ERR_RMA_FLAVOR, s, &len), MPI_SUCCESS);
  EXPECT_STREQ(s, "MPI_ERR_RMA_FLAVOR: wrong window flavor");
}

TEST_F(Api, ToolInterfaceHasNoVariablesAndSaysSo) {
  int num = -1;
  EXPECT_EQ(MPI_T_cvar_get_num(&num), MPI_T_ERR_NOT_INITIALIZED);
  int provided = -1;
  ASSERT_EQ(MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided), MPI_SUCCESS);
  EXPECT_EQ(provided, MPI_THREAD_SERIALIZED);
  ASSERT_EQ(MPI_T_cvar_get_num(&num), MPI_SUCCESS);
  EXPECT_EQ(num, 0);
  ASSERT_EQ(MPI_T_pvar_get_num(&num), MPI_SUCCESS);
  EXPECT_EQ(num, 0);
  ASSERT_EQ(MPI_T_category_get_num(&num), MPI_SUCCESS);
  EXPECT_EQ(num, 0);
  EXPECT_EQ(MPI_T_cvar_get_info(0, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                nullptr, nullptr),
            MPI_T_ERR_INVALID_INDEX);
  int idx = -1;
  EXPECT_EQ(MPI_T_cvar_get_index("bcs_slice_us", &idx), MPI_T_ERR_INVALID_NAME);
  MPI_T_pvar_session session = MPI_T_PVAR_SESSION_NULL;
  ASSERT_EQ(MPI_T_pvar_session_create(&session), MPI_SUCCESS);
  EXPECT_NE(session, MPI_T_PVAR_SESSION_NULL);
  EXPECT_EQ(MPI_T_pvar_start(session, MPI_T_PVAR_ALL_HANDLES), MPI_SUCCESS);
  MPI_T_pvar_handle h = MPI_T_PVAR_HANDLE_NULL;
  EXPECT_EQ(MPI_T_pvar_handle_alloc(session, 0, nullptr, &h, &num), MPI_T_ERR_INVALID_INDEX);
  ASSERT_EQ(MPI_T_pvar_session_free(&session), MPI_SUCCESS);
  EXPECT_EQ(session, MPI_T_PVAR_SESSION_NULL);
  EXPECT_EQ(MPI_T_pvar_start(session, MPI_T_PVAR_ALL_HANDLES), MPI_T_ERR_INVALID_SESSION);
  ASSERT_EQ(MPI_T_finalize(), MPI_SUCCESS);
  EXPECT_EQ(MPI_T_finalize(), MPI_T_ERR_NOT_INITIALIZED);
}

}  // namespace
