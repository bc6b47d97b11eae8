// The rank-label line splitter (daemons/cli/output.h).
#include "output.h"

#include <gtest/gtest.h>

#include <algorithm>
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

TEST(LineLabeler, AHugeLineWithoutNewlineIsCutAndNeverHeldWhole) {
  // 64 MiB without a newline, in the 64 KiB pieces a node manager sends
  // (the case is 512 MiB: the bound is the same, only slower).
  size_t sunk = 0, lines = 0, longest = 0, max_pending = 0;
  std::string tail;
  LineLabeler l(true, [&](int, std::string_view d) {
    sunk += d.size();
    for (size_t p = 0; p < d.size();) {
      size_t nl = d.find('\n', p);
      ASSERT_NE(nl, std::string_view::npos) << "labelled output is whole lines";
      ASSERT_EQ(d.substr(p, 4), "[3] ");
      longest = std::max(longest, nl - p - 4);
      ++lines;
      p = nl + 1;
    }
  });
  const std::string piece(64 * 1024, 'x');
  const size_t total = 64u << 20;
  for (size_t fed = 0; fed < total; fed += piece.size()) {
    l.feed(3, 0, piece);
    max_pending = std::max(max_pending, l.pending_bytes());
  }
  EXPECT_LT(max_pending, LineLabeler::kMaxLine);
  l.flush();
  EXPECT_EQ(longest, LineLabeler::kMaxLine);
  EXPECT_EQ(lines, total / LineLabeler::kMaxLine);
  EXPECT_EQ(sunk, total + lines * 5);  // every byte, plus "[3] " and "\n" per line
}

TEST(LineLabeler, ALineOfExactlyTheBoundStaysOneLine) {
  Capture c;
  LineLabeler l(true, c.sink());
  l.feed(0, 0, std::string(LineLabeler::kMaxLine, 'a') + "\n");
  l.feed(0, 0, std::string(LineLabeler::kMaxLine + 1, 'b') + "\n");
  l.flush();
  const std::string a(LineLabeler::kMaxLine, 'a'), b(LineLabeler::kMaxLine, 'b');
  EXPECT_EQ(c.out, "[0] " + a + "\n[0] " + b + "\n[0] b\n");
}

}  // namespace
}  // namespace bcs::cli
