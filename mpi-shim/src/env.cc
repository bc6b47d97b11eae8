// Environment (MPI 3.1 chapter 8): the shim's state, init/finalize/abort,
// the thread level, versions, the processor name, Wtime/Wtick, memory
// allocation (MPI_Alloc_mem) and MPI_Pcontrol. Errors and error handlers are
// in errhandler.cc, info objects in info.cc.
//
// - Thread level: MPI_THREAD_SERIALIZED at most. MPI_Init_thread gives
//   min(required, SERIALIZED) in `provided` (MULTIPLE is refused honestly:
//   the request table and counters have no locks), MPI_Query_thread the
//   same; MPI_Is_thread_main is true in the thread that called MPI_Init.
// - MPI_Wtime is CLOCK_MONOTONIC (per process, not global:
//   MPI_WTIME_IS_GLOBAL is 0), MPI_Wtick that clock's resolution.
// - MPI_Alloc_mem is plain process memory (the node managers read and write
//   any rank memory by cross-memory attach, so no registration is needed),
//   aligned to a cache line; info hints are accepted and ignored. The shim
//   remembers what it handed out, so MPI_Free_mem of anything else is
//   MPI_ERR_BASE rather than a corrupted heap.
// - MPI_Pcontrol is accepted at any time and does nothing: bcs has no
//   profiling levels (the monitor, `bcs stats`, is always on).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "mmds.h"
#include "replay.h"
#include "shim.h"

namespace bcs::shim {

namespace {

// Blocks handed out by MPI_Alloc_mem and not freed yet.
std::unordered_set<void*>& allocations() {
  static std::unordered_set<void*> a;
  return a;
}

constexpr size_t kAllocAlign = 64;  // a cache line

double now_seconds() {
  struct timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace
}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

// ------------------------------------------------------------ init / finalize

int bcs_impl_Init_thread(int* argc, char*** argv, int required, int* provided) {
  (void)argc;
  (void)argv;
  Shim& s = S();
  if (s.phase != Phase::before_init)
    return raise_error(kNoComm, "MPI_Init", MPI_ERR_OTHER,
                       s.phase == Phase::running ? "MPI_Init called twice"
                                                 : "MPI_Init called after MPI_Finalize");
  const int e = bcs_init();
  if (e == BCS_OK) {
    s.rank = bcs_world_rank();
    s.size = bcs_world_size();
  } else if (e == BCS_ERR_NOT_INIT) {
    // No node manager: run as a one-rank job (rank 0 of 1) for everything
    // that needs no runtime. Point-to-point calls explain `bcs run`.
    s.singleton = true;
    s.rank = 0;
    s.size = 1;
  } else {
    std::fprintf(stderr,
                 "bcs: MPI_Init: cannot attach to the job's shared segment (%s); this program "
                 "must be started with `bcs run`\n",
                 bcs_text(e));
    bcs_abort(MPI_ERR_OTHER);
  }
  comm_init();
  s.main_thread = pthread_self();
  s.thread_level = std::min(std::max(required, MPI_THREAD_SINGLE), MPI_THREAD_SERIALIZED);
  if (provided) *provided = s.thread_level;
  s.phase = Phase::running;
  mmds::start(s.rank, s.size);
  if (!s.singleton) replay::start(s.rank, s.size, s.thread_level == MPI_THREAD_SERIALIZED);
  return MPI_SUCCESS;
}

int bcs_impl_Init(int* argc, char*** argv) {
  return PMPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, nullptr);
}

int bcs_impl_Initialized(int* flag) {
  if (!flag) return raise_error(kNoComm, "MPI_Initialized", MPI_ERR_ARG, "NULL flag pointer");
  *flag = S().phase != Phase::before_init;
  return MPI_SUCCESS;
}

int bcs_impl_Finalized(int* flag) {
  if (!flag) return raise_error(kNoComm, "MPI_Finalized", MPI_ERR_ARG, "NULL flag pointer");
  *flag = S().phase == Phase::finalized;
  return MPI_SUCCESS;
}

int bcs_impl_Finalize(void) {
  REQUIRE_RUNNING("MPI_Finalize");
  mmds::stop();  // the program's time ends where MPI_Finalize begins
  replay::stop();
  Shim& s = S();
  // MPI: the attributes of MPI_COMM_SELF are deleted first, in the reverse
  // order they were set, while MPI is still fully usable; then WORLD's.
  for (int comm : {kSelf, kWorld})
    if (int e = attr_delete_all(comm))
      return raise_error(comm, "MPI_Finalize", e, "an attribute delete callback of %s failed",
                         comm == kSelf ? "MPI_COMM_SELF" : "MPI_COMM_WORLD");
  if (!s.singleton) {
    // Nobody leaves before everybody arrived: a rank's memory must stay
    // readable by the NM until every message it sent has been delivered.
    const int e = bcs_barrier(coll_context_of(kWorld), BCS_BLOCKING, nullptr);
    if (e != BCS_OK) return raise_bcs(kWorld, "MPI_Finalize", e);
    bcs_finalize();
  }
  s.phase = Phase::finalized;
  return MPI_SUCCESS;
}

int bcs_impl_Abort(MPI_Comm comm, int errorcode) {
  (void)comm;  // every communicator spans at most the world: abort the whole job
  if (S().singleton || S().phase != Phase::running)
    std::fprintf(stderr, "bcs: rank %d: MPI_Abort called with error code %d\n", S().rank,
                 errorcode);
  // Under bcs the node manager reports the abort (it reads it from the segment).
  bcs_abort(errorcode);
}

int bcs_impl_Query_thread(int* provided) {
  REQUIRE_RUNNING("MPI_Query_thread");
  if (!provided) return raise_error(kNoComm, "MPI_Query_thread", MPI_ERR_ARG, "NULL pointer");
  *provided = S().thread_level;
  return MPI_SUCCESS;
}

int bcs_impl_Is_thread_main(int* flag) {
  REQUIRE_RUNNING("MPI_Is_thread_main");
  if (!flag) return raise_error(kNoComm, "MPI_Is_thread_main", MPI_ERR_ARG, "NULL pointer");
  *flag = pthread_equal(pthread_self(), S().main_thread) ? 1 : 0;
  return MPI_SUCCESS;
}

int bcs_impl_Get_version(int* version, int* subversion) {
  if (!version || !subversion)
    return raise_error(kNoComm, "MPI_Get_version", MPI_ERR_ARG, "NULL pointer");
  *version = MPI_VERSION;
  *subversion = MPI_SUBVERSION;
  return MPI_SUCCESS;
}

int bcs_impl_Get_library_version(char* version, int* resultlen) {
  if (!version || !resultlen)
    return raise_error(kNoComm, "MPI_Get_library_version", MPI_ERR_ARG, "NULL pointer");
  const int n = std::snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
                              "bcs %s (Buffered Coscheduling MPI, MPI %d.%d subset)",
                              BCS_VERSION_STRING, MPI_VERSION, MPI_SUBVERSION);
  *resultlen = std::min(n, MPI_MAX_LIBRARY_VERSION_STRING - 1);
  return MPI_SUCCESS;
}

int bcs_impl_Get_processor_name(char* name, int* resultlen) {
  if (!name || !resultlen)
    return raise_error(kNoComm, "MPI_Get_processor_name", MPI_ERR_ARG, "NULL pointer");
  if (gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0) std::snprintf(name, 10, "localhost");
  name[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
  *resultlen = static_cast<int>(std::strlen(name));
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Wtime)
double PMPI_Wtime(void) {
  // Recorded or replayed under bcs run --record-wtime: one branch otherwise.
  if (replay::g_wtime) return replay::wtime(now_seconds());
  return now_seconds();
}

BCS_PMPI_ALIAS(Wtick)
double PMPI_Wtick(void) {
  struct timespec ts{};
  clock_getres(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}


BCS_PMPI_ALIAS(Pcontrol)
int PMPI_Pcontrol(const int level, ...) {
  (void)level;  // no profiling levels: always MPI_SUCCESS, at any time
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ memory

int bcs_impl_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) {
  static const char fn[] = "MPI_Alloc_mem";
  REQUIRE_RUNNING(fn);
  if (size < 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "negative size %ld", static_cast<long>(size));
  if (int e = check_info(kNoComm, fn, info)) return e;
  if (!baseptr) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL baseptr");
  // Size 0 still gets a block of its own, so that MPI_Free_mem accepts it.
  void* p = nullptr;
  if (posix_memalign(&p, kAllocAlign, size > 0 ? static_cast<size_t>(size) : 1) != 0 || !p)
    return raise_error(kNoComm, fn, MPI_ERR_NO_MEM, "cannot allocate %ld bytes",
                       static_cast<long>(size));
  allocations().insert(p);
  *static_cast<void**>(baseptr) = p;
  return MPI_SUCCESS;
}

int bcs_impl_Free_mem(void* base) {
  static const char fn[] = "MPI_Free_mem";
  REQUIRE_RUNNING(fn);
  if (!base) return MPI_SUCCESS;  // like free(NULL)
  if (allocations().erase(base) == 0)
    return raise_error(kNoComm, fn, MPI_ERR_BASE, "%p was not allocated by MPI_Alloc_mem", base);
  std::free(base);
  return MPI_SUCCESS;
}

}  // extern "C"
