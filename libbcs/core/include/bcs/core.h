// libbcs/core — the three BCS core primitives over UCX.
//
// The BCS-MPI paper builds everything on three network primitives that
// QsNet offered in hardware. Here they are emulated in a thin layer over one
// UCX worker per process (the "fabric endpoint" of a node):
//
//   xfer_and_signal   put a block of bytes to one node or a set of nodes and
//                     signal an event there (UCX active message).
//   test_event        poll, or block until, a local event has been signalled.
//   compare_and_write check a condition on a global variable over a node set
//                     and, once it holds everywhere, write to those nodes.
//
// Global variables: QsNet evaluated the condition in the network. We keep,
// at every node that may evaluate a condition (the "watchers"), a replica of
// each other node's variable; the owner pushes every change to its watchers
// (core_var_set). An update carries a small attachment so that a node can
// publish "I finished microphase k, and here is my report" atomically.
// Variables only grow: a replica ignores an update below its value (a
// late one from a stream its sender gave up and replaced), so a condition
// `var >= v` that held keeps holding. The daemons' one variable, a node's
// last finished microphase, only grows.
// compare_and_write then evaluates the condition over local replicas and,
// when it holds on every node of the set, does an xfer_and_signal to the set.
//
// Threading: a Fabric may be used from several threads (the UCX worker is
// created in multi-thread mode and our own tables are locked), but only one
// thread at a time should block on a given event.
//
// Naming follows UCX's <layer>_<object>_<verb> style inside namespace
// bcs::core: Fabric::xfer_and_signal, Fabric::test_event, ...
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace bcs::core {

// The one status type of the layer.
enum class Status : int {
  ok = 0,
  timeout,        // a blocking call's deadline passed
  no_such_node,   // destination not connected
  closed,         // the fabric is shutting down
  io_error,       // UCX reported an error; see Fabric::last_error()
  invalid,        // bad argument
};
const char* status_str(Status s);

using NodeId = uint32_t;        // fabric member id; the machine manager is 0
using EventId = uint16_t;       // application-defined event numbers
using VarId = uint16_t;         // application-defined global variable numbers

// A set of nodes (small clusters: sorted, unique ids).
using NodeSet = std::vector<NodeId>;

// One signalled event: who sent it and the block it carried.
struct Message {
  NodeId from = 0;
  std::vector<uint8_t> data;
};

// A replica of a remote node's global variable.
struct VarReplica {
  NodeId node = 0;
  int64_t value = INT64_MIN;      // INT64_MIN = never written
  std::vector<uint8_t> attachment;
};

enum class Cmp { ge, eq, gt };

// How long a send may wait for local completion before the peer is given up
// (its endpoint closed, Status::io_error). A live peer that progresses takes
// even multi-MiB sends in milliseconds; the default few seconds suit
// control traffic. A caller that must ride out a stalled peer (a node
// manager stopped in a debugger) passes its liveness timeout, with
// `give_up` saying when waiting is pointless (the job it sends for has
// ended). `give_up` is called from the sending thread about every 100 ms.
struct SendLimit {
  std::chrono::nanoseconds timeout = std::chrono::seconds(5);
  std::function<bool()> give_up;
};

struct FabricConfig {
  NodeId self = 0;
  // Spin (progressing the worker) this long before arming the UCX event fd
  // and sleeping. Bounded on purpose: the machine has fewer cores than
  // ranks plus helpers. A thread at real-time priority never spins.
  std::chrono::microseconds spin{10};
  // Network devices the worker may use and listen on (UCX's NET_DEVICES,
  // e.g. "lo" or "eth0"); empty: UCX's default (UCX_NET_DEVICES or every
  // device). The daemons set it from their control-plane address so that a
  // loopback cluster never listens on an external interface.
  std::string net_devices;
};

class Fabric {
 public:
  // Creates the UCX context and worker (with the wakeup feature).
  static std::unique_ptr<Fabric> create(const FabricConfig& cfg, std::string* error);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  NodeId self() const;
  // This worker's address, to publish through the control plane.
  std::vector<uint8_t> address() const;
  // Create (or replace) the endpoint to `peer`. Connecting to self is allowed
  // (messages to self are delivered through UCX's self transport).
  // `same_host`: the peer runs on this host, so UCX may use shared memory to
  // it. UCX 1.13 drops its shared-memory transports from an endpoint with
  // peer-failure reporting (UCP_ERR_HANDLING_MODE_PEER), so such an endpoint
  // is created without it: the caller must learn of the peer's death another
  // way (the daemons' control streams), and a send to a dead peer ends by
  // its timeout. BCS_CORE_ERR_MODE=peer (every endpoint reports failures)
  // or =none (none does) overrides the choice.
  Status connect(NodeId peer, std::span<const uint8_t> address, bool same_host = false);
  void disconnect(NodeId peer);
  bool connected(NodeId peer) const;

  // ---- primitive 1: xfer_and_signal
  // Sends `data` to every node of `dests` and signals `ev` there. Returns when
  // the data has been handed to UCX and the local buffer may be reused
  // (delivery is reliable and, per (source, destination) pair, in order).
  Status xfer_and_signal(const NodeSet& dests, EventId ev, std::span<const uint8_t> data);
  Status xfer_and_signal(NodeId dest, EventId ev, std::span<const uint8_t> data);
  Status xfer_and_signal(NodeId dest, EventId ev, std::span<const uint8_t> data,
                         const SendLimit& limit);

  // ---- primitive 2: test_event
  // Takes the oldest message signalled on `ev`. timeout == 0: poll once;
  // otherwise progress (bounded spin, then sleep on the UCX event fd) until a
  // message arrives or the timeout passes (Status::timeout). nullopt timeout
  // = wait forever (until close()).
  Status test_event(EventId ev, Message* out,
                    std::optional<std::chrono::nanoseconds> timeout);
  // Queues `data` on this node's own `ev`, as if a peer had signalled it,
  // and wakes a thread blocked on it: how another thread of the process
  // interrupts a test_event (shutdown, a state change to look at).
  void signal_local(EventId ev, std::span<const uint8_t> data);
  // Blocks (progressing, as test_event) until a message is queued on `ev`
  // or a variable changed since var_generation() returned `var_gen`, or
  // close() or the timeout; consumes nothing. How one thread waits for
  // several things at once: the strobe sender, for any running job's
  // reports (variables) and bells (an event). Read the generation before
  // looking at what it guards, so that a change in between is not missed.
  Status wait_event_or_var(EventId ev, uint64_t var_gen,
                           std::optional<std::chrono::nanoseconds> timeout);
  // Counts every variable change taken here (replicas and local values).
  uint64_t var_generation();
  // Number of messages waiting on `ev` (after one progress pass).
  size_t pending(EventId ev);

  // Messages for `ev` are handed to `handler` from inside progress (on
  // whichever thread is progressing) instead of being queued. Used for
  // requests that must be served while the node waits for something else
  // (the DMA helper's remote reads).
  void set_handler(EventId ev, std::function<void(Message&&)> handler);

  // ---- global variables and primitive 3: compare_and_write
  // Sets this node's variable and pushes the new value (with attachment) to
  // each watcher.
  // `limit`: how long each send may wait for a watcher to take it.
  Status var_set(VarId var, int64_t value, const NodeSet& watchers,
                 std::span<const uint8_t> attachment = {}, const SendLimit& limit = {});
  // The latest replica of `node`'s variable `var` known here.
  VarReplica var_get(VarId var, NodeId node);

  // Blocks until `var cmp value` holds on every node of `nodes` (evaluated on
  // local replicas, progressing meanwhile), then xfer_and_signal(nodes,
  // write_ev, write_data) unless write_ev is kNoWrite. On success, fills
  // `snapshot` (if given) with the replicas that satisfied the condition, in
  // the order of `nodes`, and `retries` with the number of unsuccessful
  // evaluations (the paper's USR* statistics).
  static constexpr EventId kNoWrite = 0xffff;
  Status compare_and_write(const NodeSet& nodes, VarId var, Cmp cmp, int64_t value,
                           EventId write_ev, std::span<const uint8_t> write_data,
                           std::optional<std::chrono::nanoseconds> timeout,
                           std::vector<VarReplica>* snapshot = nullptr,
                           uint64_t* retries = nullptr);

  // One non-blocking progress pass.
  void progress();
  // Thread ids of UCX's async thread in this process (empty if it has none
  // or it is not named as UCX 1.x names it). Every message from the network
  // wakes that thread first (its event handler on the interface's fd), and
  // it wakes the thread sleeping in test_event or compare_and_write: it is
  // on the path of each wake-up, and the daemons schedule it as such.
  std::vector<int> ucx_async_threads() const;
  // Makes every blocked test_event / compare_and_write return Status::closed.
  void close();
  std::string last_error() const;

 private:
  struct Impl;
  explicit Fabric(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether the calling thread runs under a real-time policy (SCHED_FIFO or
// SCHED_RR), which never spins. Cached per thread: the query is a system
// call, and a blocking wait asks it every time. Whoever changes a thread's
// policy calls sched_policy_changed() after, which makes every thread ask
// the kernel again.
bool thread_is_realtime();
void sched_policy_changed();

}  // namespace bcs::core
