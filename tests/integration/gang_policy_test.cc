// Stories of buffered coscheduling's background policy (issue 43,
// `bcs-mm --policy bcs`): the jobs of the rows of the gang matrix that are
// not running are held at idle priority in a cpu cgroup of their own
// instead of stopped, so they take only the CPU time the running row's
// ranks leave while they wait in MPI (daemons/nm/cpu_group.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "gang_jobs.h"

using namespace bcs::test::space;

namespace {

using GangPolicyStory = bcs::test::Story;

constexpr const char* kCpuRoot = "/sys/fs/cgroup/cpu";

// The process's group in the v1 cpu hierarchy ("" if none).
std::string cpu_group_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::string list = "," + line.substr(a + 1, b - a - 1) + ",";
    if (list.find(",cpu,") != std::string::npos) return line.substr(b + 1);
  }
  return "";
}

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// The groups of the cluster's node managers' jobs that still exist.
std::vector<std::string> groups_left(const Standing& c) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(kCpuRoot, ec))
    for (pid_t p : c.pids())
      if (e.path().filename().string().rfind("bcs-nm-" + std::to_string(p) + "-job-", 0) == 0)
        out.push_back(e.path().string());
  return out;
}

// Two jobs on the same two node managers at --mpl 2 under --policy bcs.
// Every rank is in its own job's cpu group, named after its node manager
// and the job. Whenever `bcs jobs` shows a job in the background twice
// within one of its suspensions (its quanta unchanged), its ranks read in
// between were not stopped, their groups' cpu.idle was 1, and the job ran
// no slice. Both complete with their data checked; their groups are gone
// once they ended.
TEST_F(GangPolicyStory, TheRowNotRunningWaitsAtIdlePriorityNotStopped) {
  if (::geteuid() != 0 || !exists(std::string(kCpuRoot) + "/cpu.idle"))
    GTEST_SKIP() << "needs root and the cgroup v1 cpu hierarchy with cpu.idle";
  TempDir dir("bcs-policy");
  ASSERT_FALSE(dir.path.empty());
  const std::string& d = dir.path;
  Standing c(2, {"--mpl", "2", "--quantum", "200ms", "--policy", "bcs"});
  ASSERT_TRUE(c.up());
  const Half& both = kBoth;
  {
    Jobs jobs(c);
    const auto [a, b] = start_two(jobs, d, 40);
    ASSERT_NE(a, 0u);
    std::map<std::string, std::vector<std::string>> group;  // per job, per rank
    for (const auto& [name, id] : {std::pair{std::string("A"), a}, std::pair{std::string("B"), b}})
      for (int r = 0; r < both.ranks; ++r) {
        const std::string g = cpu_group_of(pid_of(d, name, r));
        bool an_nm = false;
        for (pid_t p : c.pids())
          an_nm |= g == "/bcs-nm-" + std::to_string(p) + "-job-" + std::to_string(id);
        EXPECT_TRUE(an_nm) << name << " rank " << r << " is in cpu group '" << g << "'";
        group[name].push_back(std::string(kCpuRoot) + g);
      }
    // Per rank: its state letter and its group's cpu.idle.
    std::string missing;
    const std::string bad = while_suspended(
        c, a, b, "background",
        [&](const std::string& name) {
          std::string states, idle;
          for (int r = 0; r < both.ranks; ++r) {
            states += state_of(pid_of(d, name, r));
            idle += read_line(group[name][static_cast<size_t>(r)] + "/cpu.idle");
          }
          return states + " " + idle;
        },
        [&](const std::string& name, const std::string& reading) {
          const std::string states = reading.substr(0, reading.find(' '));
          const std::string idle = reading.substr(reading.find(' ') + 1);
          std::string wrong;
          if (states.find('T') != std::string::npos)
            wrong += name + "'s ranks were '" + states + "' (stopped) in the background; ";
          if (idle != std::string(static_cast<size_t>(both.ranks), '1'))
            wrong += name + "'s groups had cpu.idle '" + idle + "' in the background; ";
          return wrong;
        },
        &missing);
    EXPECT_EQ(bad, "");
    EXPECT_EQ(missing, "") << "not seen in the background (twice within one suspension)";
    release(d, "A");
    release(d, "B");
    expect_whole(jobs.result(a), "A", both, 40, "nobody", "B");
    expect_whole(jobs.result(b), "B", both, 40, "nobody", "A");
    // Their ranks' CPU time, counted as each ended (wait4).
    const auto rows = job_rows(c);
    for (uint64_t id : {a, b}) {
      ASSERT_TRUE(rows.count(id));
      EXPECT_GT(rows.at(id).cpu_s, 0.0) << "job " << id;
    }
  }
  // Each node manager removes a job's group as the job ends (bounded:
  // the end reaches the node managers after the clients' exit).
  auto left = groups_left(c);
  for (auto until = std::chrono::steady_clock::now() + kBound;
       !left.empty() && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    left = groups_left(c);
  }
  EXPECT_THAT(left, testing::IsEmpty());
  c.expect_alive_then_stop();
}

}  // namespace
