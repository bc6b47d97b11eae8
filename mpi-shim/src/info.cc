// Info objects (MPI 3.1 chapter 9), the predefined MPI_INFO_ENV (§8.8) and
// communicator info (§6.4.4).
//
// - An info object is its (key, value) pairs in the order the keys were
//   first set: setting a key again replaces its value in place,
//   MPI_Info_delete removes the pair (MPI_ERR_INFO_NOKEY if there is none),
//   MPI_Info_get_nthkey counts in that order, MPI_Info_dup copies the lot.
// - Keys have 1 .. MPI_MAX_INFO_KEY characters (else MPI_ERR_INFO_KEY),
//   values at most MPI_MAX_INFO_VAL (else MPI_ERR_INFO_VALUE).
//   MPI_Info_get copies at most `valuelen` characters and a NUL (so the
//   buffer holds valuelen + 1); MPI_Info_get_valuelen gives the length
//   without the NUL.
// - Handles are kInfoBase + slot. Slot 1 is MPI_INFO_ENV: predefined and
//   read-only (set, delete and free are MPI_ERR_INFO). Freed slots are reused.
//   MPI_INFO_NULL and anything else that is no live object is MPI_ERR_INFO.
// - Info calls have no communicator: their errors go through
//   MPI_COMM_WORLD's handler. They work before MPI_Init and after
//   MPI_Finalize too, as MPI 4.0 allows (an error there is fatal: no handler
//   applies yet).
// - MPI_INFO_ENV holds what bcs knows truthfully: "command" and "argv" (from
//   /proc/self/cmdline, arguments separated by spaces), "maxprocs" (the
//   world size, once MPI_Init ran), "host" (this host's name), "arch"
//   (uname's machine) and "wdir" (the working directory). A value that would
//   not fit in MPI_MAX_INFO_VAL is left out rather than cut. It is built when
//   first read and again when MPI_Init or MPI_Finalize ran since.
// - Communicators use no hints: MPI_Comm_set_info checks its arguments and
//   keeps nothing, and MPI_Comm_get_info returns a new, empty info object
//   (MPI: the hints "actually used"; none are).
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "shim.h"

namespace bcs::shim {
namespace {

constexpr MPI_Info kInfoBase = MPI_INFO_ENV - 1;
constexpr size_t kEnvSlot = 1;

struct InfoObj {
  bool used = false;
  std::vector<std::pair<std::string, std::string>> kv;

  std::pair<std::string, std::string>* find(const char* key) {
    auto it = std::find_if(kv.begin(), kv.end(), [key](const auto& p) { return p.first == key; });
    return it == kv.end() ? nullptr : &*it;
  }
};

struct Infos {
  std::vector<InfoObj> t = std::vector<InfoObj>(kEnvSlot + 1);  // slot 0 is never a handle
  std::vector<size_t> free_slots;
  bool env_built = false;
  Phase env_phase = Phase::before_init;
};

Infos& I() {
  static Infos i;
  return i;
}

// The command line of this process, from the kernel: right whatever
// MPI_Init was given (or not given).
std::vector<std::string> command_line() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  while (start < all.size()) {
    const size_t end = all.find('\0', start);
    args.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return args;
}

void build_env(InfoObj& o) {
  o.used = true;
  o.kv.clear();
  auto add = [&o](const char* key, std::string v) {
    if (!v.empty() && v.size() < MPI_MAX_INFO_VAL) o.kv.emplace_back(key, std::move(v));
  };
  const std::vector<std::string> args = command_line();
  if (!args.empty()) add("command", args[0]);
  std::string argv;
  for (size_t i = 1; i < args.size(); ++i) argv += (i > 1 ? " " : "") + args[i];
  add("argv", argv);
  // The same before MPI_Init (MPI_Info_create_env may be called then) as
  // after: the launcher's count, which bcs run also gives every rank as
  // BCS_SIZE; 1 for a singleton.
  int maxprocs = 1;
  if (S().phase != Phase::before_init) {
    maxprocs = S().size;
  } else if (const char* e = std::getenv("BCS_SIZE")) {
    char* end = nullptr;
    const long v = std::strtol(e, &end, 10);
    if (end != e && *end == '\0' && v > 0 && v <= INT_MAX) maxprocs = static_cast<int>(v);
  }
  add("maxprocs", std::to_string(maxprocs));
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) add("host", host);
  struct utsname u{};
  if (uname(&u) == 0) add("arch", u.machine);
  std::vector<char> cwd(4096);
  if (getcwd(cwd.data(), cwd.size())) add("wdir", cwd.data());
}

// The object of a live info handle (MPI_INFO_ENV included), or null.
InfoObj* lookup(MPI_Info h) {
  Infos& s = I();
  const long slot = static_cast<long>(h) - static_cast<long>(kInfoBase);
  if (slot < static_cast<long>(kEnvSlot) || slot >= static_cast<long>(s.t.size())) return nullptr;
  InfoObj& o = s.t[static_cast<size_t>(slot)];
  if (static_cast<size_t>(slot) == kEnvSlot && (!s.env_built || s.env_phase != S().phase)) {
    build_env(o);
    s.env_built = true;
    s.env_phase = S().phase;
  }
  return o.used ? &o : nullptr;
}

int bad_info(int comm, const char* fn, MPI_Info h) {
  if (h == MPI_INFO_NULL) return raise_error(comm, fn, MPI_ERR_INFO, "MPI_INFO_NULL is no info object");
  return raise_error(comm, fn, MPI_ERR_INFO, "invalid info object 0x%x", h);
}

// The info object `h`, or an error. `writable`: MPI_INFO_ENV is refused.
int get_info(const char* fn, MPI_Info h, bool writable, InfoObj** out) {
  *out = lookup(h);
  if (!*out) return bad_info(kNoComm, fn, h);
  if (writable && h == MPI_INFO_ENV)
    return raise_error(kNoComm, fn, MPI_ERR_INFO, "MPI_INFO_ENV is predefined and read-only");
  return MPI_SUCCESS;
}

int check_key(const char* fn, const char* key) {
  if (!key) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL key");
  const size_t n = strnlen(key, MPI_MAX_INFO_KEY + 1);
  if (n == 0) return raise_error(kNoComm, fn, MPI_ERR_INFO_KEY, "empty key");
  if (n > MPI_MAX_INFO_KEY)
    return raise_error(kNoComm, fn, MPI_ERR_INFO_KEY, "key longer than MPI_MAX_INFO_KEY (%d)",
                       MPI_MAX_INFO_KEY);
  return MPI_SUCCESS;
}

MPI_Info new_info(std::vector<std::pair<std::string, std::string>> kv) {
  Infos& s = I();
  size_t slot;
  if (!s.free_slots.empty()) {
    slot = s.free_slots.back();
    s.free_slots.pop_back();
  } else {
    slot = s.t.size();
    s.t.emplace_back();
  }
  s.t[slot].used = true;
  s.t[slot].kv = std::move(kv);
  return kInfoBase + static_cast<MPI_Info>(slot);
}

}  // namespace

int check_info(int comm, const char* fn, MPI_Info info) {
  if (info == MPI_INFO_NULL || lookup(info)) return MPI_SUCCESS;
  return bad_info(comm, fn, info);
}

}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

// ------------------------------------------------------------ info objects

int bcs_impl_Info_create(MPI_Info* info) {
  if (!info) return raise_error(kNoComm, "MPI_Info_create", MPI_ERR_ARG, "NULL info pointer");
  *info = new_info({});
  return MPI_SUCCESS;
}

int bcs_impl_Info_set(MPI_Info info, const char* key, const char* value) {
  static const char fn[] = "MPI_Info_set";
  InfoObj* o;
  if (int e = get_info(fn, info, true, &o)) return e;
  if (int e = check_key(fn, key)) return e;
  if (!value) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL value");
  const size_t n = strnlen(value, MPI_MAX_INFO_VAL + 1);
  if (n > MPI_MAX_INFO_VAL)
    return raise_error(kNoComm, fn, MPI_ERR_INFO_VALUE,
                       "value of key \"%s\" longer than MPI_MAX_INFO_VAL (%d)", key,
                       MPI_MAX_INFO_VAL);
  if (auto* p = o->find(key))
    p->second.assign(value, n);
  else
    o->kv.emplace_back(key, std::string(value, n));
  return MPI_SUCCESS;
}

int bcs_impl_Info_delete(MPI_Info info, const char* key) {
  static const char fn[] = "MPI_Info_delete";
  InfoObj* o;
  if (int e = get_info(fn, info, true, &o)) return e;
  if (int e = check_key(fn, key)) return e;
  auto* p = o->find(key);
  if (!p) return raise_error(kNoComm, fn, MPI_ERR_INFO_NOKEY, "no key \"%s\"", key);
  o->kv.erase(o->kv.begin() + (p - o->kv.data()));
  return MPI_SUCCESS;
}

int bcs_impl_Info_get(MPI_Info info, const char* key, int valuelen, char* value, int* flag) {
  static const char fn[] = "MPI_Info_get";
  InfoObj* o;
  if (int e = get_info(fn, info, false, &o)) return e;
  if (int e = check_key(fn, key)) return e;
  if (valuelen < 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "negative valuelen %d", valuelen);
  if (!value || !flag) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL pointer");
  const auto* p = o->find(key);
  *flag = p != nullptr;
  if (p) {
    // At most valuelen characters, then the NUL (MPI: the buffer has
    // valuelen + 1 characters).
    const size_t n = std::min(p->second.size(), static_cast<size_t>(valuelen));
    std::memcpy(value, p->second.data(), n);
    value[n] = '\0';
  }
  return MPI_SUCCESS;
}

// MPI 4.0: the value and its length in one call. *buflen says how many
// characters `value` holds (the NUL included) and comes back as the
// value's length plus one; a value that does not fit is cut to
// *buflen - 1 characters. With *buflen 0, `value` may be NULL.
int bcs_impl_Info_get_string(MPI_Info info, const char* key, int* buflen, char* value,
                             int* flag) {
  static const char fn[] = "MPI_Info_get_string";
  InfoObj* o;
  if (int e = get_info(fn, info, false, &o)) return e;
  if (int e = check_key(fn, key)) return e;
  if (!buflen || !flag) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL pointer");
  if (*buflen < 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "negative *buflen %d", *buflen);
  if (*buflen > 0 && !value) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL value");
  const auto* p = o->find(key);
  *flag = p != nullptr;
  if (!p) return MPI_SUCCESS;
  if (*buflen > 0) {
    const size_t n = std::min(p->second.size(), static_cast<size_t>(*buflen - 1));
    std::memcpy(value, p->second.data(), n);
    value[n] = '\0';
  }
  *buflen = static_cast<int>(p->second.size()) + 1;
  return MPI_SUCCESS;
}

// MPI 4.0: a new info object holding what MPI_INFO_ENV does (callable
// before MPI_Init and after MPI_Finalize, as every info call).
int bcs_impl_Info_create_env(int argc, char* argv[], MPI_Info* info) {
  static const char fn[] = "MPI_Info_create_env";
  (void)argc;  // the command line is read from the process, as for MPI_INFO_ENV
  (void)argv;
  if (!info) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL info pointer");
  InfoObj* env;
  if (int e = get_info(fn, MPI_INFO_ENV, false, &env)) return e;
  *info = new_info(env->kv);
  return MPI_SUCCESS;
}

int bcs_impl_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag) {
  static const char fn[] = "MPI_Info_get_valuelen";
  InfoObj* o;
  if (int e = get_info(fn, info, false, &o)) return e;
  if (int e = check_key(fn, key)) return e;
  if (!valuelen || !flag) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL pointer");
  const auto* p = o->find(key);
  *flag = p != nullptr;
  if (p) *valuelen = static_cast<int>(p->second.size());
  return MPI_SUCCESS;
}

int bcs_impl_Info_get_nkeys(MPI_Info info, int* nkeys) {
  static const char fn[] = "MPI_Info_get_nkeys";
  InfoObj* o;
  if (int e = get_info(fn, info, false, &o)) return e;
  if (!nkeys) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL pointer");
  *nkeys = static_cast<int>(o->kv.size());
  return MPI_SUCCESS;
}

int bcs_impl_Info_get_nthkey(MPI_Info info, int n, char* key) {
  static const char fn[] = "MPI_Info_get_nthkey";
  InfoObj* o;
  if (int e = get_info(fn, info, false, &o)) return e;
  if (!key) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL key buffer");
  if (n < 0 || static_cast<size_t>(n) >= o->kv.size())
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "key number %d out of range (%zu keys)", n,
                       o->kv.size());
  const std::string& k = o->kv[static_cast<size_t>(n)].first;
  std::memcpy(key, k.c_str(), k.size() + 1);
  return MPI_SUCCESS;
}

int bcs_impl_Info_dup(MPI_Info info, MPI_Info* newinfo) {
  static const char fn[] = "MPI_Info_dup";
  InfoObj* o;
  if (int e = get_info(fn, info, false, &o)) return e;
  if (!newinfo) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL newinfo pointer");
  *newinfo = new_info(o->kv);  // copied before new_info may grow the table
  return MPI_SUCCESS;
}

int bcs_impl_Info_free(MPI_Info* info) {
  static const char fn[] = "MPI_Info_free";
  if (!info) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL info pointer");
  InfoObj* o;
  if (int e = get_info(fn, *info, true, &o)) return e;
  o->used = false;
  o->kv.clear();
  o->kv.shrink_to_fit();
  I().free_slots.push_back(static_cast<size_t>(*info - kInfoBase));
  *info = MPI_INFO_NULL;
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ communicator info

int bcs_impl_Comm_set_info(MPI_Comm c, MPI_Info info) {
  static const char fn[] = "MPI_Comm_set_info";
  REQUIRE_RUNNING(fn);
  const int comm = comm_index(c);
  if (comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  // MPI_INFO_NULL is not an info object here (MPI: "info (handle)").
  if (!lookup(info)) return bad_info(comm, fn, info);
  return MPI_SUCCESS;  // no hints are used
}

int bcs_impl_Comm_get_info(MPI_Comm c, MPI_Info* info_used) {
  static const char fn[] = "MPI_Comm_get_info";
  REQUIRE_RUNNING(fn);
  const int comm = comm_index(c);
  if (comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (!info_used) return raise_error(comm, fn, MPI_ERR_ARG, "NULL info pointer");
  *info_used = new_info({});  // the hints in use: none
  return MPI_SUCCESS;
}

}  // extern "C"
