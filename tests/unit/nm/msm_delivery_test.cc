// Inline messages delivered in the MSM (DmaHelper::deliver_inline): a
// message of up to kInlineMax bytes crossed to the receiving node inside
// its descriptor, so once matched it needs no P2P. The receiving node
// writes it into the receive in the MSM itself, unless something older of
// the same sender and receiver is still to move; and the DEM reports tell
// the manager beforehand whether anything the MSM may match would move
// data (Report::moving), so that it can make the MSM the slice's last
// microphase.
#include <gtest/gtest.h>

#include <cstring>

#include "fakes.h"

namespace bcs::nm {
namespace {

using namespace fakes;

class MsmDelivery : public testing::Test, public TwoNodeCluster {
 protected:
  explicit MsmDelivery(uint64_t max_unexpected_bytes = BufferReceiver::kMaxUnexpectedBytes)
      : TwoNodeCluster(max_unexpected_bytes) {}
  // DEM then MSM on both nodes (TwoNodeCluster runs them as the daemons
  // do); the DEM and MSM reports, per node. p2p() finishes the slice.
  struct Reports {
    std::vector<wire::Report> dem, msm;
  };
  Reports dem_and_msm() {
    Reports r;
    s_ = dem(&r.dem);
    r.msm = msm(s_);
    return r;
  }
  void p2p() { TwoNodeCluster::p2p(s_); }
  wire::Strobe s_;
};

TEST_F(MsmDelivery, AnInlineMessageIsDeliveredInTheMsmAndLeavesNothingForP2p) {
  char out[8] = "eight!!";
  std::vector<uint8_t> in(8, 0);
  nodes[1]->ranks.allow(1, in.data(), in.size());
  nodes[0]->ranks.post(0, send_desc(1, 7, out, 8, 0));
  nodes[1]->ranks.post(1, recv_desc(0, 7, in.data(), in.size(), 3));
  const Reports r = dem_and_msm();
  EXPECT_EQ(r.dem[0].moving + r.dem[1].moving, 0u) << "nothing the MSM matches would move data";
  EXPECT_EQ(r.msm[1].matches, 1u);
  EXPECT_EQ(r.msm[1].delivered, 1u);
  EXPECT_EQ(r.msm[1].chunks, 0u) << "nothing left for a P2P";
  EXPECT_EQ(r.msm[1].bytes, 8u);
  ASSERT_TRUE(nodes[1]->ranks.done(1, 3)) << "complete before any P2P";
  EXPECT_EQ(nodes[1]->ranks.slot(1, 3).bytes, 8u);
  EXPECT_EQ(nodes[1]->ranks.slot(1, 3).source, 0);
  EXPECT_EQ(0, std::memcmp(in.data(), out, 8));
  EXPECT_EQ(nodes[1]->br.scheduler().in_flight(), 0u) << "the transfer is finished";
}

// An eager message (up to kInlineSpanMax bytes, its bytes in the ring
// after its descriptor) travels and lands the same way: to another node in
// the descriptor batch, to a rank of the same node straight from the ring,
// written into the receive (it is longer than a landing) in the MSM.
TEST_F(MsmDelivery, AnEagerMessageIsDeliveredInTheMsmToEitherNode) {
  std::vector<uint8_t> out(kInlineSpanMax), remote_in(kInlineSpanMax, 0), local_in(700, 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7 + i / 256);
  nodes[1]->ranks.allow(1, remote_in.data(), remote_in.size());
  nodes[0]->ranks.allow(2, local_in.data(), local_in.size());
  nodes[0]->ranks.post_eager(0, send_desc(1, 7, out.data(), out.size(), 0), out.data());
  nodes[0]->ranks.post_eager(0, send_desc(2, 7, out.data(), 700, 1), out.data());
  nodes[1]->ranks.post(1, recv_desc(0, 7, remote_in.data(), remote_in.size(), 3));
  nodes[0]->ranks.post(2, recv_desc(0, 7, local_in.data(), local_in.size(), 4));
  const Reports r = dem_and_msm();
  EXPECT_EQ(r.dem[0].moving + r.dem[1].moving, 0u) << "nothing the MSM matches would move data";
  EXPECT_EQ(r.msm[1].delivered, 1u);
  EXPECT_EQ(r.msm[0].delivered, 1u);
  EXPECT_EQ(r.msm[0].chunks + r.msm[1].chunks, 0u) << "nothing left for a P2P";
  ASSERT_TRUE(nodes[1]->ranks.done(1, 3));
  ASSERT_TRUE(nodes[0]->ranks.done(2, 4));
  EXPECT_EQ(nodes[1]->ranks.slot(1, 3).bytes, kInlineSpanMax);
  EXPECT_EQ(nodes[1]->ranks.slot(1, 3).landed, 0u) << "longer than a landing: written";
  EXPECT_EQ(remote_in, out);
  EXPECT_EQ(0, std::memcmp(local_in.data(), out.data(), 700));
}

// Unmatched eager sends cost the receiving node their bytes, so a receiver
// is full (Report::full: the buffer senders hold further sends to it) at
// its byte bound as well as at its count (--max-unexpected, 65,536 here,
// far away). Here the bound is three 4 KiB sends.
class ByteBound : public MsmDelivery {
 protected:
  ByteBound() : MsmDelivery(3 * kInlineSpanMax) {}
};

TEST_F(ByteBound, AReceiverIsFullAtItsByteBoundOfUnexpectedMessages) {
  std::vector<uint8_t> out(kInlineSpanMax, 5), in(kInlineSpanMax, 0);
  nodes[1]->ranks.allow(1, in.data(), in.size());
  nodes[0]->ranks.post_eager(0, send_desc(1, 7, out.data(), out.size(), 0), out.data());
  nodes[0]->ranks.post_eager(0, send_desc(1, 7, out.data(), out.size(), 1), out.data());
  Reports r = dem_and_msm();
  EXPECT_TRUE(r.msm[1].full.empty()) << "8 KiB of 12";
  nodes[0]->ranks.post_eager(0, send_desc(1, 7, out.data(), out.size(), 2), out.data());
  r = dem_and_msm();
  EXPECT_EQ(r.msm[1].full, (std::vector<int32_t>{1})) << "12 KiB of 12, 3 sends";
  EXPECT_TRUE(r.msm[0].full.empty());
  // A receive takes one: room again.
  nodes[1]->ranks.post(1, recv_desc(0, 7, in.data(), in.size(), 3));
  r = dem_and_msm();
  EXPECT_EQ(r.msm[1].delivered, 1u);
  EXPECT_TRUE(r.msm[1].full.empty());
  EXPECT_EQ(in, out);
}

// A rank that claims more eager bytes than the largest is ended, named.
TEST_F(MsmDelivery, AnEagerSendLongerThanTheLargestEndsItsRank) {
  std::vector<uint8_t> out(kInlineSpanMax + 1, 1);
  Descriptor d = send_desc(1, 7, out.data(), out.size(), 0);
  d.flags = kDescInline;
  d.inline_len = static_cast<uint32_t>(out.size());
  nodes[0]->ranks.post(0, d);
  dem_and_msm();
  const auto& bad = nodes[0]->ranks.corrupted_;
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].first, 0);
  EXPECT_NE(bad[0].second.find("inline length " + std::to_string(kInlineSpanMax + 1) + " invalid"), std::string::npos) << bad[0].second;
}

TEST_F(MsmDelivery, AnInlineMessageBehindALargerOneOfItsPairWaitsForTheP2p) {
  std::vector<uint8_t> big(5000), big_in(5000, 0), in(8, 0);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 3);
  char small[8] = "behind!";
  nodes[0]->ranks.allow(0, big.data(), big.size());
  nodes[1]->ranks.allow(1, big_in.data(), big_in.size());
  nodes[1]->ranks.allow(1, in.data(), in.size());
  nodes[0]->ranks.post(0, send_desc(1, 7, big.data(), big.size(), 0));
  nodes[0]->ranks.post(0, send_desc(1, 7, small, 8, 1));
  nodes[1]->ranks.post(1, recv_desc(0, 7, big_in.data(), big_in.size(), 3));
  nodes[1]->ranks.post(1, recv_desc(0, 7, in.data(), in.size(), 4));
  const Reports r = dem_and_msm();
  EXPECT_EQ(r.dem[0].moving, 1u) << "the send that is not inline";
  EXPECT_EQ(r.msm[1].delivered, 0u);
  EXPECT_EQ(r.msm[1].chunks, 2u);
  EXPECT_FALSE(nodes[1]->ranks.done(1, 4)) << "a transfer never finishes before an older one of its pair";
  p2p();
  ASSERT_TRUE(nodes[1]->ranks.done(1, 3));
  ASSERT_TRUE(nodes[1]->ranks.done(1, 4));
  EXPECT_EQ(big_in, big);
  EXPECT_EQ(0, std::memcmp(in.data(), small, 8));
}

TEST_F(MsmDelivery, AnotherPairsInlineMessageIsDeliveredBesideALargeTransfer) {
  std::vector<uint8_t> big(5000, 9), big_in(5000, 0), in(8, 0);
  char small[8] = "beside!";
  nodes[0]->ranks.allow(0, big.data(), big.size());
  nodes[1]->ranks.allow(1, big_in.data(), big_in.size());
  nodes[1]->ranks.allow(1, in.data(), in.size());
  nodes[0]->ranks.post(0, send_desc(1, 7, big.data(), big.size(), 0));
  nodes[0]->ranks.post(2, send_desc(1, 7, small, 8, 0));  // rank 2, also on node 0
  nodes[1]->ranks.post(1, recv_desc(0, 7, big_in.data(), big_in.size(), 3));
  nodes[1]->ranks.post(1, recv_desc(2, 7, in.data(), in.size(), 4));
  const Reports r = dem_and_msm();
  EXPECT_EQ(r.msm[1].delivered, 1u);
  EXPECT_EQ(r.msm[1].chunks, 1u) << "the large transfer, for the P2P";
  ASSERT_TRUE(nodes[1]->ranks.done(1, 4));
  EXPECT_FALSE(nodes[1]->ranks.done(1, 3));
  p2p();
  ASSERT_TRUE(nodes[1]->ranks.done(1, 3));
  EXPECT_EQ(big_in, big);
  EXPECT_EQ(nodes[1]->br.scheduler().in_flight(), 0u);
}

// A send that is not inline and waits unmatched at the receiving node
// would move data once a receive takes it: the node's DEM reports count it
// until then, so that the manager keeps the P2P.
TEST_F(MsmDelivery, AnUnmatchedLargeSendCountsAsMovingUntilAReceiveTakesIt) {
  std::vector<uint8_t> big(5000, 5), big_in(5000, 0);
  nodes[0]->ranks.allow(0, big.data(), big.size());
  nodes[1]->ranks.allow(1, big_in.data(), big_in.size());
  nodes[0]->ranks.post(0, send_desc(1, 7, big.data(), big.size(), 0));
  Reports r = dem_and_msm();
  EXPECT_EQ(r.dem[0].moving, 1u);
  EXPECT_EQ(nodes[1]->br.unexpected_moving(), 1u);
  r = dem_and_msm();  // nothing posted: the send still waits
  EXPECT_EQ(r.dem[1].moving, 1u) << "counted by the receiving node while it waits";
  nodes[1]->ranks.post(1, recv_desc(0, 7, big_in.data(), big_in.size(), 3));
  r = dem_and_msm();
  EXPECT_EQ(r.dem[1].moving, 1u) << "the receive is only matched in this MSM";
  EXPECT_EQ(r.msm[1].chunks, 1u);
  EXPECT_EQ(nodes[1]->br.unexpected_moving(), 0u);
  p2p();
  ASSERT_TRUE(nodes[1]->ranks.done(1, 3));
  EXPECT_EQ(big_in, big);
}

}  // namespace
}  // namespace bcs::nm
