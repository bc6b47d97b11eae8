// libbcs/core — Fabric: the three BCS core primitives over one UCX worker.
// This file: endpoints and events (xfer-and-signal, test-event, handlers);
// variables.cc: compare-and-write; fabric_impl.h: the UCX machinery (wire
// format, ordering, locks).
#include "fabric_impl.h"

#include <dirent.h>

#include <fstream>

namespace bcs::core {

const char* status_str(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::timeout: return "timeout";
    case Status::no_such_node: return "no such node";
    case Status::closed: return "closed";
    case Status::io_error: return "io error";
    case Status::invalid: return "invalid argument";
  }
  return "unknown status";
}


// ---- Fabric -------------------------------------------------------------------

Fabric::Fabric(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Fabric::~Fabric() = default;

std::unique_ptr<Fabric> Fabric::create(const FabricConfig& cfg, std::string* error) {
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  if (!impl->init(error)) return nullptr;
  return std::unique_ptr<Fabric>(new Fabric(std::move(impl)));
}

NodeId Fabric::self() const { return impl_->cfg.self; }

std::vector<uint8_t> Fabric::address() const { return impl_->addr; }

Status Fabric::connect(NodeId peer, std::span<const uint8_t> address, bool same_host) {
  if (address.empty()) return Status::invalid;
  if (impl_->closed.load()) return Status::closed;
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
  const bool none = impl_->err_mode == Impl::ErrMode::none ||
                    (impl_->err_mode == Impl::ErrMode::by_host && same_host);
  ep.err_mode = none ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = [](void* arg, ucp_ep_h failed_ep, ucs_status_t status) {
    // Runs inside progress under the UCX lock: only flag the peer here; the
    // endpoint is closed by whoever next replaces, disconnects or destroys it.
    auto* impl = static_cast<Impl*>(arg);
    impl->set_error(std::string("peer endpoint error: ") + ucs_status_string(status));
    std::lock_guard lk(impl->peers_mu);
    for (auto& [id, p] : impl->peers)
      if (p->ep_ident == failed_ep) p->failed.store(true);
  };
  ep.err_handler.arg = impl_.get();
  ucp_ep_h h = nullptr;
  ucs_status_t st = ucp_ep_create(impl_->worker, &ep, &h);
  if (st != UCS_OK) {
    impl_->set_error(std::string("ucp_ep_create: ") + ucs_status_string(st));
    return Status::io_error;
  }
  auto p = std::make_shared<Impl::Peer>();
  p->id = peer;
  p->ep_ident = h;
  p->ep = h;
  p->epoch = random_epoch();
  std::shared_ptr<Impl::Peer> old;
  {
    std::lock_guard lk(impl_->peers_mu);
    auto& slot = impl_->peers[peer];
    old = std::exchange(slot, p);
  }
  if (old) impl_->close_ep(*old);
  return Status::ok;
}

void Fabric::disconnect(NodeId peer) {
  std::shared_ptr<Impl::Peer> old;
  {
    std::lock_guard lk(impl_->peers_mu);
    auto it = impl_->peers.find(peer);
    if (it == impl_->peers.end()) return;
    old = std::move(it->second);
    impl_->peers.erase(it);
  }
  impl_->close_ep(*old);
}

bool Fabric::connected(NodeId peer) const {
  auto p = impl_->find_peer(peer);
  return p && !p->failed.load();
}

Status Fabric::xfer_and_signal(const NodeSet& dests, EventId ev, std::span<const uint8_t> data) {
  return impl_->send(dests, Kind::event, ev, data, /*all_or_nothing=*/true, SendLimit{});
}

Status Fabric::xfer_and_signal(NodeId dest, EventId ev, std::span<const uint8_t> data) {
  return xfer_and_signal(NodeSet{dest}, ev, data);
}

Status Fabric::xfer_and_signal(NodeId dest, EventId ev, std::span<const uint8_t> data,
                               const SendLimit& limit) {
  return impl_->send(NodeSet{dest}, Kind::event, ev, data, /*all_or_nothing=*/true, limit);
}

Status Fabric::test_event(EventId ev, Message* out, std::optional<std::chrono::nanoseconds> timeout) {
  if (!out) return Status::invalid;
  auto& I = *impl_;
  auto attempt = [&] {
    std::lock_guard lk(I.state_mu);
    auto it = I.queues.find(ev);
    if (it == I.queues.end() || it->second.empty()) return false;
    *out = std::move(it->second.front());
    it->second.pop_front();
    return true;
  };
  return I.block(attempt, /*on_var=*/false, ev, timeout);
}

Status Fabric::wait_event_or_var(EventId ev, uint64_t var_gen,
                                 std::optional<std::chrono::nanoseconds> timeout) {
  auto& I = *impl_;
  auto attempt = [&] {
    std::lock_guard lk(I.state_mu);
    if (I.var_gen != var_gen) return true;
    auto it = I.queues.find(ev);
    return it != I.queues.end() && !it->second.empty();
  };
  return I.block(attempt, /*on_var=*/false, ev, timeout, /*both=*/true);
}

uint64_t Fabric::var_generation() {
  std::lock_guard lk(impl_->state_mu);
  return impl_->var_gen;
}

void Fabric::signal_local(EventId ev, std::span<const uint8_t> data) {
  auto& I = *impl_;
  std::lock_guard lk(I.state_mu);
  I.queues[ev].push_back(Message{I.cfg.self, {data.begin(), data.end()}});
  I.wake_locked(false, ev);
}

size_t Fabric::pending(EventId ev) {
  impl_->progress();
  std::lock_guard lk(impl_->state_mu);
  auto it = impl_->queues.find(ev);
  return it == impl_->queues.end() ? 0 : it->second.size();
}

void Fabric::set_handler(EventId ev, std::function<void(Message&&)> handler) {
  auto& I = *impl_;
  std::lock_guard lk(I.state_mu);
  if (!handler) {
    I.handlers.erase(ev);
    return;
  }
  I.handlers[ev] = std::make_shared<const std::function<void(Message&&)>>(std::move(handler));
  // Messages that arrived before the handler was installed go to it too, in order.
  auto it = I.queues.find(ev);
  if (it != I.queues.end()) {
    for (auto& m : it->second) I.dispatch_q.emplace_back(ev, std::move(m));
    I.queues.erase(it);
  }
}

void Fabric::progress() { impl_->progress(); }

void Fabric::close() { impl_->close(); }

// UCX names its async thread "async" (ucs/async/thread.c); there is one per
// process, started with the first event handler, which the worker's
// interfaces register when it is created. No API gives its id, so the
// kernel's list of this process's threads does.
std::vector<int> Fabric::ucx_async_threads() const {
  std::vector<int> tids;
  DIR* d = ::opendir("/proc/self/task");
  if (!d) return tids;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
    std::string name;
    if (std::getline(comm, name) && name == "async") tids.push_back(std::atoi(e->d_name));
  }
  ::closedir(d);
  return tids;
}

std::string Fabric::last_error() const {
  std::lock_guard lk(impl_->err_mu);
  return impl_->last_err;
}

}  // namespace bcs::core
