// Intercommunicators: MPI_Intercomm_create, MPI_Intercomm_merge, MPI_Comm_dup
// of an intercommunicator, and the queries (test_inter, remote_size,
// remote_group). Point-to-point on an intercommunicator names ranks of the
// remote group (p2p.cc translates through Comm::remote); the blocking
// collectives on intercommunicators are in intercoll.cc.
//
// Agreement between the two groups goes through their leaders (rank 0 of
// each group once the intercommunicator exists): they exchange what they know by point-to-point on the
// intercommunicator's collective context (context + 1), which no user
// message can use, and each leader broadcasts the outcome in its group on a
// private intracommunicator of the group (Comm::local, made by a split of
// the local communicator at MPI_Intercomm_create). A new context id is taken
// from the counter of the leader with the lower world rank, so it is unique
// in the job like every other id (comm.cc).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "shim.h"

namespace bcs::shim {
namespace {

// Blocking exchange with the remote leader on `context`: `out_bytes` go,
// `in_bytes` come back.
int leader_exchange(int comm, const char* fn, int32_t remote_world, int32_t context, int tag,
                    const void* out, size_t out_bytes, void* in, size_t in_bytes) {
  bcs_request_t r = BCS_REQUEST_NULL;
  int e = post_with_retry([&] {
    return bcs_recv(in, in_bytes, remote_world, tag, context, BCS_NONBLOCKING, &r, nullptr);
  });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  e = post_with_retry(
      [&] { return bcs_send(out, out_bytes, remote_world, tag, context, BCS_BLOCKING, nullptr); });
  if (e != BCS_OK) return raise_bcs(comm, fn, e);
  int done = 0;
  bcs_msg_status_t st{};
  e = bcs_test(&r, BCS_BLOCKING, &done, &st);
  if (e != BCS_OK) return raise_bcs(comm, fn, e, in_bytes);
  return MPI_SUCCESS;
}

// Broadcast of `bytes` from `root` (default: the group's rank 0, its leader
// after creation) over the group's private comm.
int group_bcast(const char* fn, int local, void* buf, size_t bytes, int root = 0) {
  bcs_coll_args_t a{};
  a.kind = BCS_COLL_BCAST;
  a.root = root;
  a.sendbuf = buf;
  a.recvbuf = buf;
  a.sbytes = a.rbytes = bytes;
  return run_coll(fn, local, a, nullptr, nullptr);
}

// What leaders tell each other when a new context is needed.
struct LeaderInfo {
  int64_t next_ctx;   // the leader's context counter
  int32_t world;      // the leader's world rank
  int32_t high;       // MPI_Intercomm_merge's flag
};

// Picks the context both groups use: from the leader with the lower world
// rank. Returns false when the ids ran out.
bool pick_context(const LeaderInfo& mine, const LeaderInfo& theirs, int32_t* ctx) {
  const LeaderInfo& owner = mine.world < theirs.world ? mine : theirs;
  if (!comm_context_id(owner.world, owner.next_ctx, ctx)) return false;
  if (owner.world == S().rank) S().next_ctx_index = owner.next_ctx + 1;
  return true;
}

int check_inter(const char* fn, MPI_Comm c, int* comm) {
  REQUIRE_RUNNING(fn);
  *comm = comm_index(c);
  if (*comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (!comm_at(*comm).inter)
    return raise_error(*comm, fn, MPI_ERR_COMM, "not an intercommunicator");
  return MPI_SUCCESS;
}

// A new intercommunicator slot over (local members, remote members).
int make_inter(const Comm& like, MembersPtr remote, int32_t ctx, int local, MPI_Comm* out) {
  int idx;
  Comm& n = comm_new_slot(&idx);
  n.m = like.m;
  n.rank = like.rank;
  n.errh = like.errh;
  n.inter = true;
  n.remote = std::move(remote);
  n.local = local;
  n.context = ctx;
  *out = comm_handle(idx);
  return MPI_SUCCESS;
}

}  // namespace
}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

int bcs_impl_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm,
                          int remote_leader, int tag, MPI_Comm* newcomm) {
  static const char fn[] = "MPI_Intercomm_create";
  REQUIRE_RUNNING(fn);
  const int lc = comm_index(local_comm);
  if (lc == kNoComm)
    return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid local communicator 0x%x", local_comm);
  if (!newcomm) return raise_error(lc, fn, MPI_ERR_ARG, "NULL newintercomm pointer");
  *newcomm = MPI_COMM_NULL;
  if (comm_at(lc).inter)
    return raise_error(lc, fn, MPI_ERR_COMM, "the local communicator must be an intracommunicator");
  if (local_leader < 0 || local_leader >= comm_size(lc))
    return raise_error(lc, fn, MPI_ERR_RANK, "local_leader %d out of range", local_leader);
  if (tag < 0 || tag > kTagUb) return raise_error(lc, fn, MPI_ERR_TAG, "invalid tag %d", tag);
  const bool leader = comm_rank(lc) == local_leader;
  int32_t remote_leader_world = -1;
  if (leader) {
    const int pc = comm_index(peer_comm);
    if (pc == kNoComm)
      return raise_error(lc, fn, MPI_ERR_COMM, "invalid peer communicator 0x%x", peer_comm);
    if (remote_leader < 0 || remote_leader >= comm_size(pc))
      return raise_error(lc, fn, MPI_ERR_RANK, "remote_leader %d out of range", remote_leader);
    remote_leader_world = to_world(pc, remote_leader);
    if (comm_at(lc).m->rank_of(remote_leader_world) >= 0)
      return raise_error(lc, fn, MPI_ERR_ARG,
                         "the remote leader (world rank %d) is in the local group: the groups "
                         "of an intercommunicator are disjoint",
                         remote_leader_world);
  }
  // The group's private communicator, in the group's rank order: local_leader
  // speaks for the group during creation; afterwards (merge, dup, the
  // collectives of intercoll.cc) each group's rank 0 does, so both sides know
  // the other's leader without telling (remote->world[0]).
  MPI_Comm priv = MPI_COMM_NULL;
  if (int e = comm_split(fn, lc, 0, comm_rank(lc), &priv)) return e;
  const int local = comm_index(priv);
  const Members& lm = *comm_at(lc).m;
  // Leaders: sizes, counters and member lists, over peer_comm with `tag`.
  std::vector<int64_t> hdr(3, 0), rhdr(3, 0);
  std::vector<int32_t> remote_world;
  if (leader) {
    const int pc = comm_index(peer_comm);
    hdr = {lm.size(), S().next_ctx_index, S().rank};
    const int32_t ctx_peer = context_of(pc);
    if (int e = leader_exchange(lc, fn, remote_leader_world, ctx_peer, tag, hdr.data(),
                                sizeof(int64_t) * 3, rhdr.data(), sizeof(int64_t) * 3))
      return e;
    if (rhdr[0] < 1 || rhdr[0] > S().size)
      return raise_error(lc, fn, MPI_ERR_OTHER, "the remote leader sent a group of %lld",
                         static_cast<long long>(rhdr[0]));
    remote_world.resize(static_cast<size_t>(rhdr[0]));
    if (int e = leader_exchange(lc, fn, remote_leader_world, ctx_peer, tag, lm.world.data(),
                                sizeof(int32_t) * lm.world.size(), remote_world.data(),
                                sizeof(int32_t) * remote_world.size()))
      return e;
  }
  // The leader tells its group: remote size, context, then the members.
  int64_t shared[2] = {0, 0};
  if (leader) {
    const LeaderInfo mine{hdr[1], static_cast<int32_t>(hdr[2]), 0};
    const LeaderInfo theirs{rhdr[1], static_cast<int32_t>(rhdr[2]), 0};
    int32_t ctx;
    if (!pick_context(mine, theirs, &ctx))
      return raise_error(lc, fn, MPI_ERR_OTHER, "out of communicator context ids");
    shared[0] = static_cast<int64_t>(remote_world.size());
    shared[1] = ctx;
  }
  if (int e = group_bcast(fn, local, shared, sizeof shared, local_leader)) return e;
  remote_world.resize(static_cast<size_t>(shared[0]));
  if (int e = group_bcast(fn, local, remote_world.data(), sizeof(int32_t) * remote_world.size(),
                          local_leader))
    return e;
  return make_inter(comm_at(lc), make_members(std::move(remote_world)),
                    static_cast<int32_t>(shared[1]), local, newcomm);
}

int bcs_impl_Intercomm_merge(MPI_Comm c, int high, MPI_Comm* newcomm) {
  static const char fn[] = "MPI_Intercomm_merge";
  int ic;
  if (int e = check_inter(fn, c, &ic)) return e;
  if (!newcomm) return raise_error(ic, fn, MPI_ERR_ARG, "NULL newintracomm pointer");
  *newcomm = MPI_COMM_NULL;
  const Comm& x = comm_at(ic);
  const int local = x.local;
  const bool leader = comm_rank(local) == 0;
  // Leaders agree on the context and on which group comes first.
  int64_t shared[2] = {0, 0};  // context, "my group first"
  if (leader) {
    const LeaderInfo mine{S().next_ctx_index, S().rank, high ? 1 : 0};
    LeaderInfo theirs{};
    if (int e = leader_exchange(ic, fn, x.remote->world[0], x.context + 1, 1, &mine, sizeof mine,
                                &theirs, sizeof theirs))
      return e;
    int32_t ctx;
    if (!pick_context(mine, theirs, &ctx))
      return raise_error(ic, fn, MPI_ERR_OTHER, "out of communicator context ids");
    shared[0] = ctx;
    // The group that said high = false first; a tie goes by leader world rank.
    shared[1] = mine.high != theirs.high ? !mine.high : mine.world < theirs.world;
  }
  if (int e = group_bcast(fn, local, shared, sizeof shared)) return e;
  const Comm& y = comm_at(ic);
  std::vector<int32_t> world;
  const auto& first = shared[1] ? y.m->world : y.remote->world;
  const auto& second = shared[1] ? y.remote->world : y.m->world;
  world.insert(world.end(), first.begin(), first.end());
  world.insert(world.end(), second.begin(), second.end());
  int idx;
  if (int e = comm_make(fn, ic, make_members(std::move(world)), static_cast<int32_t>(shared[0]),
                        &idx))
    return e;
  *newcomm = comm_handle(idx);
  return MPI_SUCCESS;
}

int bcs_impl_Comm_test_inter(MPI_Comm c, int* flag) {
  static const char fn[] = "MPI_Comm_test_inter";
  REQUIRE_RUNNING(fn);
  const int comm = comm_index(c);
  if (comm == kNoComm) return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (!flag) return raise_error(comm, fn, MPI_ERR_ARG, "NULL flag pointer");
  *flag = comm_at(comm).inter ? 1 : 0;
  return MPI_SUCCESS;
}

int bcs_impl_Comm_remote_size(MPI_Comm c, int* size) {
  int ic;
  if (int e = check_inter("MPI_Comm_remote_size", c, &ic)) return e;
  if (!size) return raise_error(ic, "MPI_Comm_remote_size", MPI_ERR_ARG, "NULL size pointer");
  *size = comm_at(ic).remote->size();
  return MPI_SUCCESS;
}

int bcs_impl_Comm_remote_group(MPI_Comm c, MPI_Group* group) {
  int ic;
  if (int e = check_inter("MPI_Comm_remote_group", c, &ic)) return e;
  if (!group) return raise_error(ic, "MPI_Comm_remote_group", MPI_ERR_ARG, "NULL group pointer");
  *group = group_alloc(comm_at(ic).remote);
  return MPI_SUCCESS;
}

}  // extern "C"

namespace bcs::shim {

int intercomm_dup(const char* fn, int ic, MPI_Comm* newcomm) {
  const Comm& x = comm_at(ic);
  const bool leader = comm_rank(x.local) == 0;
  int64_t ctx = 0;
  if (leader) {
    const LeaderInfo mine{S().next_ctx_index, S().rank, 0};
    LeaderInfo theirs{};
    if (int e = leader_exchange(ic, fn, x.remote->world[0], x.context + 1, 2, &mine, sizeof mine,
                                &theirs, sizeof theirs))
      return e;
    int32_t c32;
    if (!pick_context(mine, theirs, &c32))
      return raise_error(ic, fn, MPI_ERR_OTHER, "out of communicator context ids");
    ctx = c32;
  }
  if (int e = group_bcast(fn, comm_at(ic).local, &ctx, sizeof ctx)) return e;
  const Comm& y = comm_at(ic);
  if (int e = make_inter(y, y.remote, static_cast<int32_t>(ctx), y.local, newcomm)) return e;
  // A dup copies the attributes (their copy callbacks decide), like an
  // intracommunicator's.
  const int idx = comm_index(*newcomm);
  if (int e = attr_copy_all(ic, idx)) {
    attr_delete_all(idx);
    comm_at(idx).live = false;
    *newcomm = MPI_COMM_NULL;
    return raise_error(ic, fn, e, "an attribute copy callback failed");
  }
  return MPI_SUCCESS;
}

// MPI_Comm_idup of an intercommunicator. The leaders agree on the context
// as in a dup (they wait only for each other); every other member posts its
// part of the group's broadcast of it and returns at once, and its new
// intercommunicator comes to life when that broadcast completes. So a
// member may communicate (e.g. with its leader) between the idup and its
// wait, as MPI allows.
int intercomm_idup(const char* fn, int ic, MPI_Comm* newcomm, MPI_Request* request) {
  const Comm& x = comm_at(ic);
  Req done;
  done.comm = ic;
  done.local_done = true;
  set_empty_status(&done.local_status);
  if (comm_rank(x.local) == 0) {
    if (int e = intercomm_dup(fn, ic, newcomm)) return e;
    *request = req_alloc(std::move(done));
    return MPI_SUCCESS;
  }
  int idx;
  Comm& n = comm_new_slot(&idx);
  const Comm& y = comm_at(ic);
  n.m = y.m;
  n.rank = y.rank;
  n.errh = y.errh;
  n.inter = true;
  n.remote = y.remote;
  n.local = y.local;
  n.live = false;
  if (int e = attr_copy_all(ic, idx)) {
    attr_delete_all(idx);
    *newcomm = MPI_COMM_NULL;
    return raise_error(ic, fn, e, "an attribute copy callback failed");
  }
  auto d = std::make_shared<CollData>();
  d->tmp.resize(sizeof(int64_t));
  CollData* dp = d.get();
  d->finish = [dp, idx] {
    int64_t ctx;
    std::memcpy(&ctx, dp->tmp.data(), sizeof ctx);
    Comm& c = comm_at(idx);
    c.context = static_cast<int32_t>(ctx);
    c.live = true;
  };
  bcs_coll_args_t a{};
  a.kind = BCS_COLL_BCAST;
  a.root = 0;
  a.sendbuf = dp->tmp.data();
  a.recvbuf = dp->tmp.data();
  a.sbytes = a.rbytes = sizeof(int64_t);
  if (int e = run_coll(fn, comm_at(ic).local, a, std::move(d), request)) {
    *newcomm = MPI_COMM_NULL;
    return e;
  }
  *newcomm = comm_handle(idx);
  return MPI_SUCCESS;
}

// MPI_Comm_split of an intercommunicator: each group splits by colour and
// the parts of one colour on both sides form a new intercommunicator
// (MPI_COMM_NULL where either side is empty). Built from the pieces above:
// merge both groups, exchange (colour, key, side), split the merged
// communicator into the one-colour local groups and join the two sides with
// MPI_Intercomm_create over the merged communicator.
int intercomm_split(const char* fn, int ic, int colour, int key, MPI_Comm* newcomm) {
  *newcomm = MPI_COMM_NULL;
  MPI_Comm merged = MPI_COMM_NULL;
  if (int e = PMPI_Intercomm_merge(comm_handle(ic), 0, &merged)) return e;
  const int mc = comm_index(merged);
  const Comm& x = comm_at(ic);
  struct Entry {
    int32_t colour, key, side, pad;
  };
  const int32_t side = x.m->world[0] < x.remote->world[0] ? 0 : 1;
  const Entry mine{colour, key, side, 0};
  std::vector<Entry> all(static_cast<size_t>(comm_size(mc)));
  bcs_coll_args_t a{};
  a.kind = BCS_COLL_ALLGATHER;
  a.sendbuf = &mine;
  a.sbytes = sizeof mine;
  a.recvbuf = all.data();
  a.rbytes = sizeof mine;
  if (int e = run_coll(fn, mc, a, nullptr, nullptr)) return e;
  // The other side's lowest (key, merged rank) of my colour leads it.
  int remote_leader = -1;
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    const Entry& en = all[static_cast<size_t>(r)];
    if (colour == MPI_UNDEFINED || en.colour != colour || en.side == side) continue;
    if (remote_leader < 0 || en.key < all[static_cast<size_t>(remote_leader)].key) remote_leader = r;
  }
  MPI_Comm part = MPI_COMM_NULL;
  const int64_t c = colour == MPI_UNDEFINED || remote_leader < 0
                        ? kNoColour
                        : static_cast<int64_t>(colour) * 2 + side;
  if (int e = comm_split(fn, mc, c, key, &part)) return e;
  int e = MPI_SUCCESS;
  if (part != MPI_COMM_NULL)
    e = PMPI_Intercomm_create(part, 0, merged, remote_leader, kTagUb, newcomm);
  if (part != MPI_COMM_NULL) PMPI_Comm_free(&part);
  PMPI_Comm_free(&merged);
  return e;
}

}  // namespace bcs::shim
