// The strobe receiver: waits for (micro)strobes, runs the helper role of
// each microphase and reports to the MM. The roles live in roles/.
#include "nic.h"

#include "describe.h"
#include "sched_hint.h"

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
      doorbell_(fabric, parked_, leasing_, realtime) {
  if (const char* e = std::getenv("BCS_EMDS")) local_emds_ = std::string(e) != "off";
  // Remote reads are served from inside progress, whatever this node is
  // waiting for (two nodes may read from each other in one microphase).
  // Each one served is also signalled on kEvDmaServed, which the P2P
  // microphase counts against the number the microstrobe announced.
  fabric_.set_handler(wire::kEvDmaGet, [this](core::Message&& m) {
    // The job the read names, among those held: not necessarily the one
    // whose slice runs now (held_states.h, dma_get_job).
    std::shared_ptr<NmJob> job;
    {
      std::lock_guard lk(job_mu_);
      if (auto it = jobs_.find(dma_get_job(m)); it != jobs_.end()) job = it->second;
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

const NmJob* Nic::running_job() const { return cur_ ? cur_->ranks.job().get() : nullptr; }

bool Nic::job_ended(const NmJob* job) {
  if (!job) return false;
  std::lock_guard lk(job_mu_);
  auto it = jobs_.find(job->id());
  return it == jobs_.end() || it->second.get() != job;
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
  if (job) {
    hold_job(std::move(job));
    return;
  }
  std::vector<uint64_t> ids;
  {
    std::lock_guard lk(job_mu_);
    for (const auto& [id, j] : jobs_) ids.push_back(id);
  }
  for (uint64_t id : ids) release_job(id);
}

void Nic::release_job(uint64_t id) {
  std::shared_ptr<NmJob> next;
  bool was_active = false;
  {
    std::lock_guard lk(job_mu_);
    if (!jobs_.erase(id)) return;
    was_active = active_ == id;
    if (was_active) {
      // The doorbell goes on with another held job, if any, until the
      // next slice says which runs (sync_job).
      next = jobs_.empty() ? nullptr : jobs_.begin()->second;
      active_ = next ? next->id() : 0;
    }
  }
  if (was_active) doorbell_.set_job(std::move(next));
}

void Nic::hold_job(std::shared_ptr<NmJob> job) {
  bool watch = false;
  {
    std::lock_guard lk(job_mu_);
    watch = active_ == 0;  // the doorbell watches the first job held
    if (watch) active_ = job->id();
  }
  if (watch) doorbell_.set_job(job);
  // The ranks just forked exec and load on the CPUs they are bound to,
  // and the job's first strobe finds the strobe receiver at normal
  // priority, queued behind them: the first DEM took 0.6-3.5 ms
  // (bench/strobe.sh, 250 us slices). So a job of bound ranks starts with
  // it at real time, as if a rank computed (pick_priority), raised from
  // here since it sleeps until that strobe. The strobe receiver applies it
  // again itself, so that a change of its own racing this one cannot win.
  const bool bound = job->ranks_bound();
  {
    std::lock_guard lk(job_mu_);
    jobs_[job->id()] = std::move(job);
  }
  if (bound && may_realtime_) {
    const pid_t tid = sr_tid_.load();
    if (tid != 0 && sched_join_wake_path(true, tid)) job_starting_.store(true);
    core::sched_policy_changed();
  }
}

void Nic::sync_job(uint64_t job) {
  std::map<uint64_t, std::shared_ptr<NmJob>> held;
  {
    std::lock_guard lk(job_mu_);
    held = jobs_;
  }
  // A state is its job's while the same job (not a new one of the same
  // id) is held.
  auto still_held = [&](uint64_t id, const NodeJobState& st) {
    auto it = held.find(id);
    return it != held.end() && it->second == st.ranks.job();
  };
  NodeJobState* from = cur_;
  if (from && !still_held(from->ranks.job_id(), *from)) from = nullptr;  // gone with its job
  if (job == 0) {
    // No strobe for a while: states of jobs released go, and a job held
    // has its state before its first slice (so DescribeJob answers for
    // it); the current one stays.
    states_.prune(still_held);
    for (const auto& [id, j] : held)
      states_.hold(id, [&] { return std::make_unique<NodeJobState>(j, self_, liveness_); });
    cur_ = from;
    return;
  }
  auto it = held.find(job);
  cur_ = states_.begin_slice(job, it != held.end(), still_held, [&] {
    return std::make_unique<NodeJobState>(it->second, self_, liveness_);
  });
  if (from && cur_ && from != cur_) switch_to(from, cur_);
}

void Nic::switch_to(NodeJobState* from, NodeJobState* to) {
  // parked_ and the kNmParked flag are the job left's (nic.h).
  if (parked_.load(std::memory_order_relaxed)) {
    parked_.store(0, std::memory_order_seq_cst);
    from->ranks.job()->set_nm_flag(kNmParked, false);
  }
  // The doorbell watches the job that runs now.
  {
    std::lock_guard lk(job_mu_);
    active_ = to->ranks.job_id();
  }
  doorbell_.set_job(to->ranks.job());
  if (doorbell_dozing_) {
    doorbell_dozing_ = false;
    futex_wake_all(&leasing_);
  }
}

void Nic::run() {
  pthread_setname_np(pthread_self(), "bcs-sr");
  sr_tid_.store(static_cast<pid_t>(::gettid()));
  // UCX's async thread wakes this thread for each strobe and report of a
  // peer: the short slice, never real time (sched_hint.h). This thread
  // itself starts at normal priority with the short slice; pick_priority
  // raises it while a rank computes.
  sched_join_wake_path(false);
  for (int tid : fabric_.ucx_async_threads()) sched_join_wake_path(false, tid);
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
      sync_job(0);
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
    if (report_fault_ == ReportFault::ahead && ++reports_ == 5) rep.slice += 1000;  // test only
    const int64_t done = wire::phase_value(rep.slice, rep.phase);
    // The epoch first, then the scan (see Doorbell::check): a rank this
    // scan misses blocks after the store, and its bell carries this epoch.
    if (cur_) cur_->ranks.job()->set_finished(static_cast<uint64_t>(done));
    rep.all_blocked = !cur_ || cur_->ranks.job()->all_blocked();
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
  // The asked job's state, whichever job runs now.
  NodeJobState* st = states_.find(job);
  described_(job, st ? describe_waits(st->ranks, st->br.matcher(), st->coll) : std::string());
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
  if (std::string_view(f) == "report-ahead") return ReportFault::ahead;
  return ReportFault::none;
}

void Nic::report(const wire::Strobe& s, int64_t done, std::span<const uint8_t> enc) {
  const uint64_t job = s.job;
  if ((report_fault_ == ReportFault::endpoint_lost || report_fault_ == ReportFault::lost) &&
      ++reports_ == 5)
    fabric_.disconnect(0);  // test only
  const core::SendLimit limit = limit_for(running_job());
  // The job's own variable (its row of the gang matrix), as the strobe
  // names it: a node that no longer holds the job reports there too.
  const core::VarId var = s.var;
  core::Status st = fabric_.var_set(var, done, {0}, enc, limit);
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
      st = fabric_.var_set(var, done, {0}, enc, limit);
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
  const auto& job = cur_->ranks.job();
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
  if (cur_) cur_->ranks.job()->set_nm_flag(kNmParked, false);
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
  // Any held job's rank: a stopped job's ranks do not compute, and one
  // that runs does whatever job's slice this thread serves.
  bool computes = starting;
  states_.for_each([&](uint64_t, const NodeJobState& st) {
    computes = computes || st.ranks.job()->a_rank_computes(now, kComputingNs);
  });
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
  if (cur_ && local_emds_) {  // a microphase of a job held here: what it did, for the local EMDS
    monitor::LocalSliceRecord a;
    a.job = s.job;  // the strobe's: one record per (job, slice)
    a.descriptors = r.drained + r.coll_drained;
    a.coll_descriptors = r.coll_drained;
    a.matches = r.matches;
    a.chunks = r.chunks + r.delivered;
    a.bytes = r.bytes;
    a.collectives = r.collectives;
    const auto& job = cur_->ranks.job();
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
  // The strobe's job's state (held_states.h): chosen at its DEM, kept
  // for the rest of its slice. A strobe for a job this node does not run
  // (it ended here already, or the job has no rank here) still needs a
  // report, or the MM would wait.
  if (s.phase == Phase::dem)
    sync_job(s.job);
  else
    cur_ = states_.within_slice(s.job);
  NodeJobState* st = cur_;
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
