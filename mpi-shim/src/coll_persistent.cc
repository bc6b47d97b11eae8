// Persistent collectives (MPI 4.0): MPI_Barrier_init ... MPI_Scan_init and
// the neighbourhood ones. Each is a persistent request (request.cc,
// persistent_request) whose every MPI_Start posts the matching
// non-blocking collective with the arguments given at init, so a round is
// exactly an MPI_Ixxx: the same checks, the same descriptor, the same
// progress by the node managers, and MPI_Wait/MPI_Test complete it and
// leave it inactive. The rounds run on a private duplicate of the
// communicator made at init (comm_dup_private): collectives match by
// context and number, so each persistent collective having a context of
// its own makes its rounds match by the order of the init calls, whatever
// order the members start them in (MPI 4.0 allows any). On an
// intercommunicator the rounds use the communicator itself and must be
// started in the same order everywhere. Buffers, counts and displacement arrays are the
// program's, read at each start (MPI forbids changing them while the
// request exists); the datatypes are held until the request is freed, so
// the program may free its handles after init. `info` is accepted and
// ignored (no hint changes what bcs does). Argument errors other than the
// ones the generated layer catches at init (communicator, count, datatype)
// are raised by MPI_Start, naming the non-blocking call the round posts.
#include <memory>
#include <vector>

#include "shim.h"

using namespace bcs::shim;

namespace {

std::vector<std::shared_ptr<void>> holds(std::initializer_list<MPI_Datatype> types) {
  std::vector<std::shared_ptr<void>> h;
  for (MPI_Datatype t : types)
    if (auto x = type_hold(t)) h.push_back(std::move(x));
  return h;
}

// The datatypes of a w-variant, one per member (or neighbour) of `c`.
std::vector<std::shared_ptr<void>> holds_of(const MPI_Datatype* a, int n) {
  std::vector<std::shared_ptr<void>> h;
  for (int i = 0; a && i < n; ++i)
    if (auto x = type_hold(a[i])) h.push_back(std::move(x));
  return h;
}

// The datatypes of MPI_Alltoallw_init: one per member of the other side
// (the remote group of an intercommunicator). A bad communicator holds
// none; the start reports it.
std::vector<std::shared_ptr<void>> w_holds(MPI_Comm comm, const MPI_Datatype* s,
                                           const MPI_Datatype* r) {
  int n = 0, inter = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
      (inter ? PMPI_Comm_remote_size(comm, &n) : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS)
    n = 0;
  auto h = holds_of(s, n);
  for (auto& x : holds_of(r, n)) h.push_back(std::move(x));
  return h;
}

// The datatypes of MPI_Neighbor_alltoallw_init: as many as the topology
// has neighbours on each side.
std::vector<std::shared_ptr<void>> neighbor_w_holds(MPI_Comm comm, const MPI_Datatype* s,
                                                    const MPI_Datatype* r) {
  int indeg = 0, outdeg = 0, weighted = 0, kind = MPI_UNDEFINED;
  if (PMPI_Topo_test(comm, &kind) == MPI_SUCCESS && kind == MPI_CART) {
    int nd = 0;
    PMPI_Cartdim_get(comm, &nd);
    indeg = outdeg = 2 * nd;
  } else if (kind == MPI_DIST_GRAPH) {
    PMPI_Dist_graph_neighbors_count(comm, &indeg, &outdeg, &weighted);
  } else if (kind == MPI_GRAPH) {
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Graph_neighbors_count(comm, rank, &indeg);
    outdeg = indeg;
  }
  auto h = holds_of(s, outdeg);
  for (auto& x : holds_of(r, indeg)) h.push_back(std::move(x));
  return h;
}

// The private communicator of one persistent collective, freed with it.
struct PrivateComm {
  MPI_Comm parent = MPI_COMM_NULL, c = MPI_COMM_NULL;
  ~PrivateComm() {
    if (c != MPI_COMM_NULL && c != parent && S().phase == Phase::running) PMPI_Comm_free(&c);
  }
};

// A persistent collective of `fn` on `comm`: a private communicator made
// now (held with `h`), and a request whose every start calls `post` with
// that communicator.
template <typename Post>
int persist(const char* fn, MPI_Comm comm, std::vector<std::shared_ptr<void>> h,
            MPI_Request* request, Post post) {
  auto p = std::make_shared<PrivateComm>();
  p->parent = comm;
  if (int e = comm_dup_private(fn, comm, &p->c)) return e;
  const MPI_Comm pc = p->c;
  h.push_back(std::move(p));
  return persistent_request(fn, comm, std::move(h), request,
                            [=](MPI_Request* r) { return post(pc, r); });
}

}  // namespace

extern "C" {

int bcs_impl_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Barrier_init", comm, {}, request,
                 [=](MPI_Comm pc, MPI_Request* r) { return PMPI_Ibarrier(pc, r); });
}

int bcs_impl_Bcast_init(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                        MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Bcast_init", comm, holds({datatype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Ibcast(buffer, count, datatype, root, pc, r);
                 });
}

int bcs_impl_Gather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                         int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                         MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Gather_init", comm, holds({sendtype, recvtype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                       root, pc, r);
                 });
}

int bcs_impl_Gatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                          const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                          int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Gatherv_init", comm, holds({sendtype, recvtype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                        recvtype, root, pc, r);
                 });
}

int bcs_impl_Scatter_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                          int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                          MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Scatter_init", comm, holds({sendtype, recvtype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                        root, pc, r);
                 });
}

int bcs_impl_Scatterv_init(const void* sendbuf, const int sendcounts[], const int displs[],
                           MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                           MPI_Request* request) {
  (void)info;
  return persist("MPI_Scatterv_init", comm, holds({sendtype, recvtype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                                         recvtype, root, pc, r);
                 });
}

int bcs_impl_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                            MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Allgather_init", comm, holds({sendtype, recvtype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                          recvtype, pc, r);
                 });
}

int bcs_impl_Allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                             void* recvbuf, const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                             MPI_Request* request) {
  (void)info;
  return persist("MPI_Allgatherv_init", comm, holds({sendtype, recvtype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                                           displs, recvtype, pc, r);
                 });
}

int bcs_impl_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                           MPI_Request* request) {
  (void)info;
  return persist("MPI_Alltoall_init", comm, holds({sendtype, recvtype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                         pc, r);
                 });
}

int bcs_impl_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                            MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                            const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                            MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Alltoallv_init", comm, holds({sendtype, recvtype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                          recvcounts, rdispls, recvtype, pc, r);
                 });
}

int bcs_impl_Alltoallw_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                            const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                            const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                            MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Alltoallw_init", comm, w_holds(comm, sendtypes, recvtypes), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                                          recvcounts, rdispls, recvtypes, pc, r);
                 });
}

int bcs_impl_Reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                         MPI_Op op, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Reduce_init", comm, holds({datatype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, pc, r);
                 });
}

int bcs_impl_Allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                            MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Allreduce_init", comm, holds({datatype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, pc, r);
                 });
}

int bcs_impl_Reduce_scatter_init(const void* sendbuf, void* recvbuf, const int recvcounts[],
                                 MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info,
                                 MPI_Request* request) {
  (void)info;
  return persist("MPI_Reduce_scatter_init", comm, holds({datatype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, pc, r);
                 });
}

int bcs_impl_Reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount,
                                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                       MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Reduce_scatter_block_init", comm, holds({datatype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, pc,
                                                     r);
                 });
}

int bcs_impl_Scan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                       MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Scan_init", comm, holds({datatype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Iscan(sendbuf, recvbuf, count, datatype, op, pc, r);
                 });
}

int bcs_impl_Exscan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                         MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Exscan_init", comm, holds({datatype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Iexscan(sendbuf, recvbuf, count, datatype, op, pc, r);
                 });
}

// ------------------------------------------------------------ neighbourhood

int bcs_impl_Neighbor_allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                     void* recvbuf, int recvcount, MPI_Datatype recvtype,
                                     MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Neighbor_allgather_init", comm, holds({sendtype, recvtype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Ineighbor_allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                                   recvtype, pc, r);
                 });
}

int bcs_impl_Neighbor_allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                      void* recvbuf, const int recvcounts[], const int displs[],
                                      MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                      MPI_Request* request) {
  (void)info;
  return persist("MPI_Neighbor_allgatherv_init", comm, holds({sendtype, recvtype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Ineighbor_allgatherv(sendbuf, sendcount, sendtype, recvbuf,
                                                    recvcounts, displs, recvtype, pc, r);
                 });
}

int bcs_impl_Neighbor_alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                                    void* recvbuf, int recvcount, MPI_Datatype recvtype,
                                    MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Neighbor_alltoall_init", comm, holds({sendtype, recvtype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Ineighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                                  recvtype, pc, r);
                 });
}

int bcs_impl_Neighbor_alltoallv_init(const void* sendbuf, const int sendcounts[],
                                     const int sdispls[], MPI_Datatype sendtype, void* recvbuf,
                                     const int recvcounts[], const int rdispls[],
                                     MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                                     MPI_Request* request) {
  (void)info;
  return persist("MPI_Neighbor_alltoallv_init", comm, holds({sendtype, recvtype}), request,
                 [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Ineighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf,
                                                   recvcounts, rdispls, recvtype, pc, r);
                 });
}

int bcs_impl_Neighbor_alltoallw_init(const void* sendbuf, const int sendcounts[],
                                     const MPI_Aint sdispls[], const MPI_Datatype sendtypes[],
                                     void* recvbuf, const int recvcounts[],
                                     const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
                                     MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  (void)info;
  return persist("MPI_Neighbor_alltoallw_init", comm, neighbor_w_holds(comm, sendtypes, recvtypes),
                 request, [=](MPI_Comm pc, MPI_Request* r) {
                   return PMPI_Ineighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                                                   recvcounts, rdispls, recvtypes, pc, r);
                 });
}

}  // extern "C"
