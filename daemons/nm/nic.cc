// The strobe receiver: waits for (micro)strobes, runs the helper role of
// each microphase and reports to the MM. The roles live in roles/.
#include "nic.h"

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
    : fabric_(fabric), self_(self), liveness_(liveness) {
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
    wire::Report rep;
    wire::Strobe strobe;
    try {
      strobe = wire::decode_strobe(m.data);
      rep = on_strobe(strobe);
    } catch (const std::exception& e) {
      spdlog::error("strobe receiver: {}", e.what());
      rep.errors = 1;
    }
    rep.slice = strobe.slice;
    rep.phase = strobe.phase;
    auto enc = wire::encode(rep);
    fabric_.var_set(wire::kVarPhase, wire::phase_value(strobe.slice, strobe.phase), {0}, enc);
  }
}

wire::Report Nic::on_strobe(const wire::Strobe& s) {
  if (s.phase == Phase::dem) sync_job();
  // A strobe for a job this node does not run (it ended here already, or the
  // job has no rank here) still needs a report, or the MM would wait.
  if (st_ && st_->ranks.job_id() != s.job && s.phase == Phase::dem) st_.reset();
  NodeJobState* st = st_.get();
  switch (s.phase) {
    case Phase::dem: {
      if (!st) return {};
      auto rep = st->bs.run(s.slice, st->ranks, *this, st->br, st->coll);
      rep.transfers_pending = static_cast<uint32_t>(st->br.scheduler().in_flight());
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
