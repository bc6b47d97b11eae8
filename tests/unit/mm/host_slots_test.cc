// Where a job's ranks go among a host's CPUs while other jobs run there
// (daemons/mm/host_slots.h).
#include "host_slots.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace bcs::mm {
namespace {

TEST(HostSlots, AJobAloneStartsAtTheFirstCPU) {
  EXPECT_EQ(host_slot_base(4, {}, 1), 0u);
  EXPECT_EQ(host_slot_base(4, {}, 4), 0u) << "a job that fills the host exactly";
}

// Acceptance bench 2: two one-rank jobs on a two-CPU host get a CPU each.
TEST(HostSlots, ASecondJobGoesPastTheFirst) {
  EXPECT_EQ(host_slot_base(2, {{0, 1}}, 1), 1u);
  EXPECT_EQ(host_slot_base(8, {{0, 3}, {3, 2}}, 2), 5u) << "ranges that touch";
}

TEST(HostSlots, TheLowestGapWideEnoughIsTaken) {
  // Slots 0-1 and 5-7 free: one rank fits at 0, and so do two; three only
  // fit at 5.
  const std::vector<SlotRange> held{{2, 3}};
  EXPECT_EQ(host_slot_base(8, held, 1), 0u);
  EXPECT_EQ(host_slot_base(8, held, 2), 0u);
  EXPECT_EQ(host_slot_base(8, held, 3), 5u);
  // A gap left by a job that ended is reused; the order of `held` does not
  // matter.
  EXPECT_EQ(host_slot_base(8, {{4, 4}, {0, 2}}, 2), 2u);
  EXPECT_EQ(host_slot_base(8, {{0, 2}, {4, 4}}, 2), 2u);
  // Overlapping ranges (as the caller may pass them) hold their union.
  EXPECT_EQ(host_slot_base(8, {{0, 4}, {1, 2}}, 2), 4u);
}

TEST(HostSlots, NoContiguousRangeMeansTheCPUCountThatIsUnbound) {
  EXPECT_EQ(host_slot_base(2, {{0, 1}}, 2), 2u);
  EXPECT_EQ(host_slot_base(2, {{0, 2}}, 1), 2u);
  // Four free slots in all, but no two side by side.
  EXPECT_EQ(host_slot_base(6, {{1, 1}, {3, 1}, {5, 1}}, 2), 6u);
  EXPECT_EQ(host_slot_base(4, {}, 5), 4u) << "more ranks than CPUs";
}

// A job that got the CPU count runs unbound: recorded as it is, it holds
// no slot, and the part of a range past the CPUs holds none either.
TEST(HostSlots, SlotsPastTheCPUsAreNotHeld) {
  EXPECT_EQ(host_slot_base(2, {{2, 3}}, 2), 0u);
  EXPECT_EQ(host_slot_base(4, {{2, 5}}, 2), 0u);
  EXPECT_EQ(host_slot_base(4, {{2, 5}}, 3), 4u);
  // A base + count that would wrap in 32 bits does not hold slot 0.
  EXPECT_EQ(host_slot_base(4, {{UINT32_MAX, 2}}, 4), 0u);
  EXPECT_EQ(host_slot_base(4, {{0, 0}}, 4), 0u) << "an empty range holds nothing";
}

TEST(HostSlots, NoRanksOrUnknownCPUsGiveTheBaseOfAJobAlone) {
  EXPECT_EQ(host_slot_base(4, {{0, 4}}, 0), 0u);
  // cpus 0: a node manager that did not report Register::cpus; base 0 (=
  // cpus) is the binding it always had.
  EXPECT_EQ(host_slot_base(0, {}, 1), 0u);
  EXPECT_EQ(host_slot_base(0, {{0, 1}}, 1), 0u);
}

}  // namespace
}  // namespace bcs::mm
