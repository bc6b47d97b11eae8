// The collective and reduce helpers' logic (daemons/nm/roles/collectives.h)
// with a whole cluster in one process (coll_cluster.h), over cluster shapes
// and budgets: every result is compared against a serial reference
// computed here. The rules (placement, rounds, mismatches, lost bundles,
// registrations) are in collectives_rules_test.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <numeric>
#include <random>

#include "coll_cluster.h"

namespace bcs::nm {
namespace {

using namespace colltest;

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
// them (Piece::in_member). The node copies what they cannot: a member that
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
    auto x = one_element(BCS_COLL_SCAN, n, BCS_DT_INT64, 8);
    x.sendbuf = &in[sr];
    x.recvbuf = &scan[sr];
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

}  // namespace
}  // namespace bcs::nm
