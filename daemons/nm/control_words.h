// Whether a rank's control words in the job segment (RankControl's
// mpi_state, aborted, abort_code), read by the node manager after the rank
// exited, are the rank's word or junk it wrote over them.
//
// They live in memory the rank can write, so a rank that scribbles over its
// segment (before MPI_Init, or a wild pointer later) leaves garbage there:
// read as they are, junk in `aborted` was reported as "called
// MPI_Abort with error code 1718986775". libbcs writes them in one way only
// (abort_with in libbcs/src/api.cc: the code, then the flag, only once
// MPI_Init set the state, and then _exit with the code's low byte, or 1),
// so anything else is junk.
#pragma once

#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "bcs/segment.h"

namespace bcs::nm {

// "" if the words are what a rank writes, else what is wrong with them.
// `wait_status`: the rank's, from waitpid.
inline std::string control_junk(uint32_t mpi_state, uint32_t aborted, int32_t abort_code,
                                int wait_status) {
  char b[160];
  if (mpi_state > static_cast<uint32_t>(MpiState::finalized)) {
    std::snprintf(b, sizeof b, "its MPI state word holds 0x%08x", mpi_state);
    return b;
  }
  if (aborted != 0 && aborted != kAbortedByRank && aborted != kAbortedNoticingPeer) {
    std::snprintf(b, sizeof b, "its abort flag holds 0x%08x", aborted);
    return b;
  }
  if (!aborted) return {};
  // An abort is posted only after MPI_Init.
  if (mpi_state == static_cast<uint32_t>(MpiState::none)) {
    std::snprintf(b, sizeof b, "its abort flag is set (code %d) but it never initialised MPI",
                  abort_code);
    return b;
  }
  // It then exits with the code's low byte. A rank killed while it flushed
  // its output after posting the abort (the job being torn down) keeps it.
  const int expect = (abort_code & 0xff) ? (abort_code & 0xff) : 1;
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) != expect) {
    std::snprintf(b, sizeof b, "its abort code %d does not match its exit status %d", abort_code,
                  WEXITSTATUS(wait_status));
    return b;
  }
  return {};
}

}  // namespace bcs::nm
