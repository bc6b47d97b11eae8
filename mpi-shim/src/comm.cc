// Communicators: the table, context ids, and the calls that make, compare,
// name and free communicators. Intracommunicators only.
//
// A communicator is its members (world ranks in communicator rank order,
// shared with the groups made from it), the caller's rank, a pair of
// context ids (point-to-point = even id, collectives = id + 1), an error
// handler (inherited from the parent), a name and attributes (attr.cc).
// Point-to-point calls translate ranks through the member list, collectives
// run on the collective context with the communicator's size. A new
// communicator of more than one member is registered with the node managers
// (bcs_comm_register) before anything else is posted on it; one-member
// communicators never reach the runtime (bcs_coll_local).
//
// Context ids. The node managers know a collective context by its id alone,
// for the whole job: a node manager refuses a second registration of an id
// with another member list, and the machine manager adds up the progress
// reports of every node under that id. So an id must never name two
// communicators in a job, not even two with disjoint members (the colours
// of one MPI_Comm_split, two MPI_Comm_create_group on disjoint groups), and
// a freed communicator's id is never used again (the node managers keep
// registrations until the job ends). Ids 0/1 and 2/3 are WORLD and SELF;
// 4 is the point-to-point context of MPI_Comm_create_group's own messages;
// every world rank L owns the ids
//
//     ctx(L, k) = 6 + 2 * (k * world_size + L),   k = 0, 1, 2, ...
//
// and alone hands them out, in order (Shim::next_ctx_index is its k). A new
// communicator's id comes from the space of its *leader*, its member of rank
// 0, which is always among the callers: the members learn the leader's k in
// the exchange the call needs anyway, and only the leader advances its k.
// Ids are therefore unique in the job without any global agreement, and
// every member computes the same one.
//
//   MPI_Comm_dup / idup / dup_with_info: rank 0 of the parent broadcasts its
//     k over the parent (one bcs_coll BCAST on the parent's context). A
//     blocking dup reserves a range of the leader's indexes with it (1, then
//     2, 4, ... 256 at the parent's later exchanges), and the parent's next
//     dups take them in order without any exchange: every member makes the
//     same calls on the parent in the same order (MPI's rule for collective
//     calls), so all agree. idup always exchanges; its index lies past every
//     range the leader reserved.
//   MPI_Comm_split / split_type: one allgather over the parent of (colour,
//     key, k); each colour's members sort by (key, parent rank), and the
//     first one is the leader. split_type's colour is a 63-bit hash of
//     BCS_NODE (the rank's node manager; the host name if unset).
//   MPI_Comm_create: one allgather of k over the parent (the groups may
//     differ between processes, as MPI-2.2 allows, if they are disjoint).
//   MPI_Comm_create_group: collective over the group only. The leader
//     (group rank 0) sends its k to every other member, point-to-point on
//     the reserved context 4 with the caller's tag (8 bytes: inline, so the
//     sends complete at once); the others receive it from the leader.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>

#include "shim.h"

namespace bcs::shim {

// ------------------------------------------------------------ members

int Members::rank_of(int32_t w) const {
  if (identity) return w >= 0 && w < size() ? w : -1;
  auto it = std::lower_bound(index.begin(), index.end(), std::make_pair(w, INT32_MIN));
  return it != index.end() && it->first == w ? it->second : -1;
}

MembersPtr make_members(std::vector<int32_t> world) {
  auto m = std::make_shared<Members>();
  m->world = std::move(world);
  m->identity = true;
  for (size_t i = 0; i < m->world.size(); ++i)
    if (m->world[i] != static_cast<int32_t>(i)) m->identity = false;
  if (!m->identity) {
    m->index.reserve(m->world.size());
    for (size_t i = 0; i < m->world.size(); ++i)
      m->index.emplace_back(m->world[i], static_cast<int32_t>(i));
    std::sort(m->index.begin(), m->index.end());
  }
  return m;
}

namespace {

constexpr int32_t kContextCreateGroup = 4;  // MPI_Comm_create_group's messages
constexpr int32_t kFirstContext = 6;

Comm& new_comm_slot(int* idx) {
  auto& t = S().comms;
  *idx = static_cast<int>(t.size());
  t.push_back(std::make_unique<Comm>());
  return *t.back();
}

}  // namespace

void comm_init() {
  Shim& s = S();
  s.comms.clear();
  std::vector<int32_t> world(static_cast<size_t>(s.size));
  std::iota(world.begin(), world.end(), 0);
  int idx;
  Comm& w = new_comm_slot(&idx);
  w.m = make_members(std::move(world));
  w.rank = s.rank;
  w.context = bcs::kContextWorld;
  w.name = "MPI_COMM_WORLD";
  Comm& self = new_comm_slot(&idx);
  self.m = make_members({s.rank});
  self.rank = 0;
  self.context = bcs::kContextSelf;
  self.name = "MPI_COMM_SELF";
  s.next_ctx_index = 0;
  s.groups.assign(1, Group{true, make_members({})});  // MPI_GROUP_EMPTY
  s.free_groups.clear();
  s.keyvals.clear();
}

namespace {

// ------------------------------------------------------------ context ids

// The context id `k` of world rank `leader`'s space, false if out of ids.
bool context_id(int32_t leader, int64_t k, int32_t* ctx) {
  const int64_t slot = k * S().size + leader;
  const int64_t id = kFirstContext + 2 * slot;
  // The range from kMergedContextOffset up belongs to the hidden
  // communicators of intercommunicators (intercoll_nb.cc).
  if (k < 0 || id > kMergedContextOffset - 2) return false;
  *ctx = static_cast<int32_t>(id);
  return true;
}

int out_of_contexts(int parent, const char* fn) {
  return raise_error(parent, fn, MPI_ERR_OTHER,
                     "out of communicator context ids (too many communicators created)");
}

// Every member's `bytes` of `mine`, in parent rank order, into `all`.
int exchange(const char* fn, int comm, const void* mine, size_t bytes, void* all) {
  bcs_coll_args_t a{};
  a.kind = BCS_COLL_ALLGATHER;
  a.sendbuf = mine;
  a.sbytes = bytes;
  a.recvbuf = all;
  a.rbytes = bytes;
  return run_coll(fn, comm, a, nullptr, nullptr);
}

// Adds a communicator over `m` with context `ctx`, inheriting `parent`'s
// error handler, and registers it with the node managers.
int make_comm(const char* fn, int parent, MembersPtr m, int32_t ctx, int* out) {
  const int me = m->rank_of(S().rank);
  if (m->size() > 1 && !S().singleton) {
    // Before anything is posted on the new contexts; the member array lives
    // as long as the communicator object, i.e. until the process ends.
    const int e = bcs_comm_register(ctx + 1, m->size(), m->world.data());
    if (e != BCS_OK) return raise_bcs(parent, fn, e);
  }
  const MPI_Errhandler h = comm_at(parent).errh;
  Comm& c = new_comm_slot(out);
  c.m = std::move(m);
  c.rank = me;
  c.context = ctx;
  c.errh = h;
  return MPI_SUCCESS;
}

// The most context indexes one exchange of MPI_Comm_dup reserves for the
// parent's next dups (ranges double from 1 up to this).
constexpr int64_t kMaxDupRange = 256;

// The leader of a new communicator over `m` took id k: if that is this
// process, its next id is k + 1.
void advance_if_leader(const Members& m, int64_t k) {
  if (m.world[0] == S().rank) S().next_ctx_index = k + 1;
}

// *c names a communicator the program may free (or disconnect): not
// WORLD or SELF. Its index in *comm.
int check_freeable(const char* fn, const MPI_Comm* c, int* comm) {
  REQUIRE_RUNNING(fn);
  if (!c) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL communicator pointer");
  *comm = comm_index(*c);
  if (*comm == kNoComm)
    return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", *c);
  if (*comm == kWorld || *comm == kSelf)
    return raise_error(*comm, fn, MPI_ERR_COMM, "%s cannot be freed or disconnected",
                       *comm == kWorld ? "MPI_COMM_WORLD" : "MPI_COMM_SELF");
  return MPI_SUCCESS;
}

int check_parent(const char* fn, MPI_Comm c, void* out, int* comm) {
  REQUIRE_RUNNING(fn);
  *comm = comm_index(c);
  if (*comm == kNoComm)
    return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c);
  if (!out) return raise_error(*comm, fn, MPI_ERR_ARG, "NULL newcomm pointer");
  return MPI_SUCCESS;
}

// check_parent for the calls that take an intracommunicator only here
// (split, split_type, create, create_group).
int check_intra_parent(const char* fn, MPI_Comm c, void* out, int* comm) {
  if (int e = check_parent(fn, c, out, comm)) return e;
  if (comm_at(*comm).inter)
    return raise_error(*comm, fn, MPI_ERR_COMM,
                       "not supported on an intercommunicator in this version of bcs");
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ dup

// `user`: MPI_Comm_dup's own (attributes copied); else the shim's private
// dup (comm_dup_private), which the program never sees.
int dup(const char* fn, MPI_Comm c, MPI_Comm* newcomm, bool user = true) {
  int parent;
  if (int e = check_parent(fn, c, newcomm, &parent)) return e;
  if (comm_at(parent).inter) return intercomm_dup(fn, parent, newcomm);
  Comm& p = comm_at(parent);
  MembersPtr m = p.m;
  int64_t k;
  if (p.dup_next < p.dup_end) {
    k = p.dup_next++;  // reserved at an earlier exchange: known to every member
  } else {
    // The leader's (parent rank 0's) next index, and a range of dup_grow
    // indexes from it for this and the next dups of the parent.
    k = S().next_ctx_index;
    bcs_coll_args_t a{};
    a.kind = BCS_COLL_BCAST;
    a.sendbuf = &k;
    a.recvbuf = &k;
    a.sbytes = a.rbytes = sizeof k;
    if (int e = run_coll(fn, parent, a, nullptr, nullptr)) return e;
    Comm& q = comm_at(parent);
    q.dup_next = k + 1;
    q.dup_end = k + q.dup_grow;
    q.dup_grow = std::min<int64_t>(q.dup_grow * 2, kMaxDupRange);
    advance_if_leader(*m, q.dup_end - 1);
  }
  int32_t ctx;
  if (!context_id(m->world[0], k, &ctx)) return out_of_contexts(parent, fn);
  int idx;
  if (int e = make_comm(fn, parent, std::move(m), ctx, &idx)) return e;
  if (!user) {
    comm_at(idx).topo = comm_at(parent).topo;
    comm_at(idx).name = "(a persistent collective's)";
    *newcomm = comm_handle(idx);
    return MPI_SUCCESS;
  }
  if (int e = attr_copy_all(parent, idx)) {
    attr_delete_all(idx);
    comm_at(idx).live = false;
    *newcomm = MPI_COMM_NULL;
    return raise_error(parent, fn, e, "an attribute copy callback failed");
  }
  comm_at(idx).topo = comm_at(parent).topo;  // a dup keeps the topology
  *newcomm = comm_handle(idx);
  return MPI_SUCCESS;
}

// MPI_Comm_idup: the leader's context index travels in a non-blocking
// broadcast, so the call returns at once and the new communicator comes to
// life when the request completes (using it earlier is erroneous in MPI).
// The handle and the attribute copies are made now; the context id, the
// registration with the node managers and `live` at completion. The leader
// takes its index at the call, so communicators it creates meanwhile get
// other ids.
int idup(const char* fn, MPI_Comm c, MPI_Comm* newcomm, MPI_Request* request) {
  int parent;
  if (int e = check_parent(fn, c, newcomm, &parent)) return e;
  if (!request) return raise_error(parent, fn, MPI_ERR_REQUEST, "NULL request pointer");
  if (comm_at(parent).inter) return intercomm_idup(fn, parent, newcomm, request);
  const Comm& p = comm_at(parent);
  MembersPtr m = p.m;
  auto d = std::make_shared<CollData>();
  d->tmp.resize(sizeof(int64_t));
  const int64_t k = S().next_ctx_index;
  std::memcpy(d->tmp.data(), &k, sizeof k);
  advance_if_leader(*m, k);
  int idx;
  Comm& nc = new_comm_slot(&idx);
  nc.live = false;
  nc.m = m;
  nc.rank = m->rank_of(S().rank);
  nc.errh = p.errh;
  nc.topo = p.topo;
  if (int e = attr_copy_all(parent, idx)) {
    attr_delete_all(idx);
    *newcomm = MPI_COMM_NULL;
    return raise_error(parent, fn, e, "an attribute copy callback failed");
  }
  CollData* dp = d.get();
  d->finish = [dp, idx, parent] {
    int64_t leader_k;
    std::memcpy(&leader_k, dp->tmp.data(), sizeof leader_k);
    Comm& n = comm_at(idx);
    int32_t ctx;
    if (!context_id(n.m->world[0], leader_k, &ctx)) {
      out_of_contexts(parent, "MPI_Comm_idup");
      return;
    }
    if (n.m->size() > 1 && !S().singleton) {
      const int e = bcs_comm_register(ctx + 1, n.m->size(), n.m->world.data());
      if (e != BCS_OK) {
        raise_bcs(parent, "MPI_Comm_idup", e);
        return;
      }
    }
    n.context = ctx;
    n.live = true;
  };
  bcs_coll_args_t a{};
  a.kind = BCS_COLL_BCAST;
  a.sendbuf = dp->tmp.data();
  a.recvbuf = dp->tmp.data();
  a.sbytes = a.rbytes = sizeof(int64_t);
  if (int e = run_coll(fn, parent, a, std::move(d), request)) {
    *newcomm = MPI_COMM_NULL;
    return e;
  }
  *newcomm = comm_handle(idx);
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ split

// MPI_Comm_split with a 64-bit colour (kNoColour: MPI_UNDEFINED).
int split(const char* fn, int parent, int64_t colour, int key, MPI_Comm* newcomm) {
  struct Entry {
    int64_t colour;
    int64_t k;
    int32_t key;
    int32_t pad;
  };
  const Comm& p = comm_at(parent);
  const int n = p.size();
  const Entry mine{colour, S().next_ctx_index, key, 0};
  std::vector<Entry> all(static_cast<size_t>(n));
  if (int e = exchange(fn, parent, &mine, sizeof mine, all.data())) return e;
  *newcomm = MPI_COMM_NULL;
  if (colour == kNoColour) return MPI_SUCCESS;
  std::vector<std::pair<int32_t, int32_t>> order;  // (key, parent rank)
  for (int i = 0; i < n; ++i)
    if (all[static_cast<size_t>(i)].colour == colour)
      order.emplace_back(all[static_cast<size_t>(i)].key, i);
  std::sort(order.begin(), order.end());
  std::vector<int32_t> world;
  world.reserve(order.size());
  for (const auto& [k, r] : order) world.push_back(p.m->world[static_cast<size_t>(r)]);
  const int64_t k = all[static_cast<size_t>(order[0].second)].k;
  MembersPtr m = make_members(std::move(world));
  int32_t ctx;
  if (!context_id(m->world[0], k, &ctx)) return out_of_contexts(parent, fn);
  advance_if_leader(*m, k);
  int idx;
  if (int e = make_comm(fn, parent, std::move(m), ctx, &idx)) return e;
  *newcomm = comm_handle(idx);
  return MPI_SUCCESS;
}

// 63-bit FNV-1a of this rank's node manager name (never kNoColour).
int64_t node_colour() {
  const char* node = std::getenv("BCS_NODE");
  char host[256] = "localhost";
  if (!node || !*node) {
    if (gethostname(host, sizeof host) != 0) std::strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    node = host;
  }
  uint64_t h = 1469598103934665603ull;
  for (const char* q = node; *q; ++q) {
    h ^= static_cast<unsigned char>(*q);
    h *= 1099511628211ull;
  }
  return static_cast<int64_t>(h & 0x7fffffffffffffffull);
}

// ------------------------------------------------------------ create

// The group argument of MPI_Comm_create(_group): valid, and a subgroup of
// the parent's.
int check_group(const char* fn, int parent, MPI_Group g, MembersPtr* out) {
  const int gi = group_index(g);
  if (gi < 0) return raise_error(parent, fn, MPI_ERR_GROUP, "invalid group 0x%x", g);
  const MembersPtr& m = S().groups[static_cast<size_t>(gi)].m;
  const Members& pm = *comm_at(parent).m;
  for (int32_t w : m->world)
    if (pm.rank_of(w) < 0)
      return raise_error(parent, fn, MPI_ERR_GROUP,
                         "the group names process %d (world rank), which is not in the "
                         "communicator",
                         w);
  *out = m;
  return MPI_SUCCESS;
}

int create(const char* fn, MPI_Comm c, MPI_Group g, MPI_Comm* newcomm) {
  int parent;
  if (int e = check_parent(fn, c, newcomm, &parent)) return e;
  MembersPtr m;
  if (int e = check_group(fn, parent, g, &m)) return e;
  if (comm_at(parent).inter) {
    // Each side names a subgroup of its local group: a split with one colour.
    const int r = m->rank_of(S().rank);
    return intercomm_split(fn, parent, r >= 0 ? 0 : MPI_UNDEFINED, r, newcomm);
  }
  const Comm& p = comm_at(parent);
  const int64_t mine = S().next_ctx_index;
  std::vector<int64_t> all(static_cast<size_t>(p.size()));
  if (int e = exchange(fn, parent, &mine, sizeof mine, all.data())) return e;
  *newcomm = MPI_COMM_NULL;
  if (m->rank_of(S().rank) < 0) return MPI_SUCCESS;  // not in my group (or it is empty)
  const int64_t k = all[static_cast<size_t>(p.m->rank_of(m->world[0]))];
  int32_t ctx;
  if (!context_id(m->world[0], k, &ctx)) return out_of_contexts(parent, fn);
  advance_if_leader(*m, k);
  int idx;
  if (int e = make_comm(fn, parent, std::move(m), ctx, &idx)) return e;
  *newcomm = comm_handle(idx);
  return MPI_SUCCESS;
}

int create_group(const char* fn, MPI_Comm c, MPI_Group g, int tag, MPI_Comm* newcomm) {
  int parent;
  if (int e = check_intra_parent(fn, c, newcomm, &parent)) return e;
  MembersPtr m;
  if (int e = check_group(fn, parent, g, &m)) return e;
  if (tag < 0 || tag > kTagUb)
    return raise_error(parent, fn, MPI_ERR_TAG, "tag %d out of range (0..%d)", tag, kTagUb);
  *newcomm = MPI_COMM_NULL;
  const int me = m->rank_of(S().rank);
  if (me < 0) return MPI_SUCCESS;  // not a member: a local call
  int64_t k = S().next_ctx_index;
  const int32_t leader = m->world[0];
  if (me == 0) {
    for (int i = 1; i < m->size(); ++i) {
      const int e = post_with_retry([&] {
        return bcs_send(&k, sizeof k, m->world[static_cast<size_t>(i)], tag, kContextCreateGroup,
                        BCS_BLOCKING, nullptr);
      });
      if (e != BCS_OK) return raise_bcs(parent, fn, e);
    }
  } else {
    bcs_msg_status_t st{};
    const int e = post_with_retry([&] {
      return bcs_recv(&k, sizeof k, leader, tag, kContextCreateGroup, BCS_BLOCKING, nullptr, &st);
    });
    if (e != BCS_OK) return raise_bcs(parent, fn, e, sizeof k);
  }
  int32_t ctx;
  if (!context_id(leader, k, &ctx)) return out_of_contexts(parent, fn);
  advance_if_leader(*m, k);
  int idx;
  if (int e = make_comm(fn, parent, std::move(m), ctx, &idx)) return e;
  *newcomm = comm_handle(idx);
  return MPI_SUCCESS;
}

// Communicator argument of a query.
#define QUERY_COMM(fn, c, comm)                                                              \
  REQUIRE_RUNNING(fn);                                                                       \
  const int comm = comm_index(c);                                                            \
  if (comm == kNoComm)                                                                       \
    return raise_error(kNoComm, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c)

}  // namespace

int comm_dup_private(const char* fn, MPI_Comm c, MPI_Comm* newcomm) {
  const int comm = comm_index(c);
  if (comm != kNoComm && comm_at(comm).inter) {
    *newcomm = c;
    return MPI_SUCCESS;
  }
  return dup(fn, c, newcomm, false);
}

int comm_split(const char* fn, int parent, int64_t colour, int key, MPI_Comm* newcomm) {
  return split(fn, parent, colour, key, newcomm);
}

bool comm_context_id(int32_t leader, int64_t k, int32_t* ctx) { return context_id(leader, k, ctx); }

int comm_make(const char* fn, int parent, MembersPtr m, int32_t ctx, int* out) {
  return make_comm(fn, parent, std::move(m), ctx, out);
}

Comm& comm_new_slot(int* idx) { return new_comm_slot(idx); }

}  // namespace bcs::shim

using namespace bcs::shim;

extern "C" {

// ------------------------------------------------------------ queries

int bcs_impl_Comm_rank(MPI_Comm c, int* rank) {
  QUERY_COMM("MPI_Comm_rank", c, comm);
  if (!rank) return raise_error(comm, "MPI_Comm_rank", MPI_ERR_ARG, "NULL rank pointer");
  *rank = comm_rank(comm);
  return MPI_SUCCESS;
}

int bcs_impl_Comm_size(MPI_Comm c, int* size) {
  QUERY_COMM("MPI_Comm_size", c, comm);
  if (!size) return raise_error(comm, "MPI_Comm_size", MPI_ERR_ARG, "NULL size pointer");
  *size = comm_size(comm);
  return MPI_SUCCESS;
}

int bcs_impl_Comm_compare(MPI_Comm c1, MPI_Comm c2, int* result) {
  static const char fn[] = "MPI_Comm_compare";
  QUERY_COMM(fn, c1, a);
  const int b = comm_index(c2);
  if (b == kNoComm) return raise_error(a, fn, MPI_ERR_COMM, "invalid communicator 0x%x", c2);
  if (!result) return raise_error(a, fn, MPI_ERR_ARG, "NULL result pointer");
  const Members& ma = *comm_at(a).m;
  const Members& mb = *comm_at(b).m;
  if (a == b)
    *result = MPI_IDENT;
  else if (ma.world == mb.world)
    *result = MPI_CONGRUENT;
  else if (ma.size() == mb.size() &&
           std::all_of(ma.world.begin(), ma.world.end(), [&](int32_t w) { return mb.rank_of(w) >= 0; }))
    *result = MPI_SIMILAR;
  else
    *result = MPI_UNEQUAL;
  return MPI_SUCCESS;
}

int bcs_impl_Comm_group(MPI_Comm c, MPI_Group* group) {
  QUERY_COMM("MPI_Comm_group", c, comm);
  if (!group) return raise_error(comm, "MPI_Comm_group", MPI_ERR_ARG, "NULL group pointer");
  *group = group_alloc(comm_at(comm).m);
  return MPI_SUCCESS;
}

int bcs_impl_Comm_get_name(MPI_Comm c, char* name, int* resultlen) {
  QUERY_COMM("MPI_Comm_get_name", c, comm);
  if (!name || !resultlen)
    return raise_error(comm, "MPI_Comm_get_name", MPI_ERR_ARG, "NULL pointer");
  const std::string& n = comm_at(comm).name;
  std::memcpy(name, n.c_str(), n.size() + 1);
  *resultlen = static_cast<int>(n.size());
  return MPI_SUCCESS;
}

int bcs_impl_Comm_set_name(MPI_Comm c, const char* name) {
  QUERY_COMM("MPI_Comm_set_name", c, comm);
  if (!name) return raise_error(comm, "MPI_Comm_set_name", MPI_ERR_ARG, "NULL name");
  // Longer names are truncated to MPI_MAX_OBJECT_NAME - 1 characters.
  comm_at(comm).name.assign(name, strnlen(name, MPI_MAX_OBJECT_NAME - 1));
  return MPI_SUCCESS;
}

// ------------------------------------------------------------ construction

int bcs_impl_Comm_dup(MPI_Comm c, MPI_Comm* newcomm) {
  return dup("MPI_Comm_dup", c, newcomm);
}

int bcs_impl_Comm_dup_with_info(MPI_Comm c, MPI_Info info, MPI_Comm* newcomm) {
  // No hints are used, but a bad info handle is an error (MPI_ERR_INFO).
  if (int e = check_info(comm_index(c), "MPI_Comm_dup_with_info", info)) return e;
  return dup("MPI_Comm_dup_with_info", c, newcomm);
}

int bcs_impl_Comm_idup(MPI_Comm c, MPI_Comm* newcomm, MPI_Request* request) {
  return idup("MPI_Comm_idup", c, newcomm, request);
}

// MPI 4.0. No hints are used, but a bad info handle is an error.
int bcs_impl_Comm_idup_with_info(MPI_Comm c, MPI_Info info, MPI_Comm* newcomm,
                                 MPI_Request* request) {
  if (int e = check_info(comm_index(c), "MPI_Comm_idup_with_info", info)) return e;
  return idup("MPI_Comm_idup_with_info", c, newcomm, request);
}

// No bcs process was started by MPI_Comm_spawn (a stub), so none has a
// parent: MPI says MPI_COMM_NULL then. Programs ask to tell a spawned run
// from a launched one.
int bcs_impl_Comm_get_parent(MPI_Comm* parent) {
  static const char fn[] = "MPI_Comm_get_parent";
  REQUIRE_RUNNING(fn);
  if (!parent) return raise_error(kNoComm, fn, MPI_ERR_ARG, "NULL parent pointer");
  *parent = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

// bcs has no MPI_Comm_connect/accept or spawn, so no communicator reaches
// another job and disconnecting one is freeing it once every member
// arrived (a barrier: nothing a member sent on it before is still coming).
int bcs_impl_Comm_disconnect(MPI_Comm* c) {
  static const char fn[] = "MPI_Comm_disconnect";
  int comm;
  if (int e = check_freeable(fn, c, &comm)) return e;
  if (int e = PMPI_Barrier(*c)) return e;
  return PMPI_Comm_free(c);
}

int bcs_impl_Comm_split(MPI_Comm c, int color, int key, MPI_Comm* newcomm) {
  static const char fn[] = "MPI_Comm_split";
  int parent;
  if (int e = check_parent(fn, c, newcomm, &parent)) return e;
  if (comm_at(parent).inter) {
    if (color < 0 && color != MPI_UNDEFINED)
      return raise_error(parent, fn, MPI_ERR_ARG, "invalid color %d", color);
    return intercomm_split(fn, parent, color, key, newcomm);
  }
  if (color < 0 && color != MPI_UNDEFINED)
    return raise_error(parent, fn, MPI_ERR_ARG, "invalid color %d (>= 0 or MPI_UNDEFINED)",
                       color);
  return split(fn, parent, color == MPI_UNDEFINED ? kNoColour : color, key, newcomm);
}

int bcs_impl_Comm_split_type(MPI_Comm c, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
  static const char fn[] = "MPI_Comm_split_type";
  int parent;
  if (int e = check_intra_parent(fn, c, newcomm, &parent)) return e;
  if (int e = check_info(parent, fn, info)) return e;  // hints are ignored
  if (split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED)
    return raise_error(parent, fn, MPI_ERR_ARG,
                       "invalid split_type %d (MPI_COMM_TYPE_SHARED or MPI_UNDEFINED)",
                       split_type);
  return split(fn, parent, split_type == MPI_UNDEFINED ? kNoColour : node_colour(), key,
               newcomm);
}

int bcs_impl_Comm_create(MPI_Comm c, MPI_Group group, MPI_Comm* newcomm) {
  return create("MPI_Comm_create", c, group, newcomm);
}

int bcs_impl_Comm_create_group(MPI_Comm c, MPI_Group group, int tag, MPI_Comm* newcomm) {
  return create_group("MPI_Comm_create_group", c, group, tag, newcomm);
}

int bcs_impl_Comm_free(MPI_Comm* c) {
  static const char fn[] = "MPI_Comm_free";
  int comm;
  if (int e = check_freeable(fn, c, &comm)) return e;
  if (int e = attr_delete_all(comm))
    return raise_error(comm, fn, e, "an attribute delete callback failed");
  // The object stays (see Comm in shim.h): operations still pending on it
  // complete normally, and the node managers may still read its members.
  Comm& x = comm_at(comm);
  x.live = false;
  x.name.clear();
  x.name.shrink_to_fit();
  *c = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

}  // extern "C"
