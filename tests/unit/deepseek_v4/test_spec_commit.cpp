// Captured-prefix commit of DeepSeek V4 (models/deepseek_v4/spec_commit.cpp), with ds4's MTP
// head and with MTPLX's DSpark drafter: after one captured verify window of 4 rows, keeping
// any prefix 1..4 equals the AR state section by section (sliding window, compressor and
// indexer lanes: open window, Ca half, entries; MTP window and last y; DSpark rings), within
// 2e-5 of each section's scale (batched vs one-row summation order). Prompt lengths put the
// sliding window's fill edge (16), CSA closes (ratio 4) and an HCA close (ratio 16) inside the
// window. A commit that keeps one row too many, and perturbed states, are caught.
#include <gtest/gtest.h>

#include <filesystem>

#include "capture_commit_test_util.h"
#include "draft_head_test_util.h"
#include "golden.h"
#include "models/model.h"

namespace ds4_test {
namespace {

const std::vector<int32_t> kWindow = {17, 90, 3, 44};

std::unique_ptr<ds4::Model> open_with(const std::string& tag, const std::string& head, const std::string& extra = "") {
  return ds4::draft_test::load_with_head(tag, kModelDir, head, extra);
}

// Prompt of `len` tokens, head enabled (and, for MTP, its history used once by a draft).
std::unique_ptr<ds4::ModelState> base(ds4::Model& m, int64_t len) {
  const int64_t V = m.info().vocab_size;
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < len; ++i) prompt.push_back(int32_t((37 * i + 11) % V));
  auto s = m.new_state();
  m.draft_head()->enable_draft(*s);
  m.prefill(*s, prompt);
  std::vector<int32_t> d;
  m.draft_head()->draft(*s, 5, 2, d);
  return s;
}

void check_all(ds4::Model& m) {
  for (int64_t len : {13, 14, 15, 16, 29, 30}) {
    auto b = base(m, len);
    EXPECT_EQ(ds4::draft_test::commit_vs_ar(m, *b, kWindow), "") << "prompt " << len;
  }
}

TEST(DeepseekSpecCommit, MtpEqualsArStateAtEveryKeep) {
  auto m = open_with("ds4_commit_mtp", std::string(DS4_TEST_DATA) + "/deepseek_v4/mtp/mtp.safetensors");
  check_all(*m);
  auto b = base(*m, 30);
  ds4::draft_test::expect_broken_commit_caught(*m, *b, kWindow);
  for (const char* sec : {"layer.0.window", "layer.2.comp.pend_kv", "layer.2.index.prev_gate", "layer.3.comp.entries",
                          "mtp.window", "mtp.last_y"})
    ds4::draft_test::expect_perturbation_caught(*m, *b, sec);
}

TEST(DeepseekSpecCommit, DsparkEqualsArStateAtEveryKeep) {
  const std::string dir = std::string(DS4_TEST_DATA) + "/deepseek_v4/dspark";
  auto m = open_with("ds4_commit_dspark", dir + "/dspark.safetensors", dir + "/dspark_config.json");
  ASSERT_NE(m->draft_head(), nullptr);
  // draft() is ungated: all five drafts (the test compares chains)
  check_all(*m);
  auto b = base(*m, 30);
  ds4::draft_test::expect_broken_commit_caught(*m, *b, kWindow);
  ds4::draft_test::expect_perturbation_caught(*m, *b, "dspark.ring.1");
}

TEST(DeepseekSpecCommit, RejectsBadKeep) {
  auto m = open_with("ds4_commit_keep", std::string(DS4_TEST_DATA) + "/deepseek_v4/mtp/mtp.safetensors");
  auto s = base(*m, 6);
  ds4::DraftHead& h = *m->draft_head();
  EXPECT_THROW(h.commit_prefix(*s, 1), ds4::Error);  // nothing captured
  std::vector<float> rows;
  ASSERT_TRUE(h.verify_capture(*s, kWindow, rows));
  EXPECT_THROW(h.commit_prefix(*s, 0), ds4::Error);
  EXPECT_THROW(h.commit_prefix(*s, 5), ds4::Error);
  EXPECT_THROW(h.verify_capture(*s, kWindow, rows), ds4::Error);  // uncommitted window
}

}  // namespace
}  // namespace ds4_test
