// The BCS API's collectives, rank side: each is one `coll` descriptor (its
// arguments in CollArgs) that the node managers run in the BBM or RM
// microphase; a one-member communicator, and a member whose part fits in the
// descriptor (application bypass), complete here.
#include <algorithm>
#include <cstring>

#include "rank.h"

using namespace bcs::rank_side;

extern "C" {

bcs_status_t bcs_barrier(int32_t context, bcs_mode_t mode, bcs_request_t* req) {
  bcs_coll_args_t a{};
  a.kind = BCS_COLL_BARRIER;
  a.context = context;
  a.comm_size = one_rank_context(context) ? 1 : st().size;
  return bcs_coll(&a, mode, req);
}

}  // extern "C"

namespace {

bool rooted(bcs_coll_t k) {
  switch (k) {
    case BCS_COLL_BCAST:
    case BCS_COLL_GATHER:
    case BCS_COLL_GATHERV:
    case BCS_COLL_SCATTER:
    case BCS_COLL_SCATTERV:
    case BCS_COLL_REDUCE:
      return true;
    default:
      return false;
  }
}

bool is_reduction(bcs_coll_t k) {
  return k == BCS_COLL_REDUCE || k == BCS_COLL_ALLREDUCE || k == BCS_COLL_REDUCE_SCATTER ||
         k == BCS_COLL_SCAN || k == BCS_COLL_EXSCAN;
}

// Arguments that can be checked without the other members.
bool coll_args_valid(const bcs_coll_args_t* a) {
  if (!a || a->kind < BCS_COLL_BARRIER || a->kind > BCS_COLL_EXSCAN || a->comm_size < 1)
    return false;
  if (rooted(a->kind) && (a->root < 0 || a->root >= a->comm_size)) return false;
  if (is_reduction(a->kind)) {
    const size_t es = bcs_dtype_size(a->dtype);
    if (!es || !bcs_op_supported(a->op, a->dtype)) return false;
    if (a->count > UINT64_MAX / es) return false;
  }
  // Arrays every member needs whatever its role (a root's arrays of
  // GATHERV/SCATTERV are checked by the node manager, which reads them).
  if (a->kind == BCS_COLL_REDUCE_SCATTER && !a->rcounts) return false;
  if ((a->kind == BCS_COLL_ALLGATHERV || a->kind == BCS_COLL_ALLTOALLV) &&
      (!a->rcounts || !a->rdispls))
    return false;
  if (a->kind == BCS_COLL_ALLTOALLV && (!a->scounts || !a->sdispls)) return false;
  return true;
}

uint64_t vec_at(const uint64_t* v, int i) { return v ? v[i] : 0; }

}  // namespace

extern "C" {

bcs_status_t bcs_coll_local(const bcs_coll_args_t* a) {
  if (!coll_args_valid(a) || a->comm_size != 1) return BCS_ERR_ARG;
  const auto* sb = static_cast<const uint8_t*>(a->sendbuf);
  auto* rb = static_cast<uint8_t*>(a->recvbuf);
  const bool in_place = (a->flags & BCS_COLL_IN_PLACE) != 0;
  // memmove: MPI_IN_PLACE maps sendbuf onto recvbuf for several kinds.
  auto copy = [](uint8_t* to, const uint8_t* from, uint64_t n) {
    if (n && to != from) std::memmove(to, from, n);
  };
  switch (a->kind) {
    case BCS_COLL_BARRIER:
    case BCS_COLL_BCAST:  // the root's buffer is the result
    case BCS_COLL_EXSCAN:  // member 0's receive buffer is left untouched
      return BCS_OK;
    case BCS_COLL_GATHER:
    case BCS_COLL_SCATTER:
    case BCS_COLL_ALLGATHER:
    case BCS_COLL_ALLTOALL:
      if (!in_place) copy(rb, sb, std::min(a->sbytes, a->rbytes));
      return a->sbytes > a->rbytes ? BCS_ERR_TRUNCATE : BCS_OK;
    case BCS_COLL_GATHERV:
    case BCS_COLL_ALLGATHERV:
      if (!in_place) copy(rb + vec_at(a->rdispls, 0), sb, std::min(a->sbytes, vec_at(a->rcounts, 0)));
      return a->sbytes > vec_at(a->rcounts, 0) ? BCS_ERR_TRUNCATE : BCS_OK;
    case BCS_COLL_SCATTERV:
      if (!in_place)
        copy(rb, sb + vec_at(a->sdispls, 0), std::min(vec_at(a->scounts, 0), a->rbytes));
      return vec_at(a->scounts, 0) > a->rbytes ? BCS_ERR_TRUNCATE : BCS_OK;
    case BCS_COLL_ALLTOALLV:
      copy(rb + vec_at(a->rdispls, 0), sb + vec_at(a->sdispls, 0),
           std::min(vec_at(a->scounts, 0), vec_at(a->rcounts, 0)));
      return vec_at(a->scounts, 0) > vec_at(a->rcounts, 0) ? BCS_ERR_TRUNCATE : BCS_OK;
    case BCS_COLL_REDUCE:
    case BCS_COLL_ALLREDUCE:
    case BCS_COLL_SCAN:
      copy(rb, sb, a->count * bcs_dtype_size(a->dtype));
      return BCS_OK;
    case BCS_COLL_REDUCE_SCATTER:
      copy(rb, sb, vec_at(a->rcounts, 0) * bcs_dtype_size(a->dtype));
      return BCS_OK;
  }
  return BCS_ERR_ARG;
}

bcs_status_t bcs_comm_register(int32_t coll_context, int32_t size, const int32_t* members) {
  auto& s = st();
  if (!s.initialized) return BCS_ERR_NOT_INIT;
  if (size < 1 || size > s.size || !members || coll_context <= bcs::kContextSelf + 1)
    return BCS_ERR_ARG;
  // Its members on this node, to tell the last local post of each of its
  // collectives (a context's members never change: the node manager
  // refuses a second registration with another list).
  CollContext& c = s.coll_ctx[coll_context];
  c.members_known = true;
  c.local_peers.clear();
  for (int32_t i = 0; i < size; ++i) {
    const int32_t m = members[i];
    if (m != s.rank && m >= 0 && m < s.size && s.local_ctl[static_cast<size_t>(m)])
      c.local_peers.push_back(s.local_ctl[static_cast<size_t>(m)]);
  }
  Descriptor d = make_desc(DescKind::comm, coll_context, 0, 0);
  d.addr = reinterpret_cast<uintptr_t>(members);
  d.len = static_cast<uint64_t>(size);
  post(d);
  return BCS_OK;
}

bcs_status_t bcs_coll(const bcs_coll_args_t* a, bcs_mode_t mode, bcs_request_t* req) {
  auto& s = st();
  if (!s.initialized) return BCS_ERR_NOT_INIT;
  if (!coll_args_valid(a) || (mode == BCS_NONBLOCKING && !req)) return BCS_ERR_ARG;
  if (a->comm_size > s.size) return BCS_ERR_ARG;
  uint32_t idx;
  if (const bcs_status_t e = alloc_slot(DescKind::coll, &idx)) return e;
  if (a->comm_size == 1) {
    const bcs_status_t e = bcs_coll_local(a);
    complete_locally(idx, 0);
    slot(idx).error = e;
  } else {
    Descriptor d = make_desc(DescKind::coll, a->context, 0, 0);
    d.request = idx;
    if (!s.coll_last || s.coll_last_context != a->context) {
      s.coll_last_context = a->context;
      s.coll_last = &s.coll_ctx[a->context];
    }
    d.seq = ++s.coll_last->posted;
    // The peers' words are misses (each peer wrote its own): start them now,
    // for the last-post check after the ring (post()), on a lease only.
    if (mode == BCS_NONBLOCKING &&
        (s.header->nm_flags.load(std::memory_order_relaxed) & bcs::kNmBellOnPost))
      for (const bcs::RankControl* p : s.coll_last->local_peers) __builtin_prefetch(&p->coll_posted);
    bcs::CollArgs c{};
    c.kind = static_cast<uint8_t>(a->kind);
    c.op = static_cast<uint8_t>(a->op);
    c.dtype = static_cast<uint8_t>(a->dtype);
    c.flags = static_cast<uint8_t>(a->flags);
    c.comm_size = a->comm_size;
    c.root = a->root;
    c.comm_rank = -1;  // filled in by the node manager from its own tables
    c.sendbuf = reinterpret_cast<uintptr_t>(a->sendbuf);
    c.recvbuf = reinterpret_cast<uintptr_t>(a->recvbuf);
    c.sbytes = a->sbytes;
    c.rbytes = a->rbytes;
    c.count = a->count;
    c.scounts = reinterpret_cast<uintptr_t>(a->scounts);
    c.sdispls = reinterpret_cast<uintptr_t>(a->sdispls);
    c.rcounts = reinterpret_cast<uintptr_t>(a->rcounts);
    c.rdispls = reinterpret_cast<uintptr_t>(a->rdispls);
    // Application bypass (paper 000): a member that only contributes data
    // small enough for the descriptor hands it over and is done; the node
    // managers finish the operation without it. (Its rank in the
    // communicator is known here for the world; other communicators are
    // never bypassed.)
    const bool world = a->context == bcs::kContextWorld + 1;
    const bool send_only =
        world && ((a->kind == BCS_COLL_BCAST && a->root == s.rank) ||
                  ((a->kind == BCS_COLL_REDUCE || a->kind == BCS_COLL_GATHER ||
                    a->kind == BCS_COLL_GATHERV) &&
                   a->root != s.rank));
    const bool bypass = send_only && a->sbytes <= bcs::kCollInlineMax;
    if (bypass) {
      d.flags = bcs::kDescInline | bcs::kDescNoComplete;
      d.inline_len = static_cast<uint32_t>(a->sbytes);
      if (a->sbytes) std::memcpy(d.payload + bcs::kCollInlineOffset, a->sendbuf, a->sbytes);
    }
    std::memcpy(d.payload, &c, sizeof c);
    post(d, mode == BCS_NONBLOCKING || bypass);
    if (bypass) complete_locally(idx, 0);
  }
  if (mode == BCS_NONBLOCKING) {
    *req = static_cast<bcs_request_t>(idx);
    return BCS_OK;
  }
  return finish_blocking(idx, nullptr);
}

}  // extern "C"
