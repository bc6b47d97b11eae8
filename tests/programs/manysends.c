/* prog_manysends COUNT BYTES [oneway|mutual|limit|nomem]: many outstanding
   large sends (issue 42, item 4: more than 4,096 used to fail after 30 s).

   oneway (the default): rank 0 posts COUNT MPI_Isends of BYTES bytes to
   rank 1, all from one read-only buffer, then a barrier; only after the
   barrier does rank 1 receive them, one after the other into one buffer,
   checking each; then rank 0 waits for all. Every send is outstanding, and
   none matched, when the first receive is posted.
   mutual: ranks 0 and 1 each do both (post COUNT sends to the other,
   barrier, receive COUNT, wait for the sends): each floods the other before
   either receives (the program of the issue).

   Message i is the BYTES bytes at offset i % 251 of a pattern both sides
   compute, so a message that is wrong, late or out of order differs from
   what the receiver expects; every byte of every message is compared.
   Rank 0 prints "manysends ok (COUNT x BYTES bytes, MODE)".

   limit: the program limits itself to COUNT requests (BCS_MAX_REQUESTS,
   read by the runtime in MPI_Init) and rank 0 posts receives nobody
   matches until one fails: it must fail after exactly COUNT, at once,
   with MPI_ERR_NO_MEM; then they are cancelled and complete. Prints
   "manysends limit ok (COUNT posted; MESSAGE)" (0 are received after).
   nomem: rank 0 caps its address space (RLIMIT_AS) a little above what it
   uses and posts sends until one fails, which must be MPI_ERR_NO_MEM; the
   cap is lifted and everything posted is received and completes. Prints
   "manysends nomem ok (N posted; MESSAGE)".
   limitfatal: as limit, with sends and the default error handler: the
   refused send ends the job with its message (naming the limit) on
   stderr. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "prog_common.h"

enum { kOffsets = 251, kTag = 5 };
static int fatal_mode = 0;  /* limitfatal: a refused send ends the job */
static int limit_recvs = 0; /* limit: post receives, not sends */
static void *recv_sink = NULL;

static unsigned char *pattern(size_t bytes) {
  unsigned char *p = malloc(bytes + kOffsets);
  CHECK(p, "out of memory for the pattern");
  for (size_t k = 0; k < bytes + kOffsets; ++k) p[k] = (unsigned char)((k * 2654435761u) >> 24);
  return p;
}

/* Receives n messages of `bytes` from `from` into one buffer, checking each. */
static void receive_all(long n, size_t bytes, int from, const unsigned char *pat) {
  unsigned char *in = malloc(bytes);
  CHECK(in, "out of memory");
  for (long i = 0; i < n; ++i) {
    MPI_Status st;
    int got = -1;
    MPI_OK(MPI_Recv(in, (int)bytes, MPI_BYTE, from, kTag, MPI_COMM_WORLD, &st));
    MPI_OK(MPI_Get_count(&st, MPI_BYTE, &got));
    CHECK((size_t)got == bytes, "message %ld: %d bytes", i, got);
    CHECK(memcmp(in, pat + i % kOffsets, bytes) == 0, "message %ld from rank %d: wrong bytes", i,
          from);
  }
  free(in);
}

/* Posts sends until one fails (or `max` are posted); returns how many were
   posted, the failure's class and message. */
static long post_until_failure(long max, size_t bytes, const unsigned char *pat, MPI_Request *q,
                               int *cls, char *msg) {
  if (!fatal_mode) MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  long n = 0;
  int e = MPI_SUCCESS;
  for (; n < max; ++n) {
    /* limit: receives nobody sends to (they complete only when cancelled,
       so none frees a slot while the limit is sought) */
    e = limit_recvs ? MPI_Irecv(recv_sink, (int)bytes, MPI_BYTE, 1, kTag + 1, MPI_COMM_WORLD, &q[n])
                    : MPI_Isend(pat + n % kOffsets, (int)bytes, MPI_BYTE, 1, kTag, MPI_COMM_WORLD,
                                &q[n]);
    if (e != MPI_SUCCESS) break;
  }
  CHECK(e != MPI_SUCCESS, "%ld sends posted, none refused", n);
  int len = 0;
  MPI_Error_class(e, cls);
  MPI_Error_string(e, msg, &len);
  MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  return n;
}

int main(int argc, char **argv) {
  prog_name = "prog_manysends";
  const long count = arg_long(argc, argv, 1, 10000);
  const long bytes_arg = arg_long(argc, argv, 2, 8192);
  const char *mode = argc > 3 ? argv[3] : "oneway";
  /* limitfatal: as limit, under MPI_ERRORS_ARE_FATAL: the job ends with
     the error's message (its stderr is what a program meets). */
  const int fatal = strcmp(mode, "limitfatal") == 0;
  const int limit = fatal || strcmp(mode, "limit") == 0, nomem = strcmp(mode, "nomem") == 0;
  const int mutual = strcmp(mode, "mutual") == 0;
  fatal_mode = fatal;
  limit_recvs = limit && !fatal;
  if (limit) {
    /* Read by the runtime in MPI_Init. */
    char v[32];
    snprintf(v, sizeof v, "%ld", count);
    setenv("BCS_MAX_REQUESTS", v, 1);
  }
  int rank, size;
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  CHECK(size >= 2 && count > 0 && bytes_arg > 0 && bytes_arg < (1L << 30),
        "needs 2 ranks, a count and a size (got %d, %ld, %ld)", size, count, bytes_arg);
  const size_t bytes = (size_t)bytes_arg;
  const unsigned char *pat = pattern(bytes);
  recv_sink = malloc(bytes);
  CHECK(recv_sink, "out of memory");

  if (limit || nomem) {
    /* nomem: as many as memory allows, which the cap keeps far below this. */
    const long max = limit ? count + 1 : 1L << 24;
    MPI_Request *q = rank == 0 ? malloc(sizeof(MPI_Request) * (size_t)max) : NULL;
    long n = 0;
    int cls = 0;
    char msg[MPI_MAX_ERROR_STRING] = "";
    if (rank == 0) {
      CHECK(q, "out of memory for the requests");
      struct rlimit old;
      CHECK(getrlimit(RLIMIT_AS, &old) == 0, "getrlimit");
      if (nomem) {
        /* What the process maps now (the job segment included), and 16 MiB. */
        long pages = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        CHECK(f && fscanf(f, "%ld", &pages) == 1, "/proc/self/statm");
        fclose(f);
        struct rlimit cap = old;
        cap.rlim_cur = (rlim_t)pages * 4096 + ((rlim_t)16 << 20);
        CHECK(setrlimit(RLIMIT_AS, &cap) == 0, "setrlimit");
      }
      n = post_until_failure(max, bytes, pat, q, &cls, msg);
      if (nomem) CHECK(setrlimit(RLIMIT_AS, &old) == 0, "setrlimit back");
      CHECK(cls == MPI_ERR_NO_MEM, "the refused send's class is %d, not MPI_ERR_NO_MEM: %s", cls,
            msg);
      if (limit) CHECK(n == count, "%ld sends posted under a limit of %ld: %s", n, count, msg);
    }
    const long posted = n;
    if (limit_recvs && rank == 0) {
      /* Every slot back: the receives are cancelled. */
      for (long i = 0; i < n; ++i) MPI_OK(MPI_Cancel(&q[i]));
      MPI_OK(MPI_Waitall((int)n, q, MPI_STATUSES_IGNORE));
      n = 0;
    }
    MPI_OK(MPI_Bcast(&n, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    if (rank == 1) receive_all(n, bytes, 0, pat);
    if (rank == 0) MPI_OK(MPI_Waitall((int)n, q, MPI_STATUSES_IGNORE));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) printf("manysends %s ok (%ld posted; %s)\n", mode, posted, msg);
    free(q);
    free((void *)pat);
    MPI_OK(MPI_Finalize());
    return 0;
  }

  CHECK(count <= 0x7fffffffL, "count %ld", count);
  const int sends = rank == 0 || (mutual && rank == 1);
  const int receives = rank == 1 || (mutual && rank == 0);
  const int peer = 1 - rank;
  MPI_Request *q = sends ? malloc(sizeof(MPI_Request) * (size_t)count) : NULL;
  CHECK(!sends || q, "out of memory for %ld requests", count);
  if (sends)
    for (long i = 0; i < count; ++i)
      MPI_OK(MPI_Isend(pat + i % kOffsets, (int)bytes, MPI_BYTE, peer, kTag, MPI_COMM_WORLD, &q[i]));
  /* Every send is posted (and none received) before any receive. */
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (receives) receive_all(count, bytes, peer, pat);
  if (sends) MPI_OK(MPI_Waitall((int)count, q, MPI_STATUSES_IGNORE));
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("manysends ok (%ld x %zu bytes, %s)\n", count, bytes, mode);
  free(q);
  free((void *)pat);
  MPI_OK(MPI_Finalize());
  return 0;
}
