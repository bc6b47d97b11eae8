// The checks every daemon applies to a launch request's environment
// (daemons/common/launch.h): the CLI, the machine manager and the node
// manager refuse the same things.
#include "launch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace bcs {
namespace {

using Env = std::vector<std::string>;

TEST(LaunchEnv, NamesArePortableShellNames) {
  for (const char* ok : {"A", "_", "a_b9", "PATH", "OMP_NUM_THREADS"}) EXPECT_TRUE(env_name_ok(ok)) << ok;
  for (const char* bad : {"", "9A", "A-B", "A B", "A=B", "Ä", "A.B"}) EXPECT_FALSE(env_name_ok(bad)) << bad;
  EXPECT_TRUE(env_name_ok(std::string(255, 'A')));
  EXPECT_FALSE(env_name_ok(std::string(256, 'A')));
}

TEST(LaunchEnv, SettingsCannotTouchTheRuntimesVariables) {
  EXPECT_EQ(check_env_setting("A=1"), "");
  EXPECT_EQ(check_env_setting("A="), "");
  EXPECT_EQ(check_env_setting("BCS_PREFIX=/x"), "") << "only the per-rank ones are reserved";
  for (const char* n : kRankEnvNames) {
    EXPECT_NE(check_env_setting(std::string(n) + "=1").find("set by bcs itself"), std::string::npos)
        << n;
  }
  EXPECT_NE(check_env_setting("A").find("NAME=VALUE"), std::string::npos);
  EXPECT_NE(check_env_setting(std::string("A=x\0y", 5)).find("NUL"), std::string::npos);
  EXPECT_NE(check_env_setting("A=" + std::string(128 * 1024, 'x')).find("128 KiB"),
            std::string::npos);
}

TEST(LaunchEnv, InheritedEntriesNeedOnlyANameAndAnEqualsSign) {
  EXPECT_EQ(check_job_env({"PATH=/bin", "BASH_FUNC_f%%=() { :; }", "E=", "BCS_RANK=3"}, {}), "")
      << "a shell exports such names; BCS_RANK is dropped by the node manager, not refused";
  EXPECT_NE(check_job_env({"NOEQUALS"}, {}).find("not NAME=VALUE"), std::string::npos);
  EXPECT_NE(check_job_env({"=x"}, {}).find("not NAME=VALUE"), std::string::npos);
  EXPECT_NE(check_job_env({std::string("A=\0", 3)}, {}).find("NUL"), std::string::npos);
  EXPECT_NE(check_job_env({}, {"BCS_SIZE=9"}).find("set by bcs itself"), std::string::npos);
}

TEST(LaunchEnv, SizesAreCapped) {
  const std::string big = "X=" + std::string(100 * 1024, 'x');
  EXPECT_EQ(check_job_env(Env(9, big), {}), "");
  EXPECT_NE(check_job_env(Env(11, big), {}).find("larger than 1 MiB"), std::string::npos);
  EXPECT_NE(check_job_env({"X=" + std::string(200 * 1024, 'x')}, {}).find("128 KiB"),
            std::string::npos);
  EXPECT_NE(check_job_env(Env(kMaxEnvEntries + 1, "A=1"), {}).find("more than"), std::string::npos);
}

TEST(LaunchEnv, SettingsReplaceOrAppendInOrder) {
  EXPECT_EQ(merge_job_env({"A=1", "B=2", "C=3"}, {"B=x", "D=4", "A=", "B=y"}),
            (Env{"A=", "B=y", "C=3", "D=4"}));
  // A name twice in a (malformed) environ: one entry remains, the setting's.
  EXPECT_EQ(merge_job_env({"A=1", "B=2", "A=3"}, {"A=9"}), (Env{"A=9", "B=2"}));
  EXPECT_EQ(merge_job_env({"A=1"}, {}), (Env{"A=1"}));
  // "AB" is not "A".
  EXPECT_EQ(merge_job_env({"AB=1"}, {"A=2"}), (Env{"AB=1", "A=2"}));
}

TEST(LaunchHosts, HostNames) {
  for (const char* ok : {"a", "node1", "n-1.example.org", "10.0.0.1", "my_host"})
    EXPECT_TRUE(host_name_ok(ok)) << ok;
  for (const char* bad : {"", "-a", "a b", "a:1", "a/b", "a,b", "a;b"}) EXPECT_FALSE(host_name_ok(bad)) << bad;
  EXPECT_FALSE(host_name_ok(std::string(256, 'a')));
}

}  // namespace
}  // namespace bcs
