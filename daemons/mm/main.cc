// bcs-mm: the machine manager. Owns the slice clock (strobe sender), accepts
// node managers and jobs, and serves the Jobs / NodeControl / Monitor gRPC
// services (loopback by default).
#include <algorithm>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bcs.grpc.pb.h"
#include "job_limits.h"
#include "bcs/service.h"
#include "manager.h"
#include "net.h"
#include "signals.h"
#include "tls.h"
#include "munge_auth.h"
#include "token.h"
#include "wire.h"
#include "units.h"

namespace bcs::mm {
namespace {

class NodeControlService final : public v1::NodeControl::Service {
 public:
  explicit NodeControlService(Manager& m) : m_(m) {}
  grpc::Status Session(grpc::ServerContext* ctx, NodeStream* stream) override {
    return m_.node_session(ctx, stream);
  }

 private:
  Manager& m_;
};

class AuthService final : public v1::Auth::Service {
 public:
  explicit AuthService(const Manager& m) : m_(m) {}
  grpc::Status Prove(grpc::ServerContext* c, const v1::ProveRequest* r,
                     v1::ProveReply* o) override {
    return m_.prove(c, *r, o);
  }

 private:
  const Manager& m_;
};

class JobsService final : public v1::Jobs::Service {
 public:
  explicit JobsService(Manager& m) : m_(m) {}
  grpc::Status Launch(grpc::ServerContext* c, const v1::LaunchRequest* r,
                      v1::LaunchReply* o) override {
    return m_.launch(c, *r, o);
  }
  grpc::Status Attach(grpc::ServerContext* c, const v1::AttachRequest* r,
                      grpc::ServerWriter<v1::JobEvent>* w) override {
    return m_.attach(c, r->job_id(), w);
  }
  grpc::Status Kill(grpc::ServerContext* c, const v1::KillRequest* r, v1::KillReply* o) override {
    return m_.kill(c, r->job_id(), r->reason(), o->mutable_state());
  }
  grpc::Status List(grpc::ServerContext* c, const v1::ListRequest*, v1::ListReply* o) override {
    return m_.list(c, o);
  }
  grpc::Status Input(grpc::ServerContext* c, grpc::ServerReader<v1::InputChunk>* in,
                     v1::InputReply*) override {
    return m_.input(c, in);
  }

 private:
  Manager& m_;
};

}  // namespace
}  // namespace bcs::mm

int main(int argc, char** argv) {
  using namespace bcs;
  // Signals are taken synchronously by the main thread (sigwait below). They
  // are blocked first of all: the mask is inherited by threads, and gRPC
  // starts its own (executors, timers) as soon as anything touches it, e.g.
  // InsecureServerCredentials() below. One thread with SIGTERM unblocked is
  // enough for the kernel to deliver it there and kill the process with the
  // default action instead of a clean shutdown.
  const sigset_t set = block_termination_signals();
  CLI::App app{"bcs-mm: the bcs machine manager"};
  std::string listen = "127.0.0.1:7600", slice = "500us", chunk = "auto", spin = "30us", token_file,
              level = "warn";
  int ready_fd = -1;
  uint64_t max_unexpected = bcs::mm::Config{}.max_unexpected;
  bool no_realtime = false;
  std::string liveness = "60s", watchdog = "120s";
  // Checked below with parse_endpoint: gRPC would take "host:70000" and
  // bind port 70000 mod 65536.
  app.add_option("--listen", listen, "gRPC listen address HOST:PORT (port 0: pick one)")
      ->capture_default_str();
  app.add_option("--ready-fd", ready_fd, "write the bound port to this fd once listening");
  app.add_option("--slice", slice, "time slice (strobe period)")->capture_default_str();
  app.add_option("--chunk", chunk,
                 "per-slice byte budget of each DMA helper; auto: what the slowest node manager "
                 "of a job copies in one slice (each measures its copy rate when it starts)")
      ->capture_default_str();
  app.add_option("--max-unexpected", max_unexpected,
                 "unmatched sends one receiver may have waiting before sends to it are held "
                 "in their senders' rings (jobs may choose with bcs run --max-unexpected)")
      ->check(CLI::Range(uint64_t{1}, bcs::kMaxUnexpectedLimit))
      ->capture_default_str();
  app.add_option("--strobe-spin", spin,
                 "spin this long before each strobe for an exact period (0: sleep only)")
      ->capture_default_str();
  app.add_flag("--no-realtime", no_realtime,
               "keep the strobe sender and UCX's async thread at normal priority (with the "
               "shortest time slice; the strobe sender then spins before each strobe); by "
               "default they run at SCHED_FIFO, without spinning, when the kernel permits");
  size_t emds_window = monitor::EmdsRecorder::kDefaultWindow;
  app.add_option("--emds-window", emds_window,
                 "slices whose statistics the Monitor service keeps (bcs stats, bcs monitor)")
      ->check(CLI::Range(size_t{1}, size_t{10'000'000}))
      ->capture_default_str();
  std::string space_share = "on";
  app.add_option("--space-share", space_share,
                 "run jobs whose node managers do not overlap at the same time (off: one job at "
                 "a time on the whole cluster)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  uint32_t mpl = bcs::mm::Config{}.mpl;
  app.add_option("--mpl", mpl,
                 "gang scheduling: rows of the matrix, i.e. jobs that may share a node manager, "
                 "each running in its own quanta (1: jobs sharing a node manager wait for each "
                 "other)")
      ->check(CLI::Range(1u, bcs::wire::kMaxRows))
      ->capture_default_str();
  std::string quantum = "10ms";
  app.add_option("--quantum", quantum,
                 "gang scheduling: how long one row of the matrix runs before the next; a job "
                 "switches at its first slice boundary from then on")
      ->capture_default_str();
  std::string policy = "gang";
  app.add_option("--policy", policy,
                 "gang scheduling: how jobs of the rows not running are held: gang (stopped, "
                 "SIGSTOP) or bcs (runnable at idle priority in a cpu cgroup: they use the CPU "
                 "time the running row leaves while its ranks wait in MPI; node managers that "
                 "cannot make the cgroup stop them instead)")
      ->check(CLI::IsMember({"gang", "bcs"}))
      ->capture_default_str();
  std::string strobe_mode = "adaptive";
  app.add_option("--strobe", strobe_mode,
                 "default pacing of jobs: adaptive (next slice at once when every rank is "
                 "blocked, none while nothing is to do) or fixed (one slice per period, as in "
                 "the paper)")
      ->check(CLI::IsMember({"adaptive", "fixed"}))
      ->capture_default_str();
  app.add_option("--token-file", token_file,
                 "file holding the cluster's shared token (default: $BCS_TOKEN); required when "
                 "not listening on loopback");
  std::string refused;
  app.add_option("--token", refused, "(refused: use --token-file or $BCS_TOKEN)");
  bool munge = false;
  std::string munge_socket = kMungeDefaultSocket;
  app.add_flag("--munge", munge,
               "accept users on other hosts who prove themselves with a munge credential "
               "(bcs run with BCS_AUTH=munge): their jobs run as themselves");
  app.add_option("--munge-socket", munge_socket, "munged's socket (with --munge)")
      ->capture_default_str();
  std::string tls_cert, tls_key;
  app.add_option("--tls-cert", tls_cert,
                 "serve gRPC over TLS with this certificate (PEM; with --tls-key): node "
                 "managers and clients then need the CA (--tls-ca, $BCS_TLS_CA)");
  app.add_option("--tls-key", tls_key, "the private key of --tls-cert (PEM)");
  std::string socket_path;
  app.add_option("--socket", socket_path,
                 "also listen on this unix socket (e.g. /run/bcs/mm.sock): local users submit "
                 "through it and their jobs run as themselves");
  std::string fabric_if;
  app.add_option("--fabric-interface", fabric_if,
                 "network device the fabric (UCX) listens on; default: the one holding the "
                 "--listen address (loopback for a loopback address)");
  app.add_option("--log-level", level, "trace, debug, info, warn, error")->capture_default_str();
  app.add_option("--liveness-timeout", liveness,
                 "how long a node manager may stay silent (stopped, paused, hung) before it "
                 "counts as lost and its jobs fail; shorter stalls only delay them")
      ->capture_default_str();
  app.add_option("--phase-watchdog", watchdog,
                 "how long one microphase may take before its job fails, naming the late nodes")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!refused.empty()) {
    std::fprintf(stderr, "bcs-mm: %s\n", kTokenOnCommandLine);
    return 2;
  }
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!tls_cert.empty() || !tls_key.empty()) {
    grpc::SslServerCredentialsOptions o;
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    std::string why;
    if (tls_cert.empty() || tls_key.empty()) {
      std::fprintf(stderr, "bcs-mm: --tls-cert and --tls-key go together\n");
      return 2;
    }
    if (!read_pem(tls_cert, &pair.cert_chain, &why) || !read_pem(tls_key, &pair.private_key, &why)) {
      std::fprintf(stderr, "bcs-mm: %s\n", why.c_str());
      return 2;
    }
    o.pem_key_cert_pairs.push_back(std::move(pair));
    creds = grpc::SslServerCredentials(o);
  }
  std::string token_why;
  const auto token = load_token(token_file, &token_why);
  if (!token) {
    std::fprintf(stderr, "bcs-mm: %s\n", token_why.c_str());
    return 2;
  }

  auto logger = spdlog::stderr_color_mt("bcs-mm");
  logger->set_pattern("bcs-mm %^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));

  mm::Config cfg;
  auto sl = parse_duration_ns(slice);
  auto ch = parse_size_bytes(chunk);
  if (!sl || *sl < 10'000 || *sl > 10'000'000'000ull) {
    std::fprintf(stderr, "bcs-mm: --slice %s: expected a duration between 10us and 10s\n",
                 slice.c_str());
    return 2;
  }
  if (chunk != "auto" && (!ch || *ch == 0)) {
    std::fprintf(stderr, "bcs-mm: --chunk %s: expected a size such as 2MiB, or auto\n",
                 chunk.c_str());
    return 2;
  }
  auto sp = parse_duration_ns(spin);
  if (!sp) {
    std::fprintf(stderr, "bcs-mm: --strobe-spin %s: expected a duration such as 30us\n",
                 spin.c_str());
    return 2;
  }
  cfg.strobe_spin_ns = *sp;
  cfg.fixed_strobe = strobe_mode == "fixed";
  cfg.space_share = space_share == "on";
  cfg.mpl = mpl;
  cfg.background = policy == "bcs";
  const auto q = parse_duration_ns(quantum);
  if (!q || *q < 1'000'000ull) {
    std::fprintf(stderr, "bcs-mm: --quantum %s: expected a duration of at least 1ms\n",
                 quantum.c_str());
    return 2;
  }
  cfg.quantum_ns = *q;
  const auto lv = parse_duration_ns(liveness), wd = parse_duration_ns(watchdog);
  if (!lv || *lv < 1'000'000'000ull) {
    std::fprintf(stderr, "bcs-mm: --liveness-timeout %s: expected a duration of at least 1s\n",
                 liveness.c_str());
    return 2;
  }
  if (!wd || *wd < 1'000'000'000ull) {
    std::fprintf(stderr, "bcs-mm: --phase-watchdog %s: expected a duration of at least 1s\n",
                 watchdog.c_str());
    return 2;
  }
  cfg.liveness = std::chrono::nanoseconds(*lv);
  cfg.phase_watchdog = std::chrono::nanoseconds(*wd);
  cfg.realtime = !no_realtime;
  cfg.slice_ns = *sl;
  cfg.chunk_bytes = chunk == "auto" ? 0 : *ch;
  cfg.max_unexpected = max_unexpected;
  cfg.emds_window = emds_window;
  // BCS_EMDS=off: no slice statistics, here and (the same variable) in the
  // node managers; read from the environment so that bench/mds.sh can turn
  // it off for an embedded cluster.
  if (const char* e = std::getenv("BCS_EMDS")) cfg.emds = std::string(e) != "off";
  cfg.token = *token;
  if (munge) cfg.munge_socket = munge_socket;
  std::string why;
  const auto where = parse_endpoint(listen, &why);
  if (!where || where->is_unix) {
    std::fprintf(stderr, "bcs-mm: --listen %s\n",
                 where ? "takes HOST:PORT (a unix socket is --socket PATH)" : why.c_str());
    return 2;
  }
  if (!is_loopback_host(where->host) && token->empty()) {
    std::fprintf(stderr,
                 "bcs-mm: listening on %s (not loopback) needs a token (--token-file or "
                 "$BCS_TOKEN)\n",
                 listen.c_str());
    return 2;
  }

  core::FabricConfig fcfg;
  fcfg.self = 0;
  // The fabric listens where the control plane does, never on every
  // interface by accident.
  const auto devices = fabric_devices_for_listen(*where, fabric_if, &why);
  if (!devices) {
    std::fprintf(stderr, "bcs-mm: cannot choose the fabric's network device: %s "
                 "(use --fabric-interface)\n", why.c_str());
    return 2;
  }
  fcfg.net_devices = *devices;
  std::string err;
  auto fabric = core::Fabric::create(fcfg, &err);
  if (!fabric) {
    std::fprintf(stderr, "bcs-mm: cannot create the fabric endpoint: %s\n", err.c_str());
    return 1;
  }
  // The MM watches its own phase variable too: connect to self.
  auto self_addr = fabric->address();
  fabric->connect(0, self_addr);

  {
    mm::Manager manager(cfg, *fabric);
    if (!socket_path.empty() && !manager.unix_sessions().open(socket_path, &why)) {
      std::fprintf(stderr, "bcs-mm: --socket %s: %s\n", socket_path.c_str(), why.c_str());
      return 1;
    }
    mm::NodeControlService nodes(manager);
    mm::JobsService jobs(manager);
    mm::AuthService auth(manager);
    monitor::MonitorService mon(
        manager.emds(), manager.node_series(), [&manager](grpc::ServerContext* c) { return manager.authorized(c); },
        [&manager](grpc::ServerContext* c, const v1::JobStatsRequest& req, v1::JobStatsReply* rep) {
          return manager.job_stats(c, req, rep);
        },
        [&manager](grpc::ServerContext* c, uint64_t job) { return manager.job_state(c, job); });
    int port = 0;
    grpc::ServerBuilder b;
    // Keepalive both ways: a node manager on a host that hung or was cut
    // off is noticed within the liveness timeout even if no TCP reset ever
    // arrives; a shorter stall (SIGSTOP, a debugger, a VM pause) is not.
    b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_timeout_ms(cfg.liveness));
    b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
    b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
    b.AddListeningPort(listen, creds, &port);
    b.RegisterService(&nodes);
    b.RegisterService(&jobs);
    b.RegisterService(&auth);
    b.RegisterService(&mon);
    auto server = b.BuildAndStart();
    if (!server || port == 0) {
      std::fprintf(stderr, "bcs-mm: cannot listen on %s\n", listen.c_str());
      return 1;
    }
    manager.set_tcp_port(static_cast<uint16_t>(port));
    if (!socket_path.empty()) manager.unix_sessions().serve(server.get());
    spdlog::info("listening on {} (port {}){}, slice {}", listen, port,
                 socket_path.empty() ? "" : " and " + socket_path, format_duration(cfg.slice_ns));
    if (ready_fd >= 0) {
      std::string line = std::to_string(port) + "\n";
      [[maybe_unused]] auto n = ::write(ready_fd, line.data(), line.size());
      ::close(ready_fd);
    }
    int sig = 0;
    sigwait(&set, &sig);
    spdlog::info("signal {}: shutting down", sig);
    mon.stop();
    manager.shutdown();
    manager.unix_sessions().stop();
    fabric->close();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  return 0;
}
