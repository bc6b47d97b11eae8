// Language interoperability and address arithmetic: handle conversion
// between C and Fortran (MPI_x_c2f / MPI_x_f2c), status conversion, and
// MPI_Aint_add / MPI_Aint_diff. Handles are integers here, so a Fortran
// handle is the C handle's value and the conversions are exact both ways.
#include "shim.h"

namespace {
// MPI_Fint layout of a status (MPI_STATUS_SIZE integers).
constexpr int kSource = 0, kTag = 1, kError = 2, kCancelled = 3, kCountLo = 4, kCountHi = 5;
static_assert(MPI_STATUS_SIZE == 6, "status layout");
}  // namespace

extern "C" {

#define BCS_HANDLE_INTEROP(Kind, Type)                                    \
  BCS_PMPI_ALIAS(Kind##_c2f)                                              \
  MPI_Fint PMPI_##Kind##_c2f(Type h) { return static_cast<MPI_Fint>(h); } \
  BCS_PMPI_ALIAS(Kind##_f2c)                                              \
  Type PMPI_##Kind##_f2c(MPI_Fint h) { return static_cast<Type>(h); }

BCS_HANDLE_INTEROP(Comm, MPI_Comm)
BCS_HANDLE_INTEROP(Errhandler, MPI_Errhandler)
BCS_HANDLE_INTEROP(Group, MPI_Group)
BCS_HANDLE_INTEROP(Message, MPI_Message)
BCS_HANDLE_INTEROP(Op, MPI_Op)
BCS_HANDLE_INTEROP(Request, MPI_Request)
BCS_HANDLE_INTEROP(Type, MPI_Datatype)
BCS_HANDLE_INTEROP(Info, MPI_Info)
BCS_HANDLE_INTEROP(Win, MPI_Win)
BCS_HANDLE_INTEROP(File, MPI_File)
#undef BCS_HANDLE_INTEROP

int bcs_impl_Status_c2f(const MPI_Status* c, MPI_Fint* f) {
  if (c == nullptr || c == MPI_STATUS_IGNORE || f == nullptr)
    return bcs::shim::raise_error(bcs::shim::kNoComm, "MPI_Status_c2f", MPI_ERR_ARG,
                                  "the status is MPI_STATUS_IGNORE or NULL");
  f[kSource] = c->MPI_SOURCE;
  f[kTag] = c->MPI_TAG;
  f[kError] = c->MPI_ERROR;
  f[kCancelled] = c->bcs_cancelled;
  const auto n = static_cast<unsigned long long>(c->bcs_count);
  f[kCountLo] = static_cast<MPI_Fint>(n & 0xffffffffu);
  f[kCountHi] = static_cast<MPI_Fint>(n >> 32);
  return MPI_SUCCESS;
}

int bcs_impl_Status_f2c(const MPI_Fint* f, MPI_Status* c) {
  if (f == nullptr || c == nullptr || c == MPI_STATUS_IGNORE)
    return bcs::shim::raise_error(bcs::shim::kNoComm, "MPI_Status_f2c", MPI_ERR_ARG,
                                  "the status is MPI_STATUS_IGNORE or NULL");
  c->MPI_SOURCE = f[kSource];
  c->MPI_TAG = f[kTag];
  c->MPI_ERROR = f[kError];
  c->bcs_cancelled = f[kCancelled];
  c->bcs_count = static_cast<long long>((static_cast<unsigned long long>(
                                             static_cast<unsigned>(f[kCountHi]))
                                         << 32) |
                                        static_cast<unsigned>(f[kCountLo]));
  return MPI_SUCCESS;
}

// MPI-3.1 §4.1.5: address arithmetic that stays correct where addresses are
// not plain integers; on this ABI they are.
BCS_PMPI_ALIAS(Aint_add)
MPI_Aint PMPI_Aint_add(MPI_Aint base, MPI_Aint disp) {
  return static_cast<MPI_Aint>(static_cast<unsigned long>(base) + static_cast<unsigned long>(disp));
}

BCS_PMPI_ALIAS(Aint_diff)
MPI_Aint PMPI_Aint_diff(MPI_Aint addr1, MPI_Aint addr2) {
  return static_cast<MPI_Aint>(static_cast<unsigned long>(addr1) -
                               static_cast<unsigned long>(addr2));
}

}  // extern "C"
