// Datatype constructors (MPI-3.1 §4.1.2–4.1.7): each builds the flat type
// map of the new type (dtype.h) from the flat maps of its parts, and keeps
// the arguments for MPI_Type_get_contents. The Fortran 90 parameterised
// types are not implemented yet (stubs).
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "dtype.h"
#include "shim.h"

using namespace bcs::shim;

namespace {

// Common checks; *old receives the old type.
int check_old(const char* fn, MPI_Datatype t, MPI_Datatype* newtype, DType** old) {
  if (!newtype) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL newtype");
  *old = dtype_of(t);
  if (!*old) return raise_error(kNoComm, fn, MPI_ERR_TYPE, "invalid datatype handle 0x%x", t);
  return MPI_SUCCESS;
}

int check_count(const char* fn, int count) {
  if (count < 0) return raise_error(kNoComm, fn, MPI_ERR_COUNT, "negative count %d", count);
  return MPI_SUCCESS;
}

int check_blocklens(const char* fn, int count, const int* bl) {
  if (count > 0 && !bl) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL blocklengths");
  for (int i = 0; i < count; ++i)
    if (bl[i] < 0)
      return raise_error(kNoComm, fn, MPI_ERR_ARG, "blocklength[%d] = %d (must be >= 0)", i,
                         bl[i]);
  return MPI_SUCCESS;
}

std::unique_ptr<DType> start(int combiner) {
  auto d = std::make_unique<DType>();
  d->combiner = combiner;
  return d;
}

MPI_Datatype finish(std::unique_ptr<DType> d, MPI_Datatype* newtype) {
  if (d->first) d->lb = d->ub = d->tlb = d->tub = 0;  // an empty type
  return *newtype = dtype_add(std::move(d));
}

// hindexed with byte displacements: the common core of the indexed family.
void build_indexed(DType& d, const DType& old, int count, const int* bl, int blocklen,
                   const MPI_Aint* bytes, const int* elems) {
  const int64_t ext = old.extent();
  for (int i = 0; i < count; ++i) {
    const int64_t disp = bytes ? static_cast<int64_t>(bytes[i]) : static_cast<int64_t>(elems[i]) * ext;
    d.append(old, disp, bl ? bl[i] : blocklen);
  }
}

}  // namespace

extern "C" {

int bcs_impl_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  static const char fn[] = "MPI_Type_contiguous";
  DType* old;
  if (int e = check_old(fn, oldtype, newtype, &old)) return e;
  if (int e = check_count(fn, count)) return e;
  auto d = start(MPI_COMBINER_CONTIGUOUS);
  d->append(*old, 0, count);
  d->ints = {count};
  d->types = {oldtype};
  finish(std::move(d), newtype);
  return MPI_SUCCESS;
}

namespace {
// count blocks of blocklength instances of `old`, `step` bytes apart. Past
// the block-list limit the middle blocks only add to the counts: the first
// and the last give the bounds (positions are monotonic in i).
void append_strided(DType& d, const DType& old, int count, int64_t step, int blocklength) {
  // Blocks it would add: count of them, each blocklength instances of old
  // (one block if they abut). Past the limit, never build the list at all.
  const bool dense = old.blocks.size() == 1 && old.blocks[0].len == old.extent();
  const double adds = static_cast<double>(count) *
                      (dense ? 1.0 : static_cast<double>(old.blocks.size()) * blocklength);
  if (!d.too_fragmented && adds + static_cast<double>(d.blocks.size()) > kMaxTypeBlocks) {
    d.too_fragmented = true;
    d.blocks = {};
    d.elems = {};
  }
  for (int i = 0; i < count; ++i) {
    if (d.too_fragmented && i > 0 && i + 1 < count) {
      d.count_more(old, static_cast<int64_t>(blocklength) * (count - 1 - i));
      i = count - 1;
    }
    d.append(old, static_cast<int64_t>(i) * step, blocklength);
  }
}
}  // namespace

int bcs_impl_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype,
                     MPI_Datatype* newtype) {
  static const char fn[] = "MPI_Type_vector";
  DType* old;
  if (int e = check_old(fn, oldtype, newtype, &old)) return e;
  if (int e = check_count(fn, count)) return e;
  if (blocklength < 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "negative blocklength");
  auto d = start(MPI_COMBINER_VECTOR);
  append_strided(*d, *old, count, static_cast<int64_t>(stride) * old->extent(), blocklength);
  d->ints = {count, blocklength, stride};
  d->types = {oldtype};
  finish(std::move(d), newtype);
  return MPI_SUCCESS;
}

int bcs_impl_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                             MPI_Datatype* newtype) {
  static const char fn[] = "MPI_Type_create_hvector";
  DType* old;
  if (int e = check_old(fn, oldtype, newtype, &old)) return e;
  if (int e = check_count(fn, count)) return e;
  if (blocklength < 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "negative blocklength");
  auto d = start(MPI_COMBINER_HVECTOR);
  append_strided(*d, *old, count, stride, blocklength);
  d->ints = {count, blocklength};
  d->aints = {stride};
  d->types = {oldtype};
  finish(std::move(d), newtype);
  return MPI_SUCCESS;
}

int bcs_impl_Type_indexed(int count, const int blocklens[], const int displs[], MPI_Datatype oldtype,
                      MPI_Datatype* newtype) {
  static const char fn[] = "MPI_Type_indexed";
  DType* old;
  if (int e = check_old(fn, oldtype, newtype, &old)) return e;
  if (int e = check_count(fn, count)) return e;
  if (int e = check_blocklens(fn, count, blocklens)) return e;
  if (count > 0 && !displs) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL displacements");
  auto d = start(MPI_COMBINER_INDEXED);
  build_indexed(*d, *old, count, blocklens, 0, nullptr, displs);
  d->ints.push_back(count);
  d->ints.insert(d->ints.end(), blocklens, blocklens + count);
  d->ints.insert(d->ints.end(), displs, displs + count);
  d->types = {oldtype};
  finish(std::move(d), newtype);
  return MPI_SUCCESS;
}

int bcs_impl_Type_create_hindexed(int count, const int blocklens[], const MPI_Aint displs[],
                              MPI_Datatype oldtype, MPI_Datatype* newtype) {
  static const char fn[] = "MPI_Type_create_hindexed";
  DType* old;
  if (int e = check_old(fn, oldtype, newtype, &old)) return e;
  if (int e = check_count(fn, count)) return e;
  if (int e = check_blocklens(fn, count, blocklens)) return e;
  if (count > 0 && !displs) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL displacements");
  auto d = start(MPI_COMBINER_HINDEXED);
  build_indexed(*d, *old, count, blocklens, 0, displs, nullptr);
  d->ints.push_back(count);
  d->ints.insert(d->ints.end(), blocklens, blocklens + count);
  d->aints.assign(displs, displs + count);
  d->types = {oldtype};
  finish(std::move(d), newtype);
  return MPI_SUCCESS;
}

int bcs_impl_Type_create_indexed_block(int count, int blocklength, const int displs[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype) {
  static const char fn[] = "MPI_Type_create_indexed_block";
  DType* old;
  if (int e = check_old(fn, oldtype, newtype, &old)) return e;
  if (int e = check_count(fn, count)) return e;
  if (blocklength < 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "negative blocklength");
  if (count > 0 && !displs) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL displacements");
  auto d = start(MPI_COMBINER_INDEXED_BLOCK);
  build_indexed(*d, *old, count, nullptr, blocklength, nullptr, displs);
  d->ints = {count, blocklength};
  d->ints.insert(d->ints.end(), displs, displs + count);
  d->types = {oldtype};
  finish(std::move(d), newtype);
  return MPI_SUCCESS;
}

int bcs_impl_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint displs[],
                                    MPI_Datatype oldtype, MPI_Datatype* newtype) {
  static const char fn[] = "MPI_Type_create_hindexed_block";
  DType* old;
  if (int e = check_old(fn, oldtype, newtype, &old)) return e;
  if (int e = check_count(fn, count)) return e;
  if (blocklength < 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "negative blocklength");
  if (count > 0 && !displs) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL displacements");
  auto d = start(MPI_COMBINER_HINDEXED_BLOCK);
  build_indexed(*d, *old, count, nullptr, blocklength, displs, nullptr);
  d->ints = {count, blocklength};
  d->aints.assign(displs, displs + count);
  d->types = {oldtype};
  finish(std::move(d), newtype);
  return MPI_SUCCESS;
}

int bcs_impl_Type_create_struct(int count, const int blocklens[], const MPI_Aint displs[],
                            const MPI_Datatype types[], MPI_Datatype* newtype) {
  static const char fn[] = "MPI_Type_create_struct";
  if (!newtype) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL newtype");
  if (int e = check_count(fn, count)) return e;
  if (int e = check_blocklens(fn, count, blocklens)) return e;
  if (count > 0 && (!displs || !types))
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL displacements or types");
  auto d = start(MPI_COMBINER_STRUCT);
  for (int i = 0; i < count; ++i) {
    const DType* t = dtype_of(types[i]);
    if (!t) return raise_error(kNoComm, fn, MPI_ERR_TYPE, "invalid types[%d] 0x%x", i, types[i]);
    d->append(*t, displs[i], blocklens[i]);
  }
  // Like C structs (and MPICH, Open MPI): the extent is padded to the
  // largest alignment inside, unless bounds were set explicitly.
  if (!d->first && !d->sticky && d->align > 1) {
    const int64_t ext = d->extent(), a = d->align;
    if (ext % a) d->ub += a - ext % a;
  }
  d->ints.push_back(count);
  d->ints.insert(d->ints.end(), blocklens, blocklens + count);
  d->aints.assign(displs, displs + count);
  d->types.assign(types, types + count);
  finish(std::move(d), newtype);
  return MPI_SUCCESS;
}

int bcs_impl_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                             MPI_Datatype* newtype) {
  static const char fn[] = "MPI_Type_create_resized";
  DType* old;
  if (int e = check_old(fn, oldtype, newtype, &old)) return e;
  auto d = start(MPI_COMBINER_RESIZED);
  d->append(*old, 0, 1);
  d->lb = lb;
  d->ub = lb + extent;
  d->sticky = true;
  d->aints = {lb, extent};
  d->types = {oldtype};
  finish(std::move(d), newtype);
  return MPI_SUCCESS;
}

int bcs_impl_Type_create_subarray(int ndims, const int sizes[], const int subsizes[],
                              const int starts[], int order, MPI_Datatype oldtype,
                              MPI_Datatype* newtype) {
  static const char fn[] = "MPI_Type_create_subarray";
  DType* old;
  if (int e = check_old(fn, oldtype, newtype, &old)) return e;
  if (ndims <= 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "ndims %d (must be > 0)", ndims);
  if (!sizes || !subsizes || !starts)
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL sizes, subsizes or starts");
  if (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "invalid order %d", order);
  for (int i = 0; i < ndims; ++i)
    if (sizes[i] <= 0 || subsizes[i] <= 0 || subsizes[i] > sizes[i] || starts[i] < 0 ||
        starts[i] > sizes[i] - subsizes[i])
      return raise_error(kNoComm, fn, MPI_ERR_ARG,
                         "dimension %d: size %d, subsize %d, start %d do not fit", i, sizes[i],
                         subsizes[i], starts[i]);
  // Dimensions from slowest to fastest varying.
  std::vector<int> dim(static_cast<size_t>(ndims));
  for (int i = 0; i < ndims; ++i) dim[static_cast<size_t>(i)] = order == MPI_ORDER_C ? i : ndims - 1 - i;
  const int64_t ext = old->extent();
  std::vector<int64_t> stride(static_cast<size_t>(ndims));  // bytes per step in dim[k]
  int64_t s = ext;
  for (int k = ndims - 1; k >= 0; --k) {
    stride[static_cast<size_t>(k)] = s;
    s *= sizes[dim[static_cast<size_t>(k)]];
  }
  const int64_t total = s;  // the whole array, in bytes
  auto d = start(MPI_COMBINER_SUBARRAY);
  // Walk every row of the fastest dimension in order.
  std::vector<int> idx(static_cast<size_t>(ndims), 0);
  const int fast = dim[static_cast<size_t>(ndims) - 1];
  for (;;) {
    int64_t off = static_cast<int64_t>(starts[fast]) * ext;
    for (int k = 0; k + 1 < ndims; ++k) {
      const int dd = dim[static_cast<size_t>(k)];
      off += static_cast<int64_t>(starts[dd] + idx[static_cast<size_t>(k)]) * stride[static_cast<size_t>(k)];
    }
    d->append(*old, off, subsizes[fast]);
    int k = ndims - 2;
    while (k >= 0 && ++idx[static_cast<size_t>(k)] == subsizes[dim[static_cast<size_t>(k)]])
      idx[static_cast<size_t>(k--)] = 0;
    if (k < 0) break;
  }
  // The extent is the whole array's (MPI-3.1 §4.1.3).
  d->lb = 0;
  d->ub = total;
  d->sticky = true;
  d->ints.push_back(ndims);
  d->ints.insert(d->ints.end(), sizes, sizes + ndims);
  d->ints.insert(d->ints.end(), subsizes, subsizes + ndims);
  d->ints.insert(d->ints.end(), starts, starts + ndims);
  d->ints.push_back(order);
  d->types = {oldtype};
  finish(std::move(d), newtype);
  return MPI_SUCCESS;
}

int bcs_impl_Type_create_darray(int size, int rank, int ndims, const int gsizes[],
                            const int distribs[], const int dargs[], const int psizes[],
                            int order, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  static const char fn[] = "MPI_Type_create_darray";
  DType* old;
  if (int e = check_old(fn, oldtype, newtype, &old)) return e;
  if (ndims <= 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "ndims %d (must be > 0)", ndims);
  if (!gsizes || !distribs || !dargs || !psizes)
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL array argument");
  if (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)
    return raise_error(kNoComm, fn, MPI_ERR_ARG, "invalid order %d", order);
  int64_t nprocs = 1;
  for (int i = 0; i < ndims; ++i) nprocs *= psizes[i] > 0 ? psizes[i] : 0;
  if (nprocs != size || rank < 0 || rank >= size)
    return raise_error(kNoComm, fn, MPI_ERR_ARG,
                       "the process grid has %lld processes, size is %d (rank %d)",
                       static_cast<long long>(nprocs), size, rank);
  // This process's grid coordinates: row-major whatever `order` says (§4.1.4).
  std::vector<int> coord(static_cast<size_t>(ndims));
  for (int i = ndims - 1, r = rank; i >= 0; --i) {
    coord[static_cast<size_t>(i)] = r % psizes[i];
    r /= psizes[i];
  }
  // The global indices this process owns along each dimension, in order.
  std::vector<std::vector<int64_t>> own(static_cast<size_t>(ndims));
  for (int i = 0; i < ndims; ++i) {
    const int64_t g = gsizes[i], p = psizes[i], c = coord[static_cast<size_t>(i)];
    auto& o = own[static_cast<size_t>(i)];
    if (g <= 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "gsizes[%d] = %d", i, gsizes[i]);
    switch (distribs[i]) {
      case MPI_DISTRIBUTE_NONE:
        if (p != 1)
          return raise_error(kNoComm, fn, MPI_ERR_ARG,
                             "dimension %d is not distributed but psizes[%d] = %d", i, i, psizes[i]);
        for (int64_t k = 0; k < g; ++k) o.push_back(k);
        break;
      case MPI_DISTRIBUTE_BLOCK: {
        const int64_t b = dargs[i] == MPI_DISTRIBUTE_DFLT_DARG ? (g + p - 1) / p : dargs[i];
        if (b <= 0 || b * p < g)
          return raise_error(kNoComm, fn, MPI_ERR_ARG,
                             "block size %lld does not cover dimension %d (%lld over %lld)",
                             static_cast<long long>(b), i, static_cast<long long>(g),
                             static_cast<long long>(p));
        for (int64_t k = c * b; k < std::min(g, (c + 1) * b); ++k) o.push_back(k);
        break;
      }
      case MPI_DISTRIBUTE_CYCLIC: {
        const int64_t b = dargs[i] == MPI_DISTRIBUTE_DFLT_DARG ? 1 : dargs[i];
        if (b <= 0) return raise_error(kNoComm, fn, MPI_ERR_ARG, "dargs[%d] = %d", i, dargs[i]);
        for (int64_t start = c * b; start < g; start += p * b)
          for (int64_t k = start; k < std::min(g, start + b); ++k) o.push_back(k);
        break;
      }
      default:
        return raise_error(kNoComm, fn, MPI_ERR_ARG, "invalid distribs[%d] = %d", i, distribs[i]);
    }
  }
  // Dimensions from slowest to fastest varying, and their byte strides in
  // the global array.
  std::vector<int> dim(static_cast<size_t>(ndims));
  for (int i = 0; i < ndims; ++i) dim[static_cast<size_t>(i)] = order == MPI_ORDER_C ? i : ndims - 1 - i;
  std::vector<int64_t> stride(static_cast<size_t>(ndims));
  int64_t s = old->extent();
  for (int k = ndims - 1; k >= 0; --k) {
    stride[static_cast<size_t>(k)] = s;
    s *= gsizes[dim[static_cast<size_t>(k)]];
  }
  auto d = start(MPI_COMBINER_DARRAY);
  bool empty = false;
  for (const auto& o : own) empty = empty || o.empty();
  if (!empty) {
    std::vector<size_t> idx(static_cast<size_t>(ndims), 0);
    for (;;) {
      int64_t off = 0;
      for (int k = 0; k < ndims; ++k)
        off += own[static_cast<size_t>(dim[static_cast<size_t>(k)])][idx[static_cast<size_t>(k)]] *
               stride[static_cast<size_t>(k)];
      d->append(*old, off, 1);
      int k = ndims - 1;
      while (k >= 0 &&
             ++idx[static_cast<size_t>(k)] == own[static_cast<size_t>(dim[static_cast<size_t>(k)])].size())
        idx[static_cast<size_t>(k--)] = 0;
      if (k < 0) break;
    }
  }
  d->lb = 0;  // the extent is the whole global array
  d->ub = s;
  d->sticky = true;
  d->first = false;
  d->ints = {size, rank, ndims};
  d->ints.insert(d->ints.end(), gsizes, gsizes + ndims);
  d->ints.insert(d->ints.end(), distribs, distribs + ndims);
  d->ints.insert(d->ints.end(), dargs, dargs + ndims);
  d->ints.insert(d->ints.end(), psizes, psizes + ndims);
  d->ints.push_back(order);
  d->types = {oldtype};
  finish(std::move(d), newtype);
  return MPI_SUCCESS;
}

}  // extern "C"

// ------------------------------------------------------------ Fortran 90 kinds
// MPI_Type_create_f90_real/complex/integer (MPI-3.1 17.2.5) return the
// predefined type that holds the asked precision and range, under a handle
// whose envelope says F90_* with (p, r) as contents. Such types are
// predefined: the same (p, r) gives the same handle and it cannot be freed.

namespace {

MPI_Datatype f90_type(int combiner, int p, int r, MPI_Datatype base) {
  static std::map<std::tuple<int, int, int>, MPI_Datatype> made;
  const auto key = std::make_tuple(combiner, p, r);
  if (auto it = made.find(key); it != made.end()) {
    const DType* d = dtype_of(it->second);
    if (d && d->combiner == combiner) return it->second;
  }
  auto n = std::make_unique<DType>(*dtype_of(base));
  n->combiner = combiner;
  n->ints = combiner == MPI_COMBINER_F90_INTEGER ? std::vector<int>{r} : std::vector<int>{p, r};
  n->aints.clear();
  n->types.clear();
  n->name.clear();
  n->committed = true;
  const MPI_Datatype h = dtype_add(std::move(n));
  dtype_of(h)->predefined = true;
  made[key] = h;
  return h;
}

// The smallest IEEE kind with at least `p` decimal digits and exponent
// range `r` (MPI_UNDEFINED: any): 0 for 4 bytes, 1 for 8, -1 for none.
int real_kind(int p, int r) {
  const bool p_any = p == MPI_UNDEFINED, r_any = r == MPI_UNDEFINED;
  if ((!p_any && p < 0) || (!r_any && r < 0)) return -1;
  if ((p_any || p <= 6) && (r_any || r <= 37)) return 0;
  if ((p_any || p <= 15) && (r_any || r <= 307)) return 1;
  return -1;  // no REAL16 here (long double is not IEEE quad)
}

}  // namespace

extern "C" {

int bcs_impl_Type_create_f90_real(int p, int r, MPI_Datatype* newtype) {
  REQUIRE_RUNNING("MPI_Type_create_f90_real");
  const int k = real_kind(p, r);
  if (k < 0)
    return raise_error(kNoComm, "MPI_Type_create_f90_real", MPI_ERR_ARG,
                       "no real type has precision %d and range %d (at most 15 and 307)", p, r);
  *newtype = f90_type(MPI_COMBINER_F90_REAL, p, r, k == 0 ? MPI_REAL4 : MPI_REAL8);
  return MPI_SUCCESS;
}

int bcs_impl_Type_create_f90_complex(int p, int r, MPI_Datatype* newtype) {
  REQUIRE_RUNNING("MPI_Type_create_f90_complex");
  const int k = real_kind(p, r);
  if (k < 0)
    return raise_error(kNoComm, "MPI_Type_create_f90_complex", MPI_ERR_ARG,
                       "no complex type has precision %d and range %d (at most 15 and 307)", p,
                       r);
  *newtype = f90_type(MPI_COMBINER_F90_COMPLEX, p, r, k == 0 ? MPI_COMPLEX8 : MPI_COMPLEX16);
  return MPI_SUCCESS;
}

int bcs_impl_Type_create_f90_integer(int r, MPI_Datatype* newtype) {
  REQUIRE_RUNNING("MPI_Type_create_f90_integer");
  // Decimal exponent range: 10^r must fit (INTEGER1 holds 10^2, INTEGER8 10^18).
  const MPI_Datatype t = r < 0     ? MPI_DATATYPE_NULL
                         : r <= 2  ? MPI_INTEGER1
                         : r <= 4  ? MPI_INTEGER2
                         : r <= 9  ? MPI_INTEGER4
                         : r <= 18 ? MPI_INTEGER8
                                   : MPI_DATATYPE_NULL;
  if (t == MPI_DATATYPE_NULL)
    return raise_error(kNoComm, "MPI_Type_create_f90_integer", MPI_ERR_ARG,
                       "no integer type has decimal range %d (at most 18)", r);
  *newtype = f90_type(MPI_COMBINER_F90_INTEGER, MPI_UNDEFINED, r, t);
  return MPI_SUCCESS;
}

}  // extern "C"
