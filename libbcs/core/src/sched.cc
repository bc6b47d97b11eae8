// The per-thread cache behind thread_is_realtime() (core.h).
#include <sched.h>

#include <atomic>
#include <cstdint>

#include "bcs/core.h"

namespace bcs::core {

namespace {
// Bumped by every policy change this process makes; a thread whose cache
// is of an older generation asks the kernel again.
std::atomic<uint64_t> g_generation{1};

struct PolicyCache {
  uint64_t generation = 0;
  bool realtime = false;
};
thread_local PolicyCache t_policy;
}  // namespace

bool thread_is_realtime() {
  const uint64_t gen = g_generation.load(std::memory_order_acquire);
  if (t_policy.generation != gen) {
    // Without SCHED_RESET_ON_FORK, which the daemons set with it.
    const int policy = ::sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
    t_policy = {gen, policy == SCHED_FIFO || policy == SCHED_RR};
  }
  return t_policy.realtime;
}

void sched_policy_changed() { g_generation.fetch_add(1, std::memory_order_acq_rel); }

}  // namespace bcs::core
