// What a call bcs does not implement yet does when called (the stubs
// generated from mpi-shim/api/mpi.api): raise MPI_ERR_UNSUPPORTED_OPERATION
// naming the call. Never a silent success: a program that checks the result
// sees the error, and with the default handler the job ends naming rank and
// call.
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "shim.h"

namespace bcs::shim {

int unsupported_call(int comm, const char* fn) {
  return raise_error(comm, fn, MPI_ERR_UNSUPPORTED_OPERATION,
                     "%s is not implemented by bcs yet (see docs/mpi-coverage.md)", fn);
}

int unsupported_file_call(const char* fn) {
  // MPI's default error handler for files is MPI_ERRORS_RETURN, so the
  // error is returned; say so once per call on stderr, as a program that
  // ignores it would otherwise fail later without a hint.
  static std::mutex mu;
  static std::set<std::string> told;
  {
    std::lock_guard<std::mutex> l(mu);
    if (told.insert(fn).second)
      std::fprintf(stderr, "bcs: rank %d: %s: MPI_ERR_UNSUPPORTED_OPERATION: MPI I/O is not "
                           "implemented by bcs yet (see docs/mpi-coverage.md)\n",
                   S().rank, fn);
  }
  return MPI_ERR_UNSUPPORTED_OPERATION;
}

}  // namespace bcs::shim
