/* Shared helpers of the MPI test programs (plain C + MPI, so every program
   also builds with another MPI's mpicc for comparison). A failed check
   prints the rank, the place and the reason, and aborts the job non-zero. */
#ifndef BCS_PROG_COMMON_H
#define BCS_PROG_COMMON_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond, ...)                                                        \
  do {                                                                          \
    if (!(cond)) {                                                              \
      int r_ = -1;                                                              \
      MPI_Comm_rank(MPI_COMM_WORLD, &r_);                                       \
      fprintf(stderr, "%s: rank %d: %s:%d: check failed: %s: ", prog_name, r_,  \
              __FILE__, __LINE__, #cond);                                       \
      fprintf(stderr, __VA_ARGS__);                                             \
      fprintf(stderr, "\n");                                                    \
      fflush(stderr);                                                           \
      MPI_Abort(MPI_COMM_WORLD, 2);                                             \
    }                                                                           \
  } while (0)

/* MPI call that must succeed. */
#define MPI_OK(call) CHECK((call) == MPI_SUCCESS, "%s", #call)

static const char *prog_name = "prog";

static inline long arg_long(int argc, char **argv, int i, long def) {
  if (i < argc) {
    char *end = NULL;
    long v = strtol(argv[i], &end, 10);
    if (end && *end == '\0') return v;
  }
  return def;
}

#endif
