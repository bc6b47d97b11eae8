// The machine manager's state: registered node managers, jobs, and the
// strobe sender that drives every slice of the running job.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bcs.grpc.pb.h"
#include "bcs/core.h"
#include "bcs/emds.h"
#include "bcs/service.h"
#include "callers.h"
#include "matrix.h"
#include "node_writer.h"
#include "task.h"

namespace bcs::mm {

struct JobRun;
struct Pacing;

struct Config {
  uint64_t slice_ns = 500'000;
  // Per-slice byte budget of a DMA helper; 0: each job's is derived from
  // its node managers' copy rate and its slice (slice_plan.h, chunk_budget).
  uint64_t chunk_bytes = 0;
  // Unmatched sends one receiver may have waiting before sends to it are
  // held in their senders' rings (--max-unexpected; per job bcs run).
  uint64_t max_unexpected = 65536;
  // The strobe sender wakes this much before a slice starts and spins to
  // the exact time (see strobe_sender.cc), unless it runs at real-time
  // priority, where nothing spins. 0: sleep only.
  uint64_t strobe_spin_ns = 30'000;
  // The strobe sender and UCX's async thread, which carry the slices'
  // wake-ups, run at SCHED_FIFO when the kernel permits (sched_hint.h),
  // without spinning; otherwise, or with --no-realtime, at normal priority
  // with the shortest time slice, and the strobe sender spins as above.
  bool realtime = true;
  // The paper's fixed strobe for jobs that do not choose (--strobe fixed);
  // otherwise work-conserving (see strobe_sender.cc).
  bool fixed_strobe = false;
  // Jobs whose node sets do not overlap run at the same time (off: one job
  // at a time on the whole cluster, as before space sharing; for
  // comparisons).
  bool space_share = true;
  // Gang scheduling (strobe_sender.cc): rows of the Ousterhout matrix
  // (--mpl; 1: jobs that share a node manager wait for each other), and
  // how long a row runs before the next one (--quantum).
  uint32_t mpl = 2;
  uint64_t quantum_ns = 10'000'000;
  // How the jobs of the rows not running are held (--policy): stopped
  // (gang: SIGSTOP) or at idle priority in a cpu cgroup (bcs: buffered
  // coscheduling's background policy, daemons/nm/cpu_group.h), so that they
  // use what CPU the running row leaves while its ranks wait in MPI.
  bool background = false;
  std::string token;
  // --munge: callers over TCP may prove who they are with a munge
  // credential decoded by the munged at this socket ("" = not accepted).
  std::string munge_socket;
  // How long a node manager may stay silent (a stopped or paused process,
  // a hung host) before it counts as lost: shorter stalls only delay the
  // job. Its control stream's keepalive is set from it.
  std::chrono::nanoseconds liveness{std::chrono::seconds(60)};
  // How long a microphase may take on every node before the MM gives up on
  // the job (a node that answers keepalives but makes no progress). Longer
  // than the liveness timeout, so that a stall is judged by that first.
  std::chrono::nanoseconds phase_watchdog{std::chrono::seconds(120)};
  // Slices whose statistics the Monitor service keeps (--emds-window).
  size_t emds_window = monitor::EmdsRecorder::kDefaultWindow;
  // Record the per-slice statistics at all (BCS_EMDS=off: no, for
  // measuring what they cost).
  bool emds = true;
};

using NodeStream = grpc::ServerReaderWriter<v1::ManagerMsg, v1::NodeMsg>;

struct Node {
  uint32_t id = 0;
  std::string name, hostname;
  uint32_t pid = 0;
  bool any_user = false;  // runs jobs as any user (Register::any_user)
  uint64_t copy_rate = 0;  // bytes/s it copies memory (Register::copy_rate; 0: unknown)
  // CPUs its ranks may use (Register::cpus; 0: unknown). A host's CPU slots
  // (host_slots.h) are the least of its node managers'.
  uint32_t cpus = 0;
  // Writes its messages to its stream, in order, on a thread of its own
  // (node_writer.h), so that a node manager that does not read delays only
  // its own messages. Set by node_session before the node is registered,
  // stopped before the session returns (the stream dies then).
  std::unique_ptr<NodeWriter> writer;
  std::string ucx_address;
  bool fabric_ready = false;
  uint64_t joined_gen = 0;  // peers generation that first included it
  uint64_t peers_applied = 0;
};

// The most output bytes the manager holds for a job while no client reads
// it (a detached job, a client that stopped reading).
inline constexpr uint64_t kOutputHeld = uint64_t{64} << 20;
// Past this many held bytes the node managers stop reading the job's rank
// pipes (the ranks block in write) until clients have read half of it:
// kOutputHeld above is only reached by what was in flight.
inline constexpr uint64_t kOutputPause = uint64_t{8} << 20;

struct Job {
  enum class State { queued, starting, running, done };
  uint64_t id = 0;
  v1::LaunchRequest req;
  // Who submitted it: its ranks run as this user, and only this user (or
  // an administrator: root, the daemons' user) may attach to, kill or list it.
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<std::string> env;     // of the ranks: req.env with req.env_set applied
  uint64_t slice_ns = 0, chunk_bytes = 0, max_unexpected = 0;
  uint64_t copy_rate = 0;  // what chunk_bytes was derived from (0: named by --chunk)
  bool fixed_strobe = false;
  v1::Binding bind = v1::BIND_DEFAULT;  // as asked; each node resolves the default
  std::vector<uint32_t> nodes;      // fabric ids, sorted
  std::vector<uint32_t> rank_node;  // world rank -> node id
  // Per host name it runs on, where its ranks there begin among the host's
  // CPU slots (StartJob::host_slot_base, host_slots.h), so that jobs
  // running at once on node managers of one host do not share CPUs.
  std::map<std::string, uint32_t> host_slot_base;
  // Gang scheduling (strobe thread writes, under mu_): its row of the
  // matrix and the variable its nodes report on (wire::Strobe::var),
  // whether its ranks are stopped now, the quanta it ran, and the time it
  // spent suspended since it started (started_ns, now_ns()).
  uint32_t row = 0;
  uint16_t phase_var = 1;
  bool suspended = false;
  uint32_t switch_acks = 0;  // nodes that confirmed the last suspend or resume
  uint32_t background_acks = 0;  // of those, nodes that hold it at idle priority
  // For its next slice's EMDS record: switches since its last slice, their
  // cost (per switch the slowest node's), and the slowest answer to the
  // last switch so far (under mu_). The first two are atomic so that each
  // slice's record takes them without mu_ (the strobe sender's loop).
  std::atomic<uint32_t> unrecorded_switches{0};
  std::atomic<uint64_t> unrecorded_switch_ns{0};
  uint64_t last_switch_max_ns = 0;
  uint64_t quanta = 0;
  uint64_t cpu_ns = 0;  // CPU time of its ranks that ended (RankExit.cpu_ns)
  uint64_t started_ns = 0, ended_ns = 0, suspended_ns = 0, suspended_since = 0;
  // What each switch cost its node managers (JobSuspended.cost_ns), the
  // last kSwitchesKept of them.
  std::deque<uint64_t> switch_ns;
  static constexpr size_t kSwitchesKept = 4096;
  State state = State::queued;
  std::chrono::steady_clock::time_point start_deadline;
  std::vector<uint32_t> started;       // nodes that answered JobStarted
  std::vector<std::string> rank_pids;  // "pid on node" per rank, for messages
  std::vector<bool> rank_done;
  uint32_t ranks_done = 0;
  int max_status = 0;  // largest exit status of ranks that ended on their own
  bool failed = false;
  // A rank that aborted only because a peer was gone is not the cause: its
  // failure waits (until noticed_deadline_ns) for the one that is.
  int noticed_status = 0;
  std::string noticed_message;
  uint64_t noticed_deadline_ns = 0;
  int fail_status = 0;
  std::string fail_message;
  // Output..., then exactly one exit. Once a client has received the exit,
  // the output before it is dropped (events_base counts what was dropped),
  // so a standing manager does not keep every job's output forever.
  // Output handed to a client is dropped at once (a running job's output
  // is not kept), and output nobody reads is kept up to kOutputHeld bytes:
  // past that the oldest goes, and a note in the stream says how much.
  std::vector<v1::JobEvent> events;
  size_t events_base = 0;
  uint64_t held_bytes = 0;     // output bytes in `events`
  bool output_paused = false;  // the node managers were told to stop reading
  bool exited = false;
  // MMDS summaries of the ranks that recorded (checked on arrival), by rank.
  std::map<uint32_t, v1::MmdsSummary> mmds;
  // Jobs.Input (req.stdin_rank0): bytes sent to rank 0's node and taken by
  // it (InputTaken); one input stream per job.
  uint64_t input_sent = 0, input_taken = 0;
  bool input_open = false;
  // Written by the strobe sender after each slice, read by Kill for its
  // report: how far the job got, and whether it still moved anything.
  struct Progress {
    std::atomic<uint64_t> slices{0};         // slices run (periods skipped not counted)
    std::atomic<uint64_t> last_start_ns{0};  // when the last one started (now_ns)
    // When the last slice that moved something started; 0: none did yet.
    std::atomic<uint64_t> last_moved_ns{0};
    std::atomic<bool> parked{false};         // the strobe waits for a doorbell
    std::atomic<bool> all_blocked{false};    // every rank waited in MPI after the last slice
    // The microphase (wire::phase_value) every node must complete before the
    // slice goes on, while the strobe sender waits for it; -1 otherwise.
    std::atomic<int64_t> waiting_for{-1};
    std::atomic<uint64_t> waiting_since_ns{0};
  } progress;
  // Kill's question to the job's node managers (DescribeJob): asked, and
  // each one's answer by node id (JobDescribed, checked and cut).
  bool describing = false;
  std::map<uint32_t, std::string> described;
  // Its clients (docs/architecture.md, "A job's clients"). A job launched
  // without --detach ends once no Attach stream is open on it any more
  // (its client was killed, its connection lost), or when none opened
  // within kAttachWait of Launch. A detached job runs on; its output is
  // held for a later attach (kOutputHeld) and never paused while nobody
  // reads it, so that it cannot stall waiting for a reader.
  bool detached = false;
  uint32_t clients = 0;        // Attach streams open on it now
  bool ever_attached = false;
  // Who is named when it ends for want of clients: its launcher until an
  // Attach stream closed, then the client whose stream closed last.
  std::string last_client;
  std::chrono::steady_clock::time_point attach_deadline;
};

// How long after Launch a job not launched with --detach waits for its
// client's Attach before it counts as orphaned: the client attaches right
// after Launch returns, so only a client killed in between misses it.
inline constexpr std::chrono::seconds kAttachWait{30};
// The exit status of a job ended because its clients went away: a hangup.
inline constexpr int kClientGoneStatus = 129;

// Rank 0's input the manager has sent and its node has not taken yet: past
// it, Jobs.Input stops reading the submitter's stream (gRPC flow control
// then holds the submitter back).
inline constexpr uint64_t kInputWindow = uint64_t{1} << 20;
inline constexpr size_t kInputChunkMax = size_t{64} << 10;

class Manager {
 public:
  Manager(const Config& cfg, core::Fabric& fabric);
  ~Manager();

  // gRPC handlers (thread: the gRPC server's).
  grpc::Status node_session(grpc::ServerContext* ctx, NodeStream* stream);
  // Auth.Prove: the manager proves it holds the token (proof.h).
  grpc::Status prove(grpc::ServerContext* ctx, const v1::ProveRequest& req,
                     v1::ProveReply* rep) const;
  grpc::Status launch(grpc::ServerContext* ctx, const v1::LaunchRequest& req, v1::LaunchReply* rep);
  grpc::Status attach(grpc::ServerContext* ctx, uint64_t job_id,
                      grpc::ServerWriter<v1::JobEvent>* w);
  // `state`: what the job was doing (describe_progress in job_calls.cc).
  grpc::Status kill(grpc::ServerContext* ctx, uint64_t job_id, const std::string& reason,
                    std::string* state);
  grpc::Status list(grpc::ServerContext* ctx, v1::ListReply* rep);
  grpc::Status input(grpc::ServerContext* ctx, grpc::ServerReader<v1::InputChunk>* in);
  // The per-slice statistics, for the Monitor service (monitor/), and who
  // may read them.
  const monitor::EmdsRecorder& emds() const { return emds_; }
  const monitor::NodeSeries& node_series() const { return node_series_; }
  // Monitor.JobStats: a job's MMDS summaries (its owner or an admin).
  grpc::Status job_stats(grpc::ServerContext* ctx, const v1::JobStatsRequest& req, v1::JobStatsReply* rep);
  // For Monitor.Follow of one job.
  monitor::MonitorService::JobState job_state(grpc::ServerContext* ctx, uint64_t job_id);
  bool authorized(grpc::ServerContext* ctx) const;

  // Ends every job (used on SIGTERM) and waits, bounded, for them to finish.
  void shutdown();

  // The unix socket (--socket), opened and served by main.
  UnixSessions& unix_sessions() { return unix_; }
  // The TCP port the gRPC server is bound to (loopback callers are found by it).
  void set_tcp_port(uint16_t p) { tcp_port_ = p; }

 private:
  Caller identify(grpc::ServerContext* ctx);
  // Munge callers already identified, by connection (gRPC peer) and
  // credential: a streaming call asks again (munged would call the second
  // decode a replay); another connection presenting the same credential is
  // decoded afresh, and refused. Entries live for munge's default TTL.
  std::mutex munge_mu_;
  std::map<std::string, std::pair<Caller, std::chrono::steady_clock::time_point>> munge_seen_;
  // The answer to a TCP caller with neither the token nor a credential.
  grpc::Status unauthenticated() const;
  // The answer to a caller identify() could not name (why, when it knows).
  grpc::Status unidentified(const Caller& who) const;
  bool is_admin(const Caller& c) const { return c.uid == 0 || c.uid == self_uid_; }
  // Empty if `c` may see / kill / attach to `j`, else why not.
  std::string may_touch(const Caller& c, const Job& j) const;
  // Job `job_id`, if it exists and `who` may touch it (NOT_FOUND,
  // PERMISSION_DENIED otherwise). Under mu_.
  grpc::Status job_for_locked(const Caller& who, uint64_t job_id, std::shared_ptr<Job>* out);
  void queue_locked(const std::shared_ptr<Node>& n, v1::ManagerMsg m);
  void flush();
  // NodeMsg::local_slices, taken without mu_.
  void take_local_slices(const Node& node, const v1::LocalSlices& batch);
  void broadcast_peers_locked();
  void fail_job_locked(Job& j, int status, const std::string& message);
  core::Status connect_node(const Node& n);
  void connect_again_locked(const Job& j);
  void keep_mmds_locked(Job& j, const Node& n, const v1::RankExit& e);
  // The ranks' full reports (distributions, events) kept, oldest first,
  // within kMmdsDetailBudget bytes; past it the oldest lose their detail
  // and keep their counters.
  static constexpr size_t kMmdsDetailBudget = size_t{256} << 20;
  struct MmdsDetail {
    uint64_t job;
    uint32_t rank;
    size_t bytes;
  };
  std::deque<MmdsDetail> mmds_detail_;
  size_t mmds_detail_bytes_ = 0;
  // Fails the job with the failure of a rank that only noticed a lost peer
  // once its grace period is over (or `now`), unless a first cause came.
  void fail_noticed_if_due(Job& j, bool now);
  static constexpr uint64_t kNoticedGraceNs = 2'000'000'000;
  // How long Kill waits for the job's node managers to say what its
  // ranks wait for (DescribeJob).
  static constexpr std::chrono::seconds kDescribeWait{2};
  void finish_job_locked(Job& j);
  void rank_exit_locked(Job& j, uint32_t node, const v1::RankExit& e);
  void node_lost(uint32_t node_id);
  void push_event_locked(Job& j, v1::JobEvent ev);
  void drop_delivered_locked(Job& j, size_t next);
  void pause_output_locked(Job& j, bool pause);
  // Ends `j` as Kill does (a queued job leaves the queue at once).
  void end_job_locked(Job& j, int status, const std::string& message);
  // The Attach stream of `client` on `j` closed (any way); the job ends if
  // it was the last of a job not detached that is still running.
  void client_left(Job& j, const std::string& client);
  // Thread: ends jobs not detached whose client never attached
  // (kAttachWait).
  void watch_unattached();
  std::condition_variable attach_cv_;  // with mu_: a launch, or stopping

  // The strobe sender thread: admits queued jobs and drives the slices of
  // every running one (strobe_sender.cc); each job's code is a coroutine
  // it resumes (job_run.h).
  void strobe_sender();
  // Starts every queued job whose nodes are free, in queue order, without
  // overtaking an earlier job on any of its nodes.
  void admit_locked(std::vector<std::unique_ptr<JobRun>>& runs);
  // Gang scheduling: ends the quantum when it is due (the matrix's next
  // row), then decides which jobs may start slices and stops or continues
  // ranks. True if anything changed (the jobs must look again).
  bool gang_locked(std::vector<std::unique_ptr<JobRun>>& runs, uint64_t now);
  // Why a queued job has not started ("" if nothing holds it).
  std::string why_waiting_locked(const Job& j) const;
  // Gives `j` its CPU slots on each of its hosts beside the running jobs
  // (Job::host_slot_base, host_slots.h).
  void place_on_host_slots_locked(Job& j, const std::vector<std::unique_ptr<JobRun>>& runs);
  Task<bool> run_job(JobRun& r);
  Task<bool> start_job(JobRun& r);
  Task<bool> run_slices(JobRun& r);
  Task<bool> wait_phase(JobRun& r, uint64_t slice, uint8_t phase,
                        std::vector<core::VarReplica>* snap, uint64_t* retries);
  // next: the nodes ran the slice's DEM at the end of the previous one
  // (Strobe::next_dem).
  enum class Start { period, early, unparked, woken, closed, next };
  // Between two slices of a job: when the next one starts.
  Task<Start> wait_for_slice(JobRun& r, Pacing& p);
  // Takes one of the job's bells into `p`; false if it is not the job's.
  bool take_bell(Job& j, Pacing& p, const core::Message& m);
  // Makes the strobe sender look at every job now (a state changed).
  void wake_strobe_sender();

  const Config cfg_;
  core::Fabric& fabric_;
  const uid_t self_uid_;
  const gid_t self_gid_;
  UnixSessions unix_;
  std::atomic<uint16_t> tcp_port_{0};
  monitor::EmdsRecorder emds_{cfg_.emds_window};
  monitor::NodeSeries node_series_{cfg_.emds_window};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool realtime_ = false;  // the strobe sender runs at SCHED_FIFO (its own thread only)
  uint32_t next_node_id_ = 1;
  uint64_t next_job_id_ = 1;
  uint64_t peers_gen_ = 0;
  std::map<uint32_t, std::shared_ptr<Node>> nodes_;
  std::map<uint64_t, std::shared_ptr<Job>> jobs_;
  std::deque<uint64_t> queue_;
  // The highest slice number any job used, plus the gap left after each
  // job's end (strobe thread only); a job's numbers start above it, so the
  // phase values each node reports only ever grow.
  uint64_t slice_ = 0;
  // The gang matrix (strobe thread, under mu_): every admitted job has a
  // row; and when the active row's quantum ends.
  Matrix matrix_{cfg_.mpl};
  uint64_t quantum_end_ = 0;
  // Tells the job's node managers to stop or continue its ranks.
  void suspend_locked(Job& j, bool suspend);
  // Queued by queue_locked, handed to each node's writer by flush(); both
  // under mu_, so that every node gets its messages in the order queued
  // whichever thread flushes.
  std::vector<std::pair<std::shared_ptr<Node>, v1::ManagerMsg>> outbox_;  // guarded by mu_
  std::thread ss_thread_;
  std::thread attach_thread_;
};

}  // namespace bcs::mm
