// The job's shared segment on one node: where application ranks and the node
// manager meet (the "NIC memory" of the paper). Nothing else crosses between
// them: a rank writes descriptors into its ring; the NM's buffer sender drains
// the rings at every strobe; the NM completes requests in the request table
// and wakes blocked ranks through a futex.
//
// The segment is a memfd created by the NM (mode 0600), inherited by the
// ranks as an fd (BCS_SEGMENT_FD) and closed by them right after mmap, so no
// name ever appears in /dev/shm and a crash of anyone leaks nothing.
//
// Layout (all offsets from the segment base, every block 64-byte aligned):
//   SegmentHeader
//   RankArea[nlocal]           — one per local rank
//     RankControl               futexes, ring indices, MPI state
//     MmdsArea, report block     the MMDS's counters and final report
//     Descriptor ring[ring_slots]
//     DrainNote[ring_slots]     the slice schedule, for a recording rank
//     landing[landing_slots()]  small receives of the first slots, kLandingMax bytes each
//     Shelf                     small unexpected messages offered to the rank
//     RequestSlot[request_slots] last: only its first kHotRequestSlots are
//                               backed by memory at the start (see SegmentLayout)
#pragma once

#include <algorithm>
#include <atomic>
#include <type_traits>
#include <vector>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace bcs {

constexpr uint32_t kSegmentMagic = 0x42435331;  // "BCS1"
constexpr uint32_t kSegmentVersion = 15;  // 3: the MMDS area per rank; 4: RequestSlot::seq,
                                         // the MMDS report block; 5: job slices, drain notes,
                                         // DMA (single copy) orders; 6: nm_flags on its own line;
                                         // 7: landings for small receives; 8: mpi_pid;
                                         // 9: two DMA order slots; 10: DmaOrder::write;
                                         // 11: DmaOrder::split and ::second;
                                         // 12: RankControl::held_sends; 13: the shelf;
                                         // 14: kNmBellOnWork; 15: the request table
                                         // last, 2^21 slots, landings for the first 4096
constexpr int32_t kAnySource = -1;
constexpr int32_t kAnyTag = -1;
constexpr int32_t kProcNull = -2;

// Context ids of the two predefined communicators. Point-to-point and
// collective traffic of one communicator use different contexts (MPI's rule
// that collectives never match point-to-point), hence the +1.
constexpr int32_t kContextWorld = 0;
constexpr int32_t kContextSelf = 2;

// ----------------------------------------------------------- descriptors
enum class DescKind : uint8_t {
  send = 1,      // point-to-point send (payload inline if small)
  recv = 2,      // point-to-point receive
  probe = 3,     // blocking probe: completes when a match exists
  iprobe = 4,    // non-blocking probe: completes at the next MSM, found or not
  coll = 6,      // collective over `context` (seq = per-context collective number,
                 // payload starts with CollArgs); see bcs.h for the kinds
  comm = 7,      // registers a communicator: collective context `context`, `len`
                 // members (int32 world ranks in communicator order) at `addr`
  cancel = 8,    // cancels the rank's receive (or, kDescCancelSend, its send to
                 // `peer`) in request slot `request` if it is still unmatched
                 // (that request then completes with bcs_err_cancelled); has no
                 // request of its own -- except kDescCancelInline: the send was
                 // inline (its slot long reused), named by `addr` = its pair
                 // sequence number (the n-th send of this rank to `peer`), and
                 // `request` is a fresh slot that completes with the outcome
                 // (bcs_err_cancelled, or 0 when a receive took it first)
};

enum DescFlags : uint8_t {
  kDescInline = 1 << 0,     // send: payload inline; coll: send data after CollArgs
  kDescNoComplete = 1 << 1, // coll: the rank completed its request itself (bypass)
  kDescCancelSend = 1 << 2, // cancel: the request is a send to world rank `peer`
  kDescLayout = 1 << 3,     // send/recv: the data is a layout (LayoutRef in payload) at
                            // base `addr`, `len` its packed bytes (layout.h)
  kDescCancelInline = 1 << 4,  // cancel (with kDescCancelSend): of an inline send
};

// A non-contiguous buffer (kDescLayout): `count` instances at addr + i *
// extent, each the `nblocks` blocks (disp, len) of an array in the rank's
// memory at `blocks` (LayoutBlock[nblocks], valid until the request
// completes). The node managers move the blocks themselves: the rank does
// not pack. Every field is checked by the NM (layout.h).
struct LayoutRef {
  uint64_t blocks;
  uint32_t nblocks;
  uint32_t count;
  int64_t extent;
};
struct LayoutBlock {
  int64_t disp;
  uint64_t len;
};
constexpr uint32_t kLayoutMaxBlocks = 1u << 16;

// RankControl::aborted: how the rank ended itself (0: it did not).
constexpr uint32_t kAbortedByRank = 1;        // MPI_Abort, or a fatal error of its own
constexpr uint32_t kAbortedNoticingPeer = 2;  // a fatal error because a peer was gone

// One slot of a rank's ring. 256 bytes: a 64-byte header and 192 bytes of
// inline payload (messages up to kInlineMax bytes travel inside the
// descriptor: the send completes as soon as it is posted, and the DMA helper
// writes the payload straight into the receive buffer).
constexpr size_t kDescriptorSize = 256;
constexpr size_t kInlineMax = 192;

// Eager sends. A contiguous send of more than kInlineMax and at most
// kInlineSpanMax bytes also travels in the ring: its descriptor's payload
// runs on through the slots that follow it (a span; Descriptor::inline_len
// says how long), so the send completes at its post and the receiving
// node writes the bytes in its MSM, as for an inline send. Without it such
// a message cost its sender a wake-up after a P2P and two cross-memory
// copies: a ping-pong of 193 bytes took 59 us a way against 34 us for 192.
// The node keeps an unmatched one in memory: at most --max-unexpected of
// them per receiver, as for inline sends, and at most 64 MiB of their bytes
// (BufferReceiver::kMaxUnexpectedBytes); past either, further sends to
// that receiver wait in their senders' rings. 4 KiB, as Open MPI's
// shared-memory eager limit: 17 slots of a 1,024-slot ring. A span never
// waits for room: a send that does not fit in the ring's free slots is
// posted as an ordinary send.
constexpr size_t kInlineSpanMax = 4096;
// Slots a descriptor occupies: 1, or more for an eager send (kDescInline
// send, kInlineMax < inline_len <= kInlineSpanMax). Anything else counts as
// one slot; the node manager refuses a longer inline_len itself.
constexpr uint64_t ring_span_slots(uint32_t inline_len) {
  return inline_len <= kInlineMax || inline_len > kInlineSpanMax
             ? 1
             : 1 + (inline_len - kInlineMax + kDescriptorSize - 1) / kDescriptorSize;
}
// ring_drain_holding keeps a span's length in a byte.
static_assert(ring_span_slots(kInlineSpanMax) < 256);

struct Descriptor {
  DescKind kind;
  uint8_t flags;
  uint16_t reserved0;
  uint32_t request;       // index into the rank's RequestSlot table
  int32_t context;        // communicator context id
  int32_t peer;           // send: destination world rank; recv/probe: source world rank or kAnySource
  int32_t tag;            // may be kAnyTag for recv/probe
  uint32_t inline_len;    // bytes used in payload (kDescInline)
  uint64_t addr;          // buffer address in the rank's address space
  uint64_t len;           // send: message bytes; recv: buffer capacity
  uint64_t seq;           // per-rank post sequence number (1, 2, ...); barrier: barrier number
  uint64_t reserved1[2];
  uint8_t payload[kInlineMax];
};
static_assert(sizeof(Descriptor) == kDescriptorSize);

// The arguments of a collective, at the start of Descriptor::payload (kind
// coll). Field meanings are those of bcs_coll_args_t (bcs.h). The node
// manager validates every field before use: a rank may write anything here.
struct CollArgs {
  uint8_t kind;        // bcs_coll_t
  uint8_t op;          // bcs_op_t (reductions)
  uint8_t dtype;       // bcs_dtype_t (reductions)
  uint8_t flags;       // BCS_COLL_IN_PLACE
  int32_t comm_size;
  int32_t root;        // communicator rank
  int32_t comm_rank;   // the posting rank's rank in the communicator
  uint64_t sendbuf;
  uint64_t recvbuf;
  uint64_t sbytes;
  uint64_t rbytes;
  uint64_t count;
  uint64_t scounts, sdispls, rcounts, rdispls;  // addresses of uint64[comm_size] arrays
};
static_assert(sizeof(CollArgs) == 88);
// Send data of a collective small enough to travel in the descriptor
// follows CollArgs (at payload + kCollInlineOffset).
constexpr size_t kCollInlineOffset = 96;
constexpr size_t kCollInlineMax = kInlineMax - kCollInlineOffset;

// ------------------------------------------------------------- requests
enum class ReqState : uint32_t {
  free = 0,
  pending = 1,   // posted, the NM owns it
  done = 2,      // completed by the NM (or by the rank for immediate sends)
};

// Completion record. The NM writes the fields, then `state` (release);
// the rank reads `state` (acquire), then the fields.
struct alignas(64) RequestSlot {
  std::atomic<uint32_t> state;
  int32_t error;          // 0 or a bcs error code (bcs_err_*)
  int32_t source;         // world rank of the sender (recv/probe)
  int32_t tag;
  uint64_t bytes;         // bytes delivered (recv) / message size (probe)
  uint32_t found;         // iprobe: 1 if a matching message exists
  uint32_t kind;          // DescKind of the descriptor that owns it
  // recv: the matched send's pair sequence number (the n-th send of
  // `source` to this rank, as the sender numbers them too): which send it
  // was, for the MMDS's message flows. 0 when unknown.
  uint64_t seq;
  // The job slice (SegmentHeader::job_slice) the node manager completed it in.
  uint64_t slice;
  // recv: the NM left the message's first `landed` bytes (1 to kLandingMax)
  // in this slot's landing instead of writing them into the rank's buffer;
  // the rank copies them there before the request counts as done for the
  // program. 0: nothing landed. Set with the other fields, before `state`.
  uint32_t landed;
};
static_assert(sizeof(RequestSlot) == 64);

// Small receives land in the segment. A message of at most kLandingMax
// bytes into a contiguous buffer of a local rank is written by the DMA
// helper into the landing of the receive's request slot, and the rank
// copies it into its buffer when it finds the request done: a memcpy in
// the rank instead of a process_vm_writev in the node manager (pinning the
// page, on the slice's critical path, was 14 % of the strobe receiver's
// CPU in a halo exchange). Messages this small are inline in their send
// descriptors anyway (kInlineMax).
constexpr size_t kLandingMax = 192;
static_assert(kLandingMax % 64 == 0);

// The unexpected shelf. A receive used to take a slice even when the
// message it wanted had long arrived: the buffer receiver matches only in
// the MSM. So after each MSM that concerns a rank, the buffer receiver puts
// on the rank's shelf the small sends it holds for it that no receive took
// yet: per (context, source, tag), the leading run of inline sends (their
// senders are complete; nothing but the bytes is left to deliver), in send
// order, up to kShelfSlots. A receive with a named source and tag, posted
// while none of the rank's receives or probes is still open, takes the
// first matching entry itself (a CAS on its `state`) and completes without
// a slice: it is exactly the send the MSM would have given it, the
// earliest of its (context, source, tag) (MPI's non-overtaking rule),
// since everything earlier of that key is on the shelf or gone, and no
// receive of the rank posted before it is still waiting to match. A
// wildcard receive (any tag, any source, or both) takes the earliest entry
// it accepts if nothing held but not offered that it would accept comes
// before it (the cuts), and a probe answers from the shelf by the same
// rules.
//
// Each entry's `state` is (epoch << 2) | ShelfState, and the shelf's
// `epoch` is even while its entries stand. To change them the node manager
// makes the epoch odd, withdraws every offered entry (CAS offered ->
// withdrawn; one it finds taken leaves matching as received), writes the
// new entries with the next even epoch, and publishes that epoch last. It
// does so before a MSM that may take one of the rank's messages (its new
// receives or probes, sends or cancels to it), and offers again after.
// The rank reads the epoch, then the entries; it takes an entry by a CAS
// from the word it read, and gives up (the receive goes to the node
// manager) at the first entry of another epoch or withdrawn: a shelf
// changing under it might otherwise make it skip an earlier entry of the
// key it wants. The rank writes nothing but taken words here; the node
// manager trusts none of it (a word it did not write, other than its own
// word taken, ends the rank).
constexpr uint32_t kShelfSlots = 64;
enum ShelfState : uint32_t { kShelfEmpty = 0, kShelfOffered = 1, kShelfTaken = 2, kShelfWithdrawn = 3 };
struct alignas(64) ShelfEntry {
  std::atomic<uint32_t> state;
  uint32_t len;  // bytes, at most kInlineMax
  int32_t src;   // world rank of the sender
  int32_t context;
  int32_t tag;
  uint32_t reserved;
  uint64_t pair_seq;  // the sender's number for this send (RequestSlot::seq)
  // Wildcards. `arrival` numbers the rank's unexpected sends in the
  // matcher's canonical order. The cuts are the lowest arrival of a send the
  // node manager holds for this rank but did not offer, of this entry's
  // (context, src), (context, tag) and context (UINT64_MAX: none; 0: no
  // wildcard may use the shelf). A wildcard receive takes the earliest
  // offered entry it accepts only if it comes before the cut of its key.
  uint64_t arrival;
  uint64_t src_cut, tag_cut, context_cut;
  uint8_t payload[kInlineMax];
};
static_assert(sizeof(ShelfEntry) == 256);
struct Shelf {
  alignas(64) std::atomic<uint32_t> epoch;
  std::atomic<uint32_t> count;  // entries [0, count) are this epoch's
  ShelfEntry entries[kShelfSlots];
};

// ------------------------------------------------------------- per rank
enum class MpiState : uint32_t { none = 0, initialized = 1, finalized = 2 };

// Single copy. Cross-memory attach needs one side of a copy to be the
// process that makes it, so a node manager moving a message between two of
// its ranks copies twice (sender -> NM -> receiver). When the receiver is
// asleep in MPI anyway, its DMA helper hands it the copy instead: it posts
// an order (the sender's pid and address, the receiver's address, the
// length), wakes the rank, and sleeps on `state` until the rank, having
// read the sender's memory straight into its buffer with process_vm_readv,
// says it is done. An order the rank did not take within a short while is
// taken back (a CAS on `state`) and copied the old way. The NM writes the
// order, the rank only `state` and `error`, which the NM checks.
//
// A rank has kDmaSlots order slots, so that the DMA helper can post the
// next piece of a large transfer while the rank still copies the one
// before (copies ahead): the rank goes from one to the next without
// waiting for the node manager. It takes posted orders lowest `seq` first
// (any order of taking is correct; this one is the transfer's). The rank
// wakes the NM only when it said it sleeps on the order (`nm_waiting`,
// io_uring's need-wakeup idea): a rank finishing a piece nobody waits for
// yet goes on to the next one without a system call.
//
// A large order is shared by both ends when the sender sleeps in MPI on
// the same node too (a blocking send waits for its last chunk anyway): the
// receiver reads the first part, and the sender gets an order with `write`
// set for the rest, which it writes from its own buffer (`src`, in the
// rank holding the order) into the receiver (`dst`, in process `pid`) with
// process_vm_writev. Two CPUs copy at once: 16 MiB took 1.0 ms instead of
// 1.9 ms here.
//
// A large order that is not shared (the sender computes, or belongs to
// another node manager) may be split by the rank itself (`split`): when
// fewer of the node's ranks are awake than there are CPUs, a second thread
// of the rank copies the last part while the rank copies the first
// (rank_copy.cc). A single
// process copies at about 8.6 GB/s here, two threads of one process at
// 13-17 GB/s (the halves run on two cores; the buffer stays in cache). The
// rank says in `second` how many bytes its second thread copied, which
// the node manager counts after checking it against `len`.
enum : uint32_t {
  kDmaIdle = 0,
  kDmaPosted = 1,  // NM: an order is there
  kDmaTaken = 2,   // rank: copying
  kDmaDone = 3,    // rank: copied, `error` says how
};
constexpr int32_t kDmaNotPermitted = -1;  // DmaOrder::error: the kernel refused (EPERM)
constexpr uint32_t kDmaSlots = 2;
struct DmaOrder {
  std::atomic<uint32_t> state;
  int32_t error;  // rank: 0, a bcs_err_*, or kDmaNotPermitted
  uint32_t pid;   // NM: the sender's
  std::atomic<uint32_t> nm_waiting;  // NM: 1 = asleep on `state`, wake it when done
  uint64_t src;   // NM: in the sender
  uint64_t dst;   // NM: in this rank (write: in process `pid`)
  uint64_t len;
  uint64_t seq;   // NM: the order's number among this rank's (taking order)
  uint32_t write;  // NM: 1 = this rank is the sender: write its `src` into `pid`'s `dst`
  uint32_t split;  // NM: 1 = the rank may copy part of it on a second thread
  uint64_t second;  // rank: the bytes its second thread copied (0 .. len), set before `state`
};

struct alignas(64) RankControl {
  // Ring indices: the rank produces at head, the NM consumes at tail.
  // Monotonic 64-bit counters; slot = index % ring_slots.
  alignas(64) std::atomic<uint64_t> head;
  // The last collective the rank posted (segment_coll_word), stored after
  // its head: the other local ranks read it to tell whether their post of
  // a collective is the last local one (kNmBellOnPost). Nobody else trusts
  // it: the node manager decides from the rings.
  std::atomic<uint64_t> coll_posted;
  alignas(64) std::atomic<uint64_t> tail;
  // Written by the NM after each MSM: 1 when it holds sends to this rank
  // that no receive of it has taken (unexpected messages, drained from the
  // senders' rings already). A rank that starts waiting on a lease rings
  // then, as for a send still in a ring (segment_slice_for_waiter): its
  // receive may take one, and only a slice can tell.
  std::atomic<uint32_t> held_sends;
  // Bumped by the NM whenever it wakes the rank (rank_wake): how many
  // wake-ups it sent, for tests and diagnostics.
  alignas(64) std::atomic<uint32_t> wake_seq;
  // 1: the rank is (about to be) asleep in MPI, on this very word
  // (rank_sleep); the NM's rank_wake clears it and wakes the futex.
  std::atomic<uint32_t> waiting;
  // Filled by the rank, read by the NM when the rank exits.
  std::atomic<uint32_t> mpi_state;     // MpiState
  std::atomic<uint32_t> aborted;       // called MPI_Abort: kAbortedByRank / kAbortedNoticingPeer
  std::atomic<int32_t> abort_code;
  int32_t world_rank;                  // written by the NM at creation
  uint32_t pid;                        // written by the NM after fork
  // The process that runs MPI, written by the rank in bcs_init (getpid()).
  // It is `pid` unless the program was started through a wrapper that
  // forks (`time`, `strace`, a shell script). The NM copies from and into
  // it only once it checked that it is a process below `pid`, of the job's
  // user and dumpable (NmJob::copy_pid); otherwise it keeps to `pid`.
  std::atomic<uint32_t> mpi_pid;
  // Record and replay (docs/architecture.md). Written by the rank, read by
  // the NM as plain numbers (any value is harmless):
  //  - wake_at_slice: wake this rank (rank_wake) once the job reaches this
  //    slice, so that a rank asleep in MPI sees it (bcs replay
  //    --until-slice); 0: never.
  //  - note_drains: 1 = note in the drain notes how many descriptors each
  //    slice took from this rank's ring (the recorded slice schedule).
  alignas(64) std::atomic<uint64_t> wake_at_slice;
  std::atomic<uint32_t> note_drains;
  // Drain notes written so far (the NM's count, which it keeps privately
  // and only publishes here, release); note i is at i % ring_slots.
  alignas(64) std::atomic<uint64_t> drain_head;
  // The DMA helper's copy orders (single copy, see DmaOrder).
  alignas(64) DmaOrder dma[kDmaSlots];
};

// One drain note: in job slice `slice` the node manager took `count`
// descriptors from the rank's ring. Only slices that took some have one, so
// there are never more notes than descriptors posted; a rank that reads the
// notes whenever it posts cannot be lapped (the ring bounds what can be
// taken between two posts).
struct DrainNote {
  uint64_t slice;
  uint64_t count;
};

// The MMDS counters of one rank (the paper's §5.1, monitor/include/bcs/
// mmds.h), kept where its node manager can read them without the rank's
// help: when the rank exits, however it exits. The rank is the only
// writer; the NM's read is a snapshot it validates (a rank killed in the
// middle of an update leaves a torn counter, which is dropped).
constexpr uint32_t kMmdsMaxCalls = 128;
constexpr uint32_t kMmdsNameLen = 32;  // "MPI_Reduce_scatter_block" and NUL fit
constexpr uint8_t kMmdsBlocking = 1;   // MmdsArea::flags
constexpr uint8_t kMmdsSized = 2;
struct MmdsCounter {
  uint64_t count;
  uint64_t total_ns;
  uint64_t min_ns;
  uint64_t max_ns;
  uint64_t bytes;
};
struct alignas(64) MmdsArea {
  // Published last (release) by the rank when it starts recording: 0 =
  // the MMDS is off for this rank.
  std::atomic<uint32_t> ncalls;
  uint32_t reserved;
  uint64_t run_ns;  // MPI_Init's return to MPI_Finalize's entry, set there
  MmdsCounter granularity;
  MmdsCounter overhead;
  MmdsCounter calls[kMmdsMaxCalls];
  char names[kMmdsMaxCalls][kMmdsNameLen];
  uint8_t flags[kMmdsMaxCalls];
  // The rank's whole report (its distributions, and with BCS_MDS=all its
  // calls' and messages' events as far as they fit), written at
  // MPI_Finalize into the report block that follows this area: its length,
  // published (release) after the bytes. 0: none. The node manager parses
  // and checks it like anything a rank writes.
  std::atomic<uint64_t> report_len;
};
// The report block: untouched (hence never backed by memory) unless the
// rank records.
constexpr size_t kMmdsReportMax = size_t{1} << 20;

// SegmentHeader::nm_flags: when the node manager wants a rank to ring its
// doorbell (SegmentHeader::bell), in the manner of io_uring's need-wakeup
// flag. Ringing costs the rank a FUTEX_WAKE, so it happens only when asked.
constexpr uint32_t kNmBellOnBlock = 1;  // ring when this rank blocks and every
                                        // other local rank is blocked too (the
                                        // strobe may start the next slice at once)
constexpr uint32_t kNmParked = 2;       // the strobe is parked: ring after a post
// A one-node job's node pacing its own slices (its lease), between two
// slices: a send to a rank that waits starts the next slice at once, and
// so does the post that makes a collective's local members all posted.
constexpr uint32_t kNmBellOnPost = 4;      // ring after posting a send to a local
                                           // rank that waits (RankControl::waiting),
                                           // or the last local post of a collective
constexpr uint32_t kNmBellOnAnyBlock = 8;  // ring when blocking, last or not, if a
                                           // send to the rank or a collective of its
                                           // is posted (segment_slice_for_waiter)
// A node on its lease with nothing to do (nothing posted, nothing in flight,
// no collective in its rounds) does not wake at each period's end to look
// for posts that a period's slice would serve: it sleeps until a bell, for
// at most kNmBellOnWorkPeriods periods, and asks for a ring instead after a
// post that such a slice would serve: a send that is not inline (a transfer
// to start, or a synchronous send to match), a receive or probe while the
// node holds sends to the rank (RankControl::held_sends), a non-blocking
// probe, a cancel, and a poll that found nothing. The node then keeps the
// period again until the next slice. A ring missed in a race with the flag
// costs at most those periods: the node looks at the rings when it wakes.
// Inline sends, other receives, collectives and communicators need no slice
// before a rank blocks or polls (which starts one), or their own bells
// (kNmBellOnPost).
constexpr uint32_t kNmBellOnWork = 32;
constexpr uint32_t kNmBellOnWorkPeriods = 8;
// The node manager follows every raise of kNmParked and kNmBellOnPost with
// membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) before it reads the rings
// again, so a rank registered for that (segment_membarrier_register) reads
// nm_flags after publishing a post with no fence of its own: the barrier
// the NM pays when it parks or leases orders the rank's store and load
// (the asymmetric Dekker of userspace RCU). Otherwise a post's full fence
// stalls it until its descriptor's stores, misses on lines the NM last
// read, have all completed (100-300 cycles here). Set before the ranks
// start; never changes.
constexpr uint32_t kNmAsymmetricFence = 16;

// RankControl::coll_posted: collective `seq` of collective context
// `context`, packed (the low 32 bits of the number: posts of one context
// further apart than 2^31 compare wrongly, which costs a missed or a
// needless ring, never a result).
constexpr uint64_t segment_coll_word(int32_t context, uint64_t seq) {
  return (uint64_t{static_cast<uint32_t>(context)} << 32) | static_cast<uint32_t>(seq);
}
// Does `word` say collective `seq` of `context`, or a later one of it, was posted?
constexpr bool segment_coll_covers(uint64_t word, int32_t context, uint64_t seq) {
  return (word >> 32) == static_cast<uint32_t>(context) &&
         static_cast<int32_t>(static_cast<uint32_t>(word) - static_cast<uint32_t>(seq)) >= 0;
}

struct alignas(64) SegmentHeader {
  uint32_t magic;
  uint32_t version;
  uint64_t job_id;
  uint32_t world_size;
  uint32_t nlocal;          // local ranks on this node
  uint32_t ring_slots;      // power of two
  uint32_t request_slots;
  uint64_t rank_area_bytes; // size of one RankArea
  uint64_t slice_ns;        // for MPI_Wtick-like introspection and the MMDS
  uint64_t total_bytes;
  // The job slice the node manager is in: 1 at the first strobe of the job
  // it saw, counting every global slice after it (parked ones too); 0
  // before. Written by the NM only (it keeps its own copy).
  alignas(64) std::atomic<uint64_t> job_slice;
  // The node manager's doorbell: ranks bump it and FUTEX_WAKE it; the NM's
  // doorbell thread sleeps on it. Only a hint: the NM re-reads the rings and
  // the ranks' `waiting` flags itself and never trusts the value.
  alignas(64) std::atomic<uint32_t> bell;
  // kNm*: written by the NM only, and rarely (parking, job start). Every post
  // reads it; on the bell's line, which ranks bump whenever they block, the
  // read would miss the cache in nearly every post.
  alignas(64) std::atomic<uint32_t> nm_flags;
};

// The request table holds as many requests as a program may keep
// outstanding, by default kRequestSlots per rank: 128 MiB of address space,
// yet only the pages of slots in use are memory. The memfd is sparse; the
// node manager and the rank populate the first kHotRequestSlots slots at the
// job's start (as the rest of the rank's area) and the rank populates the
// others as it first hands them out (rank_side::alloc_slot), a page run at a
// time, where a lack of memory is an error of the call (MPI_ERR_NO_MEM)
// rather than a fault. A fixed table of 4096 used to fail a correct program
// of 10,000 outstanding large sends after 30 s. The node manager's part is
// unchanged: it checks every index against its own copy of request_slots,
// and what it keeps per posted request (its matcher's entry, held to
// --max-unexpected per receiver) was already bounded by the table.
// Only the first kLandingSlots slots have a landing (kLandingMax bytes
// each): a small receive in a later slot is written into its buffer by the
// node manager instead (request_land refuses it), so the landings stay
// 768 KiB per rank and the table's pages stay 64 bytes a request.
constexpr uint32_t kRequestSlots = uint32_t{1} << 21;
constexpr uint32_t kHotRequestSlots = 4096;
constexpr uint32_t kLandingSlots = 4096;

// Sizing and addressing. Both sides compute the same layout from the header.
struct SegmentLayout {
  uint32_t nlocal = 0;
  uint32_t ring_slots = 1024;
  uint32_t request_slots = kRequestSlots;

  static size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }
  size_t header_bytes() const { return align64(sizeof(SegmentHeader)); }
  size_t control_bytes() const { return align64(sizeof(RankControl)); }
  size_t mmds_bytes() const { return align64(sizeof(MmdsArea)) + kMmdsReportMax; }
  size_t ring_bytes() const { return size_t{ring_slots} * kDescriptorSize; }
  size_t requests_bytes() const { return size_t{request_slots} * sizeof(RequestSlot); }
  size_t drains_bytes() const { return align64(size_t{ring_slots} * sizeof(DrainNote)); }
  uint32_t landing_slots() const { return std::min(request_slots, kLandingSlots); }
  size_t landing_bytes() const { return size_t{landing_slots()} * kLandingMax; }
  size_t shelf_bytes() const { return align64(sizeof(Shelf)); }
  // Where the request table starts in a rank's area (after everything else).
  size_t requests_offset() const {
    return control_bytes() + mmds_bytes() + ring_bytes() + drains_bytes() + landing_bytes() +
           shelf_bytes();
  }
  size_t rank_area_bytes() const { return requests_offset() + requests_bytes(); }
  // The part of a rank's area populated at the job's start: all of it but
  // the request slots past the first kHotRequestSlots.
  size_t hot_bytes() const {
    return requests_offset() + size_t{std::min(request_slots, kHotRequestSlots)} * sizeof(RequestSlot);
  }
  size_t total_bytes() const { return header_bytes() + size_t{nlocal} * rank_area_bytes(); }
};

// A view of one rank's area inside a mapped segment.
struct RankView {
  RankControl* ctl = nullptr;
  MmdsArea* mmds = nullptr;
  char* mmds_report = nullptr;  // kMmdsReportMax bytes
  Descriptor* ring = nullptr;
  RequestSlot* requests = nullptr;
  DrainNote* drains = nullptr;  // ring_slots notes
  uint8_t* landing = nullptr;   // landing_slots landings of kLandingMax bytes
  Shelf* shelf = nullptr;
  uint32_t ring_slots = 0;
  uint32_t request_slots = 0;
  uint32_t landing_slots = 0;   // slots [0, landing_slots) have a landing
};

// With the layout given: the node manager passes its private copy, never the
// header's fields, which the ranks can overwrite.
inline RankView segment_rank_view(void* base, uint32_t local_index, const SegmentLayout& l) {
  auto* area = static_cast<uint8_t*>(base) + l.header_bytes() +
               size_t{local_index} * l.rank_area_bytes();
  RankView v;
  v.ctl = reinterpret_cast<RankControl*>(area);
  v.mmds = reinterpret_cast<MmdsArea*>(area + l.control_bytes());
  v.mmds_report = reinterpret_cast<char*>(area + l.control_bytes() + SegmentLayout::align64(sizeof(MmdsArea)));
  v.requests = reinterpret_cast<RequestSlot*>(area + l.requests_offset());
  area += l.control_bytes() + l.mmds_bytes();
  v.ring = reinterpret_cast<Descriptor*>(area);
  v.drains = reinterpret_cast<DrainNote*>(area + l.ring_bytes());
  v.landing = area + l.ring_bytes() + l.drains_bytes();
  v.shelf = reinterpret_cast<Shelf*>(v.landing + l.landing_bytes());
  v.ring_slots = l.ring_slots;
  v.request_slots = l.request_slots;
  v.landing_slots = l.landing_slots();
  return v;
}

// The rank side: the layout its node manager wrote into the header.
inline RankView segment_rank_view(void* base, uint32_t local_index) {
  auto* h = static_cast<SegmentHeader*>(base);
  return segment_rank_view(base, local_index, SegmentLayout{h->nlocal, h->ring_slots, h->request_slots});
}

// Futex helpers on words that live in the shared segment (not process-private).
// futex_wait returns when *word != expected, on a wake, on a signal or after
// timeout_ns (0 = no timeout); false only in that last case.
bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_ns = 0);
void futex_wake_all(std::atomic<uint32_t>* word);

// Whether every local rank is asleep in a blocking call (or done with MPI):
// then nothing on this node will post until the runtime completes something.
// A rank counts as blocked while its `waiting` flag is set; the NM clears the
// flag when it wakes the rank (rank_wake), so a rank woken but not yet
// running no longer counts. `nlocal` and the layout are the caller's (the NM
// passes its private copy).
inline bool segment_all_blocked(void* base, const SegmentLayout& l) {
  for (uint32_t i = 0; i < l.nlocal; ++i) {
    const RankControl* c = segment_rank_view(base, i, l).ctl;
    if (c->waiting.load(std::memory_order_seq_cst)) continue;
    if (c->mpi_state.load(std::memory_order_relaxed) == static_cast<uint32_t>(MpiState::finalized))
      continue;
    return false;
  }
  return true;
}

// How many local ranks are blocked (as segment_all_blocked counts them):
// the local EMDS's "blocked ranks per slice".
inline uint32_t segment_blocked_count(void* base, const SegmentLayout& l) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < l.nlocal; ++i) {
    const RankControl* c = segment_rank_view(base, i, l).ctl;
    n += c->waiting.load(std::memory_order_relaxed) ||
         c->mpi_state.load(std::memory_order_relaxed) == static_cast<uint32_t>(MpiState::finalized);
  }
  return n;
}

// Backs [p, p + len) of a shared mapping of the segment with memory now
// (MADV_POPULATE_WRITE; `p` need not be page-aligned). False with errno
// set when the kernel cannot (ENOMEM: no memory left). A kernel without
// MADV_POPULATE_WRITE (before 5.14) touches each page instead, where a
// lack of memory is a fault rather than an error.
bool segment_populate(void* p, size_t len);

// Rings the node manager's doorbell (&SegmentHeader::bell): bump, FUTEX_WAKE.
void segment_ring_bell(std::atomic<uint32_t>* bell);

// membarrier(2) for kNmAsymmetricFence: whether the kernel offers the
// global expedited barrier (the NM, before it sets the flag); registering
// this process for it (a rank); running it (the NM, after raising a flag).
// False on any failure (an old kernel, a seccomp filter).
bool segment_membarrier_supported();
bool segment_membarrier_register();
bool segment_membarrier();

// ------------------------------------------------------------- errors
// Error codes stored in RequestSlot::error. The MPI shim maps them to MPI
// error classes.
enum : int32_t {
  bcs_err_none = 0,
  bcs_err_truncate = 1,   // the message was longer than the receive buffer
  bcs_err_peer_gone = 2,  // the peer's memory could not be read/written
  bcs_err_internal = 3,
  bcs_err_coll_mismatch = 7,  // members disagree on a collective (kind, root, count, op)
  bcs_err_cancelled = 8,      // the request was cancelled (not an error to the program)
  bcs_err_bad_address = 9,    // a message buffer is not (all) mapped in its process
};

}  // namespace bcs

// The ring's operations (posting, draining, peeking) and request
// completion: ring.h, which needs every type above.
#include "bcs/ring.h"
