#include "sched_hint.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace bcs {

namespace {
// linux/sched/types.h, which glibc does not expose (SCHED_ATTR_SIZE_VER1).
struct SchedAttr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
  uint32_t sched_util_min;
  uint32_t sched_util_max;
};
}  // namespace

bool sched_prefer_short_slice(std::chrono::nanoseconds slice) {
  SchedAttr a{};
  a.size = sizeof a;
  a.sched_policy = 0;  // SCHED_OTHER
  // Not SCHED_FLAG_KEEP_PARAMS: it would skip the slice too. The thread's
  // nice value is passed back instead.
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, 0);
  a.sched_nice = errno == 0 ? nice : 0;
  a.sched_runtime = static_cast<uint64_t>(slice.count());
  return syscall(SYS_sched_setattr, 0, &a, 0) == 0;
}

}  // namespace bcs
