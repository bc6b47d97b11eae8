// Node-side pacing: how the strobe receiver spaces slices itself. A
// one-node job's fused slices and its lease (the node runs the next slice
// as soon as every rank is blocked, or a send to a waiting rank or a
// collective's last local post comes, skipping periods with nothing to do);
// a multi-node job's held reports and the next slice's DEM; and the bell
// the ranks ring for all of these (wait_on_bell). docs/architecture.md,
// Pacing.
#include "nic.h"

#include "slice_plan.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string_view>
#include <utility>

namespace bcs::nm {

using namespace std::chrono_literals;
using wire::Phase;
// A job with one node needs no global synchronisation between microphases
// (every "all nodes finished" holds as soon as this node finished), so the
// node runs the whole slice on the DEM strobe: the same roles in the same
// order, with the strobe sender's decisions (slice_plan.h) taken here. One
// round trip per slice instead of up to five.
//
// The strobe may also grant a lease: the strobe sender of a one-node job
// would start the next slice at once whenever every rank is blocked, or at
// the period's end, so the node does that itself, up to lease_slices more
// slices within lease_ns, skipping periods with nothing to do, and reports
// them all together. A slice that found nothing to do ends the lease (the
// strobe sender decides about parking), and so does the lease's time, so
// the manager still hears from the node every lease_ns.
// The ranks' wait-to-slice path is then rank -> bell -> this thread: two
// wake-ups, instead of the bell thread, the manager and back over the
// network.
wire::FusedReport Nic::run_fused(const wire::Strobe& s) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const auto deadline = t0 + std::chrono::nanoseconds(s.lease_ns);
  const uint32_t lease = std::min(s.lease_slices, wire::kMaxLeaseSlices);
  wire::FusedReport f;
  wire::Strobe m = s;
  // However the lease ends (a role may throw), the doorbell takes over the
  // bell again; Run() then stores the final epoch and scans.
  struct LeaseEnd {
    std::atomic<uint32_t>& leasing;
    std::shared_ptr<NmJob> job;  // asked its ranks to ring (wait_on_bell)
    ~LeaseEnd() {
      if (job) {
        job->set_nm_flag(kNmBellOnPost, false);
        job->set_nm_flag(kNmBellOnAnyBlock, false);
        job->set_nm_flag(kNmBellOnWork, false);
      }
      if (leasing.load(std::memory_order_relaxed)) {
        leasing.store(0, std::memory_order_seq_cst);
        futex_wake_all(&leasing);
      }
    }
  } lease_end{leasing_, nullptr};
  // Periods skipped so far in this lease, between its slices: with those
  // after its last slice, never more than the manager accepts
  // (kMaxLeaseSkipped, split_fused). One wait can pass many: a node
  // stopped for 15 s (SIGSTOP) woke to 30,000 periods gone, and capping
  // each wait alone let a second one push the lease past the limit, which
  // failed the job as a malformed report.
  uint32_t lease_skipped = 0;
  for (uint32_t k = 0;; ++k) {
    const size_t first = f.parts.size();
    const bool ok = run_fused_slice(m, t0, f);
    // What this node finished, for the doorbell once the lease ends (Run()
    // stores it again before its own scan).
    if (cur_)
      cur_->ranks.job()->set_finished(
          static_cast<uint64_t>(wire::phase_value(m.slice, f.parts.back().phase)));
    if (!ok || !cur_ || k >= lease) break;
    // Only a DEM: nothing was drained, matched, moved or combined.
    if (f.parts.size() - first == 1) break;
    if (k == 0) {
      leasing_.store(1, std::memory_order_seq_cst);
      // For the whole lease, not per wait: ranks read nm_flags on every
      // post, and a word the node rewrote each slice would cost each post
      // a cache miss. (A rank ringing during a slice costs it a FUTEX_WAKE
      // nobody sleeps on.)
      lease_end.job = cur_->ranks.job();
      lease_end.job->set_nm_flag(kNmBellOnAnyBlock, true);
      lease_end.job->set_nm_flag(kNmBellOnPost, true);
    }
    // The next slice starts when every rank is blocked, or at the end of a
    // period in which something was posted (the strobe's own rules), or -
    // the node's own rule - as soon as a rank posts a send to a rank that
    // waits in MPI: it may be what that rank waits for (a halo exchange
    // where the sender still computes), and the period would only add
    // latency. A period that passes with nothing to do is skipped at the
    // cost of a timed-out futex wait, where the manager would strobe a
    // slice with nothing to do: a rank computing between communications no
    // longer shares its core with a round trip per period. The period is
    // the job's.
    const auto& job = cur_->ranks.job();
    const uint64_t slice_ns = job->spec().slice_ns;
    const std::chrono::nanoseconds period(slice_ns ? slice_ns : s.lease_ns);
    auto period_end = t0 + std::chrono::nanoseconds(f.at[first]) + period;
    if (lease_skipped >= wire::kMaxLeaseSkipped) break;  // the manager numbers on
    const uint32_t max_skipped = wire::kMaxLeaseSkipped - lease_skipped;
    uint32_t skipped = 0;
    bool blocked = false, posted = false, go = false;
    // With nothing to do, the node does not wake at each period's end only
    // to find nothing posted: it sleeps through the periods (at most
    // kNmBellOnWorkPeriods at a time) and the ranks ring for work a
    // period's slice would do (kNmBellOnWork). In bench/halo.c a step is
    // longer than a period, and that wake-up came in the middle of a
    // rank's computation, on its CPU, every step.
    // A ring that wakes the node from such a sleep (a poll, say) keeps it
    // on the period until the next slice, so that a polling rank does not
    // ring it awake at every poll.
    bool sleeping = idle_sleep_ && set_bell_on_work(true), rung_awake = false;
    // The ranks this slice completed usually post their next call within
    // microseconds: a ping-pong's reply, a blocking halo's second exchange,
    // the next iteration of an allreduce loop (poll_after_slice).
    bool poll = poll_after_slice();
    // The lease ends at a period's end, the first after its time ran out,
    // not within a period: within it, a post that should start the next
    // slice at once rings only a node on its lease (the ranks ring for
    // posts on a lease only), and the strobe sender would hear of it at
    // the period's end. It ends at once when a rank is gone: the job is
    // ending, and the manager decides what comes next.
    for (;;) {
      bool all = false, rung = false;
      auto until = period_end;
      if (sleeping) {
        // To a period's end, so that a lease still ends at one.
        for (uint32_t i = 1; i < kNmBellOnWorkPeriods && until < deadline; ++i) until += period;
      }
      const bool start =
          wait_on_bell(until, true, &all, sleeping ? &rung : nullptr, std::exchange(poll, false));
      const auto now = clock::now();
      // Each period that ended while the node slept passed with nothing to do.
      while (sleeping && period_end <= now && skipped < max_skipped) {
        ++skipped;
        period_end += period;
      }
      if (start) {
        go = true;
        blocked = all;
        posted = !all;
        break;
      }
      if (job->rank_gone()) break;
      if (sleeping) {
        if (rung) {
          // A post or a poll for this slice: back to the period, whose
          // end starts it (or a block, or a send to a waiting rank).
          sleeping = set_bell_on_work(false);
          rung_awake = true;
          continue;
        }
        if (!node_idle()) {
          // A post that missed the flag: the slice of the period's end the
          // node woke at (counted above as passed).
          sleeping = set_bell_on_work(false);
          if (skipped) --skipped;
          go = true;
          break;
        }
        if (now >= deadline || skipped >= max_skipped) break;
        continue;
      }
      if (!node_idle()) {
        go = true;
        break;
      }
      ++skipped;  // a period with nothing to do
      if (clock::now() >= deadline || skipped >= max_skipped) break;
      period_end += period;
      // Busy when the slice ended (a collective finishing its rounds, a
      // post just after it), idle now.
      if (idle_sleep_ && !rung_awake) sleeping = set_bell_on_work(true);
    }
    if (sleeping) set_bell_on_work(false);
    if (!go) {
      f.skipped = skipped;
      break;
    }
    // Read by the manager: the slice after this one began early, and why.
    f.parts.back().all_blocked = blocked;
    f.parts.back().post_started = posted;
    m.slice += 1 + skipped;
    lease_skipped += skipped;
    m.may_park = false;       // only the manager parks, after slices with nothing to do
    m.job_blocked = blocked;  // every rank of this one-node job is, or not
  }
  return f;
}

// Raises kNmBellOnWork (true when the node may sleep through the periods:
// nothing to do, looked at after the flag is up, so that a post before it
// shows in the rings) or lowers it (false).
bool Nic::set_bell_on_work(bool on) {
  const auto& job = cur_->ranks.job();
  if (!on) {
    job->set_nm_flag(kNmBellOnWork, false);
    return false;
  }
  // Ranks that never ring (no kNmBellOnBlock) could not wake it.
  if (!job->nm_flag(kNmBellOnBlock) || !node_idle()) return false;
  job->set_nm_flag(kNmBellOnWork, true);
  if (node_idle()) return true;
  job->set_nm_flag(kNmBellOnWork, false);
  return false;
}

bool Nic::poll_after_slice() {
  return poll_enabled_ && !gate_.realtime() && cur_ && cur_->ranks.job()->ranks_bound();
}

bool Nic::switched_on(const char* name) {
  const char* e = std::getenv(name);
  return !(e && std::string_view(e) == "off");
}

bool Nic::node_idle() {
  const auto& job = cur_->ranks.job();
  return job->rings_empty() && cur_->br.scheduler().in_flight() == 0 && cur_->coll.in_rounds() == 0;
}

bool Nic::run_fused_slice(wire::Strobe m, std::chrono::steady_clock::time_point t0,
                          wire::FusedReport& f) {
  using clock = std::chrono::steady_clock;
  using std::chrono::duration_cast;
  using std::chrono::nanoseconds;
  auto run = [&](Phase p) {
    m.phase = p;
    const auto start = clock::now();
    wire::Report r = on_strobe(m);
    const auto end = clock::now();
    r.slice = m.slice;
    r.phase = p;
    f.at.push_back(static_cast<uint64_t>(duration_cast<nanoseconds>(start - t0).count()));
    f.ns.push_back(static_cast<uint64_t>(duration_cast<nanoseconds>(end - start).count()));
    f.parts.push_back(std::move(r));
    return f.parts.back().errors == 0;
  };
  if (!run(Phase::dem)) return false;
  if (!cur_) return true;
  std::map<int32_t, uint64_t>& released = cur_->released;
  // The part just run, without a copy (f.parts grows with the next run).
  auto last = [&f] { return std::span<const wire::Report>(&f.parts.back(), 1); };
  const mm::DemPlan dem = mm::plan_after_dem(last(), self_, released);
  m.expect_batches = dem.expect_batches;
  m.coll_release = dem.coll_release;
  if (dem.run_msm) {
    if (!run(Phase::msm)) return false;
    const mm::MsmPlan msm = mm::plan_after_msm(last(), self_);
    m.expect_gets = msm.expect_gets;
    if (msm.chunks && !run(Phase::p2p)) return false;
  }
  if (dem.run_bbm && !run(Phase::bbm)) return false;
  if (dem.run_rm && !run(Phase::rm)) return false;
  for (const auto& r : dem.coll_release) released[r.context] = r.level;
  return true;
}

bool Nic::wait_all_blocked(std::chrono::steady_clock::time_point deadline) {
  bool all = false;
  return wait_on_bell(deadline, false, &all);
}

bool Nic::coll_posted_locally(std::vector<NmJob::PostedColl>& v) {
  if (v.empty()) return false;
  std::sort(v.begin(), v.end(), [](const NmJob::PostedColl& a, const NmJob::PostedColl& b) {
    return std::tie(a.context, a.seq, a.world) < std::tie(b.context, b.seq, b.world);
  });
  for (size_t i = 0; i < v.size();) {
    posted_by_.clear();
    size_t j = i;
    for (; j < v.size() && v[j].context == v[i].context && v[j].seq == v[i].seq; ++j)
      posted_by_.push_back(v[j].world);
    if (cur_->coll.posted_locally(v[i].context, v[i].seq, posted_by_)) return true;
    i = j;
  }
  return false;
}

bool Nic::wait_on_bell(std::chrono::steady_clock::time_point deadline, bool posts, bool* all,
                       bool* rung, bool poll) {
  using clock = std::chrono::steady_clock;
  const auto& job = cur_->ranks.job();
  // Ranks ring only when asked to (a fixed strobe never leases or holds).
  // On a lease (run_fused sets the flags) a rank that starts waiting rings
  // too if a send to it or a collective of its is posted already
  // (segment_slice_for_waiter: the look below would start the slice), and
  // so does a rank that posts a send to one that waits, or the last local
  // post of a collective; other posts ring nothing, so ranks that compute
  // and post pay no system call.
  if (!job->nm_flag(kNmBellOnBlock)) return false;
  std::atomic<uint32_t>* bell = job->bell();
  // The look below, again and again for a little while before the first
  // sleep: the next slice then starts without the wake-up of a sleeping
  // thread, which here is an interrupt to another vCPU (18-40 us) whenever
  // the ring comes from a rank on another CPU, and a context switch in
  // any case (3-6 us in this guest). Between looks the thread yields its
  // CPU to a rank bound there that does not wait (one this slice woke, or
  // one still posting), so that rank runs first; beside a rank that waits
  // it only pauses. A waiting rank spins on a lease and yields to this
  // thread whenever it sees a ring (rank.h, wait_until).
  const auto poll_end = poll ? clock::now() + kPollAfterSliceNs : clock::time_point{};
  for (;;) {
    // Read the bell, then look: a rank that blocks, or posts such a send,
    // after the look rings, which changes the word, and the futex does not
    // sleep.
    const uint32_t seen = bell->load(std::memory_order_seq_cst);
    *all = job->all_blocked();
    if (*all) return true;
    if (job->rank_gone()) return false;  // ending: the manager decides
    // The slice starts for a send that may complete a waiting rank, not
    // for any post: a rank posting several requests before it waits would
    // otherwise cut them into a slice each. And for a collective once its
    // last local member posted it, not before: a slice for the first
    // member's post could not complete it (on one node every member is
    // local), and the next post would have to wait for the slice's end.
    // The members may then compute with the collective in flight.
    if (posts) {
      posted_colls_.clear();
      if (job->scan_posted(&posted_colls_) || coll_posted_locally(posted_colls_)) return true;
    }
    if (rung && *rung) return false;  // asked for it (kNmBellOnWork): looked at, nothing to start
    const auto now = clock::now();
    if (now >= deadline) return false;
    if (now < poll_end) {
      // A rank bound to this CPU that waits has nothing to run (only a
      // slice can complete it): keep the CPU. Any other gets it back.
      if (job->cpu_waits(sched_getcpu()))
        __builtin_ia32_pause();
      else
        sched_yield();
      continue;
    }
    pick_priority();
    futex_wait(bell, seen,
               static_cast<uint64_t>(
                   std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now).count()));
    if (rung) *rung = bell->load(std::memory_order_seq_cst) != seen;
  }
}

// A multi-node job's slice ends with a microphase whose report the strobe
// sender needs for one thing only: whether it may start the next slice at
// once. Ranks woken by this microphase usually post their next call and
// block within microseconds; reporting first and ringing the doorbell after
// costs the manager two wake-ups and the doorbell thread one, per node and
// slice. So the strobe lets the node hold the report until its ranks are
// all blocked (the bell futex, as on a lease), bounded by the period's end:
// the report then carries all_blocked and no bell follows. Nothing waits on
// this node meanwhile: the last microphase is over everywhere once every
// node reported it, and this node's part, remote reads served included
// (kEvDmaServed), is done.
void Nic::hold_report(const wire::Strobe& s, wire::Report& rep) {
  using clock = std::chrono::steady_clock;
  if (!cur_ || cur_->ranks.job_id() != s.job) return;
  const auto t0 = clock::now();
  leasing_.store(1, std::memory_order_seq_cst);
  const bool all =
      wait_all_blocked(t0 + std::chrono::nanoseconds(std::min(s.hold_ns, wire::kMaxHoldNs)));
  leasing_.store(0, std::memory_order_seq_cst);
  // Left asleep when the report will say "all blocked": run() wakes it as
  // soon as a report does not.
  if (all) {
    doorbell_dozing_ = true;
  } else {
    doorbell_dozing_ = false;
    futex_wake_all(&leasing_);
  }
  rep.all_blocked = all;  // run() scans again if this stays the last part
  rep.waited_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0).count());
}

// Strobe::next_dem: the hold is over, so this node's ranks are all blocked
// (nothing more can be posted until a later microphase completes something)
// or the period is about to end (when the next strobe would come anyway).
// Either way the rings hold what the next slice's DEM strobe would find, and
// the node drains them now instead of waiting for that strobe: one round
// trip to the manager less per slice.
void Nic::run_next_dem(const wire::Strobe& s, wire::FusedReport& f) {
  using clock = std::chrono::steady_clock;
  wire::Strobe d;
  d.slice = s.slice + 1;
  d.phase = Phase::dem;
  d.job = s.job;
  d.held = s.held;
  const auto t0 = clock::now();
  wire::Report r = on_strobe(d);
  r.slice = d.slice;
  r.phase = Phase::dem;
  f.ns = {0, static_cast<uint64_t>(
                 std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0).count())};
  f.parts.push_back(std::move(r));
}

}  // namespace bcs::nm
