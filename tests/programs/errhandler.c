/* prog_errhandler: user error handlers, error codes and the environment on
 * a sub-communicator whose members sit on different node managers.
 *
 *   prog_errhandler          WORLD is split in pairs (colour rank / 2: with
 *                            bcs's cyclic placement the two members of a
 *                            pair are on different node managers when there
 *                            are several). A user handler on the pair's
 *                            communicator must be called with that
 *                            communicator and the right code for an
 *                            argument error (MPI_ERR_RANK), a runtime error
 *                            raised across node managers (MPI_ERR_TRUNCATE
 *                            at the receiver), MPI_Comm_call_errhandler with
 *                            a user code (MPI_Add_error_class/code/string),
 *                            and on a dup (inherited); WORLD keeps its own
 *                            handler. Then traffic on the pair still works
 *                            (an MPI_Alloc_mem buffer) and MPI_INFO_ENV's
 *                            maxprocs is the world size. Prints
 *                            "errhandler ok".
 *   prog_errhandler abort C  rank 1 calls MPI_Abort(pair, C) on its pair's
 *                            communicator; every other rank blocks in an
 *                            MPI_Recv on WORLD from rank 1. The whole job
 *                            must end with exit code C. */
#include <stdlib.h>
#include <string.h>

#include "prog_common.h"

#define BIG 3000 /* ints sent where the receiver has room for SMALL_CAP */
#define SMALL_CAP 10

static MPI_Comm seen_comm = MPI_COMM_NULL;
static int seen_code = MPI_SUCCESS;
static int seen_calls = 0;

static void record(MPI_Comm *comm, int *code, ...) {
  seen_comm = *comm;
  seen_code = *code;
  ++seen_calls;
}

/* The handler must have been called exactly once since the last reset, on
   `comm` with `code`. */
static void expect_call(const char *what, MPI_Comm comm, int code) {
  CHECK(seen_calls == 1, "%s: handler called %d times, want 1", what, seen_calls);
  CHECK(seen_comm == comm, "%s: handler got communicator 0x%x, want 0x%x", what, seen_comm, comm);
  CHECK(seen_code == code, "%s: handler got code %d, want %d", what, seen_code, code);
  seen_calls = 0;
  seen_comm = MPI_COMM_NULL;
  seen_code = MPI_SUCCESS;
}

static int abort_mode(int rank, int code) {
  MPI_Comm pair;
  int x = 0;
  MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair));
  if (rank == 1) {
    printf("prog_errhandler: rank 1 calling MPI_Abort(pair, %d)\n", code);
    fflush(stdout);
    MPI_Abort(pair, code);
    fprintf(stderr, "prog_errhandler: MPI_Abort returned\n");
    return 4;
  }
  MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  fprintf(stderr, "prog_errhandler: rank %d: MPI_Recv from the aborted rank 1 returned\n", rank);
  return 4;
}

int main(int argc, char **argv) {
  int rank, size, prank, psize, i, rc, flag = 0, len = 0;
  int cls, code, outcls;
  char s[MPI_MAX_ERROR_STRING], v[MPI_MAX_INFO_VAL + 1];
  MPI_Comm pair, dup;
  MPI_Errhandler eh, got;
  int *buf = NULL;
  prog_name = "prog_errhandler";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  if (argc > 2 && strcmp(argv[1], "abort") == 0) {
    CHECK(size >= 2, "abort mode needs 2 ranks");
    return abort_mode(rank, (int)arg_long(argc, argv, 2, 7));
  }

  MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair));
  MPI_OK(MPI_Comm_rank(pair, &prank));
  MPI_OK(MPI_Comm_size(pair, &psize));
  MPI_OK(MPI_Comm_create_errhandler(record, &eh));
  MPI_OK(MPI_Comm_set_errhandler(pair, eh));
  MPI_OK(MPI_Errhandler_free(&eh)); /* stays while attached */
  CHECK(eh == MPI_ERRHANDLER_NULL, "Errhandler_free left the handle");

  /* An argument error: the handler sees the pair and MPI_ERR_RANK, the call
     returns it. */
  rc = MPI_Send(&i, 1, MPI_INT, psize, 0, pair);
  CHECK(rc == MPI_ERR_RANK, "MPI_Send to rank %d returned %d", psize, rc);
  expect_call("MPI_Send to a bad rank", pair, MPI_ERR_RANK);

  /* A runtime error across node managers: the receiver's handler sees the
     truncation; the sender completes normally. */
  if (psize == 2) {
    if (prank == 0) {
      int *big = (int *)malloc(BIG * sizeof(int));
      CHECK(big != NULL, "malloc");
      for (i = 0; i < BIG; ++i) big[i] = i;
      MPI_OK(MPI_Send(big, BIG, MPI_INT, 1, 5, pair));
      free(big);
    } else {
      int in[SMALL_CAP];
      rc = MPI_Recv(in, SMALL_CAP, MPI_INT, 0, 5, pair, MPI_STATUS_IGNORE);
      CHECK(rc == MPI_ERR_TRUNCATE, "truncated MPI_Recv returned %d", rc);
      expect_call("truncated MPI_Recv", pair, MPI_ERR_TRUNCATE);
      for (i = 0; i < SMALL_CAP; ++i) CHECK(in[i] == i, "int %d is %d", i, in[i]);
    }
  }
  CHECK(seen_calls == 0, "unexpected handler call (code %d)", seen_code);

  /* A user error class, code and string, raised by the application. */
  MPI_OK(MPI_Add_error_class(&cls));
  MPI_OK(MPI_Add_error_code(cls, &code));
  MPI_OK(MPI_Add_error_string(code, "the pair disagrees"));
  CHECK(cls > MPI_ERR_LASTCODE && code > cls, "class %d code %d", cls, code);
  MPI_OK(MPI_Error_class(code, &outcls));
  CHECK(outcls == cls, "class of code %d is %d, want %d", code, outcls, cls);
  MPI_OK(MPI_Error_string(code, s, &len));
  CHECK(strcmp(s, "the pair disagrees") == 0 && len == (int)strlen(s), "string '%s'", s);
  MPI_OK(MPI_Comm_call_errhandler(pair, code));
  expect_call("MPI_Comm_call_errhandler", pair, code);

  /* A dup inherits the handler. */
  MPI_OK(MPI_Comm_dup(pair, &dup));
  MPI_OK(MPI_Comm_get_errhandler(dup, &got));
  MPI_OK(MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER));
  expect_call("MPI_Comm_call_errhandler on a dup", dup, MPI_ERR_OTHER);
  MPI_OK(MPI_Errhandler_free(&got));
  MPI_OK(MPI_Comm_free(&dup));

  /* WORLD kept MPI_ERRORS_ARE_FATAL: its handler is not the user's. */
  MPI_OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &got));
  CHECK(got == MPI_ERRORS_ARE_FATAL, "WORLD's handler changed");

  /* Traffic on the pair still works, from MPI_Alloc_mem memory. */
  MPI_OK(MPI_Alloc_mem(BIG * sizeof(int), MPI_INFO_NULL, &buf));
  for (i = 0; i < BIG; ++i) buf[i] = prank == 0 ? 7 * i + rank : -1;
  MPI_OK(MPI_Bcast(buf, BIG, MPI_INT, 0, pair));
  for (i = 0; i < BIG; ++i)
    CHECK(buf[i] == 7 * i + (rank - prank), "bcast int %d is %d", i, buf[i]);
  MPI_OK(MPI_Free_mem(buf));

  MPI_OK(MPI_Info_get(MPI_INFO_ENV, "maxprocs", MPI_MAX_INFO_VAL, v, &flag));
  CHECK(flag && atoi(v) == size, "MPI_INFO_ENV maxprocs '%s', want %d", flag ? v : "", size);

  MPI_OK(MPI_Comm_free(&pair));
  CHECK(seen_calls == 0, "unexpected handler call (code %d)", seen_code);
  MPI_OK(MPI_Finalize());
  if (rank == 0) printf("errhandler ok (%d ranks)\n", size);
  return 0;
}
