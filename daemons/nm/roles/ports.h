// The narrow interfaces between the node manager's helper roles and the rest
// of the daemon. Each role (roles/*.h) talks to the network and to the
// ranks only through these, so each is unit-tested with fakes
// (tests/unit/nm) while the daemon plugs in the UCX fabric and the job's
// forked ranks (nic.cc).
#pragma once

#include <chrono>
#include <climits>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bcs/core.h"
#include "bcs/segment.h"
#include "bcs/layout.h"
#include "read_grants.h"

namespace bcs::nm {

// The fabric as the roles use it: put a message to a node's event, wait
// for a message on one of our events.
class Net {
 public:
  virtual ~Net() = default;
  virtual core::Status send(uint32_t node, core::EventId ev, std::span<const uint8_t> bytes) = 0;
  virtual core::Status wait(core::EventId ev, core::Message* m, std::chrono::nanoseconds limit) = 0;
};

// The local ranks' memory and request table (cross-memory attach in the
// daemon). Every index and address that came from a rank is checked by the
// implementation before use.
class RankMemory {
 public:
  virtual ~RankMemory() = default;
  // 0 or a bcs_err_*.
  virtual int32_t read(int32_t world_rank, uint64_t addr, void* dst, size_t len) = 0;
  virtual int32_t write(int32_t world_rank, uint64_t addr, const void* src, size_t len) = 0;
  virtual void complete(int32_t world_rank, uint32_t request, int32_t error) = 0;
  // Packed bytes [off, off + len) of a non-contiguous buffer (layout `l` at
  // `base`): the pieces of the rank's memory that hold them, in order. By
  // default one read/write per piece; the daemon does one cross-memory call
  // per batch of pieces.
  virtual int32_t read_layout(int32_t world_rank, uint64_t base, const Layout& l, uint64_t off,
                              void* dst, size_t len) {
    auto* p = static_cast<uint8_t*>(dst);
    int32_t err = 0;
    layout_segments(l, base, off, len, [&](uint64_t a, uint64_t n) {
      if (!err) err = read(world_rank, a, p, n);
      p += n;
    });
    return err;
  }
  virtual int32_t write_layout(int32_t world_rank, uint64_t base, const Layout& l, uint64_t off,
                               const void* src, size_t len) {
    const auto* p = static_cast<const uint8_t*>(src);
    int32_t err = 0;
    layout_segments(l, base, off, len, [&](uint64_t a, uint64_t n) {
      if (!err) err = write(world_rank, a, p, n);
      p += n;
    });
    return err;
  }
};

// Who besides the receiving rank may copy part of a copy order
// (NmJob::post_copy). Only orders of 2 MiB or more are ever helped.
enum class CopyHelp : uint8_t {
  // The receiver alone: a collective's members copy their pieces at once,
  // so there is no CPU to spare.
  none,
  // A second thread of the receiver, if its node has a CPU to spare when
  // it takes the order (DmaOrder::split).
  split,
  // The sender, a local rank with nothing of its own to copy now, writes
  // part of it if it sleeps in MPI (DmaOrder::write); if it does not, as
  // `split`.
  share,
};

// One job's footprint on this node, as the roles see it.
class LocalRanks : public RankMemory {
 public:
  virtual uint64_t job_id() const = 0;
  virtual uint32_t nranks() const = 0;  // world size
  virtual uint32_t nnodes() const = 0;  // node ids are 0 .. nnodes-1
  virtual uint32_t node_of(int32_t world_rank) const = 0;
  virtual bool is_local(int32_t world_rank) const = 0;
  // World ranks, ascending; valid as long as the job.
  virtual std::span<const int32_t> local_ranks() const = 0;
  // The rank's control block, ring and request table in the job segment.
  virtual RankView view_of(int32_t world_rank) = 0;
  // Completes a request with a full status (receives, probes); `seq`: a
  // receive's matched send's pair sequence number (0: none).
  virtual void complete_status(int32_t world_rank, uint32_t request, int32_t error,
                               int32_t source, int32_t tag, uint64_t bytes, uint32_t found,
                               uint64_t seq = 0) = 0;
  // A small receive's bytes into the landing of its request slot
  // (segment.h, kLandingMax), for the rank to copy when it finds the
  // request done; before complete_status. False: not landed (too long, or
  // not offered here), the caller writes the rank's buffer.
  virtual bool land(int32_t /*world_rank*/, uint32_t /*request*/, const void* /*src*/,
                    size_t /*len*/) {
    return false;
  }
  // What peers may read of the local ranks' memory (read_grants.h).
  virtual ReadGrants& read_grants() = 0;
  // A local rank wrote garbage into its segment: end it, naming `why`.
  virtual void rank_corrupted(int32_t world_rank, const std::string& why) = 0;
  // The DEM read the rank's ring up to `head` (what it held back included):
  // only a head past this is news (parking, the doorbell).
  virtual void ring_seen(int32_t, uint64_t) {}
  // The DEM took `count` (> 0) descriptors from the rank's ring this slice
  // (the slice schedule a recording keeps).
  virtual void note_drain(int32_t, uint64_t) {}
  // After the MSM: whether the buffer receiver holds sends to local rank
  // `r` that no receive took (RankControl::held_sends).
  virtual void held_sends(int32_t, bool) {}
  // Single copy (segment.h, DmaOrder): has local rank `to` read `len` bytes
  // at `src` of local rank `from` into its own `dst` itself, if it can (it
  // sleeps in MPI). kNotDelegated: it did not, the caller copies; else 0 or
  // a bcs_err_*.
  static constexpr int32_t kNotDelegated = INT32_MIN;
  virtual int32_t copy_by_receiver(int32_t /*from*/, int32_t /*to*/, uint64_t /*src*/,
                                   uint64_t /*dst*/, size_t /*len*/) {
    return kNotDelegated;
  }
  // Single copy between node managers of one host: the process of local
  // rank `from` if node `node` is on this host (it goes with the send
  // descriptor, SendDesc::pid), else 0; and the copy order naming such a
  // process, as copy_by_receiver.
  virtual uint32_t offer_pid(int32_t /*from*/, uint32_t /*node*/) { return 0; }
  // Whether node `node` runs on this host (only its offers are taken).
  virtual bool host_peer(uint32_t /*node*/) const { return false; }
  virtual int32_t copy_from_process(uint32_t /*pid*/, int32_t /*to*/, uint64_t /*src*/,
                                    uint64_t /*dst*/, size_t /*len*/) {
    return kNotDelegated;
  }
  // A copy order in two halves, so the rank copies while the node does
  // other work (the DMA helper's copies ahead): post_copy posts it (false:
  // not posted, as kNotDelegated above; at most one per rank), await_copy
  // settles it with copy_from_process's result. `help`: who else may copy
  // part of it (CopyHelp). pid_of: the process a copy order names for local
  // rank `r`, 0 if none (gone, single copy off).
  virtual bool post_copy(uint32_t /*pid*/, int32_t /*to*/, uint64_t /*src*/, uint64_t /*dst*/,
                         size_t /*len*/, CopyHelp /*help*/) {
    return false;
  }
  virtual int32_t await_copy(int32_t /*to*/) { return kNotDelegated; }
  // Whether local rank `to` holds copy orders not yet settled (the DMA
  // helper's pieces ahead): another role then leaves it alone, since
  // await_copy settles a rank's orders oldest first.
  virtual bool copy_orders_pending(int32_t /*to*/) { return false; }
  virtual uint32_t pid_of(int32_t /*r*/) { return 0; }
};

// The longest a role waits for the data of one microphase (descriptor
// batches, remote chunks, collective bundles). The daemon's Net ends a wait
// sooner: at the node manager's liveness timeout (--liveness-timeout, a
// stopped or slow peer only delays the job until then) or when the job
// ends (a peer that died is noticed by the MM through its control stream,
// which ends the job).
constexpr std::chrono::seconds kPhaseDataTimeout{3600};

}  // namespace bcs::nm
