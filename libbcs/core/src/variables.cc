// libbcs/core — Fabric's variables: var-set, var-get and compare-and-write
// (the paper's compare-and-write primitive) over Fabric::Impl's replicas.
#include "fabric_impl.h"

namespace bcs::core {

Status Fabric::var_set(VarId var, int64_t value, const NodeSet& watchers,
                       std::span<const uint8_t> attachment, const SendLimit& limit) {
  auto& I = *impl_;
  if (I.closed.load()) return Status::closed;
  // Held across the sends so that two concurrent var_set calls reach every
  // watcher in the same order as they changed the local value.
  std::lock_guard send_lk(I.var_send_mu);
  {
    std::lock_guard lk(I.state_mu);
    auto& v = I.vars[var];
    v.value = value;
    v.attachment.assign(attachment.begin(), attachment.end());
    I.wake_locked(true, 0);
  }
  NodeSet remote;
  for (NodeId n : watchers)
    if (n != I.cfg.self) remote.push_back(n);
  if (remote.empty()) return Status::ok;
  std::vector<uint8_t> payload(sizeof(int64_t) + attachment.size());
  std::memcpy(payload.data(), &value, sizeof value);
  if (!attachment.empty())
    std::memcpy(payload.data() + sizeof value, attachment.data(), attachment.size());
  // Not all-or-nothing: one unreachable watcher must not hide the update
  // from the others; the caller still learns about it from the status.
  return I.send(remote, Kind::var, var, payload, /*all_or_nothing=*/false, limit);
}

VarReplica Fabric::var_get(VarId var, NodeId node) {
  auto& I = *impl_;
  std::lock_guard lk(I.state_mu);
  if (node == I.cfg.self) {
    VarReplica r;
    r.node = node;
    auto it = I.vars.find(var);
    if (it != I.vars.end()) {
      r.value = it->second.value;
      r.attachment = it->second.attachment;
    }
    return r;
  }
  auto it = I.replicas.find({var, node});
  if (it != I.replicas.end()) return it->second;
  VarReplica r;
  r.node = node;
  return r;
}

Status Fabric::compare_and_write(const NodeSet& nodes, VarId var, Cmp cmp, int64_t value,
                                 EventId write_ev, std::span<const uint8_t> write_data,
                                 std::optional<std::chrono::nanoseconds> timeout,
                                 std::vector<VarReplica>* snapshot, uint64_t* retries) {
  auto& I = *impl_;
  if (nodes.empty()) return Status::invalid;
  uint64_t failed_evals = 0;
  auto attempt = [&] {
    std::lock_guard lk(I.state_mu);
    auto current = [&](NodeId n) -> std::pair<int64_t, const std::vector<uint8_t>*> {
      if (n == I.cfg.self) {
        auto it = I.vars.find(var);
        if (it == I.vars.end()) return {INT64_MIN, nullptr};
        return {it->second.value, &it->second.attachment};
      }
      auto it = I.replicas.find({var, n});
      if (it == I.replicas.end()) return {INT64_MIN, nullptr};
      return {it->second.value, &it->second.attachment};
    };
    for (NodeId n : nodes) {
      if (!cmp_holds(current(n).first, cmp, value)) {
        ++failed_evals;
        return false;
      }
    }
    if (snapshot) {
      snapshot->clear();
      for (NodeId n : nodes) {
        auto [v, att] = current(n);
        VarReplica r;
        r.node = n;
        r.value = v;
        if (att) r.attachment = *att;
        snapshot->push_back(std::move(r));
      }
    }
    return true;
  };
  Status st = I.block(attempt, /*on_var=*/true, 0, timeout);
  if (retries) *retries = failed_evals;
  if (st != Status::ok) return st;
  if (write_ev == kNoWrite) return Status::ok;
  return I.send(nodes, Kind::event, write_ev, write_data, /*all_or_nothing=*/true);
}

}  // namespace bcs::core
