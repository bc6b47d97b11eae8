#include "commands.h"

#include <cstdlib>

#include <algorithm>
#include <grpcpp/create_channel_posix.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "bcs.grpc.pb.h"
#include "cluster.h"
#include "job_limits.h"
#include "bcs/service.h"
#include "jobdir.h"
#include "net.h"
#include "output.h"
#include "peer.h"
#include "tls.h"
#include "token.h"

extern char** environ;

namespace bcs::cli {
namespace {

using Clock = std::chrono::steady_clock;
namespace pb = bcs::v1;

// Slices saved into a job directory: the paper's EMDS window.
constexpr uint32_t kJobDirSlices = 10000;

// How long Launch may take beyond waiting for the node managers.
constexpr int kLaunchSlackMs = 20000;
constexpr uint32_t kWaitNodesMs = 10000;
// After Kill, how long to wait for the job's JobExit before giving up on it.
constexpr auto kKillGrace = std::chrono::seconds(10);
constexpr auto kRpcDeadline = std::chrono::seconds(10);

void say(const std::string& msg) { write_all(2, "bcs: " + msg + "\n"); }

std::string code_name(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "code " + std::to_string(static_cast<int>(c));
  }
}

std::string describe(const grpc::Status& s) {
  return s.error_message().empty() ? code_name(s.error_code())
                                   : code_name(s.error_code()) + ": " + s.error_message();
}

// A channel to the machine manager and what every call on it carries.
struct Connection {
  std::shared_ptr<grpc::Channel> channel;
  std::string token;    // the cluster's shared token, "" for none
  std::string session;  // unix socket: the session id the manager gave us

  void prepare(grpc::ClientContext& ctx,
               std::optional<std::chrono::milliseconds> deadline = std::nullopt) const {
    if (!token.empty()) ctx.AddMetadata(kTokenMetadata, token);
    if (!session.empty()) ctx.AddMetadata(kSessionMetadata, session);
    if (deadline) ctx.set_deadline(std::chrono::system_clock::now() + *deadline);
  }
};

// nullopt after saying why (bad token file).
std::optional<Connection> connect_manager(const std::string& addr, const std::string& token_file) {
  Connection c;
  std::string why;
  auto token = load_token(token_file, &why);
  if (!token) {
    say(why);
    return std::nullopt;
  }
  c.token = *token;
  if (auto where = parse_endpoint(addr); where && where->is_unix) {
    // The manager learns who we are from this very socket (peer.h): the job
    // runs as us.
    auto us = connect_unix_session(where->path, kRpcDeadline, &why);
    if (!us) {
      say("cannot reach the machine manager: " + why);
      return std::nullopt;
    }
    c.session = us->id;
    c.channel = grpc::CreateInsecureChannelFromFd(addr, us->fd.release());
    return c;
  }
  // TLS when $BCS_TLS_CA names the CA of the manager's certificate (a
  // manager started with --tls-cert); else plain TCP: the default is
  // loopback, anything else a private network guarded by the token.
  if (const char* ca = std::getenv(kTlsCaEnv); ca && *ca) {
    grpc::SslCredentialsOptions ssl;
    if (!read_pem(ca, &ssl.pem_root_certs, &why)) {
      say(std::string(kTlsCaEnv) + ": " + why);
      return std::nullopt;
    }
    c.channel = grpc::CreateChannel(addr, grpc::SslCredentials(ssl));
    return c;
  }
  c.channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  return c;
}

// A signal-safe way to be interrupted: SIGINT/SIGTERM/SIGHUP are blocked in
// every thread (gRPC's included, as they inherit the mask) and read from a
// signalfd by the watcher, which can then make RPCs - impossible in a handler.
class SignalBlock {
 public:
  SignalBlock() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
  }
  ~SignalBlock() {
    if (fd_ >= 0) ::close(fd_);
  }
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;
  int fd() const { return fd_; }
  // The pending signal number, or 0.
  int take() {
    signalfd_siginfo si;
    ssize_t n = ::read(fd_, &si, sizeof si);
    return n == static_cast<ssize_t>(sizeof si) ? static_cast<int>(si.ssi_signo) : 0;
  }

 private:
  sigset_t set_, old_;
  int fd_ = -1;
};

// Watches for signals and for --timeout while the main thread is blocked in
// Launch or reading the Attach stream. It kills the job (Kill RPC) and, if
// the job does not end in time after that, or a second signal arrives,
// cancels the blocking call so that bcs always gets to teardown.
class Watcher {
 public:
  Watcher(SignalBlock& sig, pb::Jobs::Stub* stub, const Connection& conn, const RunOptions& o)
      : sig_(sig),
        stub_(stub),
        conn_(conn),
        opts_(o),
        wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Watcher() { stop(); }
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  void stop() {
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
  // The call the main thread is blocked in (nullptr: none).
  void set_context(grpc::ClientContext* ctx) {
    std::lock_guard lk(mu_);
    ctx_ = ctx;
  }
  // The job exists: a kill requested earlier is sent now; the timeout starts.
  void job_started(uint64_t id) {
    {
      std::lock_guard lk(mu_);
      job_id_ = id;
      if (opts_.timeout_ns)
        timeout_at_ = Clock::now() + std::chrono::nanoseconds(opts_.timeout_ns);
    }
    poke();
  }
  int signo() {
    std::lock_guard lk(mu_);
    return signo_;
  }
  bool timed_out() {
    std::lock_guard lk(mu_);
    return timed_out_;
  }

 private:
  void poke() {
    uint64_t one = 1;
    if (wake_ >= 0) {
      ssize_t r = ::write(wake_, &one, sizeof one);
      (void)r;
    }
  }

  void loop() {
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
      uint64_t kill_id = 0;
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
          kill_requested_ = true;
          timed_out_ = true;
          reason_ = "timeout after " + opts_.timeout;
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
      if (kill_id) {
        grpc::ClientContext kctx;
        conn_.prepare(kctx, kRpcDeadline);
        pb::KillRequest req;
        req.set_job_id(kill_id);
        req.set_reason(reason);
        pb::KillReply rep;
        grpc::Status st = stub_->Kill(&kctx, req, &rep);
        if (!st.ok()) {
          say("could not kill job " + std::to_string(kill_id) + ": " + describe(st));
          std::lock_guard lk(mu_);
          if (ctx_) ctx_->TryCancel();
        }
      }
    }
  }

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
  std::optional<Clock::time_point> timeout_at_;
  std::optional<Clock::time_point> cancel_at_;
};

// Launch, attach, forward output; returns bcs's exit status. Messages are
// printed here, before the caller tears the embedded cluster down.
int submit(const RunOptions& o, const std::string& addr, SignalBlock& sig) {
  auto conn = connect_manager(addr, o.token_file);
  if (!conn) return 1;
  auto stub = pb::Jobs::NewStub(conn->channel);
  Watcher watcher(sig, stub.get(), *conn, o);

  pb::LaunchRequest req;
  req.set_program(o.program);
  for (const auto& a : o.args) req.add_args(a);
  // bcs's environment as it is (but never the cluster's token); the settings
  // (--env, -x) are applied by the manager, which checks them (it trusts no
  // client).
  const std::string token_kv = std::string(kTokenEnv) + "=";
  for (char** e = environ; e && *e; ++e)
    if (std::string_view(*e).rfind(token_kv, 0) != 0) req.add_env(*e);
  for (const auto& kv : o.env_set) req.add_env_set(kv);
  {
    std::string cwd(PATH_MAX, '\0');
    if (::getcwd(cwd.data(), cwd.size())) req.set_cwd(cwd.c_str());
  }
  req.set_nranks(o.nranks);
  if (o.hosts.empty()) {
    req.set_nodes(o.effective_nodes());
    req.set_ranks_per_node(o.ppn);
  }
  for (const auto& h : o.hosts) {
    auto* x = req.add_hosts();
    x->set_name(h.name);
    x->set_slots(h.slots);
  }
  req.set_slice_ns(o.slice_ns);
  req.set_chunk_bytes(o.chunk_bytes);
  req.set_max_unexpected(o.max_unexpected);
  if (!o.strobe.empty())
    req.set_strobe(o.strobe == "fixed" ? v1::STROBE_FIXED : v1::STROBE_ADAPTIVE);
  req.set_wait_nodes_ms(kWaitNodesMs);

  pb::LaunchReply rep;
  grpc::Status st;
  {
    grpc::ClientContext ctx;
    conn->prepare(ctx, std::chrono::milliseconds(kWaitNodesMs + kLaunchSlackMs));
    watcher.set_context(&ctx);
    st = stub->Launch(&ctx, req, &rep);
    watcher.set_context(nullptr);
  }
  if (!st.ok()) {
    if (int s = watcher.signo()) {
      say(std::string("interrupted (") + ::sigabbrev_np(s) + ") while launching the job");
      return 128 + s;
    }
    if (st.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
        st.error_code() == grpc::StatusCode::INVALID_ARGUMENT)
      say("cannot launch " + o.program + ": " + st.error_message());
    else
      say("cannot launch the job on the machine manager at " + addr + ": " + describe(st));
    return 1;
  }
  const uint64_t job = rep.job_id();
  if (o.verbose) say("job " + std::to_string(job) + " launched on " + addr);

  bool out_ok[2] = {true, true};
  LineLabeler labeler(o.label, [&](int stream, std::string_view data) {
    int i = stream == pb::STDERR ? 1 : 0;
    // A reader that went away (bcs run ... | head) must not stop the job's
    // other stream or the exit status from getting through.
    if (out_ok[i]) out_ok[i] = write_all(i + 1, data);
  });
  std::optional<pb::JobExit> job_exit;
  {
    grpc::ClientContext ctx;
    conn->prepare(ctx);
    watcher.set_context(&ctx);
    watcher.job_started(job);
    pb::AttachRequest areq;
    areq.set_job_id(job);
    auto reader = stub->Attach(&ctx, areq);
    pb::JobEvent ev;
    while (reader->Read(&ev)) {
      if (ev.has_output()) {
        const auto& out = ev.output();
        labeler.feed(out.rank(), out.stream(), out.data());
      } else if (ev.has_exit() && !job_exit) {
        job_exit = ev.exit();
      }
    }
    st = reader->Finish();
    watcher.set_context(nullptr);
  }
  labeler.flush();
  watcher.stop();

  if (watcher.timed_out()) {
    say("job " + std::to_string(job) + " timed out after " + o.timeout);
    return 124;
  }
  if (int s = watcher.signo()) {
    say("job " + std::to_string(job) + " killed: bcs was interrupted (" + ::sigabbrev_np(s) + ")");
    return 128 + s;
  }
  if (!job_exit) {
    say("lost the machine manager: " +
        (st.ok() ? std::string("the job's event stream ended without an exit status") : describe(st)));
    return 1;
  }
  if (!job_exit->message().empty()) say(job_exit->message());
  int status = job_exit->status();
  return status >= 0 && status <= 255 ? status : 1;
}

// One Monitor call for a job directory: the reply, or nothing (said once).
template <class Reply, class Call>
bool fetch_for_job_dir(const std::string& addr, const std::string& token_file, Reply* rep,
                       Call&& call) {
  auto conn = connect_manager(addr, token_file);
  if (!conn) return false;
  auto stub = pb::Monitor::NewStub(conn->channel);
  grpc::ClientContext ctx;
  conn->prepare(ctx, kRpcDeadline);
  if (grpc::Status st = call(*stub, ctx, rep); !st.ok()) {
    // NOT_FOUND: nothing recorded (a node without slices, BCS_EMDS=off).
    if (st.error_code() != grpc::StatusCode::NOT_FOUND)
      say("cannot read the job's statistics: " + describe(st));
    return false;
  }
  return true;
}

// The manager's slice series (its last `last` slices), for a job directory.
std::vector<monitor::SliceRecord> fetch_slices(const std::string& addr, const std::string& token_file,
                                               uint32_t last) {
  std::vector<monitor::SliceRecord> out;
  pb::SlicesReply rep;
  if (!fetch_for_job_dir(addr, token_file, &rep, [&](pb::Monitor::Stub& st, grpc::ClientContext& c, auto* r) {
        pb::SlicesRequest req;
        req.set_last(last);
        return st.Slices(&c, req, r);
      }))
    return out;
  for (const auto& s : rep.slices()) out.push_back(monitor::slice_from_proto(s));
  return out;
}

// A node's local series from the manager (empty if it has none).
std::vector<monitor::LocalSliceRecord> fetch_node_slices(const std::string& addr,
                                                         const std::string& token_file,
                                                         const std::string& node) {
  std::vector<monitor::LocalSliceRecord> out;
  pb::NodeSlicesReply rep;
  if (!fetch_for_job_dir(addr, token_file, &rep, [&](pb::Monitor::Stub& st, grpc::ClientContext& c, auto* r) {
        pb::NodeSlicesRequest req;
        req.set_node(node);
        req.set_last(kJobDirSlices);
        return st.NodeSlices(&c, req, r);
      }))
    return out;
  for (const auto& s : rep.slices()) {
    monitor::LocalSliceRecord r;
    std::string why;
    if (monitor::local_from_proto(s, &r, &why)) out.push_back(r);
  }
  return out;
}

template <class Fn>
int with_manager_errors(const std::string& addr, Fn&& fn) {
  grpc::Status st = fn();
  if (st.ok()) return 0;
  say("machine manager at " + addr + ": " + describe(st));
  return 1;
}

}  // namespace

namespace {
int run_cluster_job(const RunOptions& o, SignalBlock& sig);
}  // namespace

int run_job(const RunOptions& o) {
  // gRPC turns SIGPIPE off too; be explicit: a closed stdout is an EPIPE.
  ::signal(SIGPIPE, SIG_IGN);
  // Before any thread exists, so that every thread inherits the mask.
  SignalBlock sig;
  if (sig.fd() < 0) {
    say(std::string("signalfd: ") + std::strerror(errno));
    return 1;
  }
  // Refused before anything starts: 100000 ranks would fork until the node
  // manager falls over. With --manager the node count may be unknown here;
  // the manager checks again.
  if (std::string why = job_size_problem(o.nranks, o.effective_nodes(), o.ppn); !why.empty()) {
    say("-n " + std::to_string(o.nranks) + ": " + why);
    return 2;
  }
  std::string dir_err;
  const std::string job_dir = job_dir_prepare(o, &dir_err);
  if (!dir_err.empty()) {
    say(dir_err);
    return 2;
  }
  if (!job_dir.empty()) {
    RunOptions monitored = o;
    monitored.job_dir = job_dir;
    monitored.env_set.push_back("BCS_JOB_DIR=" + job_dir);
    const int rc = run_cluster_job(monitored, sig);
    job_dir_finish(job_dir);
    return rc;
  }
  return run_cluster_job(o, sig);
}

namespace {

// The job on the given manager, or on a private cluster started for it.
int run_cluster_job(const RunOptions& o, SignalBlock& sig) {
  if (o.manager) return submit(o, *o.manager, sig);

  // The cluster is destroyed (torn down) on every path out of here,
  // including exceptions.
  EmbeddedCluster cluster;
  try {
    ClusterConfig cfg;
    cfg.nodes = o.effective_nodes();
    // One node manager per host that gets a rank, named after it, so that
    // the manager finds them by name as it would on a real cluster.
    cfg.names = used_hosts(o.hosts, o.nranks);
    if (!cfg.names.empty()) cfg.nodes = static_cast<uint32_t>(cfg.names.size());
    cfg.slice = o.slice;
    cfg.chunk = o.chunk;
    cfg.liveness = o.liveness;
    cfg.token_file = o.token_file;
    cfg.verbose = o.verbose;
    cfg.interrupt_fd = sig.fd();
    cluster.start(cfg);
  } catch (const StartInterrupted&) {
    int s = sig.take();
    say(std::string("interrupted (") + (s ? ::sigabbrev_np(s) : "?") + ") while starting the cluster");
    cluster.teardown();
    return 128 + (s ? s : SIGINT);
  } catch (const ClusterError& e) {
    say(std::string("cannot start the private cluster: ") + e.what());
    cluster.teardown();
    return 1;
  }
  int rc = submit(o, cluster.address(), sig);
  // The private cluster ran this job only: its slices are the job's. (The
  // manager keeps the last kJobDirSlices; a standing cluster's slices are
  // every job's, read them with bcs stats.)
  if (!o.job_dir.empty()) {
    job_dir_save_slices(o.job_dir, fetch_slices(cluster.address(), o.token_file, kJobDirSlices));
    // Each node's own series: its last slices reached the manager before
    // its last rank's exit (the node manager sends them first).
    for (const auto& name : cluster.node_names())
      job_dir_save_node(o.job_dir, name, fetch_node_slices(cluster.address(), o.token_file, name));
  }
  cluster.teardown();
  return rc;
}

}  // namespace

int list_jobs(const JobsOptions& o) {
  auto conn = connect_manager(o.manager, o.token_file);
  if (!conn) return 1;
  auto stub = pb::Jobs::NewStub(conn->channel);
  pb::ListReply rep;
  int rc = with_manager_errors(o.manager, [&] {
    grpc::ClientContext ctx;
    conn->prepare(ctx, kRpcDeadline);
    return stub->List(&ctx, pb::ListRequest{}, &rep);
  });
  if (rc) return rc;
  std::printf("%8s  %-8s  %-10s  %6s  %s\n", "JOB", "STATE", "USER", "RANKS", "PROGRAM");
  for (const auto& j : rep.jobs())
    std::printf("%8llu  %-8s  %-10s  %6u  %s\n", static_cast<unsigned long long>(j.job_id()),
                j.state().c_str(), j.user().empty() ? "-" : j.user().c_str(), j.nranks(),
                j.program().c_str());
  return 0;
}

int kill_job(const KillOptions& o) {
  auto conn = connect_manager(o.manager, o.token_file);
  if (!conn) return 1;
  auto stub = pb::Jobs::NewStub(conn->channel);
  return with_manager_errors(o.manager, [&] {
    grpc::ClientContext ctx;
    conn->prepare(ctx, kRpcDeadline);
    pb::KillRequest req;
    req.set_job_id(o.job_id);
    req.set_reason("requested with `bcs kill`");
    pb::KillReply rep;
    return stub->Kill(&ctx, req, &rep);
  });
}

// Which slices bcs stats asks for: the last --last, or --from..--to (the
// same fields in SlicesRequest and NodeSlicesRequest).
template <class Request>
void set_window(const StatsOptions& o, Request* req) {
  req->set_last(o.last);
  if (o.from || o.to) {
    req->set_range(true);
    req->set_first_slice(o.from.value_or(0));
    req->set_last_slice(o.to.value_or(UINT64_MAX));
  }
}

// One call of the Monitor service; the manager's error, if any, said.
template <class Call>
int monitor_call(const std::string& manager, const std::string& token_file, Call&& call) {
  auto conn = connect_manager(manager, token_file);
  if (!conn) return 1;
  auto stub = pb::Monitor::NewStub(conn->channel);
  return with_manager_errors(manager, [&] {
    grpc::ClientContext ctx;
    conn->prepare(ctx, kRpcDeadline);
    return call(*stub, ctx);
  });
}

// bcs stats JOB: the MMDS summaries the manager kept for the job.
int show_job_stats(const StatsOptions& o, uint64_t job) {
  pb::JobStatsReply rep;
  int rc = monitor_call(o.manager, o.token_file, [&](pb::Monitor::Stub& stub, grpc::ClientContext& ctx) {
    pb::JobStatsRequest req;
    req.set_job_id(job);
    return stub.JobStats(&ctx, req, &rep);
  });
  if (rc) return rc;
  std::vector<monitor::RankReport> ranks;
  for (const auto& m : rep.ranks()) {
    monitor::RankReport r;
    std::string why;
    if (!monitor::mmds_from_proto(m, &r, &why)) {
      say("job " + std::to_string(job) + ": a bad summary from the manager: " + why);
      return 1;
    }
    r.size = static_cast<int>(rep.nranks());
    ranks.push_back(std::move(r));
  }
  if (ranks.empty()) {
    say("job " + std::to_string(job) + ": no MMDS summaries (was it run with BCS_MDS=summary or all?)");
    return 1;
  }
  return show_mmds(o, &ranks);
}

// bcs stats --node NAME: one node's local series.
int show_node_stats(const StatsOptions& o) {
  pb::NodeSlicesReply rep;
  int rc = monitor_call(o.manager, o.token_file, [&](pb::Monitor::Stub& stub, grpc::ClientContext& ctx) {
    pb::NodeSlicesRequest req;
    req.set_node(o.node);
    set_window(o, &req);
    return stub.NodeSlices(&ctx, req, &rep);
  });
  if (rc) return rc;
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1e3; };
  std::printf("node %s\n%10s %9s %9s %9s %9s %9s %11s %7s %7s %12s %5s %7s\n", rep.node().c_str(),
              "slice", "ltdem_us", "ltmsm_us", "ltp2p_us", "ltbbm_us", "ltrm_us", "descriptors",
              "matches", "chunks", "bytes", "colls", "blocked");
  for (const auto& s : rep.slices()) {
    if (s.phase_ns_size() != 5) continue;
    std::printf("%10llu %9.1f %9.1f %9.1f %9.1f %9.1f %11u %7u %7u %12llu %5u %4u/%-2u\n",
                static_cast<unsigned long long>(s.slice()), us(s.phase_ns(0)), us(s.phase_ns(1)),
                us(s.phase_ns(2)), us(s.phase_ns(3)), us(s.phase_ns(4)), s.descriptors(), s.matches(),
                s.chunks(), static_cast<unsigned long long>(s.bytes()), s.collectives(), s.blocked(),
                s.nlocal());
  }
  return 0;
}

// bcs trace JOB / bcs plot JOB: the job's slices from the manager's window
// (every slice carries its job), and for a trace its ranks' summaries.
int export_job(const ExportOptions& o, uint64_t job) {
  const auto all = fetch_slices(o.manager, o.token_file, kJobDirSlices);
  std::vector<monitor::SliceRecord> slices;
  for (const auto& s : all)
    if (s.job == job) slices.push_back(s);
  if (slices.empty()) {
    say("job " + std::to_string(job) + ": no slices in the manager's window (the last " +
        std::to_string(kJobDirSlices) + ")");
    return 1;
  }
  return export_write(o, slices, {}, "job " + std::to_string(job));
}

int export_any(const ExportOptions& o) {
  if (!o.dir.empty() && o.dir.find_first_not_of("0123456789") == std::string::npos && o.dir.size() < 20)
    return export_job(o, std::stoull(o.dir));
  return export_slices(o);
}

int show_stats(const StatsOptions& o) {
  if (!o.node.empty()) return show_node_stats(o);
  if (!o.target.empty()) {
    if (o.target.find_first_not_of("0123456789") == std::string::npos && o.target.size() < 20)
      return show_job_stats(o, std::stoull(o.target));
    return show_mmds(o);
  }
  pb::SlicesReply rep;
  int rc = monitor_call(o.manager, o.token_file, [&](pb::Monitor::Stub& stub, grpc::ClientContext& ctx) {
    pb::SlicesRequest req;
    set_window(o, &req);
    return stub.Slices(&ctx, req, &rep);
  });
  if (rc) return rc;
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1e3; };
  // start: "period" (the strobe's clock), "early" (every rank was blocked),
  // "lease" (early, run by a one-node job's node on its own), "ahead" (its
  // DEM ran on the nodes as the slice before ended) or "+N" (a rank posted
  // after N periods with nothing to do: parked).
  std::printf("%10s %11s %6s %9s %9s %9s %9s %9s %11s %7s %12s %5s %8s\n", "slice", "period_us",
              "start", "dem_us", "msm_us", "p2p_us", "bbm_us", "rm_us", "descriptors", "chunks",
              "bytes", "colls", "late_us");
  uint64_t early = 0, skipped = 0, leased = 0, held = 0, bells = 0, ahead = 0;
  for (const auto& s : rep.slices()) {
    const std::string start = s.skipped()  ? "+" + std::to_string(s.skipped())
                              : s.leased() ? "lease"
                              : s.dem_ahead() ? "ahead"
                              : s.early()  ? "early"
                                           : "period";
    early += s.early() && !s.skipped();
    leased += s.leased();
    held += s.held();
    bells += s.bells();
    ahead += s.dem_ahead();
    skipped += s.skipped();
    std::printf("%10llu %11.1f %6s %9.1f %9.1f %9.1f %9.1f %9.1f %11u %7u %12llu %5u %8.1f\n",
                static_cast<unsigned long long>(s.slice()), us(s.period_ns()), start.c_str(),
                us(s.dem_ns()), us(s.msm_ns()), us(s.p2p_ns()), us(s.bbm_ns()), us(s.rm_ns()),
                s.descriptors(), s.chunks(), static_cast<unsigned long long>(s.bytes() + s.coll_bytes()),
                s.collectives(), us(s.late_ns()));
  }
  std::printf(
      "(%d of %llu slices; %llu started early; %llu ran on a node's lease, %llu with their DEM run "
      "ahead; %llu periods skipped (parked or on a lease); %llu sends held back by "
      "--max-unexpected; %llu doorbells)\n",
      rep.slices_size(), static_cast<unsigned long long>(rep.total_slices()),
      static_cast<unsigned long long>(early), static_cast<unsigned long long>(leased),
      static_cast<unsigned long long>(ahead),
      static_cast<unsigned long long>(skipped), static_cast<unsigned long long>(held),
      static_cast<unsigned long long>(bells));
  // The figures an operator asks first: does the clock keep its period?
  // (Over the slices the clock started: early ones are not its doing.)
  std::vector<uint64_t> periods, late;
  for (const auto& s : rep.slices())
    if (s.period_ns() && !s.early()) {
      periods.push_back(s.period_ns());
      late.push_back(s.late_ns());
    }
  if (!periods.empty()) {
    auto pct = [](std::vector<uint64_t> v, double q) {
      std::sort(v.begin(), v.end());
      return static_cast<double>(v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)]) / 1e3;
    };
    std::printf("period: p50 %.1f us, p99 %.1f us, max %.1f us; strobe lateness p99 %.1f us\n",
                pct(periods, 0.5), pct(periods, 0.99), pct(periods, 1.0), pct(late, 0.99));
  }
  return 0;
}

int follow_slices(const MonitorOptions& o) {
  SignalBlock sig;  // Ctrl-C ends the stream cleanly (the call is cancelled)
  auto conn = connect_manager(o.manager, o.token_file);
  if (!conn) return 1;
  auto stub = pb::Monitor::NewStub(conn->channel);
  grpc::ClientContext ctx;
  conn->prepare(ctx, std::chrono::hours(24 * 365));
  std::atomic<bool> interrupted{false};
  std::thread watcher([&] {
    pollfd p{sig.fd(), POLLIN, 0};
    while (!interrupted.load()) {
      if (::poll(&p, 1, 200) > 0) {
        interrupted = true;
        ctx.TryCancel();
      }
    }
  });
  pb::FollowRequest freq;
  freq.set_job_id(o.job);
  auto reader = stub->Follow(&ctx, freq);
  pb::FollowEvent ev;
  uint64_t shown = 0;
  auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1e3; };
  // On a terminal the table redraws in place, newest slice at the bottom,
  // as top does; into a pipe or file it is plain rows, one header.
  const bool tty = ::isatty(1);
  winsize ws{};
  const size_t rows = tty && ::ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 6 ? ws.ws_row - 4 : 20;
  std::deque<std::string> screen;
  uint64_t missed = 0;
  char header[160], line[160];
  std::snprintf(header, sizeof header, "%10s %11s %9s %9s %9s %9s %9s %11s %7s %12s %5s\n", "slice",
                "period_us", "dem_us", "msm_us", "p2p_us", "bbm_us", "rm_us", "descriptors", "chunks",
                "bytes", "colls");
  if (!tty) std::fputs(header, stdout);
  while ((o.count == 0 || shown < o.count) && reader->Read(&ev)) {
    missed += ev.missed();
    if (ev.missed() && !tty)
      std::printf("(%llu slices not shown: this client fell behind the window)\n",
                  static_cast<unsigned long long>(ev.missed()));
    for (const auto& s : ev.slices()) {
      std::snprintf(line, sizeof line, "%10llu %11.1f %9.1f %9.1f %9.1f %9.1f %9.1f %11u %7u %12llu %5u\n",
                    static_cast<unsigned long long>(s.slice()), us(s.period_ns()), us(s.dem_ns()),
                    us(s.msm_ns()), us(s.p2p_ns()), us(s.bbm_ns()), us(s.rm_ns()), s.descriptors(),
                    s.chunks(), static_cast<unsigned long long>(s.bytes() + s.coll_bytes()),
                    s.collectives());
      if (tty) {
        screen.emplace_back(line);
        if (screen.size() > rows) screen.pop_front();
      } else {
        std::fputs(line, stdout);
      }
      if (++shown == o.count) break;
    }
    if (tty) {
      std::printf("\x1b[H\x1b[2J%s slices%s: %llu shown%s\n", o.job ? ("job " + std::to_string(o.job)).c_str() : "all",
                  "", static_cast<unsigned long long>(shown),
                  missed ? (", " + std::to_string(missed) + " missed (fell behind)").c_str() : "");
      std::fputs(header, stdout);
      for (const auto& l : screen) std::fputs(l.c_str(), stdout);
    }
    std::fflush(stdout);
  }
  // Stopped by --count: cancel the stream (else it ended by itself: the
  // job ended, the manager stopped, or the call failed).
  const bool enough = o.count && shown >= o.count;
  if (enough) ctx.TryCancel();
  grpc::Status st = reader->Finish();
  const bool was_interrupted = interrupted.exchange(true);
  watcher.join();
  if (enough || st.ok()) return 0;
  if (was_interrupted && st.error_code() == grpc::StatusCode::CANCELLED) return 0;
  say("machine manager at " + o.manager + ": " + describe(st));
  return 1;
}

}  // namespace bcs::cli
