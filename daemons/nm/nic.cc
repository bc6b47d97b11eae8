// The strobe receiver: waits for (micro)strobes, runs the helper role of
// each microphase and reports to the MM. The roles live in roles/.
#include "nic.h"

#include "describe.h"
#include "sched_hint.h"
#include "slice_plan.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <tuple>

namespace bcs::nm {

using namespace std::chrono_literals;
using wire::Phase;

// ------------------------------------------------------------ the job's ranks
JobRanks::JobRanks(std::shared_ptr<NmJob> j) : job_(std::move(j)) {
  const auto& rn = job_->spec().rank_node;
  nnodes_ = rn.empty() ? 0 : *std::max_element(rn.begin(), rn.end()) + 1;
  for (auto& r : job_->ranks()) local_.push_back(r->world_rank);
  std::sort(local_.begin(), local_.end());
}

int32_t JobRanks::read(int32_t r, uint64_t addr, void* dst, size_t len) {
  return job_->is_local(r) ? job_->read(r, addr, dst, len) : bcs_err_internal;
}

int32_t JobRanks::write(int32_t r, uint64_t addr, const void* src, size_t len) {
  return job_->is_local(r) ? job_->write(r, addr, src, len) : bcs_err_internal;
}

int32_t JobRanks::read_layout(int32_t r, uint64_t base, const Layout& l, uint64_t off, void* dst,
                              size_t len) {
  return job_->is_local(r) ? job_->cma_layout(r, base, l, off, dst, len, false) : bcs_err_internal;
}

int32_t JobRanks::write_layout(int32_t r, uint64_t base, const Layout& l, uint64_t off,
                               const void* src, size_t len) {
  return job_->is_local(r) ? job_->cma_layout(r, base, l, off, const_cast<void*>(src), len, true)
                           : bcs_err_internal;
}

void JobRanks::complete(int32_t r, uint32_t request, int32_t error) {
  complete_status(r, request, error, r, 0, 0, 0);
}

bool JobRanks::land(int32_t r, uint32_t request, const void* src, size_t len) {
  if (!job_->is_local(r)) return false;
  RankView v = job_->view_of(r);
  return request_land(v, request, src, len);
}

void JobRanks::complete_status(int32_t r, uint32_t request, int32_t error, int32_t source,
                               int32_t tag, uint64_t bytes, uint32_t found, uint64_t seq) {
  if (!job_->is_local(r)) return;
  RankView v = job_->view_of(r);
  if (request >= v.request_slots) return;
  request_complete(v, request, error, source, tag, bytes, found, seq, job_->job_slice());
}

// ------------------------------------------------------------ strobe receiver
Nic::Nic(core::Fabric& fabric, uint32_t self, std::chrono::nanoseconds liveness, bool realtime)
    : fabric_(fabric),
      self_(self),
      liveness_(liveness),
      realtime_(realtime),
      may_realtime_(realtime),
      doorbell_(fabric, epoch_, parked_, leasing_, realtime) {
  if (const char* e = std::getenv("BCS_EMDS")) local_emds_ = std::string(e) != "off";
  // Remote reads are served from inside progress, whatever this node is
  // waiting for (two nodes may read from each other in one microphase).
  // Each one served is also signalled on kEvDmaServed, which the P2P
  // microphase counts against the number the microstrobe announced.
  fabric_.set_handler(wire::kEvDmaGet, [this](core::Message&& m) {
    std::shared_ptr<NmJob> job;
    {
      std::lock_guard lk(job_mu_);
      job = pending_job_;
    }
    std::unique_ptr<JobRanks> ranks;
    if (job) ranks = std::make_unique<JobRanks>(job);
    // Served on whichever thread progresses, so the reply's send is bound
    // to the job it answers for, not to the strobe receiver's state.
    struct ReplyNet final : Net {
      Nic& nic;
      const NmJob* job;
      ReplyNet(Nic& n, const NmJob* j) : nic(n), job(j) {}
      core::Status send(uint32_t node, core::EventId ev, std::span<const uint8_t> b) override {
        return nic.send_for(job, node, ev, b);
      }
      core::Status wait(core::EventId, core::Message*, std::chrono::nanoseconds) override {
        return core::Status::invalid;  // serving a read never waits
      }
    } reply_net(*this, job.get());
    DmaHelper::serve(m, ranks.get(), reply_net);
    fabric_.xfer_and_signal(self_, wire::kEvDmaServed, {});
  });
}

Nic::~Nic() { fabric_.set_handler(wire::kEvDmaGet, nullptr); }

// A role's send, like its wait below, rides out a peer that is stopped (a
// debugger, a VM pause) up to the liveness timeout: a sender whose batch
// the stopped peer cannot take until it runs again must not end the job
// after a few seconds. It gives up as soon as the job it sends for ends.
core::Status Nic::send(uint32_t node, core::EventId ev, std::span<const uint8_t> bytes) {
  return send_for(running_job(), node, ev, bytes);
}

core::Status Nic::send_for(const NmJob* job, uint32_t node, core::EventId ev,
                           std::span<const uint8_t> bytes) {
  return fabric_.xfer_and_signal(node, ev, bytes, limit_for(job));
}

core::SendLimit Nic::limit_for(const NmJob* job) {
  return {liveness_, [this, job] { return job_ended(job); }};
}

const NmJob* Nic::running_job() const { return st_ ? st_->ranks.job().get() : nullptr; }

bool Nic::job_ended(const NmJob* job) {
  std::lock_guard lk(job_mu_);
  return job && pending_job_.get() != job;
}

// A role waits for a peer's data up to the liveness timeout (a stopped or
// slow peer delays the job, it does not kill it), but no longer than the
// job lasts: when the manager ends the job (a peer died, the watchdog
// fired, a rank failed), the wait ends within a step.
core::Status Nic::wait(core::EventId ev, core::Message* m, std::chrono::nanoseconds limit) {
  using namespace std::chrono;
  const auto deadline = steady_clock::now() + std::min(limit, liveness_);
  for (;;) {
    const auto left = deadline - steady_clock::now();
    const auto step = std::min<nanoseconds>(left, milliseconds(100));
    const auto s = fabric_.test_event(ev, m, step < nanoseconds(0) ? nanoseconds(0) : step);
    if (s != core::Status::timeout || steady_clock::now() >= deadline) return s;
    if (job_ended(running_job())) return core::Status::closed;
  }
}

void Nic::set_job(std::shared_ptr<NmJob> job) {
  doorbell_.set_job(job);
  // The ranks just forked exec and load on the CPUs they are bound to,
  // and the job's first strobe finds the strobe receiver at normal
  // priority, queued behind them: the first DEM took 0.6-3.5 ms
  // (bench/strobe.sh, 250 us slices). So a job of bound ranks starts with
  // it at real time, as if a rank computed (pick_priority), raised from
  // here since it sleeps until that strobe. The strobe receiver applies it
  // again itself, so that a change of its own racing this one cannot win.
  const bool bound = job && std::all_of(job->ranks().begin(), job->ranks().end(),
                                        [](const auto& r) { return r->cpu >= 0; });
  {
    std::lock_guard lk(job_mu_);
    pending_job_ = std::move(job);
  }
  if (bound && may_realtime_) {
    const pid_t tid = sr_tid_.load();
    if (tid != 0 && sched_join_wake_path(true, tid)) job_starting_.store(true);
    core::sched_policy_changed();
  }
}

void Nic::sync_job() {
  std::shared_ptr<NmJob> j;
  {
    std::lock_guard lk(job_mu_);
    j = pending_job_;
  }
  if (!j) {
    st_.reset();
  } else if (!st_ || st_->ranks.job() != j) {
    st_ = std::make_unique<NodeJobState>(j, self_, liveness_);
  }
}

void Nic::run() {
  pthread_setname_np(pthread_self(), "bcs-sr");
  sr_tid_.store(static_cast<pid_t>(::gettid()));
  // UCX's async thread wakes this thread for each strobe and report of a
  // peer (sched_hint.h): real time when permitted, always. This thread
  // itself starts at normal priority with the short slice; pick_priority
  // raises it while a rank computes.
  sched_join_wake_path(false);
  for (int tid : fabric_.ucx_async_threads()) sched_join_wake_path(realtime_, tid);
  core::sched_policy_changed();
  for (;;) {
    answer_describe();
    pick_priority();
    core::Message m;
    // The timeout only bounds how long a finished job's state lingers when no
    // strobes come; it is not a poll (test_event sleeps on the UCX event fd).
    auto s = fabric_.test_event(wire::kEvStrobe, &m, std::chrono::nanoseconds(200ms));
    if (s == core::Status::closed) return;
    if (s == core::Status::timeout) {
      sync_job();
      continue;
    }
    if (s != core::Status::ok) {
      spdlog::error("strobe receiver: {}", core::status_str(s));
      return;
    }
    wire::FusedReport f;
    wire::Strobe strobe;
    try {
      strobe = wire::decode_strobe(m.data);
      if (strobe.fused && strobe.phase == Phase::dem)
        f = run_fused(strobe);
      else
        f.parts.push_back(on_strobe(strobe));
    } catch (const std::exception& e) {
      spdlog::error("strobe receiver: {}", e.what());
      f.parts.emplace_back().fail(e.what());
    }
    if (!strobe.fused) {
      wire::Report& last = f.parts.back();
      last.phase = strobe.phase;
      last.slice = strobe.slice;
      if (strobe.hold_ns && last.errors == 0) hold_report(strobe, last);
      if (strobe.next_dem && last.errors == 0) run_next_dem(strobe, f);
    }
    wire::Report& rep = f.parts.back();
    // A fused strobe's parts carry their own slices (a lease runs several).
    if (rep.slice < strobe.slice) rep.slice = strobe.slice;
    const int64_t done = wire::phase_value(rep.slice, rep.phase);
    // The epoch first, then the scan (see Doorbell::check): a rank this
    // scan misses blocks after the store, and its bell carries this epoch.
    epoch_.store(static_cast<uint64_t>(done), std::memory_order_seq_cst);
    rep.all_blocked = !st_ || st_->ranks.job()->all_blocked();
    // The doorbell is needed again once a report leaves ranks to block
    // later, or parks the node (posts must ring).
    if (doorbell_dozing_ && (!rep.all_blocked || rep.parked)) {
      doorbell_dozing_ = false;
      futex_wake_all(&leasing_);
    }
    // A microstrobe that asks for the next DEM gets a fused report, with
    // one part only when this one failed (the manager decodes it so).
    auto enc = f.parts.size() > 1 || strobe.fused || strobe.next_dem ? wire::encode(f)
                                                                     : wire::encode(rep);
    report(strobe, done, enc);
  }
}

void Nic::answer_describe() {
  const uint64_t job = describe_job_.exchange(0, std::memory_order_relaxed);
  if (!job || !described_) return;
  const bool ours = st_ && st_->ranks.job_id() == job;
  described_(job, ours ? describe_waits(st_->ranks, st_->br.matcher(), st_->coll) : std::string());
}

// The report is the only way the strobe sender learns that this node
// finished the microphase: one that is lost leaves it waiting until its
// phase watchdog (minutes), the job hung with nothing said (once in CI: a
// job's second DEM never completed, no daemon said a word). So the send
// may wait for a slow or stopped manager up to the liveness timeout, as
// the roles' sends to their peers do. If it still fails (the fabric gave
// the endpoint up), it is said here, and tried once more on a fresh
// endpoint (the old one's ordered stream is finished); if that fails too,
// the manager hears it on the control stream and ends the job naming
// this node.
Nic::ReportFault Nic::report_fault() {
  const char* f = std::getenv("BCS_TEST_FAULT");
  if (!f) return ReportFault::none;
  if (std::string_view(f) == "report-endpoint-lost") return ReportFault::endpoint_lost;
  if (std::string_view(f) == "report-lost") return ReportFault::lost;
  return ReportFault::none;
}

void Nic::report(const wire::Strobe& s, int64_t done, std::span<const uint8_t> enc) {
  const uint64_t job = s.job;
  if (report_fault_ != ReportFault::none && ++reports_ == 5) fabric_.disconnect(0);  // test only
  const core::SendLimit limit = limit_for(running_job());
  core::Status st = fabric_.var_set(wire::kVarPhase, done, {0}, enc, limit);
  if (st == core::Status::ok || st == core::Status::closed) return;
  auto cause = [&] {
    const std::string e = fabric_.last_error();
    return std::string(core::status_str(st)) + (e.empty() ? "" : " (" + e + ")");
  };
  std::string why = fmt::format("its report of {} of slice {} did not reach the manager: {}",
                                wire::phase_name(s.phase), s.slice, cause());
  if (report_fault_ != ReportFault::lost && reconnect_manager_) {
    spdlog::error("job {}: {}; trying again on a new endpoint", job, why);
    if (reconnect_manager_()) {
      st = fabric_.var_set(wire::kVarPhase, done, {0}, enc, limit);
      if (st == core::Status::ok) {
        spdlog::warn("job {}: the report of {} of slice {} went on a new endpoint", job,
                     wire::phase_name(s.phase), s.slice);
        return;
      }
      why += "; again on a new endpoint: " + cause();
    }
  }
  spdlog::error("job {}: {}", job, why);
  if (report_lost_) report_lost_(job, why);
}

// Parking: the node tells the strobe sender it has nothing to do, and asks
// its ranks to ring the doorbell when they post (kNmParked). If every node
// parks, the strobe sender stops strobing until one rings: an idle job costs
// the daemons nothing. The flag is set before the rings are read again, and
// a rank publishes its head before it reads the flag, so a post racing with
// parking is either seen here (no parking) or rings.
void Nic::park_if_idle(uint64_t slice, wire::Report& rep) {
  const auto& job = st_->ranks.job();
  if (job->spec().fixed_strobe) return;
  if (rep.drained || rep.coll_drained || rep.transfers_pending) return;
  for (const auto& l : rep.coll)
    if (l.busy_bbm || l.busy_rm) return;  // a collective still in its rounds
  parked_.store(static_cast<uint64_t>(wire::phase_value(slice, Phase::dem)),
                std::memory_order_seq_cst);
  // Without the barrier a post may go unrung: stay on the strobe.
  if (job->set_nm_flag(kNmParked, true) && job->rings_empty()) {
    rep.parked = true;
  } else {
    unpark();
  }
}

void Nic::unpark() {
  if (!parked_.load(std::memory_order_relaxed)) return;
  parked_.store(0, std::memory_order_seq_cst);
  if (st_) st_->ranks.job()->set_nm_flag(kNmParked, false);
}

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
    epoch_.store(static_cast<uint64_t>(wire::phase_value(m.slice, f.parts.back().phase)),
                 std::memory_order_seq_cst);
    if (!ok || !st_ || k >= lease) break;
    // Only a DEM: nothing was drained, matched, moved or combined.
    if (f.parts.size() - first == 1) break;
    if (k == 0) {
      leasing_.store(1, std::memory_order_seq_cst);
      // For the whole lease, not per wait: ranks read nm_flags on every
      // post, and a word the node rewrote each slice would cost each post
      // a cache miss. (A rank ringing during a slice costs it a FUTEX_WAKE
      // nobody sleeps on.)
      lease_end.job = st_->ranks.job();
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
    const auto& job = st_->ranks.job();
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
  const auto& job = st_->ranks.job();
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

bool Nic::poll_enabled() {
  const char* e = std::getenv("BCS_NM_POLL");
  return !(e && std::string_view(e) == "off");
}

bool Nic::poll_after_slice() {
  return poll_enabled_ && !gate_.realtime() && st_ && st_->ranks.job()->ranks_bound();
}

bool Nic::idle_sleep_enabled() {
  const char* e = std::getenv("BCS_IDLE_SLEEP");
  return !(e && std::string_view(e) == "off");
}

bool Nic::node_idle() {
  const auto& job = st_->ranks.job();
  return job->rings_empty() && st_->br.scheduler().in_flight() == 0 && st_->coll.in_rounds() == 0;
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
  if (!st_) return true;
  std::map<int32_t, uint64_t>& released = st_->released;
  const mm::DemPlan dem = mm::plan_after_dem({f.parts.back()}, self_, released);
  m.expect_batches = dem.expect_batches;
  m.coll_release = dem.coll_release;
  if (dem.run_msm) {
    if (!run(Phase::msm)) return false;
    const mm::MsmPlan msm = mm::plan_after_msm({f.parts.back()}, self_);
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
    if (st_->coll.posted_locally(v[i].context, v[i].seq, posted_by_)) return true;
    i = j;
  }
  return false;
}

// The strobe receiver's wake-up (a strobe, a bell) starts or carries every
// slice. While a local rank computes, it wakes on a CPU that rank holds,
// and at normal priority it waited behind it for most of the rank's step
// even with the short slice (bench/strobe.sh's communicating job: periods'
// p99 1.2-1.7 ms at 250 us slices; `perf sched`: 0.18 ms on average, up to
// 1.8 ms). At SCHED_FIFO it preempts the rank at once. But while the ranks
// only wait in MPI, real time costs: each wake-up then goes to the CPU
// this thread last ran on, through an interrupt, instead of beside its
// waker, and the 8-byte ping-pong took 46-50 instead of 39-46 us on one
// node manager, 199-205 instead of 137-181 us on two. So real time only
// around ranks that compute (sched_hint.h, RealtimeGate), switched when
// that changes (a sched_setattr, about 1.2 us here).
void Nic::pick_priority() {
  if (!realtime_) return;
  const bool starting = job_starting_.exchange(false);  // set_job raised it
  const uint64_t now = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
  const bool computes =
      starting || (st_ && st_->ranks.job()->a_rank_computes(now, kComputingNs));
  const bool want = gate_.want(computes, now, [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(t.tv_nsec);
  });
  if (want == gate_.realtime() && !starting) return;
  const bool rt = sched_join_wake_path(want);
  core::sched_policy_changed();
  gate_.applied(rt);
  if (want && !rt) realtime_ = false;  // refused (no CAP_SYS_NICE): stay normal
}

bool Nic::wait_on_bell(std::chrono::steady_clock::time_point deadline, bool posts, bool* all,
                       bool* rung, bool poll) {
  using clock = std::chrono::steady_clock;
  const auto& job = st_->ranks.job();
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
  if (!st_ || st_->ranks.job_id() != s.job) return;
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

wire::Report Nic::on_strobe(const wire::Strobe& s) {
  const auto t0 = std::chrono::steady_clock::now();
  // What senders wrote of this microphase's copy orders (NmJob::post_copy).
  const NmJob* before = running_job();
  const uint64_t shared0 = before ? before->shared_bytes() : 0;
  const uint64_t second0 = before ? before->second_bytes() : 0;
  wire::Report r = run_roles(s);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
  if (st_ && local_emds_) {  // a microphase of this node's job: what it did, for the local EMDS
    monitor::LocalSliceRecord a;
    a.descriptors = r.drained + r.coll_drained;
    a.coll_descriptors = r.coll_drained;
    a.matches = r.matches;
    a.chunks = r.chunks + r.delivered;
    a.bytes = r.bytes;
    a.collectives = r.collectives;
    const auto& job = st_->ranks.job();
    a.blocked = job->blocked_count();
    a.nlocal = job->nlocal_ranks();
    if (job.get() == before) {
      a.sender_bytes = std::min(r.bytes, job->shared_bytes() - shared0);
      a.second_thread_bytes = std::min(r.bytes - a.sender_bytes, job->second_bytes() - second0);
    }
    const auto at = std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
    local_.note(s.slice, static_cast<int>(s.phase), static_cast<uint64_t>(at), static_cast<uint64_t>(ns), a);
  }
  return r;
}

wire::Report Nic::run_roles(const wire::Strobe& s) {
  if (s.phase == Phase::dem) sync_job();
  // A strobe for a job this node does not run (it ended here already, or the
  // job has no rank here) still needs a report, or the MM would wait.
  if (st_ && st_->ranks.job_id() != s.job && s.phase == Phase::dem) st_.reset();
  NodeJobState* st = st_.get();
  switch (s.phase) {
    case Phase::dem: {
      unpark();
      if (!st) {
        wire::Report rep;
        rep.parked = true;  // no rank here: nothing can post
        return rep;
      }
      // Sends to receivers at their unexpected limit stay in the rings: the
      // ones the strobe names (any node's, from its last MSM) and this
      // node's own as they are now.
      std::vector<int32_t> held = st->br.full_receivers(st->ranks);
      held.insert(held.end(), s.held.begin(), s.held.end());
      st->bs.hold_sends_to(std::move(held), s.job_blocked);
      st->ranks.job()->begin_slice(s.slice);
      auto rep = st->bs.run(s.slice, st->ranks, *this, st->br, st->coll);
      rep.transfers_pending = static_cast<uint32_t>(st->br.scheduler().in_flight());
      rep.moving += static_cast<uint32_t>(st->br.unexpected_moving());
      if (s.may_park) park_if_idle(s.slice, rep);
      return rep;
    }
    case Phase::msm:
      if (!st) {
        BufferReceiver drain(self_, 1);
        return drain.run(s, nullptr, *this);
      }
      {
        wire::Report rep = st->br.run(s, &st->ranks, *this);
        DmaHelper::deliver_inline(st->ranks, st->br, rep);
        return rep;
      }
    case Phase::p2p:
      if (!st) {
        DmaHelper idle(self_);
        BufferReceiver none(self_, 1);
        return idle.run(s, nullptr, *this, none);
      }
      return st->dh.run(s, &st->ranks, *this, st->br);
    case Phase::bbm:
      return st ? CollectiveHelper::run(s, CollPhase::bbm, st->coll, st->ranks, *this)
                : wire::Report{};
    case Phase::rm:
      return st ? CollectiveHelper::run(s, CollPhase::rm, st->coll, st->ranks, *this)
                : wire::Report{};
  }
  return {};
}

}  // namespace bcs::nm
