// The collective and reduce helpers' logic (daemons/nm/roles/collectives.h)
// with a whole cluster in one process: K node managers, each with its own
// Collectives, fake rank memory, bundles routed by the test. Every result is
// compared against a serial reference computed here.
#include "roles/collectives.h"

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <numeric>
#include <random>

#include "fakes.h"

namespace bcs::nm {
namespace {

// Rank memory: real pointers into buffers the test owns, checked against
// the ranges registered for that rank (fakes.h). It is a node's ranks, so
// the collectives may hand members copy orders (Piece::ref_world); with
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
                 bool) override {
    if (!member_copies || pending_[to].size() >= kDmaSlots) return false;
    int32_t e = order_result;
    if (!e) {
      std::vector<uint8_t> tmp(len);
      e = read(static_cast<int32_t>(pid - kPidBase), src, tmp.data(), len);
      if (!e) e = write(to, dst, tmp.data(), len);
      if (!e) copied_by[to] += len;
    }
    pending_[to].push_back(e);
    return true;
  }
  int32_t await_copy(int32_t to) override {
    auto& q = pending_[to];
    if (q.empty()) return kNotDelegated;
    const int32_t e = q.front();
    q.pop_front();
    return e;
  }
  // The rest of a node's ranks: unused by the collective helpers.
  uint64_t job_id() const override { return 1; }
  uint32_t nranks() const override { return 0; }
  uint32_t nnodes() const override { return 0; }
  uint32_t node_of(int32_t) const override { return 0; }
  bool is_local(int32_t) const override { return true; }
  std::vector<int32_t> local_ranks() const override { return {}; }
  RankView view_of(int32_t) override { return {}; }
  void complete_status(int32_t, uint32_t, int32_t, int32_t, int32_t, uint64_t, uint32_t,
                       uint64_t) override {}
  ReadGrants& read_grants() override { return grants_; }
  void rank_corrupted(int32_t, const std::string&) override {}

 private:
  std::map<int32_t, std::deque<int32_t>> pending_;
  ReadGrants grants_;
};

Descriptor make_desc(const bcs_coll_args_t& a, uint64_t seq, uint32_t request,
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

bcs_coll_args_t args(bcs_coll_t kind, int n, int root = 0) {
  bcs_coll_args_t a{};
  a.kind = kind;
  a.context = kWorldColl;
  a.comm_size = n;
  a.root = root;
  return a;
}

uint8_t f(int rank, size_t i, int salt) {
  return static_cast<uint8_t>(rank * 31 + static_cast<int>(i) * 7 + salt * 13 + 1);
}

// `budget`: bytes a collective moves per round and node; small ones cut
// every collective into many rounds.
struct Shape {
  int n, nodes;
  uint64_t budget = Collectives::kDefaultBudget;
};
class Shapes : public testing::TestWithParam<Shape> {};

std::string name(const testing::TestParamInfo<Shape>& i) {
  std::string s = std::to_string(i.param.n) + "ranks_" + std::to_string(i.param.nodes) + "nodes";
  if (i.param.budget != Collectives::kDefaultBudget)
    s += "_budget" + std::to_string(i.param.budget);
  return s;
}

INSTANTIATE_TEST_SUITE_P(Cluster, Shapes,
                         testing::Values(Shape{1, 1}, Shape{2, 1}, Shape{2, 2}, Shape{3, 2},
                                         Shape{4, 2}, Shape{5, 4}, Shape{7, 4}, Shape{8, 4},
                                         Shape{8, 1}, Shape{1, 1, 3}, Shape{3, 2, 1},
                                         Shape{4, 2, 7}, Shape{5, 4, 64}, Shape{8, 4, 200},
                                         Shape{8, 1, 13}),
                         name);

TEST_P(Shapes, BarrierCompletesOnlyWhenEveryMemberPosted) {
  const auto [n, k, budget] = GetParam();
  Cluster c(n, k, budget);
  // Everybody but the last rank posts: nothing may run.
  for (int r = 0; r + 1 < n; ++r) c.post(r, make_desc(args(BCS_COLL_BARRIER, n), 1, 1));
  c.slice();
  for (int r = 0; r + 1 < n; ++r) EXPECT_EQ(c.result(r, 1), -1) << "rank " << r;
  c.post(n - 1, make_desc(args(BCS_COLL_BARRIER, n), 1, 1));
  c.slice();
  for (int r = 0; r < n; ++r) EXPECT_EQ(c.result(r, 1), 0) << "rank " << r;
}

TEST_P(Shapes, BroadcastFromEveryRoot) {
  const auto [n, k, budget] = GetParam();
  for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}}) {
    Cluster c(n, k, budget);
    for (int root = 0; root < n; ++root) {
      std::vector<std::vector<uint8_t>> buf(static_cast<size_t>(n), std::vector<uint8_t>(len + 1));
      std::vector<bcs_coll_args_t> a;
      for (int r = 0; r < n; ++r) {
        auto& b = buf[static_cast<size_t>(r)];
        for (size_t i = 0; i < b.size(); ++i) b[i] = r == root ? f(root, i, 1) : 0xee;
        c.mem_of(r).allow(r, b.data(), b.size());
        auto x = args(BCS_COLL_BCAST, n, root);
        x.sendbuf = x.recvbuf = b.data();
        x.sbytes = x.rbytes = len;
        a.push_back(x);
      }
      const auto seq = static_cast<uint64_t>(root + 1);
      c.post_all(a, seq);
      c.slice();
      for (int r = 0; r < n; ++r) {
        ASSERT_EQ(c.result(r, static_cast<uint32_t>(seq)), 0);
        auto& b = buf[static_cast<size_t>(r)];
        for (size_t i = 0; i < len; ++i) ASSERT_EQ(b[i], f(root, i, 1)) << "rank " << r;
        EXPECT_EQ(b[len], r == root ? f(root, len, 1) : 0xee) << "wrote past the buffer";
      }
    }
  }
}

TEST_P(Shapes, AllreduceIsBitIdenticalEverywhereAndReduceReachesEveryRoot) {
  const auto [n, k, budget] = GetParam();
  Cluster c(n, k, budget);
  const size_t count = 1000;
  std::mt19937_64 g(42);
  std::uniform_real_distribution<double> u(-1e6, 1e6);
  std::vector<std::vector<double>> in(static_cast<size_t>(n), std::vector<double>(count));
  std::vector<std::vector<int32_t>> iin(static_cast<size_t>(n), std::vector<int32_t>(count));
  for (auto& v : in)
    for (auto& x : v) x = u(g);
  for (auto& v : iin)
    for (auto& x : v) x = static_cast<int32_t>(g());
  std::vector<std::vector<double>> out(static_cast<size_t>(n), std::vector<double>(count));
  std::vector<std::vector<int32_t>> iout(static_cast<size_t>(n), std::vector<int32_t>(count));
  std::vector<bcs_coll_args_t> a, b;
  for (int r = 0; r < n; ++r) {
    const auto sr = static_cast<size_t>(r);
    c.mem_of(r).allow(r, in[sr].data(), count * 8);
    c.mem_of(r).allow(r, out[sr].data(), count * 8);
    c.mem_of(r).allow(r, iin[sr].data(), count * 4);
    c.mem_of(r).allow(r, iout[sr].data(), count * 4);
    auto x = args(BCS_COLL_ALLREDUCE, n);
    x.sendbuf = in[sr].data();
    x.recvbuf = out[sr].data();
    x.count = count;
    x.sbytes = count * 8;
    x.op = BCS_OP_SUM;
    x.dtype = BCS_DT_DOUBLE;
    a.push_back(x);
    auto y = x;
    y.kind = BCS_COLL_REDUCE;
    y.root = n - 1;
    y.sendbuf = iin[sr].data();
    y.recvbuf = iout[sr].data();
    y.sbytes = count * 4;
    y.dtype = BCS_DT_INT32;
    y.op = BCS_OP_BXOR;
    b.push_back(y);
  }
  // Both in one slice: the RM runs them in order.
  c.post_all(a, 1);
  c.post_all(b, 2);
  c.slice();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(c.result(r, 1), 0);
    ASSERT_EQ(c.result(r, 2), 0);
    EXPECT_EQ(std::memcmp(out[static_cast<size_t>(r)].data(), out[0].data(), count * 8), 0)
        << "rank " << r << " differs from rank 0";
  }
  for (size_t i = 0; i < count; ++i) {
    double sum = 0;
    int32_t x = 0;
    for (int r = 0; r < n; ++r) {
      sum += in[static_cast<size_t>(r)][i];
      x ^= iin[static_cast<size_t>(r)][i];
    }
    ASSERT_NEAR(out[0][i], sum, 1e-6 * n);
    ASSERT_EQ(iout[static_cast<size_t>(n - 1)][i], x);
  }
}

// Gather, scatter, allgather and alltoall of `blk`-byte blocks from roots
// 0 and n-1, every result checked. `prepare` and `check` see each cluster
// before the posts and after the slices.
void move_every_block(int n, int k, uint64_t budget, size_t blk,
                      const std::function<void(Cluster&)>& prepare,
                      const std::function<void(Cluster&)>& check) {
  const auto N = static_cast<size_t>(n);
  for (int root : {0, n - 1}) {
    Cluster c(n, k, budget);
    prepare(c);
    std::vector<std::vector<uint8_t>> sb(N, std::vector<uint8_t>(N * blk)), rb(N, std::vector<uint8_t>(N * blk));
    std::vector<std::vector<uint8_t>> gb(N, std::vector<uint8_t>(N * blk)),
        ab(N, std::vector<uint8_t>(N * blk)), tb(N, std::vector<uint8_t>(N * blk)),
        scb(N, std::vector<uint8_t>(blk));
    std::vector<bcs_coll_args_t> ga, sa, aa, ta;
    for (int r = 0; r < n; ++r) {
      const auto sr = static_cast<size_t>(r);
      for (size_t i = 0; i < N * blk; ++i) sb[sr][i] = f(r, i, 3);
      for (auto* v : {&sb[sr], &gb[sr], &ab[sr], &tb[sr], &scb[sr]}) c.mem_of(r).allow(r, v->data(), v->size());
      auto g = args(BCS_COLL_GATHER, n, root);
      g.sendbuf = sb[sr].data();
      g.sbytes = g.rbytes = blk;
      g.recvbuf = gb[sr].data();
      ga.push_back(g);
      auto s = args(BCS_COLL_SCATTER, n, root);
      s.sendbuf = sb[sr].data();
      s.recvbuf = scb[sr].data();
      s.sbytes = s.rbytes = blk;
      sa.push_back(s);
      auto al = g;
      al.kind = BCS_COLL_ALLGATHER;
      al.recvbuf = ab[sr].data();
      aa.push_back(al);
      auto t = al;
      t.kind = BCS_COLL_ALLTOALL;
      t.recvbuf = tb[sr].data();
      ta.push_back(t);
    }
    c.post_all(ga, 1);
    c.post_all(sa, 2);
    c.post_all(aa, 3);
    c.post_all(ta, 4);
    c.slice();
    for (int r = 0; r < n; ++r) {
      const auto sr = static_cast<size_t>(r);
      for (uint32_t q = 1; q <= 4; ++q) ASSERT_EQ(c.result(r, q), 0) << "rank " << r << " op " << q;
      for (size_t b = 0; b < blk; ++b) ASSERT_EQ(scb[sr][b], f(root, sr * blk + b, 3));
      for (int i = 0; i < n; ++i)
        for (size_t b = 0; b < blk; ++b) {
          const auto si = static_cast<size_t>(i);
          if (r == root) {
            ASSERT_EQ(gb[sr][si * blk + b], f(i, b, 3)) << "gather block " << i;
          }
          ASSERT_EQ(ab[sr][si * blk + b], f(i, b, 3)) << "allgather block " << i;
          ASSERT_EQ(tb[sr][si * blk + b], f(i, sr * blk + b, 3)) << "alltoall block " << i;
        }
    }
    check(c);
  }
}

TEST_P(Shapes, GatherScatterAllgatherAlltoallMoveEveryBlock) {
  const auto [n, k, budget] = GetParam();
  move_every_block(n, k, budget, 5, [](Cluster&) {}, [](Cluster&) {});
}

// Blocks of 160 KiB that only this node's members need (all of them on one
// node; alltoall's local blocks on two) are read by the members themselves,
// with copy orders, instead of the node reading each and writing it into
// them (Piece::ref_world). The node copies what they cannot: a member that
// holds the DMA helper's pieces ahead, an order that failed. The results
// are the same every way.
TEST(Collectives, MembersCopyLargeLocalBlocksThemselvesAndTheNodeTheRest) {
  const size_t blk = 160 << 10;
  for (const char* mode : {"orders", "rank 1 holds orders", "orders fail"}) {
    for (auto [n, k] : {std::pair{3, 1}, std::pair{4, 2}}) {
      SCOPED_TRACE(std::string(mode) + ", " + std::to_string(n) + " ranks on " +
                   std::to_string(k) + " nodes");
      move_every_block(
          n, k, Collectives::kDefaultBudget, blk,
          [&](Cluster& c) {
            for (int node = 0; node < k; ++node) {
              auto& m = c.mem(node);
              m.member_copies = true;
              if (std::string(mode) == "rank 1 holds orders") m.holding = {1};
              if (std::string(mode) == "orders fail") m.order_result = bcs_err_bad_address;
            }
          },
          [&](Cluster& c) {
            uint64_t total = 0;
            for (int node = 0; node < k; ++node)
              for (auto& [r, bytes] : c.mem(node).copied_by) total += bytes;
            if (std::string(mode) == "orders fail") {
              EXPECT_EQ(total, 0u);
            } else {
              EXPECT_GT(total, 0u);
            }
            if (std::string(mode) == "rank 1 holds orders") {
              EXPECT_EQ(c.mem_of(1).copied_by.count(1), 0u) << "left to the DMA helper";
            }
          });
    }
  }
}

TEST_P(Shapes, VectorVariantsHonourCountsAndDisplacements) {
  const auto [n, k, budget] = GetParam();
  const auto N = static_cast<size_t>(n);
  Cluster c(n, k, budget);
  // Member i contributes (i*3+1)%5 bytes; blocks land with a 2-byte gap.
  std::vector<uint64_t> cnt(N), dsp(N);
  uint64_t off = 0;
  for (size_t i = 0; i < N; ++i) {
    cnt[i] = (i * 3 + 1) % 5;
    dsp[i] = off;
    off += cnt[i] + 2;
  }
  const size_t total = off;
  std::vector<std::vector<uint8_t>> sb(N, std::vector<uint8_t>(16)), rb(N, std::vector<uint8_t>(total, 0xee));
  std::vector<bcs_coll_args_t> a;
  for (int r = 0; r < n; ++r) {
    const auto sr = static_cast<size_t>(r);
    for (size_t i = 0; i < 16; ++i) sb[sr][i] = f(r, i, 5);
    c.mem_of(r).allow(r, sb[sr].data(), 16);
    c.mem_of(r).allow(r, rb[sr].data(), total);
    c.mem_of(r).allow(r, cnt.data(), N * 8);
    c.mem_of(r).allow(r, dsp.data(), N * 8);
    auto x = args(BCS_COLL_ALLGATHERV, n);
    x.sendbuf = sb[sr].data();
    x.sbytes = cnt[sr];
    x.recvbuf = rb[sr].data();
    x.rcounts = cnt.data();
    x.rdispls = dsp.data();
    a.push_back(x);
  }
  c.post_all(a, 1);
  c.slice();
  for (size_t r = 0; r < N; ++r) {
    ASSERT_EQ(c.result(static_cast<int>(r), 1), 0);
    for (size_t i = 0; i < N; ++i) {
      for (size_t b = 0; b < cnt[i]; ++b) ASSERT_EQ(rb[r][dsp[i] + b], f(static_cast<int>(i), b, 5));
      ASSERT_EQ(rb[r][dsp[i] + cnt[i]], 0xee) << "gap after block " << i << " was written";
    }
  }
}

TEST_P(Shapes, ScanAndExscanFollowRankOrder) {
  const auto [n, k, budget] = GetParam();
  const auto N = static_cast<size_t>(n);
  Cluster c(n, k, budget);
  std::vector<int64_t> in(N), scan(N, -1), exscan(N, -1);
  std::vector<bcs_coll_args_t> a, b;
  for (int r = 0; r < n; ++r) {
    const auto sr = static_cast<size_t>(r);
    in[sr] = (r + 1) * 10 + r;
    for (auto* p : {&in[sr], &scan[sr], &exscan[sr]}) c.mem_of(r).allow(r, p, 8);
    auto x = args(BCS_COLL_SCAN, n);
    x.sendbuf = &in[sr];
    x.recvbuf = &scan[sr];
    x.count = 1;
    x.sbytes = 8;
    x.op = BCS_OP_SUM;
    x.dtype = BCS_DT_INT64;
    a.push_back(x);
    x.kind = BCS_COLL_EXSCAN;
    x.recvbuf = &exscan[sr];
    b.push_back(x);
  }
  c.post_all(a, 1);
  c.post_all(b, 2);
  c.slice();
  int64_t acc = 0;
  for (size_t r = 0; r < N; ++r) {
    ASSERT_EQ(c.result(static_cast<int>(r), 1), 0);
    if (r > 0) {
      EXPECT_EQ(exscan[r], acc);
    } else {
      EXPECT_EQ(exscan[r], -1) << "exscan must leave rank 0 untouched";
    }
    acc += in[r];
    EXPECT_EQ(scan[r], acc);
  }
}

TEST(Collectives, UnevenPlacementThreeAndOne) {
  Cluster c({0, 0, 0, 1});
  std::vector<int32_t> in{1, 2, 4, 8}, out(4, 0);
  std::vector<bcs_coll_args_t> a;
  for (int r = 0; r < 4; ++r) {
    c.mem_of(r).allow(r, &in[static_cast<size_t>(r)], 4);
    c.mem_of(r).allow(r, &out[static_cast<size_t>(r)], 4);
    auto x = args(BCS_COLL_ALLREDUCE, 4);
    x.sendbuf = &in[static_cast<size_t>(r)];
    x.recvbuf = &out[static_cast<size_t>(r)];
    x.count = 1;
    x.sbytes = 4;
    x.op = BCS_OP_BOR;
    x.dtype = BCS_DT_INT32;
    a.push_back(x);
  }
  c.post_all(a, 1);
  c.slice();
  for (int v : out) EXPECT_EQ(v, 15);
}

// A collective larger than the budget moves in rounds, one per slice: no
// bundle is much larger than the budget, the result is complete only after
// the last round, and a small collective posted behind it is not held up.
TEST(Collectives, LargeCollectiveMovesInRoundsAndSmallOnesPassIt) {
  const uint64_t budget = 100;
  Cluster c(2, 2, budget);
  const size_t len = 1000;
  std::vector<std::vector<uint8_t>> buf(2, std::vector<uint8_t>(len));
  for (size_t i = 0; i < len; ++i) buf[0][i] = f(0, i, 3);
  std::vector<bcs_coll_args_t> a;
  for (int r = 0; r < 2; ++r) {
    c.mem_of(r).allow(r, buf[static_cast<size_t>(r)].data(), len);
    auto x = args(BCS_COLL_BCAST, 2, 0);
    x.sendbuf = x.recvbuf = buf[static_cast<size_t>(r)].data();
    x.sbytes = x.rbytes = len;
    a.push_back(x);
  }
  c.post_all(a, 1);
  c.one_slice({-1, -1});
  EXPECT_EQ(c.result(1, 1), -1) << "complete after one round of ten";
  EXPECT_TRUE(c.busy());
  // A barrier behind it: released and done in the next slice.
  c.post_all({args(BCS_COLL_BARRIER, 2), args(BCS_COLL_BARRIER, 2)}, 2);
  c.one_slice({-1, -1});
  EXPECT_EQ(c.result(0, 2), 0);
  EXPECT_EQ(c.result(1, 2), 0);
  EXPECT_EQ(c.result(1, 1), -1);
  int rounds = 2;
  while (c.busy() && rounds < 100) {
    c.one_slice({-1, -1});
    ++rounds;
  }
  EXPECT_EQ(rounds, 10);
  EXPECT_EQ(c.result(0, 1), 0);
  EXPECT_EQ(c.result(1, 1), 0);
  EXPECT_EQ(buf[1], buf[0]);
  EXPECT_LE(c.largest_bundle(), budget + 100) << "a bundle carried much more than the budget";
}

TEST(Collectives, ChunkedReductionsCombineTheSameWindowsOnEveryNode) {
  // 3 doubles per round over 3 nodes with uneven placement.
  Cluster c({0, 1, 1, 2}, 24);
  const size_t count = 100;
  std::vector<std::vector<double>> in(4, std::vector<double>(count)), out = in;
  for (int r = 0; r < 4; ++r)
    for (size_t i = 0; i < count; ++i) in[static_cast<size_t>(r)][i] = 0.1 * r + 1.0 / (1.0 + i);
  std::vector<bcs_coll_args_t> a;
  for (int r = 0; r < 4; ++r) {
    auto& x = a.emplace_back(args(BCS_COLL_ALLREDUCE, 4));
    c.mem_of(r).allow(r, in[static_cast<size_t>(r)].data(), count * 8);
    c.mem_of(r).allow(r, out[static_cast<size_t>(r)].data(), count * 8);
    x.sendbuf = in[static_cast<size_t>(r)].data();
    x.recvbuf = out[static_cast<size_t>(r)].data();
    x.count = count;
    x.sbytes = count * 8;
    x.op = BCS_OP_SUM;
    x.dtype = BCS_DT_DOUBLE;
  }
  c.post_all(a, 1);
  c.slice();
  EXPECT_EQ(c.slices(), 34);  // ceil(100 / 3)
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(c.result(r, 1), 0);
    // Node order: node 0 (rank 0), node 1 (ranks 1+2), node 2 (rank 3).
    for (size_t i = 0; i < count; ++i) {
      const double want = ((in[0][i] + (in[1][i] + in[2][i])) + in[3][i]);
      ASSERT_EQ(out[static_cast<size_t>(r)][i], want) << "rank " << r << " element " << i;
    }
  }
}

TEST(Collectives, ApplicationBypassReduceUsesTheDescriptorNotTheRank) {
  Cluster c(3, 2);
  double root_in = 1, out = 0;
  const double others[2] = {2, 4};
  c.mem_of(0).allow(0, &root_in, 8);
  c.mem_of(0).allow(0, &out, 8);
  auto x = args(BCS_COLL_REDUCE, 3, 0);
  x.count = 1;
  x.sbytes = 8;
  x.op = BCS_OP_SUM;
  x.dtype = BCS_DT_DOUBLE;
  auto root = x;
  root.sendbuf = &root_in;
  root.recvbuf = &out;
  c.post(0, make_desc(root, 1, 7));
  // Ranks 1 and 2 gave no memory at all: only the inline copy exists.
  for (int r = 1; r < 3; ++r) {
    auto y = x;
    y.sendbuf = reinterpret_cast<void*>(0x1000);
    c.post(r, make_desc(y, 1, 9, &others[r - 1]));
  }
  c.slice();
  EXPECT_EQ(out, 7.0);
  EXPECT_EQ(c.result(0, 7), 0);
  EXPECT_EQ(c.result(1, 9), -1) << "a bypassed request belongs to the rank";
  EXPECT_EQ(c.result(2, 9), -1);
}

TEST(Collectives, MismatchedCollectivesFailInsteadOfCorrupting) {
  Cluster c(2, 1);
  int32_t v[2] = {1, 2}, o[2] = {0, 0};
  auto x = args(BCS_COLL_ALLREDUCE, 2);
  x.count = 1;
  x.sbytes = 4;
  x.op = BCS_OP_SUM;
  x.dtype = BCS_DT_INT32;
  for (int r = 0; r < 2; ++r) {
    c.mem_of(r).allow(r, &v[r], 4);
    c.mem_of(r).allow(r, &o[r], 4);
    auto y = x;
    y.sendbuf = &v[r];
    y.recvbuf = &o[r];
    if (r == 1) y.op = BCS_OP_MAX;  // a different op
    c.post(r, make_desc(y, 1, 1));
  }
  c.slice();
  EXPECT_EQ(c.result(0, 1), bcs_err_coll_mismatch);
  EXPECT_EQ(c.result(1, 1), bcs_err_coll_mismatch);
  EXPECT_EQ(o[0], 0);
  EXPECT_EQ(c.total().errors, 1u);
}

TEST(Collectives, MismatchAcrossNodesIsCaughtFromTheBundle) {
  Cluster c(2, 2);
  int32_t buf[2] = {5, 0};
  for (int r = 0; r < 2; ++r) {
    c.mem_of(r).allow(r, &buf[r], 4);
    auto y = args(BCS_COLL_BCAST, 2, r == 0 ? 0 : 1);  // disagree on the root
    y.sendbuf = y.recvbuf = &buf[r];
    y.sbytes = y.rbytes = 4;
    c.post(r, make_desc(y, 1, 1));
  }
  c.slice();
  // Each node believes it holds the root: both send, neither expects data.
  // The unexpected bundles are refused (the node manager logs them) and
  // nobody's buffer is overwritten.
  EXPECT_EQ(c.rejected(), 2);
  EXPECT_EQ(buf[1], 0);
}

TEST(Collectives, LostBundleFailsItsCollectiveAndNothingElse) {
  Cluster c(2, 2);
  int64_t in[2] = {3, 4}, out[2] = {0, 0};
  for (int r = 0; r < 2; ++r) {
    c.mem_of(r).allow(r, &in[r], 8);
    c.mem_of(r).allow(r, &out[r], 8);
    auto x = args(BCS_COLL_ALLREDUCE, 2);
    x.sendbuf = &in[r];
    x.recvbuf = &out[r];
    x.count = 1;
    x.sbytes = 8;
    x.op = BCS_OP_SUM;
    x.dtype = BCS_DT_INT64;
    c.post(r, make_desc(x, 1, 1));
  }
  c.slice({0, 1});  // node 0's bundle to node 1 is lost
  EXPECT_EQ(c.result(0, 1), 0);
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(c.result(1, 1), bcs_err_peer_gone);
  EXPECT_EQ(out[1], 0);
}

TEST(Collectives, ARegisteredCommunicatorRunsItsOwnCollectives) {
  // World of 4 on 2 nodes; a communicator of ranks {3, 1} (3 is rank 0).
  Cluster c(4, 2);
  std::string why;
  for (int r : {3, 1})
    ASSERT_TRUE(c.node(r % 2).register_comm(r, 5, {3, 1}, &why)) << why;
  int32_t in[4] = {10, 20, 30, 40}, out[4] = {0, 0, 0, 0};
  for (int r : {3, 1}) {
    c.mem_of(r).allow(r, &in[r], 4);
    c.mem_of(r).allow(r, &out[r], 4);
    bcs_coll_args_t a{};
    a.kind = BCS_COLL_SCAN;
    a.context = 5;
    a.comm_size = 2;
    a.sendbuf = &in[r];
    a.recvbuf = &out[r];
    a.count = 1;
    a.sbytes = 4;
    a.op = BCS_OP_SUM;
    a.dtype = BCS_DT_INT32;
    c.post(r, make_desc(a, 1, 1));
  }
  c.slice();
  EXPECT_EQ(out[3], 40) << "communicator rank 0";
  EXPECT_EQ(out[1], 60) << "communicator rank 1: 40 + 20";
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[2], 0);
}

TEST(Collectives, BadRegistrationsAreRefused) {
  Collectives c(0, {0, 0, 0});
  std::string why;
  EXPECT_FALSE(c.register_comm(0, kContextWorld + 1, {0, 1}, &why)) << "predefined";
  EXPECT_FALSE(c.register_comm(0, 9, {0, 0}, &why)) << "repeated";
  EXPECT_FALSE(c.register_comm(0, 9, {0, 7}, &why)) << "out of range";
  EXPECT_FALSE(c.register_comm(2, 9, {0, 1}, &why)) << "not a member";
  EXPECT_TRUE(c.register_comm(0, 9, {0, 1}, &why)) << why;
  EXPECT_TRUE(c.register_comm(1, 9, {0, 1}, &why)) << "the same list again";
  EXPECT_FALSE(c.register_comm(1, 9, {1, 0}, &why)) << "a different order";
}

TEST(Collectives, InvalidDescriptorsAreRefusedWithAReason) {
  Collectives c(0, {0, 0});
  std::string why;
  auto good = args(BCS_COLL_BARRIER, 2);
  auto bad_kind = good;
  bad_kind.kind = static_cast<bcs_coll_t>(99);
  EXPECT_FALSE(c.post(0, make_desc(bad_kind, 1, 1), &why));
  EXPECT_NE(why.find("kind"), std::string::npos) << why;
  auto bad_size = good;
  bad_size.comm_size = 3;
  EXPECT_FALSE(c.post(0, make_desc(bad_size, 1, 1), &why));
  auto bad_root = args(BCS_COLL_BCAST, 2, 2);
  EXPECT_FALSE(c.post(0, make_desc(bad_root, 1, 1), &why));
  EXPECT_NE(why.find("root"), std::string::npos) << why;
  EXPECT_FALSE(c.post(0, make_desc(good, 2, 1), &why)) << "number 2 before number 1";
  EXPECT_NE(why.find("order"), std::string::npos) << why;
  auto unknown = good;
  unknown.context = 77;
  EXPECT_FALSE(c.post(0, make_desc(unknown, 1, 1), &why));
  auto bad_op = args(BCS_COLL_ALLREDUCE, 2);
  bad_op.op = BCS_OP_BAND;
  bad_op.dtype = BCS_DT_DOUBLE;
  bad_op.count = 1;
  EXPECT_FALSE(c.post(0, make_desc(bad_op, 1, 1), &why));
  auto huge = args(BCS_COLL_ALLGATHER, 2);
  huge.sbytes = kCollMaxBytes;
  EXPECT_FALSE(c.post(0, make_desc(huge, 1, 1), &why));
  auto d = make_desc(good, 1, 1);
  d.flags = kDescInline;
  d.inline_len = 500;
  EXPECT_FALSE(c.post(0, d, &why));
  EXPECT_FALSE(c.post(5, make_desc(good, 1, 1), &why)) << "not a member";
  // None of it counted: the real first barrier is still number 1.
  EXPECT_TRUE(c.post(0, make_desc(good, 1, 1), &why)) << why;
  EXPECT_EQ(c.pending(), 1u);
}

// Between slices a node on its lease starts the next one once a
// collective's local members have all posted it: drained already, or in
// their rings since (the world ranks the node found there).
TEST(Collectives, PostedLocallyCountsDrainedPostsAndThoseStillInTheRings) {
  // Ranks 0 and 2 on this node (0), ranks 1 and 3 on node 1.
  Collectives c(0, {0, 1, 0, 1});
  std::string why;
  const std::vector<int32_t> none, both{0, 2}, only0{0}, only2{2};
  EXPECT_FALSE(c.posted_locally(kWorldColl, 1, none));
  EXPECT_FALSE(c.posted_locally(kWorldColl, 1, only0)) << "rank 2 has not posted";
  EXPECT_TRUE(c.posted_locally(kWorldColl, 1, both)) << "the remote members do not count";
  // Rank 0's barrier 1 drained: only rank 2's is missing.
  ASSERT_TRUE(c.post(0, make_desc(args(BCS_COLL_BARRIER, 4), 1, 1), &why)) << why;
  EXPECT_TRUE(c.posted_locally(kWorldColl, 1, only2));
  EXPECT_FALSE(c.posted_locally(kWorldColl, 1, none));
  EXPECT_FALSE(c.posted_locally(kWorldColl, 2, only2)) << "rank 0 posted number 1 only";
  // A context not known (yet) is never ready; nor is one without local members.
  EXPECT_FALSE(c.posted_locally(77, 1, both));
  ASSERT_TRUE(c.register_comm(1, 9, {1, 3}, &why)) << why;
  EXPECT_FALSE(c.posted_locally(9, 1, both));
}

}  // namespace
}  // namespace bcs::nm
