// Compiled by check_wrappers.sh as C++17 through mpicxx: mpi.h must be
// warning-free under -Wall -Wextra -Werror and link from C++.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <vector>

namespace {
void max_ints(void* in, void* inout, int* len, MPI_Datatype*) {
  for (int i = 0; i < *len; ++i)
    static_cast<int*>(inout)[i] = std::max(static_cast<int*>(inout)[i], static_cast<int*>(in)[i]);
}
}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<MPI_Request> reqs(2, MPI_REQUEST_NULL);
  MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE);
  std::vector<int> v{1, 2, 3}, r(3);
  MPI_Op op = MPI_OP_NULL;
  MPI_User_function* fn = max_ints;
  if (MPI_Op_create(fn, 1, &op) != MPI_SUCCESS) return 4;
  MPI_Allreduce(v.data(), r.data(), 3, MPI_INT, op, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, v.data(), 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const std::vector<int> counts{3}, displs{0};
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r.data(), counts.data(), displs.data(),
                 MPI_INT, MPI_COMM_WORLD);
  MPI_Request req;
  MPI_Iexscan(v.data(), r.data(), 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  MPI_Op_free(&op);
  if (r != v || op != MPI_OP_NULL) return 5;
  // Communicators and attributes from C++: the predefined callbacks are
  // functions, usable where the callback types are expected.
  MPI_Comm dup = MPI_COMM_NULL;
  int kv = MPI_KEYVAL_INVALID, flag = 0;
  MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &kv, nullptr);
  MPI_Comm_set_attr(MPI_COMM_WORLD, kv, &rank);
  MPI_Comm_idup(MPI_COMM_WORLD, &dup, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  void* got = nullptr;
  MPI_Comm_get_attr(dup, kv, &got, &flag);
  MPI_Comm_free(&dup);
  MPI_Comm_delete_attr(MPI_COMM_WORLD, kv);
  MPI_Comm_free_keyval(&kv);
  if (!flag || got != &rank || dup != MPI_COMM_NULL) return 6;
  double t0 = MPI_Wtime();
  double t1 = MPI_Wtime();
  MPI_Finalize();
  if (rank != 0 || t1 < t0) return 3;
  std::printf("c++ header ok\n");
  return 0;
}
