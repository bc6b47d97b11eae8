// sched_hint.h: a helper thread's short EEVDF slice, its real-time
// priority, and when the strobe receiver takes it (RealtimeGate,
// ComputeWatch).
#include <linux/capability.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "sched_hint.h"

namespace bcs {
namespace {

// The calling thread's se.slice (ns) from /proc (CONFIG_SCHED_DEBUG), or -1.
long long own_slice() {
  std::ifstream f("/proc/thread-self/sched");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("se.slice", 0) == 0) return std::stoll(line.substr(line.find(':') + 1));
  return -1;
}

bool kernel_has_custom_slices() {  // Linux 6.12
  utsname u{};
  int major = 0, minor = 0;
  return uname(&u) == 0 && std::sscanf(u.release, "%d.%d", &major, &minor) == 2 &&
         (major > 6 || (major == 6 && minor >= 12));
}

// The thread gets the slice it asked for, and keeps its nice value (the
// request passes it back: SCHED_FLAG_KEEP_PARAMS would skip the slice).
TEST(SchedHint, AHelperThreadGetsItsShortSliceAndKeepsItsNiceValue) {
  if (!kernel_has_custom_slices()) GTEST_SKIP() << "custom slices need Linux 6.12";
  long long before = -1, after = -1;
  int nice_after = 0;
  bool ok = false;
  std::thread([&] {
    ASSERT_EQ(setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 3), 0);
    before = own_slice();
    ok = sched_prefer_short_slice(kHelperSlice);
    after = own_slice();
    errno = 0;
    nice_after = getpriority(PRIO_PROCESS, 0);
  }).join();
  ASSERT_TRUE(ok);
  EXPECT_EQ(nice_after, 3);
  if (before < 0) GTEST_SKIP() << "no se.slice in /proc (CONFIG_SCHED_DEBUG)";
  EXPECT_EQ(after, kHelperSlice.count()) << "before: " << before;
}

// At real-time priority only with the right to it, and never for what
// the thread forks: a rank started from it runs at normal priority.
TEST(SchedHint, ARealTimeThreadForksChildrenAtNormalPriority) {
  int policy = -1, child_policy = -1;
  bool ok = false;
  std::thread([&] {
    ok = sched_prefer_realtime();
    policy = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
    const pid_t p = fork();
    if (p == 0) _exit(sched_getscheduler(0) == SCHED_OTHER ? 0 : 1);
    int st = 0;
    if (p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st)) child_policy = WEXITSTATUS(st);
  }).join();
  if (!ok) GTEST_SKIP() << "real-time priority not permitted here (no CAP_SYS_NICE)";
  EXPECT_EQ(policy, SCHED_FIFO);
  EXPECT_EQ(child_policy, 0) << "the forked child kept SCHED_FIFO";
}

// A daemon run by a user may not have real time: it asks, is refused, and
// the thread gets the short slice instead, at normal priority.
TEST(SchedHint, AThreadRefusedRealTimeGetsTheShortSliceInstead) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become an unprivileged user";
  const pid_t p = fork();
  ASSERT_GE(p, 0);
  if (p == 0) {
    // RLIMIT_RTPRIO stays 0 (the default): nobody may raise it.
    rlimit none{0, 0};
    if (setrlimit(RLIMIT_RTPRIO, &none) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
    if (sched_join_wake_path(true)) _exit(11);  // said real time
    if ((sched_getscheduler(0) & ~SCHED_RESET_ON_FORK) != SCHED_OTHER) _exit(12);
    if (kernel_has_custom_slices()) {
      const long long s = own_slice();
      if (s >= 0 && s != kHelperSlice.count()) _exit(13);
    }
    _exit(0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(p, &st, 0), p);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "10: could not drop privileges, 11: claimed real time, "
                                   "12: not SCHED_OTHER, 13: not the short slice";
}

// A thread that went real time keeps SCHED_RESET_ON_FORK, which only
// CAP_SYS_NICE may clear: a node manager without it (its service user,
// LimitRTPRIO=1) must still get its strobe receiver back to normal
// priority. Played by root dropping CAP_SYS_NICE after the raise.
TEST(SchedHint, AThreadWithoutCapSysNiceComesBackFromRealTime) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for the first raise";
  const pid_t p = fork();
  ASSERT_GE(p, 0);
  if (p == 0) {
    if (!sched_prefer_realtime()) _exit(77);
    __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct d[2]{};
    if (syscall(SYS_capget, &h, d) != 0) _exit(10);
    d[0].effective &= ~(1u << CAP_SYS_NICE);
    d[0].permitted &= ~(1u << CAP_SYS_NICE);
    if (syscall(SYS_capset, &h, d) != 0) _exit(10);
    sched_join_wake_path(false);
    if ((sched_getscheduler(0) & ~SCHED_RESET_ON_FORK) != SCHED_OTHER) _exit(11);
    // And without the right, real time is refused: normal priority stays.
    if (sched_join_wake_path(true) || (sched_getscheduler(0) & ~SCHED_RESET_ON_FORK) != SCHED_OTHER)
      _exit(12);
    _exit(0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(p, &st, 0), p);
  ASSERT_TRUE(WIFEXITED(st));
  if (WEXITSTATUS(st) == 77) GTEST_SKIP() << "real-time priority not permitted here";
  EXPECT_EQ(WEXITSTATUS(st), 0) << "10: could not drop CAP_SYS_NICE, 11: stayed SCHED_FIFO, "
                                   "12: went real time without the right";
}

// The strobe receiver goes real time when a rank computes, stays there
// while ranks compute between short waits, and leaves it once none has
// for kRelaxNs.
TEST(RealtimeGate, RealTimeFromTheFirstComputingRankUntilNoneComputedForAWhile) {
  RealtimeGate g;
  uint64_t cpu = 0;  // the thread works little: the CPU guard stays out of it
  auto cpu_ns = [&] { return cpu; };
  const uint64_t t0 = 1'000'000'000;
  EXPECT_FALSE(g.want(false, t0, cpu_ns)) << "no rank computes";
  ASSERT_TRUE(g.want(true, t0 + 1'000, cpu_ns));
  g.applied(true);
  const uint64_t ms = 1'000'000;
  EXPECT_TRUE(g.want(false, t0 + 5 * ms, cpu_ns)) << "a short wait between computations";
  EXPECT_TRUE(g.want(true, t0 + 8 * ms, cpu_ns));
  EXPECT_TRUE(g.want(false, t0 + 8 * ms + RealtimeGate::kRelaxNs - 1, cpu_ns));
  EXPECT_FALSE(g.want(false, t0 + 8 * ms + RealtimeGate::kRelaxNs, cpu_ns));
  g.applied(false);
  EXPECT_FALSE(g.want(false, t0 + 9 * ms + RealtimeGate::kRelaxNs, cpu_ns))
      << "at normal priority, only a computing rank raises it again";
}

// A job that keeps the strobe receiver working more than half the time
// gets it at normal priority for kBenchNs, computing ranks or not.
TEST(RealtimeGate, AThreadThatWorksMoreThanHalfTheTimeDropsToNormalPriority) {
  RealtimeGate g;
  uint64_t cpu = 0;
  auto cpu_ns = [&] { return cpu; };
  const uint64_t t0 = 1'000'000'000, w = RealtimeGate::kWindowNs;
  ASSERT_TRUE(g.want(true, t0, cpu_ns));
  g.applied(true);
  cpu += w / 2;  // exactly half of the window: still real time
  ASSERT_TRUE(g.want(true, t0 + w, cpu_ns));
  cpu += w / 2 + 1;  // more than half of the next one
  ASSERT_FALSE(g.want(true, t0 + 2 * w, cpu_ns));
  g.applied(false);
  EXPECT_FALSE(g.want(true, t0 + 2 * w + RealtimeGate::kBenchNs - 1, cpu_ns));
  EXPECT_TRUE(g.want(true, t0 + 2 * w + RealtimeGate::kBenchNs, cpu_ns));
}

// A rank computes once two looks min_ns apart find it out of MPI at the
// same ring head; waiting or posting starts it over.
TEST(ComputeWatch, ARankComputesOnlyWhenOutOfMpiWithoutPostingForAWhile) {
  ComputeWatch w;
  const uint64_t t = 5'000'000, min = 50'000;
  EXPECT_FALSE(w.look(false, 7, t, min)) << "first look";
  EXPECT_FALSE(w.look(false, 7, t + min - 1, min));
  EXPECT_TRUE(w.look(false, 7, t + min, min));
  EXPECT_FALSE(w.look(false, 8, t + 2 * min, min)) << "it posted";
  EXPECT_TRUE(w.look(false, 8, t + 3 * min, min));
  EXPECT_FALSE(w.look(true, 8, t + 4 * min, min)) << "it waits in MPI";
  EXPECT_FALSE(w.look(false, 8, t + 5 * min, min)) << "out again: a first look";
  EXPECT_TRUE(w.look(false, 8, t + 6 * min, min));
}

}  // namespace
}  // namespace bcs
