// libbcs/core, internal: Fabric::Impl, the UCX machinery behind the three
// primitives (setup and teardown, the receive path with its ordered streams,
// waking and sleeping, the send path). fabric.cc is the public Fabric's
// endpoints and events (xfer-and-signal, test-event), variables.cc its
// variables (compare-and-write). Not installed; nothing outside src/
// includes it.
//
// Wire format: every message is one UCX active message with the same AM id.
// Its UCX header is a WireHeader (sender, event or variable id, kind, and a
// per-endpoint sequence number); its data is the user's block (events) or
// value + attachment (variable updates).
//
// Ordering: UCX delivers the *header* of an eager message and the RTS of a
// rendezvous message in callback order, but a rendezvous body completes only
// later, after the receiver fetched it. A 10 B message sent after a 4 MiB one
// would therefore overtake it if we queued on arrival. Every endpoint (one
// "stream") numbers its messages; the receiver keeps the stream's entries in
// a map keyed by sequence number and releases them strictly in order once
// each one is complete. A stream is identified by (sender, epoch), the epoch
// being random per endpoint, so a reconnected or restarted sender starts a
// fresh stream instead of colliding with old numbers.
//
// Locks (always taken in this order, never held across a user callback):
//   var_send_mu_  serialises var_set so replicas see updates in set order
//   Peer::mu      serialises sequence numbering + ucp_am_send_nbx per peer
//   (UCX worker lock, taken inside UCX calls; our UCX callbacks run under it)
//   peers_mu_, state_mu_, err_mu_, pool_mu_  leaf locks, never held across
//                 a UCX call
#pragma once

#include "bcs/core.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <string_view>
#include <unordered_map>
#include <utility>


namespace bcs::core {
namespace detail {

using Clock = std::chrono::steady_clock;
using std::chrono::nanoseconds;

// The one AM id of the layer. Small on purpose: UCX sizes its handler table by
// the largest id registered.
constexpr unsigned kAmId = 7;

// How often a send that waits for a stalled peer asks its caller whether to
// give up (SendLimit::give_up).
constexpr auto kGiveUpPoll = std::chrono::milliseconds(100);
// How long teardown of one endpoint may take before we stop waiting for it.
constexpr auto kCloseTimeout = std::chrono::seconds(2);
// Sleep cap while waiting for send completion: not every transport signals
// send completions on the wakeup fd, so a send waiter re-checks at this rate
// (sleeping, not spinning).
constexpr auto kSendPollCap = std::chrono::milliseconds(1);

enum class Kind : uint8_t { event = 1, var = 2 };

struct WireHeader {
  uint64_t epoch = 0;
  uint64_t seq = 0;
  uint32_t from = 0;
  uint16_t id = 0;  // EventId or VarId
  uint8_t kind = 0;
  uint8_t version = 1;
};
static_assert(sizeof(WireHeader) == 24);

// Owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// Guards against re-entrant handler dispatch on one thread (a handler that
// calls xfer_and_signal progresses the worker again).
inline thread_local const void* t_dispatching = nullptr;

inline bool cmp_holds(int64_t lhs, Cmp cmp, int64_t rhs) {
  switch (cmp) {
    case Cmp::ge: return lhs >= rhs;
    case Cmp::eq: return lhs == rhs;
    case Cmp::gt: return lhs > rhs;
  }
  return false;
}

inline uint64_t random_epoch() {
  static std::mutex mu;
  static std::mt19937_64 gen{std::random_device{}()};
  std::lock_guard lk(mu);
  uint64_t v = 0;
  while (v == 0) v = gen();
  return v;
}

}  // namespace detail

using namespace detail;


struct Fabric::Impl {
  struct Peer {
    NodeId id = 0;
    ucp_ep_h ep_ident = nullptr;  // immutable: identifies the peer in the error callback
    uint64_t epoch = 0;
    std::atomic<bool> failed{false};
    std::mutex mu;                // guards ep and next_seq
    ucp_ep_h ep = nullptr;        // null once closed
    uint64_t next_seq = 0;
  };

  struct SendOp {
    std::atomic<bool> done{false};
    ucs_status_t status = UCS_OK;
    WireHeader hdr;
    std::shared_ptr<Peer> peer;
  };

  using StreamKey = std::pair<NodeId, uint64_t>;  // (sender, epoch)

  struct Entry {
    Impl* owner = nullptr;
    StreamKey key;
    uint64_t seq = 0;
    Kind kind = Kind::event;
    uint16_t id = 0;
    bool ready = false;
    bool failed = false;
    std::vector<uint8_t> data;
  };

  struct Stream {
    uint64_t next = 0;
    std::map<uint64_t, Entry> pending;
  };

  struct LocalVar {
    int64_t value = INT64_MIN;
    std::vector<uint8_t> attachment;
  };

  struct Waiter {
    Fd efd;
    bool on_var = false;  // waits for variable changes (compare_and_write)
    EventId ev = 0;       // else waits for messages on this event
    bool both = false;    // waits for either (wait_event_or_var)
    // Set after each write to `efd` (kick), cleared by the read that empties
    // it (WaiterLease::drain): an unkicked fd is never read, so a wait costs
    // no read that can only fail with EAGAIN.
    std::atomic<bool> kicked{false};
  };

  using Handler = std::shared_ptr<const std::function<void(Message&&)>>;

  FabricConfig cfg;
  // UCX 1.13 drops its shared-memory transports (posix, sysv, cma) from any
  // endpoint created with UCP_ERR_HANDLING_MODE_PEER, leaving TCP loopback
  // between processes of one host. So peers on this host get endpoints
  // without it (connect's same_host), others with it. BCS_CORE_ERR_MODE
  // forces one mode for all: "peer" or "none".
  enum class ErrMode { by_host, peer, none };
  ErrMode err_mode = ErrMode::by_host;
  ucp_context_h ctx = nullptr;
  ucp_worker_h worker = nullptr;
  int ucx_efd = -1;
  std::vector<uint8_t> addr;
  std::atomic<bool> closed{false};

  mutable std::mutex peers_mu;
  std::unordered_map<NodeId, std::shared_ptr<Peer>> peers;

  std::mutex var_send_mu;

  std::mutex state_mu;
  std::map<StreamKey, Stream> streams;
  std::unordered_map<EventId, std::deque<Message>> queues;
  std::unordered_map<EventId, Handler> handlers;
  std::deque<std::pair<EventId, Message>> dispatch_q;
  bool dispatching = false;
  std::unordered_map<VarId, LocalVar> vars;
  std::map<std::pair<VarId, NodeId>, VarReplica> replicas;
  std::list<Waiter*> waiters;
  // Grows with every variable change taken here (a replica or a local
  // value): wait_event_or_var's caller tells by it what it has seen.
  uint64_t var_gen = 0;
  // Send ops abandoned after a timeout whose UCX request never completed:
  // kept alive so a late completion callback writes to valid memory.
  std::vector<std::unique_ptr<SendOp>> orphans;

  std::mutex pool_mu;
  std::vector<std::unique_ptr<Waiter>> waiter_pool;

  mutable std::mutex err_mu;
  std::string last_err;

  ~Impl() { teardown(); }

  void set_error(std::string e) {
    std::lock_guard lk(err_mu);
    last_err = std::move(e);
  }

  // ---- setup / teardown -------------------------------------------------

  bool init(std::string* error) {
    if (const char* m = std::getenv("BCS_CORE_ERR_MODE")) {
      if (std::string_view(m) == "none") err_mode = ErrMode::none;
      if (std::string_view(m) == "peer") err_mode = ErrMode::peer;
    }
    ucp_config_t* config = nullptr;
    ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
    if (st != UCS_OK) return fail(error, "ucp_config_read", st);
    if (!cfg.net_devices.empty()) {
      st = ucp_config_modify(config, "NET_DEVICES", cfg.net_devices.c_str());
      if (st != UCS_OK) {
        ucp_config_release(config);
        return fail(error, ("NET_DEVICES=" + cfg.net_devices).c_str(), st);
      }
    }
    // The worker's lock and UCX's async thread's lock as mutexes, not
    // spinlocks (unless UCX_USE_MT_MUTEX says otherwise). The daemons run
    // the async thread and their wake-up threads at SCHED_FIFO
    // (daemons/common/sched_hint.h); one of them spinning on a lock held
    // by a normal thread preempted on the same CPU holds that CPU until
    // RT throttling stops it: periods of 48-104 ms in bench/strobe.sh.
    if (!std::getenv("UCX_USE_MT_MUTEX")) {
      st = ucp_config_modify(config, "USE_MT_MUTEX", "y");
      if (st != UCS_OK) {
        ucp_config_release(config);
        return fail(error, "USE_MT_MUTEX=y", st);
      }
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    st = ucp_init(&params, config, &ctx);
    ucp_config_release(config);
    if (st != UCS_OK) return fail(error, "ucp_init", st);

    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_MULTI;
    st = ucp_worker_create(ctx, &wp, &worker);
    if (st != UCS_OK) return fail(error, "ucp_worker_create", st);

    ucp_worker_attr_t wa{};
    wa.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
    st = ucp_worker_query(worker, &wa);
    if (st != UCS_OK) return fail(error, "ucp_worker_query", st);
    if (wa.thread_mode != UCS_THREAD_MODE_MULTI) {
      if (error) *error = "UCX worker does not support UCS_THREAD_MODE_MULTI";
      return false;
    }

    st = ucp_worker_get_efd(worker, &ucx_efd);
    if (st != UCS_OK) return fail(error, "ucp_worker_get_efd", st);

    ucp_address_t* a = nullptr;
    size_t alen = 0;
    st = ucp_worker_get_address(worker, &a, &alen);
    if (st != UCS_OK) return fail(error, "ucp_worker_get_address", st);
    const auto* b = reinterpret_cast<const uint8_t*>(a);
    addr.assign(b, b + alen);
    ucp_worker_release_address(worker, a);

    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    hp.id = kAmId;
    hp.cb = &Impl::am_cb;
    hp.arg = this;
    hp.flags = UCP_AM_FLAG_WHOLE_MSG;
    st = ucp_worker_set_am_recv_handler(worker, &hp);
    if (st != UCS_OK) return fail(error, "ucp_worker_set_am_recv_handler", st);
    return true;
  }

  static bool fail(std::string* error, const char* what, ucs_status_t st) {
    if (error) *error = std::string(what) + ": " + ucs_status_string(st);
    return false;
  }

  void teardown() {
    close();
    std::vector<std::shared_ptr<Peer>> all;
    {
      std::lock_guard lk(peers_mu);
      for (auto& [id, p] : peers) all.push_back(p);
      peers.clear();
    }
    if (worker) {
      for (auto& p : all) close_ep(*p);
      ucp_worker_destroy(worker);
      worker = nullptr;
    }
    if (ctx) {
      ucp_cleanup(ctx);
      ctx = nullptr;
    }
  }

  // Force-closes the peer's endpoint (cancelling its outstanding sends) and
  // progresses, bounded, until UCX has released it.
  void close_ep(Peer& p) {
    p.failed.store(true);
    ucp_ep_h ep = nullptr;
    {
      std::lock_guard lk(p.mu);
      ep = std::exchange(p.ep, nullptr);
    }
    if (!ep) return;
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &rp);
    if (req == nullptr || UCS_PTR_IS_ERR(req)) return;
    const auto deadline = Clock::now() + kCloseTimeout;
    while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < deadline) {
      if (ucp_worker_progress(worker) == 0) sleep_on_ucx(deadline, nullptr, kSendPollCap);
    }
    // If it is still in progress UCX owns it; freeing marks it for release
    // on completion.
    ucp_request_free(req);
  }

  // ---- receive path (UCX callbacks; run under the UCX worker lock) -------

  static ucs_status_t am_cb(void* arg, const void* header, size_t header_length,
                            void* data, size_t length, const ucp_am_recv_param_t* param) {
    auto* self = static_cast<Impl*>(arg);
    if (header_length < sizeof(WireHeader)) return UCS_OK;  // not ours: drop
    WireHeader h;
    std::memcpy(&h, header, sizeof h);
    if (h.kind != static_cast<uint8_t>(Kind::event) && h.kind != static_cast<uint8_t>(Kind::var))
      return UCS_OK;
    const bool rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;

    std::unique_lock lk(self->state_mu);
    Stream& s = self->streams[{h.from, h.epoch}];
    if (h.seq < s.next || s.pending.count(h.seq)) return UCS_OK;  // duplicate
    Entry& e = s.pending[h.seq];
    e.owner = self;
    e.key = {h.from, h.epoch};
    e.seq = h.seq;
    e.kind = static_cast<Kind>(h.kind);
    e.id = h.id;
    if (!rndv) {
      const auto* b = static_cast<const uint8_t*>(data);
      if (length) e.data.assign(b, b + length);
      e.ready = true;
      self->advance_locked(s);
      return UCS_OK;
    }
    // Rendezvous: fetch the body into the entry's own buffer; the entry stays
    // (not ready) in the stream and holds back later messages until then.
    e.data.resize(length);
    uint8_t* buf = e.data.data();
    lk.unlock();  // std::map nodes are stable; only completion erases `e`

    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = &Impl::rndv_done;
    rp.user_data = &e;
    ucs_status_ptr_t req = ucp_am_recv_data_nbx(self->worker, data, buf, length, &rp);
    if (req == nullptr) {
      self->rndv_finish(e, UCS_OK);
    } else if (UCS_PTR_IS_ERR(req)) {
      self->rndv_finish(e, UCS_PTR_STATUS(req));
    }
    return UCS_INPROGRESS;
  }

  static void rndv_done(void* request, ucs_status_t status, size_t /*length*/, void* user_data) {
    auto* e = static_cast<Entry*>(user_data);
    e->owner->rndv_finish(*e, status);
    ucp_request_free(request);
  }

  void rndv_finish(Entry& e, ucs_status_t status) {
    if (status != UCS_OK) set_error(std::string("rendezvous receive: ") + ucs_status_string(status));
    std::lock_guard lk(state_mu);
    e.ready = true;
    e.failed = status != UCS_OK;
    auto it = streams.find(e.key);
    if (it != streams.end()) advance_locked(it->second);
  }

  // Releases the stream's complete entries in sequence order.
  void advance_locked(Stream& s) {
    while (!s.pending.empty()) {
      auto it = s.pending.begin();
      if (it->first != s.next || !it->second.ready) break;
      Entry e = std::move(it->second);
      s.pending.erase(it);
      ++s.next;
      if (!e.failed) deliver_locked(std::move(e));
    }
  }

  void deliver_locked(Entry&& e) {
    const NodeId from = e.key.first;
    if (e.kind == Kind::event) {
      Message m{from, std::move(e.data)};
      if (handlers.count(e.id)) {
        dispatch_q.emplace_back(e.id, std::move(m));
      } else {
        queues[e.id].push_back(std::move(m));
        wake_locked(false, e.id);
      }
      return;
    }
    if (e.data.size() < sizeof(int64_t)) return;  // malformed update
    int64_t value = 0;
    std::memcpy(&value, e.data.data(), sizeof value);
    VarReplica& r = replicas[{e.id, from}];  // never written: INT64_MIN
    // Variables only grow (core.h): a lower value is a late update of a
    // stream its sender gave up, overtaken by one it sent again on a new
    // endpoint. Taking it would move the replica back under a condition
    // that already held, and a waiter for the newer value would wait for
    // an update that never comes again.
    if (value < r.value) return;
    r.node = from;
    r.value = value;
    r.attachment.assign(e.data.begin() + sizeof(int64_t), e.data.end());
    wake_locked(true, 0);
  }

  // ---- waking and sleeping ----------------------------------------------

  static void kick(Waiter& w) {
    const uint64_t one = 1;
    // A full eventfd counter is still readable, so a failed write loses nothing.
    [[maybe_unused]] ssize_t n = ::write(w.efd.get(), &one, sizeof one);
    // After the write: a drain that sees the flag finds the fd readable. A
    // drain between the two leaves it readable, so the next poll returns and
    // the drain after it reads.
    w.kicked.store(true, std::memory_order_release);
  }

  void wake_locked(bool var, EventId ev) {
    if (var) ++var_gen;
    for (Waiter* w : waiters)
      if ((w->both || w->on_var == var) && (var || w->ev == ev)) kick(*w);
  }

  // A registered waiter, borrowed from the pool for one blocking call.
  class WaiterLease {
   public:
    WaiterLease(Impl& impl, bool on_var, EventId ev, bool both = false) : impl_(impl) {
      {
        std::lock_guard lk(impl_.pool_mu);
        if (!impl_.waiter_pool.empty()) {
          w_ = std::move(impl_.waiter_pool.back());
          impl_.waiter_pool.pop_back();
        }
      }
      if (!w_) {
        w_ = std::make_unique<Waiter>();
        w_->efd = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
      }
      w_->on_var = on_var;
      w_->ev = ev;
      w_->both = both;
      std::lock_guard lk(impl_.state_mu);
      impl_.waiters.push_back(w_.get());
    }
    ~WaiterLease() {
      {
        std::lock_guard lk(impl_.state_mu);
        impl_.waiters.remove(w_.get());
      }
      drain();
      std::lock_guard lk(impl_.pool_mu);
      impl_.waiter_pool.push_back(std::move(w_));
    }
    WaiterLease(const WaiterLease&) = delete;
    WaiterLease& operator=(const WaiterLease&) = delete;
    int fd() const { return w_->efd.get(); }
    bool ok() const { return w_->efd.get() >= 0; }
    // One read empties an eventfd (no EFD_SEMAPHORE). Kicks happen under
    // state_mu, and the destructor leaves `waiters` before it drains, so a
    // pooled waiter's fd is empty unless a kick is still in flight.
    void drain() {
      if (!w_->kicked.exchange(false, std::memory_order_acquire)) return;
      uint64_t v;
      [[maybe_unused]] ssize_t n = ::read(w_->efd.get(), &v, sizeof v);
    }

   private:
    Impl& impl_;
    std::unique_ptr<Waiter> w_;
  };

  // Arms the worker and sleeps on its event fd (plus `extra_fd`, if any)
  // until the deadline, `cap` (if non-zero) or an event. Returns at once if
  // the worker has unprocessed events.
  void sleep_on_ucx(std::optional<Clock::time_point> deadline, const int* extra_fd,
                    nanoseconds cap = nanoseconds::zero()) {
    ucs_status_t st = ucp_worker_arm(worker);
    if (st == UCS_ERR_BUSY) return;
    std::optional<nanoseconds> wait;
    if (deadline) wait = std::max(nanoseconds::zero(), *deadline - Clock::now());
    if (cap > nanoseconds::zero() && (!wait || *wait > cap)) wait = cap;
    if (st != UCS_OK) {
      // Cannot arm (should not happen with UCP_FEATURE_WAKEUP): degrade to a
      // short sleep rather than spinning.
      set_error(std::string("ucp_worker_arm: ") + ucs_status_string(st));
      if (!wait || *wait > kSendPollCap) wait = kSendPollCap;
    }
    pollfd fds[2] = {{ucx_efd, POLLIN, 0}, {extra_fd ? *extra_fd : -1, POLLIN, 0}};
    timespec ts{};
    if (wait) {
      ts.tv_sec = static_cast<time_t>(wait->count() / 1'000'000'000);
      ts.tv_nsec = static_cast<long>(wait->count() % 1'000'000'000);
    }
    ::ppoll(fds, extra_fd ? 2 : 1, wait ? &ts : nullptr, nullptr);
  }

  // How long this thread spins before it sleeps: cfg.spin, or nothing at
  // real-time priority. The daemons put the threads that carry a slice's
  // wake-ups at SCHED_FIFO so that they preempt a computing rank; a spin
  // there would take the rank's CPU outright, and spinning under SCHED_FIFO
  // brings the kernel's RT throttling (NOTES.md). The policy is cached per
  // thread (thread_is_realtime).
  std::chrono::nanoseconds spin_here() const {
    if (cfg.spin.count() == 0) return nanoseconds::zero();
    return thread_is_realtime() ? nanoseconds::zero() : nanoseconds(cfg.spin);
  }

  // The common blocking loop of test_event and compare_and_write: poll,
  // bounded spin, then sleep until `attempt()` succeeds, close() or timeout.
  template <class Attempt>
  Status block(Attempt&& attempt, bool on_var, EventId ev, std::optional<nanoseconds> timeout,
               bool both = false) {
    if (attempt()) return Status::ok;
    progress();
    if (attempt()) return Status::ok;
    if (closed.load()) return Status::closed;
    if (timeout && *timeout <= nanoseconds::zero()) return Status::timeout;
    std::optional<Clock::time_point> deadline;
    if (timeout) deadline = Clock::now() + *timeout;

    const auto spin_end = Clock::now() + spin_here();
    while (Clock::now() < spin_end) {
      progress();
      if (attempt()) return Status::ok;
      if (closed.load()) return Status::closed;
      if (deadline && Clock::now() >= *deadline) return Status::timeout;
    }

    WaiterLease lease(*this, on_var, ev, both);
    if (!lease.ok()) {
      set_error("eventfd failed");
      return Status::io_error;
    }
    // UCX was progressed just above (or in the spin): its news since then
    // makes ucp_worker_arm refuse (UCS_ERR_BUSY), and a delivery by another
    // thread is seen by attempt(), so the first round skips progress (a
    // system call per interface that polls a socket).
    bool progressed = true;
    for (;;) {
      if (!std::exchange(progressed, false)) progress();
      if (attempt()) return Status::ok;
      if (closed.load()) return Status::closed;
      if (deadline && Clock::now() >= *deadline) return Status::timeout;
      const int fd = lease.fd();
      sleep_on_ucx(deadline, &fd);
      lease.drain();
    }
  }

  // ---- progress and handler dispatch -------------------------------------

  void progress() {
    // Drain what is ready, bounded so one call cannot starve its caller.
    for (int i = 0; i < 64 && ucp_worker_progress(worker) != 0; ++i) {
    }
    dispatch();
  }

  void dispatch() {
    if (t_dispatching == this) return;  // the outer dispatch loop will see it
    std::unique_lock lk(state_mu);
    if (dispatching || dispatch_q.empty()) return;
    dispatching = true;
    const void* prev = std::exchange(t_dispatching, this);
    while (!dispatch_q.empty() && !closed.load()) {
      auto [ev, msg] = std::move(dispatch_q.front());
      dispatch_q.pop_front();
      auto it = handlers.find(ev);
      if (it == handlers.end()) {  // handler removed meanwhile: queue instead
        queues[ev].push_back(std::move(msg));
        wake_locked(false, ev);
        continue;
      }
      Handler h = it->second;
      lk.unlock();
      try {
        (*h)(std::move(msg));
      } catch (...) {
        set_error("event handler threw");
      }
      lk.lock();
    }
    t_dispatching = prev;
    dispatching = false;
  }

  // ---- send path ------------------------------------------------------------

  static void send_done(void* request, ucs_status_t status, void* user_data) {
    auto* op = static_cast<SendOp*>(user_data);
    op->status = status;
    op->done.store(true, std::memory_order_release);
    ucp_request_free(request);
  }

  std::shared_ptr<Peer> find_peer(NodeId n) const {
    std::lock_guard lk(peers_mu);
    auto it = peers.find(n);
    return it == peers.end() ? nullptr : it->second;
  }

  // Sends one message per destination and waits for local completion.
  // all_or_nothing: refuse (send to none) if any destination is unreachable.
  Status send(const NodeSet& dests, Kind kind, uint16_t id, std::span<const uint8_t> data,
              bool all_or_nothing, const SendLimit& limit = {}) {
    if (closed.load()) return Status::closed;
    std::vector<std::shared_ptr<Peer>> targets;
    targets.reserve(dests.size());
    Status result = Status::ok;
    for (NodeId n : dests) {
      auto p = find_peer(n);
      if (!p || p->failed.load()) {
        if (all_or_nothing) return Status::no_such_node;
        result = Status::no_such_node;
        continue;
      }
      targets.push_back(std::move(p));
    }

    std::vector<std::unique_ptr<SendOp>> ops;
    ops.reserve(targets.size());
    for (auto& p : targets) {
      auto op = std::make_unique<SendOp>();
      op->peer = p;
      op->hdr.from = cfg.self;
      op->hdr.id = id;
      op->hdr.kind = static_cast<uint8_t>(kind);
      op->hdr.epoch = p->epoch;
      ucp_request_param_t rp{};
      rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
      rp.cb.send = &Impl::send_done;
      rp.user_data = op.get();
      ucs_status_ptr_t req;
      {
        std::lock_guard lk(p->mu);
        if (!p->ep || p->failed.load()) {
          result = Status::no_such_node;
          continue;
        }
        op->hdr.seq = p->next_seq++;
        req = ucp_am_send_nbx(p->ep, kAmId, &op->hdr, sizeof op->hdr, data.data(),
                              data.size(), &rp);
      }
      if (req == nullptr) {
        op->done.store(true);
      } else if (UCS_PTR_IS_ERR(req)) {
        // The sequence number is burnt: the stream to this peer can no longer
        // be delivered in order, so the endpoint is finished.
        set_error(std::string("ucp_am_send_nbx: ") + ucs_status_string(UCS_PTR_STATUS(req)));
        p->failed.store(true);
        result = Status::io_error;
        continue;
      }
      ops.push_back(std::move(op));
    }

    Status st = wait_sends(ops, limit);
    // Given up at close(): the errors of the sends it cancelled are ours,
    // not the peer's.
    if (st == Status::closed) return st;
    for (auto& op : ops) {
      if (op->done.load() && op->status != UCS_OK) {
        set_error(std::string("send completion: ") + ucs_status_string(op->status));
        op->peer->failed.store(true);
        st = Status::io_error;
      }
    }
    if (st != Status::ok) return st;
    return result;
  }

  Status wait_sends(std::vector<std::unique_ptr<SendOp>>& ops, const SendLimit& limit) {
    auto all_done = [&] {
      return std::all_of(ops.begin(), ops.end(),
                         [](const auto& op) { return op->done.load(std::memory_order_acquire); });
    };
    const auto start = Clock::now();
    const auto deadline = start + limit.timeout;
    const auto spin_end = start + spin_here();
    auto next_ask = start + kGiveUpPoll;
    bool gave_up = false;
    while (!all_done()) {
      progress();
      if (all_done()) break;
      // close(): the process is stopping, nobody waits for this send any
      // more (a node manager's report under a long limit held its shutdown
      // past SIGTERM).
      if (closed.load()) {
        gave_up = true;
        break;
      }
      const auto now = Clock::now();
      if (now >= deadline) break;
      if (limit.give_up && now >= next_ask) {
        next_ask = now + kGiveUpPoll;
        if ((gave_up = limit.give_up())) break;
      }
      if (now >= spin_end) sleep_on_ucx(deadline, nullptr, kSendPollCap);
    }
    if (all_done()) return Status::ok;

    // Timed out (or the caller no longer needs the send): the peer is not
    // taking the data. Force-close its endpoint, which completes the
    // outstanding requests with an error, so the caller's buffer is no
    // longer referenced when we return.
    set_error(gave_up ? "send abandoned by its caller while the peer did not take it; peer closed"
                      : "send did not complete within the send timeout; peer closed");
    for (auto& op : ops)
      if (!op->done.load()) close_ep(*op->peer);
    const auto close_deadline = Clock::now() + kCloseTimeout;
    while (!all_done() && Clock::now() < close_deadline) {
      if (ucp_worker_progress(worker) == 0) sleep_on_ucx(close_deadline, nullptr, kSendPollCap);
    }
    std::lock_guard lk(state_mu);
    for (auto& op : ops)
      if (!op->done.load()) orphans.push_back(std::move(op));
    std::erase(ops, nullptr);
    return closed.load() ? Status::closed : Status::io_error;
  }

  void close() {
    closed.store(true);
    std::lock_guard lk(state_mu);
    for (Waiter* w : waiters) kick(*w);
  }
};


}  // namespace bcs::core
