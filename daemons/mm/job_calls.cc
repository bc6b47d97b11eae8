// The Jobs service's calls on a job that exists: Attach (its events), Kill,
// Input (rank 0's stdin) and List. Launch and the job's life are in
// manager.cc.
#include <spdlog/spdlog.h>

#include <pthread.h>

#include <algorithm>

#include "job_events.h"
#include "job_run.h"
#include "launch.h"
#include "manager.h"
#include "peer.h"
#include "wire.h"

namespace bcs::mm {

using namespace std::chrono_literals;

grpc::Status Manager::job_for_locked(const Caller& who, uint64_t job_id,
                                     std::shared_ptr<Job>* out) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return {grpc::StatusCode::NOT_FOUND, "no job " + std::to_string(job_id)};
  if (std::string why = may_touch(who, *it->second); !why.empty())
    return {grpc::StatusCode::PERMISSION_DENIED, why};
  *out = it->second;
  return grpc::Status::OK;
}

namespace {
// The client's own description of itself ("bcs run, pid 123"), for messages:
// cut, and nothing but printable ASCII kept.
std::string client_words(const std::string& said) {
  std::string s = said.substr(0, 64);
  for (char& c : s)
    if (c < 0x20 || c > 0x7e) c = '?';
  return s.empty() ? "a client" : s;
}
}  // namespace

grpc::Status Manager::attach(grpc::ServerContext* ctx, uint64_t job_id,
                             grpc::ServerWriter<v1::JobEvent>* w) {
  if (!authorized(ctx)) return unauthenticated();
  const Caller who = identify(ctx);
  const auto said = ctx->client_metadata().find(kClientMetadata);
  const std::string client = client_words(
      said == ctx->client_metadata().end() ? std::string()
                                           : std::string(said->second.data(), said->second.size()));
  std::shared_ptr<Job> j;
  {
    std::lock_guard lk(mu_);
    // A job's output is its owner's.
    if (grpc::Status st = job_for_locked(who, job_id, &j); !st.ok()) return st;
    ++j->clients;
    j->ever_attached = true;
  }
  // However this call ends (the exit delivered, the client cancelled or
  // gone, a failed write), the job learns that this client left.
  struct Leave {
    Manager* m;
    Job& job;
    const std::string& client;
    ~Leave() { m->client_left(job, client); }
  } leave{this, *j, client};
  size_t next = 0;  // absolute index of the next event to send
  for (;;) {
    std::vector<v1::JobEvent> batch;
    bool end = false;
    {
      std::unique_lock lk(mu_);
      // Bounded waits so a client that went away is noticed (IsCancelled
      // below) within 200 ms even when the job prints nothing.
      cv_.wait_for(lk, 200ms, [&] { return j->events_base + j->events.size() > next; });
      next = std::max(next, j->events_base);  // output already handed to another client
      for (; next < j->events_base + j->events.size(); ++next)
        batch.push_back(j->events[next - j->events_base]);
      end = j->exited && next == j->events_base + j->events.size();
    }
    for (auto& ev : batch)
      if (!w->Write(ev)) return {grpc::StatusCode::CANCELLED, "client went away"};
    if (!batch.empty() && !end) {
      {
        std::lock_guard lk(mu_);
        drop_delivered_locked(*j, next);
      }
      flush();  // a resume, if the client caught up
    }
    if (end) {
      // Delivered: keep only the exit, for `bcs jobs` and late attachers.
      std::lock_guard lk(mu_);
      const size_t drop = j->events.size() - 1;
      j->events.erase(j->events.begin(), j->events.begin() + static_cast<std::ptrdiff_t>(drop));
      j->events_base += drop;
      j->held_bytes = 0;
      return grpc::Status::OK;
    }
    if (ctx->IsCancelled()) return {grpc::StatusCode::CANCELLED, "client went away"};
  }
}

namespace {
// "0.3 ms", "59.8 s": how long ago, read by a person.
std::string ago(uint64_t now, uint64_t then) {
  const double s = now > then ? static_cast<double>(now - then) / 1e9 : 0;
  char b[32];
  std::snprintf(b, sizeof b, s < 1 ? "%.1f ms" : "%.1f s", s < 1 ? s * 1e3 : s);
  return b;
}

// Kill's report: what a job was doing, so that one that timed out says
// whether its program waits for something no rank will do (every rank
// blocked in MPI, nothing moved for long: a deadlock in the program) or the
// runtime stopped (no slice for long).
std::string describe_progress(const Job& j, const std::string& waiting) {
  switch (j.state) {
    case Job::State::queued:
      return "it was still queued" + (waiting.empty() ? std::string() : " (" + waiting + ")");
    case Job::State::starting: return "its node managers had not started all of its ranks yet";
    case Job::State::done: return "";
    case Job::State::running: break;
  }
  std::string out, left;
  size_t n = 0;
  for (size_t r = 0; r < j.rank_done.size(); ++r) {
    if (j.rank_done[r]) continue;
    if (++n <= 8)
      left += (left.empty() ? "" : ", ") + std::to_string(r) +
              (r < j.rank_pids.size() && !j.rank_pids[r].empty() ? " (" + j.rank_pids[r] + ")" : "");
  }
  if (n > 8) left += " and " + std::to_string(n - 8) + " more";
  out = n ? "ranks still running: " + left : "every rank had exited";
  const auto& p = j.progress;
  const uint64_t now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                 std::chrono::steady_clock::now().time_since_epoch())
                                                 .count());
  const uint64_t slices = p.slices.load(std::memory_order_relaxed);
  if (!slices) return out + "; no slice had run";
  out += "; " + std::to_string(slices) + " slices, the last " +
         ago(now, p.last_start_ns.load(std::memory_order_relaxed)) + " ago";
  const uint64_t moved_ns = p.last_moved_ns.load(std::memory_order_relaxed);
  out += moved_ns ? ", the last that moved anything " + ago(now, moved_ns) + " ago"
                  : ", none of them moved anything";
  // A microphase that some node does not complete stops the job's slices
  // until the phase watchdog (bcs-mm --phase-watchdog) fails it.
  if (const int64_t w = p.waiting_for.load(std::memory_order_relaxed); w >= 0) {
    const uint64_t since = p.waiting_since_ns.load(std::memory_order_relaxed);
    if (now > since && now - since >= 100'000'000)
      out += "; the strobe had waited " + ago(now, since) + " for every node to complete " +
             wire::phase_name(static_cast<wire::Phase>(w % 8)) + " of slice " +
             std::to_string(w / 8);
  }
  if (p.all_blocked.load(std::memory_order_relaxed)) out += "; every rank waited in MPI";
  if (p.parked.load(std::memory_order_relaxed))
    out += "; the strobe was parked (nothing to do on any node)";
  return out;
}
}  // namespace

grpc::Status Manager::kill(grpc::ServerContext* ctx, uint64_t job_id, const std::string& reason,
                           std::string* state) {
  if (!authorized(ctx)) return unauthenticated();
  const Caller who = identify(ctx);
  std::shared_ptr<Job> jp;
  bool asked = false;
  {
    std::lock_guard lk(mu_);
    if (grpc::Status st = job_for_locked(who, job_id, &jp); !st.ok()) {
      if (st.error_code() == grpc::StatusCode::PERMISSION_DENIED)
        spdlog::warn("refused to kill job {} for {}: {}", job_id, who.describe(),
                     st.error_message());
      return st;
    }
    // A running job's node managers say first what its ranks wait for
    // (DescribeJob), for the report: a deadlocked program then names the
    // receives nobody sends to.
    if (state && jp->state == Job::State::running) {
      jp->described.clear();
      jp->describing = asked = true;
      v1::ManagerMsg m;
      m.mutable_describe_job()->set_job_id(job_id);
      for (uint32_t n : jp->nodes)
        if (auto it = nodes_.find(n); it != nodes_.end()) queue_locked(it->second, m);
    }
  }
  if (asked) flush();
  {
    std::unique_lock lk(mu_);
    Job& j = *jp;
    if (asked) {
      // A node manager answers between two strobes, or within 200 ms when
      // none come; one stuck in a microphase does not, and is named.
      cv_.wait_for(lk, kDescribeWait, [&] {
        return stopping_ || j.state != Job::State::running || j.described.size() >= j.nodes.size();
      });
      j.describing = false;
    }
    if (state) {
      *state = describe_progress(j, why_waiting_locked(j));
      if (asked && j.state == Job::State::running)
        for (uint32_t n : j.nodes) {
          auto it = nodes_.find(n);
          const std::string name = it == nodes_.end() ? "node " + std::to_string(n) : it->second->name;
          auto d = j.described.find(n);
          if (d == j.described.end())
            *state += "; " + name + " did not say what its ranks wait for";
          else if (!d->second.empty())
            *state += "; on " + name + ": " + d->second;
        }
    }
    end_job_locked(j, 143, "killed: " + (reason.empty() ? std::string("by request") : reason));
  }
  cv_.notify_all();
  flush();
  return grpc::Status::OK;
}

void Manager::end_job_locked(Job& j, int status, const std::string& message) {
  fail_job_locked(j, status, message);
  if (j.state == Job::State::queued) {
    // Never started: it leaves the queue now, so the next job need not
    // wait for it.
    queue_.erase(std::remove(queue_.begin(), queue_.end(), j.id), queue_.end());
    finish_job_locked(j);
  }
}

void Manager::client_left(Job& j, const std::string& client) {
  {
    std::lock_guard lk(mu_);
    if (j.clients) --j.clients;
    j.last_client = client;
    if (j.clients || j.state == Job::State::done) return;
    if (j.detached) {
      // Nobody reads now: the ranks must not block on a full pipe waiting
      // for a reader who may never come (push_event_locked drops instead).
      pause_output_locked(j, false);
      spdlog::info("job {}: its last client ({}) left; it runs on, detached", j.id, j.last_client);
    } else {
      // Like mpirun's job when mpirun dies: without a client nobody gets
      // its output or its exit status, and it would hold its nodes (and
      // the queue) until someone noticed.
      if (!j.failed)
        spdlog::warn("job {}: its client ({}) went away: ending it", j.id, j.last_client);
      end_job_locked(j, kClientGoneStatus, "killed: its client (" + j.last_client + ") went away");
    }
  }
  cv_.notify_all();
  flush();
}

void Manager::watch_unattached() {
  pthread_setname_np(pthread_self(), "bcs-attach");
  std::unique_lock lk(mu_);
  while (!stopping_) {
    const auto now = std::chrono::steady_clock::now();
    auto next = std::chrono::steady_clock::time_point::max();
    std::vector<std::shared_ptr<Job>> orphans;
    for (auto& [id, j] : jobs_) {
      if (j->detached || j->ever_attached || j->failed || j->state == Job::State::done) continue;
      if (now < j->attach_deadline)
        next = std::min(next, j->attach_deadline);
      else
        orphans.push_back(j);
    }
    if (!orphans.empty()) {
      for (auto& j : orphans) {
        spdlog::warn("job {}: its client ({}) never attached: ending it", j->id, j->last_client);
        end_job_locked(*j, kClientGoneStatus,
                       "killed: its client (" + j->last_client + ") never attached to it within " +
                           std::to_string(kAttachWait.count()) + " s of its launch");
      }
      lk.unlock();
      cv_.notify_all();
      flush();
      lk.lock();
      continue;
    }
    if (next == std::chrono::steady_clock::time_point::max())
      attach_cv_.wait(lk);
    else
      attach_cv_.wait_until(lk, next);
  }
}

// `bcs run`'s standard input for rank 0. The first chunk names the job,
// which must be the caller's and launched with stdin_rank0. Each chunk goes
// to rank 0's node once the job runs and less than kInputWindow bytes are
// unacknowledged; the job's end (or the client's) ends the call, whatever
// is left unsent being dropped: nobody can read it any more.
grpc::Status Manager::input(grpc::ServerContext* ctx, grpc::ServerReader<v1::InputChunk>* in) {
  if (!authorized(ctx)) return unauthenticated();
  const Caller who = identify(ctx);
  v1::InputChunk c;
  if (!in->Read(&c)) return grpc::Status::OK;
  const uint64_t job_id = c.job_id();
  std::shared_ptr<Job> j;
  {
    std::lock_guard lk(mu_);
    if (grpc::Status st = job_for_locked(who, job_id, &j); !st.ok()) return st;
    if (!j->req.stdin_rank0())
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "job " + std::to_string(job_id) + " was launched without stdin for rank 0"};
    if (j->input_open)
      return {grpc::StatusCode::ALREADY_EXISTS,
              "job " + std::to_string(job_id) + " already has its input stream"};
    j->input_open = true;
  }
  for (;;) {
    if (c.data().size() > kInputChunkMax)
      return {grpc::StatusCode::INVALID_ARGUMENT, "an input chunk of more than 64 KiB"};
    {
      std::unique_lock lk(mu_);
      // Bounded waits, so a client that went away is noticed.
      while (!(j->state == Job::State::done ||
               (j->state == Job::State::running && j->input_sent - j->input_taken < kInputWindow)))
        if (cv_.wait_for(lk, 200ms) == std::cv_status::timeout && ctx->IsCancelled())
          return {grpc::StatusCode::CANCELLED, "client went away"};
      if (j->state == Job::State::done) return grpc::Status::OK;
      const auto n = nodes_.find(j->rank_node.empty() ? 0 : j->rank_node[0]);
      if (n == nodes_.end()) return grpc::Status::OK;  // its node is gone: the job ends
      v1::ManagerMsg m;
      auto* r = m.mutable_input();
      r->set_job_id(job_id);
      r->set_data(c.data());
      r->set_eof(c.eof());
      j->input_sent += c.data().size();
      queue_locked(n->second, std::move(m));
    }
    flush();
    if (c.eof()) return grpc::Status::OK;
    // A client that goes away without saying eof ends rank 0's input too.
    if (!in->Read(&c)) {
      c.Clear();
      c.set_eof(true);
    }
  }
}

grpc::Status Manager::list(grpc::ServerContext* ctx, v1::ListReply* rep) {
  if (!authorized(ctx)) return unauthenticated();
  const Caller who = identify(ctx);
  if (!who.known())
    return unidentified(who);
  std::lock_guard lk(mu_);
  for (auto& [id, j] : jobs_) {
    if (!may_touch(who, *j).empty()) continue;  // other users' jobs are not yours to see
    auto* x = rep->add_jobs();
    x->set_user(user_name(j->uid));
    x->set_job_id(id);
    x->set_program(j->req.program());
    x->set_nranks(j->req.nranks());
    x->set_slice_ns(j->slice_ns);
    x->set_chunk_bytes(j->chunk_bytes);
    x->set_copy_rate(j->copy_rate);
    x->set_detached(j->detached);
    x->set_clients(j->clients);
    // Several jobs run at once: where each runs, and how far it got.
    for (auto& n : node_names(nodes_, j->nodes)) x->add_nodes(std::move(n));
    x->set_slices(j->progress.slices.load(std::memory_order_relaxed));
    // Gang scheduling: its row, quanta, and share of the time since it
    // started that it was not suspended.
    x->set_row(j->row);
    x->set_quanta(j->quanta);
    const uint64_t now = j->ended_ns ? j->ended_ns : now_ns();
    const uint64_t susp = j->suspended_ns + (j->suspended_since ? now - j->suspended_since : 0);
    x->set_suspended_ns(susp);
    x->set_cpu_ns(j->cpu_ns);
    if (!j->switch_ns.empty()) {
      std::vector<uint64_t> sw(j->switch_ns.begin(), j->switch_ns.end());
      std::sort(sw.begin(), sw.end());
      x->set_switches(sw.size());
      x->set_switch_p50_ns(sw[(sw.size() - 1) / 2]);
      x->set_switch_p99_ns(sw[(sw.size() - 1) * 99 / 100]);
    }
    if (j->started_ns && now > j->started_ns)
      x->set_cpu_share(1.0 - static_cast<double>(std::min(susp, now - j->started_ns)) /
                                 static_cast<double>(now - j->started_ns));
    const char* s = "queued";
    switch (j->state) {
      case Job::State::queued:
        s = "queued";
        break;
      case Job::State::starting:
        s = "starting";
        break;
      case Job::State::running:
        // Suspended once every node manager said its ranks are stopped;
        // background when they all hold them at idle priority instead.
        s = j->failed                                                    ? "failing"
            : j->suspended && j->background_acks >= j->nodes.size()       ? "background"
            : j->suspended && j->switch_acks >= j->nodes.size()           ? "suspended"
            : j->suspended                                                ? "suspending"
                                                                          : "running";
        break;
      case Job::State::done:
        s = j->failed ? "failed" : "done";
        break;
    }
    x->set_state(s);
  }
  // The matrix, its columns in node name order; other users' jobs only as
  // taken.
  std::vector<std::pair<std::string, uint32_t>> columns;
  for (const auto& [id, n] : nodes_) columns.emplace_back(n->name, id);
  std::sort(columns.begin(), columns.end());
  for (const auto& c : columns) rep->add_matrix_nodes(c.first);
  for (uint32_t row = 0; row < matrix_.rows(); ++row) {
    auto* m = rep->add_matrix();
    for (const auto& [name, id] : columns) {
      const uint64_t job = matrix_.at(row, id);
      const auto jt = job ? jobs_.find(job) : jobs_.end();
      m->add_job(!job ? 0 : jt != jobs_.end() && may_touch(who, *jt->second).empty() ? job : ~0ull);
    }
  }
  rep->set_active_row(matrix_.active());
  return grpc::Status::OK;
}

}  // namespace bcs::mm
