// The Jobs service's calls on a job that exists: Attach (its events), Kill,
// Input (rank 0's stdin) and List. Launch and the job's life are in
// manager.cc.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "manager.h"
#include "peer.h"

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

grpc::Status Manager::attach(grpc::ServerContext* ctx, uint64_t job_id,
                             grpc::ServerWriter<v1::JobEvent>* w) {
  if (!authorized(ctx)) return unauthenticated();
  const Caller who = identify(ctx);
  std::shared_ptr<Job> j;
  {
    std::lock_guard lk(mu_);
    // A job's output is its owner's.
    if (grpc::Status st = job_for_locked(who, job_id, &j); !st.ok()) return st;
  }
  size_t next = 0;  // absolute index of the next event to send
  for (;;) {
    std::vector<v1::JobEvent> batch;
    bool end = false;
    {
      std::unique_lock lk(mu_);
      // Bounded waits so a client that went away is noticed.
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

grpc::Status Manager::kill(grpc::ServerContext* ctx, uint64_t job_id, const std::string& reason) {
  if (!authorized(ctx)) return unauthenticated();
  const Caller who = identify(ctx);
  {
    std::lock_guard lk(mu_);
    std::shared_ptr<Job> jp;
    if (grpc::Status st = job_for_locked(who, job_id, &jp); !st.ok()) {
      if (st.error_code() == grpc::StatusCode::PERMISSION_DENIED)
        spdlog::warn("refused to kill job {} for {}: {}", job_id, who.describe(),
                     st.error_message());
      return st;
    }
    Job& j = *jp;
    fail_job_locked(j, 143, "killed: " + (reason.empty() ? std::string("by request") : reason));
    if (j.state == Job::State::queued) {
      queue_.erase(std::remove(queue_.begin(), queue_.end(), job_id), queue_.end());
      finish_job_locked(j);
    }
  }
  cv_.notify_all();
  flush();
  return grpc::Status::OK;
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
    const char* s = "queued";
    switch (j->state) {
      case Job::State::queued:
        s = "queued";
        break;
      case Job::State::starting:
        s = "starting";
        break;
      case Job::State::running:
        s = j->failed ? "failing" : "running";
        break;
      case Job::State::done:
        s = j->failed ? "failed" : "done";
        break;
    }
    x->set_state(s);
  }
  return grpc::Status::OK;
}

}  // namespace bcs::mm
