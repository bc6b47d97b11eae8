// control_junk: a rank's control words are believed only when they are what
// libbcs writes (issue 42, item 7).
#include <gtest/gtest.h>

#include "control_words.h"

namespace {

using bcs::nm::control_junk;

constexpr uint32_t kNone = static_cast<uint32_t>(bcs::MpiState::none);
constexpr uint32_t kInit = static_cast<uint32_t>(bcs::MpiState::initialized);
constexpr uint32_t kFinal = static_cast<uint32_t>(bcs::MpiState::finalized);

// waitpid statuses, built as the kernel does.
int exited(int code) { return (code & 0xff) << 8; }
int signaled(int sig) { return sig & 0x7f; }

TEST(ControlWords, WhatARankWritesIsBelieved) {
  EXPECT_EQ(control_junk(kNone, 0, 0, exited(0)), "");    // never initialised
  EXPECT_EQ(control_junk(kInit, 0, 0, exited(3)), "");    // exited without finalize
  EXPECT_EQ(control_junk(kFinal, 0, 0, exited(0)), "");
  // MPI_Abort(comm, 7): the code, the flag, exit 7.
  EXPECT_EQ(control_junk(kInit, bcs::kAbortedByRank, 7, exited(7)), "");
  // A code whose low byte is 0 exits 1.
  EXPECT_EQ(control_junk(kInit, bcs::kAbortedByRank, 256, exited(1)), "");
  EXPECT_EQ(control_junk(kInit, bcs::kAbortedNoticingPeer, 13, exited(13)), "");
  // Killed while it flushed its output after posting the abort.
  EXPECT_EQ(control_junk(kInit, bcs::kAbortedByRank, 7, signaled(9)), "");
}

TEST(ControlWords, GarbageIsNamed) {
  // The probe of issue 42: the segment overwritten before MPI_Init, read
  // back as an abort with code 1718986775 (0x6675a817).
  const std::string junk = control_junk(0x6675a817, 0x6675a817, 1718986775, exited(1));
  EXPECT_NE(junk.find("MPI state word holds 0x6675a817"), std::string::npos) << junk;
  EXPECT_NE(control_junk(kNone, 0x6675a817, 1718986775, exited(1)).find("abort flag holds 0x6675a817"),
            std::string::npos);
  // A plausible flag, but no MPI_Init before it.
  EXPECT_NE(control_junk(kNone, bcs::kAbortedByRank, 1718986775, exited(1)).find("never initialised"),
            std::string::npos);
  // A plausible flag and state, but the code is not what the rank exited with.
  EXPECT_NE(control_junk(kInit, bcs::kAbortedByRank, 1718986775, exited(1)).find("does not match"),
            std::string::npos);
}

}  // namespace
