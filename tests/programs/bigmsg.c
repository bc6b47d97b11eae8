/* A message of more than 2 GiB, described the BigMPI way: one derived type
   of INT_MAX chars, then a remainder, in a struct. Rank 0 sends it to the
   last rank, which checks every byte, the element count
   (MPI_Get_elements_x), that MPI_Get_count in chars is MPI_UNDEFINED (the
   count does not fit an int) and that MPI_Type_size says MPI_UNDEFINED while
   MPI_Type_size_x gives the size. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "prog_common.h"

static unsigned char pattern(size_t i) { return (unsigned char)((i * 131u + 7u) % 251u); }

int main(int argc, char **argv) {
  prog_name = "bigmsg";
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t n = (size_t)INT_MAX + 4096 + 3;
  MPI_Datatype chunk, rest, big;
  MPI_OK(MPI_Type_contiguous(INT_MAX, MPI_CHAR, &chunk));
  MPI_OK(MPI_Type_contiguous((int)(n - INT_MAX), MPI_CHAR, &rest));
  int lens[2] = {1, 1};
  MPI_Aint disps[2] = {0, INT_MAX};
  MPI_Datatype types[2] = {chunk, rest};
  MPI_OK(MPI_Type_create_struct(2, lens, disps, types, &big));
  MPI_OK(MPI_Type_commit(&big));
  int isize = 0;
  MPI_Count xsize = 0;
  MPI_OK(MPI_Type_size(big, &isize));
  MPI_OK(MPI_Type_size_x(big, &xsize));
  CHECK(isize == MPI_UNDEFINED && xsize == (MPI_Count)n, "type size %d / %lld", isize,
        (long long)xsize);
  const int last = size - 1;
  if (rank == 0 || rank == last) {
    unsigned char *buf = malloc(n);
    CHECK(buf != NULL, "no memory for %zu bytes", n);
    if (rank == 0) {
      for (size_t i = 0; i < n; ++i) buf[i] = pattern(i);
      if (last != 0) MPI_OK(MPI_Send(buf, 1, big, last, 7, MPI_COMM_WORLD));
    }
    if (rank == last) {
      MPI_Status st;
      MPI_Request r;
      memset(buf, 0, n);
      MPI_OK(MPI_Irecv(buf, 1, big, 0, 7, MPI_COMM_WORLD, &r));
      if (last == 0) {
        unsigned char *src = malloc(n);
        CHECK(src != NULL, "no memory for %zu bytes", n);
        for (size_t i = 0; i < n; ++i) src[i] = pattern(i);
        MPI_OK(MPI_Send(src, 1, big, 0, 7, MPI_COMM_WORLD));
        free(src);
      }
      MPI_OK(MPI_Wait(&r, &st));
      MPI_Count elems = 0;
      int count = 0, chars = 0;
      MPI_OK(MPI_Get_elements_x(&st, MPI_CHAR, &elems));
      MPI_OK(MPI_Get_count(&st, big, &count));
      MPI_OK(MPI_Get_count(&st, MPI_CHAR, &chars));
      CHECK(elems == (MPI_Count)n && count == 1 && chars == MPI_UNDEFINED,
            "elements %lld, count %d, chars %d", (long long)elems, count, chars);
      for (size_t i = 0; i < n; ++i)
        CHECK(buf[i] == pattern(i), "byte %zu is %u, not %u", i, buf[i], pattern(i));
    }
    free(buf);
  }
  MPI_OK(MPI_Type_free(&big));
  MPI_OK(MPI_Type_free(&rest));
  MPI_OK(MPI_Type_free(&chunk));
  MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 0) printf("bigmsg ok (%d ranks)\n", size);
  MPI_Finalize();
  return 0;
}
