#include "doorbell.h"

#include "sched_hint.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include "wire.h"

namespace bcs::nm {

namespace {
// Bounds how long a job change or shutdown can go unnoticed; not a poll of
// the rings (a ring is what wakes the thread).
constexpr uint64_t kDoorbellRecheckNs = 100'000'000;
}  // namespace

Doorbell::Doorbell(core::Fabric& fabric, const std::atomic<uint64_t>& parked,
                   std::atomic<uint32_t>& leasing, bool realtime)
    : fabric_(fabric), parked_(parked), leasing_(leasing), realtime_(realtime) {
  thread_ = std::thread([this] { run(); });
}

Doorbell::~Doorbell() {
  std::shared_ptr<NmJob> j;
  {
    std::lock_guard lk(mu_);
    stop_ = true;
    j = job_;
  }
  cv_.notify_all();
  if (j) segment_ring_bell(j->bell());
  futex_wake_all(&leasing_);
  thread_.join();
}

void Doorbell::set_job(std::shared_ptr<NmJob> job) {
  std::shared_ptr<NmJob> old;
  {
    std::lock_guard lk(mu_);
    old = std::exchange(job_, std::move(job));
  }
  cv_.notify_all();
  if (old) segment_ring_bell(old->bell());  // stop sleeping on the old segment
}

void Doorbell::run() {
  pthread_setname_np(pthread_self(), "bcs-bell");
  // Its wake-up (a rank that blocks or posts) starts a slice (sched_hint.h).
  sched_join_wake_path(realtime_);
  core::sched_policy_changed();
  for (;;) {
    std::shared_ptr<NmJob> j;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] { return stop_ || job_; });
      if (stop_) return;
      j = job_;
    }
    // During a lease the strobe receiver watches the bell and nothing
    // goes to the manager: sleep where a ring does not wake this thread.
    if (leasing_.load(std::memory_order_seq_cst)) {
      futex_wait(&leasing_, 1, kDoorbellRecheckNs);
      continue;
    }
    std::atomic<uint32_t>* word = j->bell();
    const uint32_t seen = word->load(std::memory_order_seq_cst);
    check(*j);
    futex_wait(word, seen, kDoorbellRecheckNs);
  }
}

void Doorbell::check(NmJob& job) {
  if (leasing_.load(std::memory_order_seq_cst)) return;
  const uint64_t parked = parked_.load(std::memory_order_seq_cst);
  const Sent park{job.id(), parked};
  if (parked && park != work_sent_ && !job.rings_empty()) {
    work_sent_ = park;
    send(job, parked, static_cast<uint8_t>(wire::BellKind::work));
  }
  if (!job.nm_flag(kNmBellOnBlock)) return;
  // Scan first, then read the epoch: a rank that the strobe receiver's own
  // scan (after its last microphase) missed set its flag after that
  // microphase's epoch was stored, so the epoch read here is that one.
  if (!job.all_blocked()) return;
  const uint64_t e = job.finished();
  if (e == 0 || Sent{job.id(), e} == blocked_sent_) return;
  blocked_sent_ = {job.id(), e};
  send(job, e, static_cast<uint8_t>(wire::BellKind::blocked));
}

void Doorbell::send(const NmJob& job, uint64_t epoch, uint8_t kind) {
  wire::Bell b;
  b.job = job.id();
  b.epoch = epoch;
  b.kind = static_cast<wire::BellKind>(kind);
  const auto s = fabric_.xfer_and_signal(0, wire::kEvBell, wire::encode(b));
  // Only a hint: a lost bell costs at most a period (or a parked
  // strobe's re-check), never correctness.
  if (s != core::Status::ok && s != core::Status::closed)
    spdlog::debug("doorbell: {}", core::status_str(s));
}

}  // namespace bcs::nm
