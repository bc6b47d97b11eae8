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
#include <sys/stat.h>
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
#include "launch.h"
#include "manager_client.h"
#include "net.h"
#include "output.h"
#include "peer.h"
#include "tls.h"
#include "token.h"
#include "watcher.h"

extern char** environ;

namespace bcs::cli {
namespace {

using Clock = std::chrono::steady_clock;
namespace pb = bcs::v1;


// How long Launch may take beyond waiting for the node managers.
constexpr int kLaunchSlackMs = 20000;
constexpr uint32_t kWaitNodesMs = 10000;
// `bcs run --stdin`: whether bcs's stdin goes to rank 0. "auto" forwards
// what a user pipes or redirects in (a pipe, a socket, a file) and leaves a
// terminal or /dev/null alone, so an interactive `bcs run` never reads
// the keyboard behind the user's back.
bool stdin_goes_to_rank0(const std::string& how) {
  if (how == "none") return false;
  if (how == "0") return true;
  struct stat st {};
  if (::fstat(0, &st) != 0) return false;
  return S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISREG(st.st_mode);
}

// Feeds bcs's stdin to rank 0 (Jobs.Input) from a thread of its own, in
// chunks of 64 KiB, then eof. The manager holds the stream back while rank
// 0 does not read (its window), so a large input costs no memory anywhere.
// Destroying it stops at once: the call is cancelled, what is unread stays
// unread (the job has ended, nobody could read it).
class StdinFeeder {
 public:
  StdinFeeder(pb::Jobs::Stub& stub, const Connection& conn, uint64_t job) {
    conn.prepare(ctx_);
    thread_ = std::thread([this, &stub, job] { feed(stub, job); });
  }
  ~StdinFeeder() {
    stop_ = true;
    ctx_.TryCancel();
    thread_.join();
  }
  StdinFeeder(const StdinFeeder&) = delete;
  StdinFeeder& operator=(const StdinFeeder&) = delete;

 private:
  void feed(pb::Jobs::Stub& stub, uint64_t job) {
    pb::InputReply rep;
    auto w = stub.Input(&ctx_, &rep);
    std::string buf(64 << 10, '\0');
    pb::InputChunk c;
    c.set_job_id(job);
    while (!stop_) {
      // A bounded wait, so that the job's end is noticed on a silent stdin.
      pollfd p{0, POLLIN, 0};
      const int r = ::poll(&p, 1, 100);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) continue;
      const ssize_t n = r < 0 ? 0 : ::read(0, buf.data(), buf.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {  // EOF (or an error, which ends the input alike)
        c.clear_data();
        c.set_eof(true);
        if (w->Write(c)) w->WritesDone();
        break;
      }
      c.set_data(buf.data(), static_cast<size_t>(n));
      if (!w->Write(c)) break;  // the job ended, or the call was cancelled
    }
    const grpc::Status st = w->Finish();
    if (!st.ok() && !stop_ && st.error_code() != grpc::StatusCode::CANCELLED)
      say("standard input not forwarded to rank 0: " + describe(st));
  }

  grpc::ClientContext ctx_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Launch, attach, forward output; returns bcs's exit status. Messages are
// printed here, before the caller tears the embedded cluster down.
// `job_out`: the job's id once launched (0 until then); `started_on`: the
// node managers it ran on, as JobEvent.started named them.
int submit(const RunOptions& o, const std::string& addr, SignalBlock& sig, uint64_t* job_out = nullptr,
           std::vector<std::string>* started_on = nullptr) {
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
  if (!o.bind.empty()) req.set_bind(o.bind == "none" ? v1::BIND_NONE : v1::BIND_CORE);
  // A detached job's stdin is /dev/null: nobody stays to feed it.
  const bool forward_stdin = !o.detach && stdin_goes_to_rank0(o.stdin_to);
  req.set_stdin_rank0(forward_stdin);
  req.set_wait_nodes_ms(kWaitNodesMs);
  req.set_detach(o.detach);
  req.set_client_pid(static_cast<uint32_t>(::getpid()));

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
  if (job_out) *job_out = job;
  if (o.verbose) say("job " + std::to_string(job) + " launched on " + addr);
  if (o.detach) {
    // The id alone on stdout, for scripts (JOB=$(bcs run --detach ...)).
    std::printf("%llu\n", static_cast<unsigned long long>(job));
    std::fflush(stdout);
    say("job " + std::to_string(job) + " runs detached on " + addr + ": `bcs attach " +
        std::to_string(job) + " --manager " + addr + "` for its output and exit status, `bcs kill " +
        std::to_string(job) + "` to end it");
    return 0;
  }

  bool out_ok[2] = {true, true};
  LineLabeler labeler(o.label, [&](int stream, std::string_view data) {
    int i = stream == pb::STDERR ? 1 : 0;
    // A reader that went away (bcs run ... | head) must not stop the job's
    // other stream or the exit status from getting through.
    if (out_ok[i]) out_ok[i] = write_all(i + 1, data);
  });
  std::optional<pb::JobExit> job_exit;
  // Rank 0's stdin, fed while the job runs; stopped (the call cancelled)
  // when it ends, whatever is left unread.
  std::unique_ptr<StdinFeeder> feeder;
  if (forward_stdin) feeder = std::make_unique<StdinFeeder>(*stub, *conn, job);
  {
    grpc::ClientContext ctx;
    conn->prepare(ctx);
    // Named by the manager if it ends the job because we went away.
    ctx.AddMetadata(kClientMetadata, "bcs run, pid " + std::to_string(::getpid()));
    watcher.set_context(&ctx);
    watcher.job_launched(job);
    pb::AttachRequest areq;
    areq.set_job_id(job);
    auto reader = stub->Attach(&ctx, areq);
    pb::JobEvent ev;
    while (reader->Read(&ev)) {
      if (ev.has_output()) {
        const auto& out = ev.output();
        labeler.feed(out.rank(), out.stream(), out.data());
      } else if (ev.has_started()) {
        watcher.job_running();
        if (started_on) started_on->assign(ev.started().nodes().begin(), ev.started().nodes().end());
      } else if (ev.has_exit() && !job_exit) {
        job_exit = ev.exit();
      }
    }
    st = reader->Finish();
    watcher.set_context(nullptr);
  }
  feeder.reset();
  labeler.flush();
  watcher.stop();

  if (watcher.timed_out()) {
    const std::string state = watcher.kill_state();
    // --timeout counts running time only: the time gang scheduling kept the
    // job suspended came on top.
    const uint64_t susp = watcher.suspended_ns();
    say("job " + std::to_string(job) + " timed out after " + o.timeout +
        (susp ? " of running time (also " + seconds_text(susp) + " s suspended)" : "") +
        (state.empty() ? "" : ": " + state));
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

}  // namespace

namespace {
int run_cluster_job(const RunOptions& o, SignalBlock& sig);
}  // namespace

int run_job(const RunOptions& given) {
  RunOptions o = given;
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
  if (!record_prepare(&o)) return 2;
  std::string dir_err;
  // A detached job's statistics stay with the manager (bcs stats JOB): no
  // bcs waits for its end to write them into a directory.
  const std::string job_dir = o.detach ? std::string() : job_dir_prepare(o, &dir_err);
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
  if (o.manager) {
    uint64_t job = 0;
    std::vector<std::string> ran_on;
    const int rc = submit(o, *o.manager, sig, &job, &ran_on);
    // Ranks on other hosts could not write into this directory: their
    // reports come from the manager. Then the job's own slices from the
    // standing cluster's window (its own: other jobs may have run beside
    // it), and its nodes' (those `started` named and its ranks reported
    // from), each holding only this job's rows.
    if (!o.job_dir.empty() && job) {
      std::vector<monitor::RankReport> ranks;
      if (fetch_job_reports(*o.manager, o.token_file, job, true, &ranks) == 0)
        job_dir_save_reports(o.job_dir, ranks);
      for (auto& n : job_dir_nodes(o.job_dir))
        if (std::find(ran_on.begin(), ran_on.end(), n) == ran_on.end()) ran_on.push_back(std::move(n));
      job_dir_save_series(o.job_dir, *o.manager, o.token_file, job, ran_on);
    }
    return rc;
  }

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
  if (!o.job_dir.empty()) job_dir_save_series(o.job_dir, cluster.address(), o.token_file, 0, cluster.node_names());
  cluster.teardown();
  return rc;
}

// bcs jobs --matrix: rows by node managers, each cell the job holding it.
void print_matrix(const pb::ListReply& rep) {
  size_t w = 4;
  for (const auto& n : rep.matrix_nodes()) w = std::max(w, n.size());
  std::printf("%5s", "ROW");
  for (const auto& n : rep.matrix_nodes()) std::printf("  %*s", static_cast<int>(w), n.c_str());
  std::printf("\n");
  for (int row = 0; row < rep.matrix_size(); ++row) {
    std::printf("%c%4d", static_cast<uint32_t>(row) == rep.active_row() ? '*' : ' ', row);
    for (uint64_t job : rep.matrix(row).job()) {
      const std::string cell = job == 0 ? "." : job == ~0ull ? "#" : std::to_string(job);
      std::printf("  %*s", static_cast<int>(w), cell.c_str());
    }
    std::printf("\n");
  }
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
  if (o.matrix) {
    print_matrix(rep);
    return 0;
  }
  // SLICE and CHUNK: the job's strobe period and per-slice budget; RATE the
  // copy rate the budget was derived from ("-": --chunk named it).
  // MODE: "detached" (runs on without a client, bcs run --detach) or
  // "attached" (ends when its last client goes away); CLIENTS: how many
  // follow its output now (bcs run, bcs attach). Several jobs run at once
  // on disjoint node managers: SLICES, how many it ran (its own count), and
  // NODES, where ("-": not placed yet). Gang scheduling: ROW, its row of
  // the matrix; QUANTA, the quanta it ran; SHARE, the part of the time
  // since it started that it was not suspended; SW_P50_US and SW_P99_US,
  // what stopping or continuing its ranks cost its node managers ("-":
  // never switched); CPU_S, the CPU time its ranks used, counted as they
  // end. New columns go at the end: scripts read the others by position.
  std::printf("%8s  %-10s  %-10s  %6s  %-8s  %7s  %9s  %10s  %9s  %s  %s  %s  %s  %s  %s  %s  %s  %s\n",
              "JOB", "STATE", "USER", "RANKS", "MODE", "CLIENTS", "SLICE_US", "CHUNK_B",
              "RATE_MBS", "PROGRAM", "SLICES", "NODES", "ROW", "QUANTA", "SHARE", "SW_P50_US",
              "SW_P99_US", "CPU_S");
  for (const auto& j : rep.jobs()) {
    std::string nodes;
    for (const auto& n : j.nodes()) nodes += (nodes.empty() ? "" : ",") + n;
    auto us = [&](uint64_t ns) {
      if (!j.switches()) return std::string("-");
      char b[32];
      std::snprintf(b, sizeof b, "%.1f", static_cast<double>(ns) / 1e3);
      return std::string(b);
    };
    std::printf("%8llu  %-10s  %-10s  %6u  %-8s  %7u  %9llu  %10llu  %9s  %s  %llu  %s  %u  %llu  %.2f  %s  %s  %.3f\n",
                static_cast<unsigned long long>(j.job_id()), j.state().c_str(),
                j.user().empty() ? "-" : j.user().c_str(), j.nranks(),
                j.detached() ? "detached" : "attached", j.clients(),
                static_cast<unsigned long long>(j.slice_ns() / 1000),
                static_cast<unsigned long long>(j.chunk_bytes()),
                j.copy_rate() ? std::to_string(j.copy_rate() / 1'000'000).c_str() : "-",
                j.program().c_str(), static_cast<unsigned long long>(j.slices()),
                nodes.empty() ? "-" : nodes.c_str(), j.row(),
                static_cast<unsigned long long>(j.quanta()), j.cpu_share(),
                us(j.switch_p50_ns()).c_str(), us(j.switch_p99_ns()).c_str(),
                static_cast<double>(j.cpu_ns()) / 1e9);
  }
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
    auto st = stub->Kill(&ctx, req, &rep);
    // What the job was doing when it was killed (the report a timed-out
    // `bcs run` prints): whoever kills a hung job wants to know why it hung.
    if (st.ok() && !rep.state().empty())
      std::printf("job %llu: %s\n", static_cast<unsigned long long>(o.job_id), rep.state().c_str());
    return st;
  });
}

}  // namespace bcs::cli

namespace bcs::cli {

int attach_job(const AttachOptions& o) {
  ::signal(SIGPIPE, SIG_IGN);
  // Before any thread exists, so that every thread inherits the mask.
  SignalBlock sig;
  if (sig.fd() < 0) {
    say(std::string("signalfd: ") + std::strerror(errno));
    return 1;
  }
  auto conn = connect_manager(o.manager, o.token_file);
  if (!conn) return 1;
  auto stub = pb::Jobs::NewStub(conn->channel);
  grpc::ClientContext ctx;
  conn->prepare(ctx);
  ctx.AddMetadata(kClientMetadata, "bcs attach, pid " + std::to_string(::getpid()));
  // A signal leaves the job (the call is cancelled); it does not kill it.
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) {
    say(std::string("eventfd: ") + std::strerror(errno));
    return 1;
  }
  std::atomic<int> signo{0};
  std::thread watcher([&] {
    pollfd fds[2] = {{sig.fd(), POLLIN, 0}, {wake.get(), POLLIN, 0}};
    while (::poll(fds, 2, -1) >= 0 || errno == EINTR) {
      if (fds[1].revents) return;
      if (fds[0].revents)
        if (int s = sig.take()) {
          signo = s;
          ctx.TryCancel();
          return;
        }
    }
  });
  bool out_ok[2] = {true, true};
  LineLabeler labeler(o.label, [&](int stream, std::string_view data) {
    const int i = stream == pb::STDERR ? 1 : 0;
    if (out_ok[i]) out_ok[i] = write_all(i + 1, data);
  });
  std::optional<pb::JobExit> job_exit;
  pb::AttachRequest req;
  req.set_job_id(o.job_id);
  auto reader = stub->Attach(&ctx, req);
  pb::JobEvent ev;
  while (reader->Read(&ev)) {
    if (ev.has_output())
      labeler.feed(ev.output().rank(), ev.output().stream(), ev.output().data());
    else if (ev.has_exit() && !job_exit)
      job_exit = ev.exit();
  }
  const grpc::Status st = reader->Finish();
  {
    const uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(wake.get(), &one, sizeof one);
  }
  watcher.join();
  labeler.flush();
  const std::string id = std::to_string(o.job_id);
  if (int s = signo.load(); s && !job_exit) {
    say(std::string("interrupted (") + ::sigabbrev_np(s) + "): no longer attached to job " + id +
        "; a detached job runs on (bcs attach " + id +
        " again), one run without --detach ends when no client follows it any more");
    return 128 + s;
  }
  if (!job_exit) {
    // Refusals (not yours, no such job) are the manager's answer, not a loss.
    if (st.error_code() == grpc::StatusCode::NOT_FOUND ||
        st.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
        st.error_code() == grpc::StatusCode::UNAUTHENTICATED)
      say("machine manager at " + o.manager + ": " + describe(st));
    else
      say("lost the machine manager: " +
          (st.ok() ? std::string("the job's event stream ended without an exit status")
                   : describe(st)));
    return 1;
  }
  if (!job_exit->message().empty()) say(job_exit->message());
  const int status = job_exit->status();
  return status >= 0 && status <= 255 ? status : 1;
}

}  // namespace bcs::cli
