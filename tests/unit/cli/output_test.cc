// The rank-label line splitter (daemons/cli/output.h).
#include "output.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace bcs::cli {
namespace {

struct Capture {
  std::string out, err;
  std::vector<std::string> calls;
  LineLabeler::Sink sink() {
    return [this](int stream, std::string_view d) {
      (stream == 1 ? err : out).append(d);
      calls.emplace_back(d);
    };
  }
};

TEST(LineLabeler, PassThroughWithoutLabels) {
  Capture c;
  LineLabeler l(false, c.sink());
  l.feed(0, 0, "ab");
  l.feed(1, 1, "c\nd");
  l.feed(0, 0, "\n");
  l.flush();
  EXPECT_EQ(c.out, "ab\n");
  EXPECT_EQ(c.err, "c\nd");
}

TEST(LineLabeler, LinesOfDifferentRanksAreNeverTorn) {
  Capture c;
  LineLabeler l(true, c.sink());
  l.feed(0, 0, "hel");
  l.feed(1, 0, "x\ny");
  l.feed(0, 0, "lo\nwor");
  l.feed(1, 0, "y\n");
  l.feed(0, 0, "ld\n");
  l.flush();
  EXPECT_EQ(c.out, "[1] x\n[0] hello\n[1] yy\n[0] world\n");
  EXPECT_EQ(c.err, "");
}

TEST(LineLabeler, StreamsAreSeparate) {
  Capture c;
  LineLabeler l(true, c.sink());
  l.feed(3, 0, "out-");
  l.feed(3, 1, "err\n");
  l.feed(3, 0, "line\n");
  EXPECT_EQ(c.out, "[3] out-line\n");
  EXPECT_EQ(c.err, "[3] err\n");
}

TEST(LineLabeler, SeveralLinesInOneChunkAreOneWrite) {
  Capture c;
  LineLabeler l(true, c.sink());
  l.feed(2, 0, "a\nb\n\nc");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0], "[2] a\n[2] b\n[2] \n");
  l.flush();
  EXPECT_EQ(c.out, "[2] a\n[2] b\n[2] \n[2] c\n");
}

TEST(LineLabeler, FlushEmitsRemaindersOnceWithANewline) {
  Capture c;
  LineLabeler l(true, c.sink());
  l.feed(0, 0, "no newline");
  l.feed(1, 1, "partial");
  EXPECT_EQ(c.out, "");
  l.flush();
  l.flush();
  EXPECT_EQ(c.out, "[0] no newline\n");
  EXPECT_EQ(c.err, "[1] partial\n");
}

TEST(LineLabeler, BinaryDataSurvives) {
  Capture c;
  LineLabeler l(true, c.sink());
  std::string data("a\0b\n", 4);
  l.feed(0, 0, data);
  EXPECT_EQ(c.out, std::string("[0] a\0b\n", 8));
}

}  // namespace
}  // namespace bcs::cli
