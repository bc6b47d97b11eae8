// Fakes for the node manager's helper roles (roles/ports.h): two node
// managers in one process, rings in a real segment layout, rank memory as
// plain buffers of this process (every access checked against the ranges a
// test allowed), a switch that delivers fabric messages and serves remote
// reads at once. Shared by the roles' unit tests and the fuzz targets
// (tests/fuzz), so it needs no test framework: a role doing something the
// daemon would crash on (completing an unchecked request index) aborts.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "buffer_receiver.h"
#include "buffer_sender.h"
#include "collectives.h"
#include "dma_helper.h"

namespace bcs::nm::fakes {

[[noreturn]] inline void fault(const char* what) {
  std::fprintf(stderr, "fakes: %s\n", what);
  std::abort();
}

// Per-node inboxes; a DmaGet is served at once by the destination's DMA
// helper, as the daemon does from inside fabric progress.
class Switch;
class FakeNet : public Net {
 public:
  FakeNet(Switch& sw, uint32_t self) : sw_(sw), self_(self) {}
  core::Status send(uint32_t node, core::EventId ev, std::span<const uint8_t> bytes) override;
  core::Status wait(core::EventId ev, core::Message* m, std::chrono::nanoseconds) override {
    auto& q = inbox[ev];
    if (q.empty()) return core::Status::timeout;
    *m = std::move(q.front());
    q.pop_front();
    return core::Status::ok;
  }
  std::map<core::EventId, std::deque<core::Message>> inbox;
  uint32_t sent = 0;

 private:
  Switch& sw_;
  uint32_t self_;
};

class Switch {
 public:
  std::vector<FakeNet*> nets;
  std::function<void(uint32_t node, const core::Message&)> serve_get;
  uint64_t dma_data_bytes = 0;  // every answer to a remote read, headers included
  void deliver(uint32_t from, uint32_t to, core::EventId ev, std::span<const uint8_t> b) {
    core::Message m;
    m.from = from;
    m.data.assign(b.begin(), b.end());
    if (ev == wire::kEvDmaData) dma_data_bytes += b.size();
    if (ev == wire::kEvDmaGet) {
      serve_get(to, m);
      core::Message done;
      done.from = to;
      nets[to]->inbox[wire::kEvDmaServed].push_back(done);
      return;
    }
    nets[to]->inbox[ev].push_back(std::move(m));
  }
};

inline core::Status FakeNet::send(uint32_t node, core::EventId ev, std::span<const uint8_t> bytes) {
  ++sent;
  sw_.deliver(self_, node, ev, bytes);
  return core::Status::ok;
}

// Rank memory as buffers of this process: an access outside the ranges a
// test allowed for that rank is refused (as cross-memory attach refuses an
// unmapped address), never wrapped around.
template <typename Base>
class CheckedMemory : public Base {
 public:
  void allow(int32_t r, const void* p, size_t n) { ranges_[r].push_back({reinterpret_cast<uintptr_t>(p), n}); }
  int32_t read(int32_t r, uint64_t a, void* dst, size_t n) override {
    if (!ok(r, a, n)) return bcs_err_peer_gone;
    std::memcpy(dst, reinterpret_cast<const void*>(a), n);
    return 0;
  }
  int32_t write(int32_t r, uint64_t a, const void* src, size_t n) override {
    if (!ok(r, a, n)) return bcs_err_peer_gone;
    std::memcpy(reinterpret_cast<void*>(a), src, n);
    return 0;
  }

 private:
  bool ok(int32_t r, uint64_t a, size_t n) {
    for (auto& [p, len] : ranges_[r])
      if (a >= p && n <= len && a - p <= len - n) return true;
    return false;
  }
  std::map<int32_t, std::vector<std::pair<uintptr_t, size_t>>> ranges_;
};

// Copy orders' outcomes per rank, oldest first, at most kDmaSlots each (as
// in the segment): what await_copy gives back, as NmJob does.
class OrderOutcomes {
 public:
  bool full(int32_t to) { return q_[to].size() >= kDmaSlots; }
  size_t held(int32_t to) { return q_[to].size(); }
  void push(int32_t to, int32_t outcome) { q_[to].push_back(outcome); }
  int32_t take(int32_t to) {
    auto& q = q_[to];
    if (q.empty()) return LocalRanks::kNotDelegated;
    const int32_t e = q.front();
    q.pop_front();
    return e;
  }

 private:
  std::map<int32_t, std::deque<int32_t>> q_;
};

// One node's ranks: a real segment (rings, request tables), memory = this
// process's buffers (addresses are pointers, checked against registered
// ranges).
class FakeRanks : public CheckedMemory<LocalRanks> {
 public:
  FakeRanks(uint32_t self, std::vector<uint32_t> rank_node) : self_(self), rank_node_(std::move(rank_node)) {
    for (size_t r = 0; r < rank_node_.size(); ++r)
      if (rank_node_[r] == self_) local_.push_back(static_cast<int32_t>(r));
    SegmentLayout l;
    l.nlocal = static_cast<uint32_t>(local_.size());
    l.ring_slots = 64;
    l.request_slots = 64;
    seg_.assign(l.total_bytes() + 64, 0);
    base_ = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(seg_.data()) + 63) & ~uintptr_t{63});
    auto* h = static_cast<SegmentHeader*>(base_);
    h->nlocal = l.nlocal;
    h->ring_slots = l.ring_slots;
    h->request_slots = l.request_slots;
  }
  uint32_t index_of(int32_t r) const {
    return static_cast<uint32_t>(std::find(local_.begin(), local_.end(), r) - local_.begin());
  }
  // The rank side: post a descriptor (request slot marked pending).
  void post(int32_t r, Descriptor d) {
    RankView v = view_of(r);
    v.requests[d.request].state.store(static_cast<uint32_t>(ReqState::pending));
    if (!ring_try_post(v, d)) fault("the ring is full");
  }
  // An eager send, as the rank posts it (ring_try_post_span): complete at
  // its post, so its slot is not pending.
  void post_eager(int32_t r, Descriptor d, const void* buf) {
    d.flags = kDescInline;
    d.inline_len = static_cast<uint32_t>(d.len);
    RankView v = view_of(r);
    if (!ring_try_post_span(v, d, buf, d.len)) fault("the ring is full");
  }
  const RequestSlot& slot(int32_t r, uint32_t i) { return view_of(r).requests[i]; }
  bool done(int32_t r, uint32_t i) {
    return slot(r, i).state.load() == static_cast<uint32_t>(ReqState::done);
  }

  uint64_t job_id() const override { return job_; }
  uint64_t job_ = 1;  // the job these ranks are of (two jobs held: held_states_test)
  uint32_t nranks() const override { return static_cast<uint32_t>(rank_node_.size()); }
  uint32_t nnodes() const override { return *std::max_element(rank_node_.begin(), rank_node_.end()) + 1; }
  uint32_t node_of(int32_t r) const override { return rank_node_.at(static_cast<size_t>(r)); }
  bool is_local(int32_t r) const override {
    return std::find(local_.begin(), local_.end(), r) != local_.end();
  }
  std::span<const int32_t> local_ranks() const override { return local_; }
  RankView view_of(int32_t r) override { return segment_rank_view(base_, index_of(r)); }
  ReadGrants& read_grants() override { return grants_; }
  void rank_corrupted(int32_t r, const std::string& why) override { corrupted_.push_back({r, why}); }
  // As NmJob::set_held_sends publishes it.
  void held_sends(int32_t r, bool held) override {
    if (is_local(r)) view_of(r).ctl->held_sends.store(held ? 1 : 0);
  }
  ReadGrants grants_;
  std::vector<std::pair<int32_t, std::string>> corrupted_;
  // Node managers of one host: to the nodes in `host_peers` this node offers
  // its ranks as processes kPidBase + rank; a copy order naming a process
  // (the receiving rank reading it itself) is a checked copy here, recorded,
  // and ends with `direct_result` if that is set.
  static constexpr uint32_t kPidBase = 1000;
  std::vector<uint32_t> host_peers;
  struct DirectCopy {
    uint32_t pid;
    int32_t to;
    uint64_t src, dst, len;
    CopyHelp help = CopyHelp::none;  // post_copy: who may copy part of it
  };
  std::vector<DirectCopy> direct_copies;
  int32_t direct_result = 0;
  bool host_peer(uint32_t node) const override {
    return std::find(host_peers.begin(), host_peers.end(), node) != host_peers.end();
  }
  uint32_t offer_pid(int32_t from, uint32_t node) override {
    return host_peer(node) && is_local(from) ? kPidBase + static_cast<uint32_t>(from) : 0;
  }
  int32_t copy_from_process(uint32_t pid, int32_t to, uint64_t src, uint64_t dst,
                            size_t len) override {
    direct_copies.push_back({pid, to, src, dst, len});
    if (direct_result) return direct_result;
    return write(to, dst, reinterpret_cast<const void*>(src), len);
  }
  // Copy orders in two halves (the DMA helper's copies ahead), only when a
  // story turns them on: carried out at once (a fake rank is always asleep
  // and quick), with `ahead_result` as the outcome if that is set (then
  // nothing is written) for the posts numbered in `fail_posts` (from 0),
  // or for every post if that is empty.
  bool copies_ahead = false;
  int32_t ahead_result = 0;
  std::vector<size_t> fail_posts;
  std::vector<DirectCopy> ahead_copies;
  OrderOutcomes ahead_pending;
  bool post_copy(uint32_t pid, int32_t to, uint64_t src, uint64_t dst, size_t len,
                 CopyHelp help) override {
    if (!copies_ahead || ahead_pending.full(to)) return false;
    const bool fail =
        ahead_result && (fail_posts.empty() || std::find(fail_posts.begin(), fail_posts.end(),
                                                         ahead_copies.size()) != fail_posts.end());
    ahead_copies.push_back({pid, to, src, dst, len, help});
    ahead_pending.push(to, fail ? ahead_result
                                : write(to, dst, reinterpret_cast<const void*>(src), len));
    return true;
  }
  int32_t await_copy(int32_t to) override { return ahead_pending.take(to); }
  size_t ahead_outstanding(int32_t to) { return ahead_pending.held(to); }
  uint32_t pid_of(int32_t r) override {
    return is_local(r) ? kPidBase + static_cast<uint32_t>(r) : 0;
  }
  // Small receives land in the segment (request_land), only when a story
  // turns it on: the others check the receive buffers themselves.
  bool landing = false;
  bool land(int32_t r, uint32_t req, const void* src, size_t len) override {
    if (!landing) return false;
    RankView v = view_of(r);
    if (req >= v.request_slots) fault("landing in a request index out of range");
    return request_land(v, req, src, len);
  }
  const uint8_t* landing_of(int32_t r, uint32_t req) {
    return view_of(r).landing + size_t{req} * kLandingMax;
  }
  void complete(int32_t r, uint32_t req, int32_t e) override { complete_status(r, req, e, r, 0, 0, 0); }
  void complete_status(int32_t r, uint32_t req, int32_t e, int32_t src, int32_t tag, uint64_t bytes,
                       uint32_t found, uint64_t seq = 0) override {
    RankView v = view_of(r);
    // The roles must never complete a request index they did not check.
    if (req >= v.request_slots) fault("completion of request index out of range");
    request_complete(v, req, e, src, tag, bytes, found, seq);
  }

 private:
  uint32_t self_;
  std::vector<uint32_t> rank_node_;
  std::vector<int32_t> local_;
  std::vector<uint8_t> seg_;
  void* base_ = nullptr;
};

inline Descriptor send_desc(int32_t dst, int32_t tag, const void* buf, uint64_t len, uint32_t req) {
  Descriptor d{};
  d.kind = DescKind::send;
  d.peer = dst;
  d.tag = tag;
  d.addr = reinterpret_cast<uintptr_t>(buf);
  d.len = len;
  d.request = req;
  if (len <= kInlineMax) {
    d.flags = kDescInline;
    d.inline_len = static_cast<uint32_t>(len);
    std::memcpy(d.payload, buf, len);
  }
  return d;
}

inline Descriptor recv_desc(int32_t src, int32_t tag, void* buf, uint64_t cap, uint32_t req) {
  Descriptor d{};
  d.kind = DescKind::recv;
  d.peer = src;
  d.tag = tag;
  d.addr = reinterpret_cast<uintptr_t>(buf);
  d.len = cap;
  d.request = req;
  return d;
}

// Two node managers with their roles, driven slice by slice.
struct Node {
  Node(Switch& sw, uint32_t self, std::vector<uint32_t> placement,
       uint64_t max_unexpected_bytes = BufferReceiver::kMaxUnexpectedBytes)
      : net(sw, self),
        ranks(self, placement),
        bs(self),
        br(self, 1 << 20, BufferReceiver::kMaxUnexpected, max_unexpected_bytes),
        dh(self),
        coll(self, placement) {}
  FakeNet net;
  FakeRanks ranks;
  BufferSender bs;
  BufferReceiver br;
  DmaHelper dh;
  Collectives coll;
};

struct TwoNodeCluster {
  // Ranks 0 and 2 on node 0, rank 1 on node 1.
  explicit TwoNodeCluster(uint64_t max_unexpected_bytes = BufferReceiver::kMaxUnexpectedBytes) {
    const std::vector<uint32_t> placement{0, 1, 0};
    for (uint32_t k = 0; k < 2; ++k)
      nodes.push_back(std::make_unique<Node>(sw, k, placement, max_unexpected_bytes));
    for (auto& n : nodes) sw.nets.push_back(&n->net);
    sw.serve_get = [this](uint32_t node, const core::Message& m) {
      DmaHelper::serve(m, &nodes[node]->ranks, nodes[node]->net);
    };
  }
  // The microphases of one slice, run on both nodes as the daemons run
  // them (nic.cc), with the expectations the MM would send.
  // DEM: the reports, and the strobe that carries its plan on.
  wire::Strobe dem(std::vector<wire::Report>* reports = nullptr) {
    ++slice_no;
    wire::Strobe s;
    s.slice = slice_no;
    s.expect_batches.assign(2, 0);
    for (auto& n : nodes) {
      wire::Report r = n->bs.run(s.slice, n->ranks, n->net, n->br, n->coll);
      r.moving += static_cast<uint32_t>(n->br.unexpected_moving());
      for (size_t k = 0; k < r.batches_to.size(); ++k) s.expect_batches[k] += r.batches_to[k];
      if (reports) reports->push_back(std::move(r));
    }
    return s;
  }
  // MSM, inline messages delivered in it; the remote reads the P2P will
  // serve go into `s`.
  std::vector<wire::Report> msm(wire::Strobe& s) {
    std::vector<wire::Report> reports;
    s.expect_gets.assign(2, 0);
    for (auto& n : nodes) {
      wire::Report r = n->br.run(s, &n->ranks, n->net);
      DmaHelper::deliver_inline(n->ranks, n->br, r);
      for (size_t k = 0; k < r.gets_to.size(); ++k) s.expect_gets[k] += r.gets_to[k];
      reports.push_back(std::move(r));
    }
    return reports;
  }
  // P2P. The daemons run it concurrently; here one after the other, so
  // the reading node (1 in these stories) goes first: its reads are served
  // at once by the switch, and node 0 then finds them counted.
  std::vector<wire::Report> p2p(const wire::Strobe& s) {
    std::vector<wire::Report> reports(2);
    for (int k = 1; k >= 0; --k) {
      Node& n = *nodes[static_cast<size_t>(k)];
      reports[static_cast<size_t>(k)] = n.dh.run(s, &n.ranks, n.net, n.br);
    }
    return reports;
  }
  // DEM, MSM and P2P of one slice; the P2P reports.
  std::vector<wire::Report> slice() {
    wire::Strobe s = dem();
    msm(s);
    return p2p(s);
  }
  Switch sw;
  std::vector<std::unique_ptr<Node>> nodes;
  uint64_t slice_no = 0;
};

}  // namespace bcs::nm::fakes
