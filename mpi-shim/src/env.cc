// Environment: init/finalize/abort, thread level, versions, Wtime, error
// handlers and error classes. Also the shim's state and the error path every
// call raises through.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "shim.h"

namespace bcs::shim {

Shim& S() {
  static Shim s;
  return s;
}

// ------------------------------------------------------------ errors

namespace {

// Name and sentence of every predefined error class, indexed by class.
struct ClassInfo {
  const char* name;
  const char* text;
};
const ClassInfo kClasses[] = {
    {"MPI_SUCCESS", "no error"},
    {"MPI_ERR_BUFFER", "invalid buffer pointer"},
    {"MPI_ERR_COUNT", "invalid count argument"},
    {"MPI_ERR_TYPE", "invalid datatype"},
    {"MPI_ERR_TAG", "invalid tag"},
    {"MPI_ERR_COMM", "invalid communicator"},
    {"MPI_ERR_RANK", "invalid rank"},
    {"MPI_ERR_ROOT", "invalid root"},
    {"MPI_ERR_GROUP", "invalid group"},
    {"MPI_ERR_OP", "invalid reduction operation"},
    {"MPI_ERR_TOPOLOGY", "invalid topology"},
    {"MPI_ERR_DIMS", "invalid dimension argument"},
    {"MPI_ERR_ARG", "invalid argument"},
    {"MPI_ERR_UNKNOWN", "unknown error"},
    {"MPI_ERR_TRUNCATE", "message truncated"},
    {"MPI_ERR_OTHER", "other error"},
    {"MPI_ERR_INTERN", "internal error"},
    {"MPI_ERR_IN_STATUS", "error code is in status"},
    {"MPI_ERR_PENDING", "pending request"},
    {"MPI_ERR_REQUEST", "invalid request"},
    {"MPI_ERR_ACCESS", "permission denied"},
    {"MPI_ERR_AMODE", "invalid file access mode"},
    {"MPI_ERR_BAD_FILE", "invalid file name"},
    {"MPI_ERR_CONVERSION", "data conversion error"},
    {"MPI_ERR_DUP_DATAREP", "data representation already registered"},
    {"MPI_ERR_FILE_EXISTS", "file exists"},
    {"MPI_ERR_FILE_IN_USE", "file in use"},
    {"MPI_ERR_FILE", "invalid file handle"},
    {"MPI_ERR_INFO", "invalid info object"},
    {"MPI_ERR_INFO_KEY", "info key too long"},
    {"MPI_ERR_INFO_VALUE", "info value too long"},
    {"MPI_ERR_INFO_NOKEY", "no such info key"},
    {"MPI_ERR_IO", "I/O error"},
    {"MPI_ERR_NAME", "invalid service name"},
    {"MPI_ERR_NO_MEM", "out of memory"},
    {"MPI_ERR_NOT_SAME", "collective argument not the same on all processes"},
    {"MPI_ERR_NO_SPACE", "no space left"},
    {"MPI_ERR_NO_SUCH_FILE", "no such file"},
    {"MPI_ERR_PORT", "invalid port name"},
    {"MPI_ERR_QUOTA", "quota exceeded"},
    {"MPI_ERR_READ_ONLY", "read-only file or file system"},
    {"MPI_ERR_SERVICE", "invalid service"},
    {"MPI_ERR_SPAWN", "could not spawn processes"},
    {"MPI_ERR_UNSUPPORTED_DATAREP", "unsupported data representation"},
    {"MPI_ERR_UNSUPPORTED_OPERATION", "unsupported operation"},
    {"MPI_ERR_WIN", "invalid window"},
    {"MPI_ERR_BASE", "invalid base address"},
    {"MPI_ERR_LOCKTYPE", "invalid lock type"},
    {"MPI_ERR_KEYVAL", "invalid attribute key"},
    {"MPI_ERR_RMA_CONFLICT", "conflicting accesses to a window"},
    {"MPI_ERR_RMA_SYNC", "wrong synchronisation of RMA calls"},
    {"MPI_ERR_SIZE", "invalid size"},
    {"MPI_ERR_DISP", "invalid displacement"},
    {"MPI_ERR_ASSERT", "invalid assert argument"},
    {"MPI_ERR_RMA_RANGE", "target memory outside the window"},
    {"MPI_ERR_RMA_ATTACH", "memory cannot be attached"},
    {"MPI_ERR_RMA_SHARED", "memory cannot be shared"},
    {"MPI_ERR_RMA_FLAVOR", "wrong window flavor"},
    {"MPI_T_ERR_MEMORY", "out of memory (MPI_T)"},
    {"MPI_T_ERR_NOT_INITIALIZED", "MPI_T not initialized"},
    {"MPI_T_ERR_CANNOT_INIT", "MPI_T cannot be initialized"},
    {"MPI_T_ERR_INVALID_INDEX", "invalid MPI_T index"},
    {"MPI_T_ERR_INVALID_ITEM", "invalid MPI_T item"},
    {"MPI_T_ERR_INVALID_HANDLE", "invalid MPI_T handle"},
    {"MPI_T_ERR_OUT_OF_HANDLES", "no MPI_T handles left"},
    {"MPI_T_ERR_OUT_OF_SESSIONS", "no MPI_T sessions left"},
    {"MPI_T_ERR_INVALID_SESSION", "invalid MPI_T session"},
    {"MPI_T_ERR_CVAR_SET_NOT_NOW", "control variable cannot be set now"},
    {"MPI_T_ERR_CVAR_SET_NEVER", "control variable can never be set"},
    {"MPI_T_ERR_PVAR_NO_STARTSTOP", "performance variable cannot be started or stopped"},
    {"MPI_T_ERR_PVAR_NO_WRITE", "performance variable cannot be written"},
    {"MPI_T_ERR_PVAR_NO_ATOMIC", "performance variable cannot be read and reset atomically"},
    {"MPI_T_ERR_INVALID_NAME", "invalid MPI_T variable name"},
    {"MPI_T_ERR_INVALID", "invalid use of MPI_T"},
};
static_assert(sizeof(kClasses) / sizeof(kClasses[0]) == MPI_ERR_LASTCODE + 1,
              "error class table out of sync with mpi.h");

}  // namespace

const char* class_name(int cls) {
  return cls >= 0 && cls <= MPI_ERR_LASTCODE ? kClasses[cls].name : nullptr;
}

const char* class_text(int cls) {
  return cls >= 0 && cls <= MPI_ERR_LASTCODE ? kClasses[cls].text : nullptr;
}

int raise_error(int comm, const char* fn, int cls, const char* fmt, ...) {
  Shim& s = S();
  // The communicator's own handler (also after MPI_Comm_free, for requests
  // still pending on it); calls without one use MPI_COMM_WORLD's.
  const size_t idx = comm == kNoComm ? kWorld : static_cast<size_t>(comm);
  const MPI_Errhandler h = idx < s.comms.size() ? s.comms[idx]->errh : MPI_ERRORS_ARE_FATAL;
  if (h == MPI_ERRORS_RETURN && s.phase == Phase::running) return cls;
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  // A code from a user callback (attribute copy/delete) may be no class.
  char code[32];
  const char* name = class_name(cls);
  if (!name) {
    std::snprintf(code, sizeof code, "error code %d", cls);
    name = code;
  }
  std::fprintf(stderr, "bcs: rank %d: %s: %s: %s\n", s.rank, fn, name, detail);
  bcs_abort(cls > 0 && cls < 256 ? cls : MPI_ERR_OTHER);
}

int bcs_to_class(int e) {
  switch (e) {
    case BCS_OK: return MPI_SUCCESS;
    case BCS_ERR_TRUNCATE: return MPI_ERR_TRUNCATE;
    case BCS_ERR_ARG: return MPI_ERR_ARG;
    case BCS_ERR_INTERNAL: return MPI_ERR_INTERN;
    case BCS_ERR_COLL_MISMATCH: return MPI_ERR_OTHER;
    default: return MPI_ERR_OTHER;
  }
}

const char* bcs_text(int e) {
  switch (e) {
    case BCS_ERR_TRUNCATE: return "message truncated: the message is longer than the receive buffer";
    case BCS_ERR_PEER: return "the peer process is gone (its memory could not be reached)";
    case BCS_ERR_INTERNAL: return "internal error in the bcs runtime";
    case BCS_ERR_ARG: return "invalid argument passed to the bcs runtime";
    case BCS_ERR_NO_RESOURCES:
      return "too many outstanding requests (the job segment's request table is full)";
    case BCS_ERR_NOT_INIT: return "not attached to a bcs node manager";
    case BCS_ERR_COLL_MISMATCH:
      return "the members of the communicator called different collectives here (or the same "
             "collective with different roots, counts, operations or datatypes)";
    default: return "unknown bcs error";
  }
}

int raise_bcs(int comm, const char* fn, int e, size_t cap) {
  if (e == BCS_ERR_TRUNCATE)
    return raise_error(comm, fn, MPI_ERR_TRUNCATE, "%s (%zu bytes)", bcs_text(e), cap);
  return raise_error(comm, fn, bcs_to_class(e), "%s", bcs_text(e));
}

int raise_coll(int comm, const char* fn, int e) {
  if (e == BCS_ERR_TRUNCATE)
    return raise_error(comm, fn, MPI_ERR_TRUNCATE,
                       "a member sent more data than the receive buffer (block) for it holds");
  return raise_bcs(comm, fn, e);
}

namespace {

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

BCS_PMPI_ALIAS(Init_thread)
int PMPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
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
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Init)
int PMPI_Init(int* argc, char*** argv) {
  return PMPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, nullptr);
}

BCS_PMPI_ALIAS(Initialized)
int PMPI_Initialized(int* flag) {
  if (!flag) return raise_error(kNoComm, "MPI_Initialized", MPI_ERR_ARG, "NULL flag pointer");
  *flag = S().phase != Phase::before_init;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Finalized)
int PMPI_Finalized(int* flag) {
  if (!flag) return raise_error(kNoComm, "MPI_Finalized", MPI_ERR_ARG, "NULL flag pointer");
  *flag = S().phase == Phase::finalized;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Finalize)
int PMPI_Finalize(void) {
  REQUIRE_RUNNING("MPI_Finalize");
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

BCS_PMPI_ALIAS(Abort)
int PMPI_Abort(MPI_Comm comm, int errorcode) {
  (void)comm;  // every communicator spans at most the world: abort the whole job
  if (S().singleton || S().phase != Phase::running)
    std::fprintf(stderr, "bcs: rank %d: MPI_Abort called with error code %d\n", S().rank,
                 errorcode);
  // Under bcs the node manager reports the abort (it reads it from the segment).
  bcs_abort(errorcode);
}

BCS_PMPI_ALIAS(Query_thread)
int PMPI_Query_thread(int* provided) {
  REQUIRE_RUNNING("MPI_Query_thread");
  if (!provided) return raise_error(kNoComm, "MPI_Query_thread", MPI_ERR_ARG, "NULL pointer");
  *provided = S().thread_level;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Is_thread_main)
int PMPI_Is_thread_main(int* flag) {
  REQUIRE_RUNNING("MPI_Is_thread_main");
  if (!flag) return raise_error(kNoComm, "MPI_Is_thread_main", MPI_ERR_ARG, "NULL pointer");
  *flag = pthread_equal(pthread_self(), S().main_thread) ? 1 : 0;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Get_version)
int PMPI_Get_version(int* version, int* subversion) {
  if (!version || !subversion)
    return raise_error(kNoComm, "MPI_Get_version", MPI_ERR_ARG, "NULL pointer");
  *version = MPI_VERSION;
  *subversion = MPI_SUBVERSION;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Get_library_version)
int PMPI_Get_library_version(char* version, int* resultlen) {
  if (!version || !resultlen)
    return raise_error(kNoComm, "MPI_Get_library_version", MPI_ERR_ARG, "NULL pointer");
  const int n = std::snprintf(version, MPI_MAX_LIBRARY_VERSION_STRING,
                              "bcs %s (Buffered Coscheduling MPI, MPI %d.%d subset)",
                              BCS_VERSION_STRING, MPI_VERSION, MPI_SUBVERSION);
  *resultlen = std::min(n, MPI_MAX_LIBRARY_VERSION_STRING - 1);
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Get_processor_name)
int PMPI_Get_processor_name(char* name, int* resultlen) {
  if (!name || !resultlen)
    return raise_error(kNoComm, "MPI_Get_processor_name", MPI_ERR_ARG, "NULL pointer");
  if (gethostname(name, MPI_MAX_PROCESSOR_NAME) != 0) std::snprintf(name, 10, "localhost");
  name[MPI_MAX_PROCESSOR_NAME - 1] = '\0';
  *resultlen = static_cast<int>(std::strlen(name));
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Wtime)
double PMPI_Wtime(void) { return now_seconds(); }

BCS_PMPI_ALIAS(Wtick)
double PMPI_Wtick(void) {
  struct timespec ts{};
  clock_getres(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// ------------------------------------------------------------ error handlers

BCS_PMPI_ALIAS(Comm_set_errhandler)
int PMPI_Comm_set_errhandler(MPI_Comm c, MPI_Errhandler h) {
  REQUIRE_RUNNING("MPI_Comm_set_errhandler");
  const int comm = comm_index(c);
  if (comm == kNoComm)
    return raise_error(kNoComm, "MPI_Comm_set_errhandler", MPI_ERR_COMM,
                       "invalid communicator 0x%x", c);
  if (h != MPI_ERRORS_ARE_FATAL && h != MPI_ERRORS_RETURN)
    return raise_error(comm, "MPI_Comm_set_errhandler", MPI_ERR_ARG,
                       "invalid error handler 0x%x", h);
  comm_at(comm).errh = h;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Comm_get_errhandler)
int PMPI_Comm_get_errhandler(MPI_Comm c, MPI_Errhandler* h) {
  REQUIRE_RUNNING("MPI_Comm_get_errhandler");
  const int comm = comm_index(c);
  if (comm == kNoComm)
    return raise_error(kNoComm, "MPI_Comm_get_errhandler", MPI_ERR_COMM,
                       "invalid communicator 0x%x", c);
  if (!h) return raise_error(comm, "MPI_Comm_get_errhandler", MPI_ERR_ARG, "NULL pointer");
  *h = comm_at(comm).errh;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Errhandler_free)
int PMPI_Errhandler_free(MPI_Errhandler* h) {
  if (!h || (*h != MPI_ERRORS_ARE_FATAL && *h != MPI_ERRORS_RETURN))
    return raise_error(kNoComm, "MPI_Errhandler_free", MPI_ERR_ARG, "invalid error handler");
  *h = MPI_ERRHANDLER_NULL;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Error_class)
int PMPI_Error_class(int code, int* cls) {
  if (!cls || !class_name(code))
    return raise_error(kNoComm, "MPI_Error_class", MPI_ERR_ARG, "invalid error code %d", code);
  *cls = code;  // error codes are error classes in this implementation
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Error_string)
int PMPI_Error_string(int code, char* string, int* resultlen) {
  if (!string || !resultlen)
    return raise_error(kNoComm, "MPI_Error_string", MPI_ERR_ARG, "NULL pointer");
  const char* name = class_name(code);
  if (!name)
    return raise_error(kNoComm, "MPI_Error_string", MPI_ERR_ARG, "invalid error code %d", code);
  const int n = std::snprintf(string, MPI_MAX_ERROR_STRING, "%s: %s", name, class_text(code));
  *resultlen = std::min(n, MPI_MAX_ERROR_STRING - 1);
  return MPI_SUCCESS;
}

}  // extern "C"
