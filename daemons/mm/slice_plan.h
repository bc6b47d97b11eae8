// The strobe sender's decisions within one slice, as pure functions of the
// node managers' reports, so the protocol can be unit-tested without a
// fabric: which microphases run (empty ones are skipped, as the paper
// allows), what each microstrobe tells the nodes to expect, and which
// collectives are released.
#pragma once

#include <cstdint>
#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "wire.h"

namespace bcs::mm {

// What the DEM reports decide.
struct DemPlan {
  uint32_t drained = 0;        // point-to-point descriptors, all nodes
  uint32_t coll_drained = 0;   // collective descriptors, all nodes
  uint32_t pending = 0;        // matched transfers still being chunked
  bool run_msm = false;        // something to match or to chunk
  // The MSM may schedule chunks for a P2P: a transfer is pending, or a
  // send that is not inline may be matched (Report::moving). Otherwise
  // the MSM is the slice's last microphase unless a collective is due.
  bool may_move = false;
  std::vector<uint32_t> expect_batches;       // per node: descriptor batches it receives
  std::vector<wire::CollRelease> coll_release;  // per context: released up to
  bool run_bbm = false;        // a released collective is a BBM kind
  bool run_rm = false;         // a released collective is a reduction
};

// `released`: per context, the collectives released in earlier slices.
// A context is released only when every node hosting members reported it
// (a node that has not seen the context yet holds it back).
// (A span: the node of a fused slice passes its one report without a copy.)
DemPlan plan_after_dem(std::span<const wire::Report> dem, uint32_t max_node,
                       const std::map<int32_t, uint64_t>& released);
inline DemPlan plan_after_dem(const std::vector<wire::Report>& dem, uint32_t max_node,
                              const std::map<int32_t, uint64_t>& released) {
  return plan_after_dem(std::span<const wire::Report>(dem), max_node, released);
}

// What the MSM reports decide: P2P runs only if chunks were scheduled, and
// each node learns how many remote reads it must serve.
struct MsmPlan {
  uint32_t chunks = 0;
  std::vector<uint32_t> expect_gets;
};
MsmPlan plan_after_msm(std::span<const wire::Report> msm, uint32_t max_node);
inline MsmPlan plan_after_msm(const std::vector<wire::Report>& msm, uint32_t max_node) {
  return plan_after_msm(std::span<const wire::Report>(msm), max_node);
}

// A job's per-slice chunk budget when --chunk names none: what the slowest
// of its node managers copies in one slice (`copy_rate` bytes per second,
// Register::copy_rate) at `slice_ns`, rounded down to 64 KiB and kept
// within [kMinChunk, kMaxChunk]. A rate of 0 (not measured) gives
// kDefaultChunk, the fixed budget of earlier versions.
inline constexpr uint64_t kDefaultChunk = 2u << 20;
inline constexpr uint64_t kMinChunk = 256u << 10;
inline constexpr uint64_t kMaxChunk = 64u << 20;
uint64_t chunk_budget(uint64_t copy_rate, uint64_t slice_ns);

// A one-node job's fused report, cut into the slices it ran (the strobe's
// slice `first`, then up to `lease_slices` more on the node's lease). The
// node's bytes are input: each slice must start with its DEM, microphases
// go forward within a slice, slices go forward (a gap is periods the lease
// skipped with nothing to do, at most wire::kMaxLeaseSkipped in all) and
// there are no more than the lease allows.
// `begins`: index of each slice's first part. On the first part that breaks
// a rule, or reports a failure of its own, `bad` is its index and `why`
// says what; the parts before it are still cut.
struct FusedSlices {
  std::vector<size_t> begins;
  size_t bad = SIZE_MAX;
  std::string why;
};
FusedSlices split_fused(const wire::FusedReport& f, uint64_t first, uint32_t lease_slices);

}  // namespace bcs::mm
