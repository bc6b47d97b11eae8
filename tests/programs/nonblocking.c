/* prog_nonblocking: every rank exchanges a message with every rank (itself
   included) using MPI_Isend / MPI_Irecv, in four rounds that complete the
   requests with MPI_Waitall, MPI_Waitany, MPI_Testany and MPI_Testall
   (plus MPI_Test on single requests in the Testall round). Message sizes
   mix inline (<= 192 bytes) and large messages. All payloads and statuses
   are verified. Repeats the four rounds R times (default 3, argv[1]).
   Rank 0 prints "nonblocking ok". */
#include <string.h>

#include "prog_common.h"

enum { WAITALL, WAITANY, TESTANY, TESTALL, NROUNDS };
static const char *round_name[] = {"Waitall", "Waitany", "Testany", "Testall"};

static int msg_ints(int src, int dst, int r) {
  return (src * 3 + dst * 5 + r * 7) % 4 == 0 ? 3000 : 1 + (src + dst + r) % 40;
}
static int val(int src, int dst, int r, int i) { return ((src * 131 + dst) * 17 + r) * 7919 + i; }

int main(int argc, char **argv) {
  int rank, size, rep, round, p, i;
  long reps;
  int **sbuf, **rbuf;
  MPI_Request *reqs;
  MPI_Status *sts;
  prog_name = "prog_nonblocking";
  MPI_OK(MPI_Init(&argc, &argv));
  MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  reps = arg_long(argc, argv, 1, 3);

  sbuf = (int **)calloc((size_t)size, sizeof(int *));
  rbuf = (int **)calloc((size_t)size, sizeof(int *));
  reqs = (MPI_Request *)malloc(sizeof(MPI_Request) * 2 * (size_t)size);
  sts = (MPI_Status *)malloc(sizeof(MPI_Status) * 2 * (size_t)size);
  CHECK(sbuf && rbuf && reqs && sts, "out of memory");
  for (p = 0; p < size; ++p) {
    sbuf[p] = (int *)malloc(sizeof(int) * 3000);
    rbuf[p] = (int *)malloc(sizeof(int) * 3000);
    CHECK(sbuf[p] && rbuf[p], "out of memory");
  }

  for (rep = 0; rep < reps; ++rep) {
    for (round = 0; round < NROUNDS; ++round) {
      const int r = rep * NROUNDS + round, n = 2 * size;
      int done = 0, flag = 0, index = -1;
      char *seen = (char *)calloc((size_t)n, 1);
      CHECK(seen != NULL, "out of memory");
      /* Receives first (indices 0..size-1, from rank p), then sends. */
      for (p = 0; p < size; ++p) {
        memset(rbuf[p], 0xee, sizeof(int) * 3000);
        MPI_OK(MPI_Irecv(rbuf[p], 3000, MPI_INT, p, r, MPI_COMM_WORLD, &reqs[p]));
      }
      for (p = 0; p < size; ++p) {
        const int m = msg_ints(rank, p, r);
        for (i = 0; i < m; ++i) sbuf[p][i] = val(rank, p, r, i);
        MPI_OK(MPI_Isend(sbuf[p], m, MPI_INT, p, r, MPI_COMM_WORLD, &reqs[size + p]));
      }
      switch (round) {
        case WAITALL:
          MPI_OK(MPI_Waitall(n, reqs, sts));
          for (i = 0; i < n; ++i) seen[i] = 1;
          break;
        case WAITANY:
          for (done = 0; done < n; ++done) {
            MPI_Status st;
            MPI_OK(MPI_Waitany(n, reqs, &index, &st));
            CHECK(index >= 0 && index < n && !seen[index], "Waitany index %d", index);
            CHECK(reqs[index] == MPI_REQUEST_NULL, "Waitany did not free request %d", index);
            seen[index] = 1;
            sts[index] = st;
          }
          MPI_OK(MPI_Waitany(n, reqs, &index, MPI_STATUS_IGNORE));
          CHECK(index == MPI_UNDEFINED, "Waitany on all-null requests gave %d", index);
          break;
        case TESTANY:
          while (done < n) {
            MPI_Status st;
            MPI_OK(MPI_Testany(n, reqs, &index, &flag, &st));
            if (!flag) continue;
            CHECK(index >= 0 && index < n && !seen[index], "Testany index %d", index);
            seen[index] = 1;
            sts[index] = st;
            ++done;
          }
          MPI_OK(MPI_Testany(n, reqs, &index, &flag, MPI_STATUS_IGNORE));
          CHECK(flag && index == MPI_UNDEFINED, "Testany on all-null requests: flag %d index %d",
                flag, index);
          break;
        case TESTALL:
          /* Our own self-receive with MPI_Test first, then the rest. */
          for (flag = 0; !flag;) MPI_OK(MPI_Test(&reqs[rank], &flag, &sts[rank]));
          CHECK(reqs[rank] == MPI_REQUEST_NULL, "MPI_Test did not free the request");
          {
            MPI_Status keep = sts[rank];
            for (flag = 0; !flag;) MPI_OK(MPI_Testall(n, reqs, &flag, sts));
            sts[rank] = keep;  /* Testall gave the empty status of the null request */
          }
          for (i = 0; i < n; ++i) seen[i] = 1;
          break;
      }
      for (i = 0; i < n; ++i) {
        CHECK(seen[i] && reqs[i] == MPI_REQUEST_NULL, "%s: request %d not completed",
              round_name[round], i);
      }
      for (p = 0; p < size; ++p) {
        const int m = msg_ints(p, rank, r);
        int count = -1;
        CHECK(sts[p].MPI_SOURCE == p && sts[p].MPI_TAG == r, "%s: recv %d status %d/%d",
              round_name[round], p, sts[p].MPI_SOURCE, sts[p].MPI_TAG);
        MPI_OK(MPI_Get_count(&sts[p], MPI_INT, &count));
        CHECK(count == m, "%s: from %d count %d want %d", round_name[round], p, count, m);
        for (i = 0; i < m; ++i)
          CHECK(rbuf[p][i] == val(p, rank, r, i), "%s: from %d int %d is %d", round_name[round],
                p, i, rbuf[p][i]);
      }
      free(seen);
    }
  }
  MPI_OK(MPI_Finalize());
  if (rank == 0) printf("nonblocking ok (%d ranks, %ld repetitions)\n", size, reps);
  for (p = 0; p < size; ++p) {
    free(sbuf[p]);
    free(rbuf[p]);
  }
  free(sbuf);
  free(rbuf);
  free(reqs);
  free(sts);
  return 0;
}
