// The node managers' wire messages (daemons/common/wire.h): what one node
// sends another is input, so decoding must refuse lies before allocating
// for them, and what it encodes must come back the same.
#include "wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>

namespace bcs::wire {
namespace {

TEST(Wire, BatchWithSendsAndCancelsRoundTrips) {
  DescBatch b;
  b.slice = 7;
  b.job = 3;
  SendDesc s;
  s.src = 1;
  s.dst = 2;
  s.tag = 9;
  s.len = 4;
  s.is_inline = true;
  s.payload = {1, 2, 3, 4};
  b.sends.push_back(s);
  SendDesc big;  // read remotely; its sender's process offered
  big.src = 1;
  big.dst = 2;
  big.len = 1 << 20;
  big.addr = 0x7f0000001000;
  big.request = 6;
  big.pid = 4321;
  b.sends.push_back(big);
  b.cancels.push_back(SendCancel{1, 2, 17});
  b.cancels.push_back(SendCancel{1, 2, 18, 5, true});
  const DescBatch c = decode_batch(encode(b));
  ASSERT_EQ(c.sends.size(), 2u);
  EXPECT_EQ(c.sends[0].payload, s.payload);
  EXPECT_EQ(c.sends[0].pid, 0u);
  EXPECT_EQ(c.sends[1].pid, 4321u);
  EXPECT_EQ(c.sends[1].addr, big.addr);
  EXPECT_EQ(c.sends[1].request, 6u);
  ASSERT_EQ(c.cancels.size(), 2u);
  EXPECT_EQ(c.cancels[0].request, 17u);
  EXPECT_EQ(c.cancels[0].dst, 2);
  EXPECT_FALSE(c.cancels[0].is_inline);
  EXPECT_EQ(c.cancels[1].pair_seq, 5u);
  EXPECT_TRUE(c.cancels[1].is_inline);
}

TEST(Wire, ABatchClaimingMoreSendsThanItHoldsIsRefusedBeforeAllocating) {
  std::vector<uint8_t> m(8 + 8 + 4 + 60, 0);
  const uint32_t lie = 0xfffffff0u;  // would be ~400 GB of SendDesc
  std::memcpy(m.data() + 16, &lie, sizeof lie);
  EXPECT_THROW(decode_batch(m), std::runtime_error);
  // A cancel list that ends early is refused too.
  DescBatch b;
  b.cancels.push_back(SendCancel{0, 1, 2});
  auto bytes = encode(b);
  bytes.resize(bytes.size() - 2);
  EXPECT_THROW(decode_batch(bytes), std::runtime_error);
}

// The receiving node writes an inline send's `len` bytes from its payload:
// a payload of another length is refused, never read past its end.
TEST(Wire, AnInlineSendWhosePayloadIsNotItsLengthIsRefused) {
  DescBatch b;
  SendDesc s;
  s.src = 1;
  s.dst = 2;
  s.len = 100;
  s.is_inline = true;
  s.payload = {1, 2, 3, 4, 5, 6, 7, 8};
  b.sends.push_back(s);
  EXPECT_THROW(decode_batch(encode(b)), std::runtime_error);
  b.sends[0].len = 8;
  EXPECT_NO_THROW(decode_batch(encode(b)));
}

TEST(Wire, AReportCarriesItsFirstFailure) {
  Report r;
  r.slice = 4;
  r.fail("batch 1 of 2 never came");
  r.fail("a second failure");
  const Report d = decode_report(encode(r));
  EXPECT_EQ(d.errors, 2u);
  EXPECT_EQ(d.error, "batch 1 of 2 never came");
}

TEST(Wire, AReportSaysWhetherTheNodeIsBlockedOrParked) {
  Report r;
  r.all_blocked = true;
  EXPECT_TRUE(decode_report(encode(r)).all_blocked);
  EXPECT_FALSE(decode_report(encode(r)).parked);
  r.all_blocked = false;
  r.parked = true;
  EXPECT_FALSE(decode_report(encode(r)).all_blocked);
  EXPECT_TRUE(decode_report(encode(r)).parked);
}

TEST(Wire, AFusedReportKeepsItsMicrophasesInOrder) {
  FusedReport f;
  f.parts.emplace_back().drained = 3;
  f.parts.back().phase = Phase::dem;
  f.parts.emplace_back().chunks = 2;
  f.parts.back().phase = Phase::msm;
  f.parts.emplace_back().bytes = 8;
  f.parts.back().phase = Phase::p2p;
  f.parts.back().all_blocked = true;
  f.ns = {10, 20, 30};
  f.at = {0, 11, 32};
  const FusedReport d = decode_fused(encode(f));
  ASSERT_EQ(d.parts.size(), 3u);
  EXPECT_EQ(d.parts[0].drained, 3u);
  EXPECT_EQ(d.parts[1].phase, Phase::msm);
  EXPECT_EQ(d.parts[1].chunks, 2u);
  EXPECT_EQ(d.parts[2].bytes, 8u);
  EXPECT_TRUE(d.parts[2].all_blocked);
  EXPECT_EQ(d.ns, (std::vector<uint64_t>{10, 20, 30}));
  EXPECT_EQ(d.at, (std::vector<uint64_t>{0, 11, 32}));
  // No microphase, or more than five for each slice a lease may hold:
  // refused before anything is decoded.
  EXPECT_THROW(decode_fused(encode(FusedReport{})), std::runtime_error);
  FusedReport most;
  most.parts.resize(5 * (kMaxLeaseSlices + 1));
  EXPECT_EQ(decode_fused(encode(most)).parts.size(), most.parts.size());
  most.parts.emplace_back();
  EXPECT_THROW(decode_fused(encode(most)), std::runtime_error);
}

TEST(Wire, FullReceiversAndHeldSendsRoundTripAndALyingCountIsRefused) {
  Report r;
  r.phase = Phase::msm;
  r.full = {3, 9};
  r.held = 12;
  r.moving = 5;
  r.delivered = 7;
  const Report d = decode_report(encode(r));
  EXPECT_EQ(d.full, (std::vector<int32_t>{3, 9}));
  EXPECT_EQ(d.held, 12u);
  EXPECT_EQ(d.moving, 5u);
  EXPECT_EQ(d.delivered, 7u);
  Strobe s;
  s.held = {1, 2, 70000};
  s.job_blocked = true;
  EXPECT_EQ(decode_strobe(encode(s)).held, s.held);
  EXPECT_TRUE(decode_strobe(encode(s)).job_blocked);
  // A rank list that claims more entries than the message holds: refused
  // before anything is allocated for it. The list comes just before the
  // strobe's last fields (job_blocked, hold_ns, next_dem, var): its count
  // is the 4 bytes before the entries.
  auto bytes = encode(s);
  const size_t at = bytes.size() - 2 - sizeof(uint64_t) - sizeof(uint16_t) -
                    3 * sizeof(int32_t) - sizeof(uint32_t);
  const uint32_t lie = 1u << 30;
  std::memcpy(bytes.data() + at, &lie, sizeof lie);
  EXPECT_THROW(decode_strobe(bytes), std::runtime_error);
}

TEST(Wire, AStrobeCarriesItsLeaseAndALeaseTooLongIsRefused) {
  Strobe s;
  s.slice = 9;
  s.fused = true;
  s.lease_ns = 500'000;
  s.lease_slices = kMaxLeaseSlices;
  const Strobe d = decode_strobe(encode(s));
  EXPECT_EQ(d.lease_ns, 500'000u);
  EXPECT_EQ(d.lease_slices, kMaxLeaseSlices);
  s.lease_slices = kMaxLeaseSlices + 1;
  EXPECT_THROW(decode_strobe(encode(s)), std::runtime_error);
}

TEST(Wire, AStrobeMayLetANodeHoldItsReportAndRunTheNextDemButNotTooLong) {
  Strobe s;
  s.phase = Phase::rm;
  s.hold_ns = 400'000;
  EXPECT_EQ(decode_strobe(encode(s)).hold_ns, 400'000u);
  s.hold_ns = kMaxHoldNs;
  EXPECT_EQ(decode_strobe(encode(s)).hold_ns, kMaxHoldNs);
  s.hold_ns = kMaxHoldNs + 1;
  EXPECT_THROW(decode_strobe(encode(s)), std::runtime_error);
  // The next slice's DEM rides on a later microstrobe, never on a DEM or a
  // fused strobe.
  s.hold_ns = 1000;
  s.next_dem = true;
  EXPECT_TRUE(decode_strobe(encode(s)).next_dem);
  s.phase = Phase::dem;
  EXPECT_THROW(decode_strobe(encode(s)), std::runtime_error);
  s.phase = Phase::p2p;
  s.fused = true;
  EXPECT_THROW(decode_strobe(encode(s)), std::runtime_error);
  Report r;
  r.waited_ns = 123'456;
  r.all_blocked = true;
  const Report d = decode_report(encode(r));
  EXPECT_EQ(d.waited_ns, 123'456u);
  EXPECT_TRUE(d.all_blocked);
}

// Each row of the gang matrix has its own phase variable, and the strobe
// names it: a node that no longer holds the job still reports where the
// job's manager waits. A variable no row has is refused.
TEST(Wire, AStrobeNamesItsRowsPhaseVariableAndOnlyARowsOne) {
  Strobe s;
  EXPECT_EQ(decode_strobe(encode(s)).var, kVarPhase);
  s.var = static_cast<uint16_t>(kVarPhase + kMaxRows - 1);
  EXPECT_EQ(decode_strobe(encode(s)).var, kVarPhase + kMaxRows - 1);
  s.var = static_cast<uint16_t>(kVarPhase + kMaxRows);
  EXPECT_THROW(decode_strobe(encode(s)), std::runtime_error);
  s.var = 0;
  EXPECT_THROW(decode_strobe(encode(s)), std::runtime_error);
}

TEST(Wire, ABellRoundTripsAndAnUnknownKindIsRefused) {
  Bell b{7, static_cast<uint64_t>(phase_value(12, Phase::p2p)), BellKind::work};
  const Bell d = decode_bell(encode(b));
  EXPECT_EQ(d.job, 7u);
  EXPECT_EQ(d.epoch, b.epoch);
  EXPECT_EQ(d.kind, BellKind::work);
  auto bytes = encode(b);
  bytes.back() = 9;
  EXPECT_THROW(decode_bell(bytes), std::runtime_error);
  bytes.pop_back();
  EXPECT_THROW(decode_bell(bytes), std::runtime_error);
}

TEST(Wire, ARemoteReadRoundTripsAndAnUnknownDirectFlagIsRefused) {
  DmaGet g;
  g.job = 3;
  g.token = 11;
  g.len = 1 << 21;
  g.last = 1;
  g.direct = 1;
  g.direct_error = 5;
  const DmaGet d = decode_get(encode(g));
  EXPECT_EQ(d.token, 11u);
  EXPECT_EQ(d.direct, 1);
  EXPECT_EQ(d.direct_error, 5);
  g.direct = 2;
  EXPECT_THROW(decode_get(encode(g)), std::runtime_error);
  auto bytes = encode(DmaGet{});
  bytes.pop_back();
  EXPECT_THROW(decode_get(bytes), std::runtime_error);
}

}  // namespace
}  // namespace bcs::wire
