// Datatypes: predefined contiguous types only. The handle of a predefined
// type is kTypeBase + its index in the table below (see mpi.h).
#include <complex>
#include <cstdint>

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
    {sizeof(std::complex<float>), "MPI_C_FLOAT_COMPLEX", BCS_DT_C_FLOAT_COMPLEX},
    {sizeof(std::complex<double>), "MPI_C_DOUBLE_COMPLEX", BCS_DT_C_DOUBLE_COMPLEX},
    {sizeof(std::complex<long double>), "MPI_C_LONG_DOUBLE_COMPLEX",
     BCS_DT_C_LONG_DOUBLE_COMPLEX},
    {sizeof(Pair<float, int>), "MPI_FLOAT_INT", BCS_DT_FLOAT_INT},
    {sizeof(Pair<double, int>), "MPI_DOUBLE_INT", BCS_DT_DOUBLE_INT},
    {sizeof(Pair<long, int>), "MPI_LONG_INT", BCS_DT_LONG_INT},
    {sizeof(Pair<int, int>), "MPI_2INT", BCS_DT_2INT},
    {sizeof(Pair<short, int>), "MPI_SHORT_INT", BCS_DT_SHORT_INT},
    {sizeof(Pair<long double, int>), "MPI_LONG_DOUBLE_INT", BCS_DT_LONG_DOUBLE_INT},
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

int type_index(MPI_Datatype t) {
  const long idx = static_cast<long>(t) - kTypeBase;
  return idx < 1 || idx >= kTypeCount ? -1 : static_cast<int>(idx);
}

}  // namespace

int type_size(MPI_Datatype t) {
  const int i = type_index(t);
  return i < 0 ? -1 : kTypes[i].size;
}

const char* type_name(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return "MPI_DATATYPE_NULL";
  const int i = type_index(t);
  return i < 0 ? "an invalid datatype" : kTypes[i].name;
}

bool reduce_dtype(MPI_Datatype t, bcs_dtype_t* out) {
  const int i = type_index(t);
  if (i < 0 || kTypes[i].dtype == 0) return false;
  *out = static_cast<bcs_dtype_t>(kTypes[i].dtype);
  return true;
}

}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

BCS_PMPI_ALIAS(Type_size)
int PMPI_Type_size(MPI_Datatype type, int* size) {
  const int ts = type_size(type);
  if (ts < 0) return raise_error(kNoComm, "MPI_Type_size", MPI_ERR_TYPE, "invalid datatype 0x%x", type);
  if (!size) return raise_error(kNoComm, "MPI_Type_size", MPI_ERR_ARG, "NULL size pointer");
  *size = ts;
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Get_count)
int PMPI_Get_count(const MPI_Status* st, MPI_Datatype type, int* count) {
  if (ignored(st) || !count)
    return raise_error(kNoComm, "MPI_Get_count", MPI_ERR_ARG, "NULL or ignored status");
  const int ts = type_size(type);
  if (ts < 0) return raise_error(kNoComm, "MPI_Get_count", MPI_ERR_TYPE, "invalid datatype 0x%x", type);
  const long long n = st->bcs_count / ts;
  *count = (st->bcs_count % ts || n > 0x7fffffff) ? MPI_UNDEFINED : static_cast<int>(n);
  return MPI_SUCCESS;
}

BCS_PMPI_ALIAS(Get_elements)
int PMPI_Get_elements(const MPI_Status* st, MPI_Datatype type, int* count) {
  // Predefined types only: an element is one datatype.
  return PMPI_Get_count(st, type, count);
}

}  // extern "C"
