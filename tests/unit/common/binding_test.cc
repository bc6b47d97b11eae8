// Which CPU each local rank is bound to (daemons/common/binding.h).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "binding.h"

namespace bcs {
namespace {

using V = std::vector<int>;

TEST(BindingTest, RanksThatFitGetACPUEachByDefault) {
  EXPECT_EQ(rank_cpus(Binding::by_default, 2, {0, 1}), (V{0, 1}));
  // The node manager's own CPUs, in order, whatever their numbers.
  EXPECT_EQ(rank_cpus(Binding::by_default, 2, {3, 5, 7}), (V{3, 5}));
}

TEST(BindingTest, RanksThatOutnumberTheCPUsAreLeftAloneByDefault) {
  EXPECT_EQ(rank_cpus(Binding::by_default, 3, {0, 1}), (V{-1, -1, -1}));
}

TEST(BindingTest, CoreBindsRoundRobinAndNoneNever) {
  EXPECT_EQ(rank_cpus(Binding::core, 5, {2, 4}), (V{2, 4, 2, 4, 2}));
  EXPECT_EQ(rank_cpus(Binding::none, 2, {0, 1}), (V{-1, -1}));
  EXPECT_EQ(rank_cpus(Binding::core, 2, {}), (V{-1, -1})) << "CPUs unknown: nobody is bound";
  EXPECT_TRUE(rank_cpus(Binding::core, 0, {0}).empty());
}

// Node managers of one host count each other's ranks, in world rank order,
// and none of another host's: ranks 0 and 2 on node 1, 1 on node 2 of the
// same host, 3 on node 3 elsewhere.
TEST(BindingTest, TheNodeManagersOfAHostCountEachOthersRanks) {
  const std::vector<uint32_t> placement{1, 2, 1, 3};
  EXPECT_EQ(host_rank_cpus(Binding::by_default, placement, {2, 1}, {0, 1, 2}, 0), (V{0, 1, 2, -1}));
  // Three ranks on two CPUs: by default nobody is bound, with core round-robin.
  EXPECT_EQ(host_rank_cpus(Binding::by_default, placement, {1, 2}, {4, 5}, 0), (V{-1, -1, -1, -1}));
  EXPECT_EQ(host_rank_cpus(Binding::core, placement, {1, 2}, {4, 5}, 0), (V{4, 5, 4, -1}));
  EXPECT_EQ(host_rank_cpus(Binding::core, placement, {3}, {4, 5}, 0), (V{-1, -1, -1, 4}));
}

// Jobs running at once on node managers of one host start where the
// manager put them (StartJob::host_slot_base), so they keep apart.
TEST(BindingTest, ABaseShiftsTheRanksAlongTheCPUs) {
  EXPECT_EQ(rank_cpus(Binding::by_default, 2, {3, 5, 7, 9}, 2), (V{7, 9}));
  EXPECT_EQ(rank_cpus(Binding::core, 2, {3, 5, 7, 9}, 1), (V{5, 7}));
  // Two one-rank jobs on two node managers of a two-CPU host: one CPU each.
  EXPECT_EQ(host_rank_cpus(Binding::by_default, {1}, {1, 2}, {0, 1}, 0), (V{0}));
  EXPECT_EQ(host_rank_cpus(Binding::by_default, {2}, {1, 2}, {0, 1}, 1), (V{1}));
  // The k-th host rank, counted over the host's node managers in world
  // rank order, goes to base + k.
  EXPECT_EQ(host_rank_cpus(Binding::by_default, {1, 2, 1, 3}, {2, 1}, {0, 1, 2, 3, 4}, 2),
            (V{2, 3, 4, -1}));
  EXPECT_EQ(host_rank_cpus(Binding::none, {1, 2}, {1, 2}, {0, 1, 2, 3}, 2), (V{-1, -1}));
}

TEST(BindingTest, BaseZeroIsTheBindingOfAJobAlone) {
  for (Binding b : {Binding::by_default, Binding::core, Binding::none})
    for (uint32_t n : {0u, 1u, 2u, 3u, 5u})
      EXPECT_EQ(rank_cpus(b, n, {4, 6, 8}, 0), rank_cpus(b, n, {4, 6, 8}))
          << static_cast<int>(b) << " " << n;
  EXPECT_EQ(rank_cpus(Binding::by_default, 3, {4, 6, 8}, 0), (V{4, 6, 8}));
}

// By default ranks that do not fit past the base are not bound at all:
// wrapping round would pin them onto another job's CPUs.
TEST(BindingTest, RanksThatDoNotFitPastTheBaseAreLeftAloneByDefault) {
  EXPECT_EQ(rank_cpus(Binding::by_default, 2, {0, 1, 2}, 2), (V{-1, -1}));
  EXPECT_EQ(rank_cpus(Binding::by_default, 1, {0, 1, 2}, 2), (V{2})) << "the last CPU fits";
  // The manager's "no free range": a base of the CPUs' number.
  EXPECT_EQ(rank_cpus(Binding::by_default, 1, {0, 1}, 2), (V{-1}));
  EXPECT_EQ(host_rank_cpus(Binding::by_default, {1, 2}, {1, 2}, {0, 1}, 1), (V{-1, -1}));
  // A base near 2^32 does not wrap the sum back into range.
  EXPECT_EQ(rank_cpus(Binding::by_default, 2, {0, 1}, UINT32_MAX), (V{-1, -1}));
}

// --bind core binds whatever the base, wrapping round: asked for, it keeps
// today's round robin, and the "no free range" base (the CPUs' number) is
// exactly today's binding from the first CPU.
TEST(BindingTest, CoreWrapsRoundFromTheBase) {
  EXPECT_EQ(rank_cpus(Binding::core, 3, {0, 1, 2}, 2), (V{2, 0, 1}));
  EXPECT_EQ(rank_cpus(Binding::core, 5, {4, 5}, 1), (V{5, 4, 5, 4, 5}));
  EXPECT_EQ(rank_cpus(Binding::core, 3, {0, 1}, 2), rank_cpus(Binding::core, 3, {0, 1}, 0));
  EXPECT_EQ(rank_cpus(Binding::core, 2, {0, 1, 2}, UINT32_MAX),
            (V{0, 1})) << "(2^32 - 1) mod 3 = 0, counted in 64 bits";
  EXPECT_EQ(rank_cpus(Binding::core, 2, {}, 1), (V{-1, -1})) << "CPUs unknown: nobody is bound";
}

TEST(BindingTest, AllowedCPUsAreThisProcesssAndBindingToOneOfThemWorks) {
  const V cpus = allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
  EXPECT_FALSE(bind_self_to_cpu(-1));
  // In a child, so this test's own process keeps its CPUs.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(bind_self_to_cpu(cpus.back()) && allowed_cpus() == V{cpus.back()} ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace bcs
