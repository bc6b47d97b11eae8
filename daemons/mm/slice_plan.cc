#include "slice_plan.h"

#include <algorithm>

namespace bcs::mm {

DemPlan plan_after_dem(std::span<const wire::Report> dem, uint32_t max_node,
                       const std::map<int32_t, uint64_t>& released) {
  DemPlan p;
  p.expect_batches.assign(max_node + 1, 0);
  struct Agg {
    uint32_t reporters = 0, nodes = 0;
    uint64_t level = UINT64_MAX, bbm = 0, rm = 0;
  };
  std::map<int32_t, Agg> coll;
  for (const auto& rep : dem) {
    p.drained += rep.drained;
    p.coll_drained += rep.coll_drained;
    p.pending += rep.transfers_pending;
    p.may_move = p.may_move || rep.moving || rep.transfers_pending;
    for (size_t n = 0; n < rep.batches_to.size() && n <= max_node; ++n)
      p.expect_batches[n] += rep.batches_to[n];
    for (const auto& l : rep.coll) {
      // A collective in its rounds runs again, whatever the levels say.
      p.run_bbm = p.run_bbm || l.busy_bbm;
      p.run_rm = p.run_rm || l.busy_rm;
      Agg& a = coll[l.context];
      a.reporters++;
      a.nodes = std::max(a.nodes, l.nodes);
      a.level = std::min(a.level, l.level);
      if (l.first_bbm) a.bbm = a.bbm ? std::min(a.bbm, l.first_bbm) : l.first_bbm;
      if (l.first_rm) a.rm = a.rm ? std::min(a.rm, l.first_rm) : l.first_rm;
    }
  }
  p.run_msm = p.drained || p.pending;
  for (const auto& [ctx, a] : coll) {
    auto it = released.find(ctx);
    const uint64_t done = it == released.end() ? 0 : it->second;
    if (a.reporters < a.nodes || a.level == UINT64_MAX || a.level <= done) continue;
    p.coll_release.push_back({ctx, a.level});
    // Every collective up to `level` is posted everywhere, so a node's
    // lowest ready one of a kind lies in (done, level] exactly when one of
    // that kind is due.
    p.run_bbm = p.run_bbm || (a.bbm && a.bbm <= a.level);
    p.run_rm = p.run_rm || (a.rm && a.rm <= a.level);
  }
  return p;
}

MsmPlan plan_after_msm(std::span<const wire::Report> msm, uint32_t max_node) {
  MsmPlan p;
  p.expect_gets.assign(max_node + 1, 0);
  for (const auto& rep : msm) {
    p.chunks += rep.chunks;
    for (size_t n = 0; n < rep.gets_to.size() && n <= max_node; ++n)
      p.expect_gets[n] += rep.gets_to[n];
  }
  return p;
}

FusedSlices split_fused(const wire::FusedReport& f, uint64_t first, uint32_t lease_slices) {
  FusedSlices out;
  uint64_t slice = first, gaps = 0;
  wire::Phase last = wire::Phase::dem;
  for (size_t i = 0; i < f.parts.size(); ++i) {
    const auto& p = f.parts[i];
    const bool starts = p.phase == wire::Phase::dem;
    if (static_cast<uint8_t>(p.phase) > static_cast<uint8_t>(wire::Phase::rm)) {
      out.why = "malformed report: unknown microphase";
    } else if (i == 0 ? p.slice != first || !starts
                      : starts ? p.slice <= slice : p.slice != slice || p.phase <= last) {
      out.why = "malformed report: microphases out of order";
    } else if (starts && i > 0 &&
               (gaps += p.slice - slice - 1) > wire::kMaxLeaseSkipped) {
      out.why = "malformed report: more periods skipped than a lease may";
    } else if (starts && out.begins.size() > lease_slices) {
      out.why = "malformed report: more slices than the lease";
    } else if (p.errors) {
      out.why = p.error;
    }
    if (!out.why.empty()) {
      out.bad = i;
      return out;
    }
    if (starts) out.begins.push_back(i);
    slice = p.slice;
    last = p.phase;
  }
  if (f.parts.empty()) {
    out.bad = 0;
    out.why = "malformed report: no microphase";
  }
  return out;
}

uint64_t chunk_budget(uint64_t copy_rate, uint64_t slice_ns) {
  if (copy_rate == 0) return kDefaultChunk;
  // Both come from elsewhere (a node manager's report, a request): no
  // overflow whatever they are.
  const unsigned __int128 bytes =
      static_cast<unsigned __int128>(copy_rate) * slice_ns / 1'000'000'000u;
  const uint64_t b = bytes > kMaxChunk ? kMaxChunk : static_cast<uint64_t>(bytes);
  return std::max(kMinChunk, b & ~uint64_t{(64u << 10) - 1});
}

}  // namespace bcs::mm
