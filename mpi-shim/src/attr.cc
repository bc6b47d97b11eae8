// Attributes (MPI 3.1 §6.7): keyvals with their copy and delete callbacks,
// the values attached to communicators and datatypes, the predefined
// attributes, and the MPI-1 names (MPI_Keyval_create, MPI_Attr_put/get/
// delete).
//
// - A communicator keeps its attributes in the order they were set;
//   MPI_Comm_free and MPI_Finalize (MPI_COMM_SELF first, then WORLD) delete
//   them last-set first, running the delete callbacks. A callback that fails
//   stops the deletion: its attribute stays and the call returns its error.
// - MPI_Comm_dup runs the copy callbacks in the order the attributes were
//   set; MPI_COMM_NULL_COPY_FN (or a NULL callback) copies nothing.
// - A keyval lives while the user holds it or any attribute uses it: after
//   MPI_Comm_free_keyval it can no longer be used in calls, but the
//   attributes that use it still copy and delete with its callbacks.
// - Keyvals are of one kind: communicator (MPI_Comm_create_keyval,
//   MPI_Keyval_create) or datatype (MPI_Type_create_keyval); naming one on
//   the other kind of object is MPI_ERR_KEYVAL.
// - Predefined attributes (MPI_TAG_UB, MPI_HOST, MPI_IO, MPI_WTIME_IS_GLOBAL,
//   MPI_UNIVERSE_SIZE, MPI_APPNUM, MPI_LASTUSEDCODE) are readable on every
//   communicator (a pointer to the int value, as MPI says) and cannot be
//   set, deleted or freed (MPI_ERR_KEYVAL).
// - Datatype attributes work the same way, on any valid datatype
//   (predefined ones too); they are kept here, by datatype handle, not in
//   the datatype table. MPI_Type_dup and MPI_Type_free must call
//   type_attr_copy_all / type_attr_delete_all (shim.h). Errors of datatype
//   attribute calls go through MPI_COMM_WORLD's handler.
#include <algorithm>
#include <unordered_map>

#include "shim.h"

namespace bcs::shim {
namespace {

constexpr int kKeyvalBase = MPI_KEYVAL_INVALID + 1;

bool predefined(int kv) {
  switch (kv) {
    case MPI_TAG_UB:
    case MPI_HOST:
    case MPI_IO:
    case MPI_WTIME_IS_GLOBAL:
    case MPI_UNIVERSE_SIZE:
    case MPI_APPNUM:
    case MPI_LASTUSEDCODE:
      return true;
    default:
      return false;
  }
}

// An object that carries attributes: a communicator or a datatype. `handle`
// is what the callbacks get; `attrs` lives as long as the object (a Comm is
// never destroyed, the datatype lists are nodes of an unordered_map).
struct Obj {
  bool type = false;  // a datatype (else a communicator)
  int handle = 0;
  std::vector<Attr>* attrs = nullptr;
  int err_comm = kNoComm;  // whose error handler reports errors
};

Obj comm_obj(int comm) {
  return Obj{false, comm_handle(comm), &comm_at(comm).attrs, comm};
}

// The attributes of datatypes, by handle. The datatype table (datatype.cc)
// does not carry them, so that it needs no change for attributes: a
// datatype's list is made when the first attribute is set, and MPI_Type_dup
// / MPI_Type_free call type_attr_copy_all / type_attr_delete_all.
std::unordered_map<MPI_Datatype, std::vector<Attr>>& type_attrs() {
  static std::unordered_map<MPI_Datatype, std::vector<Attr>> m;
  return m;
}

Obj type_obj(MPI_Datatype t) { return Obj{true, t, &type_attrs()[t], kNoComm}; }

const char* kind_name(bool type) { return type ? "datatype" : "communicator"; }

// The slot of a keyval handle that still exists (refs > 0), or -1.
int keyval_slot(int kv) {
  const long idx = static_cast<long>(kv) - kKeyvalBase;
  const auto& t = S().keyvals;
  if (idx < 0 || idx >= static_cast<long>(t.size()) || t[static_cast<size_t>(idx)].refs == 0)
    return -1;
  return static_cast<int>(idx);
}

// A keyval the application may still name in a call on an object of kind
// `type`. One the program freed while attributes still use it may name
// those attributes (get, delete: MPI-3.1 6.7.2 lets the program delete them
// "explicitly" after the free) but not new ones (`for_new`).
int usable_keyval(int kv, bool type, bool for_new = false) {
  const int k = keyval_slot(kv);
  if (k < 0) return -1;
  const Keyval& x = S().keyvals[static_cast<size_t>(k)];
  return (!x.user_freed || !for_new) && x.type == type ? k : -1;
}

void release_keyval(int kv) {
  const int k = keyval_slot(kv);
  if (k < 0) return;
  Keyval& x = S().keyvals[static_cast<size_t>(k)];
  if (--x.refs == 0) x = Keyval{};  // the slot is never reused
}

// Runs the delete callback of attribute `kv` = `val` on `o`.
int run_delete(const Obj& o, int kv, void* val) {
  const int k = keyval_slot(kv);
  if (k < 0) return MPI_SUCCESS;
  // Copies: the callback may create keyvals (the table may move). The type
  // and communicator callback types are the same C type (both handles are
  // ints).
  MPI_Comm_delete_attr_function* del = S().keyvals[static_cast<size_t>(k)].del;
  void* extra = S().keyvals[static_cast<size_t>(k)].extra;
  if (del) return del(o.handle, kv, val, extra);
  return MPI_SUCCESS;
}

// Removes attribute `kv` from `o` (after its delete callback succeeded).
void drop_attr(const Obj& o, int kv) {
  auto& v = *o.attrs;
  auto it = std::find_if(v.begin(), v.end(), [kv](const Attr& a) { return a.keyval == kv; });
  if (it == v.end()) return;
  v.erase(it);
  release_keyval(kv);
}

Attr* find_attr(const Obj& o, int kv) {
  auto& v = *o.attrs;
  auto it = std::find_if(v.begin(), v.end(), [kv](const Attr& a) { return a.keyval == kv; });
  return it == v.end() ? nullptr : &*it;
}

int check_comm(const char* fn, MPI_Comm c, Obj* o) {
  REQUIRE_RUNNING(fn);
  const int comm = comm_index(c);
  if (comm == kNoComm)
    return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  *o = comm_obj(comm);
  return MPI_SUCCESS;
}

int check_type(const char* fn, MPI_Datatype t, Obj* o) {
  REQUIRE_RUNNING(fn);
  if (type_size(t) < 0) return raise_error(kNoComm, fn, MPI_ERR_TYPE, "invalid datatype 0x%x", t);
  *o = type_obj(t);
  return MPI_SUCCESS;
}

int bad_keyval(int comm, const char* fn, int kv, bool type) {
  if (predefined(kv))
    return raise_error(comm, fn, MPI_ERR_KEYVAL, "predefined attribute key 0x%x is read-only",
                       kv);
  const int k = keyval_slot(kv);
  if (k >= 0 && S().keyvals[static_cast<size_t>(k)].type != type)
    return raise_error(comm, fn, MPI_ERR_KEYVAL, "attribute key 0x%x is for a %s, not a %s", kv,
                       kind_name(!type), kind_name(type));
  return raise_error(comm, fn, MPI_ERR_KEYVAL, "invalid attribute key 0x%x", kv);
}

int get_predefined(int kv, void* attribute_val) {
  static int tag_ub = kTagUb, host = MPI_PROC_NULL, io = MPI_ANY_SOURCE, wtime_global = 0,
             universe = 1, appnum = 0, lastused = MPI_ERR_LASTCODE;
  universe = S().size;
  lastused = last_used_code();
  int* v = nullptr;
  switch (kv) {
    case MPI_TAG_UB: v = &tag_ub; break;
    case MPI_HOST: v = &host; break;
    case MPI_IO: v = &io; break;
    case MPI_WTIME_IS_GLOBAL: v = &wtime_global; break;
    case MPI_UNIVERSE_SIZE: v = &universe; break;
    case MPI_LASTUSEDCODE: v = &lastused; break;
    default: v = &appnum; break;
  }
  // Predefined attributes are returned as a pointer to the value (MPI rule).
  *static_cast<void**>(attribute_val) = v;
  return MPI_SUCCESS;
}

int get_attr(const char* fn, const Obj& o, int kv, void* attribute_val, int* flag) {
  if (!attribute_val || !flag) return raise_error(o.err_comm, fn, MPI_ERR_ARG, "NULL pointer");
  if (!o.type && predefined(kv)) {
    *flag = 1;
    return get_predefined(kv, attribute_val);
  }
  if (usable_keyval(kv, o.type) < 0) return bad_keyval(o.err_comm, fn, kv, o.type);
  const Attr* a = find_attr(o, kv);
  *flag = a != nullptr;
  if (a) *static_cast<void**>(attribute_val) = a->val;
  return MPI_SUCCESS;
}

int set_attr(const char* fn, const Obj& o, int kv, void* val) {
  if (usable_keyval(kv, o.type, true) < 0) return bad_keyval(o.err_comm, fn, kv, o.type);
  if (Attr* a = find_attr(o, kv)) {
    // Replacing a value deletes the old one first (its callback runs).
    if (int e = run_delete(o, kv, a->val))
      return raise_error(o.err_comm, fn, e, "the delete callback of the old value failed");
    if ((a = find_attr(o, kv))) {
      a->val = val;
      return MPI_SUCCESS;
    }
  }
  o.attrs->push_back(Attr{kv, val});
  S().keyvals[static_cast<size_t>(keyval_slot(kv))].refs++;
  return MPI_SUCCESS;
}

int delete_attr(const char* fn, const Obj& o, int kv) {
  if (usable_keyval(kv, o.type) < 0) return bad_keyval(o.err_comm, fn, kv, o.type);
  const Attr* a = find_attr(o, kv);
  if (!a) return MPI_SUCCESS;  // nothing attached: nothing to delete
  if (int e = run_delete(o, kv, a->val))
    return raise_error(o.err_comm, fn, e, "the attribute's delete callback failed");
  drop_attr(o, kv);
  return MPI_SUCCESS;
}

int create_keyval(const char* fn, bool type, MPI_Comm_copy_attr_function* copy,
                  MPI_Comm_delete_attr_function* del, int* kv, void* extra) {
  REQUIRE_RUNNING(fn);
  if (!kv) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL keyval pointer");
  auto& t = S().keyvals;
  Keyval k;
  k.copy = copy;
  k.del = del;
  k.extra = extra;
  k.type = type;
  k.refs = 1;
  t.push_back(k);
  *kv = kKeyvalBase + static_cast<int>(t.size() - 1);
  return MPI_SUCCESS;
}

int free_keyval(const char* fn, bool type, int* kv) {
  REQUIRE_RUNNING(fn);
  if (!kv) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL keyval pointer");
  const int k = usable_keyval(*kv, type);
  if (k < 0) return bad_keyval(kNoComm, fn, *kv, type);
  // Freed already (the handle was copied) but still used by attributes:
  // nothing more to drop; the key goes with its last attribute.
  if (!S().keyvals[static_cast<size_t>(k)].user_freed) {
    S().keyvals[static_cast<size_t>(k)].user_freed = true;
    release_keyval(*kv);
  }
  *kv = MPI_KEYVAL_INVALID;
  return MPI_SUCCESS;
}

int copy_all(const Obj& from, const Obj& to) {
  const std::vector<Attr> src = *from.attrs;  // callbacks may change the list
  for (const Attr& a : src) {
    const int k = keyval_slot(a.keyval);
    if (k < 0) continue;
    MPI_Comm_copy_attr_function* copy = S().keyvals[static_cast<size_t>(k)].copy;
    void* extra = S().keyvals[static_cast<size_t>(k)].extra;
    if (!copy) continue;
    void* out = nullptr;
    int flag = 0;
    if (int e = copy(from.handle, a.keyval, extra, a.val, &out, &flag)) return e;
    if (!flag) continue;
    to.attrs->push_back(Attr{a.keyval, out});
    S().keyvals[static_cast<size_t>(keyval_slot(a.keyval))].refs++;
  }
  return MPI_SUCCESS;
}

int delete_all(const Obj& o) {
  // Bounded: a callback could attach new attributes to the dying object.
  for (size_t guard = 0; !o.attrs->empty() && guard < (1u << 20); ++guard) {
    const Attr a = o.attrs->back();
    if (int e = run_delete(o, a.keyval, a.val)) return e;
    drop_attr(o, a.keyval);
  }
  return MPI_SUCCESS;
}

}  // namespace

int attr_copy_all(int from, int to) { return copy_all(comm_obj(from), comm_obj(to)); }

int attr_delete_all(int comm) { return delete_all(comm_obj(comm)); }

int type_attr_copy_all(MPI_Datatype from, MPI_Datatype to) {
  auto& m = type_attrs();
  if (m.find(from) == m.end()) return MPI_SUCCESS;  // no attributes: nothing to copy
  return copy_all(type_obj(from), type_obj(to));
}

int type_attr_delete_all(MPI_Datatype t) {
  auto& m = type_attrs();
  if (m.find(t) == m.end()) return MPI_SUCCESS;
  if (int e = delete_all(type_obj(t))) return e;
  m.erase(t);  // the handle may be reused for another datatype
  return MPI_SUCCESS;
}

}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

// ------------------------------------------------------------ predefined callbacks

int MPI_COMM_NULL_COPY_FN(MPI_Comm, int, void*, void*, void*, int* flag) {
  *flag = 0;
  return MPI_SUCCESS;
}

int MPI_COMM_DUP_FN(MPI_Comm, int, void*, void* in, void* out, int* flag) {
  *static_cast<void**>(out) = in;
  *flag = 1;
  return MPI_SUCCESS;
}

int MPI_COMM_NULL_DELETE_FN(MPI_Comm, int, void*, void*) { return MPI_SUCCESS; }

int MPI_NULL_COPY_FN(MPI_Comm c, int kv, void* extra, void* in, void* out, int* flag) {
  return MPI_COMM_NULL_COPY_FN(c, kv, extra, in, out, flag);
}

int MPI_DUP_FN(MPI_Comm c, int kv, void* extra, void* in, void* out, int* flag) {
  return MPI_COMM_DUP_FN(c, kv, extra, in, out, flag);
}

int MPI_NULL_DELETE_FN(MPI_Comm c, int kv, void* val, void* extra) {
  return MPI_COMM_NULL_DELETE_FN(c, kv, val, extra);
}

// The same predefined callbacks for datatype and window attributes.
int MPI_TYPE_NULL_COPY_FN(MPI_Datatype, int, void*, void*, void*, int* flag) {
  *flag = 0;
  return MPI_SUCCESS;
}

int MPI_TYPE_DUP_FN(MPI_Datatype, int, void*, void* in, void* out, int* flag) {
  *static_cast<void**>(out) = in;
  *flag = 1;
  return MPI_SUCCESS;
}

int MPI_TYPE_NULL_DELETE_FN(MPI_Datatype, int, void*, void*) { return MPI_SUCCESS; }

int MPI_WIN_NULL_COPY_FN(MPI_Win, int, void*, void*, void*, int* flag) {
  *flag = 0;
  return MPI_SUCCESS;
}

int MPI_WIN_DUP_FN(MPI_Win, int, void*, void* in, void* out, int* flag) {
  *static_cast<void**>(out) = in;
  *flag = 1;
  return MPI_SUCCESS;
}

int MPI_WIN_NULL_DELETE_FN(MPI_Win, int, void*, void*) { return MPI_SUCCESS; }

// ------------------------------------------------------------ MPI-2 names

int bcs_impl_Comm_create_keyval(MPI_Comm_copy_attr_function* copy, MPI_Comm_delete_attr_function* del,
                            int* kv, void* extra) {
  return create_keyval("MPI_Comm_create_keyval", false, copy, del, kv, extra);
}

int bcs_impl_Comm_free_keyval(int* kv) { return free_keyval("MPI_Comm_free_keyval", false, kv); }

int bcs_impl_Comm_set_attr(MPI_Comm c, int kv, void* val) {
  Obj o;
  if (int e = check_comm("MPI_Comm_set_attr", c, &o)) return e;
  return set_attr("MPI_Comm_set_attr", o, kv, val);
}

int bcs_impl_Comm_get_attr(MPI_Comm c, int kv, void* attribute_val, int* flag) {
  Obj o;
  if (int e = check_comm("MPI_Comm_get_attr", c, &o)) return e;
  return get_attr("MPI_Comm_get_attr", o, kv, attribute_val, flag);
}

int bcs_impl_Comm_delete_attr(MPI_Comm c, int kv) {
  Obj o;
  if (int e = check_comm("MPI_Comm_delete_attr", c, &o)) return e;
  return delete_attr("MPI_Comm_delete_attr", o, kv);
}

// ------------------------------------------------------------ MPI-1 names (deprecated)

int bcs_impl_Keyval_create(MPI_Copy_function* copy, MPI_Delete_function* del, int* kv, void* extra) {
  return create_keyval("MPI_Keyval_create", false, copy, del, kv, extra);
}

int bcs_impl_Keyval_free(int* kv) { return free_keyval("MPI_Keyval_free", false, kv); }

int bcs_impl_Attr_put(MPI_Comm c, int kv, void* val) {
  Obj o;
  if (int e = check_comm("MPI_Attr_put", c, &o)) return e;
  return set_attr("MPI_Attr_put", o, kv, val);
}

int bcs_impl_Attr_get(MPI_Comm c, int kv, void* attribute_val, int* flag) {
  Obj o;
  if (int e = check_comm("MPI_Attr_get", c, &o)) return e;
  return get_attr("MPI_Attr_get", o, kv, attribute_val, flag);
}

int bcs_impl_Attr_delete(MPI_Comm c, int kv) {
  Obj o;
  if (int e = check_comm("MPI_Attr_delete", c, &o)) return e;
  return delete_attr("MPI_Attr_delete", o, kv);
}

// ------------------------------------------------------------ datatype attributes

int bcs_impl_Type_create_keyval(MPI_Type_copy_attr_function* copy, MPI_Type_delete_attr_function* del,
                            int* kv, void* extra) {
  return create_keyval("MPI_Type_create_keyval", true, copy, del, kv, extra);
}

int bcs_impl_Type_free_keyval(int* kv) { return free_keyval("MPI_Type_free_keyval", true, kv); }

int bcs_impl_Type_set_attr(MPI_Datatype t, int kv, void* val) {
  Obj o;
  if (int e = check_type("MPI_Type_set_attr", t, &o)) return e;
  return set_attr("MPI_Type_set_attr", o, kv, val);
}

int bcs_impl_Type_get_attr(MPI_Datatype t, int kv, void* attribute_val, int* flag) {
  Obj o;
  if (int e = check_type("MPI_Type_get_attr", t, &o)) return e;
  return get_attr("MPI_Type_get_attr", o, kv, attribute_val, flag);
}

int bcs_impl_Type_delete_attr(MPI_Datatype t, int kv) {
  Obj o;
  if (int e = check_type("MPI_Type_delete_attr", t, &o)) return e;
  return delete_attr("MPI_Type_delete_attr", o, kv);
}

}  // extern "C"
