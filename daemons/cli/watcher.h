// bcs run's watcher: signals and --timeout while the main thread is blocked
// in Launch or reading the Attach stream (commands.cc, submit()).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "bcs.grpc.pb.h"
#include "manager_client.h"
#include "options.h"

namespace bcs::cli {

// After Kill, how long to wait for the job's JobExit before giving up on it.
constexpr auto kKillGrace = std::chrono::seconds(10);
// --timeout counts from JobEvent.started. Past --timeout after Launch
// without it, the manager's List says whether the job is still waiting to
// start (asked again after 1 s, then less often, up to every 10 s).
constexpr auto kStartCheckFirst = std::chrono::seconds(1);
constexpr auto kStartCheckMax = std::chrono::seconds(10);

// What List says of a job that has not said `started` by --timeout after
// Launch: whether, and from when, --timeout should count after all.
enum class StartCheck { wait, running, from_launch, ended };
StartCheck start_check(const grpc::Status& st, const pb::ListReply& rep, uint64_t job);

// A suspension in seconds for a message: "1.9", or "0.042" below 0.1 s.
std::string seconds_text(uint64_t ns);

// Watches for signals and for --timeout while the main thread is blocked in
// Launch or reading the Attach stream. It kills the job (Kill RPC) and, if
// the job does not end in time after that, or a second signal arrives,
// cancels the blocking call so that bcs always gets to teardown.
// --timeout counts from when the job starts running (JobEvent.started):
// on a busy cluster a job may wait for nodes first. A manager that never
// says `started` (one from before it) is found out by List (start_check):
// one that names no nodes counts from Launch, as it always did; one that
// says running on two checks in a row without `started` reaching us counts
// from the first of them.
// Time the job spends suspended by gang scheduling (bcs-mm --mpl) does not
// count either: at --timeout past its start the watcher asks List for the
// job's suspended_ns and waits on by that much (again and again, as more
// suspension comes); it kills only once the job has run --timeout itself.
// A manager that cannot say (List fails, or does not know the job) gets
// the kill at once, as it always did.
class Watcher {
 public:
  using Clock = std::chrono::steady_clock;

  Watcher(SignalBlock& sig, pb::Jobs::Stub* stub, const Connection& conn, const RunOptions& o);
  ~Watcher() { stop(); }
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  void stop();
  // The call the main thread is blocked in (nullptr: none).
  void set_context(grpc::ClientContext* ctx);
  // The job exists: a kill requested earlier is sent now. The timeout
  // waits for job_running(), or for start_check past it.
  void job_launched(uint64_t id);
  // The stream said `started`: the timeout counts from now.
  void job_running();
  int signo();
  bool timed_out();
  // What the manager said the job was doing when it was killed.
  std::string kill_state();
  // How long the job had been suspended by gang scheduling, as List said at
  // the last re-check of --timeout (0: never, or nobody said).
  uint64_t suspended_ns();

 private:
  Clock::duration timeout() const {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(opts_.timeout_ns));
  }

  // Past --timeout after Launch without `started`: asks the manager whether
  // the job still waits to start (outside mu_).
  void check_start(uint64_t job);
  // --timeout past the job's start: asks List how long it was suspended
  // (outside mu_), then waits on by that much or kills it.
  void recheck_timeout(uint64_t job);
  void poke();
  void loop();

  SignalBlock& sig_;
  pb::Jobs::Stub* stub_;
  const Connection& conn_;
  const RunOptions& opts_;
  int wake_;
  std::thread thread_;

  std::mutex mu_;
  bool stopping_ = false;
  grpc::ClientContext* ctx_ = nullptr;
  uint64_t job_id_ = 0;
  bool kill_requested_ = false;
  bool kill_sent_ = false;
  bool timed_out_ = false;
  int signo_ = 0;
  std::string reason_;
  std::string kill_state_;
  std::optional<Clock::time_point> timeout_at_;
  // When --timeout started counting (the job's start, as far as we know
  // it), and its suspension (List's suspended_ns) at the last re-check.
  std::optional<Clock::time_point> started_at_;
  uint64_t suspended_ns_ = 0;
  std::optional<Clock::time_point> cancel_at_;
  // --timeout before `started`: when Launch answered, when to ask List
  // (start_check) and how long to wait before asking again.
  bool running_ = false;
  std::optional<Clock::time_point> launched_at_;
  std::optional<Clock::time_point> check_at_;
  std::optional<Clock::time_point> running_seen_at_;  // when List first said running
  Clock::duration check_every_ = kStartCheckFirst;
};

}  // namespace bcs::cli
