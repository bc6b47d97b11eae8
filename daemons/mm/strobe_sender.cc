// The strobe sender (SS): one thread of the machine manager that owns the
// slice clock and drives the slices of every running job.
//
// Several jobs run at once when their node sets do not overlap (space
// sharing). The one thread keeps one clock and one slice high-water mark,
// and never waits on a single job: each job's slice loop (run_slices,
// job_run.cc) is a coroutine that suspends where it waits (a microphase
// on its nodes, the next slice's start, its nodes starting it), and the
// thread resumes every job whenever anything happened (a node's report, a
// bell, a local wake) or a job's deadline came. Whether a job's microphase
// is complete is judged over that job's nodes only, so a stalled job costs
// the others one look per wake-up, never a wait.
//
// Admission is first come, first served, with backfilling: a queued job
// starts as soon as none of its nodes is held by a running job or wanted
// by a job queued before it (so a job is never overtaken on its nodes, and
// cannot starve). --space-share off keeps one job at a time.
#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <sys/prctl.h>

#include <algorithm>
#include <map>
#include <set>

#include "admission.h"
#include "host_slots.h"
#include "job_events.h"
#include "job_run.h"
#include "manager.h"
#include "sched_hint.h"
#include "wire.h"

namespace bcs::mm {

using namespace std::chrono_literals;
using wire::Phase;

// Pacing between slices. Three ways a slice starts:
//
//   period    the paper's strobe: one period after the previous slice
//             started. The strobe sender sleeps until `next - spin_ns`, then
//             spins to `next`: an absolute sleep wakes 20-30 us late here
//             even with timer slack 1, and how late varies; that variation
//             is the period's jitter. So the one thread that keeps time pays
//             a short, bounded spin per slice (--strobe-spin, 30 us).
//   early     work-conserving: every rank of the job is asleep in a blocking
//             call (each node said so in its last report, or rang its
//             doorbell since), so nothing will be posted until the runtime
//             completes something, and waiting for the period would only
//             add latency. The period still bounds every slice from above.
//   unparked  kParkAfterEmpty slices in a row found nothing to do on any
//             node and every node armed its doorbell: the strobe parks (no round trips at all)
//             until a rank posts and its node rings, and that slice starts
//             at once. The periods skipped are counted, and slice numbers
//             advance by them, so numbering stays global and monotonic. A
//             parked strobe still runs one slice every kParkRecheckNs, so a
//             bell lost to a bug costs latency, never a hang.
//
// --strobe fixed (per job or the manager's default) keeps only `period`.
// The sleep itself is a wait on the fabric's kEvBell event: node doorbells
// arrive there, and wake_strobe_sender() (shutdown, the job's end) posts an
// empty message there, so a SIGTERM need not wait out a 10 s slice.
namespace {
constexpr uint64_t kParkRecheckNs = 100'000'000;
// The strobe sender looks at every job at least this often, whatever it
// waits for: a state change whose wake was missed costs latency, never a
// hang.
constexpr uint64_t kLookAtLeastNs = 100'000'000;
// How often a job waiting for a microphase checks whether it was failed
// meanwhile, its nodes are gone, or its watchdog ran out.
constexpr uint64_t kPhaseCheckNs = 50'000'000;
}  // namespace

Task<Manager::Start> Manager::wait_for_slice(JobRun& r, Pacing& p) {
  Job& j = *r.job;
  for (;;) {
    for (; !r.bells.empty(); r.bells.pop_front()) take_bell(j, p, r.bells.front());
    if (r.closed) co_return Start::closed;
    if (std::exchange(r.woken, false)) co_return Start::woken;
    if (!r.allowed || now_ns() >= r.quantum_end) {
      // Not its turn (gang scheduling): between slices, nothing in flight.
      // The strobe sender resumes it when it may run again.
      r.quiet = true;
      co_await r.until(now_ns() + kLookAtLeastNs);
      continue;
    }
    if (std::exchange(r.back, false) && p.parked) co_return Start::unparked;
    if (p.adaptive) {
      if (p.parked && p.rung) co_return Start::unparked;
      if (!p.parked && p.all_blocked(j.nodes)) co_return Start::early;
    }
    const uint64_t wake_at =
        p.parked ? p.parked_at + kParkRecheckNs : (p.next > p.spin_ns ? p.next - p.spin_ns : p.next);
    if (now_ns() >= wake_at) {
      if (p.parked) co_return Start::unparked;
      while (now_ns() < p.next) __builtin_ia32_pause();
      co_return Start::period;
    }
    co_await r.until(wake_at);
  }
}

bool Manager::take_bell(Job& j, Pacing& p, const core::Message& m) {
  wire::Bell b;
  try {
    b = wire::decode_bell(m.data);
  } catch (const std::exception& e) {
    spdlog::warn("bell from node {}: {}", m.from, e.what());
    return false;
  }
  if (b.job != j.id || !std::binary_search(j.nodes.begin(), j.nodes.end(), m.from)) return false;
  ++p.bells;
  if (b.kind == wire::BellKind::work) {
    p.rung = p.rung || p.parked;
  } else if (static_cast<int64_t>(b.epoch) >= p.end_value) {
    p.blocked.insert(m.from);
  }
  return true;
}

void Manager::wake_strobe_sender() { fabric_.signal_local(wire::kEvBell, {}); }

namespace {
// The job a bell is for (its first field), without decoding the rest: the
// job's own take_bell checks it whole.
bool bell_job(const core::Message& m, uint64_t* job) {
  try {
    *job = wire::decode_bell(m.data).job;
    return true;
  } catch (const std::exception& e) {
    spdlog::warn("bell from node {}: {}", m.from, e.what());
    return false;
  }
}
}  // namespace

void Manager::admit_locked(std::vector<std::unique_ptr<JobRun>>& runs) {
  std::vector<QueuedJob> queue;
  std::erase_if(queue_, [&](uint64_t id) {
    auto jt = jobs_.find(id);
    return jt == jobs_.end() || jt->second->state != Job::State::queued;  // ended while queued
  });
  for (uint64_t id : queue_) queue.push_back({id, jobs_.at(id)->nodes});
  for (uint64_t id : admit(queue, matrix_, runs.size(), cfg_.space_share)) {
    const auto& j = jobs_.at(id);
    j->row = *matrix_.row_of(id);
    j->phase_var = static_cast<uint16_t>(wire::kVarPhase + j->row);
    place_on_host_slots_locked(*j, runs);
    auto r = std::make_unique<JobRun>();
    r->job = j;
    r->slice = slice_;  // its first slice is above every number its nodes may report
    r->task = run_job(*r);
    r->resume = r->task.handle();
    j->state = Job::State::starting;
    runs.push_back(std::move(r));
    queue_.erase(std::find(queue_.begin(), queue_.end(), id));
  }
}

namespace {
bool share_a_node(const Job& a, const Job& b) {
  for (uint32_t n : a.nodes)
    if (std::binary_search(b.nodes.begin(), b.nodes.end(), n)) return true;
  return false;
}
}  // namespace

bool Manager::gang_locked(std::vector<std::unique_ptr<JobRun>>& runs, uint64_t now) {
  bool changed = false;
  if (now >= quantum_end_) {
    // The quantum ended: the next row with a job, at one boundary for all.
    matrix_.rotate();
    quantum_end_ = now + cfg_.quantum_ns;
    for (uint64_t id : matrix_.runnable())
      if (auto it = jobs_.find(id); it != jobs_.end()) ++it->second->quanta;
    changed = true;
  }
  const std::vector<uint64_t> runnable = matrix_.runnable();
  auto in_set = [&](const Job& j) {
    return std::find(runnable.begin(), runnable.end(), j.id) != runnable.end();
  };
  for (auto& r : runs) {
    Job& j = *r->job;
    bool contended = false, clear = true;
    for (const auto& o : runs) {
      if (o == r || !share_a_node(j, *o->job)) continue;
      contended = true;
      // One job of a node is in a slice at a time: it may begin only once
      // every job sharing its nodes that is not running now is quiet.
      if (!in_set(*o->job) && !o->quiet) clear = false;
    }
    r->quantum_end = contended ? quantum_end_ : UINT64_MAX;
    const bool go = in_set(j) && clear;
    if (go != r->allowed) {
      r->allowed = go;
      r->back = go;
      changed = true;
    }
    if (j.state != Job::State::running) continue;  // its ranks are not there yet (or gone)
    if (!in_set(j) && r->quiet && !j.suspended) suspend_locked(j, true);
    if (go && j.suspended) suspend_locked(j, false);
  }
  return changed;
}

void Manager::suspend_locked(Job& j, bool suspend) {
  const uint64_t now = now_ns();
  if (suspend) {
    j.suspended_since = now;
  } else if (j.suspended_since) {
    j.suspended_ns += now - j.suspended_since;
    j.suspended_since = 0;
  }
  j.suspended = suspend;
  j.switch_acks = 0;
  j.background_acks = 0;
  j.unrecorded_switches.fetch_add(1, std::memory_order_relaxed);
  j.last_switch_max_ns = 0;
  v1::ManagerMsg m;
  m.mutable_suspend_job()->set_job_id(j.id);
  m.mutable_suspend_job()->set_suspend(suspend);
  m.mutable_suspend_job()->set_background(suspend && cfg_.background);
  for (uint32_t n : j.nodes)
    if (auto it = nodes_.find(n); it != nodes_.end()) queue_locked(it->second, m);
  spdlog::debug("job {} {}", j.id, suspend ? "suspended" : "resumed");
}

namespace {
// Ranks of `j` per host name (over every node manager of the host).
std::map<std::string, uint32_t> ranks_per_host(const Job& j,
                                               const std::map<uint32_t, std::shared_ptr<Node>>& nodes) {
  std::map<std::string, uint32_t> out;
  for (uint32_t n : j.rank_node)
    if (auto it = nodes.find(n); it != nodes.end()) ++out[it->second->hostname];
  return out;
}
}  // namespace

void Manager::place_on_host_slots_locked(Job& j, const std::vector<std::unique_ptr<JobRun>>& runs) {
  j.host_slot_base.clear();
  for (const auto& [host, ranks] : ranks_per_host(j, nodes_)) {
    uint32_t cpus = 0;
    for (const auto& [id, n] : nodes_)
      if (n->hostname == host && n->cpus) cpus = cpus ? std::min(cpus, n->cpus) : n->cpus;
    std::vector<SlotRange> held;
    for (const auto& r : runs) {
      const auto it = r->job->host_slot_base.find(host);
      if (it == r->job->host_slot_base.end()) continue;
      held.push_back({it->second, ranks_per_host(*r->job, nodes_)[host]});
    }
    j.host_slot_base[host] = host_slot_base(cpus, held, ranks);
  }
}

std::string Manager::why_waiting_locked(const Job& j) const {
  // The first job (running, or queued before it) holding one of its nodes.
  for (const auto& [id, o] : jobs_) {
    if (id == j.id || o->state == Job::State::done) continue;
    if (o->state == Job::State::queued) {
      const auto at = std::find(queue_.begin(), queue_.end(), id);
      const auto me = std::find(queue_.begin(), queue_.end(), j.id);
      if (at == queue_.end() || me == queue_.end() || at > me) continue;
    }
    for (uint32_t n : j.nodes)
      if (std::binary_search(o->nodes.begin(), o->nodes.end(), n)) {
        const auto it = nodes_.find(n);
        return "waits for " + (it == nodes_.end() ? "node " + std::to_string(n) : it->second->name) +
               (o->state == Job::State::queued ? ", wanted by job " : ", held by job ") +
               std::to_string(id);
      }
  }
  return cfg_.space_share ? "" : "waits for the running job (--space-share off)";
}

Task<bool> Manager::run_job(JobRun& r) {
  const bool started = co_await start_job(r);
  if (started) (void)co_await run_slices(r);
  r.quiet = true;  // no slice of it any more
  co_return started;
}

void Manager::strobe_sender() {
  pthread_setname_np(pthread_self(), "bcs-ss");
  // Default timer slack makes an absolute sleep ~70 us late; 1 ns slack
  // brings it to ~25 us (NOTES.md), which matters for 100-250 us slices.
  prctl(PR_SET_TIMERSLACK, 1);
  // The slice clock must not queue behind other runnable threads (a woken
  // thread waited behind a computing rank for up to 1.8 ms here, even with
  // EEVDF's shortest slice), and neither must its wake-up for the nodes'
  // reports. At SCHED_FIFO it preempts a rank at once. Then nothing spins:
  // not the sender before a strobe (pace.spin_ns) and not the fabric in a
  // wait. UCX's async thread, which each report wakes first, gets only the
  // short slice: it spins (sched_yield) while a worker holds UCX's async
  // lock, and at real time that starved this thread (sched_hint.h).
  realtime_ = sched_join_wake_path(cfg_.realtime);
  for (int tid : fabric_.ucx_async_threads()) sched_join_wake_path(false, tid);
  core::sched_policy_changed();  // the fabric's spin_here
  std::vector<std::unique_ptr<JobRun>> runs;
  size_t first = 0;  // which job looks first: each in turn
  bool closed = false;
  for (;;) {
    // Read before looking: a report that comes while the jobs look ends
    // the wait below at once.
    const uint64_t gen = fabric_.var_generation();
    core::Message m;
    for (;;) {
      const auto st = fabric_.test_event(wire::kEvBell, &m, 0ns);
      if (st == core::Status::closed) closed = true;
      if (st != core::Status::ok) break;
      uint64_t job = 0;
      const bool wake = m.data.empty();  // wake_strobe_sender()
      if (!wake && !bell_job(m, &job)) continue;
      for (auto& r : runs)
        if (wake)
          r->woken = true;
        else if (r->job->id == job)
          r->bells.push_back(m);  // another job's (or an ended one's) bell is dropped
    }
    for (size_t k = 0; k < runs.size(); ++k) {
      JobRun& r = *runs[(first + k) % runs.size()];
      r.closed = r.closed || closed;
      if (auto h = std::exchange(r.resume, {})) h.resume();
    }
    if (!runs.empty()) first = (first + 1) % runs.size();
    bool admitted = false;
    {
      std::lock_guard lk(mu_);
      if (stopping_) break;
      // A job whose code ended and whose every rank is accounted for gives
      // its nodes back.
      std::erase_if(runs, [&](const std::unique_ptr<JobRun>& r) {
        if (!r->task.done()) return false;
        if (const auto e = r->task.error()) {
          std::string what = "unknown";
          try {
            std::rethrow_exception(e);
          } catch (const std::exception& x) {
            what = x.what();
          } catch (...) {
          }
          spdlog::error("job {}: the strobe sender's slice loop failed: {}", r->job->id, what);
          fail_job_locked(*r->job, 1, "internal error in the strobe sender: " + what);
          slice_ = std::max(slice_, r->slice + 2 + wire::kMaxLeaseSlices + wire::kMaxLeaseSkipped);
        }
        if (r->job->state != Job::State::done) return false;
        matrix_.remove(r->job->id);
        return true;
      });
      const size_t before = runs.size();
      if (!closed) admit_locked(runs);
      admitted = runs.size() > before;
      // Gang: a quantum ended, a job was admitted or went quiet: who runs.
      if (gang_locked(runs, now_ns())) admitted = true;
    }
    flush();  // SuspendJob messages
    if (admitted) continue;  // start them at once
    uint64_t next = now_ns() + kLookAtLeastNs;
    if (runs.size() > 1) next = std::min(next, quantum_end_);
    for (const auto& r : runs)
      if (r->resume) next = std::min(next, r->wake_at);
    const uint64_t now = now_ns();
    if (closed) {
      // Shutting down: nothing arrives any more; the jobs end as their
      // ranks are accounted for (mu_'s state), looked at now and then.
      std::unique_lock lk(mu_);
      cv_.wait_for(lk, 10ms, [&] { return stopping_; });
      continue;
    }
    if (next > now &&
        fabric_.wait_event_or_var(wire::kEvBell, gen, std::chrono::nanoseconds(next - now)) ==
            core::Status::closed)
      closed = true;
  }
  // Stopping: each job's code is dropped where it waits (its frame's
  // guards undo what it had set: Kill's "waiting for" report).
  runs.clear();
}

Task<bool> Manager::start_job(JobRun& r) {
  const std::shared_ptr<Job> j = r.job;
  {
    std::lock_guard lk(mu_);
    connect_again_locked(*j);
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
    s->mutable_slice()->set_fixed(j->fixed_strobe);
    s->mutable_slice()->set_max_unexpected(j->max_unexpected);
    s->set_bind(j->bind);
    s->set_stdin_rank0(j->req.stdin_rank0());
    s->set_uid(j->uid);
    s->set_gid(j->gid);
    // Held beside the jobs of other rows that share its nodes.
    s->set_coscheduled(matrix_.rows() > 1);
    s->set_cpu_group(cfg_.background && matrix_.rows() > 1);
    for (uint32_t n : j->nodes)
      if (auto it = nodes_.find(n); it != nodes_.end()) {
        const auto base = j->host_slot_base.find(it->second->hostname);
        s->set_host_slot_base(base == j->host_slot_base.end() ? 0 : base->second);
        queue_locked(it->second, m);
      }
  }
  flush();
  // Until every node answered JobStarted (node_session wakes us), 30 s.
  const uint64_t deadline = now_ns() + 30'000'000'000ull;
  for (;;) {
    {
      std::lock_guard lk(mu_);
      if (stopping_ || j->state == Job::State::done || j->started.size() == j->nodes.size()) break;
    }
    if (r.closed || now_ns() >= deadline) break;
    co_await r.until(deadline);
  }
  std::unique_lock lk(mu_);
  if (stopping_ || r.closed || j->state == Job::State::done) co_return false;
  if (j->started.size() != j->nodes.size()) {
    fail_job_locked(*j, 1, "the node managers did not start the job within 30 s");
    for (uint32_t k = 0; k < j->rank_node.size(); ++k) {
      bool started =
          std::find(j->started.begin(), j->started.end(), j->rank_node[k]) != j->started.end();
      if (!started && !j->rank_done[k]) {
        j->rank_done[k] = true;
        j->ranks_done++;
      }
    }
    if (j->ranks_done == j->rank_node.size()) finish_job_locked(*j);
    lk.unlock();
    cv_.notify_all();
    flush();
    co_return false;
  }
  if (j->failed) co_return false;
  j->state = Job::State::running;
  j->started_ns = now_ns();
  // Its clients start --timeout now: time queued does not count.
  push_event_locked(*j, started_event(*j, nodes_, now_ns()));
  cv_.notify_all();  // Attach streams send it
  spdlog::info("job {} running, slice {} us ({} strobe), chunk budget {} bytes{}", j->id,
               j->slice_ns / 1000, j->fixed_strobe ? "fixed" : "adaptive", j->chunk_bytes,
               j->copy_rate ? fmt::format(" (copy rate {} MB/s)", j->copy_rate / 1'000'000) : "");
  co_return true;
}

Task<bool> Manager::wait_phase(JobRun& r, uint64_t slice, uint8_t phase,
                               std::vector<core::VarReplica>* snap, uint64_t* retries) {
  Job& j = *r.job;
  const uint64_t t0 = now_ns();
  const int64_t value = wire::phase_value(slice, static_cast<Phase>(phase));
  // For Kill's report, and cleared however the wait ends (its frame may be
  // dropped at shutdown).
  j.progress.waiting_since_ns.store(t0, std::memory_order_relaxed);
  j.progress.waiting_for.store(value, std::memory_order_relaxed);
  struct Done {
    Job& j;
    ~Done() { j.progress.waiting_for.store(-1, std::memory_order_relaxed); }
  } done{j};
  uint64_t check_at = t0 + kPhaseCheckNs;
  for (;;) {
    // One look (no wait): the job's nodes only.
    uint64_t n = 0;
    auto s = fabric_.compare_and_write(j.nodes, j.phase_var, core::Cmp::ge, value,
                                       core::Fabric::kNoWrite, {}, 0ns, snap, &n);
    *retries += n;
    if (s == core::Status::ok) co_return true;
    if (s == core::Status::closed || r.closed) co_return false;
    if (s != core::Status::timeout) {
      spdlog::error("job {} slice {}: waiting for {}: {}", j.id, slice,
                    wire::phase_name(static_cast<Phase>(phase)), core::status_str(s));
      co_return false;
    }
    const uint64_t now = now_ns();
    if (std::exchange(r.woken, false) || now >= check_at) {
      check_at = now + kPhaseCheckNs;
      std::lock_guard lk(mu_);
      if (stopping_) co_return false;
      for (uint32_t node : j.nodes)
        if (!nodes_.count(node)) co_return false;  // node_lost() already failed the job
      // Failed meanwhile (a node said its report was lost, a kill): the job
      // is being ended, and the report waited for may never come.
      if (j.failed || j.state == Job::State::done) co_return false;
      if (std::chrono::nanoseconds(now - t0) > cfg_.phase_watchdog) {
        std::string late;
        for (uint32_t node : j.nodes)
          if (fabric_.var_get(j.phase_var, node).value < value) late += " " + std::to_string(node);
        fail_job_locked(j, 1,
                        std::string("microphase ") + wire::phase_name(static_cast<Phase>(phase)) +
                            " of slice " + std::to_string(slice) + " did not complete on node(s)" +
                            late);
        co_return false;
      }
    }
    co_await r.until(check_at);
  }
}

}  // namespace bcs::mm
