// MSM matching (matcher.h): MPI matching semantics made deterministic.
#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "bcs/matcher.h"

namespace bcs {
namespace {

SendDesc send(int32_t src, int32_t dst, int32_t tag, uint64_t pair_seq, uint64_t slice,
              uint64_t len = 8, int32_t context = 0) {
  SendDesc s;
  s.src = src;
  s.dst = dst;
  s.tag = tag;
  s.pair_seq = pair_seq;
  s.slice = slice;
  s.len = len;
  s.context = context;
  s.addr = 0x10000 * static_cast<uint64_t>(src + 1) + pair_seq;
  s.request = static_cast<uint32_t>(pair_seq);
  return s;
}

RecvDesc recv(int32_t rank, int32_t src, int32_t tag, uint32_t request, uint64_t slice,
              uint64_t cap = 1024, int32_t context = 0, DescKind kind = DescKind::recv) {
  RecvDesc r;
  r.rank = rank;
  r.kind = kind;
  r.src = src;
  r.tag = tag;
  r.request = request;
  r.slice = slice;
  r.cap = cap;
  r.context = context;
  r.addr = 0x900000 + request;
  return r;
}

RecvDesc probe(int32_t rank, int32_t src, int32_t tag, uint32_t request, uint64_t slice,
               DescKind kind = DescKind::probe, int32_t context = 0) {
  return recv(rank, src, tag, request, slice, 0, context, kind);
}

// A compact, complete rendering of a match, for exact sequence comparisons.
std::string str(const Match& m) {
  std::ostringstream o;
  o << "s(" << m.send.slice << "," << m.send.src << "->" << m.send.dst << ",#" << m.send.pair_seq
    << ",t" << m.send.tag << ",c" << m.send.context << ",len" << m.send.len << ")"
    << " r(" << m.recv.rank << ",req" << m.recv.request << ",src" << m.recv.src << ",t"
    << m.recv.tag << ",cap" << m.recv.cap << ") bytes" << m.bytes << (m.truncated ? " T" : "");
  return o.str();
}

std::string str(const ProbeResult& p) {
  std::ostringstream o;
  o << "p(" << p.probe.rank << ",req" << p.probe.request << ",k" << int(p.probe.kind) << ") "
    << (p.found ? "found" : "none");
  if (p.found) o << " src" << p.source << " t" << p.tag << " len" << p.len;
  return o.str();
}

template <typename T>
std::vector<std::string> strs(const std::vector<T>& v) {
  std::vector<std::string> out;
  for (const auto& x : v) out.push_back(str(x));
  return out;
}

// ---------------------------------------------------------- desc_matches

TEST(DescMatchesTest, FieldByField) {
  const SendDesc s = send(2, 1, 7, 1, 0, 8, 4);
  EXPECT_TRUE(desc_matches(recv(1, 2, 7, 0, 0, 8, 4), s));
  EXPECT_TRUE(desc_matches(recv(1, kAnySource, 7, 0, 0, 8, 4), s));
  EXPECT_TRUE(desc_matches(recv(1, 2, kAnyTag, 0, 0, 8, 4), s));
  EXPECT_TRUE(desc_matches(recv(1, kAnySource, kAnyTag, 0, 0, 8, 4), s));
  EXPECT_FALSE(desc_matches(recv(1, 3, 7, 0, 0, 8, 4), s));           // other source
  EXPECT_FALSE(desc_matches(recv(1, 2, 8, 0, 0, 8, 4), s));           // other tag
  EXPECT_FALSE(desc_matches(recv(1, 2, 7, 0, 0, 8, 5), s));           // other context
  EXPECT_FALSE(desc_matches(recv(1, kAnySource, kAnyTag, 0, 0, 8, 5), s));  // wildcards never cross contexts
  EXPECT_FALSE(desc_matches(recv(0, 2, 7, 0, 0, 8, 4), s));           // other receiver
  EXPECT_FALSE(desc_matches(recv(0, kAnySource, kAnyTag, 0, 0, 8, 4), s));
  EXPECT_FALSE(desc_matches(recv(1, kProcNull, 7, 0, 0, 8, 4), s));
}

// ---------------------------------------------------------- non-overtaking

TEST(MatcherTest, NonOvertakingUnexpectedSendsTakenInOrder) {
  Matcher m;
  // The network delivers them reversed; canonical order must win.
  m.msm(1, {}, {send(0, 1, 5, 2, 0), send(0, 1, 5, 1, 0)});
  EXPECT_EQ(m.unexpected_count(), 2u);
  EXPECT_TRUE(m.take_matches().empty());
  m.msm(2, {recv(1, 0, 5, 10, 1), recv(1, 0, 5, 11, 1)}, {});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].recv.request, 10u);
  EXPECT_EQ(ms[0].send.pair_seq, 1u);
  EXPECT_EQ(ms[1].recv.request, 11u);
  EXPECT_EQ(ms[1].send.pair_seq, 2u);
  EXPECT_EQ(m.unexpected_count(), 0u);
  EXPECT_EQ(m.posted_count(), 0u);
}

TEST(MatcherTest, NonOvertakingPostedRecvsTakenInOrder) {
  Matcher m;
  m.msm(1, {recv(1, 0, 5, 10, 0), recv(1, 0, 5, 11, 0)}, {});
  EXPECT_EQ(m.posted_count(), 2u);
  m.msm(2, {}, {send(0, 1, 5, 2, 1), send(0, 1, 5, 1, 1)});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].send.pair_seq, 1u);
  EXPECT_EQ(ms[0].recv.request, 10u);
  EXPECT_EQ(ms[1].send.pair_seq, 2u);
  EXPECT_EQ(ms[1].recv.request, 11u);
}

TEST(MatcherTest, NonOvertakingWithAnyTag) {
  Matcher m;
  m.msm(1, {}, {send(0, 1, 6, 2, 0), send(0, 1, 5, 1, 0)});
  // ANY_TAG first: it must take the older message (tag 5), leaving tag 6.
  m.msm(2, {recv(1, 0, kAnyTag, 10, 1), recv(1, 0, 6, 11, 1)}, {});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].recv.request, 10u);
  EXPECT_EQ(ms[0].send.pair_seq, 1u);
  EXPECT_EQ(ms[0].send.tag, 5);
  EXPECT_EQ(ms[1].recv.request, 11u);
  EXPECT_EQ(ms[1].send.pair_seq, 2u);
}

TEST(MatcherTest, NonOvertakingWithAnySourceBothDirections) {
  Matcher m;
  // Posted first: the ANY_SOURCE recv was posted before the specific one, so
  // it takes the first send of the pair.
  m.msm(1, {recv(1, kAnySource, 5, 10, 0), recv(1, 0, 5, 11, 0)}, {});
  m.msm(2, {}, {send(0, 1, 5, 2, 1), send(0, 1, 5, 1, 1)});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].send.pair_seq, 1u);
  EXPECT_EQ(ms[0].recv.request, 10u);
  EXPECT_EQ(ms[1].send.pair_seq, 2u);
  EXPECT_EQ(ms[1].recv.request, 11u);

  // Unexpected first, specific recv posted before the wildcard one.
  m.msm(3, {}, {send(0, 1, 5, 4, 2), send(0, 1, 5, 3, 2)});
  m.msm(4, {recv(1, 0, 5, 12, 3), recv(1, kAnySource, kAnyTag, 13, 3)}, {});
  ms = m.take_matches();
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].recv.request, 12u);
  EXPECT_EQ(ms[0].send.pair_seq, 3u);
  EXPECT_EQ(ms[1].recv.request, 13u);
  EXPECT_EQ(ms[1].send.pair_seq, 4u);
}

// ---------------------------------------------------------- wildcards

TEST(MatcherTest, AnySourcePicksLowestSliceThenSourceThenSeq) {
  Matcher m;
  m.msm(1, {}, {send(3, 0, 1, 1, 0), send(2, 0, 1, 1, 0), send(2, 0, 1, 2, 0)});
  m.msm(2, {}, {send(1, 0, 1, 1, 1)});  // a lower source, but a later slice
  std::vector<RecvDesc> rs;
  for (uint32_t i = 0; i < 4; ++i) rs.push_back(recv(0, kAnySource, 1, 100 + i, 2));
  m.msm(3, rs, {});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 4u);
  const std::vector<std::tuple<uint64_t, int32_t, uint64_t>> want = {
      {0, 2, 1}, {0, 2, 2}, {0, 3, 1}, {1, 1, 1}};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(ms[i].recv.request, 100 + i);
    EXPECT_EQ(std::make_tuple(ms[i].send.slice, ms[i].send.src, ms[i].send.pair_seq), want[i])
        << str(ms[i]);
  }
}

TEST(MatcherTest, AnySourceAgainstSameSliceSendsUsesCanonicalOrder) {
  Matcher m;
  m.msm(1, {recv(0, kAnySource, kAnyTag, 1, 0)}, {});
  // Delivered in "network" order 3, 1, 2: source 1 must win.
  m.msm(2, {}, {send(3, 0, 9, 1, 1), send(1, 0, 9, 1, 1), send(2, 0, 9, 1, 1)});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].send.src, 1);
  EXPECT_EQ(m.unexpected_count(), 2u);
}

TEST(MatcherTest, AnyTagTakesOldestOfThatSource) {
  Matcher m;
  m.msm(1, {}, {send(1, 0, 30, 1, 0), send(2, 0, 10, 1, 0), send(1, 0, 20, 2, 0)});
  m.msm(2, {recv(0, 1, kAnyTag, 1, 1), recv(0, 1, kAnyTag, 2, 1)}, {});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].send.tag, 30);
  EXPECT_EQ(ms[1].send.tag, 20);
  EXPECT_EQ(m.unexpected_count(), 1u);  // source 2's message stays
}

TEST(MatcherTest, SpecificTagSkipsOlderNonMatchingMessages) {
  Matcher m;
  m.msm(1, {}, {send(1, 0, 1, 1, 0), send(1, 0, 2, 2, 0), send(1, 0, 1, 3, 0)});
  m.msm(2, {recv(0, 1, 2, 7, 1)}, {});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].send.pair_seq, 2u);
  // The two tag-1 messages keep their order.
  m.msm(3, {recv(0, 1, 1, 8, 2), recv(0, 1, 1, 9, 2)}, {});
  ms = m.take_matches();
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].send.pair_seq, 1u);
  EXPECT_EQ(ms[1].send.pair_seq, 3u);
}

TEST(MatcherTest, ConsumingFromTheMiddleKeepsTheRestInOrder) {
  Matcher m;
  // Unexpected for rank 0: src 1 #1..#4 (tags 0,1,0,1) and src 2 #1.
  m.msm(1, {}, {send(1, 0, 0, 1, 0), send(1, 0, 1, 2, 0), send(1, 0, 0, 3, 0),
                send(1, 0, 1, 4, 0), send(2, 0, 0, 1, 0)});
  // Step 1 takes #2 and #4 (middle entries); step 2 then adds src 0's send
  // of slice 1 and src 3's of slice 0 (an old slice handed in late, which
  // must still be ordered by its slice).
  m.msm(2, {recv(0, 1, 1, 1, 1), recv(0, 1, 1, 2, 1)}, {send(0, 0, 0, 1, 1), send(3, 0, 0, 1, 0)});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].send.pair_seq, 2u);
  EXPECT_EQ(ms[1].send.pair_seq, 4u);
  EXPECT_EQ(m.unexpected_count(), 5u);
  std::vector<RecvDesc> any;
  for (uint32_t i = 0; i < 5; ++i) any.push_back(recv(0, kAnySource, kAnyTag, 10 + i, 2));
  m.msm(3, any, {});
  ms = m.take_matches();
  ASSERT_EQ(ms.size(), 5u);
  const std::vector<std::tuple<uint64_t, int32_t, uint64_t>> want = {
      {0, 1, 1}, {0, 1, 3}, {0, 2, 1}, {0, 3, 1}, {1, 0, 1}};
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(std::make_tuple(ms[i].send.slice, ms[i].send.src, ms[i].send.pair_seq), want[i])
        << str(ms[i]);
  EXPECT_EQ(m.unexpected_count(), 0u);
}

TEST(MatcherTest, PostedRecvsConsumedFromTheMiddleKeepTheRestInOrder) {
  Matcher m;
  m.msm(1, {recv(0, 1, 0, 1, 0), recv(0, 2, 0, 2, 0), recv(0, 1, 0, 3, 0), recv(0, 2, 0, 4, 0),
            recv(0, kAnySource, 0, 5, 0)},
        {});
  m.msm(2, {}, {send(2, 0, 0, 1, 1)});  // takes request 2 (middle)
  m.msm(3, {}, {send(2, 0, 0, 2, 2), send(1, 0, 0, 1, 2), send(1, 0, 0, 2, 2), send(1, 0, 0, 3, 2)});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 5u);
  // Slice 1: src 2 #1 -> req 2. Slice 2 canonical: src 1 #1 -> 1, #2 -> 3,
  // #3 -> 5 (the wildcard, posted after 4 but 4 wants src 2), src 2 #2 -> 4.
  const std::vector<std::pair<int32_t, uint32_t>> want = {{2, 2}, {1, 1}, {1, 3}, {1, 5}, {2, 4}};
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(std::make_pair(ms[i].send.src, ms[i].recv.request), want[i]) << str(ms[i]);
  EXPECT_EQ(m.posted_count(), 0u);
}

// ---------------------------------------------------------- separation

TEST(MatcherTest, ContextsNeverMatchEachOther) {
  Matcher m;
  m.msm(1, {recv(1, kAnySource, kAnyTag, 1, 0, 64, /*context=*/1)},
        {send(0, 1, 5, 1, 0, 8, /*context=*/0)});
  EXPECT_TRUE(m.take_matches().empty());
  EXPECT_EQ(m.unexpected_count(), 1u);
  EXPECT_EQ(m.posted_count(), 1u);
  m.msm(2, {recv(1, 0, 5, 2, 1, 64, 0)}, {send(0, 1, 5, 2, 1, 8, 1)});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 2u);
  // Step 1: the new context-0 recv takes the context-0 send of slice 0.
  EXPECT_EQ(ms[0].recv.request, 2u);
  EXPECT_EQ(ms[0].send.context, 0);
  // Step 2: the new context-1 send finds the old context-1 recv.
  EXPECT_EQ(ms[1].recv.request, 1u);
  EXPECT_EQ(ms[1].send.context, 1);
  EXPECT_EQ(m.unexpected_count(), 0u);
  EXPECT_EQ(m.posted_count(), 0u);
}

TEST(MatcherTest, ReceiversAreSeparate) {
  Matcher m;
  m.msm(1, {recv(2, kAnySource, kAnyTag, 1, 0)}, {send(0, 1, 5, 1, 0)});
  EXPECT_TRUE(m.take_matches().empty());
  m.msm(2, {recv(1, kAnySource, kAnyTag, 2, 1)}, {send(0, 2, 5, 1, 1)});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 2u);
  EXPECT_EQ(ms[0].recv.rank, 1);
  EXPECT_EQ(ms[0].send.dst, 1);
  EXPECT_EQ(ms[1].recv.rank, 2);
  EXPECT_EQ(ms[1].send.dst, 2);
}

// ---------------------------------------------------------- slices

TEST(MatcherTest, RecvPostedEarlierMatchedBySendSlicesLater) {
  Matcher m;
  m.msm(1, {recv(1, 0, 3, 42, 0, 4096)}, {});
  for (uint64_t sl = 2; sl < 10; ++sl) {
    m.msm(sl, {}, {});
    EXPECT_TRUE(m.take_matches().empty());
    EXPECT_EQ(m.posted_count(), 1u);
  }
  m.msm(10, {}, {send(0, 1, 3, 1, 9, 100)});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].recv.request, 42u);
  EXPECT_EQ(ms[0].recv.slice, 0u);
  EXPECT_EQ(ms[0].send.slice, 9u);
  EXPECT_EQ(ms[0].bytes, 100u);
  EXPECT_FALSE(ms[0].truncated);
  EXPECT_EQ(m.posted_count(), 0u);
}

// Cancels of receives, in the rank's post order.
RecvDesc cancel_of(int32_t rank, uint32_t request, uint64_t slice) {
  RecvDesc c = recv(rank, kAnySource, kAnyTag, request, slice);
  c.kind = DescKind::cancel;
  return c;
}

TEST(MatcherTest, CancelRemovesAnUnmatchedReceiveExactOrWildcard) {
  Matcher m;
  m.msm(1, {recv(1, 0, 3, 42, 0), recv(1, kAnySource, 3, 43, 0), cancel_of(1, 42, 0)}, {});
  auto c = m.take_cancelled();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].request, 42u);
  EXPECT_EQ(m.posted_count(), 1u);
  // The send goes to the receive that is left, not the cancelled one.
  m.msm(2, {cancel_of(1, 7, 1)}, {send(0, 1, 3, 1, 1)});
  EXPECT_TRUE(m.take_cancelled().empty());  // request 7 is nobody's receive
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].recv.request, 43u);
  m.msm(3, {cancel_of(1, 43, 2)}, {});
  EXPECT_TRUE(m.take_cancelled().empty());  // matched first: not cancelled
}

TEST(MatcherTest, CancelAfterMatchInTheSamePostOrderDoesNothing) {
  Matcher m;
  m.msm(1, {}, {send(0, 1, 3, 1, 0)});
  m.msm(2, {recv(1, 0, 3, 42, 1), cancel_of(1, 42, 1)}, {});
  EXPECT_TRUE(m.take_cancelled().empty());
  EXPECT_EQ(m.take_matches().size(), 1u);
}

TEST(MatcherTest, CancelledSendLeavesMatchingAndBecomesACancelledMatch) {
  Matcher m;
  m.msm(1, {}, {send(0, 1, 3, 1, 0, 1 << 20), send(0, 1, 3, 2, 0, 16)});
  m.cancel_sends({SendCancel{0, 1, 1}, SendCancel{2, 1, 9}});  // the second names nothing
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_TRUE(ms[0].cancelled);
  EXPECT_EQ(ms[0].send.request, 1u);
  EXPECT_EQ(ms[0].bytes, 0u);
  EXPECT_EQ(m.unexpected_count(), 1u);
  // The next receive gets the second send, not the cancelled first.
  m.msm(2, {recv(1, 0, 3, 42, 1)}, {});
  ms = m.take_matches();
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_FALSE(ms[0].cancelled);
  EXPECT_EQ(ms[0].send.pair_seq, 2u);
  // A send already matched is not cancelled.
  m.cancel_sends({SendCancel{0, 1, 2}});
  EXPECT_TRUE(m.take_matches().empty());
}

TEST(MatcherTest, NewRecvsTakeOldUnexpectedBeforeSameSliceSends) {
  Matcher m;
  m.msm(1, {}, {send(0, 1, 3, 1, 0)});
  // Step 1 runs before step 2: the wildcard recv takes the old message; the
  // new one (lower source, same slice as the recv) is left unexpected.
  m.msm(2, {recv(1, kAnySource, kAnyTag, 5, 1)}, {send(2, 1, 3, 1, 1)});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].send.src, 0);
  EXPECT_EQ(ms[0].send.slice, 0u);
  EXPECT_EQ(m.unexpected_count(), 1u);
}

TEST(MatcherTest, SameSliceRecvAndSendMatch) {
  Matcher m;
  m.msm(1, {recv(1, 0, 3, 5, 0)}, {send(0, 1, 3, 1, 0)});
  ASSERT_EQ(m.take_matches().size(), 1u);
  EXPECT_EQ(m.unexpected_count(), 0u);
  EXPECT_EQ(m.posted_count(), 0u);
}

TEST(MatcherTest, TakeEmptiesTheResults) {
  Matcher m;
  m.msm(1, {recv(1, 0, 3, 5, 0), probe(1, 7, 7, 6, 0, DescKind::iprobe)}, {send(0, 1, 3, 1, 0)});
  EXPECT_EQ(m.take_matches().size(), 1u);
  EXPECT_TRUE(m.take_matches().empty());
  EXPECT_EQ(m.take_probe_results().size(), 1u);
  EXPECT_TRUE(m.take_probe_results().empty());
}

// ---------------------------------------------------------- sizes

TEST(MatcherTest, TruncationAndSizes) {
  Matcher m;
  m.msm(1, {recv(1, 0, 1, 1, 0, 40), recv(1, 0, 2, 2, 0, 100), recv(1, 0, 3, 3, 0, 64),
            recv(1, 0, 4, 4, 0, 0), recv(1, 0, 5, 5, 0, 0)},
        {send(0, 1, 1, 1, 0, 100), send(0, 1, 2, 2, 0, 40), send(0, 1, 3, 3, 0, 64),
         send(0, 1, 4, 4, 0, 0), send(0, 1, 5, 5, 0, 1)});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 5u);
  std::map<int32_t, const Match*> by_tag;
  for (const auto& x : ms) by_tag[x.send.tag] = &x;
  EXPECT_EQ(by_tag[1]->bytes, 40u);
  EXPECT_TRUE(by_tag[1]->truncated);
  EXPECT_EQ(by_tag[2]->bytes, 40u);
  EXPECT_FALSE(by_tag[2]->truncated);
  EXPECT_EQ(by_tag[3]->bytes, 64u);
  EXPECT_FALSE(by_tag[3]->truncated);
  EXPECT_EQ(by_tag[4]->bytes, 0u);
  EXPECT_FALSE(by_tag[4]->truncated);
  EXPECT_EQ(by_tag[5]->bytes, 0u);
  EXPECT_TRUE(by_tag[5]->truncated);
}

TEST(MatcherTest, InlinePayloadTravelsWithTheMatch) {
  Matcher m;
  SendDesc s = send(0, 1, 1, 1, 0, 5);
  s.is_inline = true;
  s.payload = {1, 2, 3, 4, 5};
  m.msm(1, {}, {s});
  m.msm(2, {recv(1, 0, 1, 1, 1, 64)}, {});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_TRUE(ms[0].send.is_inline);
  EXPECT_EQ(ms[0].send.payload, (std::vector<uint8_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(ms[0].bytes, 5u);
}

// An inline send is named by its pair sequence number (its request slot was
// reused at post); the cancel brings its own slot, which always gets an
// answer: cancelled if the send was still unexpected, late if not.
TEST(MatcherTest, InlineSendCancelIsAnsweredCancelledOrLate) {
  Matcher m;
  SendDesc a = send(0, 1, 4, 1, 0, 4), b = send(0, 1, 4, 2, 0, 4);
  a.is_inline = b.is_inline = true;
  a.payload = b.payload = {1, 2, 3, 4};
  a.request = b.request = 3;  // the same slot, reused: not what names them
  m.msm(1, {}, {a, b});
  SendCancel c{0, 1, 77, 2, true};
  m.cancel_sends({c});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_TRUE(ms[0].cancelled);
  EXPECT_FALSE(ms[0].cancel_late);
  EXPECT_FALSE(ms[0].send.is_inline);  // the answer carries no data
  EXPECT_EQ(ms[0].send.request, 77u);
  EXPECT_EQ(ms[0].send.len, 0u);
  EXPECT_EQ(m.unexpected_count(), 1u);
  // The receive gets the first send; cancelling it now is too late.
  m.msm(2, {recv(1, 0, 4, 5, 1)}, {});
  ms = m.take_matches();
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].send.pair_seq, 1u);
  m.cancel_sends({SendCancel{0, 1, 78, 1, true}, SendCancel{0, 9, 79, 1, true}});
  ms = m.take_matches();
  ASSERT_EQ(ms.size(), 2u);  // also for a receiver the matcher never saw
  for (const Match& x : ms) {
    EXPECT_TRUE(x.cancelled && x.cancel_late);
    EXPECT_EQ(x.send.len, 0u);
  }
  EXPECT_EQ(ms[0].send.request, 78u);
  EXPECT_EQ(ms[1].send.request, 79u);
  // A non-inline cancel of the same number names a request, not this send.
  SendDesc big = send(0, 1, 4, 3, 2, 4096);
  m.msm(3, {}, {big});
  m.cancel_sends({SendCancel{0, 1, 99, 3, false}});
  EXPECT_TRUE(m.take_matches().empty());
  EXPECT_EQ(m.unexpected_count(), 1u);
}

// ---------------------------------------------------------- probes

TEST(MatcherTest, ProbeFindsWithoutConsuming) {
  Matcher m;
  m.msm(1, {}, {send(2, 1, 9, 1, 0, 300)});
  m.msm(2, {probe(1, kAnySource, kAnyTag, 7, 1)}, {});
  auto ps = m.take_probe_results();
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_TRUE(ps[0].found);
  EXPECT_EQ(ps[0].probe.request, 7u);
  EXPECT_EQ(ps[0].source, 2);
  EXPECT_EQ(ps[0].tag, 9);
  EXPECT_EQ(ps[0].len, 300u);
  EXPECT_TRUE(m.take_matches().empty());
  EXPECT_EQ(m.unexpected_count(), 1u);
  // The probed message is still there for the recv (the usual probe-then-recv).
  m.msm(3, {recv(1, ps[0].source, ps[0].tag, 8, 2, ps[0].len)}, {});
  auto ms = m.take_matches();
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ms[0].send.len, 300u);
  EXPECT_EQ(m.unexpected_count(), 0u);
}

TEST(MatcherTest, ProbeReportsTheMessageARecvWouldGet) {
  Matcher m;
  m.msm(1, {}, {send(3, 1, 9, 1, 0, 30), send(2, 1, 8, 1, 0, 20)});
  m.msm(2, {probe(1, kAnySource, kAnyTag, 7, 1), recv(1, kAnySource, kAnyTag, 8, 1)}, {});
  auto ps = m.take_probe_results();
  auto ms = m.take_matches();
  ASSERT_EQ(ps.size(), 1u);
  ASSERT_EQ(ms.size(), 1u);
  EXPECT_EQ(ps[0].source, 2);
  EXPECT_EQ(ms[0].send.src, 2);
}

TEST(MatcherTest, BlockingProbeAnsweredInALaterSlice) {
  Matcher m;
  m.msm(1, {probe(1, 0, 4, 7, 0)}, {});
  EXPECT_TRUE(m.take_probe_results().empty());  // a blocking probe waits
  m.msm(2, {}, {send(0, 1, 5, 1, 1)});          // wrong tag
  EXPECT_TRUE(m.take_probe_results().empty());
  m.msm(3, {}, {});
  EXPECT_TRUE(m.take_probe_results().empty());
  // Two matching sends in one slice: the first in canonical order answers.
  m.msm(4, {}, {send(0, 1, 4, 3, 3, 33), send(0, 1, 4, 2, 3, 22)});
  auto ps = m.take_probe_results();
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_TRUE(ps[0].found);
  EXPECT_EQ(ps[0].len, 22u);
  EXPECT_EQ(ps[0].probe.request, 7u);
  EXPECT_EQ(m.unexpected_count(), 3u);  // nothing consumed
  // Answered once only.
  m.msm(5, {}, {send(0, 1, 4, 4, 4)});
  EXPECT_TRUE(m.take_probe_results().empty());
}

TEST(MatcherTest, OneSendAnswersSeveralWaitingProbes) {
  Matcher m;
  m.msm(1, {probe(1, kAnySource, 4, 7, 0), probe(2, kAnySource, 4, 8, 0),
            probe(1, 0, kAnyTag, 9, 0)},
        {});
  m.msm(2, {}, {send(0, 1, 4, 1, 1)});
  auto ps = m.take_probe_results();
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_EQ(ps[0].probe.request, 7u);
  EXPECT_EQ(ps[1].probe.request, 9u);
  m.msm(3, {}, {send(0, 2, 4, 1, 2)});
  ps = m.take_probe_results();
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].probe.request, 8u);
}

TEST(MatcherTest, SendTakenByPostedRecvIsNotSeenByProbe) {
  Matcher m;
  m.msm(1, {recv(1, 0, 4, 1, 0), probe(1, 0, 4, 2, 0)}, {});
  m.msm(2, {}, {send(0, 1, 4, 1, 1)});
  EXPECT_EQ(m.take_matches().size(), 1u);
  EXPECT_TRUE(m.take_probe_results().empty());
  m.msm(3, {}, {send(0, 1, 4, 2, 2)});
  auto ps = m.take_probe_results();
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(m.unexpected_count(), 1u);
}

TEST(MatcherTest, IprobeNotFoundThenFound) {
  Matcher m;
  m.msm(1, {probe(1, 0, 4, 7, 0, DescKind::iprobe)}, {});
  auto ps = m.take_probe_results();
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_FALSE(ps[0].found);
  EXPECT_EQ(ps[0].probe.request, 7u);
  // Not left waiting: a later matching send does not answer it again.
  m.msm(2, {}, {send(0, 1, 4, 1, 1, 50)});
  EXPECT_TRUE(m.take_probe_results().empty());
  m.msm(3, {probe(1, 0, 4, 8, 2, DescKind::iprobe)}, {});
  ps = m.take_probe_results();
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_TRUE(ps[0].found);
  EXPECT_EQ(ps[0].probe.request, 8u);
  EXPECT_EQ(ps[0].len, 50u);
  EXPECT_EQ(m.unexpected_count(), 1u);
}

TEST(MatcherTest, IprobeSeesSendsOfTheSameSlice) {
  Matcher m;
  m.msm(1, {probe(1, kAnySource, kAnyTag, 7, 0, DescKind::iprobe)},
        {send(3, 1, 4, 1, 0, 30), send(2, 1, 5, 1, 0, 20)});
  auto ps = m.take_probe_results();
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_TRUE(ps[0].found);
  EXPECT_EQ(ps[0].source, 2);  // canonical order, not delivery order
  EXPECT_EQ(ps[0].tag, 5);
  EXPECT_EQ(m.unexpected_count(), 2u);
}

TEST(MatcherTest, IprobeDoesNotSeeAMessageTakenByARecv) {
  Matcher m;
  m.msm(1, {recv(1, 0, 4, 1, 0)}, {});
  m.msm(2, {probe(1, 0, 4, 7, 1, DescKind::iprobe)}, {send(0, 1, 4, 1, 1)});
  EXPECT_EQ(m.take_matches().size(), 1u);
  auto ps = m.take_probe_results();
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_FALSE(ps[0].found);
}

TEST(MatcherTest, IprobeAndBlockingProbeInOneSlice) {
  Matcher m;
  m.msm(1, {probe(1, 0, 4, 1, 0, DescKind::iprobe), probe(1, 0, 4, 2, 0)}, {});
  auto ps = m.take_probe_results();
  ASSERT_EQ(ps.size(), 1u);  // only the iprobe completes (not found)
  EXPECT_EQ(ps[0].probe.request, 1u);
  EXPECT_FALSE(ps[0].found);
  m.msm(2, {}, {send(0, 1, 4, 1, 1)});
  ps = m.take_probe_results();
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].probe.request, 2u);
  EXPECT_TRUE(ps[0].found);
}

// ---------------------------------------------------------- determinism

struct SliceInput {
  std::vector<RecvDesc> posts;
  std::vector<SendDesc> sends;
};

// A random workload over `nranks` ranks: sends posted in slice i are handed
// to msm(i + 1) (the DEM of the next slice), like the receives and probes.
std::vector<SliceInput> random_workload(uint32_t seed, int nslices, int nranks,
                                        bool with_probes) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  std::map<std::pair<int, int>, uint64_t> pair_seq;
  uint32_t next_req = 1;
  std::vector<SliceInput> out(static_cast<size_t>(nslices));
  for (int sl = 0; sl < nslices; ++sl) {
    SliceInput& in = out[static_cast<size_t>(sl)];
    for (int r = 0; r < nranks; ++r) {
      for (int k = pick(4); k > 0; --k) {
        const int dst = pick(nranks);
        in.sends.push_back(send(r, dst, pick(3), ++pair_seq[{r, dst}], static_cast<uint64_t>(sl),
                                static_cast<uint64_t>(pick(5) * 100), pick(2)));
      }
      for (int k = pick(4); k > 0; --k) {
        const int src = pick(5) == 0 ? kAnySource : pick(nranks);
        const int tag = pick(5) == 0 ? kAnyTag : pick(3);
        DescKind kind = DescKind::recv;
        if (with_probes && pick(6) == 0) kind = pick(2) ? DescKind::probe : DescKind::iprobe;
        in.posts.push_back(recv(r, src, tag, next_req++, static_cast<uint64_t>(sl),
                                static_cast<uint64_t>(pick(5) * 100), pick(2), kind));
      }
    }
  }
  return out;
}

struct Outcome {
  std::vector<std::string> matches;
  std::vector<std::string> probes;
  size_t unexpected = 0, posted = 0;
  bool operator==(const Outcome&) const = default;
};

Outcome run(const std::vector<SliceInput>& w, std::mt19937* shuffle) {
  Matcher m;
  Outcome o;
  for (size_t i = 0; i < w.size(); ++i) {
    std::vector<SendDesc> sends = w[i].sends;
    if (shuffle) std::shuffle(sends.begin(), sends.end(), *shuffle);
    m.msm(i + 1, w[i].posts, std::move(sends));
    for (auto& s : strs(m.take_matches())) o.matches.push_back(std::move(s));
    for (auto& s : strs(m.take_probe_results())) o.probes.push_back(std::move(s));
  }
  o.unexpected = m.unexpected_count();
  o.posted = m.posted_count();
  return o;
}

TEST(MatcherDeterminismTest, SendOrderNeverChangesTheOutcome) {
  for (uint32_t wseed : {1u, 2u, 3u}) {
    const auto w = random_workload(wseed, 60, 4, /*with_probes=*/true);
    const Outcome ref = run(w, nullptr);
    ASSERT_GT(ref.matches.size(), 50u);  // the workload really matches things
    ASSERT_GT(ref.probes.size(), 5u);
    for (uint32_t seed = 100; seed < 130; ++seed) {
      std::mt19937 rng(seed);
      const Outcome o = run(w, &rng);
      ASSERT_EQ(o.matches, ref.matches) << "workload " << wseed << " shuffle seed " << seed;
      ASSERT_EQ(o.probes, ref.probes) << "workload " << wseed << " shuffle seed " << seed;
      ASSERT_EQ(o.unexpected, ref.unexpected);
      ASSERT_EQ(o.posted, ref.posted);
    }
  }
}

TEST(MatcherDeterminismTest, PostsOfDifferentRanksMayInterleaveFreely) {
  // Only each rank's own post order matters: regrouping the posts by rank
  // (a different interleaving of the same per-rank sequences) must not
  // change any match (results are compared as multisets, since the order
  // of the results of different ranks follows the given interleaving).
  const auto w = random_workload(7, 60, 4, /*with_probes=*/false);
  auto regrouped = w;
  for (auto& in : regrouped)
    std::stable_sort(in.posts.begin(), in.posts.end(),
                     [](const RecvDesc& a, const RecvDesc& b) { return a.rank > b.rank; });
  Outcome a = run(w, nullptr), b = run(regrouped, nullptr);
  std::sort(a.matches.begin(), a.matches.end());
  std::sort(b.matches.begin(), b.matches.end());
  EXPECT_EQ(a, b);
}

// ---------------------------------------------------------- differential

// A deliberately naive reference: flat vectors, explicit keys, linear scans
// for the minimum key. It shares no code with Matcher.
class ReferenceMatcher {
 public:
  struct Pair {
    SendDesc s;
    RecvDesc r;
  };
  std::vector<Pair> slice(const std::vector<RecvDesc>& posts, std::vector<SendDesc> sends) {
    std::vector<Pair> out;
    for (const RecvDesc& r : posts) {
      if (r.kind != DescKind::recv) continue;
      int best = -1;
      for (size_t i = 0; i < unexpected_.size(); ++i) {
        const SendDesc& s = unexpected_[i];
        if (!ok(r, s)) continue;
        if (best < 0 || key(s) < key(unexpected_[static_cast<size_t>(best)])) best = static_cast<int>(i);
      }
      if (best >= 0) {
        out.push_back({unexpected_[static_cast<size_t>(best)], r});
        unexpected_.erase(unexpected_.begin() + best);
      } else {
        posted_.push_back({next_post_++, r});
      }
    }
    std::vector<SendDesc> ordered;
    while (!sends.empty()) {  // selection sort by key: slow and obviously right
      size_t mi = 0;
      for (size_t i = 1; i < sends.size(); ++i)
        if (key(sends[i]) < key(sends[mi])) mi = i;
      ordered.push_back(sends[mi]);
      sends.erase(sends.begin() + static_cast<long>(mi));
    }
    for (const SendDesc& s : ordered) {
      int best = -1;
      for (size_t i = 0; i < posted_.size(); ++i) {
        if (!ok(posted_[i].second, s)) continue;
        if (best < 0 || posted_[i].first < posted_[static_cast<size_t>(best)].first) best = static_cast<int>(i);
      }
      if (best >= 0) {
        out.push_back({s, posted_[static_cast<size_t>(best)].second});
        posted_.erase(posted_.begin() + best);
      } else {
        unexpected_.push_back(s);
      }
    }
    return out;
  }
  size_t unexpected() const { return unexpected_.size(); }
  size_t posted() const { return posted_.size(); }

 private:
  static std::tuple<uint64_t, int32_t, uint64_t, int32_t> key(const SendDesc& s) {
    return {s.slice, s.src, s.pair_seq, s.dst};
  }
  static bool ok(const RecvDesc& r, const SendDesc& s) {
    return r.rank == s.dst && r.context == s.context &&
           (r.src == kAnySource || r.src == s.src) && (r.tag == kAnyTag || r.tag == s.tag);
  }
  std::vector<SendDesc> unexpected_;
  std::vector<std::pair<uint64_t, RecvDesc>> posted_;
  uint64_t next_post_ = 0;
};

TEST(MatcherDifferentialTest, AgreesWithNaiveReferenceAndKeepsMpiRules) {
  const int kRanks = 4, kSlices = 1000;
  const auto w = random_workload(2024, kSlices, kRanks, /*with_probes=*/false);
  Matcher m;
  ReferenceMatcher ref;
  std::mt19937 shuffle(99);

  // Every send / recv by identity, with the order its receiver posted it.
  std::set<std::tuple<int32_t, int32_t, uint64_t>> sends_matched;  // (src, dst, pair_seq)
  std::set<uint32_t> recvs_matched;                                 // request ids are unique
  std::map<uint32_t, uint64_t> recv_order;                          // request -> post index
  std::map<uint32_t, RecvDesc> all_recvs;
  std::vector<SendDesc> all_sends;
  std::vector<Match> all_matches;
  uint64_t post_index = 0;

  for (int i = 0; i < kSlices; ++i) {
    const SliceInput& in = w[static_cast<size_t>(i)];
    for (const RecvDesc& r : in.posts) {
      recv_order[r.request] = post_index++;
      all_recvs[r.request] = r;
    }
    for (const SendDesc& s : in.sends) all_sends.push_back(s);
    std::vector<SendDesc> sends = in.sends;
    std::shuffle(sends.begin(), sends.end(), shuffle);
    m.msm(static_cast<uint64_t>(i + 1), in.posts, sends);
    auto got = m.take_matches();
    auto want = ref.slice(in.posts, in.sends);
    ASSERT_EQ(got.size(), want.size()) << "slice " << i;
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_EQ(got[k].send.src, want[k].s.src) << "slice " << i << " match " << k;
      ASSERT_EQ(got[k].send.dst, want[k].s.dst);
      ASSERT_EQ(got[k].send.pair_seq, want[k].s.pair_seq);
      ASSERT_EQ(got[k].recv.request, want[k].r.request);
      ASSERT_EQ(got[k].bytes, std::min(want[k].s.len, want[k].r.cap));
      ASSERT_EQ(got[k].truncated, want[k].s.len > want[k].r.cap);
    }
    ASSERT_EQ(m.unexpected_count(), ref.unexpected());
    ASSERT_EQ(m.posted_count(), ref.posted());
    for (auto& x : got) all_matches.push_back(std::move(x));
  }
  ASSERT_GT(all_matches.size(), 1000u);

  // Properties, independent of the reference.
  for (const Match& x : all_matches) {
    EXPECT_TRUE(desc_matches(x.recv, x.send)) << str(x);
    EXPECT_TRUE(sends_matched.insert({x.send.src, x.send.dst, x.send.pair_seq}).second)
        << "send matched twice: " << str(x);
    EXPECT_TRUE(recvs_matched.insert(x.recv.request).second) << "recv matched twice: " << str(x);
  }
  // Non-overtaking: for two matched sends of one pair, s1 before s2, the
  // receive that got s2 must not be an earlier-posted receive that also
  // accepted s1 (it would have had to take s1).
  std::map<std::pair<int32_t, int32_t>, std::vector<const Match*>> by_pair;
  for (const Match& x : all_matches) by_pair[{x.send.src, x.send.dst}].push_back(&x);
  size_t checked = 0;
  for (auto& [pair, v] : by_pair) {
    std::sort(v.begin(), v.end(),
              [](const Match* a, const Match* b) { return a->send.pair_seq < b->send.pair_seq; });
    for (size_t a = 0; a < v.size(); ++a)
      for (size_t b = a + 1; b < v.size() && b < a + 16; ++b) {
        const Match& m1 = *v[a];
        const Match& m2 = *v[b];
        if (desc_matches(m2.recv, m1.send)) {
          ++checked;
          EXPECT_LT(recv_order[m1.recv.request], recv_order[m2.recv.request])
              << "overtaking: " << str(m1) << " / " << str(m2);
        }
      }
  }
  EXPECT_GT(checked, 100u);
  // Eagerness: nothing left over could have matched something left over.
  std::vector<const SendDesc*> left_sends;
  for (const SendDesc& s : all_sends)
    if (!sends_matched.count({s.src, s.dst, s.pair_seq})) left_sends.push_back(&s);
  EXPECT_EQ(left_sends.size(), m.unexpected_count());
  size_t left_recvs = 0;
  for (const auto& [req, r] : all_recvs) {
    if (recvs_matched.count(req)) continue;
    ++left_recvs;
    for (const SendDesc* s : left_sends)
      EXPECT_FALSE(desc_matches(r, *s)) << "recv " << req << " left unmatched with a match available";
  }
  EXPECT_EQ(left_recvs, m.posted_count());
}

}  // namespace
}  // namespace bcs
