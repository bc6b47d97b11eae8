// bcs-nm: the node manager. Registers with the machine manager, owns this
// node's fabric endpoint (one UCX worker), spawns the local ranks of a job,
// runs the NIC roles on every strobe, forwards the ranks' output and exits.
//
// Threads:
//   main     the control stream with the MM (gRPC): register, peers, jobs
//   bcs-sr   the strobe receiver and the helper roles (nic.h)
//   bcs-bell the doorbell: tells the MM when every local rank blocks, or
//            when a rank posts while the node is parked (doorbell.h)
//   bcs-io   rank stdout/stderr, rank exits (pidfd), SIGTERM/SIGINT
#include <arpa/inet.h>
#include <fcntl.h>
#include <grpcpp/create_channel_posix.h>
#include <netinet/in.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <mutex>
#include <thread>
#include <vector>

#include "bcs.grpc.pb.h"
#include "bcs/service.h"
#include "bcs/core.h"
#include "fd.h"
#include "io_loop.h"
#include "job.h"
#include "job_limits.h"
#include "manager_channel.h"
#include "proof.h"
#include "tls.h"
#include "launch.h"
#include "net.h"
#include "nic.h"
#include "copy_rate.h"
#include "peer.h"
#include "process_tree.h"
#include "units.h"
#include "signals.h"
#include "token.h"

namespace bcs::nm {
namespace {

std::string hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// The node manager authenticates its manager before it takes any job from
// it: a manager run by another user must get nothing (a root node manager
// would otherwise run that user's jobs as anyone, root included). On one
// host the kernel says who the manager is (daemons/common/peer.h); from
// another host only its proof of the token counts (proof.h), or TLS.
std::string check_manager_user(const Endpoint& where, const std::optional<PeerCred>& unix_server) {
  const uid_t me = ::geteuid();
  if (where.is_unix) {
    if (!unix_server) return "no credentials from the manager's socket";
    if (unix_server->uid != me)
      return "the manager at unix:" + where.path + " (pid " + std::to_string(unix_server->pid) +
             ") runs as " + user_name(unix_server->uid) + ", not as " + user_name(me);
    return {};
  }
  if (!is_loopback_host(where.host)) return {};  // another host: the proof of the token decides
  const auto uids = loopback_server_uids(where.host, where.port);
  if (uids.empty()) return "cannot tell who runs the manager at " + where.host + ":" +
                            std::to_string(where.port);
  for (uid_t u : uids)
    if (u != me)
      return "the manager at " + where.host + ":" + std::to_string(where.port) + " runs as " +
             user_name(u) + ", not as " + user_name(me);
  return {};
}

int run_node(const std::string& manager, const Endpoint& where, const std::string& name,
             const std::string& token, const std::string& tls_ca, const std::string& net_devices,
             std::chrono::nanoseconds liveness, bool realtime) {
  // Keepalive: a manager whose host hung is noticed within the liveness
  // timeout (a ping every 10 s, answered within the rest).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_timeout_ms(liveness));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  std::shared_ptr<grpc::Channel> channel;
  std::optional<PeerCred> unix_server;
  std::string session;
  // What proves us to the manager: nothing on the unix socket (the kernel
  // does), the proof of the token on plain TCP, the token itself only
  // inside TLS whose certificate proved the manager first.
  std::string proof_md, token_md;
  if (where.is_unix) {
    // Our own connection, so that we learn the manager's credentials and
    // it learns ours (peer.h); gRPC then runs on that one socket.
    std::string why;
    auto us = connect_unix_session(where.path, std::chrono::seconds(10), &why);
    if (!us) {
      spdlog::error("cannot reach the machine manager: {}", why);
      return 1;
    }
    unix_server = us->server;
    session = us->id;
    if (std::string bad = check_manager_user(where, unix_server); !bad.empty()) {
      spdlog::critical("refusing the machine manager: {}", bad);
      return 1;
    }
    channel = grpc::CreateCustomInsecureChannelFromFd(manager, us->fd.release(), args);
  } else if (!tls_ca.empty()) {
    // With a CA, the manager must prove itself with a certificate it signed
    // (the manager's --tls-cert) before the token travels, encrypted.
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = tls_ca;
    channel = grpc::CreateCustomChannel(manager, grpc::SslCredentials(ssl), args);
    token_md = token;
  } else {
    // Plain TCP. We connect ourselves, so that who accepted is checked
    // before gRPC sends a byte (on loopback by the kernel's socket table),
    // and whoever answers proves it holds the token before we send
    // anything: the token itself never travels (proof.h).
    // Whether the manager is on loopback is the connected socket's word,
    // not the spelling of --manager (a host name can resolve to 127.0.x.y).
    auto before = [&](int fd) -> std::string {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      char ip[INET6_ADDRSTRLEN] = {};
      if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
        if (ss.ss_family == AF_INET)
          inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, ip, sizeof ip);
        else if (ss.ss_family == AF_INET6)
          inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, ip, sizeof ip);
      }
      if (*ip && is_loopback_host(ip)) {
        Endpoint here = where;
        here.host = ip;
        return check_manager_user(here, std::nullopt);
      }
      if (token.empty())
        return "the manager at " + manager +
               " is not on loopback and nothing would prove who runs it. Give both daemons "
               "the cluster's token (--token-file FILE, mode 600, the same file on every "
               "host; the manager then proves it without sending it), or TLS (bcs-mm "
               "--tls-cert/--tls-key, bcs-nm --tls-ca)";
      return {};
    };
    std::string why;
    bool reached = false;
    auto mc = open_manager_channel(where, manager, token, args, std::chrono::seconds(10), before,
                                   &why, &reached);
    if (!mc) {
      if (reached)
        spdlog::critical("refusing the machine manager: {}", why);
      else
        spdlog::error("cannot reach the machine manager: {}", why);
      return 1;
    }
    channel = mc->channel;
    proof_md = mc->proof;
  }
  auto stub = v1::NodeControl::NewStub(channel);
  grpc::ClientContext ctx;
  if (!token_md.empty()) ctx.AddMetadata(kTokenMetadata, token_md);
  if (!proof_md.empty()) ctx.AddMetadata(kProofMetadata, proof_md);
  if (!session.empty()) ctx.AddMetadata(kSessionMetadata, session);
  // Fail fast if the manager is not there, rather than waiting for it.
  ctx.set_wait_for_ready(false);
  auto stream = stub->Session(&ctx);
  Uplink up(stream.get());

  std::atomic<bool> shutting_down{false};
  std::mutex jobs_mu;
  // The jobs this node holds, by id (guarded by jobs_mu). At most one
  // unless the manager co-schedules them (StartJob.coscheduled, gang
  // scheduling): then several are held and the strobe receiver runs the
  // microphases of whichever a strobe names (Nic).
  std::map<uint64_t, std::shared_ptr<NmJob>> jobs;
  auto kill_every_job = [&] {
    std::lock_guard lk(jobs_mu);
    for (auto& [id, j] : jobs) j->kill_all();
  };

  IoLoop io(up, [&] {
    shutting_down = true;
    kill_every_job();
    ctx.TryCancel();
  });
  std::thread io_thread([&] { io.run(); });

  // Once per process (a reconnect reports the same figure).
  static const uint64_t copy_rate = measure_copy_rate();
  v1::NodeMsg reg;
  reg.mutable_register_()->set_hostname(hostname());
  reg.mutable_register_()->set_name(name);
  reg.mutable_register_()->set_cores(std::thread::hardware_concurrency());
  reg.mutable_register_()->set_any_user(can_run_as_any_user());
  reg.mutable_register_()->set_pid(static_cast<uint32_t>(::getpid()));
  reg.mutable_register_()->set_copy_rate(copy_rate);
  // The CPUs this node manager's ranks may use, so that the manager can
  // give jobs sharing this host disjoint ranges of them (host_slot_base).
  reg.mutable_register_()->set_cpus(static_cast<uint32_t>(allowed_cpus().size()));
  up.send(reg);

  std::unique_ptr<core::Fabric> fabric;
  std::unique_ptr<Nic> nic;
  std::thread nic_thread;
  // The local EMDS flusher: sends what the strobe receiver noted, in
  // batches, on the control stream, so no strobe waits for it. It sleeps
  // while no slice runs.
  std::thread emds_thread;
  uint32_t self = 0;
  std::set<uint32_t> host_peers;  // node managers on this host (their host name is ours)
  // Every member's fabric address (and whether it is on this host), from
  // the last Peers message, the manager's (node 0) included: an endpoint
  // the fabric gave up (a send that did not complete in time closes it)
  // is connected again from here, by the strobe receiver when its report
  // could not go, and before the next job, which would otherwise fail with
  // "no such node" although its peer is alive.
  std::mutex peer_addrs_mu;
  std::map<uint32_t, std::pair<std::vector<uint8_t>, bool>> peer_addrs;  // guarded
  const bool fault_endpoints_lost = [] {  // test only: drop them after each job
    const char* f = std::getenv("BCS_TEST_FAULT");
    return f && std::string_view(f) == "endpoints-lost";
  }();
  // A new endpoint to `n` at its last known address (any thread).
  auto connect_again = [&](uint32_t n) -> core::Status {
    std::vector<uint8_t> addr;
    bool here = false;
    {
      std::lock_guard lk(peer_addrs_mu);
      auto it = peer_addrs.find(n);
      if (it == peer_addrs.end()) return core::Status::no_such_node;
      std::tie(addr, here) = it->second;
    }
    return fabric->connect(n, addr, here);
  };

  // Before a job: its peers' endpoints that the fabric gave up are
  // connected again; "" or why one cannot be.
  auto reconnect = [&](const JobSpec& spec) -> std::string {
    if (!fabric) return "";
    std::set<uint32_t> needed(spec.rank_node.begin(), spec.rank_node.end());
    needed.insert(0);  // the manager
    needed.erase(self);
    for (uint32_t n : needed) {
      if (fabric->connected(n)) continue;
      {
        std::lock_guard lk(peer_addrs_mu);
        if (!peer_addrs.count(n)) continue;  // not a member (yet): nothing to connect again
      }
      if (const auto s = connect_again(n); s != core::Status::ok)
        return "cannot connect again to node " + std::to_string(n) + ": " + core::status_str(s);
      spdlog::warn("job {}: the endpoint to node {} had been given up; connected again", spec.id,
                   n);
    }
    return "";
  };

  // Why StartJob of `id` is refused, "" if it may be held here: a job the
  // manager does not co-schedule needs the node to itself, and no id is
  // held twice.
  auto busy_with = [&](uint64_t id, bool coscheduled) -> std::string {
    std::lock_guard lk(jobs_mu);
    if (jobs.count(id)) return "job " + std::to_string(id) + " is already held here";
    if (jobs.empty() || coscheduled) return "";
    return "node is busy with job " + std::to_string(jobs.begin()->first);
  };

  v1::ManagerMsg msg;
  while (stream->Read(&msg)) {
    switch (msg.msg_case()) {
      case v1::ManagerMsg::kWelcome: {
        self = msg.welcome().node_id();
        std::string err;
        core::FabricConfig cfg;
        cfg.self = self;
        cfg.net_devices = net_devices;
        fabric = core::Fabric::create(cfg, &err);
        if (!fabric) {
          spdlog::critical("cannot create the fabric endpoint: {}", err);
          ctx.TryCancel();
          break;
        }
        nic = std::make_unique<Nic>(*fabric, self, liveness, realtime);
        nic->on_report_failure(
            [&] {
              const auto s = connect_again(0);
              if (s != core::Status::ok)
                spdlog::error("cannot connect to the manager again: {}", core::status_str(s));
              return s == core::Status::ok;
            },
            [&up](uint64_t job, const std::string& why) {
              v1::NodeMsg m;
              m.mutable_report_lost()->set_job_id(job);
              m.mutable_report_lost()->set_message(why);
              up.send(m);
            });
        nic->on_describe([&up](uint64_t job, const std::string& text) {
          v1::NodeMsg m;
          m.mutable_job_described()->set_job_id(job);
          m.mutable_job_described()->set_text(text);
          up.send(m);
        });
        nic_thread = std::thread([&] { nic->run(); });
        {
          auto send = [&up](const std::vector<monitor::LocalSliceRecord>& recs) {
            if (recs.empty()) return;
            v1::NodeMsg m;
            for (const auto& r : recs) monitor::local_to_proto(r, m.mutable_local_slices()->add_slices());
            up.send(m);
          };
          emds_thread = std::thread([&nic, send] {
            pthread_setname_np(pthread_self(), "bcs-emds");
            while (!nic->local().stopped()) send(nic->local().take(std::chrono::milliseconds(100)));
          });
          io.set_before_last_exit([&nic, send] { send(nic->local().take_now()); });
        }
        v1::NodeMsg r;
        auto addr = fabric->address();
        r.mutable_fabric_ready()->set_ucx_address(addr.data(), addr.size());
        up.send(r);
        spdlog::info("registered with {} as node {} ({})", manager, self, name);
        break;
      }
      case v1::ManagerMsg::kPeers: {
        if (!fabric) break;
        host_peers.clear();  // the message lists every member
        {
          std::lock_guard lk(peer_addrs_mu);
          peer_addrs.clear();
          for (const auto& mem : msg.peers().members()) {
            const auto& a = mem.ucx_address();
            const bool here = mem.hostname() == hostname();
            if (here && mem.node_id() != self && mem.node_id() != 0) host_peers.insert(mem.node_id());
            peer_addrs[mem.node_id()] = {{a.begin(), a.end()}, here};
          }
        }
        // A peer on this host is reached through shared memory (its death
        // is known from the manager's control stream, not UCX).
        for (const auto& mem : msg.peers().members()) {
          if (fabric->connected(mem.node_id())) continue;
          if (auto s = connect_again(mem.node_id()); s != core::Status::ok)
            spdlog::error("cannot connect to node {}: {}", mem.node_id(), core::status_str(s));
        }
        v1::NodeMsg r;
        r.mutable_peers_applied()->set_generation(msg.peers().generation());
        up.send(r);
        break;
      }
      case v1::ManagerMsg::kStartJob: {
        const auto& sj = msg.start_job();
        JobSpec spec;
        spec.id = sj.job_id();
        spec.program = sj.program();
        spec.args.assign(sj.args().begin(), sj.args().end());
        spec.env.assign(sj.env().begin(), sj.env().end());
        spec.cwd = sj.cwd();
        spec.nranks = sj.nranks();
        spec.rank_node.assign(sj.rank_node().begin(), sj.rank_node().end());
        spec.host_peers.assign(host_peers.begin(), host_peers.end());
        spec.slice_ns = sj.slice().slice_ns();
        spec.chunk_bytes = sj.slice().chunk_bytes();
        spec.fixed_strobe = sj.slice().fixed();
        spec.stdin_rank0 = sj.stdin_rank0();
        spec.bind = sj.bind() == v1::BIND_CORE   ? Binding::core
                    : sj.bind() == v1::BIND_NONE ? Binding::none
                                                 : Binding::by_default;
        spec.host_slot_base = sj.host_slot_base();
        spec.coscheduled = sj.coscheduled();
        spec.cpu_group = sj.cpu_group();
        spec.max_unexpected = std::min<uint64_t>(sj.slice().max_unexpected(), kMaxUnexpectedLimit);
        const std::string cred_err = job_credentials(sj.uid(), sj.gid(), &spec);
        v1::NodeMsg r;
        auto* js = r.mutable_job_started();
        js->set_job_id(spec.id);
        std::string err;
        std::shared_ptr<NmJob> j;
        const auto local = std::count(spec.rank_node.begin(), spec.rank_node.end(), self);
        if (spec.rank_node.size() != spec.nranks)
          err = "malformed job: rank map size";
        else if (spec.nranks > kMaxRanks || local > static_cast<long>(kMaxRanksPerNode))
          err = "job too large: " + std::to_string(local) + " local rank(s) of " +
                std::to_string(spec.nranks) + " (at most " + std::to_string(kMaxRanksPerNode) +
                " per node manager)";
        else if (!cred_err.empty())
          err = cred_err;
        else if (auto why = check_job_env(spec.env, {}); !why.empty())
          err = "malformed job: " + why;  // the manager checked it too; trust nothing
        else if (std::string busy = busy_with(spec.id, sj.coscheduled()); !busy.empty())
          err = busy;
        else if (auto why = reconnect(spec); !why.empty())
          err = why;
        else
          j = NmJob::start(spec, self, name, &err);
        if (j) {
          {
            std::lock_guard lk(jobs_mu);
            jobs[spec.id] = j;
          }
          nic->hold_job(j);
          io.watch(j);
          for (auto& rk : j->ranks()) js->add_pids(static_cast<uint32_t>(rk->pid));
          spdlog::info("job {}: started {} local rank(s)", spec.id, j->ranks().size());
        } else {
          js->set_error(err);
          spdlog::error("job {}: {}", spec.id, err);
        }
        up.send(r);
        break;
      }
      case v1::ManagerMsg::kKillJob: {
        std::lock_guard lk(jobs_mu);
        if (auto it = jobs.find(msg.kill_job().job_id()); it != jobs.end()) {
          spdlog::info("job {}: killing local ranks ({})", it->first, msg.kill_job().reason());
          it->second->kill_all();
        }
        break;
      }
      case v1::ManagerMsg::kSuspendJob: {
        // Gang scheduling: at a slice boundary, the job's ranks stop or go on.
        const auto& sj = msg.suspend_job();
        std::shared_ptr<NmJob> j;
        {
          std::lock_guard lk(jobs_mu);
          if (auto it = jobs.find(sj.job_id()); it != jobs.end()) j = it->second;
        }
        if (!j) break;  // ended meanwhile
        uint64_t cost = 0;
        bool background = false;
        v1::NodeMsg r;
        auto* js = r.mutable_job_suspended();
        js->set_job_id(sj.job_id());
        js->set_suspended(sj.suspend());
        js->set_error(j->suspend(sj.suspend(), sj.background(), &cost, &background));
        js->set_cost_ns(cost);
        js->set_background(background);
        up.send(r);
        // A switch: the node's other suspended jobs are looked at too (a
        // user may SIGCONT their own stopped ranks).
        std::vector<std::shared_ptr<NmJob>> others;
        {
          std::lock_guard lk(jobs_mu);
          for (const auto& [id, o] : jobs)
            if (o != j) others.push_back(o);
        }
        for (const auto& o : others) o->check_suspended();
        break;
      }
      case v1::ManagerMsg::kDescribeJob:
        if (nic) nic->describe(msg.describe_job().job_id());
        break;
      case v1::ManagerMsg::kInput:
        io.input(msg.input().job_id(), msg.input().data(), msg.input().eof());
        break;
      case v1::ManagerMsg::kPauseOutput:
        io.pause_output(msg.pause_output().job_id(), msg.pause_output().pause());
        break;
      case v1::ManagerMsg::kGoodbye:
        spdlog::info("the machine manager is shutting down");
        shutting_down = true;
        ctx.TryCancel();  // end our stream now, so the MM's shutdown need not wait for it
        break;
      case v1::ManagerMsg::kEndJob: {
        std::lock_guard lk(jobs_mu);
        if (auto it = jobs.find(msg.end_job().job_id()); it != jobs.end()) {
          nic->release_job(it->first);
          it->second->kill_all();  // nothing should be alive; make sure
          jobs.erase(it);          // the NIC and I/O threads drop their references too
          if (fault_endpoints_lost) {
            std::lock_guard lk(peer_addrs_mu);
            for (const auto& [n, a] : peer_addrs)
              if (n != self) fabric->disconnect(n);
          }
        }
        break;
      }
      default:
        break;
    }
  }
  auto st = stream->Finish();
  int rc = 0;
  if (!shutting_down) {
    spdlog::error("lost the machine manager at {}: {}", manager, st.error_message());
    rc = 1;
  }
  kill_every_job();
  if (fabric) fabric->close();
  if (nic_thread.joinable()) nic_thread.join();
  if (nic) nic->local().stop();
  if (emds_thread.joinable()) emds_thread.join();
  // Let the I/O thread reap the ranks we just killed (and report their
  // exits) before stopping it; bounded, the job's destructor reaps the rest.
  {
    std::vector<std::shared_ptr<NmJob>> held;
    {
      std::lock_guard lk(jobs_mu);
      for (auto& [id, j] : jobs) held.push_back(j);
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (auto& j : held)
      j->wait_all_dead(std::chrono::duration_cast<std::chrono::milliseconds>(
          std::max(until - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration{})));
  }
  io.stop();
  io_thread.join();
  nic.reset();
  {
    std::lock_guard lk(jobs_mu);
    jobs.clear();  // reaps anything left (NmJob's destructor)
  }
  fabric.reset();
  return rc;
}

}  // namespace
}  // namespace bcs::nm

int main(int argc, char** argv) {
  // Signals are taken by the I/O thread's signalfd: block them everywhere,
  // first of all, before anything starts a thread (gRPC starts executors and
  // timers at its first use; a thread with SIGTERM unblocked would let the
  // default action kill the NM). Threads inherit this mask; ranks reset it
  // before exec. SIGCHLD too: the I/O thread reaps the orphans it announces.
  bcs::block_termination_signals();
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &chld, nullptr);
  // A rank stopped or continued (gang scheduling: job_suspend.cc) raises no
  // SIGCHLD: each would make the I/O thread look through /proc for orphans
  // (0.6-0.9 ms here, measured: docs/plans/issue-43-stopping.md), more than
  // a switch may cost. SIG_DFL, not SIG_IGN: that would reap children
  // behind their owners' backs.
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sa.sa_flags = SA_NOCLDSTOP;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGCHLD, &sa, nullptr);
  CLI::App app{"bcs-nm: the bcs node manager"};
  std::string manager = "127.0.0.1:7600", name, token_file, level = "warn";
  app.add_option("--manager", manager, "machine manager HOST:PORT")->capture_default_str();
  app.add_option("--name", name, "node name (default: hostname)");
  app.add_option("--token-file", token_file,
                 "file holding the cluster's shared token (default: $BCS_TOKEN)");
  std::string refused;
  app.add_option("--token", refused, "(refused: use --token-file or $BCS_TOKEN)");
  std::string fabric_if;
  app.add_option("--fabric-interface", fabric_if,
                 "network device the fabric (UCX) uses and listens on; default: the one that "
                 "reaches the manager (loopback for a loopback manager)");
  app.add_option("--log-level", level, "trace, debug, info, warn, error")->capture_default_str();
  std::string liveness = "60s";
  app.add_option("--liveness-timeout", liveness,
                 "how long a stopped or slow peer (or manager) may stay silent before the job "
                 "fails; shorter stalls only delay it")
      ->capture_default_str();
  std::string tls_ca_file;
  app.add_option("--tls-ca", tls_ca_file,
                 "verify the manager's TLS certificate against this CA (PEM; default: "
                 "$BCS_TLS_CA; none: plain TCP)");
  bool no_realtime = false;
  app.add_flag("--no-realtime", no_realtime,
               "keep the strobe receiver, the doorbell and UCX's async thread at normal priority "
               "(with the shortest time slice); by default they run at SCHED_FIFO, without "
               "spinning, when the kernel permits");
  CLI11_PARSE(app, argc, argv);
  if (name.empty()) name = bcs::nm::hostname();
  const auto live_ns = bcs::parse_duration_ns(liveness);
  if (!live_ns || *live_ns < 1'000'000'000ull) {
    std::fprintf(stderr, "bcs-nm: --liveness-timeout %s: expected a duration of at least 1s\n",
                 liveness.c_str());
    return 2;
  }
  std::string why;
  if (!refused.empty()) {
    std::fprintf(stderr, "bcs-nm: %s\n", bcs::kTokenOnCommandLine);
    return 2;
  }
  const auto token = bcs::load_token(token_file, &why);
  if (!token) {
    std::fprintf(stderr, "bcs-nm: %s\n", why.c_str());
    return 2;
  }
  const auto where = bcs::parse_endpoint(manager, &why);
  if (!where) {
    std::fprintf(stderr, "bcs-nm: --manager %s\n", why.c_str());
    return 2;
  }
  const auto devices = bcs::fabric_devices_for_manager(*where, fabric_if, &why);
  if (!devices) {
    std::fprintf(stderr, "bcs-nm: cannot choose the fabric's network device: %s "
                 "(use --fabric-interface)\n", why.c_str());
    return 2;
  }

  auto logger = spdlog::stderr_color_mt("bcs-nm");
  logger->set_pattern("bcs-nm[" + name + "] %^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::from_str(level));

  // Daemon hygiene: fds 0-2 are always open (on /dev/null if we were
  // started without them), so that no descriptor the NM opens later can
  // land on 0-2 and be mistaken for a rank's stdio when ranks are forked.
  for (int fd = 0; fd < 3; ++fd)
    if (::fcntl(fd, F_GETFD) < 0 && ::open("/dev/null", O_RDWR) < 0) return 1;

  // Each local rank costs three fds (two pipes and a pidfd): allow as many
  // as the hard limit does, so kMaxRanksPerNode ranks fit.
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    bcs::nm::set_rank_fd_limit(nofile.rlim_cur, nofile.rlim_max);
    nofile.rlim_cur = nofile.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &nofile);
  }

  // The cpu groups of jobs of node managers killed before they could remove
  // them (buffered coscheduling's background policy, cpu_group.h).
  bcs::nm::CpuGroup::remove_stale();

  // Everything a rank starts stays below the NM (process_tree.h).
  if (!bcs::nm::become_subreaper())
    spdlog::warn("cannot become a child subreaper ({}): processes a rank detaches may outlive "
                 "the job", std::strerror(errno));

  std::string tls_ca;
  if (tls_ca_file.empty()) {
    const char* e = std::getenv(bcs::kTlsCaEnv);
    tls_ca_file = e ? e : "";
  }
  if (!tls_ca_file.empty() && !bcs::read_pem(tls_ca_file, &tls_ca, &why)) {
    std::fprintf(stderr, "bcs-nm: --tls-ca %s\n", why.c_str());
    return 2;
  }
  return bcs::nm::run_node(manager, *where, name, *token, tls_ca, *devices,
                           std::chrono::nanoseconds(*live_ns), !no_realtime);
}
