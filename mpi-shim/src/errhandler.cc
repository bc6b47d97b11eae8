// Errors (MPI 3.1 §8.3-8.5): error classes and codes, the error path every
// call raises through (raise_error), communicator error handlers (the
// predefined ones and MPI_Comm_create_errhandler's), and the classes, codes
// and strings the application adds.
//
// - Predefined error codes are error classes (MPICH numbering, 0 ..
//   MPI_ERR_LASTCODE). MPI_Add_error_class and MPI_Add_error_code hand out
//   the numbers above MPI_ERR_LASTCODE from one counter, in order; the last
//   one handed out is the MPI_LASTUSEDCODE attribute (attr.cc). A user
//   code's string is "" until MPI_Add_error_string sets it.
// - raise_error is the only error path: every error of every call goes
//   through the handler of its communicator, MPI_COMM_WORLD's for calls
//   without one (MPI 3.1 §8.3). A user handler is called as fn(&comm, &code)
//   and the call then returns the code; MPI_ERRORS_RETURN returns it at
//   once; MPI_ERRORS_ARE_FATAL prints rank, call, class and reason and ends
//   the job with the class as exit code. Outside MPI_Init..MPI_Finalize
//   every error is fatal (no handler applies).
// - User handlers are handles kErrhBase + index. Slots are never reused and
//   a handler's function stays callable while the process lives, so a
//   communicator (also a freed one with requests still pending) keeps its
//   handler whatever the application frees. The *handle* is valid while it
//   is referenced: the application's references (MPI_Comm_create_errhandler
//   and each MPI_Comm_get_errhandler give one, MPI_Errhandler_free drops
//   one) plus the live communicators it is attached to (counted when
//   needed, by walking the communicator table). That is MPI's "deallocated
//   after all the objects associated with it have been deallocated".
// - Window and file error handlers are not implemented (no windows, no
//   files): their calls are generated stubs.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "shim.h"

namespace bcs::shim {
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

static_assert(sizeof(kClasses) / sizeof(kClasses[0]) == MPI_ERR_LASTCODE + 1,
              "error class table out of sync with mpi.h");

// User error handler handles: kErrhBase + slot (MPICH-style kind bits, apart
// from the predefined 0x54000000 range).
constexpr MPI_Errhandler kErrhBase = static_cast<MPI_Errhandler>(0x55000000);
// A user handler that raises an error through itself, again and again, ends
// the job instead of overflowing the stack.
constexpr int kMaxHandlerDepth = 16;

struct UserErrhandler {
  MPI_Comm_errhandler_function* fn = nullptr;
  int user_refs = 0;  // the application's references
};

struct UserCode {
  int cls = 0;       // its error class (itself for a class)
  std::string text;  // MPI_Add_error_string
};

struct Errors {
  std::vector<UserErrhandler> handlers;  // by handle - kErrhBase
  std::vector<UserCode> codes;           // by code - (MPI_ERR_LASTCODE + 1)
  int depth = 0;                         // user handlers running now
  bool peer_gone = false;                // the error being raised says a peer is gone
};

Errors& E() {
  static Errors e;
  return e;
}

bool predefined_errh(MPI_Errhandler h) { return h == MPI_ERRORS_ARE_FATAL || h == MPI_ERRORS_RETURN; }

// Slot of a user handler handle that was ever made, or -1.
int errh_slot(MPI_Errhandler h) {
  const long idx = static_cast<long>(h) - static_cast<long>(kErrhBase);
  return idx >= 0 && idx < static_cast<long>(E().handlers.size()) ? static_cast<int>(idx) : -1;
}

bool attached(MPI_Errhandler h) {
  for (const auto& c : S().comms)
    if (c->live && c->errh == h) return true;
  return false;
}

// A handle the application may name: predefined, or a user handler still
// referenced.
bool errh_valid(MPI_Errhandler h) {
  if (predefined_errh(h)) return true;
  const int k = errh_slot(h);
  return k >= 0 && (E().handlers[static_cast<size_t>(k)].user_refs > 0 || attached(h));
}

const UserCode* user_code(int code) {
  const long idx = static_cast<long>(code) - (MPI_ERR_LASTCODE + 1);
  const auto& t = E().codes;
  return idx >= 0 && idx < static_cast<long>(t.size()) ? &t[static_cast<size_t>(idx)] : nullptr;
}

bool is_class(int code) {
  if (code >= 0 && code <= MPI_ERR_LASTCODE) return true;
  const UserCode* u = user_code(code);
  return u && u->cls == code;
}

int new_code(int cls_or_self) {
  auto& t = E().codes;
  const int code = MPI_ERR_LASTCODE + 1 + static_cast<int>(t.size());
  t.push_back(UserCode{cls_or_self < 0 ? code : cls_or_self, std::string()});
  return code;
}

}  // namespace

const char* class_name(int cls) {
  return cls >= 0 && cls <= MPI_ERR_LASTCODE ? kClasses[cls].name : nullptr;
}

const char* class_text(int cls) {
  return cls >= 0 && cls <= MPI_ERR_LASTCODE ? kClasses[cls].text : nullptr;
}

int error_class_of(int code) {
  if (code >= 0 && code <= MPI_ERR_LASTCODE) return code;
  const UserCode* u = user_code(code);
  return u ? u->cls : -1;
}

int last_used_code() { return MPI_ERR_LASTCODE + static_cast<int>(E().codes.size()); }

int raise_error(int comm, const char* fn, int cls, const char* fmt, ...) {
  Shim& s = S();
  // The communicator's own handler (also after MPI_Comm_free, for requests
  // still pending on it); calls without one use MPI_COMM_WORLD's.
  const size_t idx = comm == kNoComm ? kWorld : static_cast<size_t>(comm);
  const MPI_Errhandler h = idx < s.comms.size() ? s.comms[idx]->errh : MPI_ERRORS_ARE_FATAL;
  bool runaway = false;
  if (s.phase == Phase::running) {
    if (h == MPI_ERRORS_RETURN) return cls;
    const int k = errh_slot(h);
    if (k >= 0) {
      Errors& e = E();
      if (e.depth < kMaxHandlerDepth) {
        // MPI's calling convention: pointers to the communicator and the
        // code. The handler may change them; the call returns the original
        // code, as the error is the call's.
        MPI_Comm handle = comm_handle(static_cast<int>(idx));
        int code = cls;
        MPI_Comm_errhandler_function* f = e.handlers[static_cast<size_t>(k)].fn;
        ++e.depth;
        f(&handle, &code);
        --e.depth;
        return cls;
      }
      runaway = true;
    }
  }
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  // A user code is named by its string; a code from a user callback
  // (attribute copy/delete) may be no code at all.
  char code[48];
  const char* name = class_name(cls);
  const UserCode* u = user_code(cls);
  if (u && !u->text.empty()) {
    name = u->text.c_str();
  } else if (!name) {
    std::snprintf(code, sizeof code, u ? "user error code %d" : "error code %d", cls);
    name = code;
  }
  std::fprintf(stderr, "bcs: rank %d: %s: %s: %s%s\n", s.rank, fn, name, detail,
               runaway ? " (the user error handler kept raising errors: giving up)" : "");
  const int ec = error_class_of(cls);
  // An error that only says a peer is gone follows from that peer's end:
  // the manager names the first cause, not this rank.
  if (E().peer_gone)
    bcs_abort_noticed(ec > 0 && ec < 256 ? ec : MPI_ERR_OTHER);
  bcs_abort(ec > 0 && ec < 256 ? ec : MPI_ERR_OTHER);
}

int bcs_to_class(int e) {
  switch (e) {
    case BCS_OK: return MPI_SUCCESS;
    case BCS_CANCELLED: return MPI_SUCCESS;
    case BCS_ERR_TRUNCATE: return MPI_ERR_TRUNCATE;
    case BCS_ERR_ARG: return MPI_ERR_ARG;
    case BCS_ERR_INTERNAL: return MPI_ERR_INTERN;
    case BCS_ERR_COLL_MISMATCH: return MPI_ERR_OTHER;
    case BCS_ERR_BAD_ADDRESS: return MPI_ERR_BUFFER;
    // Out of request slots or of memory for one: the program holds more
    // requests than this rank has room for.
    case BCS_ERR_NO_RESOURCES: return MPI_ERR_NO_MEM;
    case BCS_ERR_NO_MEM: return MPI_ERR_NO_MEM;
    default: return MPI_ERR_OTHER;
  }
}

const char* bcs_text(int e) {
  switch (e) {
    case BCS_ERR_TRUNCATE: return "message truncated: the message is longer than the receive buffer";
    case BCS_ERR_PEER: return "the peer process is gone (its memory could not be reached)";
    case BCS_ERR_BAD_ADDRESS:
      return "a message buffer is not in its process's memory (bad address: the sender's or "
             "the receiver's)";
    case BCS_ERR_INTERNAL: return "internal error in the bcs runtime";
    case BCS_ERR_ARG: return "invalid argument passed to the bcs runtime";
    case BCS_ERR_NO_RESOURCES:
      return "too many outstanding requests (every slot of this rank's request table is in use)";
    case BCS_ERR_NO_MEM: return "out of memory for another request";
    case BCS_ERR_NOT_INIT: return "not attached to a bcs node manager";
    case BCS_ERR_COLL_MISMATCH:
      return "the members of the communicator called different collectives here (or the same "
             "collective with different roots, counts, operations or datatypes)";
    default: return "unknown bcs error";
  }
}

PeerGoneCause::PeerGoneCause(bool on) { E().peer_gone = on; }
PeerGoneCause::~PeerGoneCause() { E().peer_gone = false; }

int raise_bcs(int comm, const char* fn, int e, size_t cap) {
  const PeerGoneCause mark(e == BCS_ERR_PEER);
  if (e == BCS_ERR_TRUNCATE)
    return raise_error(comm, fn, MPI_ERR_TRUNCATE, "%s (%zu bytes)", bcs_text(e), cap);
  // Name the limit, and how many requests the program holds against it.
  if (e == BCS_ERR_NO_RESOURCES)
    return raise_error(comm, fn, MPI_ERR_NO_MEM,
                       "too many outstanding requests: this rank holds %u, the most its request "
                       "table allows (the job segment's, 2^21 a rank; fewer if BCS_MAX_REQUESTS "
                       "says so); complete or free some first",
                       bcs_request_limit());
  if (e == BCS_ERR_NO_MEM)
    return raise_error(comm, fn, MPI_ERR_NO_MEM,
                       "out of memory for another request: the rank's memory is exhausted "
                       "(its address-space or cgroup limit) with %zu requests outstanding",
                       requests_held());
  return raise_error(comm, fn, bcs_to_class(e), "%s", bcs_text(e));
}

int raise_coll(int comm, const char* fn, int e) {
  if (e == BCS_ERR_TRUNCATE)
    return raise_error(comm, fn, MPI_ERR_TRUNCATE,
                       "a member sent more data than the receive buffer (block) for it holds");
  return raise_bcs(comm, fn, e);
}

}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

// ------------------------------------------------------------ error handlers

int bcs_impl_Comm_create_errhandler(MPI_Comm_errhandler_function* function, MPI_Errhandler* h) {
  static const char fn[] = "MPI_Comm_create_errhandler";
  REQUIRE_RUNNING(fn);
  if (!function) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL handler function");
  if (!h) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL errhandler pointer");
  auto& t = E().handlers;
  t.push_back(UserErrhandler{function, 1});
  *h = kErrhBase + static_cast<MPI_Errhandler>(t.size() - 1);
  return MPI_SUCCESS;
}

int bcs_impl_Comm_set_errhandler(MPI_Comm c, MPI_Errhandler h) {
  static const char fn[] = "MPI_Comm_set_errhandler";
  REQUIRE_RUNNING(fn);
  const int comm = comm_index(c);
  if (comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (!errh_valid(h))
    return raise_error(comm, fn, MPI_ERR_ARG, "invalid error handler 0x%x", h);
  comm_at(comm).errh = h;
  return MPI_SUCCESS;
}

int bcs_impl_Comm_get_errhandler(MPI_Comm c, MPI_Errhandler* h) {
  static const char fn[] = "MPI_Comm_get_errhandler";
  REQUIRE_RUNNING(fn);
  const int comm = comm_index(c);
  if (comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (!h) return raise_error(comm, fn, MPI_ERR_ARG, "NULL pointer");
  *h = comm_at(comm).errh;
  // The application gets a reference of its own, which it may free.
  const int k = errh_slot(*h);
  if (k >= 0) E().handlers[static_cast<size_t>(k)].user_refs++;
  return MPI_SUCCESS;
}

int bcs_impl_Comm_call_errhandler(MPI_Comm c, int errorcode) {
  static const char fn[] = "MPI_Comm_call_errhandler";
  REQUIRE_RUNNING(fn);
  const int comm = comm_index(c);
  if (comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (error_class_of(errorcode) < 0)
    return raise_error(comm, fn, MPI_ERR_ARG, "invalid error code %d", errorcode);
  // MPI: MPI_SUCCESS once the handler was called and returned. With
  // MPI_ERRORS_ARE_FATAL this does not return.
  raise_error(comm, fn, errorcode, "error code %d raised by the application", errorcode);
  return MPI_SUCCESS;
}

int bcs_impl_Errhandler_free(MPI_Errhandler* h) {
  static const char fn[] = "MPI_Errhandler_free";
  if (!h) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL errhandler pointer");
  if (!predefined_errh(*h)) {
    const int k = errh_slot(*h);
    if (k < 0 || E().handlers[static_cast<size_t>(k)].user_refs == 0)
      return raise_error(kNoComm, fn, MPI_ERR_ARG, "invalid error handler 0x%x", *h);
    // The handler stays with the communicators still using it.
    E().handlers[static_cast<size_t>(k)].user_refs--;
  }
  *h = MPI_ERRHANDLER_NULL;
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ classes, codes, strings

int bcs_impl_Error_class(int code, int* cls) {
  const int c = error_class_of(code);
  if (!cls || c < 0)
    return raise_error(kNoComm, "MPI_Error_class", MPI_ERR_ARG, "invalid error code %d", code);
  *cls = c;
  return MPI_SUCCESS;
}

int bcs_impl_Error_string(int code, char* string, int* resultlen) {
  static const char fn[] = "MPI_Error_string";
  if (!string || !resultlen) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL pointer");
  int n;
  if (const char* name = class_name(code)) {
    n = std::snprintf(string, MPI_MAX_ERROR_STRING, "%s: %s", name, class_text(code));
  } else if (const UserCode* u = user_code(code)) {
    // Exactly the application's string ("" if it set none).
    n = std::snprintf(string, MPI_MAX_ERROR_STRING, "%s", u->text.c_str());
  } else {
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "invalid error code %d", code);
  }
  *resultlen = std::min(n, MPI_MAX_ERROR_STRING - 1);
  return MPI_SUCCESS;
}

int bcs_impl_Add_error_class(int* errorclass) {
  static const char fn[] = "MPI_Add_error_class";
  REQUIRE_RUNNING(fn);
  if (!errorclass) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL pointer");
  *errorclass = new_code(-1);
  return MPI_SUCCESS;
}

int bcs_impl_Add_error_code(int errorclass, int* errorcode) {
  static const char fn[] = "MPI_Add_error_code";
  REQUIRE_RUNNING(fn);
  if (!errorcode) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL pointer");
  if (errorclass == MPI_SUCCESS || !is_class(errorclass))
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "%d is not an error class", errorclass);
  *errorcode = new_code(errorclass);
  return MPI_SUCCESS;
}

int bcs_impl_Add_error_string(int errorcode, const char* string) {
  static const char fn[] = "MPI_Add_error_string";
  REQUIRE_RUNNING(fn);
  if (!string) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL string");
  const UserCode* u = user_code(errorcode);
  if (!u)
    return raise_error(kNoComm, fn, MPI_ERR_ARG,
                       "%d is not a code or class made by MPI_Add_error_class/code%s", errorcode,
                       errorcode >= 0 && errorcode <= MPI_ERR_LASTCODE
                           ? " (predefined strings cannot be changed)"
                           : "");
  const size_t len = std::strlen(string);
  if (len >= MPI_MAX_ERROR_STRING)
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "string of %zu characters (at most %d)", len,
                       MPI_MAX_ERROR_STRING - 1);
  E().codes[static_cast<size_t>(errorcode - (MPI_ERR_LASTCODE + 1))].text.assign(string, len);
  return MPI_SUCCESS;
}

}  // extern "C"
