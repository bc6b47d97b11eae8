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
  BCS_ERR_NO_RESOURCES = 5, /* request table full */
  BCS_ERR_NOT_INIT = 6,   /* not started under a bcs node manager */
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
} bcs_msg_status_t;

/* Maps the segment named by the environment the NM gave this process
 * (BCS_SEGMENT_FD, BCS_LOCAL_INDEX, BCS_RANK, BCS_SIZE, BCS_JOB). */
bcs_status_t bcs_init(void);
int bcs_initialized(void);
/* Marks the rank finalized in the segment and unmaps it. */
bcs_status_t bcs_finalize(void);
/* Records MPI_Abort in the segment (so the NM can name it) and exits. */
void bcs_abort(int code) __attribute__((noreturn));

int32_t bcs_world_rank(void);
int32_t bcs_world_size(void);
uint64_t bcs_slice_ns(void);

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
/* Blocking: waits until a matching message exists. Non-blocking: *flag tells
 * whether one was known to exist at the last scheduling microphase (the
 * answer to the previous non-blocking probe with the same arguments). */
bcs_status_t bcs_probe(int32_t source, int32_t tag, int32_t context, bcs_mode_t mode,
                       int* flag, bcs_msg_status_t* st);
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
/* Barrier over `context` (nprocs ranks: only the world context goes through
 * the NM; a one-rank context completes at once). */
bcs_status_t bcs_barrier(int32_t context, bcs_mode_t mode, bcs_request_t* req);

#ifdef __cplusplus
}
#endif
#endif
