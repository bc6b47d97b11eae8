// Neighbourhood collectives (MPI-3.1 §7.6): MPI_(I)Neighbor_allgather(v)
// and MPI_(I)Neighbor_alltoall(v/w) on a communicator with a topology.
//
// Each one is an ordinary collective of the communicator: every member calls
// it in the same order as its other collectives, so it runs as one
// BCS_COLL_ALLTOALLV in the node managers (BBM), on the communicator's
// collective context, and is progressed by them like any other collective
// (the non-blocking forms need no MPI call between post and wait). The
// shim packs, per peer, the blocks of the out-neighbour slots that name that
// peer and unpacks what arrives from a peer into the in-neighbour slots that
// name it (in slot order). When a peer appears in several slots, the pairing
// is MPI's: on a graph, the k-th message from a peer fills the k-th slot
// naming it; on a Cartesian grid (a periodic dimension of size 1 or 2),
// what a process sends in the + direction of dimension d arrives in its
// peer's - slot of d and vice versa, so a sender packs each dimension's
// two slots in the order (+, -).
// MPI_PROC_NULL slots send nothing and leave their receive block untouched.
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "shim.h"

namespace bcs::shim {
namespace {

struct Block {
  const unsigned char* src = nullptr;  // send side
  unsigned char* dst = nullptr;        // receive side
  uint64_t bytes = 0;
};

// What one call names: the block of every out-slot and every in-slot.
struct NeighborCall {
  const char* fn = nullptr;
  int comm = kNoComm;
  std::vector<int> in, out;
  std::vector<Block> sends, recvs;  // by out-slot / in-slot
};

int begin(NeighborCall& k, MPI_Comm c, bool nb, MPI_Request* request) {
  REQUIRE_RUNNING(k.fn);
  k.comm = comm_index(c);
  if (k.comm == kNoComm)
    return raise_error(kNoComm, k.fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (!topo_neighbours(k.comm, &k.in, &k.out))
    return raise_error(k.comm, k.fn, MPI_ERR_TOPOLOGY,
                       "the communicator has no topology (neighbourhood collectives need one)");
  if (nb && !request) return raise_error(k.comm, k.fn, MPI_ERR_REQUEST, "NULL request pointer");
  k.sends.resize(k.out.size());
  k.recvs.resize(k.in.size());
  return MPI_SUCCESS;
}

int check_count(const NeighborCall& k, const char* what, int count, MPI_Datatype t) {
  if (count < 0) return raise_error(k.comm, k.fn, MPI_ERR_COUNT, "%s %d (must be >= 0)", what, count);
  if (count > 0 && type_size(t) < 0)
    return raise_error(k.comm, k.fn, MPI_ERR_TYPE, "invalid datatype 0x%x", t);
  return MPI_SUCCESS;
}

int check_buf(const NeighborCall& k, const char* what, const void* buf, uint64_t bytes) {
  if (bytes > 0 && buf == nullptr)
    return raise_error(k.comm, k.fn, MPI_ERR_BUFFER, "NULL %s with a non-empty block", what);
  if (buf == MPI_IN_PLACE)
    return raise_error(k.comm, k.fn, MPI_ERR_BUFFER,
                       "MPI_IN_PLACE is not allowed in neighbourhood collectives");
  return MPI_SUCCESS;
}

// Packs the send blocks per peer, posts one ALLTOALLV and unpacks into the
// receive blocks when it completes.
int run(NeighborCall& k, MPI_Request* request) {
  const int n = comm_size(k.comm);
  auto d = std::make_shared<CollData>();
  d->scounts.assign(static_cast<size_t>(n), 0);
  d->rcounts.assign(static_cast<size_t>(n), 0);
  d->sdispls.assign(static_cast<size_t>(n), 0);
  d->rdispls.assign(static_cast<size_t>(n), 0);
  for (size_t j = 0; j < k.out.size(); ++j)
    if (k.out[j] != MPI_PROC_NULL) d->scounts[static_cast<size_t>(k.out[j])] += k.sends[j].bytes;
  for (size_t i = 0; i < k.in.size(); ++i)
    if (k.in[i] != MPI_PROC_NULL) d->rcounts[static_cast<size_t>(k.in[i])] += k.recvs[i].bytes;
  uint64_t stotal = 0, rtotal = 0;
  for (int p = 0; p < n; ++p) {
    d->sdispls[static_cast<size_t>(p)] = stotal;
    stotal += d->scounts[static_cast<size_t>(p)];
    d->rdispls[static_cast<size_t>(p)] = rtotal;
    rtotal += d->rcounts[static_cast<size_t>(p)];
  }
  d->tmp.resize(stotal + rtotal);
  unsigned char* sbuf = d->tmp.data();
  unsigned char* rbuf = d->tmp.data() + stotal;
  {
    std::vector<size_t> order(k.out.size());
    for (size_t j = 0; j < order.size(); ++j) order[j] = j;
    if (comm_at(k.comm).topo->kind == MPI_CART)
      for (size_t j = 0; j + 1 < order.size(); j += 2) std::swap(order[j], order[j + 1]);
    std::vector<uint64_t> at = d->sdispls;
    for (size_t j : order) {
      if (k.out[j] == MPI_PROC_NULL || k.sends[j].bytes == 0) continue;
      uint64_t& o = at[static_cast<size_t>(k.out[j])];
      std::memcpy(sbuf + o, k.sends[j].src, k.sends[j].bytes);
      o += k.sends[j].bytes;
    }
  }
  // Unpack, in the same per-peer slot order.
  auto in = k.in;
  auto recvs = k.recvs;
  auto rdispls = d->rdispls;
  d->finish = [in, recvs, rdispls, rbuf]() mutable {
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i] == MPI_PROC_NULL || recvs[i].bytes == 0) continue;
      uint64_t& o = rdispls[static_cast<size_t>(in[i])];
      std::memcpy(recvs[i].dst, rbuf + o, recvs[i].bytes);
      o += recvs[i].bytes;
    }
  };
  bcs_coll_args_t a{};
  a.kind = BCS_COLL_ALLTOALLV;
  a.sendbuf = sbuf;
  a.recvbuf = rbuf;
  a.scounts = d->scounts.data();
  a.sdispls = d->sdispls.data();
  a.rcounts = d->rcounts.data();
  a.rdispls = d->rdispls.data();
  return run_coll(k.fn, k.comm, a, std::move(d), request);
}

// ------------------------------------------------------------ the calls

int allgather(const char* fn, const void* sendbuf, int scount, MPI_Datatype stype, void* recvbuf,
              const int* rcounts, const int* displs, int rcount, MPI_Datatype rtype, MPI_Comm c,
              bool nb, MPI_Request* request) {
  NeighborCall k;
  k.fn = fn;
  if (int e = begin(k, c, nb, request)) return e;
  if (int e = check_count(k, "sendcount", scount, stype)) return e;
  const uint64_t sb = bytes_of(scount, stype);
  if (int e = check_buf(k, "sendbuf", sendbuf, sb)) return e;
  for (auto& s : k.sends) s = Block{static_cast<const unsigned char*>(sendbuf), nullptr, sb};
  const uint64_t unit = unit_of(rtype);
  for (size_t i = 0; i < k.in.size(); ++i) {
    const int cnt = rcounts ? rcounts[i] : rcount;
    if (int e = check_count(k, "recvcount", cnt, rtype)) return e;
    const int64_t disp = rcounts ? displs[i] : static_cast<int64_t>(i) * rcount;
    k.recvs[i].bytes = bytes_of(cnt, rtype);
    if (int e = check_buf(k, "recvbuf", recvbuf, k.recvs[i].bytes)) return e;
    k.recvs[i].dst = static_cast<unsigned char*>(recvbuf) + disp * static_cast<int64_t>(unit);
  }
  return run(k, request);
}

int alltoall(const char* fn, const void* sendbuf, const int* scounts, const MPI_Aint* sdispls,
             const int* sdispls_el, int scount, const MPI_Datatype* stypes, MPI_Datatype stype,
             void* recvbuf, const int* rcounts, const MPI_Aint* rdispls, const int* rdispls_el,
             int rcount, const MPI_Datatype* rtypes, MPI_Datatype rtype, MPI_Comm c, bool nb,
             MPI_Request* request) {
  NeighborCall k;
  k.fn = fn;
  if (int e = begin(k, c, nb, request)) return e;
  if ((scounts && !(sdispls || sdispls_el)) || (rcounts && !(rdispls || rdispls_el)))
    return raise_error(k.comm, fn, MPI_ERR_ARG, "NULL displacement array");
  for (size_t j = 0; j < k.out.size(); ++j) {
    const MPI_Datatype t = stypes ? stypes[j] : stype;
    const int cnt = scounts ? scounts[j] : scount;
    if (int e = check_count(k, "sendcount", cnt, t)) return e;
    const int64_t off = sdispls      ? sdispls[j]
                        : sdispls_el ? static_cast<int64_t>(sdispls_el[j]) * static_cast<int64_t>(unit_of(t))
                                     : static_cast<int64_t>(j) * scount * static_cast<int64_t>(unit_of(t));
    k.sends[j].bytes = bytes_of(cnt, t);
    if (int e = check_buf(k, "sendbuf", sendbuf, k.sends[j].bytes)) return e;
    k.sends[j].src = static_cast<const unsigned char*>(sendbuf) + off;
  }
  for (size_t i = 0; i < k.in.size(); ++i) {
    const MPI_Datatype t = rtypes ? rtypes[i] : rtype;
    const int cnt = rcounts ? rcounts[i] : rcount;
    if (int e = check_count(k, "recvcount", cnt, t)) return e;
    const int64_t off = rdispls      ? rdispls[i]
                        : rdispls_el ? static_cast<int64_t>(rdispls_el[i]) * static_cast<int64_t>(unit_of(t))
                                     : static_cast<int64_t>(i) * rcount * static_cast<int64_t>(unit_of(t));
    k.recvs[i].bytes = bytes_of(cnt, t);
    if (int e = check_buf(k, "recvbuf", recvbuf, k.recvs[i].bytes)) return e;
    k.recvs[i].dst = static_cast<unsigned char*>(recvbuf) + off;
  }
  return run(k, request);
}

}  // namespace
}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

int bcs_impl_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return allgather("MPI_Neighbor_allgather", sendbuf, sendcount, sendtype, recvbuf, nullptr,
                   nullptr, recvcount, recvtype, comm, false, nullptr);
}

int bcs_impl_Ineighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                             void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                             MPI_Request* request) {
  return allgather("MPI_Ineighbor_allgather", sendbuf, sendcount, sendtype, recvbuf, nullptr,
                   nullptr, recvcount, recvtype, comm, true, request);
}

int bcs_impl_Neighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                             void* recvbuf, const int recvcounts[], const int displs[],
                             MPI_Datatype recvtype, MPI_Comm comm) {
  if (!recvcounts || !displs)
    return raise_error(comm_index(comm), "MPI_Neighbor_allgatherv", MPI_ERR_ARG,
                       "NULL recvcounts or displs");
  return allgather("MPI_Neighbor_allgatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                   displs, 0, recvtype, comm, false, nullptr);
}

int bcs_impl_Ineighbor_allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                              void* recvbuf, const int recvcounts[], const int displs[],
                              MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  if (!recvcounts || !displs)
    return raise_error(comm_index(comm), "MPI_Ineighbor_allgatherv", MPI_ERR_ARG,
                       "NULL recvcounts or displs");
  return allgather("MPI_Ineighbor_allgatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts,
                   displs, 0, recvtype, comm, true, request);
}

int bcs_impl_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                           void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return alltoall("MPI_Neighbor_alltoall", sendbuf, nullptr, nullptr, nullptr, sendcount, nullptr,
                  sendtype, recvbuf, nullptr, nullptr, nullptr, recvcount, nullptr, recvtype, comm,
                  false, nullptr);
}

int bcs_impl_Ineighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                            void* recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm,
                            MPI_Request* request) {
  return alltoall("MPI_Ineighbor_alltoall", sendbuf, nullptr, nullptr, nullptr, sendcount, nullptr,
                  sendtype, recvbuf, nullptr, nullptr, nullptr, recvcount, nullptr, recvtype, comm,
                  true, request);
}

int bcs_impl_Neighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                            MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                            const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  if (!sendcounts || !recvcounts)
    return raise_error(comm_index(comm), "MPI_Neighbor_alltoallv", MPI_ERR_ARG, "NULL counts");
  return alltoall("MPI_Neighbor_alltoallv", sendbuf, sendcounts, nullptr, sdispls, 0, nullptr,
                  sendtype, recvbuf, recvcounts, nullptr, rdispls, 0, nullptr, recvtype, comm,
                  false, nullptr);
}

int bcs_impl_Ineighbor_alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                             MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                             const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                             MPI_Request* request) {
  if (!sendcounts || !recvcounts)
    return raise_error(comm_index(comm), "MPI_Ineighbor_alltoallv", MPI_ERR_ARG, "NULL counts");
  return alltoall("MPI_Ineighbor_alltoallv", sendbuf, sendcounts, nullptr, sdispls, 0, nullptr,
                  sendtype, recvbuf, recvcounts, nullptr, rdispls, 0, nullptr, recvtype, comm,
                  true, request);
}

int bcs_impl_Neighbor_alltoallw(const void* sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                            const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                            const MPI_Aint rdispls[], const MPI_Datatype recvtypes[],
                            MPI_Comm comm) {
  if (!sendcounts || !recvcounts || !sendtypes || !recvtypes)
    return raise_error(comm_index(comm), "MPI_Neighbor_alltoallw", MPI_ERR_ARG,
                       "NULL counts or types");
  return alltoall("MPI_Neighbor_alltoallw", sendbuf, sendcounts, sdispls, nullptr, 0, sendtypes,
                  MPI_DATATYPE_NULL, recvbuf, recvcounts, rdispls, nullptr, 0, recvtypes,
                  MPI_DATATYPE_NULL, comm, false, nullptr);
}

int bcs_impl_Ineighbor_alltoallw(const void* sendbuf, const int sendcounts[],
                             const MPI_Aint sdispls[], const MPI_Datatype sendtypes[],
                             void* recvbuf, const int recvcounts[], const MPI_Aint rdispls[],
                             const MPI_Datatype recvtypes[], MPI_Comm comm,
                             MPI_Request* request) {
  if (!sendcounts || !recvcounts || !sendtypes || !recvtypes)
    return raise_error(comm_index(comm), "MPI_Ineighbor_alltoallw", MPI_ERR_ARG,
                       "NULL counts or types");
  return alltoall("MPI_Ineighbor_alltoallw", sendbuf, sendcounts, sdispls, nullptr, 0, sendtypes,
                  MPI_DATATYPE_NULL, recvbuf, recvcounts, rdispls, nullptr, 0, recvtypes,
                  MPI_DATATYPE_NULL, comm, true, request);
}

}  // extern "C"
