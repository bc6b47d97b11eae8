// sched_hint.h: a helper thread's short EEVDF slice.
#include <sys/resource.h>
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

}  // namespace
}  // namespace bcs
