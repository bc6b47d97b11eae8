// The MPI tool information interface (MPI_T, MPI-3.1 chapter 14). bcs
// exposes no control or performance variables and no categories yet (the
// runtime's statistics are in the EMDS, over gRPC), so every call is real:
// the counts are zero, each index or name is invalid, and handles cannot be
// made. Sessions can be created and freed, as the standard allows with no
// variables. MPI_T may be used before MPI_Init and after MPI_Finalize.
#include <memory>
#include <mutex>
#include <set>

#include "shim.h"

struct bcs_mpit_pvar_session {
  int unused;
};

namespace {

std::mutex g_mu;
int g_inits = 0;  // MPI_T_init_thread minus MPI_T_finalize
std::set<MPI_T_pvar_session> g_sessions;

bool ready() {
  std::lock_guard<std::mutex> l(g_mu);
  return g_inits > 0;
}

bool live_session(MPI_T_pvar_session s) {
  std::lock_guard<std::mutex> l(g_mu);
  return g_sessions.count(s) != 0;
}

}  // namespace

#define MPIT_READY()                                        \
  do {                                                      \
    if (!ready()) return MPI_T_ERR_NOT_INITIALIZED;         \
  } while (0)

extern "C" {

BCS_PMPI_ALIAS(T_init_thread)
int PMPI_T_init_thread(int required, int* provided) {
  if (provided == nullptr || required < MPI_THREAD_SINGLE || required > MPI_THREAD_MULTIPLE)
    return MPI_T_ERR_INVALID;
  std::lock_guard<std::mutex> l(g_mu);
  ++g_inits;
  // The same honest level as MPI_Init_thread.
  *provided = required > MPI_THREAD_SERIALIZED ? MPI_THREAD_SERIALIZED : required;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(T_finalize)
int PMPI_T_finalize(void) {
  std::lock_guard<std::mutex> l(g_mu);
  if (g_inits == 0) return MPI_T_ERR_NOT_INITIALIZED;
  if (--g_inits == 0) {
    // Sessions die with the last MPI_T_finalize.
    for (MPI_T_pvar_session s : g_sessions) std::unique_ptr<bcs_mpit_pvar_session> own(s);
    g_sessions.clear();
  }
  return MPI_SUCCESS;
}

#define BCS_MPIT_COUNT(fn)                   \
  BCS_PMPI_ALIAS(fn)                         \
  int PMPI_##fn(int* num) {                  \
    MPIT_READY();                            \
    if (num == nullptr) return MPI_T_ERR_INVALID; \
    *num = 0;                                \
    return MPI_SUCCESS;                      \
  }
BCS_MPIT_COUNT(T_cvar_get_num)
BCS_MPIT_COUNT(T_pvar_get_num)
BCS_MPIT_COUNT(T_category_get_num)
#undef BCS_MPIT_COUNT

BCS_PMPI_ALIAS(T_category_changed)
int PMPI_T_category_changed(int* stamp) {
  MPIT_READY();
  if (stamp == nullptr) return MPI_T_ERR_INVALID;
  *stamp = 0;  // the (empty) set of categories never changes
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(T_cvar_get_info)
int PMPI_T_cvar_get_info(int, char*, int*, int*, MPI_Datatype*, MPI_T_enum*, char*, int*, int*,
                         int*) {
  MPIT_READY();
  return MPI_T_ERR_INVALID_INDEX;
}

BCS_PMPI_ALIAS(T_pvar_get_info)
int PMPI_T_pvar_get_info(int, char*, int*, int*, int*, MPI_Datatype*, MPI_T_enum*, char*, int*,
                         int*, int*, int*, int*) {
  MPIT_READY();
  return MPI_T_ERR_INVALID_INDEX;
}

BCS_PMPI_ALIAS(T_category_get_info)
int PMPI_T_category_get_info(int, char*, int*, char*, int*, int*, int*, int*) {
  MPIT_READY();
  return MPI_T_ERR_INVALID_INDEX;
}

#define BCS_MPIT_CATEGORY_LIST(fn)         \
  BCS_PMPI_ALIAS(fn)                       \
  int PMPI_##fn(int, int, int[]) {         \
    MPIT_READY();                          \
    return MPI_T_ERR_INVALID_INDEX;        \
  }
BCS_MPIT_CATEGORY_LIST(T_category_get_categories)
BCS_MPIT_CATEGORY_LIST(T_category_get_cvars)
BCS_MPIT_CATEGORY_LIST(T_category_get_pvars)
#undef BCS_MPIT_CATEGORY_LIST

BCS_PMPI_ALIAS(T_cvar_get_index)
int PMPI_T_cvar_get_index(const char* name, int* index) {
  MPIT_READY();
  if (name == nullptr || index == nullptr) return MPI_T_ERR_INVALID;
  return MPI_T_ERR_INVALID_NAME;
}

BCS_PMPI_ALIAS(T_pvar_get_index)
int PMPI_T_pvar_get_index(const char* name, int, int* index) {
  MPIT_READY();
  if (name == nullptr || index == nullptr) return MPI_T_ERR_INVALID;
  return MPI_T_ERR_INVALID_NAME;
}

BCS_PMPI_ALIAS(T_category_get_index)
int PMPI_T_category_get_index(const char* name, int* index) {
  MPIT_READY();
  if (name == nullptr || index == nullptr) return MPI_T_ERR_INVALID;
  return MPI_T_ERR_INVALID_NAME;
}

BCS_PMPI_ALIAS(T_enum_get_info)
int PMPI_T_enum_get_info(MPI_T_enum, int*, char*, int*) {
  MPIT_READY();
  return MPI_T_ERR_INVALID_HANDLE;  // no variable has an enumeration to hand out
}

BCS_PMPI_ALIAS(T_enum_get_item)
int PMPI_T_enum_get_item(MPI_T_enum, int, int*, char*, int*) {
  MPIT_READY();
  return MPI_T_ERR_INVALID_HANDLE;
}

BCS_PMPI_ALIAS(T_cvar_handle_alloc)
int PMPI_T_cvar_handle_alloc(int, void*, MPI_T_cvar_handle*, int*) {
  MPIT_READY();
  return MPI_T_ERR_INVALID_INDEX;
}

BCS_PMPI_ALIAS(T_cvar_handle_free)
int PMPI_T_cvar_handle_free(MPI_T_cvar_handle*) {
  MPIT_READY();
  return MPI_T_ERR_INVALID_HANDLE;
}

BCS_PMPI_ALIAS(T_cvar_read)
int PMPI_T_cvar_read(MPI_T_cvar_handle, void*) {
  MPIT_READY();
  return MPI_T_ERR_INVALID_HANDLE;
}

BCS_PMPI_ALIAS(T_cvar_write)
int PMPI_T_cvar_write(MPI_T_cvar_handle, const void*) {
  MPIT_READY();
  return MPI_T_ERR_INVALID_HANDLE;
}

BCS_PMPI_ALIAS(T_pvar_session_create)
int PMPI_T_pvar_session_create(MPI_T_pvar_session* session) {
  MPIT_READY();
  if (session == nullptr) return MPI_T_ERR_INVALID;
  auto s = std::make_unique<bcs_mpit_pvar_session>();
  std::lock_guard<std::mutex> l(g_mu);
  *session = s.release();
  g_sessions.insert(*session);
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(T_pvar_session_free)
int PMPI_T_pvar_session_free(MPI_T_pvar_session* session) {
  MPIT_READY();
  if (session == nullptr) return MPI_T_ERR_INVALID;
  std::lock_guard<std::mutex> l(g_mu);
  if (g_sessions.erase(*session) == 0) return MPI_T_ERR_INVALID_SESSION;
  std::unique_ptr<bcs_mpit_pvar_session> own(*session);
  *session = MPI_T_PVAR_SESSION_NULL;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(T_pvar_handle_alloc)
int PMPI_T_pvar_handle_alloc(MPI_T_pvar_session session, int, void*, MPI_T_pvar_handle*, int*) {
  MPIT_READY();
  if (!live_session(session)) return MPI_T_ERR_INVALID_SESSION;
  return MPI_T_ERR_INVALID_INDEX;
}

BCS_PMPI_ALIAS(T_pvar_handle_free)
int PMPI_T_pvar_handle_free(MPI_T_pvar_session session, MPI_T_pvar_handle*) {
  MPIT_READY();
  if (!live_session(session)) return MPI_T_ERR_INVALID_SESSION;
  return MPI_T_ERR_INVALID_HANDLE;
}

// start/stop/reset with MPI_T_PVAR_ALL_HANDLES act on no handles: success.
#define BCS_MPIT_PVAR_OP(fn)                                         \
  BCS_PMPI_ALIAS(fn)                                                 \
  int PMPI_##fn(MPI_T_pvar_session session, MPI_T_pvar_handle h) {   \
    MPIT_READY();                                                    \
    if (!live_session(session)) return MPI_T_ERR_INVALID_SESSION;    \
    return h == MPI_T_PVAR_ALL_HANDLES ? MPI_SUCCESS : MPI_T_ERR_INVALID_HANDLE; \
  }
BCS_MPIT_PVAR_OP(T_pvar_start)
BCS_MPIT_PVAR_OP(T_pvar_stop)
BCS_MPIT_PVAR_OP(T_pvar_reset)
#undef BCS_MPIT_PVAR_OP

BCS_PMPI_ALIAS(T_pvar_read)
int PMPI_T_pvar_read(MPI_T_pvar_session session, MPI_T_pvar_handle, void*) {
  MPIT_READY();
  if (!live_session(session)) return MPI_T_ERR_INVALID_SESSION;
  return MPI_T_ERR_INVALID_HANDLE;
}

BCS_PMPI_ALIAS(T_pvar_readreset)
int PMPI_T_pvar_readreset(MPI_T_pvar_session session, MPI_T_pvar_handle, void*) {
  MPIT_READY();
  if (!live_session(session)) return MPI_T_ERR_INVALID_SESSION;
  return MPI_T_ERR_INVALID_HANDLE;
}

BCS_PMPI_ALIAS(T_pvar_write)
int PMPI_T_pvar_write(MPI_T_pvar_session session, MPI_T_pvar_handle, const void*) {
  MPIT_READY();
  if (!live_session(session)) return MPI_T_ERR_INVALID_SESSION;
  return MPI_T_ERR_INVALID_HANDLE;
}

}  // extern "C"
