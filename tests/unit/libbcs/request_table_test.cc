// The rank's request table (bcs.h, api.cc): a sparse table of 2^21 slots a
// rank whose memory is taken only where slots are handed out, freed slots
// reused first, BCS_MAX_REQUESTS lowering the limit, and what a full table
// says. Split from api_test.cc along that seam; same fixture (api_fixture.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <tuple>
#include <vector>
#include <gtest/gtest.h>
#include "bcs/bcs.h"
#include "bcs/segment.h"
#include "bcs/shelf.h"
#include "api_fixture.h"
#include "fake_nm.h"

namespace bcs::apitest {
namespace {

TEST_F(ApiTest, RequestTableExhaustion) {
  attach(1, 64, /*request_slots=*/8);
  std::array<int, 8> in{};
  std::array<bcs_request_t, 8> reqs{};
  for (int i = 0; i < 8; ++i)
    ASSERT_EQ(bcs_recv(&in[i], sizeof(int), 0, i, kContextWorld, BCS_NONBLOCKING, &reqs[i],
                       nullptr),
              BCS_OK);
  bcs_request_t extra;
  const int v = 1;
  EXPECT_EQ(bcs_recv(&in[0], sizeof(int), 0, 0, kContextWorld, BCS_NONBLOCKING, &extra, nullptr),
            BCS_ERR_NO_RESOURCES);
  EXPECT_EQ(bcs_send(&v, sizeof v, 0, 0, kContextWorld, BCS_NONBLOCKING, &extra),
            BCS_ERR_NO_RESOURCES);
  const uint64_t head = posted();
  EXPECT_EQ(head, 8u);  // failed calls posted nothing

  nm_->step();
  request_complete(view_, static_cast<uint32_t>(reqs[3]), bcs_err_none, 0, 3, 0);
  ASSERT_EQ(bcs_test(&reqs[3], BCS_BLOCKING, nullptr, nullptr), BCS_OK);
  EXPECT_EQ(bcs_send(&v, sizeof v, 0, 0, kContextWorld, BCS_NONBLOCKING, &extra), BCS_OK);
  EXPECT_EQ(bcs_test(&extra, BCS_BLOCKING, nullptr, nullptr), BCS_OK);
}

// Of the pages wholly inside [p, p + len), how many are not resident
// (mincore, through the fake node manager's own mapping of the segment),
// and how many there are (*pages).
size_t absent_pages(const void* p, size_t len, size_t* pages) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto from = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const auto to = (reinterpret_cast<uintptr_t>(p) + len) & ~(page - 1);
  *pages = to > from ? (to - from) / page : 0;
  std::vector<unsigned char> in(*pages);
  if (*pages && mincore(reinterpret_cast<void*>(from), to - from, in.data()) != 0) return SIZE_MAX;
  return static_cast<size_t>(std::count_if(in.begin(), in.end(), [](unsigned char c) { return !(c & 1); }));
}

// Issue 42: a rank may hold many more requests than the 4096 the table used
// to have, and only the slots it hands out are memory. 6000 receives that
// nothing matches all get slots, each its own; the slots past the 1024
// populated after them were never touched.
TEST_F(ApiTest, ALargeTableBacksOnlyTheSlotsHandedOut) {
  constexpr uint32_t kSlots = 1u << 16, kPosted = 6000;
  attach(1, 64, kSlots);
  EXPECT_EQ(bcs_request_limit(), kSlots);
  std::vector<int> in(kPosted);
  std::vector<bcs_request_t> reqs(kPosted);
  for (uint32_t i = 0; i < kPosted; ++i) {
    ASSERT_EQ(bcs_recv(&in[i], sizeof(int), 0, 1, kContextWorld, BCS_NONBLOCKING, &reqs[i],
                       nullptr),
              BCS_OK)
        << i;
    if (i % 32 == 31) nm_->step();  // drains the ring (64 slots); nothing matches
  }
  std::vector<bcs_request_t> sorted = reqs;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a slot given twice";
  EXPECT_EQ(sorted.front(), 0);
  EXPECT_EQ(sorted.back(), static_cast<bcs_request_t>(kPosted - 1));
  size_t pages = 0;
  EXPECT_EQ(absent_pages(view_.requests, size_t{kPosted} * sizeof(RequestSlot), &pages), 0u);
  EXPECT_GT(pages, 90u);
  constexpr uint32_t kTouched = 6144;  // 6000, rounded up to the populating step (1024)
  EXPECT_EQ(absent_pages(view_.requests + kTouched, size_t{kSlots - kTouched} * sizeof(RequestSlot),
                         &pages),
            pages);
  EXPECT_GT(pages, 900u);
  // Every one of them still completes through its own slot.
  const int v = 77;
  for (uint32_t i = 0; i < kPosted; ++i) {
    bcs_request_t s;
    ASSERT_EQ(bcs_send(&v, sizeof v, 0, 1, kContextWorld, BCS_NONBLOCKING, &s), BCS_OK);
    ASSERT_EQ(bcs_test(&s, BCS_BLOCKING, nullptr, nullptr), BCS_OK);
    if (i % 32 == 31) nm_->step();
  }
  nm_->step();
  for (uint32_t i = 0; i < kPosted; ++i) {
    ASSERT_EQ(bcs_test(&reqs[i], BCS_BLOCKING, nullptr, nullptr), BCS_OK) << i;
    EXPECT_EQ(in[i], 77) << i;
  }
}

// A program that keeps few requests keeps reusing the same slots (LIFO),
// however many it posts in all: it never reaches the cold part of the table.
TEST_F(ApiTest, FreedSlotsAreReusedBeforeNewOnesAreTaken) {
  attach(1, 64, 1u << 16);
  const int v = 5;
  int in = 0;
  for (int i = 0; i < 10000; ++i) {
    bcs_request_t r, s;
    ASSERT_EQ(bcs_recv(&in, sizeof in, 0, 2, kContextWorld, BCS_NONBLOCKING, &r, nullptr), BCS_OK);
    ASSERT_EQ(bcs_send(&v, sizeof v, 0, 2, kContextWorld, BCS_NONBLOCKING, &s), BCS_OK);
    EXPECT_LT(r, 2) << i;
    EXPECT_LT(s, 2) << i;
    ASSERT_EQ(bcs_test(&s, BCS_BLOCKING, nullptr, nullptr), BCS_OK);
    nm_->step();
    ASSERT_EQ(bcs_test(&r, BCS_BLOCKING, nullptr, nullptr), BCS_OK);
  }
  size_t pages = 0;
  EXPECT_EQ(absent_pages(view_.requests + kHotRequestSlots,
                         size_t{(1u << 16) - kHotRequestSlots} * sizeof(RequestSlot), &pages),
            pages);
  EXPECT_GT(pages, 900u);
}

// BCS_MAX_REQUESTS lowers a rank's limit (never raises it): past it a post
// fails at once, posting nothing, and works again once a request is freed.
TEST_F(ApiTest, BcsMaxRequestsLowersTheLimit) {
  setenv("BCS_MAX_REQUESTS", "10", 1);
  attach(1, 64, 1u << 16);
  EXPECT_EQ(bcs_request_limit(), 10u);
  std::array<int, 10> in{};
  std::array<bcs_request_t, 10> reqs{};
  for (int i = 0; i < 10; ++i)
    ASSERT_EQ(bcs_recv(&in[i], sizeof(int), 0, 3, kContextWorld, BCS_NONBLOCKING, &reqs[i], nullptr),
              BCS_OK);
  bcs_request_t extra;
  EXPECT_EQ(bcs_recv(&in[0], sizeof(int), 0, 3, kContextWorld, BCS_NONBLOCKING, &extra, nullptr),
            BCS_ERR_NO_RESOURCES);
  EXPECT_EQ(posted(), 10u);
  request_complete(view_, static_cast<uint32_t>(reqs[0]), bcs_err_none, 0, 3, 0);
  ASSERT_EQ(bcs_test(&reqs[0], BCS_BLOCKING, nullptr, nullptr), BCS_OK);
  EXPECT_EQ(bcs_recv(&in[0], sizeof(int), 0, 3, kContextWorld, BCS_NONBLOCKING, &extra, nullptr),
            BCS_OK);
  bcs_finalize();
  clear_env();
  // Above the table's size it changes nothing.
  setenv("BCS_MAX_REQUESTS", "100000", 1);
  attach(1, 64, 64);
  EXPECT_EQ(bcs_request_limit(), 64u);
}

}  // namespace
}  // namespace bcs::apitest
