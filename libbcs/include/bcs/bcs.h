/* The BCS API (the paper's Table 4.1), rank side.
 *
 * Every call only posts a descriptor into this rank's ring in the job's
 * shared segment; the node manager does the rest at the next strobes. A
 * blocking call then sleeps on the rank's futex until the NM completes the
 * request. Nothing here touches the network or UCX.
 *
 * Ranks are world ranks; `context` is the communicator context id
 * (see segment.h). The MPI shim maps MPI onto these calls (Table 4.2).
 */
#ifndef BCS_BCS_H
#define BCS_BCS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  BCS_OK = 0,
  BCS_ERR_TRUNCATE = 1,   /* message longer than the receive buffer */
  BCS_ERR_PEER = 2,       /* peer memory unreachable (peer died) */
  BCS_ERR_INTERNAL = 3,
  BCS_ERR_ARG = 4,        /* invalid argument */
  BCS_ERR_NO_RESOURCES = 5, /* every request slot in use (bcs_request_limit) */
  BCS_ERR_NOT_INIT = 6,   /* not started under a bcs node manager */
  BCS_ERR_COLL_MISMATCH = 7, /* members called different collectives (or roots, counts, ops) */
  BCS_CANCELLED = 8,      /* a request's status: it was cancelled (bcs_cancel), no data moved */
  BCS_ERR_BAD_ADDRESS = 9, /* a message buffer (the sender's or the receiver's) is not mapped */
  BCS_ERR_NO_MEM = 10,    /* no memory left for another request (its slot or bookkeeping) */
} bcs_status_t;

#define BCS_ANY_SOURCE (-1)
#define BCS_ANY_TAG (-1)
#define BCS_REQUEST_NULL (-1)

typedef int32_t bcs_request_t;   /* index of a request slot, or BCS_REQUEST_NULL */

typedef enum { BCS_NONBLOCKING = 0, BCS_BLOCKING = 1 } bcs_mode_t;

typedef struct {
  int32_t source;   /* world rank */
  int32_t tag;
  uint64_t bytes;
  int32_t error;    /* bcs_status_t of this request */
  uint64_t seq;     /* a receive: the matched send's number from its sender (0: unknown) */
  uint64_t slice;   /* the job slice the node manager completed it in (0: the rank did) */
} bcs_msg_status_t;

/* Maps the segment named by the environment the NM gave this process
 * (BCS_SEGMENT_FD, BCS_LOCAL_INDEX, BCS_RANK, BCS_SIZE, BCS_JOB). */
bcs_status_t bcs_init(void);
int bcs_initialized(void);
/* Marks the rank finalized in the segment and unmaps it. */
bcs_status_t bcs_finalize(void);
/* Records MPI_Abort in the segment (so the NM can name it) and exits. */
void bcs_abort(int code) __attribute__((noreturn));
/* The same, for an abort that only follows from another process's failure
 * (an error handler that ends the job because a peer is gone): the manager
 * then names that first failure, not this rank. */
void bcs_abort_noticed(int code) __attribute__((noreturn));

int32_t bcs_world_rank(void);
int32_t bcs_world_size(void);
uint64_t bcs_slice_ns(void);
/* This rank's MMDS counters in the job segment (struct bcs::MmdsArea of
 * bcs/segment.h), where its node manager reads them when the rank exits;
 * NULL when not attached to a job. */
void* bcs_mmds_area(void);
/* The block after it for the rank's final MMDS report (kMmdsReportMax
 * bytes, length in MmdsArea::report_len); NULL when not attached. */
char* bcs_mmds_report(void);

/* Send `len` bytes. Non-blocking: `req` receives a request to test.
 * Blocking: returns when the buffer may be reused. Messages of up to 192
 * bytes are copied into the descriptor and complete at once. */
bcs_status_t bcs_send(const void* buf, size_t len, int32_t dest, int32_t tag, int32_t context,
                      bcs_mode_t mode, bcs_request_t* req);
/* Synchronous send: like bcs_send, but never completes before a matching
 * receive exists. No inline shortcut: the request completes when the DMA
 * helper has read the last byte for the matched receive. */
bcs_status_t bcs_ssend(const void* buf, size_t len, int32_t dest, int32_t tag, int32_t context,
                       bcs_mode_t mode, bcs_request_t* req);
/* Receive into `buf` (capacity `cap`). Blocking: fills `st` (may be NULL). */
bcs_status_t bcs_recv(void* buf, size_t cap, int32_t source, int32_t tag, int32_t context,
                      bcs_mode_t mode, bcs_request_t* req, bcs_msg_status_t* st);
/* Non-contiguous buffers: `count` instances at base + i * extent, each the
 * `nblocks` (<= BCS_LAYOUT_MAX_BLOCKS, each len > 0) blocks (disp, len)
 * relative to the instance. The node managers move the blocks themselves
 * (the rank does not pack); `blocks` must stay valid and unchanged until the
 * request completes. The message is the blocks' bytes in order (packed);
 * a send of up to 192 packed bytes is gathered into the descriptor. */
typedef struct {
  int64_t disp;
  uint64_t len;
} bcs_block_t;
typedef struct {
  const bcs_block_t* blocks;
  uint32_t nblocks;
  uint32_t count;
  int64_t extent;
} bcs_layout_t;
#define BCS_LAYOUT_MAX_BLOCKS 65536
bcs_status_t bcs_send_layout(const void* base, const bcs_layout_t* layout, int32_t dest,
                             int32_t tag, int32_t context, int sync, bcs_mode_t mode,
                             bcs_request_t* req);
bcs_status_t bcs_recv_layout(void* base, const bcs_layout_t* layout, int32_t source, int32_t tag,
                             int32_t context, bcs_mode_t mode, bcs_request_t* req,
                             bcs_msg_status_t* st);
/* Blocking: waits until a matching message exists. Non-blocking: *flag tells
 * whether one was known to exist at the last scheduling microphase (the
 * answer to the previous non-blocking probe with the same arguments). */
bcs_status_t bcs_probe(int32_t source, int32_t tag, int32_t context, bcs_mode_t mode,
                       int* flag, bcs_msg_status_t* st);
/* Asks the node manager to cancel a pending receive or send (`req` from
 * bcs_recv, bcs_send or bcs_ssend; a send is cancelled at the receiver's
 * node, if no receive has matched it there).
 * Takes effect at the next scheduling microphase, in post order: if the
 * receive was not matched by then, it completes with error BCS_CANCELLED,
 * else it completes normally. Either way the request must still be tested.
 * A send of up to 192 bytes, or a contiguous one of up to 1 KiB (eager, when
 * the ring has room), completes when posted: bcs_cancel_sent cancels it. */
bcs_status_t bcs_cancel(bcs_request_t req);
/* Sends posted so far by this rank to world rank `dest` (0 before the
 * first): right after bcs_send, the number of that send. */
uint64_t bcs_send_seq(int32_t dest);
/* Message flows, for the MMDS's traces: `fn` is called for every send
 * posted (is_send 1, peer = its destination, seq = its number as
 * bcs_send_seq gives it) and for every receive whose request the program
 * took back completed (is_send 0, peer = the world rank it came from, seq =
 * that sender's number for it), so a send and its receive pair up by
 * (sender, receiver, seq). NULL (the default): nothing, one branch. */
typedef void (*bcs_msg_observer_t)(int is_send, int32_t peer, uint64_t seq, uint64_t bytes);
void bcs_set_msg_observer(bcs_msg_observer_t fn);
/* Record and replay (slices: 1 at the job's first strobe on this node,
 * counting every slice of the global strobe after it).
 * The job slice the node manager is in (0 before the first). */
uint64_t bcs_job_slice(void);
/* The slice schedule: with `fn` set, the node manager notes how many
 * descriptors each slice took from this rank's ring, and `fn` gets each
 * note (slice, count) in order, from inside later calls that post (notes
 * cannot be lost that way) and from bcs_take_drains. NULL: off. */
typedef void (*bcs_drain_observer_t)(uint64_t slice, uint64_t count);
void bcs_set_drain_observer(bcs_drain_observer_t fn);
void bcs_take_drains(void);
/* `fn(slice)` is called once, from inside the first BCS call that posts or
 * waits once the job is at slice `slice` or past it; a rank asleep in a
 * wait is woken for it by its node manager. 0: none. */
typedef void (*bcs_slice_alarm_t)(uint64_t now);
void bcs_set_slice_alarm(uint64_t slice, bcs_slice_alarm_t fn);
/* Cancels an inline send (one that completed when posted), named by its
 * destination and its number from bcs_send_seq. `*ticket` is a new request
 * that completes at the next scheduling microphase at the receiver's node:
 * with error BCS_CANCELLED if no receive had matched the send (it is then
 * never delivered), else with BCS_OK (the send stands). */
bcs_status_t bcs_cancel_sent(int32_t dest, uint64_t seq, bcs_request_t* ticket);
/* The program will not wait for *req (MPI_Request_free of an active
 * request): its slot is freed once it completes, and a receive's data is
 * in its buffer by the time any later test or wait of this rank finds a
 * request complete. *req becomes BCS_REQUEST_NULL. */
bcs_status_t bcs_request_free(bcs_request_t* req);
/* How many requests this rank may hold at once (posted and not yet freed
 * by a test, a wait or bcs_request_free): the job segment's request table
 * (2^21 slots), or fewer if BCS_MAX_REQUESTS in the rank's environment says
 * so. Posting one more fails at once with BCS_ERR_NO_RESOURCES; 0 before
 * bcs_init. */
uint32_t bcs_request_limit(void);
/* Test (non-blocking) or wait (blocking) for one request. On completion the
 * request is freed and *req set to BCS_REQUEST_NULL. A NULL request is
 * complete at once with an empty status. */
bcs_status_t bcs_test(bcs_request_t* req, bcs_mode_t mode, int* flag, bcs_msg_status_t* st);
/* All of n requests. Blocking: waits for all. Non-blocking: *flag = 1 only if
 * all are complete (then all are freed), else nothing is freed. */
bcs_status_t bcs_testall(int n, bcs_request_t* reqs, bcs_mode_t mode, int* flag,
                         bcs_msg_status_t* sts);
/* Any of n requests: *index = the completed one (freed), or -1 when none
 * (non-blocking) or when all are BCS_REQUEST_NULL. */
bcs_status_t bcs_testany(int n, bcs_request_t* reqs, bcs_mode_t mode, int* index, int* flag,
                         bcs_msg_status_t* st);
/* Barrier over the communicator whose *collective* context is `context`
 * (the point-to-point context + 1). A one-rank context completes at once.
 * Same as bcs_coll with kind BCS_COLL_BARRIER over every rank of the job
 * (or the one rank of MPI_COMM_SELF). */
bcs_status_t bcs_barrier(int32_t context, bcs_mode_t mode, bcs_request_t* req);

/* ------------------------------------------------------------ collectives
 *
 * Collectives are run by the node managers (the paper's collective helper
 * in the BBM microphase and reduce helper in the RM microphase), never by
 * the ranks: a rank posts one descriptor and, if blocking, sleeps until its
 * node manager completes it. Every member of the communicator must call the
 * same collectives in the same order; they are matched by (context,
 * per-context collective sequence number), never by tag, so they never mix
 * with point-to-point traffic. Ranks and roots are communicator ranks. */

typedef enum {
  BCS_COLL_BARRIER = 1,
  BCS_COLL_BCAST = 2,          /* root's sendbuf (sbytes) -> every recvbuf */
  BCS_COLL_GATHER = 3,         /* sendbuf (sbytes) -> root recvbuf + i*rbytes */
  BCS_COLL_GATHERV = 4,        /* sendbuf (sbytes) -> root recvbuf + rdispls[i] (rcounts[i]) */
  BCS_COLL_SCATTER = 5,        /* root sendbuf + i*sbytes -> recvbuf (rbytes) */
  BCS_COLL_SCATTERV = 6,       /* root sendbuf + sdispls[i] (scounts[i]) -> recvbuf (rbytes) */
  BCS_COLL_ALLGATHER = 7,      /* sendbuf (sbytes) -> every recvbuf + i*rbytes */
  BCS_COLL_ALLGATHERV = 8,     /* sendbuf (sbytes) -> every recvbuf + rdispls[i] (rcounts[i]) */
  BCS_COLL_ALLTOALL = 9,       /* sendbuf + j*sbytes of i -> recvbuf + i*rbytes of j */
  BCS_COLL_ALLTOALLV = 10,     /* sendbuf + sdispls[j] (scounts[j]) of i -> recvbuf + rdispls[i] of j */
  BCS_COLL_REDUCE = 11,        /* op over every sendbuf (count elements) -> root recvbuf */
  BCS_COLL_ALLREDUCE = 12,     /* op over every sendbuf -> every recvbuf */
  BCS_COLL_REDUCE_SCATTER = 13,/* op over every sendbuf (sum of rcounts[] elements);
                                  member i gets elements [sum rcounts[<i], +rcounts[i]) */
  BCS_COLL_SCAN = 14,          /* member i gets op over sendbufs of members 0..i */
  BCS_COLL_EXSCAN = 15,        /* member i>0 gets op over members 0..i-1; member 0: untouched */
} bcs_coll_t;

/* Reduction operations (MPI's predefined ops). */
typedef enum {
  BCS_OP_SUM = 1, BCS_OP_PROD, BCS_OP_MIN, BCS_OP_MAX,
  BCS_OP_LAND, BCS_OP_LOR, BCS_OP_LXOR,
  BCS_OP_BAND, BCS_OP_BOR, BCS_OP_BXOR,
  BCS_OP_MINLOC, BCS_OP_MAXLOC,
  BCS_OP_REPLACE, BCS_OP_NO_OP,
} bcs_op_t;

/* Element types of reductions, by machine representation (the shim maps
 * MPI's C names onto these: MPI_LONG -> INT64 on LP64, MPI_CHAR -> INT8). */
typedef enum {
  BCS_DT_INT8 = 1, BCS_DT_INT16, BCS_DT_INT32, BCS_DT_INT64,
  BCS_DT_UINT8, BCS_DT_UINT16, BCS_DT_UINT32, BCS_DT_UINT64,
  BCS_DT_FLOAT, BCS_DT_DOUBLE, BCS_DT_LONG_DOUBLE,
  BCS_DT_C_FLOAT_COMPLEX, BCS_DT_C_DOUBLE_COMPLEX, BCS_DT_C_LONG_DOUBLE_COMPLEX,
  BCS_DT_BOOL,   /* C _Bool / C++ bool: logical ops only */
  BCS_DT_BYTE,   /* MPI_BYTE: bitwise ops only */
  /* MINLOC/MAXLOC pair types, packed as MPI_Pack lays them out: the value,
   * then the int index, no padding (DOUBLE_INT is 12 bytes, SHORT_INT 6) */
  BCS_DT_FLOAT_INT, BCS_DT_DOUBLE_INT, BCS_DT_LONG_INT, BCS_DT_2INT, BCS_DT_SHORT_INT,
  BCS_DT_LONG_DOUBLE_INT,
  BCS_DT_LAST_ = BCS_DT_LONG_DOUBLE_INT
} bcs_dtype_t;

/* Flags of a collective. */
#define BCS_COLL_IN_PLACE 0x1u /* gather/scatter root: own block already in place */

typedef struct {
  bcs_coll_t kind;
  int32_t context;     /* the communicator's collective context */
  int32_t comm_size;   /* members of the communicator */
  int32_t root;        /* rooted kinds: communicator rank of the root (0 otherwise) */
  const void* sendbuf;
  void* recvbuf;
  uint64_t sbytes;     /* bytes of one block sent (bcast: the message;
                          reductions: count * bcs_dtype_size(dtype)) */
  uint64_t rbytes;     /* bytes of one block received */
  uint64_t count;      /* reductions: elements in sendbuf */
  bcs_op_t op;         /* reductions */
  bcs_dtype_t dtype;   /* reductions */
  uint32_t flags;      /* BCS_COLL_IN_PLACE */
  /* V kinds and REDUCE_SCATTER: comm_size entries each, in bytes (counts of
   * REDUCE_SCATTER: elements). Read by the node manager while the
   * collective runs: they must stay valid until it completes. Counts are
   * at most 1 GiB each; displacements are offsets from the buffer taken
   * modulo 2^64 (a negative int64 works, and with a NULL buffer they are
   * absolute addresses). */
  const uint64_t* scounts;
  const uint64_t* sdispls;
  const uint64_t* rcounts;
  const uint64_t* rdispls;
} bcs_coll_args_t;

/* Posts a collective. Returns BCS_ERR_ARG for arguments that are wrong on
 * their own; the request's error tells BCS_ERR_TRUNCATE (a block longer
 * than its receive space), BCS_ERR_COLL_MISMATCH (members disagree), or
 * BCS_ERR_PEER / BCS_ERR_INTERNAL. Blocking: returns when this rank's part is complete
 * (its buffers may be reused). Non-blocking: *req completes the same way,
 * and the node managers progress it while the rank computes. A rank whose
 * part only sends data small enough to travel inside the descriptor (bcast
 * root, reduce and gather non-roots) is complete at once: the runtime
 * finishes the operation without it (application bypass). */
bcs_status_t bcs_coll(const bcs_coll_args_t* args, bcs_mode_t mode, bcs_request_t* req);

/* Tells the node managers about a new communicator before its first
 * collective: its collective context and its members (world ranks in
 * communicator order). Every member calls it with the same list (they are
 * compared); the node managers read `members` from this process's memory,
 * so the array must stay valid while the communicator exists. Contexts of
 * the predefined communicators may not be registered, and a context id is
 * unique in the job: two communicators never share one, even disjoint. */
bcs_status_t bcs_comm_register(int32_t coll_context, int32_t size, const int32_t* members);

/* The one-member case of a collective (comm_size == 1), done by plain
 * memory copies in the caller, with no runtime (usable before bcs_init and
 * in singleton mode). bcs_coll uses it for one-member communicators. */
bcs_status_t bcs_coll_local(const bcs_coll_args_t* args);

/* Element size of a reduction type (0 if invalid), and whether MPI allows
 * `op` on it (MIN/MAX: integers and reals; SUM/PROD: also complex;
 * logical ops: integers and BOOL; bitwise: integers and BYTE;
 * MINLOC/MAXLOC: pair types; REPLACE/NO_OP: any). */
size_t bcs_dtype_size(bcs_dtype_t t);
int bcs_op_supported(bcs_op_t op, bcs_dtype_t t);
/* inout[i] = inout[i] op in[i] for i < count: `inout` is the left operand
 * (the lower ranks' contribution in a reduction). MINLOC/MAXLOC ties keep
 * the smaller index whichever side it is on; REPLACE gives `in`.
 * Returns BCS_ERR_ARG if unsupported. */
bcs_status_t bcs_reduce_local(bcs_op_t op, bcs_dtype_t t, void* inout, const void* in,
                              size_t count);

#ifdef __cplusplus
}
#endif
#endif
