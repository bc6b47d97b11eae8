// The fixture every integration story shares: after each one no process of
// ours survives and no /dev/shm entry appears.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <set>
#include <string>
#include <vector>

#include "harness.h"

namespace bcs::test {

std::string describe(const RunResult& r);

class Story : public testing::Test {
 protected:
  void SetUp() override { shm_before_ = shm_entries(); }
  void TearDown() override;
  // A job that ended must have left nothing at the moment `bcs` returned.
  void expect_nothing_left_now();
  std::vector<std::string> shm_before_;
};

}  // namespace bcs::test
