// The job's cpu cgroup of the background policy (cpu_group.h): made below
// this process's own group, joined by a forked child, its cpu.idle set,
// and gone when it is destroyed, leftovers moved out first. Root and the
// v1 cpu hierarchy with cpu.idle needed (skipped otherwise).
#include "cpu_group.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace bcs::nm {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool usable() {
  const std::string dir = cpu_group_dir();
  struct stat st {};
  return ::geteuid() == 0 && !dir.empty() && ::stat((dir + "/cpu.idle").c_str(), &st) == 0;
}

TEST(CpuGroup, AChildJoinsItsCpuIdleIsSetAndItIsRemovedWithWhatIsLeft) {
  if (!usable()) GTEST_SKIP() << "needs root and a v1 cpu hierarchy with cpu.idle";
  std::string why;
  const uint64_t job = 900000 + static_cast<uint64_t>(::getpid());
  std::string path;
  pid_t child = -1;
  {
    CpuGroup g = CpuGroup::make(job, &why);
    ASSERT_TRUE(g.valid()) << why;
    path = g.path();
    EXPECT_EQ(path, cpu_group_dir() + "/bcs-nm-" + std::to_string(::getpid()) + "-job-" +
                        std::to_string(job));
    EXPECT_EQ(read_all(path + "/cpu.idle"), "0\n");
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const char ok = g.join_self() ? 'y' : 'n';
      if (::write(p[1], &ok, 1) != 1) ::_exit(1);
      ::pause();
      ::_exit(0);
    }
    ::close(p[1]);
    char ok = 0;
    ASSERT_EQ(::read(p[0], &ok, 1), 1);
    ::close(p[0]);
    EXPECT_EQ(ok, 'y');
    EXPECT_EQ(read_all(path + "/cgroup.procs"), std::to_string(child) + "\n");
    EXPECT_EQ(g.set_idle(true), "");
    EXPECT_EQ(read_all(path + "/cpu.idle"), "1\n");
    EXPECT_EQ(g.set_idle(false), "");
    EXPECT_EQ(read_all(path + "/cpu.idle"), "0\n");
    // Destroyed with the child still in it: moved out, the group removed.
  }
  struct stat st {};
  EXPECT_NE(::stat(path.c_str(), &st), 0) << path << " is still there";
  EXPECT_NE(read_all(cpu_group_dir() + "/cgroup.procs").find(std::to_string(child)),
            std::string::npos);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST(CpuGroup, StaleGroupsOfGoneNodeManagersAreRemovedOthersKept) {
  if (!usable()) GTEST_SKIP() << "needs root and a v1 cpu hierarchy with cpu.idle";
  // A pid that is gone: a child reaped.
  const pid_t gone = ::fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  const std::string dir = cpu_group_dir();
  const std::string stale = dir + "/bcs-nm-" + std::to_string(gone) + "-job-1";
  const std::string live = dir + "/bcs-nm-" + std::to_string(::getppid()) + "-job-1";
  ASSERT_EQ(::mkdir(stale.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(live.c_str(), 0755), 0);
  CpuGroup::remove_stale();
  struct stat st {};
  EXPECT_NE(::stat(stale.c_str(), &st), 0) << stale << " was kept";
  EXPECT_EQ(::stat(live.c_str(), &st), 0) << live << " (its node manager lives) was removed";
  ::rmdir(stale.c_str());
  ::rmdir(live.c_str());
}

}  // namespace
}  // namespace bcs::nm
