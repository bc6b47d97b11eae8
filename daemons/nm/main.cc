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
#include <fcntl.h>
#include <grpcpp/create_channel_posix.h>
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
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <mutex>
#include <thread>

#include "bcs.grpc.pb.h"
#include "bcs/service.h"
#include "bcs/core.h"
#include "fd.h"
#include "job.h"
#include "job_limits.h"
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

using Stream = grpc::ClientReaderWriter<v1::NodeMsg, v1::ManagerMsg>;

// Writes to the control stream come from the main and the I/O threads.
class Uplink {
 public:
  explicit Uplink(Stream* s) : s_(s) {}
  bool send(const v1::NodeMsg& m) {
    std::lock_guard lk(mu_);
    return s_->Write(m);
  }

 private:
  std::mutex mu_;
  Stream* s_;
};

// The I/O thread: one epoll over every rank's stdout/stderr pipe and pidfd,
// plus a signalfd for SIGTERM/SIGINT/SIGHUP and an eventfd to stop it.
class IoLoop {
 public:
  IoLoop(Uplink& up, std::function<void()> on_signal) : up_(up), on_signal_(std::move(on_signal)) {
    ep_.reset(::epoll_create1(EPOLL_CLOEXEC));
    stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    const sigset_t set = termination_signals();
    sig_.reset(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    chld_.reset(::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK));
    add(stop_.get(), kStop);
    add(sig_.get(), kSignal);
    add(chld_.get(), kChild);
  }

  // Watches every rank of `job` (called from the main thread).
  void watch(const std::shared_ptr<NmJob>& job) {
    std::lock_guard lk(mu_);
    for (auto& r : job->ranks()) {
      uint64_t id = next_id_;
      next_id_ += 4;
      watches_[id] = {job, r.get()};
      add(r->out.get(), id | 0);
      add(r->err.get(), id | 1);
      add(r->pidfd.get(), id | 2);
      if (r->in) add(r->in.get(), id | 3, 0);  // watched for writing once input waits
    }
  }

  // Rank 0's stdin (RankInput, from the session thread): appended to what
  // waits for its pipe, which this loop writes whenever the pipe has room.
  // Input for a job whose rank 0 has no pipe here (gone, or never had one)
  // is acknowledged at once, so the manager's window never stays shut.
  void input(uint64_t job_id, const std::string& data, bool eof) {
    uint64_t dropped = 0;
    {
      std::lock_guard lk(mu_);
      auto it = std::find_if(watches_.begin(), watches_.end(), [&](const auto& kv) {
        return kv.second.job->id() == job_id && kv.second.rank->in;
      });
      if (it == watches_.end()) {
        dropped = data.size();
      } else if (inputs_[it->first].pending.size() + data.size() > kInputPendingMax) {
        // The manager keeps 1 MiB unacknowledged at most: more is a
        // manager that does not, and the node does not buffer for it.
        spdlog::error("job {}: input for rank 0 beyond {} bytes waiting; dropped", job_id,
                      kInputPendingMax);
        dropped = data.size();
      } else {
        Input& in = inputs_[it->first];
        in.pending.append(data);
        in.eof = in.eof || eof;
        watch_input_locked(it->first, *it->second.rank);
      }
    }
    if (dropped) taken(job_id, dropped);
  }

  // Output back-pressure (PauseOutput): stops or resumes watching the
  // stdout/stderr pipes of `job_id`'s ranks. The pipes stay open; a rank
  // blocks in write once its pipe is full.
  void pause_output(uint64_t job_id, bool pause) {
    std::lock_guard lk(mu_);
    for (auto& [id, w] : watches_) {
      if (w.job->id() != job_id) continue;
      for (int which = 0; which < 2; ++which) {
        UniqueFd& fd = which == 0 ? w.rank->out : w.rank->err;
        if (!fd) continue;
        epoll_event ev{};
        ev.events = pause ? 0u : static_cast<uint32_t>(EPOLLIN);
        ev.data.u64 = id | static_cast<uint64_t>(which);
        ::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, fd.get(), &ev);
      }
    }
  }

  // Called (from this thread) before the exit of a job's last local rank
  // is reported: the local EMDS of the job goes first on the same stream,
  // so the manager has all of it when the job ends.
  void set_before_last_exit(std::function<void()> f) {
    std::lock_guard lk(mu_);
    before_last_exit_ = std::move(f);
  }

  void stop() {
    uint64_t one = 1;
    [[maybe_unused]] auto n = ::write(stop_.get(), &one, sizeof one);
  }

  void run() {
    pthread_setname_np(pthread_self(), "bcs-io");
    epoll_event evs[32];
    for (;;) {
      int n = ::epoll_wait(ep_.get(), evs, 32, -1);
      if (n < 0 && errno == EINTR) continue;
      for (int i = 0; i < n; ++i) {
        uint64_t key = evs[i].data.u64;
        if (key == kStop) return;
        if (key == kChild) {
          // Orphans of the job, inherited as subreaper, that died. (Ranks
          // are reaped through their pidfds in handle().)
          signalfd_siginfo si;
          while (::read(chld_.get(), &si, sizeof si) == sizeof si) {
          }
          reap_orphans();
          continue;
        }
        if (key == kSignal) {
          signalfd_siginfo si;
          while (::read(sig_.get(), &si, sizeof si) == sizeof si)
            spdlog::info("signal {} received: shutting down", si.ssi_signo);
          on_signal_();
          continue;
        }
        handle(key, evs[i].events);
      }
    }
  }

 private:
  static constexpr uint64_t kStop = 1, kSignal = 2, kChild = 3;
  struct Watch {
    std::shared_ptr<NmJob> job;
    LocalRank* rank;
  };

  void add(int fd, uint64_t key, uint32_t events = EPOLLIN) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = key;
    ::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, fd, &ev);
  }

  // Rank 0's input waiting here at most: four times the manager's window.
  static constexpr size_t kInputPendingMax = size_t{4} << 20;
  // What waits for rank 0's stdin pipe.
  struct Input {
    std::string pending;
    bool eof = false;
  };

  // Watch rank 0's pipe for room while input waits (under mu_).
  void watch_input_locked(uint64_t id, LocalRank& r) {
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.u64 = id | 3;
    ::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, r.in.get(), &ev);
  }

  // Tells the manager `bytes` of the job's input are done with.
  void taken(uint64_t job_id, uint64_t bytes) {
    v1::NodeMsg m;
    m.mutable_input_taken()->set_job_id(job_id);
    m.mutable_input_taken()->set_bytes(bytes);
    up_.send(m);
  }

  // Writes what the pipe takes now. Once all is written: closed after eof,
  // else unwatched until more comes. A rank 0 that closed its stdin or is
  // gone (EPIPE) gets nothing more: the rest is dropped, and acknowledged.
  // `gone`: the rank exited or nobody reads the pipe; the pipe is closed
  // and whatever is pending dropped.
  void write_input(uint64_t id, bool gone = false) {
    uint64_t job_id = 0, done = 0;
    {
      std::lock_guard lk(mu_);
      auto w = watches_.find(id);
      if (w == watches_.end() || !w->second.rank->in) return;
      LocalRank& r = *w->second.rank;
      job_id = w->second.job->id();
      Input& in = inputs_[id];
      size_t off = 0;
      bool broken = gone;
      while (!broken && off < in.pending.size()) {
        const ssize_t n = ::write(r.in.get(), in.pending.data() + off, in.pending.size() - off);
        if (n > 0) {
          off += static_cast<size_t>(n);
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else if (n < 0 && errno == EAGAIN) {
          break;
        } else {
          broken = true;
        }
      }
      done = off;
      in.pending.erase(0, off);
      if (broken) {
        done += in.pending.size();
        in.pending.clear();
      }
      if (in.pending.empty() && (in.eof || broken)) {
        ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, r.in.get(), nullptr);
        r.in.reset();  // rank 0 reads EOF
        inputs_.erase(id);
      } else if (in.pending.empty()) {
        epoll_event ev{};
        ev.data.u64 = id | 3;
        ::epoll_ctl(ep_.get(), EPOLL_CTL_MOD, r.in.get(), &ev);
      }
    }
    if (done) taken(job_id, done);
  }

  // Forwards what the pipe holds now; false at EOF.
  bool pump(Watch& w, int which) {
    UniqueFd& fd = which == 0 ? w.rank->out : w.rank->err;
    if (!fd) return false;
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n > 0) {
        v1::NodeMsg m;
        auto* o = m.mutable_output();
        o->set_job_id(w.job->id());
        o->set_rank(static_cast<uint32_t>(w.rank->world_rank));
        o->set_stream(which == 0 ? v1::STDOUT : v1::STDERR);
        o->set_data(buf, static_cast<size_t>(n));
        up_.send(m);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return true;
      ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, fd.get(), nullptr);
      fd.reset();
      return false;
    }
  }

  void handle(uint64_t key, uint32_t events) {
    Watch w;
    {
      std::lock_guard lk(mu_);
      auto it = watches_.find(key & ~uint64_t{3});
      if (it == watches_.end()) return;
      w = it->second;
    }
    int which = static_cast<int>(key & 3);
    if (which < 2) {
      pump(w, which);
      return;
    }
    if (which == 3) {
      // EPOLLERR: nobody holds the pipe's read end any more (rank 0 closed
      // its stdin). epoll reports that whatever it was asked for, so the
      // pipe is done with now, or this loop would wake for it forever.
      write_input(key & ~uint64_t{3}, (events & (EPOLLERR | EPOLLHUP)) != 0);
      return;
    }
    // The rank exited: reap it, then forward what is left in its pipes
    // (everything it wrote before dying is there), then report the exit.
    ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, w.rank->pidfd.get(), nullptr);
    write_input(key & ~uint64_t{3}, true);  // its stdin: closed, the rest dropped
    int status = w.job->reap(*w.rank);
    pump(w, 0);
    pump(w, 1);
    // Descendants of the rank may still hold the pipes: stop listening.
    for (UniqueFd* fd : {&w.rank->out, &w.rank->err})
      if (*fd) {
        ::epoll_ctl(ep_.get(), EPOLL_CTL_DEL, fd->get(), nullptr);
        fd->reset();
      }
    w.rank->pidfd.reset();
    // Nothing a rank started may outlive the job: once no rank of the job is
    // left here, whatever is still below the NM (a detached grandchild, a
    // daemonised helper) is killed - before the last exit is reported, so
    // it is gone by the time the job's exit status reaches `bcs`.
    if (w.job->all_dead()) {
      if (int n = kill_descendants())
        spdlog::info("job {}: killed {} process(es) the ranks left behind", w.job->id(), n);
      std::function<void()> flush;
      {
        std::lock_guard lk(mu_);
        flush = before_last_exit_;
      }
      if (flush) flush();
    }
    RankView v = w.job->view(*w.rank);
    v1::NodeMsg m;
    auto* e = m.mutable_rank_exit();
    e->set_job_id(w.job->id());
    e->set_rank(static_cast<uint32_t>(w.rank->world_rank));
    e->set_pid(static_cast<uint32_t>(w.rank->pid));
    if (WIFSIGNALED(status))
      e->set_signal(WTERMSIG(status));
    else
      e->set_exit_code(WEXITSTATUS(status));
    e->set_killed_by_bcs(w.rank->killed_by_bcs && WIFSIGNALED(status) &&
                         WTERMSIG(status) == SIGKILL);
    auto ms = v.ctl->mpi_state.load();
    e->set_mpi_initialized(ms != static_cast<uint32_t>(MpiState::none));
    e->set_mpi_finalized(ms == static_cast<uint32_t>(MpiState::finalized));
    e->set_aborted(v.ctl->aborted.load() != 0);
    e->set_noticed_peer_loss(v.ctl->aborted.load() == kAbortedNoticingPeer);
    e->set_abort_code(v.ctl->abort_code.load());
    e->set_corrupted(w.rank->corrupted);  // set before the kill, read after the reap
    // Its MMDS counters, read without its help (it is gone): checked, and
    // dropped with a warning if torn or scribbled on.
    {
      monitor::RankReport rep;
      std::string why;
      if (monitor::mmds_from_segment(*v.mmds, &rep, &why)) {
        // Its whole report, when it reached MPI_Finalize: distributions and
        // events for the Monitor service. Checked too; the counters stand
        // without it.
        monitor::RankReport full;
        std::string bad;
        if (monitor::mmds_report_from_segment(*v.mmds, v.mmds_report, w.rank->world_rank,
                                              static_cast<int>(w.job->spec().nranks), &full, &bad))
          rep = std::move(full);
        else if (!bad.empty())
          spdlog::warn("job {} rank {}: MMDS report dropped: {}", w.job->id(), w.rank->world_rank, bad);
        monitor::mmds_to_proto(rep, e->mutable_mmds());
      } else if (!why.empty()) {
        spdlog::warn("job {} rank {}: MMDS summary dropped: {}", w.job->id(), w.rank->world_rank, why);
      }
    }
    up_.send(m);
    std::lock_guard lk(mu_);
    watches_.erase(key & ~uint64_t{3});
  }

  Uplink& up_;
  std::function<void()> before_last_exit_;
  std::function<void()> on_signal_;
  UniqueFd ep_, stop_, sig_, chld_;
  std::mutex mu_;
  std::map<uint64_t, Watch> watches_;
  std::map<uint64_t, Input> inputs_;  // by watch id: rank 0's stdin
  uint64_t next_id_ = 16;
};

std::string hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// The node manager authenticates its manager before it takes any job from
// it: a manager run by another user must get nothing (a root node manager
// would otherwise run that user's jobs as anyone, root included). On one
// host the kernel says who the manager is (daemons/common/peer.h); from
// another host only the token counts.
std::string check_manager_user(const Endpoint& where, const std::optional<PeerCred>& unix_server) {
  const uid_t me = ::geteuid();
  if (where.is_unix) {
    if (!unix_server) return "no credentials from the manager's socket";
    if (unix_server->uid != me)
      return "the manager at unix:" + where.path + " (pid " + std::to_string(unix_server->pid) +
             ") runs as " + user_name(unix_server->uid) + ", not as " + user_name(me);
    return {};
  }
  if (!is_loopback_host(where.host)) return {};  // another host: the token is the credential
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
             std::chrono::nanoseconds liveness) {
  // Keepalive: a manager whose host hung is noticed within the liveness
  // timeout (a ping every 10 s, answered within the rest).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_timeout_ms(liveness));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  std::shared_ptr<grpc::Channel> channel;
  std::optional<PeerCred> unix_server;
  std::string session;
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
  } else {
    // With a CA, the manager must prove itself with a certificate it signed
    // (the manager's --tls-cert), and the token travels encrypted.
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = tls_ca;
    channel = grpc::CreateCustomChannel(
        manager, tls_ca.empty() ? grpc::InsecureChannelCredentials() : grpc::SslCredentials(ssl),
        args);
  }
  auto stub = v1::NodeControl::NewStub(channel);
  grpc::ClientContext ctx;
  if (!token.empty()) ctx.AddMetadata(kTokenMetadata, token);
  if (!session.empty()) ctx.AddMetadata(kSessionMetadata, session);
  // Fail fast if the manager is not there, rather than waiting for it.
  ctx.set_wait_for_ready(false);
  auto stream = stub->Session(&ctx);
  Uplink up(stream.get());

  std::atomic<bool> shutting_down{false};
  bool refused = false;  // the manager failed authentication
  std::mutex jobs_mu;
  std::shared_ptr<NmJob> job;  // at most one at a time (the MM runs jobs one by one)

  IoLoop io(up, [&] {
    shutting_down = true;
    std::lock_guard lk(jobs_mu);
    if (job) job->kill_all();
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

  v1::ManagerMsg msg;
  while (stream->Read(&msg)) {
    switch (msg.msg_case()) {
      case v1::ManagerMsg::kWelcome: {
        // The connection is up: on TCP loopback, see who accepted it.
        if (!where.is_unix)
          if (std::string bad = check_manager_user(where, std::nullopt); !bad.empty()) {
            spdlog::critical("refusing the machine manager: {}", bad);
            refused = true;
            ctx.TryCancel();
            break;
          }
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
        nic = std::make_unique<Nic>(*fabric, self, liveness);
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
        for (const auto& mem : msg.peers().members()) {
          const auto& a = mem.ucx_address();
          const bool here = mem.hostname() == hostname();
          if (here && mem.node_id() != self && mem.node_id() != 0) host_peers.insert(mem.node_id());
          if (fabric->connected(mem.node_id())) continue;
          // A peer on this host is reached through shared memory (its
          // death is known from the manager's control stream, not UCX).
          auto s = fabric->connect(mem.node_id(),
                                   {reinterpret_cast<const uint8_t*>(a.data()), a.size()}, here);
          if (s != core::Status::ok)
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
        else if (job)
          err = "node is busy with job " + std::to_string(job->id());
        else
          j = NmJob::start(spec, self, name, &err);
        if (j) {
          {
            std::lock_guard lk(jobs_mu);
            job = j;
          }
          nic->set_job(j);
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
        if (job && job->id() == msg.kill_job().job_id()) {
          spdlog::info("job {}: killing local ranks ({})", job->id(), msg.kill_job().reason());
          job->kill_all();
        }
        break;
      }
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
        if (job && job->id() == msg.end_job().job_id()) {
          nic->set_job(nullptr);
          job->kill_all();  // nothing should be alive; make sure
          job.reset();      // the NIC and I/O threads drop their references too
        }
        break;
      }
      default:
        break;
    }
  }
  auto st = stream->Finish();
  int rc = 0;
  if (refused) {
    rc = 1;
  } else if (!shutting_down) {
    spdlog::error("lost the machine manager at {}: {}", manager, st.error_message());
    rc = 1;
  }
  {
    std::lock_guard lk(jobs_mu);
    if (job) job->kill_all();
  }
  if (fabric) fabric->close();
  if (nic_thread.joinable()) nic_thread.join();
  if (nic) nic->local().stop();
  if (emds_thread.joinable()) emds_thread.join();
  // Let the I/O thread reap the ranks we just killed (and report their
  // exits) before stopping it; bounded, the job's destructor reaps the rest.
  {
    std::shared_ptr<NmJob> j;
    {
      std::lock_guard lk(jobs_mu);
      j = job;
    }
    if (j) j->wait_all_dead(std::chrono::seconds(2));
  }
  io.stop();
  io_thread.join();
  nic.reset();
  {
    std::lock_guard lk(jobs_mu);
    job.reset();  // reaps anything left (NmJob's destructor)
  }
  fabric.reset();
  return rc;
}

}  // namespace
}  // namespace bcs::nm

int main(int argc, char** argv) {
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

  // Everything a rank starts stays below the NM (process_tree.h).
  if (!bcs::nm::become_subreaper())
    spdlog::warn("cannot become a child subreaper ({}): processes a rank detaches may outlive "
                 "the job", std::strerror(errno));

  // Signals are taken by the I/O thread's signalfd: block them everywhere
  // (threads inherit this mask; ranks reset it before exec). SIGCHLD too:
  // the I/O thread reaps the orphans it announces.
  bcs::block_termination_signals();
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &chld, nullptr);
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
                           std::chrono::nanoseconds(*live_ns));
}
