#include "watcher.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>

namespace bcs::cli {

StartCheck start_check(const grpc::Status& st, const pb::ListReply& rep, uint64_t job) {
  // No answer, or no such job: the clock as it was, from Launch.
  if (!st.ok()) return StartCheck::from_launch;
  for (const auto& j : rep.jobs()) {
    if (j.job_id() != job) continue;
    if (j.state() == "done" || j.state() == "failed") return StartCheck::ended;
    // A manager from before `started` names no nodes here either: then,
    // as it always did, the timeout counts from Launch.
    if (j.nodes_size() == 0 && j.state() != "queued") return StartCheck::from_launch;
    if (j.state() == "queued" || j.state() == "starting") return StartCheck::wait;
    // Running (or failing): its `started` was pushed as it went running
    // and is on its way to us.
    return StartCheck::running;
  }
  return StartCheck::from_launch;
}

std::string seconds_text(uint64_t ns) {
  char b[32];
  const double s = static_cast<double>(ns) / 1e9;
  std::snprintf(b, sizeof b, s < 0.1 ? "%.3f" : "%.1f", s);
  return b;
}

Watcher::Watcher(SignalBlock& sig, pb::Jobs::Stub* stub, const Connection& conn, const RunOptions& o)
    : sig_(sig),
      stub_(stub),
      conn_(conn),
      opts_(o),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  thread_ = std::thread([this] { loop(); });
}

void Watcher::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    ctx_ = nullptr;
  }
  poke();
  if (thread_.joinable()) thread_.join();
  if (wake_ >= 0) ::close(wake_);
  wake_ = -1;
}

void Watcher::set_context(grpc::ClientContext* ctx) {
  std::lock_guard lk(mu_);
  ctx_ = ctx;
}

void Watcher::job_launched(uint64_t id) {
  {
    std::lock_guard lk(mu_);
    job_id_ = id;
    launched_at_ = Clock::now();
    if (opts_.timeout_ns && !running_) check_at_ = *launched_at_ + timeout();
  }
  poke();
}

void Watcher::job_running() {
  {
    std::lock_guard lk(mu_);
    if (running_) return;
    running_ = true;
    check_at_.reset();
    if (opts_.timeout_ns) {
      started_at_ = Clock::now();
      timeout_at_ = *started_at_ + timeout();
    }
  }
  poke();
}

int Watcher::signo() {
  std::lock_guard lk(mu_);
  return signo_;
}

bool Watcher::timed_out() {
  std::lock_guard lk(mu_);
  return timed_out_;
}

std::string Watcher::kill_state() {
  std::lock_guard lk(mu_);
  return kill_state_;
}

uint64_t Watcher::suspended_ns() {
  std::lock_guard lk(mu_);
  return suspended_ns_;
}

void Watcher::check_start(uint64_t job) {
  grpc::ClientContext lctx;
  conn_.prepare(lctx, kRpcDeadline);
  pb::ListReply rep;
  const grpc::Status st = stub_->List(&lctx, pb::ListRequest{}, &rep);
  const StartCheck c = start_check(st, rep, job);
  std::lock_guard lk(mu_);
  if (running_ || stopping_) return;  // `started` came meanwhile
  const auto now = Clock::now();
  switch (c) {
    case StartCheck::running:
      // Seen running by the last check too, and still no `started`: this
      // manager will not say it; the job started by then.
      if (running_seen_at_) {
        started_at_ = *running_seen_at_;
        timeout_at_ = *started_at_ + timeout();
        break;
      }
      running_seen_at_ = now;
      [[fallthrough]];
    case StartCheck::wait:
      check_at_ = now + check_every_;
      check_every_ = std::min<Clock::duration>(check_every_ * 2, kStartCheckMax);
      break;
    case StartCheck::from_launch:
      started_at_ = *launched_at_;
      timeout_at_ = *started_at_ + timeout();
      break;
    case StartCheck::ended:  // its stream ends with its exit
      break;
  }
}

void Watcher::recheck_timeout(uint64_t job) {
  grpc::ClientContext lctx;
  conn_.prepare(lctx, kRpcDeadline);
  pb::ListReply rep;
  const grpc::Status st = stub_->List(&lctx, pb::ListRequest{}, &rep);
  std::optional<uint64_t> susp;
  if (st.ok())
    for (const auto& j : rep.jobs())
      if (j.job_id() == job) susp = j.suspended_ns();
  std::lock_guard lk(mu_);
  if (stopping_ || kill_requested_) return;  // a signal came meanwhile
  if (susp && started_at_) {
    suspended_ns_ = *susp;
    const auto deadline = *started_at_ + timeout() +
                          std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(*susp));
    // Not yet run --timeout itself: wait on, and ask again then (it may
    // be suspended more by that time).
    if (Clock::now() < deadline) {
      timeout_at_ = deadline;
      return;
    }
  }
  // Run --timeout, or a manager that cannot say: kill it (loop() sends it).
  kill_requested_ = true;
  timed_out_ = true;
  reason_ = "timeout after " + opts_.timeout;
  if (suspended_ns_) reason_ += " of running (" + seconds_text(suspended_ns_) + " s suspended)";
}

void Watcher::poke() {
  uint64_t one = 1;
  if (wake_ >= 0) {
    ssize_t r = ::write(wake_, &one, sizeof one);
    (void)r;
  }
}

void Watcher::loop() {
  while (true) {
    int ms = -1;
    {
      std::lock_guard lk(mu_);
      if (stopping_) return;
      auto now = Clock::now();
      auto until = [&](Clock::time_point t) {
        auto d = std::chrono::ceil<std::chrono::milliseconds>(t - now).count();
        int v = d <= 0 ? 0 : (d > INT_MAX ? INT_MAX : static_cast<int>(d));
        ms = ms < 0 ? v : std::min(ms, v);
      };
      if (timeout_at_ && !kill_requested_) until(*timeout_at_);
      if (check_at_ && !kill_requested_) until(*check_at_);
      if (cancel_at_) until(*cancel_at_);
      if (kill_requested_ && !kill_sent_ && job_id_) ms = 0;
    }
    pollfd fds[2] = {{sig_.fd(), POLLIN, 0}, {wake_, POLLIN, 0}};
    if (::poll(fds, 2, ms) < 0 && errno != EINTR) return;
    if (fds[1].revents & POLLIN) {
      uint64_t v;
      ssize_t r = ::read(wake_, &v, sizeof v);
      (void)r;
    }

    std::string reason;
    uint64_t kill_id = 0, check_id = 0, recheck_id = 0;
    {
      std::lock_guard lk(mu_);
      if (stopping_) return;
      auto now = Clock::now();
      bool cancel = false;
      if (int s = (fds[0].revents & POLLIN) ? sig_.take() : 0) {
        if (kill_requested_) {
          cancel = true;  // second signal: stop waiting for the job
        } else {
          kill_requested_ = true;
          signo_ = s;
          reason_ = "interrupted";
        }
      }
      if (!kill_requested_ && timeout_at_ && now >= *timeout_at_) {
        // Not killed yet: first List says whether it was suspended meanwhile
        // (recheck_timeout), once per time timeout_at_ comes.
        timeout_at_.reset();
        if (job_id_) {
          recheck_id = job_id_;
        } else {
          kill_requested_ = true;
          timed_out_ = true;
          reason_ = "timeout after " + opts_.timeout;
        }
      }
      if (!kill_requested_ && check_at_ && now >= *check_at_) {
        check_at_.reset();
        check_id = job_id_;
      }
      if (kill_requested_ && !kill_sent_) {
        if (job_id_) {
          kill_sent_ = true;
          kill_id = job_id_;
          reason = reason_;
          cancel_at_ = now + kKillGrace;
        } else {
          cancel = true;  // still launching: abandon Launch
        }
      }
      if (cancel_at_ && now >= *cancel_at_) cancel = true;
      // Under the lock: the main thread clears ctx_ before destroying it.
      if (cancel && ctx_) ctx_->TryCancel();
    }
    if (check_id) check_start(check_id);
    if (recheck_id) recheck_timeout(recheck_id);
    if (check_id || recheck_id) continue;
    if (kill_id) {
      grpc::ClientContext kctx;
      conn_.prepare(kctx, kRpcDeadline);
      pb::KillRequest req;
      req.set_job_id(kill_id);
      req.set_reason(reason);
      pb::KillReply rep;
      grpc::Status st = stub_->Kill(&kctx, req, &rep);
      if (st.ok()) {
        std::lock_guard lk(mu_);
        kill_state_ = rep.state();
      } else {
        say("could not kill job " + std::to_string(kill_id) + ": " + describe(st));
        std::lock_guard lk(mu_);
        if (ctx_) ctx_->TryCancel();
      }
    }
  }
}

}  // namespace bcs::cli
