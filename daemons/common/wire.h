// Messages that travel over the fabric (UCX) between the machine manager's
// strobe sender and the node managers, and between node managers. These are
// on the hot path, so they are flat little-endian records, not protobuf.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "bcs/matcher.h"

namespace bcs::wire {

// ---- events (core::EventId) and global variables (core::VarId)
enum Event : uint16_t {
  kEvStrobe = 1,     // MM -> NMs: (micro)strobe
  kEvDescBatch = 2,  // NM -> NM: DEM, send descriptors for the destination's ranks
  kEvDmaGet = 3,     // NM -> NM: P2P, "read this chunk of your rank's send buffer"
  kEvDmaData = 4,    // NM -> NM: P2P, the bytes of a chunk
  kEvDmaServed = 5,  // NM -> itself: one remote read served (counted in P2P)
  kEvCollData = 6,   // NM -> NM: BBM/RM, one bundle of collective data per node pair
  kEvBell = 7,       // NM -> MM: the node's doorbell (Bell); MM -> itself: look again
};
enum Var : uint16_t {
  kVarPhase = 1,  // NM: slice * 8 + microphase, set when the microphase is done
};
// Gang scheduling: row r of the matrix reports on kVarPhase + r, so that a
// report of one row's job never satisfies a wait of another's (their slices
// are numbered apart). At most this many rows (bcs-mm --mpl).
constexpr uint32_t kMaxRows = 8;

// Microphases of a slice, in order (the paper's Figure 4.4).
enum class Phase : uint8_t { dem = 0, msm = 1, p2p = 2, bbm = 3, rm = 4 };
inline const char* phase_name(Phase p) {
  switch (p) {
    case Phase::dem:
      return "DEM";
    case Phase::msm:
      return "MSM";
    case Phase::p2p:
      return "P2P";
    case Phase::bbm:
      return "BBM";
    case Phase::rm:
      return "RM";
  }
  return "?";
}
inline int64_t phase_value(uint64_t slice, Phase p) {
  return static_cast<int64_t>(slice * 8 + static_cast<uint64_t>(p));
}

// ---- a tiny byte writer/reader
class Writer {
 public:
  // Most messages (strobes, reports, small batches) fit: one allocation
  // instead of one per doubling (reports were encoded on every slice, at
  // about ten allocations each).
  Writer() { buf_.reserve(kInitialBytes); }
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof(T));
  }
  void put_bytes(std::span<const uint8_t> b) {
    put<uint64_t>(b.size());
    buf_.insert(buf_.end(), b.begin(), b.end());
  }
  std::vector<uint8_t>& bytes() { return buf_; }

 private:
  static constexpr size_t kInitialBytes = 256;
  std::vector<uint8_t> buf_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, b_.data() + off_, sizeof(T));
    off_ += sizeof(T);
    return v;
  }
  std::span<const uint8_t> get_bytes() {
    auto n = get<uint64_t>();
    need(n);
    auto s = b_.subspan(off_, n);
    off_ += n;
    return s;
  }
  std::span<const uint8_t> rest() const { return b_.subspan(off_); }
  bool done() const { return off_ == b_.size(); }

 private:
  void need(size_t n) const {
    if (b_.size() - off_ < n) throw std::runtime_error("wire: truncated message");
  }
  std::span<const uint8_t> b_;
  size_t off_ = 0;
};

// ---- collectives: per communicator context, the highest collective number
// released (every member of every node posted every collective up to it).
struct CollRelease {
  int32_t context = 0;
  uint64_t level = 0;
};
// A node's view of one context after DEM (see daemons/nm/roles/collectives.h).
struct CollLevel {
  int32_t context = 0;
  uint32_t nodes = 0;      // node managers hosting members of the context
  uint64_t level = 0;      // every local member posted every collective up to this
  uint64_t first_bbm = 0;  // lowest locally ready BBM collective not yet run (0: none)
  uint64_t first_rm = 0;   // same for RM (reductions)
  uint32_t busy_bbm = 0;   // BBM collectives in their rounds (they need the microphase again)
  uint32_t busy_rm = 0;    // same for RM
};

// ---- MM -> NM: a microstrobe
struct Strobe {
  uint64_t slice = 0;
  Phase phase = Phase::dem;
  uint64_t job = 0;
  // MSM: how many descriptor batches node i receives this slice (index = node id).
  std::vector<uint32_t> expect_batches;
  // P2P: how many remote reads (DmaGet) node i serves this slice.
  std::vector<uint32_t> expect_gets;
  // BBM and RM: collectives released, per context.
  std::vector<CollRelease> coll_release;
  // DEM of a job with one node: the node runs the whole slice on this one
  // strobe, deciding the later microphases itself (FusedReport).
  bool fused = false;
  // DEM: the strobe has found nothing to do for a while; a node with
  // nothing to do may park (arm its doorbell for posts).
  bool may_park = false;
  // DEM of a fused slice: a lease. After the slice, while every local rank
  // is blocked and the last slice did some work, the node may run up to
  // `lease_slices` more slices (numbered on from `slice`) on its own, for at
  // most `lease_ns` from this strobe; the fused report covers all of them.
  // It saves the manager round trip per slice of a one-node job, whose
  // strobe decides nothing but when a slice starts (see Pacing).
  uint64_t lease_ns = 0;
  uint32_t lease_slices = 0;
  // DEM: receivers (world ranks, ascending) that have too many unexpected
  // sends waiting (Report::full): sends to them stay in their senders'
  // rings until they take some.
  std::vector<int32_t> held;
  // DEM: every rank of the job was blocked in MPI when the slice began (as
  // far as the manager knows): a send held while this stays true is
  // a deadlock the bound caused, not a slow receiver.
  bool job_blocked = false;
  // The last microstrobe of a slice of a multi-node job (P2P, BBM or RM,
  // adaptive strobe): the node may hold its report until every local rank
  // is blocked, for at most `hold_ns`, so that the report itself says
  // "all blocked" and no doorbell message need follow it (0: report at
  // once). The period's end bounds it: the slice after starts no later.
  uint64_t hold_ns = 0;
  // With hold_ns: when the hold ends, the node runs the DEM of slice + 1
  // itself (with `held`, never parking, job_blocked unknown) and reports it
  // after this microphase's report (a FusedReport of two parts). Its ranks
  // are all blocked then, or the period is about to end: the DEM drains
  // exactly what the strobe of the next slice would, one round trip
  // earlier.
  bool next_dem = false;
  // The variable the node reports this microphase on: its job's row's
  // (kVarPhase + row). Named by the strobe, not looked up in the node's
  // jobs, because a node that no longer holds the job (its ranks ended
  // here) still reports, and must do so where that job's manager waits.
  uint16_t var = kVarPhase;
};
// A lease never covers more slices than this (it bounds the fused report).
constexpr uint32_t kMaxLeaseSlices = 256;
// Nor is a report held longer than this (Strobe::hold_ns).
constexpr uint64_t kMaxHoldNs = 10'000'000;
std::vector<uint8_t> encode(const Strobe& s);
Strobe decode_strobe(std::span<const uint8_t> b);

// ---- NM -> MM: the report attached to kVarPhase when a microphase is done
struct Report {
  uint64_t slice = 0;
  Phase phase = Phase::dem;
  // DEM
  uint32_t drained = 0;                  // point-to-point descriptors taken from the rings
  uint32_t coll_drained = 0;             // collective descriptors taken from the rings
  std::vector<uint32_t> batches_to;      // batches sent, index = destination node id
  std::vector<CollLevel> coll;           // collectives, per context with local members
  uint32_t transfers_pending = 0;        // matched transfers not fully moved yet
  uint32_t held = 0;                     // sends held in rings (their receivers are full)
  // Sends that would move data in a P2P once matched: those drained now
  // that are not inline, send cancels, and sends not inline that wait
  // unmatched at this node. With none anywhere and no transfer pending,
  // the MSM delivers all it matches itself (DmaHelper::deliver_inline).
  uint32_t moving = 0;
  // MSM
  uint32_t matches = 0;
  uint32_t chunks = 0;            // chunks scheduled for this slice's P2P
  uint32_t delivered = 0;         // inline messages delivered in the MSM itself
  std::vector<int32_t> full;      // local receivers at their unexpected-send limit
  std::vector<uint32_t> gets_to;  // remote reads it will send, index = node id
  // P2P
  uint64_t bytes = 0;  // bytes moved into local receivers (MSM: delivered inline; BBM/RM: bytes written by collectives)
  // BBM / RM
  uint32_t collectives = 0;  // collectives completed on this node
  // Any microphase, read by the strobe sender from the last one of a slice:
  // every local rank of the job is asleep in a blocking call (or done with
  // MPI), counted after this microphase's completions woke whom they woke.
  bool all_blocked = false;
  // The last part of a slice a one-node job's node ran on its lease: the
  // slice after it started at once for a send to a rank that waited in
  // MPI (Nic::wait_on_bell), not for the period.
  bool post_started = false;
  // DEM: the node had nothing to do and armed its doorbell for posts
  // (kNmParked); the strobe may park until a node rings.
  bool parked = false;
  // How long the node held this report for its ranks to block
  // (Strobe::hold_ns), so the manager can take it out of the phase time.
  uint64_t waited_ns = 0;
  // Failures of the node's own work in the microphase (a batch or bundle
  // that never came or did not decode, a remote read that failed): work was
  // lost, so the MM fails the job with `error`, the first of them.
  // (Errors a collective reports to its members are theirs, not counted.)
  uint32_t errors = 0;
  std::string error;
  void fail(std::string why) {
    if (errors++ == 0) error = std::move(why);
  }
};
std::vector<uint8_t> encode(const Report& r);
Report decode_report(std::span<const uint8_t> b);

// ---- NM -> MM: the reports of a fused slice (Strobe::fused), one per
// microphase it ran, in order, with the time each took on the node.
struct FusedReport {
  std::vector<Report> parts;  // in order: slice by slice, microphase by microphase
  std::vector<uint64_t> ns;   // how long each part took
  std::vector<uint64_t> at;   // when each part began, ns after the strobe arrived
  // Periods the lease let pass after its last slice with nothing posted
  // (a slice after such periods is numbered past them instead).
  uint32_t skipped = 0;
};
// A lease never lets more periods pass than this (10 ms of 1 us slices).
constexpr uint32_t kMaxLeaseSkipped = 10'000;
std::vector<uint8_t> encode(const FusedReport& f);
FusedReport decode_fused(std::span<const uint8_t> b);

// ---- NM -> MM: the node's doorbell, rung between slices.
enum class BellKind : uint8_t {
  blocked = 1,  // every local rank blocked after microphase `epoch`
  work = 2,     // a rank posted while the node was parked
};
struct Bell {
  uint64_t job = 0;
  uint64_t epoch = 0;  // phase_value() of the last microphase the node finished
  BellKind kind = BellKind::blocked;
};
std::vector<uint8_t> encode(const Bell& b);
Bell decode_bell(std::span<const uint8_t> b);

// ---- NM -> NM: DEM batch of send descriptors
struct DescBatch {
  uint64_t slice = 0;
  uint64_t job = 0;
  std::vector<SendDesc> sends;
  std::vector<SendCancel> cancels;  // of sends in this or an earlier batch
};
std::vector<uint8_t> encode(const DescBatch& b);
DescBatch decode_batch(std::span<const uint8_t> b);

// ---- NM -> NM: P2P remote read of a chunk (the receiver's DMA helper asks
// the sender's node to read its rank's memory and ship the bytes back).
struct DmaGet {
  uint64_t job = 0;
  uint64_t token = 0;        // echoed in the reply
  int32_t src_rank = 0;      // world rank whose memory is read
  uint32_t src_request = 0;  // completed by the sender's node when `last`
  uint64_t addr = 0;         // chunk start in the sender's address space
  uint64_t len = 0;
  uint8_t last = 0;
  uint8_t cancelled = 0;     // len 0, last: the send was cancelled, nothing to read
                             // (kCancelLate: the cancel of an inline send came
                             // too late; its slot completes without error)
  // Nothing to read: the receiving rank read the range itself (a node
  // manager on the same host, SendDesc::pid) with `direct_error` as the
  // outcome; the sender's node checks the range as for a read and completes
  // the send with it when `last`. The answer carries no bytes.
  uint8_t direct = 0;
  uint8_t pad0 = 0;
  int32_t direct_error = 0;  // 0 or a bcs_err_*
};
static_assert(sizeof(DmaGet) == 48);
inline constexpr uint8_t kCancelDone = 1, kCancelLate = 2;
std::vector<uint8_t> encode(const DmaGet& g);
DmaGet decode_get(std::span<const uint8_t> b);

struct DmaDataHeader {
  uint64_t token = 0;
  int32_t error = 0;  // bcs_err_* if the read failed
  uint32_t pad = 0;
};
// The reply is this header followed by the bytes (built in place by the
// DMA helper, see Nic::dma_serve_get).

}  // namespace bcs::wire
