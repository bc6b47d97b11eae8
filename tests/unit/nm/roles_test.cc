// The point-to-point helper roles (buffer sender, buffer receiver, DMA
// helper) with fakes for the network and the ranks: two node managers in
// one process, rings in a real segment layout, rank memory as plain
// buffers. The tests play the ranks (posting descriptors) and the strobe
// sender (running the microphases in order with what the reports say).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "fakes.h"

namespace bcs::nm {
namespace {

using namespace fakes;

class TwoNodes : public testing::Test, public TwoNodeCluster {
 protected:
  // Node `from` asks node 0 for [addr, addr + len) of rank 0's send
  // `request` (a remote read, or with `direct` the confirmation of one the
  // receiving rank made, with its outcome).
  void serve_get(uint32_t from, uint32_t request, uint64_t addr, uint64_t len, bool last,
                 bool direct = false, int32_t direct_error = 0) {
    wire::DmaGet g;
    g.job = 1;
    g.token = 4;
    g.src_rank = 0;
    g.src_request = request;
    g.addr = addr;
    g.len = len;
    g.last = last ? 1 : 0;
    g.direct = direct ? 1 : 0;
    g.direct_error = direct_error;
    core::Message m;
    m.from = from;
    m.data = wire::encode(g);
    DmaHelper::serve(m, &nodes[0]->ranks, nodes[0]->net);
  }
};

TEST_F(TwoNodes, BufferSenderBatchesRemoteSendsPerNodeAndKeepsLocalOnesHome) {
  char a[8] = "to-one", b[8] = "to-two";
  nodes[0]->ranks.post(0, send_desc(1, 5, a, 7, 0));
  nodes[0]->ranks.post(0, send_desc(2, 5, b, 7, 1));
  nodes[0]->ranks.post(0, send_desc(1, 5, b, 7, 2));
  wire::Strobe s;
  s.slice = 1;
  auto rep = nodes[0]->bs.run(1, nodes[0]->ranks, nodes[0]->net, nodes[0]->br, nodes[0]->coll);
  EXPECT_EQ(rep.drained, 3u);
  EXPECT_EQ(rep.batches_to, (std::vector<uint32_t>{0, 1}));
  auto& q = nodes[1]->net.inbox[wire::kEvDescBatch];
  ASSERT_EQ(q.size(), 1u) << "one batch per destination node";
  auto batch = wire::decode_batch(q.front().data);
  ASSERT_EQ(batch.sends.size(), 2u);
  EXPECT_EQ(batch.sends[0].pair_seq, 1u);
  EXPECT_EQ(batch.sends[1].pair_seq, 2u) << "per-pair sequence numbers for non-overtaking";
  EXPECT_EQ(batch.sends[0].slice, 0u) << "posted in the slice before this DEM";
}

TEST_F(TwoNodes, SendsToAFullReceiverStayInTheRingWhileTheRanksOtherPostsGo) {
  char a[8] = "held", b[8] = "later";
  std::vector<uint8_t> in(8);
  nodes[0]->ranks.allow(0, in.data(), in.size());
  nodes[0]->ranks.post(0, send_desc(1, 5, a, 5, 0));  // to rank 1: full
  nodes[0]->ranks.post(0, recv_desc(1, 6, in.data(), in.size(), 1));
  nodes[0]->ranks.post(0, send_desc(1, 5, b, 6, 2));  // to rank 1 again
  auto& bs = nodes[0]->bs;
  bs.hold_sends_to({1});
  auto rep = bs.run(1, nodes[0]->ranks, nodes[0]->net, nodes[0]->br, nodes[0]->coll);
  EXPECT_EQ(rep.held, 2u);
  EXPECT_EQ(rep.drained, 1u) << "the receive behind the held send goes";
  EXPECT_EQ(rep.batches_to, (std::vector<uint32_t>{0, 0}));
  EXPECT_TRUE(nodes[1]->net.inbox[wire::kEvDescBatch].empty());
  // Rank 1 took messages: both sends go, in post order, and the receive is
  // not handed over twice.
  bs.hold_sends_to({});
  rep = bs.run(2, nodes[0]->ranks, nodes[0]->net, nodes[0]->br, nodes[0]->coll);
  EXPECT_EQ(rep.held, 0u);
  EXPECT_EQ(rep.drained, 2u);
  auto& q = nodes[1]->net.inbox[wire::kEvDescBatch];
  ASSERT_EQ(q.size(), 1u);
  auto batch = wire::decode_batch(q.front().data);
  ASSERT_EQ(batch.sends.size(), 2u);
  EXPECT_EQ(batch.sends[0].request, 0u);
  EXPECT_EQ(batch.sends[0].pair_seq, 1u);
  EXPECT_EQ(batch.sends[1].request, 2u);
  EXPECT_EQ(batch.sends[1].pair_seq, 2u);
  EXPECT_TRUE(nodes[0]->ranks.corrupted_.empty());
}

TEST_F(TwoNodes, ASendHeldPastTheLimitEndsItsSenderWithTheReason) {
  char a[8] = "held";
  nodes[0]->ranks.post(0, send_desc(1, 5, a, 5, 0));
  auto& bs = nodes[0]->bs;
  bs.set_hold_limit(std::chrono::nanoseconds(0), 50);
  bs.hold_sends_to({1}, true);
  bs.run(1, nodes[0]->ranks, nodes[0]->net, nodes[0]->br, nodes[0]->coll);
  EXPECT_TRUE(nodes[0]->ranks.corrupted_.empty()) << "the hold only began";
  // While some rank of the job computes, a receiver may be slow: no limit.
  bs.hold_sends_to({1}, false);
  bs.run(2, nodes[0]->ranks, nodes[0]->net, nodes[0]->br, nodes[0]->coll);
  EXPECT_TRUE(nodes[0]->ranks.corrupted_.empty()) << "not every rank was blocked";
  bs.hold_sends_to({1}, true);
  bs.run(3, nodes[0]->ranks, nodes[0]->net, nodes[0]->br, nodes[0]->coll);
  ASSERT_EQ(nodes[0]->ranks.corrupted_.size(), 1u);
  EXPECT_EQ(nodes[0]->ranks.corrupted_[0].first, 0);
  EXPECT_NE(nodes[0]->ranks.corrupted_[0].second.find("kept sending to rank 1, which has 50"),
            std::string::npos)
      << nodes[0]->ranks.corrupted_[0].second;
}

TEST_F(TwoNodes, AMessageCrossesNodesByRemoteReadAndCompletesBothSides) {
  std::vector<uint8_t> out(5000), in(5000, 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7);
  nodes[0]->ranks.allow(0, out.data(), out.size());
  nodes[1]->ranks.allow(1, in.data(), in.size());
  nodes[0]->ranks.post(0, send_desc(1, 9, out.data(), out.size(), 3));
  nodes[1]->ranks.post(1, recv_desc(kAnySource, kAnyTag, in.data(), in.size(), 4));
  auto p2p = slice();
  EXPECT_EQ(in, out);
  ASSERT_TRUE(nodes[1]->ranks.done(1, 4));
  EXPECT_EQ(nodes[1]->ranks.slot(1, 4).bytes, 5000u);
  EXPECT_EQ(nodes[1]->ranks.slot(1, 4).source, 0);
  EXPECT_EQ(nodes[1]->ranks.slot(1, 4).tag, 9);
  EXPECT_TRUE(nodes[0]->ranks.done(0, 3)) << "the sender's node completes the send when served";
  EXPECT_EQ(p2p[1].bytes, 5000u);
  EXPECT_EQ(p2p[0].errors + p2p[1].errors, 0u);
}

// Node managers of one host: the sender's node offers its rank's process
// with the send, and the receiving rank reads a big chunk itself, once; the
// sender's node only checks the range against its grant and completes.
TEST_F(TwoNodes, ABigMessageBetweenNodeManagersOfOneHostIsReadOnceByTheReceivingRank) {
  nodes[0]->ranks.host_peers = {1};
  nodes[1]->ranks.host_peers = {0};
  std::vector<uint8_t> out(300 << 10), in(out.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 13 + 1);
  nodes[0]->ranks.allow(0, out.data(), out.size());
  nodes[1]->ranks.allow(1, in.data(), in.size());
  nodes[0]->ranks.post(0, send_desc(1, 9, out.data(), out.size(), 3));
  nodes[1]->ranks.post(1, recv_desc(0, 9, in.data(), in.size(), 4));
  auto p2p = slice();
  EXPECT_EQ(in, out);
  ASSERT_TRUE(nodes[1]->ranks.done(1, 4));
  EXPECT_EQ(nodes[1]->ranks.slot(1, 4).error, 0);
  EXPECT_EQ(nodes[1]->ranks.slot(1, 4).bytes, out.size());
  ASSERT_TRUE(nodes[0]->ranks.done(0, 3)) << "the sender's node completes the send";
  EXPECT_EQ(nodes[0]->ranks.slot(0, 3).error, 0);
  ASSERT_EQ(nodes[1]->ranks.direct_copies.size(), 1u);
  const auto& c = nodes[1]->ranks.direct_copies[0];
  EXPECT_EQ(c.pid, FakeRanks::kPidBase + 0);
  EXPECT_EQ(c.to, 1);
  EXPECT_EQ(c.src, reinterpret_cast<uint64_t>(out.data()));
  EXPECT_EQ(c.len, out.size());
  EXPECT_EQ(sw.dma_data_bytes, sizeof(wire::DmaDataHeader)) << "no bytes crossed the node managers";
  EXPECT_EQ(p2p[1].bytes, out.size());
  EXPECT_EQ(nodes[0]->ranks.grants_.size(), 0u) << "the last chunk ends the grant";
}

// A chunk from another host is asked for in remote reads of at most
// kRemotePiece bytes, all at once, so that the sender's reads, the network
// and the receiver's writes overlap. The MSM announces that many to the
// sending node, which serves each; the data arrives whole, both ends
// complete once, with the last piece.
TEST_F(TwoNodes, AChunkFromAnotherHostIsReadInPieces) {
  nodes[1]->br.scheduler().set_budget(4 << 20);
  const size_t len = 3 * DmaHelper::kRemotePiece + 12345;
  std::vector<uint8_t> out(len), in(len, 0);
  for (size_t i = 0; i < len; ++i) out[i] = static_cast<uint8_t>(i * 13 + i / 4096);
  nodes[0]->ranks.allow(0, out.data(), out.size());
  nodes[1]->ranks.allow(1, in.data(), in.size());
  nodes[0]->ranks.post(0, send_desc(1, 9, out.data(), out.size(), 3));
  nodes[1]->ranks.post(1, recv_desc(0, 9, in.data(), in.size(), 4));
  const auto p2p = slice();
  EXPECT_EQ(p2p[0].errors + p2p[1].errors, 0u);
  EXPECT_EQ(sw.dma_data_bytes, len + 4 * sizeof(wire::DmaDataHeader)) << "four pieces, each answered";
  EXPECT_EQ(in, out);
  ASSERT_TRUE(nodes[1]->ranks.done(1, 4));
  EXPECT_EQ(nodes[1]->ranks.slot(1, 4).error, 0);
  EXPECT_EQ(nodes[1]->ranks.slot(1, 4).bytes, len);
  ASSERT_TRUE(nodes[0]->ranks.done(0, 3));
  EXPECT_EQ(nodes[0]->ranks.slot(0, 3).error, 0);
  EXPECT_EQ(p2p[1].bytes, len);
  EXPECT_EQ(nodes[0]->ranks.grants_.size(), 0u) << "the last piece ends the grant";
}

// Copies ahead: each chunk after the first is read by the receiving rank
// during a slice before its own (while the strobe would run DEM and MSM),
// and its own P2P only confirms it to the sender's node. The rank holds two
// pieces at a time, so it goes from one to the next without waiting for the
// node, and none is left when the transfer completes (the sender may then
// reuse its buffer). Every chunk is read once, the data arrives whole, and
// no payload crosses the node managers.
TEST_F(TwoNodes, ChunksOfASingleCopyTransferAreReadAheadOnceEach) {
  nodes[0]->ranks.host_peers = {1};
  nodes[1]->ranks.host_peers = {0};
  nodes[1]->ranks.copies_ahead = true;
  nodes[1]->br.scheduler().set_budget(128 << 10);
  std::vector<uint8_t> out(512 << 10), in(out.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 11 + i / 4096);
  nodes[0]->ranks.allow(0, out.data(), out.size());
  nodes[1]->ranks.allow(1, in.data(), in.size());
  nodes[0]->ranks.post(0, send_desc(1, 9, out.data(), out.size(), 3));
  nodes[1]->ranks.post(1, recv_desc(0, 9, in.data(), in.size(), 4));
  int slices = 0;
  std::vector<size_t> held;
  while (!nodes[1]->ranks.done(1, 4) && slices < 10) {
    const auto p2p = slice();
    ++slices;
    ASSERT_EQ(p2p[0].errors + p2p[1].errors, 0u);
    held.push_back(nodes[1]->ranks.ahead_outstanding(1));
  }
  EXPECT_EQ(slices, 4) << "one slice per chunk, as without copies ahead";
  EXPECT_EQ(held, (std::vector<size_t>{2, 2, 1, 0}));
  EXPECT_EQ(in, out);
  EXPECT_EQ(nodes[1]->ranks.slot(1, 4).error, 0);
  ASSERT_TRUE(nodes[0]->ranks.done(0, 3));
  EXPECT_EQ(nodes[0]->ranks.slot(0, 3).error, 0);
  // The first chunk's own order goes out before the slice's P2P settles
  // anything, the next piece right behind it.
  EXPECT_EQ(nodes[1]->ranks.direct_copies.size(), 0u) << "no chunk waited for its own P2P";
  ASSERT_EQ(nodes[1]->ranks.ahead_copies.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    const auto& a = nodes[1]->ranks.ahead_copies[k];
    EXPECT_EQ(a.pid, FakeRanks::kPidBase + 0);
    EXPECT_EQ(a.src, reinterpret_cast<uint64_t>(out.data()) + k * (128 << 10));
    EXPECT_EQ(a.dst, reinterpret_cast<uint64_t>(in.data()) + k * (128 << 10));
    EXPECT_EQ(a.len, 128u << 10);
  }
  EXPECT_EQ(sw.dma_data_bytes, sizeof(wire::DmaDataHeader))
      << "no bytes crossed, and only the last chunk was answered";
  EXPECT_EQ(nodes[0]->ranks.grants_.size(), 0u) << "the last chunk ends the grant";
}

// A copy ahead that failed leaves no trace: its chunk is read again in its
// own slice, which alone decides the outcome (here: fine).
TEST_F(TwoNodes, AReadAheadThatFailedIsReadAgainInItsOwnSlice) {
  nodes[0]->ranks.host_peers = {1};
  nodes[1]->ranks.host_peers = {0};
  nodes[1]->ranks.copies_ahead = true;
  // The two pieces handed out ahead in the first slice fail (the first
  // chunk's own order, posted before them, does not).
  nodes[1]->ranks.ahead_result = bcs_err_bad_address;
  nodes[1]->ranks.fail_posts = {1, 2};
  nodes[1]->br.scheduler().set_budget(128 << 10);
  std::vector<uint8_t> out(384 << 10), in(out.size(), 0);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 5 + 3);
  nodes[0]->ranks.allow(0, out.data(), out.size());
  nodes[1]->ranks.allow(1, in.data(), in.size());
  nodes[0]->ranks.post(0, send_desc(1, 9, out.data(), out.size(), 3));
  nodes[1]->ranks.post(1, recv_desc(0, 9, in.data(), in.size(), 4));
  for (int k = 0; k < 10 && !nodes[1]->ranks.done(1, 4); ++k) slice();
  ASSERT_TRUE(nodes[1]->ranks.done(1, 4));
  EXPECT_EQ(in, out);
  EXPECT_EQ(nodes[1]->ranks.slot(1, 4).error, 0);
  EXPECT_EQ(nodes[0]->ranks.slot(0, 3).error, 0);
  // Chunk 1 read in its own slice (the rank still held piece 2), chunk 2's
  // own order posted again in its slice.
  EXPECT_EQ(nodes[1]->ranks.ahead_copies.size(), 4u);
  EXPECT_EQ(nodes[1]->ranks.direct_copies.size(), 1u);
}

TEST_F(TwoNodes, AReceivingRanksFailedReadFailsBothEnds) {
  nodes[0]->ranks.host_peers = {1};
  nodes[1]->ranks.host_peers = {0};
  nodes[1]->ranks.direct_result = bcs_err_bad_address;
  std::vector<uint8_t> out(200 << 10, 7), in(out.size(), 0);
  nodes[0]->ranks.allow(0, out.data(), out.size());
  nodes[1]->ranks.allow(1, in.data(), in.size());
  nodes[0]->ranks.post(0, send_desc(1, 9, out.data(), out.size(), 3));
  nodes[1]->ranks.post(1, recv_desc(0, 9, in.data(), in.size(), 4));
  slice();
  ASSERT_TRUE(nodes[1]->ranks.done(1, 4));
  EXPECT_EQ(nodes[1]->ranks.slot(1, 4).error, bcs_err_bad_address);
  ASSERT_TRUE(nodes[0]->ranks.done(0, 3));
  EXPECT_EQ(nodes[0]->ranks.slot(0, 3).error, bcs_err_bad_address)
      << "the sender learns it too: its buffer may be the bad one";
}

TEST_F(TwoNodes, SmallMessagesAndPeersOfOtherHostsStillCrossByRemoteRead) {
  auto cross = [&](size_t len) {
    std::vector<uint8_t> out(len), in(len, 0);
    for (size_t i = 0; i < len; ++i) out[i] = static_cast<uint8_t>(i * 3);
    nodes[0]->ranks.allow(0, out.data(), out.size());
    nodes[1]->ranks.allow(1, in.data(), in.size());
    nodes[0]->ranks.post(0, send_desc(1, 2, out.data(), out.size(), 5));
    nodes[1]->ranks.post(1, recv_desc(0, 2, in.data(), in.size(), 6));
    const uint64_t before = sw.dma_data_bytes;
    slice();
    EXPECT_EQ(in, out);
    EXPECT_TRUE(nodes[1]->ranks.done(1, 6) && nodes[0]->ranks.done(0, 5));
    nodes[0]->ranks.view_of(0).requests[5].state.store(static_cast<uint32_t>(ReqState::free));
    nodes[1]->ranks.view_of(1).requests[6].state.store(static_cast<uint32_t>(ReqState::free));
    return sw.dma_data_bytes - before - sizeof(wire::DmaDataHeader);
  };
  // Another host (nothing offered): the bytes travel, however big.
  nodes[1]->ranks.host_peers = {0};
  EXPECT_EQ(cross(300 << 10), 300u << 10);
  // An offer from a node the receiver does not know on its host is not
  // taken (a peer's word is not enough).
  nodes[0]->ranks.host_peers = {1};
  nodes[1]->ranks.host_peers = {};
  EXPECT_EQ(cross(300 << 10), 300u << 10);
  // The same host, but a message too small to be worth waking the rank for.
  nodes[1]->ranks.host_peers = {0};
  EXPECT_EQ(cross(4000), 4000u);
  EXPECT_TRUE(nodes[1]->ranks.direct_copies.empty());
}

// A node that says its rank read a range itself gets it checked like a
// read: outside the grant, the send is not completed by it.
TEST_F(TwoNodes, ADirectReadOutsideTheGrantIsRefused) {
  static int sent[16];
  nodes[0]->ranks.allow(0, sent, sizeof sent);
  const auto a = reinterpret_cast<uint64_t>(sent);
  nodes[0]->ranks.grants_.grant(0, 3, 1, a, sizeof sent);
  nodes[0]->ranks.post(0, send_desc(1, 1, sent, 40000, 3));  // only to mark slot 3 pending
  wire::DmaGet g;
  g.job = 1;
  g.token = 4;
  g.src_rank = 0;
  g.src_request = 3;
  g.addr = a + 16;
  g.len = sizeof sent;  // past the end
  g.last = 1;
  g.direct = 1;
  core::Message m;
  m.from = 1;
  m.data = wire::encode(g);
  DmaHelper::serve(m, &nodes[0]->ranks, nodes[0]->net);
  auto& q = nodes[1]->net.inbox[wire::kEvDmaData];
  ASSERT_EQ(q.size(), 1u);
  wire::DmaDataHeader h;
  ASSERT_EQ(q.front().data.size(), sizeof h);
  std::memcpy(&h, q.front().data.data(), sizeof h);
  EXPECT_EQ(h.error, bcs_err_peer_gone);
  EXPECT_FALSE(nodes[0]->ranks.done(0, 3));
  EXPECT_EQ(nodes[0]->ranks.grants_.size(), 1u);
}

// A direct piece before the last gets no answer, so what goes wrong with
// it is kept by the sender's node and answered with the last chunk: a
// refused range, or the receiving rank's own failed read. Both ends then
// fail; nothing is forgotten because nobody waited.
TEST_F(TwoNodes, AnUnansweredPieceThatFailedFailsItsTransferAtTheLastChunk) {
  static int sent[16];
  nodes[0]->ranks.allow(0, sent, sizeof sent);
  const auto a = reinterpret_cast<uint64_t>(sent);
  auto& q = nodes[1]->net.inbox[wire::kEvDmaData];
  auto get = [&](uint32_t request, uint64_t addr, uint64_t len, bool last, int32_t direct_error) {
    serve_get(1, request, addr, len, last, true, direct_error);
  };
  auto answer = [&] {
    EXPECT_EQ(q.size(), 1u);
    wire::DmaDataHeader h{};
    if (q.empty()) return -1;
    std::memcpy(&h, q.front().data.data(), sizeof h);
    q.clear();
    return h.error;
  };
  // A refused range (past the send's end).
  nodes[0]->ranks.grants_.grant(0, 3, 1, a, sizeof sent);
  nodes[0]->ranks.post(0, send_desc(1, 1, sent, 40000, 3));  // only to mark slot 3 pending
  get(3, a + 16, sizeof sent, false, 0);
  EXPECT_TRUE(q.empty()) << "a piece before the last is not answered";
  EXPECT_FALSE(nodes[0]->ranks.done(0, 3));
  get(3, a + 32, 32, true, 0);
  EXPECT_EQ(answer(), bcs_err_peer_gone);
  ASSERT_TRUE(nodes[0]->ranks.done(0, 3));
  EXPECT_EQ(nodes[0]->ranks.slot(0, 3).error, bcs_err_peer_gone);
  // The receiving rank could not read a piece.
  nodes[0]->ranks.grants_.grant(0, 5, 1, a, sizeof sent);
  nodes[0]->ranks.post(0, send_desc(1, 1, sent, 40000, 5));
  get(5, a, 32, false, bcs_err_bad_address);
  EXPECT_TRUE(q.empty());
  get(5, a + 32, 32, true, 0);
  EXPECT_EQ(answer(), bcs_err_bad_address);
  ASSERT_TRUE(nodes[0]->ranks.done(0, 5));
  EXPECT_EQ(nodes[0]->ranks.slot(0, 5).error, bcs_err_bad_address);
  EXPECT_EQ(nodes[0]->ranks.grants_.size(), 0u);
}

TEST_F(TwoNodes, ALocalMessageIsCopiedByCrossMemoryAttach) {
  std::vector<uint8_t> out(3000, 0x5a), in(3000, 0);
  nodes[0]->ranks.allow(0, out.data(), out.size());
  nodes[0]->ranks.allow(2, in.data(), in.size());
  nodes[0]->ranks.post(2, recv_desc(0, 1, in.data(), in.size(), 0));
  nodes[0]->ranks.post(0, send_desc(2, 1, out.data(), out.size(), 0));
  slice();
  EXPECT_EQ(in, out);
  EXPECT_TRUE(nodes[0]->ranks.done(2, 0));
  EXPECT_TRUE(nodes[0]->ranks.done(0, 0));
  EXPECT_EQ(nodes[1]->net.sent, 0u) << "nothing crossed the network";
}

// A large message between two ranks of one node: its copy orders may be
// shared with the sender (NmJob::post_copy lets a sender asleep in MPI
// write part of each), which has nothing of its own to copy. Two ranks
// sending each other large messages at once each copy their own: asked to
// share as well, one of them would copy one and a half; they may only split
// their own copies over a second thread when their node has a CPU to spare.
TEST_F(TwoNodes, ALocalSenderSharesTheCopyOnlyWhenItHasNoneOfItsOwn) {
  nodes[0]->ranks.copies_ahead = true;
  nodes[0]->br.scheduler().set_budget(128 << 10);
  const size_t len = 512 << 10;
  std::vector<uint8_t> a(len), b(len), into_a(len, 0), into_b(len, 0);
  for (size_t i = 0; i < len; ++i) {
    a[i] = static_cast<uint8_t>(i * 7 + 1);
    b[i] = static_cast<uint8_t>(i * 13 + 5);
  }
  nodes[0]->ranks.allow(0, a.data(), len);
  nodes[0]->ranks.allow(2, into_b.data(), len);
  nodes[0]->ranks.post(2, recv_desc(0, 1, into_b.data(), len, 0));
  nodes[0]->ranks.post(0, send_desc(2, 1, a.data(), len, 0));
  for (int k = 0; k < 10 && !nodes[0]->ranks.done(2, 0); ++k) slice();
  ASSERT_TRUE(nodes[0]->ranks.done(2, 0));
  EXPECT_EQ(into_b, a);
  auto& orders = nodes[0]->ranks.ahead_copies;
  ASSERT_FALSE(orders.empty());
  for (const auto& o : orders) EXPECT_EQ(o.help, CopyHelp::share) << "rank 0 only sends";

  orders.clear();
  std::fill(into_b.begin(), into_b.end(), 0);
  nodes[0]->ranks.allow(2, b.data(), len);
  nodes[0]->ranks.allow(0, into_a.data(), len);
  nodes[0]->ranks.post(2, recv_desc(0, 2, into_b.data(), len, 1));
  nodes[0]->ranks.post(0, recv_desc(2, 2, into_a.data(), len, 1));
  nodes[0]->ranks.post(0, send_desc(2, 2, a.data(), len, 2));
  nodes[0]->ranks.post(2, send_desc(0, 2, b.data(), len, 2));
  for (int k = 0; k < 10 && !(nodes[0]->ranks.done(2, 1) && nodes[0]->ranks.done(0, 1)); ++k)
    slice();
  ASSERT_TRUE(nodes[0]->ranks.done(2, 1));
  ASSERT_TRUE(nodes[0]->ranks.done(0, 1));
  EXPECT_EQ(into_b, a);
  EXPECT_EQ(into_a, b);
  ASSERT_FALSE(orders.empty());
  for (const auto& o : orders)
    EXPECT_EQ(o.help, CopyHelp::split) << "rank " << o.to << " copies its own, perhaps on two threads";
}

TEST_F(TwoNodes, ALongerMessageIsTruncatedAndSaysSo) {
  char out[64] = {}, in[16] = {};
  nodes[1]->ranks.allow(1, in, sizeof in);
  nodes[0]->ranks.post(0, send_desc(1, 0, out, sizeof out, 0));
  nodes[1]->ranks.post(1, recv_desc(0, 0, in, sizeof in, 0));
  slice();
  ASSERT_TRUE(nodes[1]->ranks.done(1, 0));
  EXPECT_EQ(nodes[1]->ranks.slot(1, 0).error, bcs_err_truncate);
  EXPECT_EQ(nodes[1]->ranks.slot(1, 0).bytes, sizeof in);
}

// A non-contiguous buffer (kDescLayout): `count` instances of `blocks`
// every `extent` bytes from `base`; the block list is rank memory too.
Descriptor layout_desc(Descriptor d, const std::vector<LayoutBlock>& blocks, uint32_t count,
                       int64_t extent) {
  uint64_t size = 0;
  for (auto& b : blocks) size += b.len;
  d.flags = kDescLayout;
  d.inline_len = 0;
  d.len = size * count;
  LayoutRef ref{reinterpret_cast<uintptr_t>(blocks.data()), static_cast<uint32_t>(blocks.size()),
                count, extent};
  std::memcpy(d.payload, &ref, sizeof ref);
  return d;
}

// A message of at most kLandingMax bytes into a contiguous buffer lands in
// the receive's request slot, from this node or another: the rank copies it
// (libbcs), the node writes nothing into the rank's memory. Truncated, only
// what the buffer holds lands. A receive into a layout is written.
// A send whose receive is not posted yet stays with the receiver's node
// manager (an unexpected message), out of the sender's ring, so a rank that
// later posts the receive and waits cannot tell from the rings that a slice
// would complete it. The buffer receiver says so in the rank's control block
// after each MSM (RankControl::held_sends), locally and across nodes, and
// clears it once a receive took the send.
TEST_F(TwoNodes, TheNodeSaysWhichRanksHaveSendsWaitingForAReceive) {
  std::vector<uint8_t> out(8, 0x21);
  uint8_t in_local[8] = {}, in_remote[8] = {};
  nodes[0]->ranks.allow(2, in_local, sizeof in_local);
  nodes[1]->ranks.allow(1, in_remote, sizeof in_remote);
  auto held = [&](uint32_t node, int32_t r) {
    return nodes[node]->ranks.view_of(r).ctl->held_sends.load();
  };
  nodes[0]->ranks.post(0, send_desc(2, 1, out.data(), out.size(), 0));
  nodes[0]->ranks.post(0, send_desc(1, 2, out.data(), out.size(), 1));
  slice();
  EXPECT_EQ(held(0, 2), 1u);
  EXPECT_EQ(held(1, 1), 1u);
  EXPECT_EQ(held(0, 0), 0u) << "nothing was sent to rank 0";
  nodes[0]->ranks.post(2, recv_desc(0, 1, in_local, sizeof in_local, 0));
  nodes[1]->ranks.post(1, recv_desc(0, 2, in_remote, sizeof in_remote, 0));
  for (int k = 0; k < 3 && !(nodes[0]->ranks.done(2, 0) && nodes[1]->ranks.done(1, 0)); ++k)
    slice();
  ASSERT_TRUE(nodes[0]->ranks.done(2, 0));
  ASSERT_TRUE(nodes[1]->ranks.done(1, 0));
  EXPECT_EQ(held(0, 2), 0u);
  EXPECT_EQ(held(1, 1), 0u);
}

// The unexpected shelf (segment.h, Shelf): a small message no receive took
// is offered to its rank after the MSM, on its own node or across nodes. A
// message the rank took there (shelf_take, as a receive does) leaves
// matching at the next MSM that concerns the rank: a later receive of the
// same key gets the next message, not that one again. Garbage in a shelf
// ends its rank, named, and it is not offered to again.
TEST_F(TwoNodes, ASmallMessageWaitingForARankIsOnItsShelfAndWhatItTookIsNotDeliveredAgain) {
  const int32_t a = 1111, b = 2222;
  nodes[0]->ranks.post(0, send_desc(2, 7, &a, sizeof a, 0));
  nodes[0]->ranks.post(0, send_desc(1, 7, &a, sizeof a, 1));
  slice();
  Shelf* local = nodes[0]->ranks.view_of(2).shelf;
  Shelf* remote = nodes[1]->ranks.view_of(1).shelf;
  ASSERT_EQ(local->count.load(), 1u);
  ASSERT_EQ(remote->count.load(), 1u);
  int32_t got = 0;
  ShelfTaken t;
  ASSERT_TRUE(shelf_take(local, 0, 0, 7, &got, sizeof got, &t));
  EXPECT_EQ(got, a);
  EXPECT_EQ(t.pair_seq, 1u);
  EXPECT_FALSE(shelf_take(local, 0, 0, 7, &got, sizeof got, &t)) << "taken once only";
  ASSERT_TRUE(shelf_take(remote, 0, 0, 7, &got, sizeof got, &t));
  EXPECT_EQ(got, a);

  // Both ranks now post a receive of the same key, and rank 0 sends b to
  // each: the receives must get b.
  int32_t in_local = 0, in_remote = 0;
  nodes[0]->ranks.allow(2, &in_local, sizeof in_local);
  nodes[1]->ranks.allow(1, &in_remote, sizeof in_remote);
  nodes[0]->ranks.post(2, recv_desc(0, 7, &in_local, sizeof in_local, 0));
  nodes[1]->ranks.post(1, recv_desc(0, 7, &in_remote, sizeof in_remote, 0));
  slice();
  EXPECT_FALSE(nodes[0]->ranks.done(2, 0)) << "got the message its rank had taken";
  EXPECT_FALSE(nodes[1]->ranks.done(1, 0)) << "got the message its rank had taken";
  EXPECT_EQ(nodes[0]->br.shelf_taken(), 1u);
  EXPECT_EQ(nodes[1]->br.shelf_taken(), 1u);
  nodes[0]->ranks.post(0, send_desc(2, 7, &b, sizeof b, 2));
  nodes[0]->ranks.post(0, send_desc(1, 7, &b, sizeof b, 3));
  for (int k = 0; k < 3 && !(nodes[0]->ranks.done(2, 0) && nodes[1]->ranks.done(1, 0)); ++k)
    slice();
  ASSERT_TRUE(nodes[0]->ranks.done(2, 0));
  ASSERT_TRUE(nodes[1]->ranks.done(1, 0));
  EXPECT_EQ(nodes[0]->ranks.slot(2, 0).seq, 2u);
  EXPECT_EQ(nodes[1]->ranks.slot(1, 0).seq, 2u);

  // Garbage: rank 1 scribbles over an offered entry.
  nodes[0]->ranks.post(0, send_desc(1, 8, &a, sizeof a, 4));
  slice();
  ASSERT_EQ(remote->count.load(), 1u);
  remote->entries[0].state.store(0x12345678);
  nodes[0]->ranks.post(0, send_desc(1, 8, &b, sizeof b, 5));
  slice();
  ASSERT_EQ(nodes[1]->ranks.corrupted_.size(), 1u);
  EXPECT_EQ(nodes[1]->ranks.corrupted_[0].first, 1);
  EXPECT_THAT(nodes[1]->ranks.corrupted_[0].second, testing::HasSubstr("unexpected shelf"));
  nodes[0]->ranks.post(0, send_desc(1, 8, &b, sizeof b, 6));
  slice();
  EXPECT_EQ(nodes[1]->ranks.corrupted_.size(), 1u) << "offered to again";
  EXPECT_TRUE(nodes[0]->ranks.corrupted_.empty());
}

TEST_F(TwoNodes, ASmallMessageLandsInTheReceivesRequestSlot) {
  for (auto& n : nodes) n->ranks.landing = true;
  std::vector<uint8_t> out(kLandingMax, 0x37), out2(40, 0x44);
  uint8_t local_in[kLandingMax] = {}, remote_in[kLandingMax] = {}, short_in[16] = {};
  nodes[0]->ranks.allow(2, local_in, sizeof local_in);
  nodes[1]->ranks.allow(1, remote_in, sizeof remote_in);
  nodes[1]->ranks.allow(1, short_in, sizeof short_in);
  nodes[0]->ranks.post(2, recv_desc(0, 1, local_in, sizeof local_in, 0));
  nodes[1]->ranks.post(1, recv_desc(0, 2, remote_in, sizeof remote_in, 0));
  nodes[1]->ranks.post(1, recv_desc(0, 3, short_in, sizeof short_in, 1));
  nodes[0]->ranks.post(0, send_desc(2, 1, out.data(), out.size(), 0));
  nodes[0]->ranks.post(0, send_desc(1, 2, out.data(), out.size(), 1));
  nodes[0]->ranks.post(0, send_desc(1, 3, out2.data(), out2.size(), 2));
  slice();
  ASSERT_TRUE(nodes[0]->ranks.done(2, 0));
  ASSERT_TRUE(nodes[1]->ranks.done(1, 0));
  ASSERT_TRUE(nodes[1]->ranks.done(1, 1));
  EXPECT_EQ(nodes[0]->ranks.slot(2, 0).landed, kLandingMax);
  EXPECT_EQ(0, std::memcmp(nodes[0]->ranks.landing_of(2, 0), out.data(), kLandingMax));
  EXPECT_EQ(nodes[1]->ranks.slot(1, 0).landed, kLandingMax);
  EXPECT_EQ(0, std::memcmp(nodes[1]->ranks.landing_of(1, 0), out.data(), kLandingMax));
  EXPECT_EQ(nodes[1]->ranks.slot(1, 1).landed, sizeof short_in);
  EXPECT_EQ(nodes[1]->ranks.slot(1, 1).error, bcs_err_truncate);
  EXPECT_EQ(0, std::memcmp(nodes[1]->ranks.landing_of(1, 1), out2.data(), sizeof short_in));
  for (uint8_t b : local_in) ASSERT_EQ(b, 0) << "the node wrote the rank's buffer";
  for (uint8_t b : remote_in) ASSERT_EQ(b, 0) << "the node wrote the rank's buffer";
  for (uint8_t b : short_in) ASSERT_EQ(b, 0) << "the node wrote the rank's buffer";

  // Into a layout: written block by block, nothing landed.
  const std::vector<LayoutBlock> blocks{{0, 4}, {8, 4}};
  uint8_t strided[16] = {};
  nodes[1]->ranks.allow(1, strided, sizeof strided);
  nodes[1]->ranks.allow(1, blocks.data(), blocks.size() * sizeof(LayoutBlock));
  nodes[1]->ranks.post(1, layout_desc(recv_desc(0, 4, strided, 0, 2), blocks, 1, 16));
  nodes[0]->ranks.post(0, send_desc(1, 4, out2.data(), 8, 3));
  slice();
  ASSERT_TRUE(nodes[1]->ranks.done(1, 2));
  EXPECT_EQ(nodes[1]->ranks.slot(1, 2).landed, 0u);
  EXPECT_EQ(strided[0], 0x44);
  EXPECT_EQ(strided[8], 0x44);
  EXPECT_EQ(strided[4], 0);
}

// Strided send (3 blocks of 5, 1 and 9 bytes in an instance of 24, 40
// instances) into a receive of 2 blocks (7 and 8 bytes in 20, 40
// instances), across nodes and on one node, with a chunk budget of 37
// bytes so that chunks start and end inside blocks. Only the blocks are
// written; the gaps keep their bytes.
TEST_F(TwoNodes, NonContiguousBuffersMoveBlockByBlockInChunksThatCutBlocks) {
  const std::vector<LayoutBlock> sblocks{{0, 5}, {8, 1}, {12, 9}}, rblocks{{2, 7}, {12, 8}};
  for (int32_t dst : {1, 2}) {
    std::vector<uint8_t> out(24 * 40), in(20 * 40, 0xee);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 13 + 1);
    Node& sn = *nodes[0];
    Node& rn = *nodes[dst == 1 ? 1 : 0];
    sn.ranks.allow(0, out.data(), out.size());
    sn.ranks.allow(0, sblocks.data(), sblocks.size() * sizeof(LayoutBlock));
    rn.ranks.allow(dst, in.data(), in.size());
    rn.ranks.allow(dst, rblocks.data(), rblocks.size() * sizeof(LayoutBlock));
    rn.br.scheduler().set_budget(37);
    sn.ranks.post(0, layout_desc(send_desc(dst, 4, out.data(), 1000, 5), sblocks, 40, 24));
    rn.ranks.post(dst, layout_desc(recv_desc(0, 4, in.data(), 0, 6), rblocks, 40, 20));
    for (int i = 0; i < 100 && !rn.ranks.done(dst, 6); ++i) slice();
    ASSERT_TRUE(rn.ranks.done(dst, 6)) << "to rank " << dst;
    EXPECT_EQ(rn.ranks.slot(dst, 6).error, 0);
    EXPECT_EQ(rn.ranks.slot(dst, 6).bytes, 600u);
    EXPECT_TRUE(sn.ranks.done(0, 5));
    // The packed stream, and where each of its bytes must land.
    std::vector<uint8_t> packed;
    for (int k = 0; k < 40; ++k)
      for (auto& b : sblocks)
        for (uint64_t j = 0; j < b.len; ++j) packed.push_back(out[24 * k + b.disp + j]);
    std::vector<uint8_t> want(in.size(), 0xee);
    size_t at = 0;
    for (int k = 0; k < 40; ++k)
      for (auto& b : rblocks)
        for (uint64_t j = 0; j < b.len; ++j) want[20 * k + b.disp + j] = packed[at++];
    EXPECT_EQ(in, want) << "to rank " << dst;
    EXPECT_TRUE(sn.ranks.grants_.size() == 0) << "the grant ended with the last chunk";
    rn.br.scheduler().set_budget(1 << 20);
  }
}

TEST_F(TwoNodes, ALayoutThatDoesNotDescribeTheMessageEndsTheRank) {
  const std::vector<LayoutBlock> blocks{{0, 4}, {8, 4}};
  std::vector<uint8_t> buf(1000);
  nodes[0]->ranks.allow(0, buf.data(), buf.size());
  nodes[0]->ranks.allow(0, blocks.data(), blocks.size() * sizeof(LayoutBlock));
  Descriptor d = layout_desc(send_desc(1, 0, buf.data(), 1000, 3), blocks, 30, 16);
  d.len = 999;  // the blocks say 240
  nodes[0]->ranks.post(0, d);
  nodes[0]->bs.run(1, nodes[0]->ranks, nodes[0]->net, nodes[0]->br, nodes[0]->coll);
  ASSERT_EQ(nodes[0]->ranks.corrupted_.size(), 1u);
  EXPECT_THAT(nodes[0]->ranks.corrupted_[0].second, testing::HasSubstr("layout of 240 bytes for 999"));
  nodes[0]->ranks.corrupted_.clear();
  Descriptor e = layout_desc(recv_desc(1, 0, buf.data(), 0, 4), blocks, 2, 16);
  LayoutRef ref{0x10, 2, 2, 16};  // a block list the rank does not have
  std::memcpy(e.payload, &ref, sizeof ref);
  nodes[0]->ranks.post(0, e);
  nodes[0]->bs.run(2, nodes[0]->ranks, nodes[0]->net, nodes[0]->br, nodes[0]->coll);
  ASSERT_EQ(nodes[0]->ranks.corrupted_.size(), 1u);
  EXPECT_THAT(nodes[0]->ranks.corrupted_[0].second, testing::HasSubstr("block list unreadable"));
}

// Garbage in a ring (the library never posts it) ends the rank that wrote
// it, named with the reason; nothing after it in that ring is used, and
// other ranks go on.
TEST_F(TwoNodes, GarbageInARingEndsThatRankNamingTheCause) {
  Descriptor ok = recv_desc(1, 0, nullptr, 0, 9);
  nodes[0]->ranks.post(0, ok);
  Descriptor bad_peer = send_desc(99, 0, "x", 1, 8);
  bad_peer.flags = 0;
  nodes[0]->ranks.post(0, bad_peer);
  Descriptor after = recv_desc(1, 0, nullptr, 0, 10);
  nodes[0]->ranks.post(0, after);
  auto rep = nodes[0]->bs.run(1, nodes[0]->ranks, nodes[0]->net, nodes[0]->br, nodes[0]->coll);
  EXPECT_EQ(rep.drained, 3u);
  const auto& c = nodes[0]->ranks.corrupted_;
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].first, 0);
  EXPECT_EQ(c[0].second, "corrupted its descriptor ring: send to invalid rank 99");
  EXPECT_FALSE(nodes[0]->ranks.done(0, 8)) << "nothing of the garbage is used";
  EXPECT_FALSE(nodes[0]->ranks.done(0, 10));
}

TEST_F(TwoNodes, EachKindOfRingGarbageIsNamed) {
  auto run_with = [&](Descriptor d, uint32_t req_index) {
    nodes[0]->ranks.corrupted_.clear();
    RankView v = nodes[0]->ranks.view_of(0);
    d.request = req_index;
    EXPECT_TRUE(ring_try_post(v, d));
    nodes[0]->bs.run(1, nodes[0]->ranks, nodes[0]->net, nodes[0]->br, nodes[0]->coll);
    return nodes[0]->ranks.corrupted_.empty() ? std::string() : nodes[0]->ranks.corrupted_[0].second;
  };
  Descriptor unknown{};
  unknown.kind = static_cast<DescKind>(42);
  EXPECT_THAT(run_with(unknown, 7), testing::HasSubstr("unknown kind 42"));
  EXPECT_THAT(run_with(recv_desc(1, 0, nullptr, 0, 0), 1u << 30),
              testing::HasSubstr("request index 1073741824 out of range"));
  Descriptor inl = send_desc(1, 0, "x", 1, 3);
  inl.inline_len = 5000;  // past kInlineSpanMax
  EXPECT_THAT(run_with(inl, 3), testing::HasSubstr("inline length 5000 invalid"));
  Descriptor cancel{};
  cancel.kind = DescKind::cancel;
  cancel.flags = kDescCancelSend;
  cancel.peer = -5;
  EXPECT_THAT(run_with(cancel, 2), testing::HasSubstr("cancel of a send to invalid rank -5"));
  // A head more than a ring ahead of the tail: nothing is drained.
  nodes[0]->ranks.corrupted_.clear();
  RankView v = nodes[0]->ranks.view_of(0);
  v.ctl->head.store(v.ctl->tail.load() + (uint64_t{1} << 40));
  auto rep = nodes[0]->bs.run(2, nodes[0]->ranks, nodes[0]->net, nodes[0]->br, nodes[0]->coll);
  EXPECT_EQ(rep.drained, 0u);
  ASSERT_EQ(nodes[0]->ranks.corrupted_.size(), 1u);
  EXPECT_THAT(nodes[0]->ranks.corrupted_[0].second, testing::HasSubstr("is not within a ring"));
}

TEST_F(TwoNodes, AMalformedBatchIsReportedNotTrusted) {
  core::Message junk;
  junk.from = 0;
  junk.data = {1, 2, 3};
  nodes[1]->net.inbox[wire::kEvDescBatch].push_back(junk);
  wire::Strobe s;
  s.slice = 1;
  s.expect_batches = {0, 1};
  auto rep = nodes[1]->br.run(s, &nodes[1]->ranks, nodes[1]->net);
  EXPECT_EQ(rep.errors, 1u);
  EXPECT_EQ(rep.matches, 0u);
}

TEST_F(TwoNodes, AMissingBatchIsAnErrorNotAHang) {
  wire::Strobe s;
  s.slice = 1;
  s.expect_batches = {0, 1};
  auto rep = nodes[1]->br.run(s, &nodes[1]->ranks, nodes[1]->net);
  EXPECT_EQ(rep.errors, 1u);
}

TEST_F(TwoNodes, RemoteReadsOfAnotherJobOrRankAreRefused) {
  wire::DmaGet g;
  g.job = 2;  // not the job this node runs
  g.token = 5;
  g.src_rank = 0;
  g.len = 4;
  core::Message m;
  m.from = 1;
  m.data = wire::encode(g);
  DmaHelper::serve(m, &nodes[0]->ranks, nodes[0]->net);
  g.job = 1;
  g.src_rank = 1;  // not on node 0
  m.data = wire::encode(g);
  DmaHelper::serve(m, &nodes[0]->ranks, nodes[0]->net);
  auto& q = nodes[1]->net.inbox[wire::kEvDmaData];
  ASSERT_EQ(q.size(), 2u);
  for (auto& reply : q) {
    wire::DmaDataHeader h;
    ASSERT_EQ(reply.data.size(), sizeof h) << "no bytes travel with a refusal";
    std::memcpy(&h, reply.data.data(), sizeof h);
    EXPECT_EQ(h.error, bcs_err_peer_gone);
  }
}

// Remote reads are capabilities: only a range of a send forwarded to the
// asking node is served, and the grant ends with the last chunk.
TEST_F(TwoNodes, OnlyGrantedRangesOfForwardedSendsAreServed) {
  static int secret[64];
  static int sent[16];
  for (int i = 0; i < 16; ++i) sent[i] = i * 7;
  nodes[0]->ranks.allow(0, secret, sizeof secret);
  nodes[0]->ranks.allow(0, sent, sizeof sent);
  const auto a = reinterpret_cast<uint64_t>(sent);
  nodes[0]->ranks.grants_.grant(0, 3, 1, a, sizeof sent);  // as the buffer sender does
  auto ask = [&](uint32_t from, uint32_t request, uint64_t addr, uint64_t len, bool last) {
    nodes[0]->net.inbox[wire::kEvDmaData].clear();
    nodes[1]->net.inbox[wire::kEvDmaData].clear();
    serve_get(from, request, addr, len, last);
    auto& q = nodes[from]->net.inbox[wire::kEvDmaData];
    EXPECT_EQ(q.size(), 1u);
    wire::DmaDataHeader h;
    std::memcpy(&h, q.front().data.data(), sizeof h);
    return std::pair{h.error, q.front().data.size() - sizeof h};
  };
  // Memory no send covers, another request, past the end, another node: refused.
  EXPECT_EQ(ask(1, 3, reinterpret_cast<uint64_t>(secret), 16, false).first, bcs_err_peer_gone);
  EXPECT_EQ(ask(1, 4, a, 16, false).first, bcs_err_peer_gone);
  EXPECT_EQ(ask(1, 3, a + 32, sizeof sent, false).first, bcs_err_peer_gone);
  EXPECT_EQ(ask(1, 3, a, ~uint64_t{0}, false).first, bcs_err_peer_gone);
  EXPECT_EQ(ask(0, 3, a, 16, false).first, bcs_err_peer_gone);
  // Inside the send, from its receiver's node: served, until the last chunk.
  EXPECT_EQ(ask(1, 3, a, 32, false), (std::pair<int32_t, size_t>{0, 32}));
  EXPECT_EQ(ask(1, 3, a + 32, sizeof sent - 32, true), (std::pair<int32_t, size_t>{0, sizeof sent - 32}));
  EXPECT_EQ(ask(1, 3, a, 16, false).first, bcs_err_peer_gone) << "the grant ended";
  EXPECT_EQ(nodes[0]->ranks.grants_.size(), 0u);
}

}  // namespace
}  // namespace bcs::nm
