// Non-contiguous buffers as the node managers see them (bcs/layout.h):
// validation of what a rank posts, and the pieces of memory that hold any
// range of the packed message.
#include "bcs/layout.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace bcs {
namespace {

std::vector<std::pair<uint64_t, uint64_t>> pieces(const Layout& l, uint64_t base, uint64_t off,
                                                  uint64_t len) {
  std::vector<std::pair<uint64_t, uint64_t>> v;
  layout_segments(l, base, off, len, [&](uint64_t a, uint64_t n) { v.emplace_back(a, n); });
  return v;
}

TEST(Layout, EveryRangeMapsToTheBytesAPackerWouldTake) {
  // Blocks of 3, 1 and 4 bytes, one before the instance (negative
  // displacement), 5 instances 16 bytes apart.
  std::string why;
  auto l = layout_make({{-2, 3}, {4, 1}, {9, 4}}, 5, 16, &why);
  ASSERT_TRUE(l) << why;
  EXPECT_EQ(l->size, 8u);
  EXPECT_EQ(l->total(), 40u);
  const uint64_t base = 1000;
  std::vector<uint64_t> packed;  // the address of each packed byte, as a packer walks
  for (uint64_t k = 0; k < 5; ++k)
    for (auto [d, n] : std::vector<std::pair<int64_t, uint64_t>>{{-2, 3}, {4, 1}, {9, 4}})
      for (uint64_t j = 0; j < n; ++j) packed.push_back(base + 16 * k + d + j);
  for (uint64_t off = 0; off <= 40; ++off)
    for (uint64_t len = 0; off + len <= 40; ++len) {
      std::vector<uint64_t> got;
      uint64_t prev_end = 0;
      for (auto [a, n] : pieces(*l, base, off, len)) {
        ASSERT_GT(n, 0u);
        ASSERT_NE(a, prev_end) << "adjacent pieces of one block are one piece";
        for (uint64_t j = 0; j < n; ++j) got.push_back(a + j);
        prev_end = a + n;
      }
      ASSERT_EQ(got, std::vector<uint64_t>(packed.begin() + off, packed.begin() + off + len))
          << "range " << off << "+" << len;
    }
}

TEST(Layout, WhatNoLibraryPostsIsRefused) {
  std::string why;
  EXPECT_FALSE(layout_make({}, 1, 8, &why));
  EXPECT_EQ(why, "layout of 0 blocks");
  EXPECT_FALSE(layout_make({{0, 0}}, 1, 8, &why));
  EXPECT_FALSE(layout_make({{0, uint64_t{1} << 41}}, 1, 8, &why));
  EXPECT_FALSE(layout_make({{0, uint64_t{1} << 30}}, 1u << 20, 8, &why)) << "2^50 bytes in all";
  EXPECT_FALSE(layout_make(std::vector<LayoutBlock>(kLayoutMaxBlocks + 1, {0, 1}), 1, 8, &why));
  EXPECT_TRUE(layout_make({{0, 8}}, 0, 8, &why)) << "zero instances is an empty message";
}

}  // namespace
}  // namespace bcs
