// The cluster token: from a file or the environment, compared in constant
// time (daemons/common/token.h).
#include "token.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace bcs {
namespace {

class Token : public testing::Test {
 protected:
  void SetUp() override {
    if (const char* e = getenv(kTokenEnv)) saved_ = e;
    unsetenv(kTokenEnv);
    dir_ = std::filesystem::temp_directory_path() / ("bcs-token-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    if (saved_) setenv(kTokenEnv, saved_->c_str(), 1);
  }
  std::string file(const std::string& content, mode_t mode) {
    auto p = (dir_ / std::to_string(n_++)).string();
    std::ofstream(p) << content;
    chmod(p.c_str(), mode);
    return p;
  }
  std::optional<std::string> saved_;
  std::filesystem::path dir_;
  int n_ = 0;
};

TEST_F(Token, FromAPrivateFileWithoutItsNewline) {
  std::string why;
  EXPECT_EQ(load_token(file("s3cret\n", 0600), &why), "s3cret");
  EXPECT_EQ(load_token(file("  a b  \r\n", 0400), &why), "a b");
}

TEST_F(Token, AFileOthersCanReadIsRefused) {
  std::string why;
  EXPECT_FALSE(load_token(file("s3cret\n", 0644), &why));
  EXPECT_NE(why.find("chmod 600"), std::string::npos) << why;
  EXPECT_FALSE(load_token(file("s3cret\n", 0640), &why));
}

TEST_F(Token, AnEmptyOrMissingFileIsAnError) {
  std::string why;
  EXPECT_FALSE(load_token(file("\n", 0600), &why));
  EXPECT_FALSE(load_token((dir_ / "nope").string(), &why));
  EXPECT_NE(why.find("nope"), std::string::npos);
}

TEST_F(Token, FromTheEnvironmentElseNone) {
  std::string why;
  EXPECT_EQ(load_token("", &why), "");
  setenv(kTokenEnv, "from-env", 1);
  EXPECT_EQ(load_token("", &why), "from-env");
  // A file, when given, wins.
  EXPECT_EQ(load_token(file("from-file", 0600), &why), "from-file");
  setenv(kTokenEnv, "", 1);
  EXPECT_EQ(load_token("", &why), "");
}

TEST(TokensEqual, ComparesWholeStrings) {
  EXPECT_TRUE(tokens_equal("abc", "abc"));
  EXPECT_TRUE(tokens_equal("", ""));
  EXPECT_FALSE(tokens_equal("abc", "abd"));
  EXPECT_FALSE(tokens_equal("abc", "ab"));
  EXPECT_FALSE(tokens_equal("ab", "abc"));
  EXPECT_FALSE(tokens_equal("", "a"));
  EXPECT_FALSE(tokens_equal(std::string("a\0b", 3), std::string("a\0c", 3)));
  EXPECT_FALSE(tokens_equal("xbc", "abc"));
}

}  // namespace
}  // namespace bcs
