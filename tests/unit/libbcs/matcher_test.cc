// MSM matching (matcher.h): MPI matching semantics by example. The
// determinism and reference-model tests are in matcher_model_test.cc.
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

#include "matcher_helpers.h"

namespace bcs {
namespace {

using namespace matcher_test;

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

// What a hung job's ranks wait for (bcs kill's report): the receives and
// blocking probes no send matched, earliest posted first, exact and
// wildcard receives interleaved as posted, matched ones gone.
TEST(MatcherTest, WaitingListsUnmatchedReceivesAndProbesInPostOrder) {
  Matcher m;
  m.msm(1, {recv(0, 1, 5, 1, 1), recv(0, kAnySource, 7, 2, 1), recv(0, 2, 5, 3, 1)}, {});
  m.msm(2, {recv(0, 1, 9, 4, 2), probe(0, 3, 1, 5, 2)}, {send(2, 0, 5, 1, 2)});  // takes request 3
  size_t total = 0;
  auto w = m.waiting(0, 10, &total);
  EXPECT_EQ(total, 4u);
  std::vector<uint32_t> requests;
  for (const auto& r : w) requests.push_back(r.request);
  EXPECT_EQ(requests, (std::vector<uint32_t>{1, 2, 4, 5}));
  EXPECT_EQ(w[1].src, kAnySource);
  EXPECT_EQ(w[3].kind, DescKind::probe);
  w = m.waiting(0, 2, &total);  // at most `max`, the count still whole
  EXPECT_EQ(w.size(), 2u);
  EXPECT_EQ(total, 4u);
  EXPECT_TRUE(m.waiting(1, 10, &total).empty());  // a rank nothing is known of
  EXPECT_EQ(total, 0u);
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

// Unexpected sends that are not inline would move data once matched; the
// count follows every way a send leaves the unexpected messages.
TEST(MatcherTest, UnexpectedSendsThatAreNotInlineAreCountedUntilTheyLeave) {
  Matcher m;
  SendDesc small = send(0, 1, 3, 3, 0, 8);
  small.is_inline = true;
  small.payload.assign(8, 1);
  m.msm(1, {}, {send(0, 1, 3, 1, 0, 1 << 20), send(0, 1, 3, 2, 0, 4096), small});
  EXPECT_EQ(m.unexpected_count(), 3u);
  EXPECT_EQ(m.unexpected_moving(), 2u);
  m.cancel_sends({SendCancel{0, 1, 1}});
  EXPECT_EQ(m.unexpected_moving(), 1u) << "cancelled";
  m.msm(2, {recv(1, 0, 3, 42, 1)}, {});
  EXPECT_EQ(m.unexpected_moving(), 0u) << "matched";
  EXPECT_EQ(m.unexpected_count(), 1u) << "the inline one waits";
  m.msm(3, {recv(1, 0, 3, 43, 1)}, {});
  EXPECT_EQ(m.unexpected_count(), 0u);
  EXPECT_EQ(m.unexpected_moving(), 0u);
}

// The bytes that unexpected inline and eager sends keep in the node (the
// byte bound beside --max-unexpected) follow every way a send leaves:
// matched, taken from the shelf, cancelled.
TEST(MatcherTest, UnexpectedPayloadBytesAreCountedUntilTheyLeave) {
  Matcher m;
  auto carrying = [](uint64_t pair_seq, size_t len) {
    SendDesc s = send(0, 1, 3, pair_seq, 0, len);
    s.is_inline = true;
    s.payload.assign(len, 1);
    return s;
  };
  m.msm(1, {},
        {carrying(1, 8), carrying(2, 4096), send(0, 1, 3, 3, 0, 1 << 20), carrying(4, 100),
         carrying(5, 4000)});
  EXPECT_EQ(m.unexpected_bytes(1), 8u + 4096 + 100 + 4000);
  EXPECT_EQ(m.unexpected_bytes(0), 0u);
  m.msm(2, {recv(1, 0, 3, 42, 1, 8)}, {});
  EXPECT_EQ(m.unexpected_bytes(1), 4096u + 100 + 4000) << "matched";
  m.msm(3, {recv(1, 0, 3, 43, 1, 4096)}, {});
  EXPECT_EQ(m.unexpected_bytes(1), 100u + 4000) << "matched";
  SendCancel c;
  c.src = 0;
  c.dst = 1;
  c.pair_seq = 5;
  c.is_inline = true;
  m.cancel_sends({c});
  EXPECT_EQ(m.unexpected_bytes(1), 100u) << "cancelled";
  m.take_matches();
  // The 1 MiB send (no payload here) is first; the 100 bytes are taken
  // from the shelf past it.
  EXPECT_TRUE(m.take_shelved(1, 0, 0, 3, 4));
  EXPECT_EQ(m.unexpected_bytes(1), 0u) << "taken from the shelf";
  EXPECT_EQ(m.unexpected_count(1), 1u);
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

}  // namespace
}  // namespace bcs
