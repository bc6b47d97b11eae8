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
        const uint64_t cost = std::min<uint64_t>(js.cost_ns(), 60'000'000'000ull);
        if (js.suspended() == j.suspended) {
          ++j.switch_acks;
          if (js.suspended() && js.background()) ++j.background_acks;
          // The switch took as long as its slowest node.
          if (cost > j.last_switch_max_ns) {
            j.unrecorded_switch_ns.fetch_add(cost - j.last_switch_max_ns, std::memory_order_relaxed);
            j.last_switch_max_ns = cost;
          }
        }
        j.switch_ns.push_back(cost);
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
  j.cpu_ns += std::min<uint64_t>(e.cpu_ns(), 1'000'000'000'000'000ull);  // a node's word: bounded
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
