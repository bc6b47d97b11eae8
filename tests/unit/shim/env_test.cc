// libmpi environment calls in singleton mode: MPI_Alloc_mem/MPI_Free_mem,
// MPI_Pcontrol, MPI_Wtime/MPI_Wtick against the clock they claim, the
// thread level (MPI_THREAD_MULTIPLE refused through `provided`), and the
// calls allowed before MPI_Init and after MPI_Finalize.
#include <mpi.h>
#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "singleton.h"

namespace {

class Env : public SingletonMpi {};

TEST_F(Env, AllocMemGivesUsableAlignedMemory) {
  void* p = nullptr;
  ASSERT_EQ(MPI_Alloc_mem(1 << 20, MPI_INFO_NULL, &p), MPI_SUCCESS);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  std::memset(p, 0xab, 1 << 20);
  EXPECT_EQ(static_cast<unsigned char*>(p)[(1 << 20) - 1], 0xab);
  // It works as a message buffer.
  int* ints = static_cast<int*>(p);
  ints[0] = 41;
  ASSERT_EQ(MPI_Allreduce(MPI_IN_PLACE, ints, 1, MPI_INT, MPI_SUM, MPI_COMM_SELF), MPI_SUCCESS);
  EXPECT_EQ(ints[0], 41);
  ASSERT_EQ(MPI_Free_mem(p), MPI_SUCCESS);
  // Size 0 still gives a block that MPI_Free_mem accepts.
  ASSERT_EQ(MPI_Alloc_mem(0, MPI_INFO_NULL, &p), MPI_SUCCESS);
  EXPECT_NE(p, nullptr);
  EXPECT_EQ(MPI_Free_mem(p), MPI_SUCCESS);
  EXPECT_EQ(MPI_Free_mem(nullptr), MPI_SUCCESS);
}

TEST_F(Env, AllocMemAcceptsInfoHints) {
  MPI_Info info;
  ASSERT_EQ(MPI_Info_create(&info), MPI_SUCCESS);
  ASSERT_EQ(MPI_Info_set(info, "alloc_shared_noncontig", "true"), MPI_SUCCESS);
  void* p = nullptr;
  ASSERT_EQ(MPI_Alloc_mem(100, info, &p), MPI_SUCCESS);
  EXPECT_EQ(MPI_Free_mem(p), MPI_SUCCESS);
  ASSERT_EQ(MPI_Alloc_mem(100, MPI_INFO_ENV, &p), MPI_SUCCESS);
  EXPECT_EQ(MPI_Free_mem(p), MPI_SUCCESS);
  ASSERT_EQ(MPI_Info_free(&info), MPI_SUCCESS);
}

TEST_F(Env, AllocMemErrors) {
  void* p = nullptr;
  // More than any machine has: MPI_ERR_NO_MEM, nothing handed out.
  EXPECT_EQ(MPI_Alloc_mem(static_cast<MPI_Aint>(1) << 62, MPI_INFO_NULL, &p), MPI_ERR_NO_MEM);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(MPI_Alloc_mem(-1, MPI_INFO_NULL, &p), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Alloc_mem(8, MPI_INFO_NULL, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Alloc_mem(8, static_cast<MPI_Info>(4321), &p), MPI_ERR_INFO);
  // Only what MPI_Alloc_mem handed out may be freed, once.
  int local = 0;
  EXPECT_EQ(MPI_Free_mem(&local), MPI_ERR_BASE);
  ASSERT_EQ(MPI_Alloc_mem(8, MPI_INFO_NULL, &p), MPI_SUCCESS);
  ASSERT_EQ(MPI_Free_mem(p), MPI_SUCCESS);
  EXPECT_EQ(MPI_Free_mem(p), MPI_ERR_BASE);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  EXPECT_EXIT(MPI_Alloc_mem(static_cast<MPI_Aint>(1) << 62, MPI_INFO_NULL, &p),
              ::testing::ExitedWithCode(MPI_ERR_NO_MEM),
              "bcs: rank 0: MPI_Alloc_mem: MPI_ERR_NO_MEM: cannot allocate");
}

TEST_F(Env, PcontrolIsAcceptedAndDoesNothing) {
  EXPECT_EQ(MPI_Pcontrol(0), MPI_SUCCESS);
  EXPECT_EQ(MPI_Pcontrol(1), MPI_SUCCESS);
  EXPECT_EQ(MPI_Pcontrol(2, "extra", 3.5), MPI_SUCCESS);
  EXPECT_EQ(MPI_Pcontrol(-7), MPI_SUCCESS);
}

double seconds(clockid_t id, bool resolution) {
  struct timespec ts{};
  if (resolution)
    clock_getres(id, &ts);
  else
    clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

TEST_F(Env, WtimeIsTheMonotonicClockAndWtickItsResolution) {
  // Bracketed by the clock it claims to read: no timing threshold.
  const double before = seconds(CLOCK_MONOTONIC, false);
  const double w = MPI_Wtime();
  const double after = seconds(CLOCK_MONOTONIC, false);
  EXPECT_LE(before, w);
  EXPECT_LE(w, after);
  EXPECT_EQ(MPI_Wtick(), seconds(CLOCK_MONOTONIC, true));
  EXPECT_EQ(PMPI_Wtick(), MPI_Wtick());
  int* global = nullptr;
  int flag = 0;
  ASSERT_EQ(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &global, &flag), MPI_SUCCESS);
  EXPECT_EQ(*global, 0);  // one clock per process
}

TEST_F(Env, OnlyTheInitThreadIsMain) {
  int flag = -1;
  ASSERT_EQ(MPI_Is_thread_main(&flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);
  int other = -1, rc = -1;
  std::thread t([&] { rc = MPI_Is_thread_main(&other); });
  t.join();
  EXPECT_EQ(rc, MPI_SUCCESS);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(MPI_Is_thread_main(nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Query_thread(nullptr), MPI_ERR_ARG);
}

// Each runs in a fresh process: MPI_Init_thread(required) gives
// `provided` = min(required, MPI_THREAD_SERIALIZED) and MPI_Query_thread
// agrees. Exits 42 when right.
void thread_level(int required, int want) {
  unsetenv("BCS_SEGMENT_FD");
  int provided = -1, queried = -1;
  if (MPI_Init_thread(nullptr, nullptr, required, &provided) != MPI_SUCCESS) std::exit(101);
  if (provided != want) std::exit(102);
  if (MPI_Query_thread(&queried) != MPI_SUCCESS || queried != want) std::exit(103);
  if (MPI_Finalize() != MPI_SUCCESS) std::exit(104);
  std::exit(42);
}

TEST(EnvThreads, MultipleIsRefusedThroughProvided) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(thread_level(MPI_THREAD_MULTIPLE, MPI_THREAD_SERIALIZED),
              ::testing::ExitedWithCode(42), "");
  EXPECT_EXIT(thread_level(MPI_THREAD_SERIALIZED, MPI_THREAD_SERIALIZED),
              ::testing::ExitedWithCode(42), "");
  EXPECT_EXIT(thread_level(MPI_THREAD_FUNNELED, MPI_THREAD_FUNNELED),
              ::testing::ExitedWithCode(42), "");
  EXPECT_EXIT(thread_level(MPI_THREAD_SINGLE, MPI_THREAD_SINGLE), ::testing::ExitedWithCode(42),
              "");
}

// Before MPI_Init and after MPI_Finalize: the calls MPI allows then work,
// and Initialized/Finalized tell the phase.
void lifecycle() {
  unsetenv("BCS_SEGMENT_FD");
  int init = -1, fin = -1, v = 0, sv = 0, len = 0;
  char lib[MPI_MAX_LIBRARY_VERSION_STRING];
  char s[MPI_MAX_ERROR_STRING];
  if (MPI_Initialized(&init) || MPI_Finalized(&fin) || init != 0 || fin != 0) std::exit(101);
  if (MPI_Get_version(&v, &sv) || v != 3 || sv != 1) std::exit(102);
  if (MPI_Get_library_version(lib, &len) || std::string(lib).find("bcs") != 0) std::exit(103);
  if (MPI_Error_string(MPI_ERR_COMM, s, &len) || std::string(s).find("MPI_ERR_COMM") != 0)
    std::exit(104);
  if (MPI_Pcontrol(1)) std::exit(105);
  (void)MPI_Wtime();
  if (MPI_Init(nullptr, nullptr)) std::exit(106);
  if (MPI_Initialized(&init) || MPI_Finalized(&fin) || init != 1 || fin != 0) std::exit(107);
  if (MPI_Finalize()) std::exit(108);
  if (MPI_Initialized(&init) || MPI_Finalized(&fin) || init != 1 || fin != 1) std::exit(109);
  if (MPI_Get_version(&v, &sv) || MPI_Error_string(MPI_ERR_COMM, s, &len)) std::exit(110);
  std::exit(42);
}

TEST(EnvLifecycle, BeforeInitAndAfterFinalize) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(lifecycle(), ::testing::ExitedWithCode(42), "");
}

// Calls that need MPI are fatal outside it (no handler applies yet).
TEST(EnvLifecycle, AllocMemBeforeInitIsFatal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        void* p;
        MPI_Alloc_mem(8, MPI_INFO_NULL, &p);
      },
      ::testing::ExitedWithCode(MPI_ERR_OTHER), "MPI_Alloc_mem: MPI_ERR_OTHER: called before MPI_Init");
}

}  // namespace
