// The strobe sender's slice loop for one job (Manager::run_slices): a
// coroutine the strobe sender resumes (strobe_sender.cc). For every slice
// it sends the strobe (= the DEM microstrobe), waits until every node
// manager of the job reports the microphase done, and only then sends the
// next microstrobe. Microphases with nothing to do anywhere are skipped,
// as the paper allows: the DEM reports say whether there is anything to
// match (MSM), the MSM reports whether anything is scheduled (P2P), and the
// barrier levels whether a barrier can be released (BBM). Every wait is a
// suspension: while this job waits, the strobe sender drives the others.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <set>

#include "job_run.h"
#include "manager.h"
#include "slice_plan.h"
#include "wire.h"

namespace bcs::mm {

using wire::Phase;

namespace {

// Slices with nothing to do anywhere before the strobe may park. A parked
// node makes every post ring its doorbell (a system call that wakes a
// thread), so short gaps between communications (a rank computing for a
// millisecond, skew before a collective) keep the period and cost the
// ranks nothing; only an idle stretch longer than this parks.
constexpr uint32_t kParkAfterEmpty = 8;
// A one-node job's lease (Strobe::lease_ns) lasts this long: the node paces
// its own slices meanwhile (period, early, skipped), and the manager hears
// from it at least this often. Each renewal costs the manager and the node
// a round trip, the strobe sender's spin and the slices' records, on the
// ranks' cores: at 10 ms, a halo exchange stepping every millisecond paid
// 26 µs of manager CPU per step, at 100 ms 7 µs. The job's end does not
// wait for it (a rank gone ends the lease at once), only `bcs stats` hears
// of the slices later.
constexpr uint64_t kMaxLeaseNs = 100'000'000;
// A held report (Strobe::hold_ns) is due this long before the period ends
// (plus the strobe spin), so that a node whose ranks never all block still
// reports in time for the next strobe.
constexpr uint64_t kHoldMarginNs = 50'000;
}  // namespace

Task<bool> Manager::run_slices(JobRun& r) {
  Job& j = *r.job;
  const uint64_t slice_ns = j.slice_ns;
  // Never spin for more than a quarter of the job's slice, nor at all at
  // real-time priority.
  Pacing pace;
  pace.spin_ns = realtime_ ? 0 : std::min(cfg_.strobe_spin_ns, slice_ns / 4);
  pace.adaptive = !j.fixed_strobe;
  pace.next = now_ns();
  const uint32_t max_node = *std::max_element(j.nodes.begin(), j.nodes.end());
  uint64_t prev_start = 0;
  std::map<int32_t, uint64_t> released;  // per context: collectives released so far
  // Per node: its receivers at their unexpected-send limit, from its last
  // MSM report; the next DEM strobe tells every node to hold sends to them.
  std::map<uint32_t, std::vector<int32_t>> full;
  // Every node reported all its ranks blocked after the last slice.
  bool job_blocked = false;
  std::vector<core::VarReplica> snap;
  // The next slice's DEM reports, when the nodes ran it at the end of this
  // one (Strobe::next_dem), in the order of j.nodes; and its longest time.
  std::vector<wire::Report> next_dem;
  uint64_t next_dem_ns = 0;
  bool ok = true;

  // A node that failed its own part of a microphase (a batch or bundle that
  // never came or did not decode, a remote read that failed, or a report
  // that does not decode here) lost work the ranks wait for: the job fails
  // at once, naming the node, the microphase and the cause, instead of
  // hanging until the watchdog.
  auto fail_node = [&](uint32_t node, uint64_t slice, Phase phase, const std::string& why) {
    std::lock_guard lk(mu_);
    const auto it = nodes_.find(node);
    const std::string who =
        it == nodes_.end() ? "node " + std::to_string(node) : "node " + it->second->name;
    fail_job_locked(j, 1,
                    who + ": microphase " + wire::phase_name(phase) + " of slice " +
                        std::to_string(slice) + " failed: " + why);
  };

  // Each slice's record: to the EMDS, and to the job's progress for Kill's
  // report (a job that timed out says how far it got).
  auto record = [&](monitor::SliceRecord& rec) {
    // The switches before this slice (gang scheduling), with their cost.
    rec.switches = j.unrecorded_switches.exchange(0, std::memory_order_relaxed);
    rec.switch_ns = j.unrecorded_switch_ns.exchange(0, std::memory_order_relaxed);
    if (cfg_.emds) emds_.record(rec);
    auto& pr = j.progress;
    pr.slices.fetch_add(1, std::memory_order_relaxed);
    pr.last_start_ns.store(rec.start_ns, std::memory_order_relaxed);
    if (rec.descriptors || rec.chunks || rec.bytes || rec.collectives || rec.coll_bytes)
      pr.last_moved_ns.store(rec.start_ns, std::memory_order_relaxed);
  };

  auto strobe = [&](const wire::Strobe& s) {
    auto st = fabric_.xfer_and_signal(j.nodes, wire::kEvStrobe, wire::encode(s));
    if (st == core::Status::closed) return false;  // shutting down: nothing to report
    if (st != core::Status::ok) {
      // UCX's own words too: "io error" alone left a lost node's cause
      // unknown (slurm_three_hosts, once in CI: both network peers lost at
      // the first strobe).
      spdlog::error("slice {}: {} microstrobe: {} ({})", s.slice, wire::phase_name(s.phase),
                    core::status_str(st), fabric_.last_error());
      return false;
    }
    return true;
  };

  while (ok) {
    {
      std::lock_guard lk(mu_);
      fail_noticed_if_due(j, false);
      if (stopping_ || j.state == Job::State::done) break;
    }
    Start how = Start::next;
    if (next_dem.empty()) {
      how = co_await wait_for_slice(r, pace);
    } else {
      // The nodes already ran this slice's DEM; bells that came meanwhile
      // are only counted (and must not pile up).
      for (; !r.bells.empty(); r.bells.pop_front()) take_bell(j, pace, r.bells.front());
      if (r.closed) how = Start::closed;
    }
    if (how == Start::woken) continue;  // look at the job again
    if (how == Start::closed) {
      ok = false;
      break;
    }
    r.quiet = false;  // in a slice: a job sharing its nodes waits
    const uint64_t start = now_ns();
    monitor::SliceRecord rec;
    if (how == Start::unparked) {
      rec.skipped = (start - pace.parked_at) / slice_ns;
      r.slice += rec.skipped;
    }
    rec.skipped += std::exchange(pace.skipped_carry, 0);
    rec.slice = ++r.slice;
    rec.job = j.id;
    rec.start_ns = start;
    rec.period_ns = prev_start ? start - prev_start : 0;
    rec.early = how == Start::next ? start < pace.next : how != Start::period;
    rec.late_ns = how == Start::period && start > pace.next ? start - pace.next : 0;
    rec.bells = std::exchange(pace.bells, 0);
    rec.dem_ahead = how == Start::next;
    prev_start = start;
    // The period bounds this slice from above, counted from when it began.
    const uint64_t scheduled = how == Start::period ? pace.next : start;
    const bool blocked_at_start = job_blocked || pace.all_blocked(j.nodes);
    pace.parked = pace.rung = false;
    pace.blocked.clear();
    Phase last = Phase::dem;

    wire::Strobe s;
    s.slice = rec.slice;
    s.job = j.id;
    s.var = j.phase_var;
    s.phase = Phase::dem;
    s.may_park = pace.adaptive && pace.empty_run + 1 >= kParkAfterEmpty;
    s.job_blocked = blocked_at_start;
    s.held.clear();
    for (const auto& [node, ranks] : full) s.held.insert(s.held.end(), ranks.begin(), ranks.end());
    // What the slice's microphases found, for the record and the pacing.
    bool all_parked = true, nothing_to_do = true;
    std::set<uint32_t> blocked_after;  // nodes blocked after their last microphase
    auto account = [&](Phase p, const std::vector<wire::Report>& reps) {
      for (const auto& r : reps) {
        switch (p) {
          case Phase::dem:
            rec.descriptors += r.drained + r.coll_drained;
            rec.coll_descriptors += r.coll_drained;
            rec.held += r.held;
            all_parked = all_parked && r.parked;
            break;
          case Phase::msm:
            rec.chunks += r.chunks + r.delivered;
            rec.bytes += r.bytes;
            break;
          case Phase::p2p: rec.bytes += r.bytes; break;
          case Phase::bbm:
          case Phase::rm:
            rec.collectives += r.collectives;
            rec.coll_bytes += r.bytes;
            break;
        }
      }
      if (p != Phase::dem) nothing_to_do = false;
      last = p;
    };
    // Runs microphase `phase` on every node: strobe, wait, then the nodes'
    // reports, decoded once (a node's bytes are input: one that does not
    // decode fails the job like a failure it reports).
    std::vector<wire::Report> reps;
    auto microphase = [&](Phase phase) -> Task<bool> {
      const auto k = static_cast<uint8_t>(phase);
      s.phase = phase;
      const uint64_t t = now_ns();
      ok = strobe(s);
      if (ok) ok = co_await wait_phase(r, s.slice, k, &snap, &rec.retries[k]);
      if (!ok) co_return false;
      reps.clear();
      next_dem.clear();
      next_dem_ns = 0;
      for (const auto& v : snap) {
        try {
          if (!s.next_dem) {
            reps.push_back(wire::decode_report(v.attachment));
          } else {
            // This microphase's report, then (unless it failed) the next
            // slice's DEM.
            wire::FusedReport f = wire::decode_fused(v.attachment);
            reps.push_back(std::move(f.parts[0]));
            if (!reps.back().errors) {
              if (f.parts.size() != 2 || f.parts[1].phase != Phase::dem ||
                  f.parts[1].slice != s.slice + 1)
                throw std::runtime_error("the next slice's DEM is missing or out of place");
              next_dem.push_back(std::move(f.parts[1]));
              if (f.ns.size() == 2) next_dem_ns = std::max(next_dem_ns, f.ns[1]);
              if (next_dem.back().errors) {
                fail_node(v.node, s.slice + 1, Phase::dem, next_dem.back().error);
                co_return ok = false;
              }
            }
          }
        } catch (const std::exception& e) {
          fail_node(v.node, s.slice, phase, std::string("malformed report: ") + e.what());
          co_return ok = false;
        }
        // The report answers this microstrobe, or it is another's that met
        // this wait (one of another job once did, and the slice went on
        // without that node's descriptors): never taken for this one.
        if (reps.back().slice != s.slice || reps.back().phase != phase) {
          fail_node(v.node, s.slice, phase,
                    fmt::format("malformed report: it answers {} of slice {}",
                                wire::phase_name(reps.back().phase), reps.back().slice));
          co_return ok = false;
        }
        if (reps.back().errors) {
          fail_node(v.node, s.slice, phase, reps.back().error);
          co_return ok = false;
        }
      }
      // A held report (Strobe::hold_ns) waited for ranks, not for work.
      uint64_t waited = UINT64_MAX;
      for (const auto& r : reps) waited = std::min(waited, r.waited_ns);
      rec.phase_ns[k] = now_ns() - t;
      rec.phase_ns[k] -= std::min(rec.phase_ns[k], waited == UINT64_MAX ? 0 : waited);
      account(phase, reps);
      co_return true;
    };

    if (j.nodes.size() == 1 && pace.adaptive) {
      // One node: it runs the whole slice on one strobe (Nic::run_fused),
      // and, on a lease, the slices after it while all its ranks block.
      s.fused = true;
      // Gang scheduling: the lease ends with the quantum.
      const uint64_t now = now_ns();
      s.lease_ns = r.quantum_end == UINT64_MAX ? kMaxLeaseNs
                   : r.quantum_end > now       ? std::min(kMaxLeaseNs, r.quantum_end - now)
                                               : 0;
      s.lease_slices = wire::kMaxLeaseSlices;
      ok = strobe(s);
      if (ok) ok = co_await wait_phase(r, s.slice, 0, &snap, &rec.retries[0]);
      if (!ok) break;
      wire::FusedReport f;
      try {
        f = wire::decode_fused(snap.at(0).attachment);
      } catch (const std::exception& e) {
        f.parts.emplace_back().fail(std::string("malformed report: ") + e.what());
        f.parts.back().slice = s.slice;
      }
      // The parts, slice by slice (split_fused checks their order): each
      // slice the node ran on its lease gets its own record.
      const FusedSlices cut = split_fused(f, s.slice, s.lease_slices);
      const size_t good = std::min(cut.bad, f.parts.size());
      for (size_t i = 0; i < good; ++i) {
        const auto& part = f.parts[i];
        if (i > 0 && part.phase == Phase::dem) {
          record(rec);
          // The node's offsets are input: a slice never starts before the
          // one it follows (they only feed the statistics).
          const uint64_t at = std::max(prev_start, start + (i < f.at.size() ? f.at[i] : 0));
          rec = monitor::SliceRecord{};
          // Periods the lease skipped with nothing to do (split_fused
          // bounds them) keep the numbering global.
          rec.skipped = part.slice - s.slice - 1;
          r.slice += rec.skipped;
          rec.slice = s.slice = ++r.slice;
          rec.job = j.id;
          rec.start_ns = at;
          rec.period_ns = at - prev_start;
          // Early when every rank was blocked after the slice before, or a
          // send to a waiting rank came (the node says so on its last part);
          // else the lease's period began it.
          rec.leased = true;
          rec.early = f.parts[i - 1].all_blocked || f.parts[i - 1].post_started;
          prev_start = at;
          all_parked = nothing_to_do = true;
        }
        rec.phase_ns[static_cast<size_t>(part.phase)] = i < f.ns.size() ? f.ns[i] : 0;
        account(part.phase, {part});
      }
      if (cut.bad != SIZE_MAX) {
        const wire::Report* part = cut.bad < f.parts.size() ? &f.parts[cut.bad] : nullptr;
        fail_node(j.nodes[0], part ? part->slice : s.slice, part ? part->phase : Phase::dem,
                  cut.why);
        ok = false;
      }
      if (!ok) break;
      // Periods skipped after the lease's last slice: the next slice says so.
      r.slice += f.skipped;
      pace.skipped_carry = f.skipped;
      if (f.parts.back().all_blocked) blocked_after.insert(j.nodes[0]);
    } else {
      // DEM (the strobe itself, or run by the nodes at the end of the last
      // slice: Strobe::next_dem).
      if (next_dem.empty()) {
        const bool done = co_await microphase(Phase::dem);
        if (!done) break;
      } else {
        reps = std::move(next_dem);
        next_dem.clear();
        rec.phase_ns[0] = next_dem_ns;
        account(Phase::dem, reps);
      }
      s.held.clear();  // only the DEM needs it: the later microstrobes go without
      const DemPlan dem = plan_after_dem(reps, max_node, released);
      s.expect_batches = dem.expect_batches;
      s.coll_release = dem.coll_release;
      nothing_to_do = dem.drained == 0 && dem.coll_drained == 0 && !dem.run_msm && !dem.run_bbm &&
                      !dem.run_rm && dem.coll_release.empty();
      // The slice's last microstrobe lets the nodes hold their reports until
      // their ranks block (Nic::hold_report), up to shortly before the
      // period ends, so the report doubles as the doorbell.
      auto last_of_slice = [&] {
        if (!pace.adaptive) return;
        // Gang scheduling: the hold never runs past the quantum, or the next
        // row would wait for this slice's report at every switch.
        const uint64_t end = std::min(scheduled + slice_ns, r.quantum_end),
                       t = now_ns() + pace.spin_ns + kHoldMarginNs;
        s.hold_ns = end > t ? std::min(end - t, wire::kMaxHoldNs) : 0;
        // With a hold, the nodes also run the next slice's DEM when it ends;
        // not when the next slice would begin past the quantum (gang
        // scheduling: nothing of the job may be in flight at the switch).
        s.next_dem = s.hold_ns > 0 && end < r.quantum_end;
        s.held.clear();
        if (s.next_dem)
          for (const auto& [node, ranks] : full) s.held.insert(s.held.end(), ranks.begin(), ranks.end());
      };
      // MSM: only if something was posted or transfers are still being chunked.
      uint32_t chunks = 0;
      if (dem.run_msm) {
        // Nothing it matches moves data in a P2P (the nodes deliver inline
        // messages in the MSM): the MSM ends the slice.
        const bool msm_last = !dem.may_move && !dem.run_bbm && !dem.run_rm;
        if (msm_last) last_of_slice();
        const bool done = co_await microphase(Phase::msm);
        if (!done) break;
        // A node names only its own ranks as full.
        for (size_t i = 0; ok && i < reps.size(); ++i) {
          for (int32_t r : reps[i].full)
            if (r < 0 || static_cast<size_t>(r) >= j.rank_node.size() ||
                j.rank_node[r] != snap[i].node) {
              fail_node(snap[i].node, s.slice, Phase::msm,
                        "malformed report: rank " + std::to_string(r) + " is not on this node");
              ok = false;
              break;
            }
          full[snap[i].node] = std::move(reps[i].full);
        }
        if (!ok) break;
        MsmPlan msm = plan_after_msm(reps, max_node);
        s.expect_gets = std::move(msm.expect_gets);
        chunks = msm.chunks;
        if (msm_last && chunks) {
          // The nodes said nothing would move; one did not keep its word
          // (its bytes are input), and the slice cannot go on past the
          // next DEM its nodes already ran.
          for (size_t i = 0; i < reps.size(); ++i)
            if (reps[i].chunks) {
              fail_node(snap[i].node, s.slice, Phase::msm,
                        "malformed report: chunks scheduled after a DEM that announced none");
              break;
            }
          ok = false;
          break;
        }
      }
      // P2P: only if the MSM scheduled chunks somewhere.
      if (chunks) {
        if (!dem.run_bbm && !dem.run_rm) last_of_slice();
        const bool done = co_await microphase(Phase::p2p);
        if (!done) break;
      }
      // BBM (collective helper) and RM (reduce helper): collectives that every
      // member has posted; each microphase only if one of its kinds is due.
      const std::pair<Phase, bool> colls[] = {{Phase::bbm, dem.run_bbm}, {Phase::rm, dem.run_rm}};
      for (const auto& [phase, due] : colls) {
        if (!due) continue;
        if (phase == Phase::rm || !dem.run_rm) last_of_slice();
        const bool done = co_await microphase(phase);
        if (!done) break;
      }
      if (!ok) break;
      for (const auto& r : s.coll_release) released[r.context] = r.level;
      for (size_t i = 0; i < reps.size(); ++i)
        if (reps[i].all_blocked) blocked_after.insert(snap[i].node);
    }
    record(rec);
    slice_ = std::max(slice_, r.slice);  // the manager's high-water mark (new jobs start above it)
    job_blocked = blocked_after.size() == j.nodes.size();

    // Next strobe one period after this one started; if this slice
    // overran, at once (no burst of catch-up slices).
    pace.next = scheduled + slice_ns;
    const uint64_t now = now_ns();
    if (pace.next < now) pace.next = now;
    if (pace.adaptive) {
      // Who is blocked after the slice's last microphase; bells from later
      // count too (wait_for_slice).
      pace.end_value = wire::phase_value(s.slice, last);
      pace.blocked = std::move(blocked_after);
      pace.empty_run = nothing_to_do ? pace.empty_run + 1 : 0;
      if (nothing_to_do && all_parked && s.may_park) {
        pace.parked = true;
        pace.parked_at = now;
      }
    }
    j.progress.parked.store(pace.parked, std::memory_order_relaxed);
    j.progress.all_blocked.store(job_blocked, std::memory_order_relaxed);
  }
  // Reports of this job's last strobes may still come when it ended early:
  // a node stuck in a microphase finishes it and runs the DEM of the slice
  // after (Strobe::next_dem), or a lease runs on for slices the manager never
  // counted. Their phase values must never meet the next job's waits (one
  // did: the next job's first slice took a stale two-part report for its
  // fused one and failed), so the next job on these nodes starts past every
  // slice number they could carry (its numbers start above slice_).
  slice_ = std::max(slice_, r.slice + 2 + wire::kMaxLeaseSlices + wire::kMaxLeaseSkipped);
  if (!ok) {
    std::lock_guard lk(mu_);
    if (!j.failed && !stopping_) {
      // The fabric may notice a dead node manager (a UCX peer error) before
      // its control stream breaks: name the node either way.
      std::string lost;
      for (uint32_t n : j.nodes) {
        if (fabric_.connected(n) && nodes_.count(n)) continue;
        auto it = nodes_.find(n);
        lost += (lost.empty() ? "" : ", ") +
                (it == nodes_.end()
                     ? "node " + std::to_string(n)
                     : it->second->name + " (pid " + std::to_string(it->second->pid) + ")");
      }
      fail_job_locked(j, 1,
                      lost.empty() ? "the strobe protocol failed (see the manager's log)"
                                   : "node manager " + lost + " was lost (fabric error)");
    }
  }
  cv_.notify_all();
  flush();
  co_return ok;
}


}  // namespace bcs::mm
