// The collective and reduce helpers' rules with a whole cluster in one
// process (coll_cluster.h): uneven placement, rounds, application bypass,
// mismatches, lost bundles, communicators, refused descriptors.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>

#include "coll_cluster.h"

namespace bcs::nm {
namespace {

using namespace colltest;

TEST(Collectives, UnevenPlacementThreeAndOne) {
  Cluster c({0, 0, 0, 1});
  std::vector<int32_t> in{1, 2, 4, 8}, out(4, 0);
  std::vector<bcs_coll_args_t> a;
  for (int r = 0; r < 4; ++r) {
    c.mem_of(r).allow(r, &in[static_cast<size_t>(r)], 4);
    c.mem_of(r).allow(r, &out[static_cast<size_t>(r)], 4);
    auto x = one_element(BCS_COLL_ALLREDUCE, 4, BCS_DT_INT32, 4, BCS_OP_BOR);
    x.sendbuf = &in[static_cast<size_t>(r)];
    x.recvbuf = &out[static_cast<size_t>(r)];
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
  auto x = one_element(BCS_COLL_REDUCE, 3, BCS_DT_DOUBLE, 8);  // root 0
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
  auto x = one_element(BCS_COLL_ALLREDUCE, 2, BCS_DT_INT32, 4);
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
    auto x = one_element(BCS_COLL_ALLREDUCE, 2, BCS_DT_INT64, 8);
    x.sendbuf = &in[r];
    x.recvbuf = &out[r];
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
    auto a = one_element(BCS_COLL_SCAN, 2, BCS_DT_INT32, 4);
    a.context = 5;
    a.sendbuf = &in[r];
    a.recvbuf = &out[r];
    c.post(r, make_desc(a, 1, 1));
  }
  c.slice();
  EXPECT_EQ(out[3], 40) << "communicator rank 0";
  EXPECT_EQ(out[1], 60) << "communicator rank 1: 40 + 20";
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[2], 0);
}

// What a hung job's report says of collectives: the ones a rank posted and
// waits in, and the local members that have not posted them.
TEST(Collectives, WaitingNamesTheLocalMembersThatHaveNotPosted) {
  Collectives c(0, {0, 0, 0});
  std::string why;
  ASSERT_TRUE(c.post(0, make_desc(args(BCS_COLL_BARRIER, 3), 1, 1), &why)) << why;
  ASSERT_TRUE(c.post(2, make_desc(args(BCS_COLL_BARRIER, 3), 1, 1), &why)) << why;
  for (int32_t r : {0, 2}) {
    auto w = c.waiting(r);
    ASSERT_EQ(w.size(), 1u) << r;
    EXPECT_EQ(w[0].context, kWorldColl);
    EXPECT_EQ(w[0].seq, 1u);
    EXPECT_EQ(w[0].kind, BCS_COLL_BARRIER);
    EXPECT_EQ(w[0].not_posted_here, std::vector<int32_t>{1});
  }
  EXPECT_TRUE(c.waiting(1).empty()) << "rank 1 posted nothing";
  EXPECT_TRUE(c.waiting(7).empty()) << "no such rank";
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
