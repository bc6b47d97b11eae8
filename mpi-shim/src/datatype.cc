// Datatypes: the table of every datatype, predefined and derived, and the
// calls that query them (size, extent, envelope and contents, names, counts
// of a status). Constructors are in type_create.cc, packing in pack.cc.
//
// A datatype is kept flat: one instance is the list of its contiguous byte
// blocks in type-map order (adjacent blocks merged) plus the run-length list
// of its basic elements, so sending, packing and counting never walk a tree.
// A predefined type is a single block. Derived handles are kDerivedBase +
// their index; they are reference counted (MPI_Type_free, and the handles
// MPI_Type_get_contents hands out) and never reused.
#include <algorithm>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dtype.h"
#include "shim.h"

namespace bcs::shim {
namespace {

template <typename A, typename B>
struct Pair {
  A a;
  B b;
};

struct TypeInfo {
  int size;
  const char* name;
  int dtype;  // bcs_dtype_t of reductions, 0 = none
};

constexpr int kTypeBase = 0x4c000000;
// Indexed by handle - kTypeBase; entry 0 unused. Reduction types by machine
// representation on x86-64 Linux (LP64, signed char, 32-bit wchar_t).
const TypeInfo kTypes[] = {
    {0, nullptr, 0},
    {sizeof(char), "MPI_CHAR", BCS_DT_INT8},
    {sizeof(signed char), "MPI_SIGNED_CHAR", BCS_DT_INT8},
    {sizeof(unsigned char), "MPI_UNSIGNED_CHAR", BCS_DT_UINT8},
    {1, "MPI_BYTE", BCS_DT_BYTE},
    {sizeof(short), "MPI_SHORT", BCS_DT_INT16},
    {sizeof(unsigned short), "MPI_UNSIGNED_SHORT", BCS_DT_UINT16},
    {sizeof(int), "MPI_INT", BCS_DT_INT32},
    {sizeof(unsigned), "MPI_UNSIGNED", BCS_DT_UINT32},
    {sizeof(long), "MPI_LONG", BCS_DT_INT64},
    {sizeof(unsigned long), "MPI_UNSIGNED_LONG", BCS_DT_UINT64},
    {sizeof(long long), "MPI_LONG_LONG_INT", BCS_DT_INT64},
    {sizeof(unsigned long long), "MPI_UNSIGNED_LONG_LONG", BCS_DT_UINT64},
    {sizeof(float), "MPI_FLOAT", BCS_DT_FLOAT},
    {sizeof(double), "MPI_DOUBLE", BCS_DT_DOUBLE},
    {sizeof(long double), "MPI_LONG_DOUBLE", BCS_DT_LONG_DOUBLE},
    {sizeof(wchar_t), "MPI_WCHAR", BCS_DT_INT32},
    {sizeof(bool), "MPI_C_BOOL", BCS_DT_BOOL},  // _Bool has the size of bool on this ABI
    {1, "MPI_INT8_T", BCS_DT_INT8},
    {2, "MPI_INT16_T", BCS_DT_INT16},
    {4, "MPI_INT32_T", BCS_DT_INT32},
    {8, "MPI_INT64_T", BCS_DT_INT64},
    {1, "MPI_UINT8_T", BCS_DT_UINT8},
    {2, "MPI_UINT16_T", BCS_DT_UINT16},
    {4, "MPI_UINT32_T", BCS_DT_UINT32},
    {8, "MPI_UINT64_T", BCS_DT_UINT64},
    {sizeof(MPI_Aint), "MPI_AINT", BCS_DT_INT64},
    {sizeof(MPI_Offset), "MPI_OFFSET", BCS_DT_INT64},
    {sizeof(MPI_Count), "MPI_COUNT", BCS_DT_INT64},
    {1, "MPI_PACKED", 0},  // no reductions on packed data
    // MPI_C_COMPLEX and MPI_C_FLOAT_COMPLEX are one type: its name is the first.
    {sizeof(std::complex<float>), "MPI_C_COMPLEX", BCS_DT_C_FLOAT_COMPLEX},
    {sizeof(std::complex<double>), "MPI_C_DOUBLE_COMPLEX", BCS_DT_C_DOUBLE_COMPLEX},
    {sizeof(std::complex<long double>), "MPI_C_LONG_DOUBLE_COMPLEX",
     BCS_DT_C_LONG_DOUBLE_COMPLEX},
    {sizeof(float) + sizeof(int), "MPI_FLOAT_INT", BCS_DT_FLOAT_INT},
    {sizeof(double) + sizeof(int), "MPI_DOUBLE_INT", BCS_DT_DOUBLE_INT},
    {sizeof(long) + sizeof(int), "MPI_LONG_INT", BCS_DT_LONG_INT},
    {sizeof(int) + sizeof(int), "MPI_2INT", BCS_DT_2INT},
    {sizeof(short) + sizeof(int), "MPI_SHORT_INT", BCS_DT_SHORT_INT},
    {sizeof(long double) + sizeof(int), "MPI_LONG_DOUBLE_INT", BCS_DT_LONG_DOUBLE_INT},
    {sizeof(bool), "MPI_CXX_BOOL", BCS_DT_BOOL},
    {sizeof(std::complex<float>), "MPI_CXX_FLOAT_COMPLEX", BCS_DT_C_FLOAT_COMPLEX},
    {sizeof(std::complex<double>), "MPI_CXX_DOUBLE_COMPLEX", BCS_DT_C_DOUBLE_COMPLEX},
    {sizeof(std::complex<long double>), "MPI_CXX_LONG_DOUBLE_COMPLEX",
     BCS_DT_C_LONG_DOUBLE_COMPLEX},
    // Fortran types, as gfortran lays them out on x86-64 (no Fortran binding:
    // C code names them). No reduction type for the (real, real) pairs.
    {1, "MPI_CHARACTER", 0},
    {4, "MPI_LOGICAL", BCS_DT_INT32},
    {4, "MPI_INTEGER", BCS_DT_INT32},
    {4, "MPI_REAL", BCS_DT_FLOAT},
    {8, "MPI_DOUBLE_PRECISION", BCS_DT_DOUBLE},
    {8, "MPI_COMPLEX", BCS_DT_C_FLOAT_COMPLEX},
    {16, "MPI_DOUBLE_COMPLEX", BCS_DT_C_DOUBLE_COMPLEX},
    {8, "MPI_2INTEGER", BCS_DT_2INT},
    {8, "MPI_2REAL", 0},
    {16, "MPI_2DOUBLE_PRECISION", 0},
    {1, "MPI_INTEGER1", BCS_DT_INT8},
    {2, "MPI_INTEGER2", BCS_DT_INT16},
    {4, "MPI_INTEGER4", BCS_DT_INT32},
    {8, "MPI_INTEGER8", BCS_DT_INT64},
    {4, "MPI_REAL4", BCS_DT_FLOAT},
    {8, "MPI_REAL8", BCS_DT_DOUBLE},
    {8, "MPI_COMPLEX8", BCS_DT_C_FLOAT_COMPLEX},
    {16, "MPI_COMPLEX16", BCS_DT_C_DOUBLE_COMPLEX},
};
constexpr int kTypeCount = static_cast<int>(sizeof(kTypes) / sizeof(kTypes[0]));
static_assert(kTypeBase + kTypeCount - 1 == MPI_COMPLEX16, "datatype table out of sync with mpi.h");
// The reduction mapping above assumes this ABI.
static_assert(sizeof(char) == 1 && static_cast<char>(-1) < 0, "MPI_CHAR -> INT8 needs signed char");
static_assert(sizeof(long) == 8 && sizeof(MPI_Aint) == 8 && sizeof(MPI_Offset) == 8 &&
                  sizeof(MPI_Count) == 8,
              "MPI_LONG/AINT/OFFSET/COUNT -> INT64 needs LP64");
static_assert(sizeof(wchar_t) == 4 && static_cast<wchar_t>(-1) < 0, "MPI_WCHAR -> INT32");
static_assert(sizeof(bool) == 1, "MPI_C_BOOL/MPI_CXX_BOOL -> BOOL");


constexpr int kDerivedBase = 0x4c800000;

// Index of a predefined handle in kTypes, or -1.
int predefined_index(MPI_Datatype t) {
  const long idx = static_cast<long>(t) - kTypeBase;
  return idx < 1 || idx >= kTypeCount ? -1 : static_cast<int>(idx);
}

std::vector<std::unique_ptr<DType>>& derived_table() {
  static std::vector<std::unique_ptr<DType>> t;
  return t;
}

template <typename A>
void pair(std::vector<DType>& v, MPI_Datatype h, MPI_Datatype value) {
  DType& d = v[static_cast<size_t>(h - kTypeBase)];
  using P = Pair<A, int>;
  const int64_t at = offsetof(P, b);
  d.ub = sizeof(Pair<A, int>);
  d.tub = at + static_cast<int64_t>(sizeof(int));
  d.blocks.clear();
  d.blocks.push_back({0, static_cast<int64_t>(sizeof(A))});
  if (at == static_cast<int64_t>(sizeof(A)))
    d.blocks.back().len += sizeof(int);
  else
    d.blocks.push_back({at, static_cast<int64_t>(sizeof(int))});
  d.elems = {{value, 1}, {MPI_INT, 1}};
  d.nelems = 2;
  d.align = static_cast<int>(alignof(Pair<A, int>));
}

const std::vector<DType>& predefined_table() {
  static const std::vector<DType> t = [] {
    std::vector<DType> v(static_cast<size_t>(kTypeCount));
    for (int i = 1; i < kTypeCount; ++i) {
      DType& d = v[static_cast<size_t>(i)];
      d.live = d.committed = d.predefined = true;
      d.handle = kTypeBase + i;
      d.size = kTypes[i].size;
      d.ub = d.tub = d.size;
      d.blocks.push_back({0, d.size});
      d.elems.push_back({kTypeBase + i, 1});
      d.nelems = 1;
      d.dtype = kTypes[i].dtype;
      // C alignment on x86-64: the largest power of two dividing the size,
      // at most 8, except the long double family (16); a complex number is
      // aligned like one of its two parts.
      const bool complex = std::strstr(kTypes[i].name, "COMPLEX") != nullptr;
      const int64_t part = complex ? d.size / 2 : d.size;
      const int64_t pow2 = part & -part;
      d.align = static_cast<int>(std::min<int64_t>(pow2, 8));
      const MPI_Datatype h = kTypeBase + i;
      if (h == MPI_LONG_DOUBLE || h == MPI_C_LONG_DOUBLE_COMPLEX ||
          h == MPI_CXX_LONG_DOUBLE_COMPLEX || h == MPI_LONG_DOUBLE_INT)
        d.align = 16;
      d.name = kTypes[i].name;
      d.nred = 1;
    }
    // The pair types are MPI structs {value; int index}: their size is the
    // sum of the two parts, their extent the padded C struct's, and they
    // hold two basic elements (MPI_Get_elements counts both).
    pair<float>(v, MPI_FLOAT_INT, MPI_FLOAT);
    pair<double>(v, MPI_DOUBLE_INT, MPI_DOUBLE);
    pair<long>(v, MPI_LONG_INT, MPI_LONG);
    pair<int>(v, MPI_2INT, MPI_INT);
    pair<short>(v, MPI_SHORT_INT, MPI_SHORT);
    pair<long double>(v, MPI_LONG_DOUBLE_INT, MPI_LONG_DOUBLE);
    return v;
  }();
  return t;
}

}  // namespace

DType* dtype_of(MPI_Datatype t) {
  const int p = predefined_index(t);
  if (p >= 0) return const_cast<DType*>(&predefined_table()[static_cast<size_t>(p)]);
  const long k = static_cast<long>(t) - kDerivedBase;
  auto& d = derived_table();
  if (k < 0 || k >= static_cast<long>(d.size()) || !d[static_cast<size_t>(k)]->live) return nullptr;
  return d[static_cast<size_t>(k)].get();
}

MPI_Datatype dtype_add(std::unique_ptr<DType> d) {
  auto& t = derived_table();
  d->live = true;
  d->refs = 1;
  d->handle = kDerivedBase + static_cast<int>(t.size());
  const MPI_Datatype h = d->handle;
  for (MPI_Datatype c : d->types)
    if (DType* x = dtype_of(c); x && !x->predefined) ++x->refs;  // contents keep them
  t.push_back(std::move(d));
  return h;
}

void dtype_release(DType* d) {
  if (d->predefined || --d->refs > 0) return;
  d->live = false;
  const std::vector<MPI_Datatype> kids = std::move(d->types);
  d->blocks.clear();
  d->blocks.shrink_to_fit();
  d->elems.clear();
  for (MPI_Datatype c : kids)
    if (DType* x = dtype_of(c); x && !x->predefined) dtype_release(x);
}

void DType::append(const DType& t, int64_t disp, int64_t reps) {
  if (reps <= 0) return;
  const int64_t ext = t.extent();
  // Bounds: of the first and the last instance (extent may be negative).
  const int64_t lo = disp + std::min<int64_t>(0, ext * (reps - 1));
  const int64_t hi = disp + std::max<int64_t>(0, ext * (reps - 1));
  if (first) {
    lb = lo + t.lb;
    ub = hi + t.ub;
    if (t.size > 0) {
      tlb = lo + t.tlb;
      tub = hi + t.tub;
    }
    first = false;
  } else {
    lb = std::min(lb, lo + t.lb);
    ub = std::max(ub, hi + t.ub);
    if (t.size > 0) {
      if (size == 0) {
        tlb = lo + t.tlb;
        tub = hi + t.tub;
      } else {
        tlb = std::min(tlb, lo + t.tlb);
        tub = std::max(tub, hi + t.tub);
      }
    }
  }
  sticky = sticky || t.sticky;
  align = std::max(align, t.align);
  auto add_block = [this](int64_t off, int64_t len) {
    if (!blocks.empty() && blocks.back().off + blocks.back().len == off)
      blocks.back().len += len;
    else
      blocks.push_back({off, len});
  };
  // The lists grow by up to reps copies of t's: past the limit they are
  // dropped, never built (a vector of a billion blocks is 16 GiB).
  const auto over = [&](size_t have, size_t each) {
    return have >= kMaxTypeBlocks ||
           static_cast<uint64_t>(reps) > (kMaxTypeBlocks - have) / std::max<size_t>(each, 1);
  };
  const bool dense = t.blocks.size() == 1 && t.blocks[0].len == ext;  // instances abut
  // (Dense instances merge into one block however many there are.)
  const bool more_blocks = dense ? blocks.size() >= kMaxTypeBlocks : over(blocks.size(), t.blocks.size());
  if (!too_fragmented && (t.too_fragmented || more_blocks ||
                          (t.elems.size() > 1 && over(elems.size(), t.elems.size())))) {
    too_fragmented = true;
    blocks = {};
    elems = {};
  }
  if (too_fragmented) {
  } else if (dense) {
    if (ext > 0) add_block(disp + std::min<int64_t>(0, ext * (reps - 1)) + t.blocks[0].off,
                           ext * reps);
  } else {
    for (int64_t r = 0; r < reps; ++r) {
      const int64_t base = disp + r * ext;
      for (const TypeBlock& b : t.blocks)
        if (b.len != 0) add_block(base + b.off, b.len);
    }
  }
  auto add_run = [this](const ElemRun& e) {
    if (!elems.empty() && elems.back().type == e.type)
      elems.back().count += e.count;
    else
      elems.push_back(e);
  };
  if (too_fragmented) {
  } else if (t.elems.size() == 1) {
    add_run({t.elems[0].type, t.elems[0].count * reps});
  } else {
    for (int64_t r = 0; r < reps; ++r)  // a mixed type: its runs repeat per instance
      for (const ElemRun& e : t.elems) add_run(e);
  }
  size += t.size * reps;
  nelems += t.nelems * reps;
  nred += t.nred * reps;
  // Reductions work element-wise on a type made of one basic reducible type.
  if (t.size > 0) {
    if (dtype_state == 0) {
      dtype = t.dtype;
      dtype_state = t.dtype ? 1 : 2;
    } else if (dtype != t.dtype || t.dtype == 0) {
      dtype = 0;
      dtype_state = 2;
    }
  }
}

int64_t type_size(MPI_Datatype t) {
  const DType* d = dtype_of(t);
  return d ? d->size : -1;
}

const char* type_name(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return "MPI_DATATYPE_NULL";
  const DType* d = dtype_of(t);
  if (!d) return "an invalid datatype";
  return d->predefined ? d->name.c_str() : "a derived datatype";
}

bool reduce_dtype(MPI_Datatype t, bcs_dtype_t* out) {
  const DType* d = dtype_of(t);
  if (!d || d->dtype == 0) return false;
  *out = static_cast<bcs_dtype_t>(d->dtype);
  return true;
}

bool predefined_reducible(MPI_Datatype t, uint64_t* size, bcs_dtype_t* out) {
  // Straight from kTypes: the post of a reduction reads one 16-byte entry
  // instead of the ~300-byte DType and its guard (issue 5, (c)).
  const int p = predefined_index(t);
  if (p < 0) return false;
  const TypeInfo& ti = kTypes[p];
  if (ti.dtype == 0 || ti.dtype >= BCS_DT_FLOAT_INT) return false;  // none, or a pair with padding
  *size = static_cast<uint64_t>(ti.size);
  *out = static_cast<bcs_dtype_t>(ti.dtype);
  return true;
}

int64_t type_elems(MPI_Datatype t) {
  const DType* d = dtype_of(t);
  return d ? d->nred : 0;
}


bool type_contiguous(MPI_Datatype t, int64_t* offset) {
  const DType* d = dtype_of(t);
  if (!d) return false;
  *offset = 0;
  if (d->size == 0) return true;
  if (d->blocks.size() != 1 || d->blocks[0].len != d->extent()) return false;
  *offset = d->blocks[0].off;
  return true;
}

int check_usable(int comm, const char* fn, MPI_Datatype t) {
  if (predefined_index(t) >= 0) return MPI_SUCCESS;  // always live and committed
  const DType* d = dtype_of(t);
  if (!d) return raise_error(comm, fn, MPI_ERR_TYPE, "invalid datatype handle 0x%x", t);
  if (!d->committed)
    return raise_error(comm, fn, MPI_ERR_TYPE,
                       "the datatype is not committed (call MPI_Type_commit before using it)");
  if (d->too_fragmented)
    return raise_error(comm, fn, MPI_ERR_TYPE,
                       "the datatype has more than %zu separate blocks per instance: bcs moves "
                       "data by block lists and keeps none this long (describe the data with "
                       "fewer, larger blocks, or send it in parts)",
                       kMaxTypeBlocks);
  return MPI_SUCCESS;
}

}  // namespace bcs::shim

using namespace bcs::shim;

namespace {

// Checks a datatype argument of a query (any live handle).
int get_type(const char* fn, MPI_Datatype t, DType** out) {
  *out = dtype_of(t);
  if (!*out) return raise_error(kNoComm, fn, MPI_ERR_TYPE, "invalid datatype handle 0x%x", t);
  return MPI_SUCCESS;
}

// Basic elements in the first `bytes` of a packed stream of type d, or -1
// when the bytes end inside an element.
int64_t elements_in(const DType& d, int64_t bytes) {
  if (d.size == 0) return 0;
  const int64_t whole = bytes / d.size;
  int64_t rest = bytes % d.size, n = whole * d.nelems;
  for (const ElemRun& e : d.elems) {
    if (rest == 0) break;
    const int64_t es = dtype_of(e.type)->size;
    const int64_t k = std::min(e.count, rest / es);
    n += k;
    rest -= k * es;
    if (k < e.count) break;
  }
  return rest == 0 ? n : -1;
}

}  // namespace

extern "C" {

int bcs_impl_Type_size(MPI_Datatype type, int* size) {
  DType* d;
  if (int e = get_type("MPI_Type_size", type, &d)) return e;
  if (!size) return raise_error(kNoComm, "MPI_Type_size", MPI_ERR_ARG, "NULL size pointer");
  *size = d->size > INT32_MAX ? MPI_UNDEFINED : static_cast<int>(d->size);
  return MPI_SUCCESS;
}

int bcs_impl_Type_size_x(MPI_Datatype type, MPI_Count* size) {
  DType* d;
  if (int e = get_type("MPI_Type_size_x", type, &d)) return e;
  if (!size) return raise_error(kNoComm, "MPI_Type_size_x", MPI_ERR_ARG, "NULL size pointer");
  *size = d->size;
  return MPI_SUCCESS;
}

int bcs_impl_Type_get_extent(MPI_Datatype type, MPI_Aint* lb, MPI_Aint* extent) {
  DType* d;
  if (int e = get_type("MPI_Type_get_extent", type, &d)) return e;
  if (!lb || !extent) return raise_error(kNoComm, "MPI_Type_get_extent", MPI_ERR_ARG, "NULL lb or extent");
  *lb = d->lb;
  *extent = d->extent();
  return MPI_SUCCESS;
}

int bcs_impl_Type_get_extent_x(MPI_Datatype type, MPI_Count* lb, MPI_Count* extent) {
  // MPI_Aint and MPI_Count are both 64 bits here: the same values.
  MPI_Aint l = 0, e = 0;
  if (!lb || !extent)
    return raise_error(kNoComm, "MPI_Type_get_extent_x", MPI_ERR_ARG, "NULL lb or extent");
  if (int rc = PMPI_Type_get_extent(type, &l, &e)) return rc;
  *lb = l;
  *extent = e;
  return MPI_SUCCESS;
}

int bcs_impl_Type_get_true_extent(MPI_Datatype type, MPI_Aint* lb, MPI_Aint* extent) {
  DType* d;
  if (int e = get_type("MPI_Type_get_true_extent", type, &d)) return e;
  if (!lb || !extent)
    return raise_error(kNoComm, "MPI_Type_get_true_extent", MPI_ERR_ARG, "NULL lb or extent");
  *lb = d->tlb;
  *extent = d->tub - d->tlb;
  return MPI_SUCCESS;
}

int bcs_impl_Type_get_true_extent_x(MPI_Datatype type, MPI_Count* lb, MPI_Count* extent) {
  MPI_Aint l = 0, e = 0;
  if (!lb || !extent)
    return raise_error(kNoComm, "MPI_Type_get_true_extent_x", MPI_ERR_ARG, "NULL lb or extent");
  if (int rc = PMPI_Type_get_true_extent(type, &l, &e)) return rc;
  *lb = l;
  *extent = e;
  return MPI_SUCCESS;
}

int bcs_impl_Type_commit(MPI_Datatype* type) {
  if (!type) return raise_error(kNoComm, "MPI_Type_commit", MPI_ERR_ARG, "NULL datatype pointer");
  DType* d;
  if (int e = get_type("MPI_Type_commit", *type, &d)) return e;
  d->committed = true;  // flat already: nothing else to do
  return MPI_SUCCESS;
}

int bcs_impl_Type_free(MPI_Datatype* type) {
  static const char fn[] = "MPI_Type_free";
  if (!type) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL datatype pointer");
  DType* d;
  if (int e = get_type(fn, *type, &d)) return e;
  if (d->predefined)
    return raise_error(kNoComm, fn, MPI_ERR_TYPE, "%s is predefined and cannot be freed",
                       d->name.c_str());
  if (int e = type_attr_delete_all(*type))
    return raise_error(kNoComm, fn, e, "an attribute delete callback failed");
  // One reference: the same handle may be held several times (it comes back
  // from MPI_Type_get_contents); the type ends with the last.
  dtype_release(d);
  *type = MPI_DATATYPE_NULL;
  return MPI_SUCCESS;
}

int bcs_impl_Type_dup(MPI_Datatype type, MPI_Datatype* newtype) {
  static const char fn[] = "MPI_Type_dup";
  DType* d;
  if (int e = get_type(fn, type, &d)) return e;
  if (!newtype) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL newtype");
  auto n = std::make_unique<DType>(*d);
  n->predefined = false;
  n->name.clear();
  n->combiner = MPI_COMBINER_DUP;
  n->ints.clear();
  n->aints.clear();
  n->types = {type};
  // MPI: the duplicate is committed if the original was (and is then usable).
  const MPI_Datatype h = dtype_add(std::move(n));
  if (int e = type_attr_copy_all(type, h)) {
    dtype_release(dtype_of(h));
    *newtype = MPI_DATATYPE_NULL;  // as MPI_Comm_dup's MPI_COMM_NULL
    return raise_error(kNoComm, fn, e, "an attribute copy callback failed");
  }
  *newtype = h;
  return MPI_SUCCESS;
}

int bcs_impl_Type_get_name(MPI_Datatype type, char* name, int* resultlen) {
  DType* d;
  if (int e = get_type("MPI_Type_get_name", type, &d)) return e;
  if (!name || !resultlen)
    return raise_error(kNoComm, "MPI_Type_get_name", MPI_ERR_ARG, "NULL name or resultlen");
  const size_t n = std::min<size_t>(d->name.size(), MPI_MAX_OBJECT_NAME - 1);
  std::memcpy(name, d->name.data(), n);
  name[n] = '\0';
  *resultlen = static_cast<int>(n);
  return MPI_SUCCESS;
}

int bcs_impl_Type_set_name(MPI_Datatype type, const char* name) {
  DType* d;
  if (int e = get_type("MPI_Type_set_name", type, &d)) return e;
  if (!name) return raise_error(kNoComm, "MPI_Type_set_name", MPI_ERR_ARG, "NULL name");
  d->name.assign(name, strnlen(name, MPI_MAX_OBJECT_NAME - 1));
  return MPI_SUCCESS;
}

int bcs_impl_Type_get_envelope(MPI_Datatype type, int* num_integers, int* num_addresses,
                           int* num_datatypes, int* combiner) {
  DType* d;
  if (int e = get_type("MPI_Type_get_envelope", type, &d)) return e;
  if (!num_integers || !num_addresses || !num_datatypes || !combiner)
    return raise_error(kNoComm, "MPI_Type_get_envelope", MPI_ERR_ARG, "NULL argument");
  *num_integers = static_cast<int>(d->ints.size());
  *num_addresses = static_cast<int>(d->aints.size());
  *num_datatypes = static_cast<int>(d->types.size());
  *combiner = d->combiner;
  return MPI_SUCCESS;
}

int bcs_impl_Type_get_contents(MPI_Datatype type, int max_integers, int max_addresses,
                           int max_datatypes, int ints[], MPI_Aint aints[], MPI_Datatype types[]) {
  static const char fn[] = "MPI_Type_get_contents";
  DType* d;
  if (int e = get_type(fn, type, &d)) return e;
  if (d->combiner == MPI_COMBINER_NAMED)
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "a predefined datatype has no contents");
  if (max_integers < static_cast<int>(d->ints.size()) ||
      max_addresses < static_cast<int>(d->aints.size()) ||
      max_datatypes < static_cast<int>(d->types.size()))
    return raise_error(kNoComm, fn, MPI_ERR_ARG,
                       "the arrays are too small (use MPI_Type_get_envelope for the sizes)");
  if ((!d->ints.empty() && !ints) || (!d->aints.empty() && !aints) ||
      (!d->types.empty() && !types))
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL array");
  std::copy(d->ints.begin(), d->ints.end(), ints);
  std::copy(d->aints.begin(), d->aints.end(), aints);
  for (size_t i = 0; i < d->types.size(); ++i) {
    types[i] = d->types[i];
    // The caller owns a reference to each derived handle it gets (and frees it).
    if (DType* x = dtype_of(types[i]); x && !x->predefined) ++x->refs;
  }
  return MPI_SUCCESS;
}

int bcs_impl_Type_match_size(int typeclass, int size, MPI_Datatype* type) {
  static const char fn[] = "MPI_Type_match_size";
  if (!type) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL type");
  MPI_Datatype t = MPI_DATATYPE_NULL;
  if (typeclass == MPI_TYPECLASS_REAL)
    t = size == 4 ? MPI_FLOAT : size == 8 ? MPI_DOUBLE : size == (int)sizeof(long double) ? MPI_LONG_DOUBLE : MPI_DATATYPE_NULL;
  else if (typeclass == MPI_TYPECLASS_INTEGER)
    t = size == 1 ? MPI_INT8_T : size == 2 ? MPI_INT16_T : size == 4 ? MPI_INT32_T
        : size == 8 ? MPI_INT64_T : MPI_DATATYPE_NULL;
  else if (typeclass == MPI_TYPECLASS_COMPLEX)
    t = size == 8 ? MPI_C_FLOAT_COMPLEX : size == 16 ? MPI_C_DOUBLE_COMPLEX : MPI_DATATYPE_NULL;
  else
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "invalid typeclass %d", typeclass);
  if (t == MPI_DATATYPE_NULL)
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "no type of class %d has size %d", typeclass, size);
  *type = t;
  return MPI_SUCCESS;
}

int bcs_impl_Get_address(const void* location, MPI_Aint* address) {
  if (!address) return raise_error(kNoComm, "MPI_Get_address", MPI_ERR_ARG, "NULL address");
  *address = reinterpret_cast<MPI_Aint>(location);
  return MPI_SUCCESS;
}

int bcs_impl_Get_count(const MPI_Status* st, MPI_Datatype type, int* count) {
  if (ignored(st) || !count)
    return raise_error(kNoComm, "MPI_Get_count", MPI_ERR_ARG, "NULL or ignored status");
  DType* d;
  if (int e = get_type("MPI_Get_count", type, &d)) return e;
  if (d->size == 0) {
    *count = 0;  // MPI: a zero-size type counts 0 (any number would fit)
    return MPI_SUCCESS;
  }
  const long long n = st->bcs_count / d->size;
  *count = (st->bcs_count % d->size || n > 0x7fffffff) ? MPI_UNDEFINED : static_cast<int>(n);
  return MPI_SUCCESS;
}

int bcs_impl_Get_elements_x(const MPI_Status* st, MPI_Datatype type, MPI_Count* count) {
  if (ignored(st) || !count)
    return raise_error(kNoComm, "MPI_Get_elements_x", MPI_ERR_ARG, "NULL or ignored status");
  DType* d;
  if (int e = get_type("MPI_Get_elements_x", type, &d)) return e;
  const int64_t n = elements_in(*d, st->bcs_count);
  *count = n < 0 ? MPI_UNDEFINED : n;
  return MPI_SUCCESS;
}

int bcs_impl_Get_elements(const MPI_Status* st, MPI_Datatype type, int* count) {
  MPI_Count n = 0;
  if (int e = PMPI_Get_elements_x(st, type, &n)) return e;
  *count = n > INT32_MAX ? MPI_UNDEFINED : static_cast<int>(n);
  return MPI_SUCCESS;
}

int bcs_impl_Status_set_elements_x(MPI_Status* st, MPI_Datatype type, MPI_Count count) {
  static const char fn[] = "MPI_Status_set_elements_x";
  if (ignored(st)) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL or ignored status");
  DType* d;
  if (int e = get_type(fn, type, &d)) return e;
  if (count < 0) return raise_error(kNoComm, fn, MPI_ERR_COUNT, "negative count");
  // count basic elements of `type`: whole instances, then a prefix.
  if (d->nelems == 0) {
    st->bcs_count = 0;
    return MPI_SUCCESS;
  }
  int64_t bytes = (count / d->nelems) * d->size, rest = count % d->nelems;
  for (const ElemRun& e : d->elems) {
    if (rest == 0) break;
    const int64_t k = std::min(e.count, rest);
    bytes += k * dtype_of(e.type)->size;
    rest -= k;
  }
  st->bcs_count = bytes;
  return MPI_SUCCESS;
}

int bcs_impl_Status_set_elements(MPI_Status* st, MPI_Datatype type, int count) {
  return PMPI_Status_set_elements_x(st, type, count);
}

}  // extern "C"
