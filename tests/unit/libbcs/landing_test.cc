// Small receives that land in the segment (RequestSlot::landed): the rank
// copies them into its buffer when it finds the request done, including a
// receive the program freed while it was pending.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "api_fixture.h"

namespace bcs::apitest {
namespace {

// A small receive the node manager landed in its request slot
// (RequestSlot::landed) reaches the buffer when the program finds it done,
// never more than the buffer holds.
TEST_F(ApiTest, LandedBytesReachTheBufferWhenTheReceiveIsFoundDone) {
  attach(2);
  const auto data = pattern(kLandingMax, 3);
  std::vector<uint8_t> into(64 + 8, 0xee);  // 64 for the receive, 8 to stay
  bcs_request_t req = BCS_REQUEST_NULL;
  ASSERT_EQ(bcs_recv(into.data(), 64, 1, 5, kContextWorld, BCS_NONBLOCKING, &req, nullptr), BCS_OK);
  nm_->step();
  const uint32_t idx = nm_->seen().back().request;
  // More than the receive holds: a node manager would never, the rank
  // still copies only its 64 bytes.
  ASSERT_TRUE(request_land(view_, idx, data.data(), data.size()));
  request_complete(view_, idx, bcs_err_none, 1, 5, 64);
  EXPECT_EQ(into[0], 0xee) << "copied before the program looked";
  int flag = 0;
  bcs_msg_status_t st{};
  ASSERT_EQ(bcs_test(&req, BCS_NONBLOCKING, &flag, &st), BCS_OK);
  ASSERT_EQ(flag, 1);
  EXPECT_EQ(st.bytes, 64u);
  EXPECT_EQ(0, std::memcmp(into.data(), data.data(), 64));
  for (size_t i = 64; i < into.size(); ++i) EXPECT_EQ(into[i], 0xee) << i;
  // The slot is reused clean: a receive completed without landing keeps
  // its buffer as the node manager wrote it.
  std::vector<uint8_t> again(8, 0x11);
  ASSERT_EQ(bcs_recv(again.data(), again.size(), 1, 6, kContextWorld, BCS_NONBLOCKING, &req, nullptr),
            BCS_OK);
  nm_->step();
  EXPECT_EQ(nm_->seen().back().request, idx) << "slots are reused LIFO";
  request_complete(view_, nm_->seen().back().request, bcs_err_none, 1, 6, 8);
  ASSERT_EQ(bcs_test(&req, BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
  ASSERT_EQ(flag, 1);
  EXPECT_EQ(again, std::vector<uint8_t>(8, 0x11));
}

// MPI_Request_free of a pending receive: its data still reaches the buffer,
// by the time the program finds a later completion, and its slot is freed.
TEST_F(ApiTest, AFreedReceiveGetsItsLandedBytesByTheNextCompletionFound) {
  attach(2, 64, 4);
  char first[8] = {}, second[8] = {};
  const char a[8] = "landed", b[8] = "second";
  bcs_request_t r1 = BCS_REQUEST_NULL, r2 = BCS_REQUEST_NULL;
  ASSERT_EQ(bcs_recv(first, sizeof first, 1, 0, kContextWorld, BCS_NONBLOCKING, &r1, nullptr), BCS_OK);
  ASSERT_EQ(bcs_request_free(&r1), BCS_OK);
  EXPECT_EQ(r1, BCS_REQUEST_NULL);
  ASSERT_EQ(bcs_recv(second, sizeof second, 1, 0, kContextWorld, BCS_NONBLOCKING, &r2, nullptr), BCS_OK);
  nm_->step();
  ASSERT_EQ(nm_->seen().size(), 2u);
  const uint32_t i1 = nm_->seen()[0].request, i2 = nm_->seen()[1].request;
  ASSERT_TRUE(request_land(view_, i1, a, sizeof a));
  request_complete(view_, i1, bcs_err_none, 1, 0, sizeof a);
  ASSERT_TRUE(request_land(view_, i2, b, sizeof b));
  request_complete(view_, i2, bcs_err_none, 1, 0, sizeof b);
  int flag = 0;
  ASSERT_EQ(bcs_test(&r2, BCS_NONBLOCKING, &flag, nullptr), BCS_OK);
  ASSERT_EQ(flag, 1);
  EXPECT_STREQ(second, "second");
  EXPECT_STREQ(first, "landed");
  EXPECT_EQ(view_.requests[i1].state.load(), static_cast<uint32_t>(ReqState::free));
  // All 4 slots are free again: 4 receives post without running out.
  bcs_request_t r[4];
  for (auto& q : r)
    ASSERT_EQ(bcs_recv(first, sizeof first, 1, 0, kContextWorld, BCS_NONBLOCKING, &q, nullptr), BCS_OK);
}

}  // namespace
}  // namespace bcs::apitest
