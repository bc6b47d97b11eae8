// libmpi info objects in singleton mode: set/get/delete/dup/free semantics,
// key order, the length limits and their error classes, MPI_INFO_ENV, and
// the info arguments of communicator calls.
#include <mpi.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "singleton.h"

namespace {

class Info : public SingletonMpi {
 protected:
  void TearDown() override {
    for (MPI_Info& i : infos_)
      if (i != MPI_INFO_NULL) MPI_Info_free(&i);
  }
  MPI_Info& make() {
    infos_.push_back(MPI_INFO_NULL);
    EXPECT_EQ(MPI_Info_create(&infos_.back()), MPI_SUCCESS);
    return infos_.back();
  }
  // The value of `key`, or "<none>".
  static std::string get(MPI_Info info, const char* key) {
    char v[MPI_MAX_INFO_VAL + 1];
    int flag = -1;
    EXPECT_EQ(MPI_Info_get(info, key, MPI_MAX_INFO_VAL, v, &flag), MPI_SUCCESS);
    return flag ? std::string(v) : std::string("<none>");
  }
  static std::vector<std::string> keys(MPI_Info info) {
    int n = -1;
    EXPECT_EQ(MPI_Info_get_nkeys(info, &n), MPI_SUCCESS);
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
      char k[MPI_MAX_INFO_KEY + 1];
      EXPECT_EQ(MPI_Info_get_nthkey(info, i, k), MPI_SUCCESS);
      out.emplace_back(k);
    }
    return out;
  }
  std::deque<MPI_Info> infos_;  // make() hands out references: they must stay put
};

TEST_F(Info, SetGetReplaceDeleteInOrder) {
  MPI_Info info;
  ASSERT_EQ(MPI_Info_create(&info), MPI_SUCCESS);
  EXPECT_TRUE(keys(info).empty());
  ASSERT_EQ(MPI_Info_set(info, "file", "runfile.txt"), MPI_SUCCESS);
  ASSERT_EQ(MPI_Info_set(info, "soft", "2:1000:4,3:1000:7"), MPI_SUCCESS);
  ASSERT_EQ(MPI_Info_set(info, "host", "myhost.myorg.org"), MPI_SUCCESS);
  EXPECT_EQ(keys(info), (std::vector<std::string>{"file", "soft", "host"}));
  EXPECT_EQ(get(info, "soft"), "2:1000:4,3:1000:7");
  EXPECT_EQ(get(info, "Soft"), "<none>");  // keys are case sensitive
  // Setting again replaces the value in place.
  ASSERT_EQ(MPI_Info_set(info, "file", "other.txt"), MPI_SUCCESS);
  EXPECT_EQ(keys(info), (std::vector<std::string>{"file", "soft", "host"}));
  EXPECT_EQ(get(info, "file"), "other.txt");
  int len = -1, flag = -1;
  ASSERT_EQ(MPI_Info_get_valuelen(info, "host", &len, &flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(len, 16);
  ASSERT_EQ(MPI_Info_get_valuelen(info, "nope", &len, &flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 0);
  // Delete; a missing key is MPI_ERR_INFO_NOKEY.
  ASSERT_EQ(MPI_Info_delete(info, "soft"), MPI_SUCCESS);
  EXPECT_EQ(keys(info), (std::vector<std::string>{"file", "host"}));
  EXPECT_EQ(MPI_Info_delete(info, "soft"), MPI_ERR_INFO_NOKEY);
  // An empty value is a value.
  ASSERT_EQ(MPI_Info_set(info, "empty", ""), MPI_SUCCESS);
  EXPECT_EQ(get(info, "empty"), "");
  ASSERT_EQ(MPI_Info_free(&info), MPI_SUCCESS);
  EXPECT_EQ(info, MPI_INFO_NULL);
}

TEST_F(Info, GetTruncatesToValuelen) {
  MPI_Info& info = make();
  ASSERT_EQ(MPI_Info_set(info, "k", "abcdef"), MPI_SUCCESS);
  char v[8] = "xxxxxxx";
  int flag = 0;
  ASSERT_EQ(MPI_Info_get(info, "k", 3, v, &flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);
  EXPECT_STREQ(v, "abc");
  EXPECT_EQ(v[4], 'x');  // nothing written past valuelen + 1
  ASSERT_EQ(MPI_Info_get(info, "k", 0, v, &flag), MPI_SUCCESS);
  EXPECT_STREQ(v, "");
  EXPECT_EQ(MPI_Info_get(info, "k", -1, v, &flag), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Info_get(info, "k", 3, nullptr, &flag), MPI_ERR_ARG);
}

TEST_F(Info, DupIsIndependent) {
  MPI_Info& a = make();
  ASSERT_EQ(MPI_Info_set(a, "x", "1"), MPI_SUCCESS);
  ASSERT_EQ(MPI_Info_set(a, "y", "2"), MPI_SUCCESS);
  MPI_Info& b = make();
  ASSERT_EQ(MPI_Info_free(&b), MPI_SUCCESS);
  ASSERT_EQ(MPI_Info_dup(a, &b), MPI_SUCCESS);
  EXPECT_NE(a, b);
  EXPECT_EQ(keys(b), (std::vector<std::string>{"x", "y"}));
  ASSERT_EQ(MPI_Info_set(b, "x", "changed"), MPI_SUCCESS);
  ASSERT_EQ(MPI_Info_delete(b, "y"), MPI_SUCCESS);
  EXPECT_EQ(get(infos_[0], "x"), "1");
  EXPECT_EQ(get(infos_[0], "y"), "2");
}

TEST_F(Info, KeyAndValueLimits) {
  MPI_Info& info = make();
  const std::string key_max(MPI_MAX_INFO_KEY, 'k');
  const std::string key_long(MPI_MAX_INFO_KEY + 1, 'k');
  const std::string val_max(MPI_MAX_INFO_VAL, 'v');
  const std::string val_long(MPI_MAX_INFO_VAL + 1, 'v');
  ASSERT_EQ(MPI_Info_set(info, key_max.c_str(), "1"), MPI_SUCCESS);
  EXPECT_EQ(get(info, key_max.c_str()), "1");
  char k[MPI_MAX_INFO_KEY + 1];
  ASSERT_EQ(MPI_Info_get_nthkey(info, 0, k), MPI_SUCCESS);
  EXPECT_EQ(std::string(k), key_max);
  EXPECT_EQ(MPI_Info_set(info, key_long.c_str(), "1"), MPI_ERR_INFO_KEY);
  EXPECT_EQ(MPI_Info_set(info, "", "1"), MPI_ERR_INFO_KEY);
  char v[MPI_MAX_INFO_VAL + 1];
  int flag, len;
  EXPECT_EQ(MPI_Info_get(info, key_long.c_str(), 10, v, &flag), MPI_ERR_INFO_KEY);
  EXPECT_EQ(MPI_Info_get_valuelen(info, key_long.c_str(), &len, &flag), MPI_ERR_INFO_KEY);
  EXPECT_EQ(MPI_Info_delete(info, key_long.c_str()), MPI_ERR_INFO_KEY);
  ASSERT_EQ(MPI_Info_set(info, "v", val_max.c_str()), MPI_SUCCESS);
  EXPECT_EQ(get(info, "v"), val_max);
  EXPECT_EQ(MPI_Info_set(info, "v", val_long.c_str()), MPI_ERR_INFO_VALUE);
  EXPECT_EQ(get(info, "v"), val_max);  // unchanged
  EXPECT_EQ(MPI_Info_set(info, nullptr, "1"), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Info_set(info, "v", nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Info_get_nthkey(info, 2, k), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Info_get_nthkey(info, -1, k), MPI_ERR_ARG);
}

TEST_F(Info, BadHandlesAreErrInfo) {
  MPI_Info stale;
  ASSERT_EQ(MPI_Info_create(&stale), MPI_SUCCESS);
  const MPI_Info freed = stale;
  ASSERT_EQ(MPI_Info_free(&stale), MPI_SUCCESS);
  char v[16];
  int n, flag;
  for (MPI_Info bad : {MPI_INFO_NULL, freed, static_cast<MPI_Info>(12345)}) {
    EXPECT_EQ(MPI_Info_set(bad, "k", "v"), MPI_ERR_INFO) << bad;
    EXPECT_EQ(MPI_Info_get(bad, "k", 15, v, &flag), MPI_ERR_INFO) << bad;
    EXPECT_EQ(MPI_Info_get_nkeys(bad, &n), MPI_ERR_INFO) << bad;
    EXPECT_EQ(MPI_Info_get_nthkey(bad, 0, v), MPI_ERR_INFO) << bad;
    EXPECT_EQ(MPI_Info_get_valuelen(bad, "k", &n, &flag), MPI_ERR_INFO) << bad;
    EXPECT_EQ(MPI_Info_delete(bad, "k"), MPI_ERR_INFO) << bad;
    MPI_Info out;
    EXPECT_EQ(MPI_Info_dup(bad, &out), MPI_ERR_INFO) << bad;
    MPI_Info b = bad;
    EXPECT_EQ(MPI_Info_free(&b), MPI_ERR_INFO) << bad;
  }
  EXPECT_EQ(MPI_Info_create(nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Info_free(nullptr), MPI_ERR_ARG);
  // Fatal by default, naming the call.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  EXPECT_EXIT(MPI_Info_delete(MPI_INFO_NULL, "k"), ::testing::ExitedWithCode(MPI_ERR_INFO),
              "MPI_Info_delete: MPI_ERR_INFO: MPI_INFO_NULL is no info object");
}

TEST_F(Info, InfoEnvTellsTheTruth) {
  const std::string command = get(MPI_INFO_ENV, "command");
  EXPECT_NE(command.find("test_shim"), std::string::npos) << command;
  EXPECT_EQ(get(MPI_INFO_ENV, "maxprocs"), "1");
  char host[MPI_MAX_PROCESSOR_NAME];
  int len;
  ASSERT_EQ(MPI_Get_processor_name(host, &len), MPI_SUCCESS);
  EXPECT_EQ(get(MPI_INFO_ENV, "host"), host);
  struct utsname u{};
  ASSERT_EQ(uname(&u), 0);
  EXPECT_EQ(get(MPI_INFO_ENV, "arch"), u.machine);
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  EXPECT_EQ(get(MPI_INFO_ENV, "wdir"), cwd);
  const std::vector<std::string> k = keys(MPI_INFO_ENV);
  EXPECT_EQ(k.front(), "command");
  // Nothing it cannot know truthfully.
  EXPECT_EQ(get(MPI_INFO_ENV, "soft"), "<none>");
  EXPECT_EQ(get(MPI_INFO_ENV, "file"), "<none>");
  // Predefined and read-only; a dup is an ordinary info object.
  EXPECT_EQ(MPI_Info_set(MPI_INFO_ENV, "host", "elsewhere"), MPI_ERR_INFO);
  EXPECT_EQ(MPI_Info_delete(MPI_INFO_ENV, "host"), MPI_ERR_INFO);
  MPI_Info env = MPI_INFO_ENV;
  EXPECT_EQ(MPI_Info_free(&env), MPI_ERR_INFO);
  EXPECT_EQ(env, MPI_INFO_ENV);
  MPI_Info& d = make();
  ASSERT_EQ(MPI_Info_free(&d), MPI_SUCCESS);
  ASSERT_EQ(MPI_Info_dup(MPI_INFO_ENV, &d), MPI_SUCCESS);
  EXPECT_EQ(keys(d), k);
  ASSERT_EQ(MPI_Info_set(d, "host", "elsewhere"), MPI_SUCCESS);
  EXPECT_EQ(get(MPI_INFO_ENV, "host"), host);
}

// The arguments after the program name: "argv", separated by spaces.
TEST(InfoEnvArgv, ArgumentsSeparatedBySpaces) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // A death-test child runs with gtest's own flags as its arguments.
  EXPECT_EXIT(
      {
        unsetenv("BCS_SEGMENT_FD");
        if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) std::exit(101);
        char v[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        MPI_Info_get(MPI_INFO_ENV, "argv", MPI_MAX_INFO_VAL, v, &flag);
        if (!flag) std::exit(102);
        const std::string argv(v);
        if (argv.find("--gtest_filter=InfoEnvArgv.ArgumentsSeparatedBySpaces ") ==
            std::string::npos)
          std::exit(103);
        std::exit(42);
      },
      ::testing::ExitedWithCode(42), "");
}

// MPI 4.0's MPI_Info_get_string: the length (plus the NUL) always comes
// back; a short buffer gets a cut, terminated value; *buflen 0 asks for the
// length alone (value may then be NULL).
TEST_F(Info, GetStringSaysTheLengthAndCuts) {
  MPI_Info& info = make();
  ASSERT_EQ(MPI_Info_set(info, "host", "abcdefgh"), MPI_SUCCESS);
  int len = 0, flag = -1;
  ASSERT_EQ(MPI_Info_get_string(info, "host", &len, nullptr, &flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 1);
  EXPECT_EQ(len, 9);
  char buf[16];
  std::memset(buf, 'x', sizeof buf);
  len = 4;
  ASSERT_EQ(MPI_Info_get_string(info, "host", &len, buf, &flag), MPI_SUCCESS);
  EXPECT_EQ(std::string(buf), "abc");
  EXPECT_EQ(len, 9);
  len = sizeof buf;
  ASSERT_EQ(MPI_Info_get_string(info, "host", &len, buf, &flag), MPI_SUCCESS);
  EXPECT_EQ(std::string(buf), "abcdefgh");
  len = sizeof buf;
  ASSERT_EQ(MPI_Info_get_string(info, "nope", &len, buf, &flag), MPI_SUCCESS);
  EXPECT_EQ(flag, 0);
  EXPECT_EQ(len, static_cast<int>(sizeof buf));  // untouched
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  len = 4;
  int cls = 0;
  MPI_Error_class(MPI_Info_get_string(info, "host", &len, nullptr, &flag), &cls);
  EXPECT_EQ(cls, MPI_ERR_ARG);
}

// MPI 4.0's MPI_Info_create_env: a new, writable copy of MPI_INFO_ENV.
TEST_F(Info, CreateEnvCopiesInfoEnv) {
  MPI_Info& env = infos_.emplace_back(MPI_INFO_NULL);
  ASSERT_EQ(MPI_Info_create_env(0, nullptr, &env), MPI_SUCCESS);
  EXPECT_EQ(keys(env), keys(MPI_INFO_ENV));
  for (const auto& k : keys(MPI_INFO_ENV)) EXPECT_EQ(get(env, k.c_str()), get(MPI_INFO_ENV, k.c_str()));
  EXPECT_EQ(MPI_Info_set(env, "maxprocs", "7"), MPI_SUCCESS);
  EXPECT_EQ(get(MPI_INFO_ENV, "maxprocs"), "1");
}

TEST_F(Info, CommunicatorInfo) {
  MPI_Info& hints = make();
  ASSERT_EQ(MPI_Info_set(hints, "mpi_assert_no_any_tag", "true"), MPI_SUCCESS);
  MPI_Comm d = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_dup_with_info(MPI_COMM_WORLD, hints, &d), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_set_info(d, hints), MPI_SUCCESS);
  // No hint is used, so the info in use is empty: a new object each time.
  MPI_Info& used = make();
  ASSERT_EQ(MPI_Info_free(&used), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_get_info(d, &used), MPI_SUCCESS);
  EXPECT_NE(used, hints);
  EXPECT_TRUE(keys(used).empty());
  // Errors.
  EXPECT_EQ(MPI_Comm_set_info(d, MPI_INFO_NULL), MPI_ERR_INFO);
  EXPECT_EQ(MPI_Comm_set_info(MPI_COMM_NULL, hints), MPI_ERR_COMM);
  EXPECT_EQ(MPI_Comm_get_info(d, nullptr), MPI_ERR_ARG);
  EXPECT_EQ(MPI_Comm_get_info(MPI_COMM_NULL, &used), MPI_ERR_COMM);
  MPI_Comm out = MPI_COMM_NULL;
  EXPECT_EQ(MPI_Comm_dup_with_info(MPI_COMM_WORLD, 777, &out), MPI_ERR_INFO);
  EXPECT_EQ(out, MPI_COMM_NULL);
  EXPECT_EQ(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, 777, &out), MPI_ERR_INFO);
  ASSERT_EQ(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &out),
            MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_free(&out), MPI_SUCCESS);
  ASSERT_EQ(MPI_Comm_free(&d), MPI_SUCCESS);
}

}  // namespace
