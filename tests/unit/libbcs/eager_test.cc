// libbcs: eager sends (segment.h, kInlineSpanMax) from the rank's side,
// against the fake node manager: a contiguous send of up to 4 KiB is
// complete at its post, its bytes in the ring slots after its descriptor,
// and goes as an ordinary send when the ring has no room for its span.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "api_fixture.h"
#include "bcs/bcs.h"
#include "bcs/segment.h"
#include "fake_nm.h"

namespace bcs::apitest {
namespace {

// A send of up to kInlineSpanMax contiguous bytes is eager: complete once
// posted, its bytes in the ring right after its descriptor, one descriptor.
TEST_F(ApiTest, AnEagerSendCompletesAtItsPostWithItsBytesInTheRing) {
  attach(1);
  for (const size_t len : {kInlineMax + 1, size_t{1000}, kInlineSpanMax}) {
    SCOPED_TRACE(len);
    auto buf = pattern(len, 9);
    bcs_request_t req = BCS_REQUEST_NULL;
    ASSERT_EQ(bcs_send(buf.data(), buf.size(), 0, 3, kContextWorld, BCS_NONBLOCKING, &req),
              BCS_OK);
    int flag = 0;
    ASSERT_EQ(bcs_test(&req, BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
    EXPECT_EQ(flag, 1);
    const auto sent = buf;
    std::fill(buf.begin(), buf.end(), 0);  // reusable: the bytes went with the post
    const uint64_t head = view_.ctl->head.load(), tail = view_.ctl->tail.load();
    EXPECT_EQ(head - tail, ring_span_slots(static_cast<uint32_t>(len)));
    std::vector<uint8_t> in(len);
    bcs_request_t rreq = BCS_REQUEST_NULL;
    ASSERT_EQ(bcs_recv(in.data(), in.size(), 0, 3, kContextWorld, BCS_NONBLOCKING, &rreq, nullptr),
              BCS_OK);
    nm_->step();
    ASSERT_EQ(bcs_test(&rreq, BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
    EXPECT_EQ(flag, 1);
    EXPECT_EQ(in, sent);
  }
  const auto seen = nm_->seen();
  ASSERT_EQ(seen.size(), 6u);  // three sends, three receives
  EXPECT_TRUE(seen[0].flags & kDescInline);
  EXPECT_EQ(seen[0].inline_len, kInlineMax + 1);
}

// An eager send never waits for room: when its slots are not all free it
// goes as an ordinary send, which waits for the node manager.
TEST_F(ApiTest, AnEagerSendWithoutRoomInTheRingGoesAsATransfer) {
  attach(2, 8);
  int v = 1;
  bcs_request_t small = BCS_REQUEST_NULL;
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(bcs_send(&v, sizeof v, 1, 0, kContextWorld, BCS_NONBLOCKING, &small), BCS_OK);
  auto buf = pattern(kInlineSpanMax, 4);  // 17 slots, 3 free
  bcs_request_t req = BCS_REQUEST_NULL;
  ASSERT_EQ(bcs_send(buf.data(), buf.size(), 1, 0, kContextWorld, BCS_NONBLOCKING, &req), BCS_OK);
  int flag = 1;
  ASSERT_EQ(bcs_test(&req, BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
  EXPECT_EQ(flag, 0);
  nm_->step();
  const auto seen = nm_->seen();
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_FALSE(seen[5].flags & kDescInline);
  EXPECT_EQ(seen[5].addr, reinterpret_cast<uintptr_t>(buf.data()));
  EXPECT_EQ(seen[5].seq, seen[4].seq + 1);  // numbered once
  request_complete(view_, seen[5].request, bcs_err_none, 0, 0, buf.size());
  ASSERT_EQ(bcs_test(&req, BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
  EXPECT_EQ(flag, 1);
}

}  // namespace
}  // namespace bcs::apitest
