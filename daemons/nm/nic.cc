// The strobe receiver: waits for (micro)strobes, runs the helper role of
// each microphase and reports to the MM. The roles live in roles/.
#include "nic.h"

#include "slice_plan.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

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

void JobRanks::complete_status(int32_t r, uint32_t request, int32_t error, int32_t source,
                               int32_t tag, uint64_t bytes, uint32_t found) {
  if (!job_->is_local(r)) return;
  RankView v = job_->view_of(r);
  if (request >= v.request_slots) return;
  request_complete(v, request, error, source, tag, bytes, found);
}

// ------------------------------------------------------------ strobe receiver
Nic::Nic(core::Fabric& fabric, uint32_t self, std::chrono::nanoseconds liveness)
    : fabric_(fabric), self_(self), liveness_(liveness), doorbell_(fabric, epoch_, parked_) {
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
    DmaHelper::serve(m, ranks.get(), *this);
    fabric_.xfer_and_signal(self_, wire::kEvDmaServed, {});
  });
}

Nic::~Nic() { fabric_.set_handler(wire::kEvDmaGet, nullptr); }

core::Status Nic::send(uint32_t node, core::EventId ev, std::span<const uint8_t> bytes) {
  return fabric_.xfer_and_signal(node, ev, bytes);
}

// A role waits for a peer's data up to the liveness timeout (a stopped or
// slow peer delays the job, it does not kill it), but no longer than the
// job lasts: when the manager ends the job (a peer died, the watchdog
// fired, a rank failed), the wait ends within a step.
core::Status Nic::wait(core::EventId ev, core::Message* m, std::chrono::nanoseconds limit) {
  using namespace std::chrono;
  const auto deadline = steady_clock::now() + std::min(limit, liveness_);
  const NmJob* mine = st_ ? st_->ranks.job().get() : nullptr;
  for (;;) {
    const auto left = deadline - steady_clock::now();
    const auto step = std::min<nanoseconds>(left, milliseconds(100));
    const auto s = fabric_.test_event(ev, m, step < nanoseconds(0) ? nanoseconds(0) : step);
    if (s != core::Status::timeout || steady_clock::now() >= deadline) return s;
    std::lock_guard lk(job_mu_);
    if (mine && pending_job_.get() != mine) return core::Status::closed;
  }
}

void Nic::set_job(std::shared_ptr<NmJob> job) {
  doorbell_.set_job(job);
  std::lock_guard lk(job_mu_);
  pending_job_ = std::move(job);
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
    st_ = std::make_unique<NodeJobState>(j, self_);
  }
}

void Nic::run() {
  pthread_setname_np(pthread_self(), "bcs-sr");
  for (;;) {
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
    wire::Report& rep = f.parts.back();
    rep.slice = strobe.slice;
    if (f.parts.size() == 1) rep.phase = strobe.phase;
    const int64_t done = wire::phase_value(strobe.slice, rep.phase);
    // The epoch first, then the scan (see Doorbell::check): a rank this
    // scan misses blocks after the store, and its bell carries this epoch.
    epoch_.store(static_cast<uint64_t>(done), std::memory_order_seq_cst);
    rep.all_blocked = !st_ || st_->ranks.job()->all_blocked();
    auto enc = strobe.fused ? wire::encode(f) : wire::encode(rep);
    fabric_.var_set(wire::kVarPhase, done, {0}, enc);
  }
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
  job->set_nm_flag(kNmParked, true);
  if (job->rings_empty()) {
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
wire::FusedReport Nic::run_fused(const wire::Strobe& s) {
  using clock = std::chrono::steady_clock;
  wire::FusedReport f;
  wire::Strobe m = s;
  auto run = [&](Phase p) {
    m.phase = p;
    const auto t0 = clock::now();
    wire::Report r = on_strobe(m);
    r.slice = s.slice;
    r.phase = p;
    f.ns.push_back(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0).count()));
    f.parts.push_back(std::move(r));
    return f.parts.back().errors == 0;
  };
  if (!run(Phase::dem) || !st_) return f;
  std::map<int32_t, uint64_t>& released = st_->released;
  const mm::DemPlan dem = mm::plan_after_dem({f.parts.back()}, self_, released);
  m.expect_batches = dem.expect_batches;
  m.coll_release = dem.coll_release;
  if (dem.run_msm) {
    if (!run(Phase::msm)) return f;
    const mm::MsmPlan msm = mm::plan_after_msm({f.parts.back()}, self_);
    m.expect_gets = msm.expect_gets;
    if (msm.chunks && !run(Phase::p2p)) return f;
  }
  if (dem.run_bbm && !run(Phase::bbm)) return f;
  if (dem.run_rm && !run(Phase::rm)) return f;
  for (const auto& r : dem.coll_release) released[r.context] = r.level;
  return f;
}

wire::Report Nic::on_strobe(const wire::Strobe& s) {
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
      auto rep = st->bs.run(s.slice, st->ranks, *this, st->br, st->coll);
      rep.transfers_pending = static_cast<uint32_t>(st->br.scheduler().in_flight());
      if (s.may_park) park_if_idle(s.slice, rep);
      return rep;
    }
    case Phase::msm:
      if (!st) {
        BufferReceiver drain(self_, 1);
        return drain.run(s, nullptr, *this);
      }
      return st->br.run(s, &st->ranks, *this);
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
