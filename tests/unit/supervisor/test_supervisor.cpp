// test-supervisor against real children: healthy, leaking (also in a grandchild),
// never starting, stalled. Each case checks the exit code and the final report line.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct Result {
  int code;
  std::string out;
};

Result run(const std::string& args) {
  const char* bin = std::getenv("DS4_BIN");
  std::string cmd = std::string(bin ? bin : "build/debug/bin") + "/test-supervisor " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  Result r{-1, ""};
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), p)) r.out += buf.data();
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

const char* kLeak =
    "\"import time\nb=[]\nwhile True:\n  b.append(bytearray(8<<20))\n  print(len(b), flush=True)\n  time.sleep(0.02)\"";

}  // namespace

TEST(Supervisor, HealthyChildRunsToTheEnd) {
  Result r = run("256 5 5 -- sh -c 'for i in 1 2 3 4 5; do echo step $i; sleep 0.1; done'");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("step 5"), std::string::npos) << r.out;  // output is relayed
  EXPECT_NE(r.out.find("test-supervisor: peak memory"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exited with code 0"), std::string::npos) << r.out;
}

TEST(Supervisor, PassesTheChildsExitCode) {
  Result r = run("256 5 5 -- sh -c 'echo hi; exit 7'");
  EXPECT_EQ(r.code, 7) << r.out;
}

TEST(Supervisor, LeakingChildIsKilled) {
  Result r = run(std::string("100 5 5 -- python3 -c ") + kLeak);
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_NE(r.out.find("over the limit of 100 MiB"), std::string::npos) << r.out;
}

TEST(Supervisor, LeakInAGrandchildCounts) {
  Result r = run(std::string("100 5 5 -- sh -c 'echo started; python3 -c ") + kLeak + " > /dev/null; echo never'");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_EQ(r.out.find("never"), std::string::npos) << r.out;
}

TEST(Supervisor, NeverStartingChildIsKilled) {
  Result r = run("256 1 5 -- sleep 30");
  EXPECT_EQ(r.code, 4) << r.out;
  EXPECT_NE(r.out.find("no start within 1"), std::string::npos) << r.out;
}

TEST(Supervisor, StalledChildIsKilled) {
  Result r = run("256 5 1 -- sh -c 'echo started; sleep 30'");
  EXPECT_EQ(r.code, 5) << r.out;
  EXPECT_NE(r.out.find("started"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("no progress within 1"), std::string::npos) << r.out;
}
