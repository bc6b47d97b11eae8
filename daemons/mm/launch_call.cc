// Jobs.Launch: a request checked (it comes from the network), its node
// managers chosen (by name, or free ones first), its ranks placed, and the
// job queued for the strobe sender's admission (strobe_sender.cc).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "job_limits.h"
#include "launch.h"
#include "manager.h"
#include "slice_plan.h"

namespace bcs::mm {

using namespace std::chrono_literals;


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

}  // namespace bcs::mm
