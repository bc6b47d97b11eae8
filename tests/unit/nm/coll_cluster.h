// The collective and reduce helpers' test cluster (collectives_test.cc,
// collectives_rules_test.cc): K node managers in one process, each with its
// own Collectives and fake rank memory, bundles routed by the test.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "fakes.h"
#include "roles/collectives.h"

namespace bcs::nm::colltest {

// Rank memory: real pointers into buffers the test owns, checked against
// the ranges registered for that rank (fakes.h). It is a node's ranks, so
// the collectives may hand members copy orders (Piece::in_member); with
// `member_copies` off (the default) every post is refused and the node
// copies, as for members awake in MPI.
class FakeMemory : public fakes::CheckedMemory<LocalRanks> {
 public:
  void complete(int32_t r, uint32_t request, int32_t error) override {
    completed[{r, request}] = error;
  }
  std::map<std::pair<int32_t, uint32_t>, int32_t> completed;

  // Copy orders: a member "reads" `len` bytes of the member whose process
  // is `pid` at once (within the ranges both registered); await_copy gives
  // the outcome, oldest first, as NmJob does.
  bool member_copies = false;
  int32_t order_result = 0;        // what every order comes back with (0: its copy's)
  std::set<int32_t> holding;       // ranks with the DMA helper's orders pending
  std::map<int32_t, uint64_t> copied_by;  // bytes each member copied itself
  static constexpr uint32_t kPidBase = 5000;
  uint32_t pid_of(int32_t r) override { return kPidBase + static_cast<uint32_t>(r); }
  bool copy_orders_pending(int32_t to) override { return holding.count(to) != 0; }
  bool post_copy(uint32_t pid, int32_t to, uint64_t src, uint64_t dst, size_t len,
                 CopyHelp help) override {
    // Members copy at once: no CPU is left for a helper.
    EXPECT_EQ(help, CopyHelp::none) << "a member's order asks for help";
    if (!member_copies || pending_.full(to)) return false;
    int32_t e = order_result;
    if (!e) {
      std::vector<uint8_t> tmp(len);
      e = read(static_cast<int32_t>(pid - kPidBase), src, tmp.data(), len);
      if (!e) e = write(to, dst, tmp.data(), len);
      if (!e) copied_by[to] += len;
    }
    pending_.push(to, e);
    return true;
  }
  int32_t await_copy(int32_t to) override { return pending_.take(to); }
  // The rest of a node's ranks: unused by the collective helpers.
  uint64_t job_id() const override { return 1; }
  uint32_t nranks() const override { return 0; }
  uint32_t nnodes() const override { return 0; }
  uint32_t node_of(int32_t) const override { return 0; }
  bool is_local(int32_t) const override { return true; }
  std::span<const int32_t> local_ranks() const override { return {}; }
  RankView view_of(int32_t) override { return {}; }
  void complete_status(int32_t, uint32_t, int32_t, int32_t, int32_t, uint64_t, uint32_t,
                       uint64_t) override {}
  ReadGrants& read_grants() override { return grants_; }
  void rank_corrupted(int32_t, const std::string&) override {}

 private:
  fakes::OrderOutcomes pending_;
  ReadGrants grants_;
};

inline Descriptor make_desc(const bcs_coll_args_t& a, uint64_t seq, uint32_t request,
                     const void* inline_data = nullptr) {
  Descriptor d{};
  d.kind = DescKind::coll;
  d.context = a.context;
  d.seq = seq;
  d.request = request;
  CollArgs c{};
  c.kind = static_cast<uint8_t>(a.kind);
  c.op = static_cast<uint8_t>(a.op);
  c.dtype = static_cast<uint8_t>(a.dtype);
  c.flags = static_cast<uint8_t>(a.flags);
  c.comm_size = a.comm_size;
  c.root = a.root;
  c.sendbuf = reinterpret_cast<uintptr_t>(a.sendbuf);
  c.recvbuf = reinterpret_cast<uintptr_t>(a.recvbuf);
  c.sbytes = a.sbytes;
  c.rbytes = a.rbytes;
  c.count = a.count;
  c.scounts = reinterpret_cast<uintptr_t>(a.scounts);
  c.sdispls = reinterpret_cast<uintptr_t>(a.sdispls);
  c.rcounts = reinterpret_cast<uintptr_t>(a.rcounts);
  c.rdispls = reinterpret_cast<uintptr_t>(a.rdispls);
  std::memcpy(d.payload, &c, sizeof c);
  if (inline_data) {
    d.flags = kDescInline | kDescNoComplete;
    d.inline_len = static_cast<uint32_t>(a.sbytes);
    std::memcpy(d.payload + kCollInlineOffset, inline_data, a.sbytes);
  }
  return d;
}

constexpr int32_t kWorldColl = kContextWorld + 1;

// K node managers with n ranks placed cyclically (rank r on node r % K),
// or as given.
class Cluster {
 public:
  Cluster(int nranks, int nodes, uint64_t budget = Collectives::kDefaultBudget)
      : n_(nranks), budget_(budget) {
    for (int r = 0; r < nranks; ++r) rank_node_.push_back(static_cast<uint32_t>(r % nodes));
    build(nodes);
  }
  Cluster(std::vector<uint32_t> placement, uint64_t budget = Collectives::kDefaultBudget)
      : n_(static_cast<int>(placement.size())), budget_(budget) {
    rank_node_ = std::move(placement);
    build(static_cast<int>(*std::max_element(rank_node_.begin(), rank_node_.end())) + 1);
  }
  int size() const { return n_; }
  FakeMemory& mem(int node) { return *mems_[static_cast<size_t>(node)]; }
  FakeMemory& mem_of(int rank) { return mem(static_cast<int>(rank_node_[static_cast<size_t>(rank)])); }
  Collectives& node(int k) { return *nodes_[static_cast<size_t>(k)]; }

  // Every rank posts `args[r]` as collective number seq (request = seq).
  void post_all(const std::vector<bcs_coll_args_t>& args, uint64_t seq) {
    for (int r = 0; r < n_; ++r) {
      std::string why;
      auto d = make_desc(args[static_cast<size_t>(r)], seq, static_cast<uint32_t>(seq));
      ASSERT_TRUE(node(static_cast<int>(rank_node_[static_cast<size_t>(r)])).post(r, d, &why))
          << why;
    }
  }
  void post(int rank, const Descriptor& d) {
    std::string why;
    ASSERT_TRUE(node(static_cast<int>(rank_node_[static_cast<size_t>(rank)])).post(rank, d, &why))
        << why;
  }

  // What the MM and the microphases do for one slice, and the slices after
  // it while a collective is still in its rounds (the MM runs its
  // microphase again). `drop`: a bundle (from, to) of the first slice that
  // is lost on the way.
  void slice(std::pair<int, int> drop = {-1, -1}) {
    one_slice(drop);
    for (int i = 0; busy() && i < 1000000; ++i) one_slice({-1, -1});
    ASSERT_FALSE(busy()) << "a collective never finished its rounds";
  }
  bool busy() const {
    for (auto& nd : nodes_)
      for (auto& l : nd->levels())
        if (l.busy_bbm || l.busy_rm) return true;
    return false;
  }
  int slices() const { return slices_; }
  size_t largest_bundle() const { return largest_bundle_; }

  void one_slice(std::pair<int, int> drop) {
    slices_++;
    std::map<int32_t, wire::CollLevel> agg;
    std::map<int32_t, uint32_t> reporters;
    for (auto& nd : nodes_)
      for (auto& l : nd->levels()) {
        auto [it, fresh] = agg.emplace(l.context, l);
        if (!fresh) it->second.level = std::min(it->second.level, l.level);
        reporters[l.context]++;
      }
    std::vector<wire::CollRelease> rel;
    for (auto& [ctx, l] : agg)
      if (reporters[ctx] == l.nodes && l.level > released_[ctx]) {
        rel.push_back({ctx, l.level});
        released_[ctx] = l.level;
      }
    for (CollPhase ph : {CollPhase::bbm, CollPhase::rm}) {
      std::vector<std::vector<Collectives::Outgoing>> out;
      for (size_t k = 0; k < nodes_.size(); ++k)
        out.push_back(nodes_[k]->begin(ph, rel, *mems_[k]));
      std::vector<uint32_t> got(nodes_.size());
      for (size_t k = 0; k < nodes_.size(); ++k)
        for (auto& o : out[k]) {
          largest_bundle_ = std::max(largest_bundle_, o.bytes.size());
          if (static_cast<int>(k) == drop.first && static_cast<int>(o.node) == drop.second) continue;
          if (nodes_[o.node]->receive(static_cast<uint32_t>(k), o.bytes))
            got[o.node]++;
          else
            rejected_++;
        }
      for (size_t k = 0; k < nodes_.size(); ++k) {
        if (drop.first < 0) {
          EXPECT_EQ(got[k], nodes_[k]->expected()) << "node " << k;
        }
        last_done_[k] = nodes_[k]->finish(*mems_[k], got[k] != nodes_[k]->expected());
        done_total_.collectives += last_done_[k].collectives;
        done_total_.errors += last_done_[k].errors;
      }
    }
  }
  // The error each rank's request `request` completed with (-1: not completed).
  int32_t result(int rank, uint32_t request) {
    auto& c = mem_of(rank).completed;
    auto it = c.find({rank, request});
    return it == c.end() ? -1 : it->second;
  }
  Collectives::Done total() const { return done_total_; }
  int rejected() const { return rejected_; }

 private:
  void build(int nodes) {
    for (int k = 0; k < nodes; ++k) {
      nodes_.push_back(std::make_unique<Collectives>(static_cast<uint32_t>(k), rank_node_, budget_));
      mems_.push_back(std::make_unique<FakeMemory>());
    }
    last_done_.resize(static_cast<size_t>(nodes));
  }
  int n_;
  uint64_t budget_ = Collectives::kDefaultBudget;
  int slices_ = 0;
  size_t largest_bundle_ = 0;
  std::vector<uint32_t> rank_node_;
  std::vector<std::unique_ptr<Collectives>> nodes_;
  std::vector<std::unique_ptr<FakeMemory>> mems_;
  std::map<int32_t, uint64_t> released_;
  std::vector<Collectives::Done> last_done_;
  Collectives::Done done_total_;
  int rejected_ = 0;
};

inline bcs_coll_args_t args(bcs_coll_t kind, int n, int root = 0) {
  bcs_coll_args_t a{};
  a.kind = kind;
  a.context = kWorldColl;
  a.comm_size = n;
  a.root = root;
  return a;
}

// A reduction of one element of `dt` (`bytes` wide) with `op`: what every
// rank of it posts, buffers still to set.
inline bcs_coll_args_t one_element(bcs_coll_t kind, int n, bcs_dtype_t dt, uint64_t bytes,
                                   bcs_op_t op = BCS_OP_SUM) {
  auto a = args(kind, n);
  a.count = 1;
  a.sbytes = bytes;
  a.op = op;
  a.dtype = dt;
  return a;
}

inline uint8_t f(int rank, size_t i, int salt) {
  return static_cast<uint8_t>(rank * 31 + static_cast<int>(i) * 7 + salt * 13 + 1);
}

}  // namespace bcs::nm::colltest
