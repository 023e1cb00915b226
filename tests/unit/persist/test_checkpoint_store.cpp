// Checkpoint store: longest-prefix restore across a restart, faults reported and skipped,
// budget eviction, full disk, kill -9 during a write.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "persist/atomic_file.h"
#include "persist/checkpoint_store.h"
#include "temp_dir.h"

namespace ds4 {
namespace {
namespace fs = std::filesystem;

const std::string kModel = "qwen_next:tiny";

Checkpoint at_prefix(const std::vector<int32_t>& all, size_t n, size_t state_bytes = 1000) {
  Checkpoint c;
  c.fingerprint = kModel;
  c.tokens.assign(all.begin(), all.begin() + long(n));
  // State bytes derived from the prefix, so a wrong restore shows in the content.
  std::vector<uint8_t> s(state_bytes);
  for (size_t i = 0; i < s.size(); ++i) s[i] = uint8_t(n * 31 + i);
  c.sections.push_back({"state", s});
  return c;
}

std::vector<int32_t> history(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 13) % 97);
  return t;
}

TEST(CheckpointStore, RestoresLongestPrefixAfterRestart) {
  TempDir dir;
  auto h = history(100);
  {
    CheckpointStore store({dir.path(), 1 << 20});
    store.save_async(at_prefix(h, 20));
    store.save_async(at_prefix(h, 60));
    store.save_async(at_prefix(h, 90));
  }  // destructor finishes the queued saves: the "server" stops
  CheckpointStore store({dir.path(), 1 << 20});
  ASSERT_EQ(store.entries().size(), 3u);
  // The new prompt shares 75 tokens with the history, then diverges.
  auto prompt = h;
  prompt.resize(75);
  prompt.push_back(5000);
  auto got = store.restore_longest(kModel, prompt);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tokens.size(), 60u);
  EXPECT_EQ(got->find("state")->bytes, at_prefix(h, 60).sections[0].bytes);
  EXPECT_FALSE(store.restore_longest("glm5:other", prompt).has_value());
  EXPECT_EQ(store.stats().restores, 1u);
}

TEST(CheckpointStore, DamagedCheckpointIsReportedDeletedAndTheNextBestUsed) {
  TempDir dir;
  auto h = history(50);
  CheckpointStore store({dir.path(), 1 << 20});
  store.save_async(at_prefix(h, 10));
  store.save_async(at_prefix(h, 40));
  store.flush();
  std::string longest;
  for (const auto& e : store.entries())
    if (e.token_count == 40) longest = dir.file(e.file);
  fs::resize_file(longest, fs::file_size(longest) - 3);  // truncated
  auto got = store.restore_longest(kModel, h);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tokens.size(), 10u);
  EXPECT_FALSE(fs::exists(longest));
  auto problems = store.take_problems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("truncated"), std::string::npos) << problems[0];
  EXPECT_EQ(store.stats().rejected, 1u);
}

TEST(CheckpointStore, MissingOrCorruptManifestIsRebuiltFromHeaders) {
  TempDir dir;
  auto h = history(30);
  {
    CheckpointStore store({dir.path(), 1 << 20});
    store.save_async(at_prefix(h, 10));
    store.save_async(at_prefix(h, 25));
  }
  {
    std::ofstream(dir.file("manifest.json")) << "{not json";
  }
  CheckpointStore store({dir.path(), 1 << 20});
  EXPECT_EQ(store.entries().size(), 2u);
  auto got = store.restore_longest(kModel, h);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tokens.size(), 25u);
}

TEST(CheckpointStore, BudgetEvictsLeastRecentlyUsed) {
  TempDir dir;
  auto h = history(100);
  // Each checkpoint is a little over 1000 bytes: a budget of 3900 holds three.
  CheckpointStore store({dir.path(), 3900});
  store.save_async(at_prefix(h, 10));
  store.save_async(at_prefix(h, 20));
  store.save_async(at_prefix(h, 30));
  store.flush();
  ASSERT_TRUE(store.restore_longest(kModel, std::vector<int32_t>(h.begin(), h.begin() + 15)));  // touches 10
  store.save_async(at_prefix(h, 40));
  store.flush();
  std::vector<uint64_t> kept;
  for (const auto& e : store.entries()) kept.push_back(e.token_count);
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept, (std::vector<uint64_t>{10, 30, 40}));
  EXPECT_EQ(store.stats().evictions, 1u);
  EXPECT_LE(store.total_bytes(), 3900u);
}

TEST(CheckpointStore, FullDiskFailsTheSaveCleanlyAndKeepsEarlierCheckpoints) {
  TempDir dir;
  auto h = history(40);
  CheckpointStore store({dir.path(), 1 << 30});
  store.save_async(at_prefix(h, 10));
  store.flush();
  // Simulate a full disk: a file size limit makes write() fail with EFBIG.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old {};
  sigaction(SIGXFSZ, &ignore, &old);
  rlimit old_lim{};
  getrlimit(RLIMIT_FSIZE, &old_lim);
  rlimit lim = old_lim;
  lim.rlim_cur = 4096;
  setrlimit(RLIMIT_FSIZE, &lim);
  store.save_async(at_prefix(h, 30, 100000));
  store.flush();
  setrlimit(RLIMIT_FSIZE, &old_lim);
  sigaction(SIGXFSZ, &old, nullptr);
  EXPECT_EQ(store.stats().save_failures, 1u);
  auto problems = store.take_problems();
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("save failed"), std::string::npos);
  for (const auto& f : fs::directory_iterator(dir.path()))
    EXPECT_EQ(f.path().filename().string().find(".tmp."), std::string::npos) << "temp file left behind";
  auto got = store.restore_longest(kModel, h);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tokens.size(), 10u);
}

TEST(CheckpointStore, WriterBehindDropsOldestQueuedSaveNeverTheNewest) {
  TempDir dir;
  auto h = history(200);
  CheckpointStoreOptions o{dir.path(), uint64_t(1) << 30};
  o.max_queued = 1;
  CheckpointStore store(o);
  for (size_t n = 10; n <= 200; n += 10) store.save_async(at_prefix(h, n, 200000));
  store.flush();
  const auto s = store.stats();
  EXPECT_EQ(s.saves + s.save_failures, 20u);  // every save either written or dropped and counted
  EXPECT_EQ(store.take_problems().size(), s.save_failures);
  // The newest state is always kept: it supersedes the dropped ones.
  auto got = store.restore_longest(kModel, h);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tokens.size(), 200u);
}

TEST(AtomicFile, KillDuringWriteLosesNothingCommitted) {
  TempDir dir;
  std::string path = dir.file("x.ckpt");
  auto h = history(20);
  write_checkpoint(path, at_prefix(h, 20));
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Rewrite the same file, stalling half-way: the parent kills us there.
    write_file_atomic(path, [](FileWriter& w) {
      std::vector<uint8_t> junk(4096, 0xee);
      w.write(junk.data(), junk.size());
      for (;;) pause();
    });
    _exit(0);
  }
  std::string tmp = path + ".tmp." + std::to_string(child);
  for (int i = 0; i < 500 && !(fs::exists(tmp) && fs::file_size(tmp) == 4096); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(fs::exists(tmp));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  Checkpoint c = read_checkpoint(path, kModel);  // the committed file is intact
  EXPECT_EQ(c.tokens, h);
  remove_stale_temps(dir.path());
  EXPECT_FALSE(fs::exists(tmp));
}

// Robustness sweep of the checkpoint directory (black-box probes of ds4server serve).

TEST(CheckpointStore, UnusableDirectoryIsAStartupErrorNamingWhy) {
  TempDir dir;
  const std::string file = dir.file("plain");
  std::ofstream(file) << "x";
  auto error_of = [](const std::string& d) {
    try {
      CheckpointStore store({d, 1 << 20});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of(file), "checkpoint dir " + file + " cannot be created: it exists and is not a directory");
  EXPECT_EQ(error_of(file + "/sub"), "checkpoint dir " + file + "/sub cannot be created: Not a directory");
  // A directory we cannot write (sysfs refuses new files even to root, whom mode bits would
  // not stop): before, every save failed at runtime, each only a warning. EACCES or EROFS.
  if (fs::is_directory("/sys/kernel"))
    EXPECT_EQ(error_of("/sys/kernel").rfind("checkpoint dir /sys/kernel is not writable: ", 0), 0u)
        << error_of("/sys/kernel");
  EXPECT_EQ(error_of(dir.file("fresh/sub")), "");  // made on the way
  for (const auto& f : fs::directory_iterator(dir.file("fresh/sub")))
    EXPECT_EQ(f.path().filename(), "manifest.json") << "the write probe was left behind";
}

TEST(CheckpointStore, DirectoryDeletedWhileRunningIsMadeAgain) {
  TempDir dir;
  auto h = history(30);
  CheckpointStore store({dir.file("ck"), 1 << 20});
  store.save_async(at_prefix(h, 10));
  store.flush();
  fs::remove_all(dir.file("ck"));
  store.save_async(at_prefix(h, 20));
  store.flush();
  EXPECT_EQ(store.stats().save_failures, 0u);
  EXPECT_EQ(store.stats().saves, 2u);
  auto got = store.restore_longest(kModel, h);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tokens.size(), 20u);
}

TEST(CheckpointStore, CheckpointLargerThanTheBudgetEvictsNothing) {
  TempDir dir;
  auto h = history(100);
  CheckpointStore store({dir.path(), 3000});
  store.save_async(at_prefix(h, 10));
  store.save_async(at_prefix(h, 20));
  store.flush();
  // Before, the store wrote it, evicted both others to make room, then evicted it too.
  const Checkpoint big = at_prefix(h, 30, 5000);
  store.save_async(big);
  store.flush();
  EXPECT_EQ(store.entries().size(), 2u);
  EXPECT_EQ(store.stats().evictions, 0u);
  EXPECT_EQ(store.stats().save_failures, 1u);
  auto problems = store.take_problems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "save skipped: the checkpoint needs " + std::to_string(checkpoint_size(big)) +
                             " bytes, more than the whole budget of 3000 bytes (checkpoint.budget_bytes)");
  EXPECT_EQ(checkpoint_size(big), write_checkpoint(dir.file("probe.bin"), big));  // the size is exact
  auto got = store.restore_longest(kModel, h);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tokens.size(), 20u);
}

TEST(CheckpointStore, CommittedCheckpointMissingFromTheManifestIsKept) {
  TempDir dir;
  auto h = history(60);
  {
    CheckpointStore store({dir.path(), 1 << 20});
    store.save_async(at_prefix(h, 10));
  }
  // A kill -9 between a checkpoint's rename and the manifest's rewrite: the file is
  // committed, the manifest is valid but does not list it.
  const std::string manifest = [&] {
    std::ifstream in(dir.file("manifest.json"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  {
    CheckpointStore store({dir.path(), 1 << 20});
    store.save_async(at_prefix(h, 50));
  }
  std::ofstream(dir.file("manifest.json")) << manifest;
  CheckpointStore store({dir.path(), 1 << 20});
  EXPECT_EQ(store.entries().size(), 2u);
  EXPECT_EQ(store.total_bytes(),
            fs::file_size(dir.file(store.entries()[0].file)) + fs::file_size(dir.file(store.entries()[1].file)));
  auto got = store.restore_longest(kModel, h);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tokens.size(), 50u);  // was 10: the newest save was never restored again
}

TEST(CheckpointStore, ManifestByteCountsAreTakenFromTheFiles) {
  TempDir dir;
  auto h = history(60);
  {
    CheckpointStore store({dir.path(), 1 << 20});
    store.save_async(at_prefix(h, 10));
    store.save_async(at_prefix(h, 20));
  }
  // A damaged count in the manifest (still valid JSON) made the next save evict everything.
  std::string text = [&] {
    std::ifstream in(dir.file("manifest.json"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }();
  const auto at = text.find("\"bytes\":");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 8, "9999999");
  std::ofstream(dir.file("manifest.json")) << text;
  CheckpointStore store({dir.path(), 4000});
  EXPECT_LT(store.total_bytes(), 4000u);
  store.save_async(at_prefix(h, 30));
  store.flush();
  EXPECT_EQ(store.stats().evictions, 0u);
  EXPECT_EQ(store.entries().size(), 3u);
}

}  // namespace
}  // namespace ds4
