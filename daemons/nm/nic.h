// The node manager's "NIC": the paper's NIC threads, as role objects driven
// by one strobe-receiver thread.
//
// Why one thread: microphases are globally sequential (a microphase starts
// only when every node finished the previous one), so at any moment exactly
// one role of a node has work. Handing the token between six sleeping
// threads would cost a wake-up (2-20 us here) per microphase per node, a
// large part of a 250-500 us slice on a 2-core machine, for no parallelism.
// The roles keep the paper's names and boundaries so that one can move to a
// thread of its own when there is a reason (e.g. a DMA helper overlapping
// big copies with the next slice's DEM).
//
//   StrobeReceiver   waits for (micro)strobes, runs the role of the
//                    microphase, reports completion (kVarPhase) to the MM
//   BufferSender     DEM: drains the rings, ships send descriptors to the
//                    destination nodes' buffer receivers, one batch per node
//   BufferReceiver   MSM: matches sends against local receives, answers
//                    probes, cuts transfers into per-slice chunks
//   DmaHelper        P2P: moves the bytes (inline payload, cross-memory
//                    attach locally, UCX between nodes); also serves remote
//                    reads of local ranks' memory at any time
//   CollectiveHelper BBM: barriers
//   ReduceHelper     RM: reductions (none scheduled yet)
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "bcs/core.h"
#include "bcs/matcher.h"
#include "job.h"
#include "wire.h"

namespace bcs::nm {

// State the roles share for the job this node is running.
struct NodeJobState {
  explicit NodeJobState(std::shared_ptr<NmJob> j, uint64_t budget)
      : job(std::move(j)), scheduler(budget) {}
  std::shared_ptr<NmJob> job;
  Matcher matcher;
  ChunkScheduler scheduler;
  // BS: per (src, dst) sequence numbers (non-overtaking across slices).
  std::map<std::pair<int32_t, int32_t>, uint64_t> pair_seq;
  // BS -> BR, within one slice.
  std::vector<RecvDesc> local_posts;
  std::vector<SendDesc> local_sends;
  uint32_t drained = 0;
  // CH: barrier requests waiting, per world rank: (barrier number, request).
  std::map<int32_t, std::vector<std::pair<uint64_t, uint32_t>>> barriers;
  std::map<int32_t, uint64_t> barrier_count;  // last barrier number posted per rank
  // DH: errors of transfers in flight (transfer id -> bcs_err_*).
  std::unordered_map<uint64_t, int32_t> xfer_error;
  std::vector<Chunk> chunks;  // this slice's schedule
};

class Nic {
 public:
  Nic(core::Fabric& fabric, uint32_t self);
  ~Nic();
  // From the control thread: the job this node runs now (nullptr: none).
  void set_job(std::shared_ptr<NmJob> job);
  // The strobe receiver's loop; returns when the fabric is closed.
  void run();

 private:
  // Strobe receiver
  wire::Report on_strobe(const wire::Strobe& s);
  void sync_job();
  // Roles, one per microphase.
  wire::Report buffer_sender_dem(uint64_t slice);
  wire::Report buffer_receiver_msm(const wire::Strobe& s);
  wire::Report dma_helper_p2p(const wire::Strobe& s);
  wire::Report collective_helper_bbm(const wire::Strobe& s);
  wire::Report reduce_helper_rm(uint64_t slice);
  // DMA helper, sender side: serves a remote read (runs inside progress).
  void dma_serve_get(core::Message&& m);

  core::Fabric& fabric_;
  const uint32_t self_;
  std::mutex job_mu_;
  std::shared_ptr<NmJob> pending_job_;  // guarded by job_mu_
  std::unique_ptr<NodeJobState> st_;    // NIC thread only
  std::vector<uint8_t> staging_;        // DH bounce buffer for local copies
  uint64_t next_token_ = 1;
};

}  // namespace bcs::nm
