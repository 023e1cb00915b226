// core/progress.h: what a load prints on a terminal (one \r bar line) and when piped (plain
// lines every 10%, no carriage returns or ANSI codes), written to a temporary file.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/progress.h"

namespace ds4 {
namespace {

struct Capture {
  std::FILE* f = std::tmpfile();
  ~Capture() { std::fclose(f); }
  std::string text() {
    std::fflush(f);
    std::string s;
    std::rewind(f);
    for (int c; (c = std::fgetc(f)) != EOF;) s.push_back(char(c));
    return s;
  }
};

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

constexpr uint64_t kGB = 1000000000ull;

void drive(ByteProgress& p, uint64_t total, int steps) {
  for (int i = 1; i <= steps; ++i) p.update(total * uint64_t(i) / uint64_t(steps), total, 0.5 * i);
  p.finish(total, 0.5 * steps);
}

TEST(ByteProgress, PipedPrintsPlainLinesEveryTenPercent) {
  Capture cap;
  ByteProgress p("glm5 weights", "auto", /*tty=*/false, cap.f);
  drive(p, 8 * kGB, 1000);
  const std::string s = cap.text();
  EXPECT_EQ(s.find('\r'), std::string::npos);
  EXPECT_EQ(s.find('\x1b'), std::string::npos);
  EXPECT_EQ(count(s, "\n"), 10u) << s;  // 10% .. 90%, then the closing line
  EXPECT_NE(s.find("glm5 weights: 10% (800/8000 MB, "), std::string::npos) << s;
  EXPECT_NE(s.find("glm5 weights: 90% (7200/8000 MB, "), std::string::npos) << s;
  EXPECT_NE(s.find("glm5 weights: 8000 MB in 500.0 s (16 MB/s)\n"), std::string::npos) << s;
}

TEST(ByteProgress, PipedFewUpdatesStillAtMostOneLineEach) {
  Capture cap;
  ByteProgress p("w", "auto", false, cap.f);
  drive(p, 2 * kGB, 2);  // 50% then 100%: one step line, then the closing line
  const std::string s = cap.text();
  EXPECT_EQ(count(s, "\n"), 2u) << s;
  EXPECT_NE(s.find("w: 50% (1000/2000 MB, 2000 MB/s)\n"), std::string::npos) << s;
}

TEST(ByteProgress, TerminalDrawsOneCarriageReturnLine) {
  Capture cap;
  ByteProgress p("qwen_next weights", "auto", /*tty=*/true, cap.f);
  drive(p, 4 * kGB, 4);
  const std::string s = cap.text();
  EXPECT_GE(count(s, "\r["), 1u) << s;
  EXPECT_NE(s.find("/4000 MB qwen_next weights, "), std::string::npos) << s;
  EXPECT_EQ(count(s, "\n"), 1u) << s;  // only the closing line ends a line
  EXPECT_NE(s.find("\r\x1b[Kqwen_next weights: 4000 MB in 2.0 s (2000 MB/s)\n"), std::string::npos) << s;
}

TEST(ByteProgress, NoteJoinsTheClosingLine) {
  Capture cap;
  ByteProgress p("w", "auto", false, cap.f);
  p.finish(2 * kGB, 1.0, "3 pageable copies (no pinned staging)");
  EXPECT_EQ(cap.text(), "w: 2000 MB in 1.0 s (2000 MB/s), 3 pageable copies (no pinned staging)\n");
}

TEST(ByteProgress, OffAndSmallLoadsPrintNothing) {
  Capture off, small;
  ByteProgress a("w", "off", true, off.f);
  drive(a, 8 * kGB, 10);
  ByteProgress b("w", "auto", false, small.f);  // below the 1 GiB quiet threshold
  drive(b, 100000000, 10);
  EXPECT_EQ(off.text(), "");
  EXPECT_EQ(small.text(), "");
}

TEST(Progress, BarOnlyOnATerminalUnlessForced) {
  Capture piped, tty, on;
  Progress a("auto", false, piped.f), b("auto", true, tty.f), c("on", false, on.f);
  EXPECT_FALSE(a.enabled());
  EXPECT_TRUE(b.enabled());
  EXPECT_TRUE(c.enabled());
  a.update("x", 1, 2, true);
  b.update("x", 1, 2, true);
  EXPECT_EQ(piped.text(), "");
  EXPECT_EQ(tty.text().rfind("\r[", 0), 0u);
}

}  // namespace
}  // namespace ds4
