/* A communication-heavy nondeterministic program for the record overhead
 * (bench/record.sh): every worker sends MSGS 8-byte messages to rank 0 as
 * fast as it can; rank 0 takes them with MPI_ANY_SOURCE, either straight
 * (recv: one wildcard match recorded per message) or found by an
 * MPI_Iprobe(ANY_SOURCE) loop first (iprobe: every probe recorded, found
 * or not, then an exact receive). Rank 0 prints the time from the first
 * barrier to the last message and a hash of the arrival order.
 *
 *   anysource recv|iprobe [MSGS]                                         */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int iprobe = argc > 1 && !strcmp(argv[1], "iprobe");
  const int msgs = argc > 2 ? atoi(argv[2]) : 20000;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  uint64_t hash = 1469598103934665603ull;
  if (rank == 0) {
    const long total = (long)msgs * (size - 1);
    for (long i = 0; i < total; ++i) {
      double v;
      MPI_Status st;
      if (iprobe) {
        int flag = 0;
        while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        MPI_Recv(&v, 1, MPI_DOUBLE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(&v, 1, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      }
      hash = (hash ^ (uint64_t)st.MPI_SOURCE) * 1099511628211ull;
    }
    printf("anysource_s %.6f hash %016llx\n", MPI_Wtime() - t0, (unsigned long long)hash);
  } else {
    for (int i = 0; i < msgs; ++i) {
      double v = i;
      MPI_Send(&v, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
    }
  }
  MPI_Finalize();
  return 0;
}
