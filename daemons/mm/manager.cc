#include "manager.h"

#include "bcs/service.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "job_limits.h"
#include "job_run.h"
#include "launch.h"
#include "peer.h"
#include "slice_plan.h"
#include "token.h"

namespace bcs::mm {

namespace {
// This host's name, as node managers report theirs (Register.hostname).
const std::string& host_name() {
  static const std::string name = [] {
    char buf[256] = {};
    ::gethostname(buf, sizeof buf - 1);
    return std::string(buf);
  }();
  return name;
}
}  // namespace

using namespace std::chrono_literals;

Manager::Manager(const Config& cfg, core::Fabric& fabric)
    : cfg_(cfg), fabric_(fabric), self_uid_(::geteuid()), self_gid_(::getegid()) {
  ss_thread_ = std::thread([this] { strobe_sender(); });
  attach_thread_ = std::thread([this] { watch_unattached(); });
}

Manager::~Manager() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  attach_cv_.notify_all();
  wake_strobe_sender();
  if (ss_thread_.joinable()) ss_thread_.join();
  if (attach_thread_.joinable()) attach_thread_.join();
}

void Manager::queue_locked(const std::shared_ptr<Node>& n, v1::ManagerMsg m) {
  outbox_.emplace_back(n, std::move(m));
}

void Manager::take_local_slices(const Node& node, const v1::LocalSlices& batch) {
  // Checked like any message from the network: bounded, sane counts,
  // slices in order. A bad batch is dropped, the node keeps running.
  // In order per job: a job's numbers only grow. Jobs gang-scheduled on one
  // node interleave their records there, each with its own numbers.
  // (node.name is fixed at registration; node_series_ locks itself.)
  const auto& b = batch.slices();
  std::vector<monitor::LocalSliceRecord> recs;
  std::map<uint64_t, uint64_t> last;  // job -> its last slice in the batch
  std::string why;
  if (b.size() > static_cast<int>(node_series_.window()) + 1) why = "too many slices in one batch";
  for (int i = 0; why.empty() && i < b.size(); ++i) {
    monitor::LocalSliceRecord r;
    if (!monitor::local_from_proto(b[i], &r, &why)) break;
    if (auto it = last.find(r.job); it != last.end() && r.slice <= it->second)
      why = "slices out of order";
    last[r.job] = r.slice;
    recs.push_back(r);
  }
  if (!why.empty())
    spdlog::warn("node {} sent bad local slice statistics: {}", node.name, why);
  else
    node_series_.record(node.name, recs);
}

// Messages to node managers are queued under mu_ (queue_locked) and handed
// here to each node's writer, which writes them on a thread of its own
// (node_writer.h). flush() never waits for a write, so a node that does not
// read holds up neither the manager's state, nor the thread that flushes
// (the strobe sender among them), nor any other node's messages. The
// hand-over is under mu_, which keeps the order of each node's messages
// when two threads flush at once; a push only queues, so mu_ is held no
// longer than it takes to move the messages.
void Manager::flush() {
  std::lock_guard lk(mu_);
  // A push that fails drops the message: its node is being lost (a write
  // failed, it was cut off, its session ends), as node_lost will say.
  for (auto& [n, m] : outbox_)
    if (n->writer) n->writer->push(std::move(m));
  outbox_.clear();
}

// ------------------------------------------------------------------ nodes
void Manager::broadcast_peers_locked() {
  ++peers_gen_;
  v1::ManagerMsg m;
  auto* p = m.mutable_peers();
  p->set_generation(peers_gen_);
  auto* self = p->add_members();
  self->set_node_id(0);
  auto addr = fabric_.address();
  self->set_ucx_address(addr.data(), addr.size());
  self->set_hostname(host_name());
  for (auto& [id, n] : nodes_) {
    if (!n->fabric_ready) continue;
    auto* mem = p->add_members();
    mem->set_node_id(id);
    mem->set_ucx_address(n->ucx_address);
    mem->set_hostname(n->hostname);
  }
  for (auto& [id, n] : nodes_)
    if (n->fabric_ready) queue_locked(n, m);
}

grpc::Status Manager::node_session(grpc::ServerContext* ctx, NodeStream* stream) {
  if (!authorized(ctx)) return unauthenticated();
  // A node manager receives every job's program, arguments and environment
  // and may fake its ranks' exits: only the daemons' own user may be one.
  const Caller who = identify(ctx);
  // A munge credential proves a user, not a daemon: a node manager shows
  // the token (or, on this host, its uid).
  if (!who.known() || who.uid != self_uid_ || who.via == Caller::Via::tcp_munge) {
    spdlog::warn("refused a node manager: {} (node managers run as {})", who.describe(),
                 user_name(self_uid_));
    return {grpc::StatusCode::PERMISSION_DENIED,
            "node managers must run as " + user_name(self_uid_) + ", the manager's user; " +
                (who.known() ? "this one is " + user_name(who.uid) : "this one is unidentified")};
  }
  v1::NodeMsg msg;
  if (!stream->Read(&msg) || msg.msg_case() != v1::NodeMsg::kRegister)
    return {grpc::StatusCode::INVALID_ARGUMENT, "the first message must be Register"};
  auto node = std::make_shared<Node>();
  // Its writer thread (node_writer.h). Cancelling the call (thread-safe)
  // ends a write blocked on a node manager that does not read: when the
  // session ends below, or when it left more unread than the writer holds.
  node->writer = std::make_unique<NodeWriter>(
      "node manager " + msg.register_().name() + " (pid " +
          std::to_string(msg.register_().pid()) + ")",
      [stream](const v1::ManagerMsg& m) { return stream->Write(m); },
      [ctx] { ctx->TryCancel(); });
  node->name = msg.register_().name();
  node->hostname = msg.register_().hostname();
  node->any_user = msg.register_().any_user();
  node->pid = msg.register_().pid();
  node->copy_rate = msg.register_().copy_rate();
  node->cpus = msg.register_().cpus();
  {
    std::lock_guard lk(mu_);
    if (stopping_) return {grpc::StatusCode::UNAVAILABLE, "manager is shutting down"};
    node->id = next_node_id_++;
    nodes_[node->id] = node;
    v1::ManagerMsg w;
    w.mutable_welcome()->set_node_id(node->id);
    queue_locked(node, w);
  }
  flush();
  spdlog::info("node {} registered: {} (pid {})", node->id, node->name, node->pid);

  while (stream->Read(&msg)) {
    // A node's local slice statistics (a batch up to ten times a second,
    // hundreds of records) are parsed and kept without mu_: the strobe
    // sender takes mu_ every slice, at real-time priority, and should not
    // wait behind a parse in a thread that is not.
    if (msg.msg_case() == v1::NodeMsg::kLocalSlices) {
      take_local_slices(*node, msg.local_slices());
      continue;
    }
    std::unique_lock lk(mu_);
    switch (msg.msg_case()) {
      case v1::NodeMsg::kFabricReady: {
        node->ucx_address = msg.fabric_ready().ucx_address();
        if (auto s = connect_node(*node); s != core::Status::ok) {
          spdlog::error("cannot connect to node {}: {}", node->id, core::status_str(s));
          break;
        }
        node->fabric_ready = true;
        node->joined_gen = peers_gen_ + 1;
        broadcast_peers_locked();
        break;
      }
      case v1::NodeMsg::kPeersApplied:
        node->peers_applied = std::max(node->peers_applied, msg.peers_applied().generation());
        break;
      case v1::NodeMsg::kJobStarted: {
        const auto& js = msg.job_started();
        auto it = jobs_.find(js.job_id());
        if (it == jobs_.end()) break;
        Job& j = *it->second;
        j.started.push_back(node->id);
        wake_strobe_sender();  // it waits for every node's answer (start_job)
        uint32_t k = 0;
        for (uint32_t r = 0; r < j.rank_node.size(); ++r)
          if (j.rank_node[r] == node->id && k < static_cast<uint32_t>(js.pids_size()))
            j.rank_pids[r] =
                "pid " + std::to_string(js.pids(static_cast<int>(k++))) + " on " + node->name;
        if (!js.error().empty()) {
          // Its ranks never existed: account for them now.
          for (uint32_t r = 0; r < j.rank_node.size(); ++r)
            if (j.rank_node[r] == node->id && !j.rank_done[r]) {
              j.rank_done[r] = true;
              j.ranks_done++;
            }
          bool not_found = js.error().find("not found") != std::string::npos ||
                           js.error().find("No such file") != std::string::npos;
          fail_job_locked(j, not_found ? 127 : 126, js.error());
          if (j.ranks_done == j.rank_node.size()) finish_job_locked(j);
        }
        break;
      }
      case v1::NodeMsg::kOutput: {
        auto it = jobs_.find(msg.output().job_id());
        if (it == jobs_.end() || it->second->exited) break;
        v1::JobEvent ev;
        *ev.mutable_output() = msg.output();
        push_event_locked(*it->second, std::move(ev));
        break;
      }
      case v1::NodeMsg::kInputTaken: {
        auto it = jobs_.find(msg.input_taken().job_id());
        if (it == jobs_.end()) break;
        Job& j = *it->second;
        // Never past what was sent: a node cannot open the window wider.
        j.input_taken = std::min(j.input_sent, j.input_taken + msg.input_taken().bytes());
        break;
      }
      case v1::NodeMsg::kReportLost: {
        // The node could not report a microphase over the fabric: the
        // strobe sender would wait for it until the phase watchdog. Only
        // a job that runs on this node; the words are the node's (input),
        // so bounded.
        auto it = jobs_.find(msg.report_lost().job_id());
        if (it == jobs_.end()) break;
        Job& j = *it->second;
        if (j.state == Job::State::done ||
            !std::binary_search(j.nodes.begin(), j.nodes.end(), node->id))
          break;
        std::string why = msg.report_lost().message().substr(0, 1024);
        spdlog::error("job {}: node {}: {}", j.id, node->name, why);
        fail_job_locked(j, 1,
                        "node manager " + node->name + " (pid " + std::to_string(node->pid) +
                            "): " + why);
        break;
      }
      case v1::NodeMsg::kJobSuspended: {
        // A node's word on a switch: only for a job on that node; its cost
        // is kept (bounded) for `bcs stats` and the bench, its error logged
        // (a rank that could not be stopped is gone: its exit follows).
        const auto& js = msg.job_suspended();
        auto it = jobs_.find(js.job_id());
        if (it == jobs_.end() ||
            !std::binary_search(it->second->nodes.begin(), it->second->nodes.end(), node->id))
          break;
        Job& j = *it->second;
        if (!js.error().empty())
          spdlog::warn("job {}: node {} could not {} its ranks: {}", j.id, node->name,
                       js.suspended() ? "stop" : "continue", js.error().substr(0, 256));
        if (js.suspended() == j.suspended) ++j.switch_acks;
        j.switch_ns.push_back(std::min<uint64_t>(js.cost_ns(), 60'000'000'000ull));
        if (j.switch_ns.size() > Job::kSwitchesKept) j.switch_ns.pop_front();
        break;
      }
      case v1::NodeMsg::kJobDescribed: {
        // A node's words, so checked: only when asked, only for a job on
        // that node, cut at 1 KiB, nothing but printable ASCII kept.
        auto it = jobs_.find(msg.job_described().job_id());
        if (it == jobs_.end()) break;
        Job& j = *it->second;
        if (!j.describing || !std::binary_search(j.nodes.begin(), j.nodes.end(), node->id)) break;
        std::string text = msg.job_described().text().substr(0, 1024);
        for (char& c : text)
          if (c < 0x20 || c > 0x7e) c = '?';
        j.described[node->id] = std::move(text);
        break;
      }
      case v1::NodeMsg::kRankExit: {
        auto it = jobs_.find(msg.rank_exit().job_id());
        if (it != jobs_.end()) {
          rank_exit_locked(*it->second, node->id, msg.rank_exit());
          keep_mmds_locked(*it->second, *node, msg.rank_exit());
        }
        break;
      }
      default:
        break;
    }
    lk.unlock();
    cv_.notify_all();
    flush();
  }
  node_lost(node->id);
  // The stream dies when this returns: its writer ends first (a write in
  // progress is cancelled and waited for), and what was left for the node
  // is dropped. (On the early return above, ~Node does the same.)
  node->writer->stop();
  return grpc::Status::OK;
}

void Manager::node_lost(uint32_t id) {
  {
    std::lock_guard lk(mu_);
    auto it = nodes_.find(id);
    if (it == nodes_.end()) return;
    auto node = it->second;
    nodes_.erase(it);
    fabric_.disconnect(id);
    bool had_job = false;
    for (auto& [jid, j] : jobs_) {
      if (j->state == Job::State::done) continue;
      if (std::find(j->nodes.begin(), j->nodes.end(), id) == j->nodes.end()) continue;
      had_job = true;
      fail_job_locked(
          *j, 1,
          "node manager " + node->name + " (pid " + std::to_string(node->pid) + ") was lost");
      // Its ranks died with it (PR_SET_PDEATHSIG): account for them.
      for (uint32_t r = 0; r < j->rank_node.size(); ++r)
        if (j->rank_node[r] == id && !j->rank_done[r]) {
          j->rank_done[r] = true;
          j->ranks_done++;
        }
      if (j->ranks_done == j->rank_node.size()) finish_job_locked(*j);
    }
    // Leaving while idle is how an embedded cluster ends: not worth a warning.
    if (had_job)
      spdlog::warn("node {} ({}) was lost during a job", id, node->name);
    else
      spdlog::info("node {} ({}) left", id, node->name);
    if (node->fabric_ready) broadcast_peers_locked();
  }
  wake_strobe_sender();  // a job on it waits for a report that will not come
  cv_.notify_all();
  flush();
}

// ------------------------------------------------------------------ jobs
void Manager::pause_output_locked(Job& j, bool pause) {
  if (j.output_paused == pause) return;
  j.output_paused = pause;
  v1::ManagerMsg m;
  m.mutable_pause_output()->set_job_id(j.id);
  m.mutable_pause_output()->set_pause(pause);
  for (uint32_t n : j.nodes)
    if (auto it = nodes_.find(n); it != nodes_.end()) queue_locked(it->second, m);
}

void Manager::push_event_locked(Job& j, v1::JobEvent ev) {
  if (ev.has_output()) j.held_bytes += ev.output().data().size();
  j.events.push_back(std::move(ev));
  // Back-pressure only towards a reader: a detached job nobody watches
  // runs on, and its oldest output goes past kOutputHeld instead.
  if (j.held_bytes > kOutputPause && (j.clients > 0 || !j.detached)) pause_output_locked(j, true);
  if (j.held_bytes <= kOutputHeld) return;
  // Nobody reads: drop the oldest output down to half the bound, and say so
  // where it was (the client sees a line naming the loss, not a silent gap).
  // Events other than output before it go too (JobEvent.started: a client
  // that never saw it counts its --timeout from what List says); the exit
  // never does.
  size_t k = 0;
  uint64_t gone = 0;
  int32_t rank = 0;
  while (k < j.events.size() && j.held_bytes - gone > kOutputHeld / 2 && !j.events[k].has_exit()) {
    if (j.events[k].has_output()) {
      gone += j.events[k].output().data().size();
      rank = j.events[k].output().rank();
    }
    ++k;
  }
  if (k == 0) return;
  v1::JobEvent note;
  auto* o = note.mutable_output();
  o->set_job_id(j.id);
  o->set_rank(rank);
  o->set_stream(v1::STDERR);
  o->set_data(fmt::format("bcs: {} bytes of this job's output were dropped: no client read "
                          "them (the manager holds {} MiB per job)\n",
                          gone, kOutputHeld >> 20));
  j.held_bytes = j.held_bytes - gone + note.output().data().size();
  j.events.erase(j.events.begin(), j.events.begin() + static_cast<std::ptrdiff_t>(k - 1));
  j.events.front() = std::move(note);
  j.events_base += k - 1;
  spdlog::warn("job {}: dropped {} bytes of output no client read", j.id, gone);
}

void Manager::drop_delivered_locked(Job& j, size_t next) {
  // Events before `next` (absolute) reached a client; the exit stays.
  size_t k = std::min(next - std::min(next, j.events_base), j.events.size());
  if (k > 0 && !j.events[k - 1].has_output()) --k;
  for (size_t i = 0; i < k; ++i)
    if (j.events[i].has_output()) j.held_bytes -= j.events[i].output().data().size();
  j.events.erase(j.events.begin(), j.events.begin() + static_cast<std::ptrdiff_t>(k));
  j.events_base += k;
  if (j.held_bytes < kOutputPause / 2) pause_output_locked(j, false);
}

void Manager::fail_job_locked(Job& j, int status, const std::string& message) {
  if (j.failed || j.state == Job::State::done) return;
  j.failed = true;
  j.fail_status = status;
  j.fail_message = message;
  spdlog::info("job {} failed: {}", j.id, message);
  wake_strobe_sender();  // its slices stop at once, not at the next check
  v1::ManagerMsg m;
  m.mutable_kill_job()->set_job_id(j.id);
  m.mutable_kill_job()->set_reason(message);
  for (uint32_t n : j.nodes)
    if (auto it = nodes_.find(n); it != nodes_.end()) queue_locked(it->second, m);
}

namespace {
uint64_t mono_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
}  // namespace

void Manager::fail_noticed_if_due(Job& j, bool now) {
  if (j.failed || j.noticed_message.empty()) return;
  if (!now && mono_ns() < j.noticed_deadline_ns) return;
  fail_job_locked(j, j.noticed_status, j.noticed_message);
}

// A node manager on this host is reached through shared memory (its
// death is known from its control stream, not from UCX).
core::Status Manager::connect_node(const Node& n) {
  const auto& a = n.ucx_address;
  return fabric_.connect(n.id, {reinterpret_cast<const uint8_t*>(a.data()), a.size()},
                         n.hostname == host_name());
}

// An endpoint the fabric gave up during an earlier job (a strobe send
// that did not complete in time closes it) would fail this job's first
// strobe with "no such node" although its node manager is alive (its
// control stream says so): it is connected again before the job starts.
void Manager::connect_again_locked(const Job& j) {
  for (uint32_t n : j.nodes) {
    auto it = nodes_.find(n);
    if (it == nodes_.end() || fabric_.connected(n)) continue;
    const auto st = connect_node(*it->second);
    // If that fails, the job's first strobe fails and names the node.
    if (st != core::Status::ok)
      spdlog::error("job {}: cannot connect again to node {} ({}): {}", j.id, n,
                    it->second->name, core::status_str(st));
    else
      spdlog::warn("job {}: the endpoint to node {} ({}) had been given up; connected again",
                   j.id, n, it->second->name);
  }
}

void Manager::finish_job_locked(Job& j) {
  if (j.state == Job::State::done) return;
  fail_noticed_if_due(j, true);  // no other cause came
  j.state = Job::State::done;
  j.ended_ns = now_ns();
  if (j.suspended_since) j.suspended_ns += j.ended_ns - std::exchange(j.suspended_since, 0);
  v1::JobEvent ev;
  auto* x = ev.mutable_exit();
  int status = j.max_status;
  if (j.failed) status = std::max(status, j.fail_status);
  x->set_status(status);
  x->set_message(j.fail_message);
  j.events.push_back(std::move(ev));
  j.exited = true;
  spdlog::info("job {} ended with status {}", j.id, status);
  // Test only: the endpoints to the job's nodes are given up, as after a
  // strobe send that did not complete in time (start_job connects again).
  static const bool fault_endpoints_lost = [] {
    const char* f = std::getenv("BCS_TEST_FAULT");
    return f && std::string_view(f) == "endpoints-lost";
  }();
  if (fault_endpoints_lost)
    for (uint32_t n : j.nodes) fabric_.disconnect(n);
  wake_strobe_sender();  // it may be sleeping through a long slice
  // Remember a bounded number of finished jobs.
  constexpr size_t kKeepFinished = 1000;
  size_t finished = 0;
  for (auto& [id, job] : jobs_) finished += job->state == Job::State::done;
  for (auto it = jobs_.begin(); finished > kKeepFinished && it != jobs_.end();) {
    if (it->second->state == Job::State::done && it->second.get() != &j) {
      it = jobs_.erase(it);
      --finished;
    } else {
      ++it;
    }
  }
  v1::ManagerMsg m;
  m.mutable_end_job()->set_job_id(j.id);
  for (uint32_t n : j.nodes)
    if (auto it = nodes_.find(n); it != nodes_.end()) queue_locked(it->second, m);
}

namespace {
std::string signal_name(int sig) {
  const char* d = ::strsignal(sig);
  return std::to_string(sig) + (d ? std::string(" (") + d + ")" : "");
}
}  // namespace

void Manager::rank_exit_locked(Job& j, uint32_t node, const v1::RankExit& e) {
  (void)node;
  const uint32_t r = e.rank();
  if (r >= j.rank_node.size() || j.rank_done[r]) return;
  j.rank_done[r] = true;
  j.ranks_done++;
  const int status = e.signal() ? 128 + e.signal() : e.exit_code();
  if (!e.killed_by_bcs()) {
    j.max_status = std::max(j.max_status, status);
    std::string who = "rank " + std::to_string(r) + " (" + j.rank_pids[r] + ")";
    if (!e.junk().empty()) {
      // Its control words are not its word (the node manager found junk in
      // them): what it did is only what its exit says. A job whose rank
      // wrote over its segment fails, whatever that exit.
      const std::string how = e.signal() ? "was killed by signal " + signal_name(e.signal())
                                         : "exited with status " + std::to_string(e.exit_code());
      fail_job_locked(j, status ? status : 1,
                      who + " corrupted its part of the job segment (" + e.junk().substr(0, 256) +
                          ") and " + how);
    } else if (!e.corrupted().empty()) {
      fail_job_locked(j, status, who + " was ended by its node manager: it " + e.corrupted());
    } else if (e.aborted() && e.noticed_peer_loss()) {
      // Only a consequence: the first cause (a rank that died, a lost
      // node) is usually reported a moment later by another node. Blame
      // waits for it (fail_noticed_if_due), and this message is the
      // fallback.
      if (!j.failed && j.noticed_message.empty()) {
        const int code = e.abort_code() & 0xff;
        j.noticed_status = code ? code : 1;
        j.noticed_message = who + " ended the job after it lost contact with a peer (error code " +
                            std::to_string(e.abort_code()) + ")";
        j.noticed_deadline_ns = mono_ns() + kNoticedGraceNs;
      }
    } else if (e.aborted()) {
      int code = e.abort_code() & 0xff;
      fail_job_locked(j, code ? code : 1,
                      who + " called MPI_Abort with error code " + std::to_string(e.abort_code()));
    } else if (e.signal()) {
      fail_job_locked(j, status, who + " was killed by signal " + signal_name(e.signal()));
    } else if (e.exit_code() != 0) {
      fail_job_locked(j, status, who + " exited with status " + std::to_string(e.exit_code()));
    } else if (e.mpi_initialized() && !e.mpi_finalized()) {
      fail_job_locked(j, 1, who + " exited without calling MPI_Finalize");
    }
  }
  if (j.ranks_done == j.rank_node.size()) finish_job_locked(j);
}

namespace {

// Why the request's environment and host list cannot be used, or "". The
// request comes from the network: nothing in it is trusted.
std::string check_launch(const v1::LaunchRequest& req, std::vector<std::string>* env) {
  std::vector<std::string> inherited(req.env().begin(), req.env().end());
  std::vector<std::string> settings(req.env_set().begin(), req.env_set().end());
  if (auto why = check_job_env(inherited, settings); !why.empty()) return why;
  *env = merge_job_env(std::move(inherited), settings);
  if (req.hosts_size() == 0) return {};
  if (req.nodes() || req.ranks_per_node())
    return "a host list cannot be combined with a node count or ranks per node";
  if (static_cast<size_t>(req.hosts_size()) > kMaxHosts)
    return "more than " + std::to_string(kMaxHosts) + " hosts";
  for (int i = 0; i < req.hosts_size(); ++i) {
    const auto& h = req.hosts(i);
    if (!host_name_ok(h.name()))
      return "'" + h.name().substr(0, 40) + "' is not a valid host name";
    if (h.slots() == 0 || h.slots() > kMaxSlotsPerHost)
      return "host " + h.name() + " has " + std::to_string(h.slots()) + " slots";
    for (int k = 0; k < i; ++k)
      if (req.hosts(k).name() == h.name()) return "host " + h.name() + " is listed twice";
  }
  return {};
}

}  // namespace

grpc::Status Manager::launch(grpc::ServerContext* ctx, const v1::LaunchRequest& req,
                             v1::LaunchReply* rep) {
  if (!authorized(ctx)) return unauthenticated();
  // A job runs as the user who submitted it.
  const Caller who = identify(ctx);
  if (!who.known())
    return unidentified(who);
  if (who.via == Caller::Via::tcp_loopback && who.uid != self_uid_) {
    // Until per-user credentials exist, TCP carries only the daemons' user.
    return {grpc::StatusCode::PERMISSION_DENIED,
            "over TCP only " + user_name(self_uid_) + " (the daemons' user) may launch jobs; " +
                (unix_.path().empty()
                     ? std::string("this manager has no unix socket (bcs-mm --socket PATH)")
                     : "use --manager unix:" + unix_.path())};
  }
  // Another user's job needs node managers that can switch to it: root, or
  // the dedicated user of the systemd units with CAP_SETUID/CAP_SETGID. A
  // node manager that registers later and cannot still refuses on its own.
  if (self_uid_ != 0 && who.uid != self_uid_) {
    std::lock_guard lk(mu_);
    for (auto& [id, n] : nodes_)
      if (!n->any_user)
        return {grpc::StatusCode::PERMISSION_DENIED,
                "this manager runs as " + user_name(self_uid_) + " and its node manager " +
                    n->name + " can run jobs only as " + user_name(self_uid_)};
  }
  if (req.nranks() == 0) return {grpc::StatusCode::INVALID_ARGUMENT, "nranks must be at least 1"};
  if (req.program().empty()) return {grpc::StatusCode::INVALID_ARGUMENT, "no program"};
  if (req.slice_ns() && (req.slice_ns() < 10'000 || req.slice_ns() > 10'000'000'000ull))
    return {grpc::StatusCode::INVALID_ARGUMENT, "the slice must be between 10us and 10s"};
  if (req.max_unexpected() > kMaxUnexpectedLimit)
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "max_unexpected must be at most " + std::to_string(kMaxUnexpectedLimit)};
  if (!v1::Strobe_IsValid(req.strobe()))
    return {grpc::StatusCode::INVALID_ARGUMENT, "unknown strobe mode " + std::to_string(req.strobe())};
  if (!v1::Binding_IsValid(req.bind()))
    return {grpc::StatusCode::INVALID_ARGUMENT, "unknown binding " + std::to_string(req.bind())};
  if (std::string why = job_size_problem(req.nranks(), req.nodes(), req.ranks_per_node());
      !why.empty())
    return {grpc::StatusCode::INVALID_ARGUMENT, why};
  std::vector<std::string> env;
  if (auto why = check_launch(req, &env); !why.empty())
    return {grpc::StatusCode::INVALID_ARGUMENT, why};
  // With a host list: rank -> host index, and the hosts that get a rank
  // (only those must be registered).
  std::vector<uint32_t> rank_host;
  std::vector<std::string> used_hosts;
  if (req.hosts_size()) {
    std::vector<uint32_t> slots;
    for (const auto& h : req.hosts()) slots.push_back(h.slots());
    rank_host = place_by_slots(req.nranks(), slots);
    for (uint32_t r = 0; r < req.nranks() && used_hosts.size() < slots.size(); ++r)
      if (rank_host[r] == used_hosts.size()) used_hosts.push_back(req.hosts(rank_host[r]).name());
  }
  const uint32_t want = std::max<uint32_t>(req.nodes(), 1);
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(req.wait_nodes_ms() ? req.wait_nodes_ms() : 10000);
  std::unique_lock lk(mu_);
  // Nodes are usable once their fabric endpoint exists and they have
  // connected to every other chosen node (they applied a peers table that
  // includes them).
  auto all_connected = [&](const std::vector<std::shared_ptr<Node>>& ready) {
    uint64_t need = 0;
    for (auto& n : ready) need = std::max(need, n->joined_gen);
    for (auto& n : ready)
      if (n->peers_applied < need) return false;
    return true;
  };
  // Free node managers first (held by no job that has not ended, so that
  // the job can start at once beside the running ones), then the least
  // loaded; in id order among equals, which on an idle cluster is the
  // first k.
  auto usable = [&](std::vector<uint32_t>* chosen) {
    std::vector<std::shared_ptr<Node>> ready;
    for (auto& [id, n] : nodes_)
      if (n->fabric_ready) ready.push_back(n);
    uint32_t k = req.nodes() ? req.nodes() : static_cast<uint32_t>(ready.size());
    k = std::min<uint32_t>(k, req.nranks());
    if (ready.size() < want || k == 0) return false;
    std::map<uint32_t, uint32_t> load;
    for (const auto& [jid, job] : jobs_)
      if (job->state != Job::State::done)
        for (uint32_t n : job->nodes) ++load[n];
    std::stable_sort(ready.begin(), ready.end(), [&](const auto& a, const auto& b) {
      return load[a->id] < load[b->id];
    });
    ready.resize(k);
    std::sort(ready.begin(), ready.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
    if (!all_connected(ready)) return false;
    chosen->clear();
    for (auto& n : ready) chosen->push_back(n->id);
    return true;
  };
  // By name: the node managers called like the used hosts, in host order.
  // A name two node managers share would make the mapping a guess: refused.
  std::string host_error;
  auto usable_by_name = [&](std::vector<uint32_t>* chosen) {
    std::vector<std::shared_ptr<Node>> picked;
    for (const auto& h : used_hosts) {
      std::shared_ptr<Node> match;
      for (auto& [id, n] : nodes_) {
        if (n->name != h) continue;
        if (match) {
          host_error = "two node managers are named '" + h + "'";
          return true;  // stop waiting: this will not get better
        }
        match = n;
      }
      if (!match || !match->fabric_ready) return false;
      picked.push_back(match);
    }
    if (!all_connected(picked)) return false;
    chosen->clear();
    for (auto& n : picked) chosen->push_back(n->id);
    return true;
  };
  std::vector<uint32_t> chosen;
  const bool by_name = !used_hosts.empty();
  if (!cv_.wait_until(lk, deadline, [&] {
        return stopping_ || (by_name ? usable_by_name(&chosen) : usable(&chosen));
      })) {
    if (!by_name)
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "only " + std::to_string(nodes_.size()) + " node manager(s) registered, " +
                  std::to_string(want) + " needed"};
    std::string missing, known;
    for (const auto& h : used_hosts)
      if (std::none_of(nodes_.begin(), nodes_.end(),
                       [&](const auto& kv) { return kv.second->name == h; }))
        missing += (missing.empty() ? "'" : ", '") + h + "'";
    // Sorted: the message must not depend on which node registered first.
    std::vector<std::string> names;
    for (auto& [id, n] : nodes_) names.push_back(n->name);
    std::sort(names.begin(), names.end());
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    if (missing.empty())
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "the node managers of the hosts did not get ready in time"};
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "no node manager named " + missing + " is registered (registered: " +
                (known.empty() ? "none" : known) + ")"};
  }
  if (stopping_) return {grpc::StatusCode::UNAVAILABLE, "manager is shutting down"};
  if (!host_error.empty()) return {grpc::StatusCode::FAILED_PRECONDITION, host_error};

  auto j = std::make_shared<Job>();
  j->id = next_job_id_++;
  j->req = req;
  j->uid = who.uid;
  j->gid = who.gid;
  j->env = std::move(env);
  j->slice_ns = req.slice_ns() ? req.slice_ns() : cfg_.slice_ns;
  j->chunk_bytes = req.chunk_bytes() ? req.chunk_bytes() : cfg_.chunk_bytes;
  j->max_unexpected = req.max_unexpected() ? req.max_unexpected() : cfg_.max_unexpected;
  j->fixed_strobe = req.strobe() == v1::STROBE_DEFAULT ? cfg_.fixed_strobe
                                                       : req.strobe() == v1::STROBE_FIXED;
  j->bind = req.bind();
  j->nodes = chosen;
  if (by_name) {
    // Host i of the request is chosen[i] (every used host precedes the
    // unused ones: the slots are filled in host order).
    for (uint32_t r = 0; r < req.nranks(); ++r) j->rank_node.push_back(chosen[rank_host[r]]);
    std::sort(j->nodes.begin(), j->nodes.end());
  } else {
    // Cyclic placement by default: consecutive ranks land on different
    // nodes, so that neighbour exchanges exercise the network path. With
    // ranks per node, blocks in rank order (uneven layouts such as 3 + 1).
    const uint32_t ppn = req.ranks_per_node();
    for (uint32_t r = 0; r < req.nranks(); ++r)
      j->rank_node.push_back(ppn ? chosen[(r / ppn) % chosen.size()] : chosen[r % chosen.size()]);
  }
  // A node manager that got no rank (a large --ppn) takes no part in the job.
  std::erase_if(j->nodes, [&](uint32_t n) {
    return std::find(j->rank_node.begin(), j->rank_node.end(), n) == j->rank_node.end();
  });
  // Now that the placement is known: no node manager gets more ranks than it
  // can run (job_limits.h).
  for (uint32_t n : j->nodes) {
    const auto here = static_cast<uint64_t>(std::count(j->rank_node.begin(), j->rank_node.end(), n));
    if (here > kMaxRanksPerNode)
      return {grpc::StatusCode::INVALID_ARGUMENT,
              std::to_string(req.nranks()) + " ranks put " + std::to_string(here) +
                  " on one node manager; a node manager runs at most " +
                  std::to_string(kMaxRanksPerNode) + " ranks (use at least " +
                  std::to_string((req.nranks() + kMaxRanksPerNode - 1) / kMaxRanksPerNode) +
                  " node managers)"};
  }
  if (!j->chunk_bytes) {
    // Derived: what the slowest of its node managers copies in a slice.
    uint64_t rate = UINT64_MAX;
    for (uint32_t n : j->nodes) {
      const auto it = nodes_.find(n);
      rate = std::min(rate, it == nodes_.end() ? 0 : it->second->copy_rate);
    }
    j->copy_rate = rate == UINT64_MAX ? 0 : rate;
    j->chunk_bytes = chunk_budget(j->copy_rate, j->slice_ns);
  }
  j->rank_done.assign(req.nranks(), false);
  j->rank_pids.assign(req.nranks(), "not started");
  j->detached = req.detach();
  j->last_client = req.client_pid() ? "bcs run, pid " + std::to_string(req.client_pid()) : "bcs run";
  j->attach_deadline = std::chrono::steady_clock::now() + kAttachWait;
  jobs_[j->id] = j;
  queue_.push_back(j->id);
  wake_strobe_sender();  // it admits the job once its nodes are free
  rep->set_job_id(j->id);
  spdlog::info("job {} queued: {} rank(s) of {} on {} node(s) for {}{}", j->id, req.nranks(),
               req.program(), j->nodes.size(), who.describe(), j->detached ? ", detached" : "");
  lk.unlock();
  cv_.notify_all();
  if (!j->detached) attach_cv_.notify_all();
  return grpc::Status::OK;
}

void Manager::shutdown() {
  {
    std::lock_guard lk(mu_);
    for (auto& [id, j] : jobs_) {
      if (j->state == Job::State::done) continue;
      fail_job_locked(*j, 143, "the machine manager is shutting down");
      if (j->state == Job::State::queued) finish_job_locked(*j);
    }
    queue_.clear();
  }
  cv_.notify_all();
  flush();
  std::unique_lock lk(mu_);
  cv_.wait_for(lk, 3s, [&] {
    for (auto& [id, j] : jobs_)
      if (j->state != Job::State::done) return false;
    return true;
  });
  stopping_ = true;
  attach_cv_.notify_all();
  wake_strobe_sender();
  // Node managers that hear this exit quietly instead of reporting a lost manager.
  v1::ManagerMsg bye;
  bye.mutable_goodbye();
  for (auto& [id, n] : nodes_) queue_locked(n, bye);
  lk.unlock();
  cv_.notify_all();
  flush();
}

}  // namespace bcs::mm
