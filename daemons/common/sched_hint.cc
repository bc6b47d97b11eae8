#include "sched_hint.h"

#include <sched.h>
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
constexpr uint64_t kFlagResetOnFork = 0x01;  // SCHED_FLAG_RESET_ON_FORK
}  // namespace

bool sched_prefer_short_slice(std::chrono::nanoseconds slice, pid_t tid) {
  SchedAttr a{};
  a.size = sizeof a;
  a.sched_policy = SCHED_OTHER;
  // Kept from a real-time turn: without CAP_SYS_NICE a thread may not
  // clear it, and the whole call would fail (the strobe receiver comes
  // back here from SCHED_FIFO, under LimitRTPRIO=1).
  a.sched_flags = kFlagResetOnFork;
  // Not SCHED_FLAG_KEEP_PARAMS: it would skip the slice too. The thread's
  // nice value is passed back instead.
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  a.sched_nice = errno == 0 ? nice : 0;
  a.sched_runtime = static_cast<uint64_t>(slice.count());
  return syscall(SYS_sched_setattr, tid, &a, 0) == 0;
}

bool sched_prefer_realtime(pid_t tid) {
  SchedAttr a{};
  a.size = sizeof a;
  a.sched_policy = SCHED_FIFO;
  a.sched_priority = 1;
  a.sched_flags = kFlagResetOnFork;
  return syscall(SYS_sched_setattr, tid, &a, 0) == 0;
}

bool sched_join_wake_path(bool realtime, pid_t tid) {
  if (realtime && sched_prefer_realtime(tid)) return true;
  sched_prefer_short_slice(kHelperSlice, tid);
  return false;
}

}  // namespace bcs
