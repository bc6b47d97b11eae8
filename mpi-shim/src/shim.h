// Internal interface of libmpi (mpi-shim), shared by its source files:
//
//   env.cc         the shim state, init/finalize/abort, thread level,
//                  versions, Wtime, Alloc_mem/Free_mem, Pcontrol
//   errhandler.cc  error classes and codes (predefined and user), raise_error,
//                  communicator error handlers (predefined and user)
//   info.cc        info objects, MPI_INFO_ENV, Comm_set_info/get_info
//   comm.cc        the communicator table, context ids, Comm_dup/split/
//                  create/free/compare/name, Comm_rank/size
//   group.cc       the group table and the group algebra
//   attr.cc        keyvals, communicator and datatype attributes and their
//                  callbacks
//   datatype.cc    the datatype table, Type_size/Get_count/Get_elements
//   p2p.cc         the MPI request table, send/recv/probe, Wait/Test families
//   op.cc          MPI_Op (predefined and user ops), MPI_Reduce_local
//   coll.cc        collective checks and posting, barrier, bcast, gather,
//                  scatter, allgather, alltoall (and their v/w/I variants)
//   coll_reduce.cc reduce, allreduce, reduce_scatter, scan, exscan
//   interop.cc     C/Fortran handle and status conversion, MPI_Aint_add/diff
//   mpit.cc        the tool information interface (MPI_T)
//   unsupported.cc what the generated stubs of unimplemented calls raise
//
// mpi.h and the stubs are generated from mpi-shim/api/mpi.api (see
// mpi-shim/api/README.md): a function defined here must be marked "impl"
// there, or the library fails to link (duplicate or missing symbol).
//
// Nothing here is exported: these functions have external linkage inside
// the library only, and the version script (libmpi.map) keeps just MPI_* and
// PMPI_* global. Every MPI function is defined as PMPI_x with MPI_x a weak
// alias (BCS_PMPI_ALIAS), so profiling tools can interpose MPI_x and call
// PMPI_x. Internal code never calls MPI_x.
#pragma once

#include <mpi.h>
#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bcs/bcs.h"
// bcs_impl_x: the hand-written bodies of the implemented calls, declared
// from api/mpi.api so each definition must match its MPI prototype.
#include "bcs_impl.h"
#include "bcs/segment.h"

#define BCS_PMPI_ALIAS(name) _Pragma(BCS_STR(weak MPI_##name = PMPI_##name))
#define BCS_STR(x) #x

namespace bcs::shim {

// ------------------------------------------------------------ state

enum class Phase { before_init, running, finalized };

// Communicator table indices of the predefined communicators.
constexpr int kWorld = 0;
constexpr int kSelf = 1;
constexpr int kNoComm = -1;
constexpr int kTagUb = (1 << 30) - 1;

// An ordered set of processes: the members of a group or communicator as
// world ranks, in group (communicator) rank order. Immutable once made, so
// groups and communicators share them.
struct Members {
  std::vector<int32_t> world;                      // world rank of group rank i
  bool identity = false;                           // world[i] == i for all i
  std::vector<std::pair<int32_t, int32_t>> index;  // (world rank, group rank), sorted
  int size() const { return static_cast<int>(world.size()); }
  // Group rank of world rank `w`, or -1 if it is not a member.
  int rank_of(int32_t w) const;
};
using MembersPtr = std::shared_ptr<const Members>;
MembersPtr make_members(std::vector<int32_t> world);

// A communicator attribute: keyval handle and value, kept in the order set.
struct Attr {
  int keyval;
  void* val;
};

// A process topology attached to a communicator (MPI_Cart_create,
// MPI_Graph_create, MPI_Dist_graph_create(_adjacent)); immutable, shared by
// the communicator and its dups. topo.cc.
struct Topology {
  int kind = MPI_UNDEFINED;             // MPI_CART, MPI_GRAPH or MPI_DIST_GRAPH
  std::vector<int> dims, periods;       // Cartesian
  std::vector<int> index, edges;        // graph (MPI_Graph_create's arrays)
  std::vector<int> sources, sweights;   // distributed graph: in-edges of this process
  std::vector<int> dests, dweights;     //   and its out-edges
  bool weighted = false;
};
using TopologyPtr = std::shared_ptr<const Topology>;

// A communicator. Objects are never destroyed before the process exits:
// MPI_Comm_free only invalidates the handle (live = false) and deletes the
// attributes; requests still pending on it keep using its rank translation
// and error handler, and the node managers may read `m->world` (registered
// with bcs_comm_register) at any later slice. That is a small leak per freed
// communicator, accepted on purpose.
struct Comm {
  bool live = true;
  // Intercommunicators (intercomm.cc): `m` is the local group, `remote` the
  // group point-to-point ranks name; `local` a private intracommunicator of
  // the local group in its rank order (for agreeing on new contexts and for
  // the group-local stages of intercommunicator collectives). Beside `live`
  // and the fields below: a post reads them all, from one cache line.
  bool inter = false;
  MembersPtr m;
  int rank = 0;               // the caller's rank
  int32_t context = 0;        // point-to-point context; collectives use context + 1
  MPI_Errhandler errh = MPI_ERRORS_ARE_FATAL;
  std::string name;
  std::vector<Attr> attrs;
  TopologyPtr topo;           // null: no topology
  // Context indexes of the leader's space reserved for this communicator's
  // next dups, [dup_next, dup_end): every member knows them, so a dup in
  // the range needs no exchange (comm.cc, dup). dup_grow: the size of the
  // next range (doubling, so a communicator dup'ed once wastes nothing).
  int64_t dup_next = 0, dup_end = 0;
  int64_t dup_grow = 1;
  MembersPtr remote;
  int local = -1;
  int size() const { return m->size(); }
};

// A group handle (MPI_GROUP_EMPTY is index 0, predefined).
struct Group {
  bool used = false;
  MembersPtr m;
};

// A keyval made by MPI_Comm_create_keyval / MPI_Keyval_create (or
// MPI_Type_create_keyval: `type`; the callback types are the same C types,
// as MPI_Datatype and MPI_Comm are both int). It lives while the user holds
// it or any attribute uses it (refs).
struct Keyval {
  MPI_Comm_copy_attr_function* copy = nullptr;
  MPI_Comm_delete_attr_function* del = nullptr;
  void* extra = nullptr;
  bool type = false;        // a datatype keyval (else a communicator keyval)
  bool user_freed = false;  // MPI_Comm_free_keyval called: no new uses
  int refs = 0;             // the user's + one per attribute
};

// What the shim owns for a collective in flight: the byte arrays the node
// manager reads while the operation runs (bcs_coll_args_t's scounts ..
// rdispls), the gather buffer of a user-op reduction, and the work left for
// the rank once the runtime's part is done (the user-op fold). It lives as
// long as the operation, also when the MPI request is freed early.
struct CollData {
  std::vector<uint64_t> scounts, sdispls, rcounts, rdispls;
  std::shared_ptr<void> staging;  // packed copies of sides with holes (coll_stage.cc)
  std::vector<unsigned char> tmp;
  std::function<void()> finish;  // run once, when the runtime part completed without error
  // Point-to-point receive of a datatype with holes into `tmp`: unpacks the
  // bytes that arrived into the user's buffer when the request completes.
  std::function<void(uint64_t)> unpack;
};

// A generalized request (MPI_Grequest_start): the program completes it
// (MPI_Grequest_complete); the shim calls its functions as MPI says.
struct Greq {
  MPI_Grequest_query_function* query = nullptr;
  MPI_Grequest_free_function* free = nullptr;
  MPI_Grequest_cancel_function* cancel = nullptr;
  void* extra = nullptr;
  // Set for the shim's own generalized requests (MPI_Buffer_iflush), which
  // complete themselves: true once done, waiting for it when asked. The
  // program's never do (MPI_Grequest_complete).
  std::function<bool(bool wait)> settle;
};

struct Req {
  bool used = false;
  bool local_done = false;     // completed without a BCS request (MPI_PROC_NULL, one-member collectives)
  bool is_recv = false;
  bool is_coll = false;
  int comm = kWorld;
  bcs_request_t breq = BCS_REQUEST_NULL;
  size_t cap = 0;              // receive capacity, for error messages
  MPI_Status local_status{};   // status of a local_done request
  int local_error = 0;         // and its BCS error (a harvested request that failed)
  std::shared_ptr<CollData> coll;  // collectives: what must outlive the operation
  std::shared_ptr<Greq> greq;      // generalized: not done until MPI_Grequest_complete
  // An inline send (complete when posted) that MPI_Cancel may still take
  // back at the receiver's node: its world destination and number there
  // (bcs_send_seq). -1: none.
  int32_t sent_to = -1;
  uint64_t sent_seq = 0;
  bool cancelling = false;         // MPI_Cancel took an inline send: breq is the answer
  uint64_t bsend_id = 0;           // MPI_Ibsend: its message in the buffered-mode queue
  // Persistent requests (MPI_*_init): `start` posts one round and returns
  // its (temporary) request, whose state MPI_Start moves into this one.
  // Inactive = local_done with an empty status.
  bool persistent = false;
  bool active = false;
  std::function<int(MPI_Request*)> start;
  // Record and replay: the number of this wildcard receive (0: none).
  uint64_t wild = 0;
  // MPI_Isendrecv(_replace): the send half, which must complete too before
  // the request does. The request is the receive (its status is the
  // receive's); `then` is the send's BCS request, `then_keep` what the send
  // reads (a staged or packed copy), and `then_error` how the send ended
  // once it did (reported when the receive succeeded).
  bcs_request_t then = BCS_REQUEST_NULL;
  std::shared_ptr<CollData> then_keep;
  int then_error = 0;
};

// A BCS request whose MPI request was freed (MPI_Request_free) while pending,
// with whatever the operation still reads.
struct Orphan {
  bcs_request_t breq = BCS_REQUEST_NULL;
  std::shared_ptr<CollData> keep;
};

// An operation created by MPI_Op_create.
struct UserOp {
  bool used = false;
  MPI_User_function* fn = nullptr;
  bool commute = false;
};

struct Shim {
  Phase phase = Phase::before_init;
  bool singleton = false;      // not started by bcs: a one-rank job without a runtime
  int rank = 0;
  int size = 1;
  int thread_level = MPI_THREAD_SINGLE;
  pthread_t main_thread{};
  // Communicators by index (0 world, 1 self); slots are never reused.
  std::vector<std::unique_ptr<Comm>> comms;
  // Next index in this rank's own context id space (see comm.cc).
  int64_t next_ctx_index = 0;
  std::vector<Group> groups;   // by handle - MPI_GROUP_EMPTY
  std::vector<int> free_groups;
  std::vector<Keyval> keyvals; // by handle - kKeyvalBase; slots are never reused
  std::vector<Req> reqs;
  std::vector<int> free_reqs;
  // BCS requests of MPI requests freed by MPI_Request_free while pending:
  // reclaimed once they complete (lazily, when the BCS table runs out).
  std::vector<Orphan> orphans;
  std::vector<UserOp> ops;     // indexed by user op handle - kUserOpBase
  std::vector<int> free_ops;
};

// The shim's one state. Inline (every call reaches it many times; an
// inline function's static is one object across the library).
inline Shim& S() {
  static Shim s;
  return s;
}

// ------------------------------------------------------------ datatypes

// Size in bytes (packed) of a valid datatype, or -1. 64-bit: a derived type
// may hold more than 2 GiB (MPI_Type_size says MPI_UNDEFINED then).
int64_t type_size(MPI_Datatype t);
// Reduction elements in one instance of a type made of one reducible
// predefined type (a pair type such as MPI_DOUBLE_INT counts as one).
int64_t type_elems(MPI_Datatype t);
// True when any number of instances of `t` is one contiguous byte range
// that starts `*offset` bytes from the buffer (predefined types, contiguous
// derived ones); false for a type with holes, which is packed.
bool type_contiguous(MPI_Datatype t, int64_t* offset);
// MPI_ERR_TYPE (raised on `comm`) unless `t` is live and committed.
int check_usable(int comm, const char* fn, MPI_Datatype t);
// Packs `count` instances of `t` at `in` into `out` (count * size bytes),
// and unpacks the first `bytes` of such a stream back (pack.cc).
void type_pack(const void* in, int64_t count, MPI_Datatype t, void* out);
void type_unpack(const void* in, uint64_t bytes, int64_t count, MPI_Datatype t, void* out);
// Keeps a derived type alive (MPI_Type_free may come while an operation
// that still needs it is pending) until the returned holder is dropped.
std::shared_ptr<void> type_hold(MPI_Datatype t);
// "MPI_INT", ... or "invalid datatype" (for messages).
const char* type_name(MPI_Datatype t);
// The reduction element type of a predefined datatype; false if it has none
// (MPI_PACKED, invalid handles).
bool reduce_dtype(MPI_Datatype t, bcs_dtype_t* out);
// The same for a predefined type of one basic element without padding (not
// a pair type, not derived), with its size; false for any other handle.
// The fast post of a reduction uses it; the general path answers the rest.
bool predefined_reducible(MPI_Datatype t, uint64_t* size, bcs_dtype_t* out);

// ------------------------------------------------------------ errors

// Name ("MPI_ERR_TYPE") and sentence of a predefined error class, or null.
const char* class_name(int cls);
const char* class_text(int cls);
// The class of a valid error code (predefined, or made by
// MPI_Add_error_class/code), or -1.
int error_class_of(int code);
// The largest code or class the application added (MPI_LASTUSEDCODE).
int last_used_code();

// Raises error `cls` (a class or code) from `fn` on communicator `comm` (an
// index, or kNoComm for calls without one: those use MPI_COMM_WORLD's
// handler, as MPI says). ERRORS_ARE_FATAL: names the rank and the call on
// stderr and aborts the job with the error class as exit code.
// ERRORS_RETURN: returns `cls`. A user handler is called with the
// communicator and `cls`, then `cls` is returned.
// While one lives, an error raised is one that only says a peer is gone:
// if it ends the job, the rank's abort is marked as following from another
// failure (bcs_abort_noticed), so the manager names that one.
struct PeerGoneCause {
  explicit PeerGoneCause(bool on);
  ~PeerGoneCause();
  PeerGoneCause(const PeerGoneCause&) = delete;
  PeerGoneCause& operator=(const PeerGoneCause&) = delete;
};
int raise_error(int comm, const char* fn, int cls, const char* fmt, ...)
    __attribute__((format(printf, 4, 5)));

// The calls the list (mpi-shim/api/mpi.api) marks "stub": they raise
// MPI_ERR_UNSUPPORTED_OPERATION naming the call on `comm` (unsupported.cc).
int unsupported_call(int comm, const char* fn);
int unsupported_file_call(const char* fn);

// The generated argument-check layer's errors (argcheck.cc): an invalid
// communicator (raised on MPI_COMM_WORLD's handler), a negative count, a
// NULL output pointer, class `cls` (raised on `comm`, kNoComm for none).
int arg_bad_comm(const char* fn, MPI_Comm c, const char* name);
int arg_bad_count(int comm, const char* fn, int count, const char* name);
int arg_null(int comm, const char* fn, int cls, const char* name);

// Maps a BCS error to an MPI class and a sentence for the handler.
int bcs_to_class(int e);
const char* bcs_text(int e);
int raise_bcs(int comm, const char* fn, int e, size_t cap = 0);
// The same for the runtime's answer to a collective.
int raise_coll(int comm, const char* fn, int e);

#define REQUIRE_RUNNING(fn)                                                                   \
  do {                                                                                        \
    if (::bcs::shim::S().phase == ::bcs::shim::Phase::before_init)                            \
      return ::bcs::shim::raise_error(::bcs::shim::kNoComm, fn, MPI_ERR_OTHER,                \
                                      "called before MPI_Init");                              \
    if (::bcs::shim::S().phase == ::bcs::shim::Phase::finalized)                              \
      return ::bcs::shim::raise_error(::bcs::shim::kNoComm, fn, MPI_ERR_OTHER,                \
                                      "called after MPI_Finalize");                           \
  } while (0)

// ------------------------------------------------------------ communicators

// Sets up MPI_COMM_WORLD, MPI_COMM_SELF and MPI_GROUP_EMPTY (MPI_Init).
void comm_init();

inline Comm& comm_at(int comm) { return *S().comms[static_cast<size_t>(comm)]; }

// MPI_Comm_split of communicator index `parent` with a 64-bit colour
// (kNoColour: not a member of any new communicator: *newcomm = MPI_COMM_NULL).
constexpr int64_t kNoColour = INT64_MIN;
int comm_split(const char* fn, int parent, int64_t colour, int key, MPI_Comm* newcomm);
// Context ids (comm.cc): the id of the k-th communicator led by world rank
// `leader`; a new communicator over `m` registered with the node managers;
// a bare table slot.
bool comm_context_id(int32_t leader, int64_t k, int32_t* ctx);
int comm_make(const char* fn, int parent, MembersPtr m, int32_t ctx, int* out);
Comm& comm_new_slot(int* idx);
// MPI_Comm_dup of an intercommunicator (intercomm.cc).
int intercomm_dup(const char* fn, int ic, MPI_Comm* newcomm);
int intercomm_idup(const char* fn, int ic, MPI_Comm* newcomm, MPI_Request* request);
int intercomm_split(const char* fn, int ic, int colour, int key, MPI_Comm* newcomm);
// The blocking collectives on intercommunicators (intercoll.cc): the MPI
// entry points hand a valid intercommunicator to these.
bool is_intercomm(MPI_Comm c);
int inter_barrier(MPI_Comm c);
int inter_bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm c);
int inter_reduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                 MPI_Comm c);
int inter_allreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op,
                    MPI_Comm c);
int inter_gather(const char* fn, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                 int rcount, const int* rcounts, const int* displs, MPI_Datatype rtype, int root,
                 MPI_Comm c);
int inter_scatter(const char* fn, const void* sbuf, int scount, const int* scounts,
                  const int* displs, MPI_Datatype stype, void* rbuf, int rcount,
                  MPI_Datatype rtype, int root, MPI_Comm c);
// Allgather(v) (rcounts non-null: v) and Alltoall(v, w): every process sends
// a block to each process of the other group. Byte displacements and
// per-block types for w.
int inter_allgather(const char* fn, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                    int rcount, const int* rcounts, const int* displs, MPI_Datatype rtype,
                    MPI_Comm c);
int inter_alltoall(const char* fn, const void* sbuf, int scount, const int* scounts,
                   const int* sdispls, MPI_Datatype stype, const MPI_Datatype* stypes, void* rbuf,
                   int rcount, const int* rcounts, const int* rdispls, MPI_Datatype rtype,
                   const MPI_Datatype* rtypes, MPI_Comm c);
int inter_reduce_scatter(const char* fn, const void* sbuf, void* rbuf, int rcount,
                         const int* rcounts, MPI_Datatype type, MPI_Op op, MPI_Comm c);
// Their non-blocking forms (intercoll_nb.cc): the same arguments and the
// request. Each is one collective of a hidden communicator over both
// groups, whose context is the intercommunicator's + kMergedContextOffset.
constexpr int32_t kMergedContextOffset = 1 << 30;  // ordinary ids stay below it
int inter_ibarrier(MPI_Comm c, MPI_Request* request);
int inter_ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm c,
                 MPI_Request* request);
int inter_ireduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                  MPI_Comm c, MPI_Request* request);
int inter_iallreduce(const void* sbuf, void* rbuf, int count, MPI_Datatype type, MPI_Op op,
                     MPI_Comm c, MPI_Request* request);
int inter_igather(const char* fn, const void* sbuf, int scount, MPI_Datatype stype, void* rbuf,
                  int rcount, const int* rcounts, const int* displs, MPI_Datatype rtype, int root,
                  MPI_Comm c, MPI_Request* request);
int inter_iscatter(const char* fn, const void* sbuf, int scount, const int* scounts,
                   const int* displs, MPI_Datatype stype, void* rbuf, int rcount,
                   MPI_Datatype rtype, int root, MPI_Comm c, MPI_Request* request);
int inter_iallgather(const char* fn, const void* sbuf, int scount, MPI_Datatype stype,
                     void* rbuf, int rcount, const int* rcounts, const int* displs,
                     MPI_Datatype rtype, MPI_Comm c, MPI_Request* request);
int inter_ialltoall(const char* fn, const void* sbuf, int scount, const int* scounts,
                    const int* sdispls, MPI_Datatype stype, const MPI_Datatype* stypes, void* rbuf,
                    int rcount, const int* rcounts, const int* rdispls, MPI_Datatype rtype,
                    const MPI_Datatype* rtypes, MPI_Comm c, MPI_Request* request);
int inter_ireduce_scatter(const char* fn, const void* sbuf, void* rbuf, int rcount,
                          const int* rcounts, MPI_Datatype type, MPI_Op op, MPI_Comm c,
                          MPI_Request* request);

// The in- and out-neighbours of this process in `comm`'s topology, in the
// order MPI gives them for neighbourhood collectives (MPI_PROC_NULL where a
// non-periodic Cartesian grid ends). False if the communicator has none.
bool topo_neighbours(int comm, std::vector<int>* in, std::vector<int>* out);

// Table index of a valid (live) communicator handle, or kNoComm.
inline int comm_index(MPI_Comm c) {
  const unsigned idx = static_cast<unsigned>(c) - static_cast<unsigned>(MPI_COMM_WORLD);
  const auto& t = S().comms;
  if (idx >= t.size() || !t[idx]->live) return kNoComm;
  return static_cast<int>(idx);
}
inline MPI_Comm comm_handle(int comm) { return MPI_COMM_WORLD + comm; }

inline int comm_size(int comm) { return comm_at(comm).size(); }
inline int comm_rank(int comm) { return comm_at(comm).rank; }
// Point-to-point context of a communicator.
inline int32_t context_of(int comm) { return comm_at(comm).context; }
// Its collective context: never matches point-to-point traffic.
inline int32_t coll_context_of(int comm) { return context_of(comm) + 1; }

// The group point-to-point ranks name: the communicator's, or the remote
// group of an intercommunicator.
inline const Members& peers_of(int comm) {
  const Comm& c = comm_at(comm);
  return c.inter ? *c.remote : *c.m;
}
inline int peer_count(int comm) { return peers_of(comm).size(); }
// Communicator rank -> world rank (for bcs_send/bcs_recv/bcs_probe).
inline int32_t to_world(int comm, int r) {
  if (r == MPI_ANY_SOURCE) return BCS_ANY_SOURCE;
  return peers_of(comm).world[static_cast<size_t>(r)];
}
// World rank (a message's source) -> communicator rank.
inline int from_world(int comm, int32_t w) { return peers_of(comm).rank_of(w); }

// ------------------------------------------------------------ groups

constexpr int kGroupBase = MPI_GROUP_EMPTY;
// Index of a valid group handle (MPI_GROUP_EMPTY included), or -1.
int group_index(MPI_Group g);
MPI_Group group_alloc(MembersPtr m);

// ------------------------------------------------------------ info

// MPI_SUCCESS if `info` is MPI_INFO_NULL or a live info object (hints are
// accepted and ignored); else MPI_ERR_INFO through `comm`'s handler.
int check_info(int comm, const char* fn, MPI_Info info);

// ------------------------------------------------------------ attributes

// Copies the attributes of communicator `from` to `to` (MPI_Comm_dup),
// running the copy callbacks. MPI_SUCCESS or the error a callback returned.
int attr_copy_all(int from, int to);
// Deletes every attribute of `comm`, last set first, running the delete
// callbacks (MPI_Comm_free, MPI_Finalize). Stops at the first failure and
// returns its error.
int attr_delete_all(int comm);
// The same for datatypes: MPI_Type_dup must call type_attr_copy_all(old,
// new) and MPI_Type_free type_attr_delete_all(type) before the handle may
// be reused (the attributes are kept by handle, in attr.cc).
int type_attr_copy_all(MPI_Datatype from, MPI_Datatype to);
int type_attr_delete_all(MPI_Datatype t);

// ------------------------------------------------------------ statuses

inline bool ignored(const MPI_Status* st) { return st == nullptr || st == MPI_STATUS_IGNORE; }

// MPI_ERROR is written only for an error: MPI (3.7.5) leaves the field alone
// in a successful completion; the calls that return MPI_ERR_IN_STATUS set it
// in every status themselves.
inline void set_status(MPI_Status* st, int source, int tag, long long bytes, int err) {
  if (ignored(st)) return;
  st->MPI_SOURCE = source;
  st->MPI_TAG = tag;
  if (err != MPI_SUCCESS) st->MPI_ERROR = err;
  st->bcs_cancelled = 0;
  st->bcs_count = bytes;
}

// A request's BCS status that is an error (a cancelled request is not).
inline bool bcs_failed(int e) { return e != BCS_OK && e != BCS_CANCELLED; }

// A stored status handed to the user, under the same MPI_ERROR rule.
inline void copy_status(MPI_Status* st, const MPI_Status& from) {
  if (ignored(st)) return;
  const int err = st->MPI_ERROR;
  *st = from;
  if (from.MPI_ERROR == MPI_SUCCESS) st->MPI_ERROR = err;
}

// The "empty status" of MPI-3.1 3.7.3 (a null or inactive request): its
// error field is MPI_SUCCESS by definition.
inline void set_empty_status(MPI_Status* st) {
  set_status(st, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS);
  if (!ignored(st)) st->MPI_ERROR = MPI_SUCCESS;
}

inline void set_proc_null_status(MPI_Status* st) {
  set_status(st, MPI_PROC_NULL, MPI_ANY_TAG, 0, MPI_SUCCESS);
}

// ------------------------------------------------------------ requests

// A wait on a generalized request the program has not completed: no other
// thread may make MPI calls meanwhile (at most MPI_THREAD_SERIALIZED), so
// nothing could complete it; an error instead of a hang.
int greq_never_completes(int comm, const char* fn);
// Returns the index of a live request handle, or -1.
int req_index(MPI_Request h);
MPI_Request req_alloc(Req r);
// A fresh request slot (all fields default, `used` set) and its handle in
// *handle: the caller fills it in place, without moving a whole Req.
Req& req_new(MPI_Request* handle);
// Room for one more request in the table req_new takes from, so that it
// cannot fail (the table grows by doubling); false when memory ran out.
// A call that posts checks first, and fails with MPI_ERR_NO_MEM, before it
// posts anything.
bool req_room();
// MPI_Cancel of the MPI_Ibsend request at `idx` (request.cc).
int bsend_cancel(int idx);
void req_release(int idx);
// A request that completed: released (and *handle = MPI_REQUEST_NULL), or,
// if persistent, made inactive with its handle kept.
void req_retire(int idx, MPI_Request* handle);
// The point-to-point operations and completions of p2p.cc, for the other
// request families (request.cc) and the MPI Wait/Test entry points (wait.cc).
int p2p_isend(const char* fn, const void* buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm c, MPI_Request* request, bool sync);
int p2p_irecv(const char* fn, void* buf, int count, MPI_Datatype type, int source, int tag,
              MPI_Comm c, MPI_Request* request);
int p2p_complete_one(const char* fn, MPI_Request* req, bool blocking, int* flag, MPI_Status* st);
// The send half of MPI_Isendrecv request `r` ended with BCS `error`: a
// failure is the request's outcome unless its receive failed too.
inline void req_then_done(Req& r, int error) {
  r.then = BCS_REQUEST_NULL;
  r.then_keep.reset();
  if (!bcs_failed(error)) return;
  if (!r.local_done) {
    r.then_error = error;
  } else if (!bcs_failed(r.local_error)) {
    r.local_error = error;
    r.local_status.MPI_ERROR = bcs_to_class(error);
  }
}
// The outcome of request `r` whose receive ended as `b`.
inline void req_fold_then(const Req& r, bcs_msg_status_t& b) {
  if (!bcs_failed(b.error) && bcs_failed(r.then_error)) b.error = r.then_error;
}
// The send half of an MPI_Isendrecv request: tests it (or waits, `blocking`)
// and, once it is done, forgets it and keeps its outcome in the request.
// True when the request has no send half pending.
bool p2p_settle_then(Req& r, bool blocking);
// The shim's own generalized requests among `reqs` (Greq::settle): each
// one done is marked done, with an empty status. True if one is still open.
bool req_settle_self(int n, const MPI_Request* reqs, bool wait);
// Makes the send request `*send` the send half of the receive request
// `recv` (MPI_Isendrecv); `*send` is released. `keep`: what the send reads
// beyond its staging, kept until it is done.
void p2p_join_send(MPI_Request recv, MPI_Request* send, std::shared_ptr<CollData> keep);
// A communicator over the members of intracommunicator `c`, on a context
// of its own, that the program never sees: no attributes, `c`'s topology
// and error handler. A persistent collective's rounds run on one, so they
// match by the order of the init calls, not of the starts (MPI 4.0). For an
// intercommunicator *newcomm is `c` itself.
int comm_dup_private(const char* fn, MPI_Comm c, MPI_Comm* newcomm);
// A persistent request (MPI_*_init): inactive until MPI_Start, which calls
// `start` to post one round (its temporary request's state moves into this
// one). `holds` keep what the rounds use (datatypes, ops) alive until the
// request is freed.
int persistent_request(const char* fn, MPI_Comm c, std::vector<std::shared_ptr<void>> holds,
                       MPI_Request* request, std::function<int(MPI_Request*)> start);
// The send half of a send-receive could not be posted: takes the receive
// `*recv` back (cancelled or matched, it completes) and releases it.
void p2p_withdraw_recv(const char* fn, MPI_Request* recv);
int p2p_complete_any(const char* fn, int n, MPI_Request* reqs, bool blocking, int* index,
                     int* flag, MPI_Status* st);
int p2p_complete_all(const char* fn, int n, MPI_Request* reqs, bool blocking, int* flag,
                     MPI_Status* sts);
// The MPI status of request `r`'s completed runtime request, and then the
// rank's own part of a collective (a user-op fold) (wait.cc).
void p2p_status_from_bcs(const Req& r, const bcs_msg_status_t& b, MPI_Status* st);
void p2p_finish_coll(const Req& r, int error, uint64_t bytes);
// The argument checks of point-to-point calls (communicator, count, type,
// buffer, peer, tag); *bytes = count * type size.
int p2p_check(const char* fn, MPI_Comm c, const void* buf, int count, MPI_Datatype type,
              int peer, int tag, bool is_recv, int* comm, size_t* bytes);
// Frees the BCS requests of completed orphans. Returns whether any slot was
// reclaimed.
bool reclaim_orphans();

// Requests the runtime completed but the program has not waited for yet:
// their status moves into the MPI request (local_done) and their runtime
// slot is freed. Whether a slot was freed.
bool harvest_requests();

// Runs a posting call; when the BCS request table is full (bcs_request_limit,
// 2^21 slots a rank), reclaims orphans and completed requests and retries.
// If none had completed, the program really holds that many: the call fails
// at once (MPI_ERR_NO_MEM, raise_bcs names the limit). Waiting, as it did
// when the table held 4096, could only make a correct program that posts
// more before it receives fail later (after 30 s) instead of at once.
template <typename Fn>
int post_with_retry(Fn fn) {
  int e = fn();
  while (e == BCS_ERR_NO_RESOURCES && (reclaim_orphans() | harvest_requests())) e = fn();
  return e;
}
// The MPI requests this process holds that are still the runtime's (for
// the message of an MPI_ERR_NO_MEM).
size_t requests_held();

// ------------------------------------------------------------ reductions

// An MPI_Op checked against the datatype of a reduction: either a predefined
// op the runtime applies (op, dtype), or a user function the shim applies.
struct Reduction {
  bool user = false;
  bcs_op_t op = BCS_OP_SUM;
  bcs_dtype_t dtype = BCS_DT_INT32;
  MPI_User_function* fn = nullptr;
  bool commute = true;
};

// MPI_ERR_OP unless `op` is a valid reduction op for `count` elements of
// `type` (MPI_REPLACE and MPI_NO_OP are for one-sided accumulates only).
int check_op(const char* fn, int comm, MPI_Op op, MPI_Datatype type, int count, Reduction* out);
// The runtime's op for predefined `op` on elements of `dtype`, if MPI
// defines it there for reductions; false otherwise (user ops included).
bool predefined_op_on(MPI_Op op, bcs_dtype_t dtype, bcs_op_t* out);

// out = x[first] op x[first+1] op ... op x[last] with a user function, where
// x[i] = base + i*stride + offset holds `count` elements of `type`. MPI's
// convention fn(in, inout) computes inout = in op inout, so the fold walks
// from the last contribution down: acc = x[last]; acc = x[i] op acc.
void user_fold(MPI_User_function* fn, MPI_Datatype type, int count, unsigned char* base,
               size_t stride, size_t offset, int first, int last, void* out);
// The same over packed contributions (a datatype with holes): each is laid
// out as the type says before the function sees it; `out` gets the type's
// bytes only, its holes keep what they held.
void user_fold_packed(MPI_User_function* fn, MPI_Datatype type, int count,
                      const unsigned char* base, size_t stride, int first, int last, void* out);

// The caller's rank in `c` (0 for an invalid handle: the checks report it).
inline int my_rank(MPI_Comm c) {
  const int comm = comm_index(c);
  return comm == kNoComm ? 0 : comm_rank(comm);
}

// Bytes of one element (0 for an invalid type: only used with count 0) and
// of `count` elements.
inline uint64_t unit_of(MPI_Datatype t) {
  const int64_t ts = type_size(t);
  return ts > 0 ? static_cast<uint64_t>(ts) : 0;
}
inline uint64_t bytes_of(int count, MPI_Datatype t) {
  return count > 0 ? static_cast<uint64_t>(count) * unit_of(t) : 0;
}

inline const unsigned char* at(const void* p, uint64_t off) {
  return static_cast<const unsigned char*>(p) + off;
}
inline unsigned char* at(void* p, uint64_t off) { return static_cast<unsigned char*>(p) + off; }

// Posts a checked collective: blocking when `request` is NULL, else
// non-blocking with *request receiving the MPI request. `a.context` and
// `a.comm_size` are filled in here. One-member communicators run
// bcs_coll_local (no runtime; their request is complete at once). `d`
// (may be null) outlives the operation; its finish() runs on success.
int run_coll(const char* fn, int comm, bcs_coll_args_t& a, std::shared_ptr<CollData> d,
             MPI_Request* request);

}  // namespace bcs::shim
