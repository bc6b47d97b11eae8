// The fixture of the rank-side API's tests (api_test.cc, landing_test.cc):
// a fresh fake segment per test, attached with bcs_init through the real
// environment protocol, and the fake node manager (fake_nm.h).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "bcs/bcs.h"
#include "bcs/segment.h"
#include "fake_nm.h"

namespace bcs::apitest {

inline std::vector<uint8_t> pattern(size_t n, uint8_t salt) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + salt);
  return v;
}

class ApiTest : public ::testing::Test {
 protected:
  // world of `world` ranks, this process is world rank 0 (local index 0).
  void attach(uint32_t world = 1, uint32_t ring_slots = 64, uint32_t request_slots = 64) {
    seg_ = std::make_unique<FakeSegment>(world, 1, ring_slots, request_slots);
    seg_->export_env(0, 0);
    ASSERT_EQ(bcs_init(), BCS_OK);
    view_ = seg_->view(0);
    nm_ = std::make_unique<FakeNm>(view_, 0);
  }
  void TearDown() override {
    if (nm_) nm_->stop();
    if (bcs_initialized()) bcs_finalize();
    nm_.reset();
    seg_.reset();
    clear_env();
  }
  // Strobe thread that only works once the rank sleeps on its futex.
  void start_nm_when_rank_waits() {
    auto* ctl = view_.ctl;
    nm_->start([ctl] { return ctl->waiting.load() != 0; });
  }
  uint64_t posted() const { return view_.ctl->head.load(); }

  std::unique_ptr<FakeSegment> seg_;
  RankView view_;
  std::unique_ptr<FakeNm> nm_;
};

}  // namespace bcs::apitest
