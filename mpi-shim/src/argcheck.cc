// The errors of the generated argument-check layer (gen/checks.cc, made by
// api/mpigen.py from api/mpi.api): one wording for each kind of bad
// argument, whichever call it was passed to.
#include "shim.h"

namespace bcs::shim {

int arg_bad_comm(const char* fn, MPI_Comm c, const char* name) {
  return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x (argument %s)", c,
                     name);
}

int arg_bad_count(int comm, const char* fn, int count, const char* name) {
  return raise_error(comm, fn, MPI_ERR_COUNT, "negative count %d (argument %s)", count, name);
}

int arg_null(int comm, const char* fn, int cls, const char* name) {
  return raise_error(comm, fn, cls, "NULL pointer for the output argument %s", name);
}

}  // namespace bcs::shim
