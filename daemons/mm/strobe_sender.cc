// The strobe sender (SS): one thread of the machine manager that owns the
// slice clock. For every slice it sends the strobe (= the DEM microstrobe),
// waits with compare-and-write until every node manager of the job reports
// the microphase done, and only then sends the next microstrobe. Microphases
// with nothing to do anywhere are skipped, as the paper allows: the DEM
// reports say whether there is anything to match (MSM), the MSM reports
// whether anything is scheduled (P2P), and the barrier levels whether a
// barrier can be released (BBM).
#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <map>

#include "manager.h"
#include "slice_plan.h"
#include "wire.h"

namespace bcs::mm {

using namespace std::chrono_literals;
using wire::Phase;

namespace {

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

// Sleeps until `t - spin_ns`, then spins to `t`. An absolute sleep wakes
// 20-30 us late here even with timer slack 1, and how late varies: that
// variation is the slice period's jitter. The strobe sender is the one
// thread that keeps time, so it pays a short, bounded spin per slice
// (--strobe-spin, default 30 us: 12% of a core at 250 us slices) for a
// period that is exact to a few microseconds.
//
// The sleep ends early when the manager wakes the strobe sender (shutdown,
// the job ended): with long slices (up to 10 s) a SIGTERM must not wait for
// the slice to run out. Returns false if woken early. The wake-up has its
// own condition variable, notified only on those rare events, so the node
// managers' traffic (which notifies cv_ all the time) never disturbs the
// clock. steady_clock is CLOCK_MONOTONIC, the clock of now_ns().
bool Manager::sleep_until_ns(uint64_t t, uint64_t spin_ns) {
  const uint64_t wake = t > spin_ns ? t - spin_ns : t;
  {
    std::unique_lock lk(wake_mu_);
    const uint64_t gen = wake_gen_;
    const auto deadline = std::chrono::steady_clock::time_point(std::chrono::nanoseconds(wake));
    if (wake_cv_.wait_until(lk, deadline, [&] { return wake_gen_ != gen; })) return false;
  }
  while (now_ns() < t) __builtin_ia32_pause();
  return true;
}

void Manager::wake_strobe_sender() {
  {
    std::lock_guard lk(wake_mu_);
    ++wake_gen_;
  }
  wake_cv_.notify_all();
}

void Manager::strobe_sender() {
  pthread_setname_np(pthread_self(), "bcs-ss");
  // Default timer slack makes an absolute sleep ~70 us late; 1 ns slack
  // brings it to ~25 us (NOTES.md), which matters for 100-250 us slices.
  prctl(PR_SET_TIMERSLACK, 1);
  // The slice clock must not queue behind other runnable threads (CFS can
  // delay a woken thread by hundreds of microseconds on a busy core). A
  // modest real-time priority lets it preempt; it never spins for more
  // than --strobe-spin per slice, far from the RT throttling limit.
  if (cfg_.realtime) {
    sched_param sp{};
    sp.sched_priority = 10;
    if (int e = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp))
      spdlog::info("strobe sender stays at normal priority (SCHED_FIFO: {})", strerror(e));
  }
  for (;;) {
    std::shared_ptr<Job> j;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      auto it = jobs_.find(queue_.front());
      queue_.pop_front();
      if (it == jobs_.end() || it->second->state == Job::State::done) continue;
      j = it->second;
    }
    if (start_job(j)) run_slices(j);
    // The next job starts only when every rank of this one is accounted for.
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return stopping_ || j->state == Job::State::done; });
    if (stopping_) return;
  }
}

bool Manager::start_job(std::shared_ptr<Job> j) {
  {
    std::lock_guard lk(mu_);
    j->state = Job::State::starting;
    v1::ManagerMsg m;
    auto* s = m.mutable_start_job();
    s->set_job_id(j->id);
    s->set_program(j->req.program());
    for (auto& a : j->req.args()) s->add_args(a);
    for (auto& e : j->env) s->add_env(e);
    s->set_cwd(j->req.cwd());
    s->set_nranks(j->req.nranks());
    for (auto n : j->rank_node) s->add_rank_node(n);
    s->mutable_slice()->set_slice_ns(j->slice_ns);
    s->mutable_slice()->set_chunk_bytes(j->chunk_bytes);
    s->set_uid(j->uid);
    s->set_gid(j->gid);
    for (uint32_t n : j->nodes)
      if (auto it = nodes_.find(n); it != nodes_.end()) queue_locked(it->second, m);
  }
  flush();
  std::unique_lock lk(mu_);
  const bool answered = cv_.wait_for(lk, 30s, [&] {
    return stopping_ || j->state == Job::State::done || j->started.size() == j->nodes.size();
  });
  if (stopping_ || j->state == Job::State::done) return false;
  if (!answered) {
    fail_job_locked(*j, 1, "the node managers did not start the job within 30 s");
    for (uint32_t r = 0; r < j->rank_node.size(); ++r) {
      bool started =
          std::find(j->started.begin(), j->started.end(), j->rank_node[r]) != j->started.end();
      if (!started && !j->rank_done[r]) {
        j->rank_done[r] = true;
        j->ranks_done++;
      }
    }
    if (j->ranks_done == j->rank_node.size()) finish_job_locked(*j);
    lk.unlock();
    cv_.notify_all();
    flush();
    return false;
  }
  if (j->failed) return false;
  j->state = Job::State::running;
  spdlog::info("job {} running, slice {} us, chunk budget {} bytes", j->id, j->slice_ns / 1000,
               j->chunk_bytes);
  return true;
}

bool Manager::wait_phase(Job& j, uint64_t slice, uint8_t phase, std::vector<core::VarReplica>* snap,
                         uint64_t* retries) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t value = wire::phase_value(slice, static_cast<Phase>(phase));
  for (;;) {
    uint64_t r = 0;
    auto s = fabric_.compare_and_write(j.nodes, wire::kVarPhase, core::Cmp::ge, value,
                                       core::Fabric::kNoWrite, {}, std::chrono::nanoseconds(50ms),
                                       snap, &r);
    *retries += r;
    if (s == core::Status::ok) return true;
    if (s == core::Status::closed) return false;
    if (s != core::Status::timeout) {
      spdlog::error("slice {}: waiting for {}: {}", slice,
                    wire::phase_name(static_cast<Phase>(phase)), core::status_str(s));
      return false;
    }
    std::lock_guard lk(mu_);
    if (stopping_) return false;
    for (uint32_t n : j.nodes)
      if (!nodes_.count(n)) return false;  // node_lost() already failed the job
    if (std::chrono::steady_clock::now() - t0 > cfg_.phase_watchdog) {
      std::string late;
      for (uint32_t n : j.nodes)
        if (fabric_.var_get(wire::kVarPhase, n).value < value) late += " " + std::to_string(n);
      fail_job_locked(j, 1,
                      std::string("microphase ") + wire::phase_name(static_cast<Phase>(phase)) +
                          " of slice " + std::to_string(slice) + " did not complete on node(s)" +
                          late);
      return false;
    }
  }
}

void Manager::run_slices(std::shared_ptr<Job> jp) {
  Job& j = *jp;
  const uint64_t slice_ns = j.slice_ns;
  // Never spin for more than a quarter of the job's slice.
  const uint64_t spin_ns = std::min(cfg_.strobe_spin_ns, slice_ns / 4);
  const uint32_t max_node = *std::max_element(j.nodes.begin(), j.nodes.end());
  uint64_t next = now_ns();
  uint64_t prev_start = 0;
  std::map<int32_t, uint64_t> released;  // per context: collectives released so far
  std::vector<core::VarReplica> snap;
  bool ok = true;

  // A node that failed its own part of a microphase (a batch or bundle that
  // never came or did not decode, a remote read that failed) lost work the
  // ranks wait for: the job fails at once, naming the node, the microphase
  // and the cause, instead of hanging until the watchdog.
  auto node_failed = [&](uint64_t slice, Phase phase) {
    for (const auto& v : snap) {
      const auto rep = wire::decode_report(v.attachment);
      if (rep.errors == 0) continue;
      std::lock_guard lk(mu_);
      const auto it = nodes_.find(v.node);
      const std::string who =
          it == nodes_.end() ? "node " + std::to_string(v.node) : "node " + it->second->name;
      fail_job_locked(j, 1,
                      who + ": microphase " + wire::phase_name(phase) + " of slice " +
                          std::to_string(slice) + " failed: " + rep.error);
      return true;
    }
    return false;
  };

  auto strobe = [&](const wire::Strobe& s) {
    auto st = fabric_.xfer_and_signal(j.nodes, wire::kEvStrobe, wire::encode(s));
    if (st == core::Status::closed) return false;  // shutting down: nothing to report
    if (st != core::Status::ok) {
      spdlog::error("slice {}: {} microstrobe: {}", s.slice, wire::phase_name(s.phase),
                    core::status_str(st));
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
    if (!sleep_until_ns(next, spin_ns)) continue;  // woken: look at the job again
    const uint64_t start = now_ns();
    monitor::SliceRecord rec;
    rec.slice = ++slice_;
    rec.start_ns = start;
    rec.period_ns = prev_start ? start - prev_start : 0;
    rec.late_ns = start - next;
    prev_start = start;

    // DEM (the strobe itself).
    wire::Strobe s;
    s.slice = rec.slice;
    s.job = j.id;
    s.phase = Phase::dem;
    uint64_t t = now_ns();
    if (!(ok = strobe(s) && wait_phase(j, s.slice, 0, &snap, &rec.retries[0]))) break;
    if (node_failed(s.slice, Phase::dem)) {
      ok = false;
      break;
    }
    rec.phase_ns[0] = now_ns() - t;
    std::vector<wire::Report> reps;
    for (auto& v : snap) reps.push_back(wire::decode_report(v.attachment));
    const DemPlan dem = plan_after_dem(reps, max_node, released);
    s.expect_batches = dem.expect_batches;
    s.coll_release = dem.coll_release;
    rec.descriptors = dem.drained + dem.coll_drained;
    rec.coll_descriptors = dem.coll_drained;

    // MSM: only if something was posted or transfers are still being chunked.
    uint32_t chunks = 0;
    if (dem.run_msm) {
      s.phase = Phase::msm;
      t = now_ns();
      if (!(ok = strobe(s) && wait_phase(j, s.slice, 1, &snap, &rec.retries[1]))) break;
      if (node_failed(s.slice, Phase::msm)) {
      ok = false;
      break;
    }
      rec.phase_ns[1] = now_ns() - t;
      reps.clear();
      for (auto& v : snap) reps.push_back(wire::decode_report(v.attachment));
      MsmPlan msm = plan_after_msm(reps, max_node);
      s.expect_gets = std::move(msm.expect_gets);
      chunks = msm.chunks;
      rec.chunks = chunks;
    }
    // P2P: only if the MSM scheduled chunks somewhere.
    if (chunks) {
      s.phase = Phase::p2p;
      t = now_ns();
      if (!(ok = strobe(s) && wait_phase(j, s.slice, 2, &snap, &rec.retries[2]))) break;
      if (node_failed(s.slice, Phase::p2p)) {
      ok = false;
      break;
    }
      rec.phase_ns[2] = now_ns() - t;
      for (auto& v : snap) rec.bytes += wire::decode_report(v.attachment).bytes;
    }
    // BBM (collective helper) and RM (reduce helper): collectives that every
    // member has posted; each microphase only if one of its kinds is due.
    for (auto [phase, due] : {std::pair{Phase::bbm, dem.run_bbm}, std::pair{Phase::rm, dem.run_rm}}) {
      if (!due) continue;
      const auto k = static_cast<uint8_t>(phase);
      s.phase = phase;
      t = now_ns();
      if (!(ok = strobe(s) && wait_phase(j, s.slice, k, &snap, &rec.retries[k]))) break;
      if (node_failed(s.slice, phase)) {
        ok = false;
        break;
      }
      rec.phase_ns[k] = now_ns() - t;
      for (auto& v : snap) {
        auto rep = wire::decode_report(v.attachment);
        rec.collectives += rep.collectives;
        rec.coll_bytes += rep.bytes;
      }
    }
    if (!ok) break;
    for (const auto& r : s.coll_release) released[r.context] = r.level;
    emds_.record(rec);

    // Next strobe one slice after this one; if this slice overran, at once
    // (no burst of catch-up slices).
    next += slice_ns;
    const uint64_t now = now_ns();
    if (next < now) next = now;
  }
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
}

}  // namespace bcs::mm
