// Checkpoint file format: exact round trip, and every kind of damage is detected.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "persist/checkpoint_file.h"
#include "persist/crc32c.h"
#include "persist/prefix_hash.h"
#include "temp_dir.h"

namespace ds4 {
namespace {
namespace fs = std::filesystem;

Checkpoint sample(int n_tokens = 37, size_t kv_bytes = 5000) {
  Checkpoint c;
  c.fingerprint = "qwen_next:abc123";
  for (int i = 0; i < n_tokens; ++i) c.tokens.push_back(i * 7 + 3);
  std::mt19937 rng(5);
  CheckpointSection kv{"kv", std::vector<uint8_t>(kv_bytes)};
  for (auto& b : kv.bytes) b = uint8_t(rng());
  c.sections.push_back(kv);
  c.sections.push_back({"recurrent", {1, 2, 3}});
  return c;
}

std::vector<uint8_t> slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& p, const std::vector<uint8_t>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

TEST(Crc32c, KnownVector) {
  // RFC 3720 check value for "123456789".
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c("56789", 5, crc32c("1234", 4)), 0xE3069283u);
}

TEST(PrefixHash, ChainMatchesWholeHashAndSeparatesPrefixes) {
  std::vector<int32_t> t = {1, 2, 3, 4};
  auto chain = prefix_hash_chain(t);
  ASSERT_EQ(chain.size(), 5u);
  EXPECT_EQ(chain[4], prefix_hash(t));
  EXPECT_EQ(chain[2], prefix_hash(std::span<const int32_t>(t).first(2)));
  std::vector<int32_t> swapped = {2, 1, 3, 4};
  EXPECT_NE(prefix_hash(swapped), prefix_hash(t));
}

TEST(CheckpointFile, RoundTripIsExact) {
  TempDir dir;
  auto c = sample();
  std::string p = dir.file("a.ckpt");
  uint64_t n = write_checkpoint(p, c);
  EXPECT_EQ(n, fs::file_size(p));
  Checkpoint r = read_checkpoint(p, c.fingerprint);
  EXPECT_EQ(r.tokens, c.tokens);
  ASSERT_EQ(r.sections.size(), 2u);
  EXPECT_EQ(r.find("kv")->bytes, c.sections[0].bytes);
  EXPECT_EQ(r.find("recurrent")->bytes, c.sections[1].bytes);
  CheckpointHeader h = read_checkpoint_header(p);
  EXPECT_EQ(h.token_count, 37u);
  EXPECT_EQ(h.prefix_hash, prefix_hash(c.tokens));
}

TEST(CheckpointFile, EveryTruncationIsDetected) {
  TempDir dir;
  std::string p = dir.file("a.ckpt");
  write_checkpoint(p, sample(5, 64));
  auto bytes = slurp(p);
  for (size_t len = 0; len < bytes.size(); ++len) {
    spit(p, std::vector<uint8_t>(bytes.begin(), bytes.begin() + long(len)));
    EXPECT_THROW(read_checkpoint(p, ""), InputError) << "length " << len;
  }
}

TEST(CheckpointFile, EveryFlippedByteIsDetected) {
  TempDir dir;
  std::string p = dir.file("a.ckpt");
  write_checkpoint(p, sample(5, 64));
  auto bytes = slurp(p);
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto bad = bytes;
    bad[i] ^= 0x5a;
    spit(p, bad);
    EXPECT_THROW(read_checkpoint(p, ""), CheckpointError) << "byte " << i;
  }
}

TEST(CheckpointFile, ForeignVersionAndOtherModelAreRefusedWithReason) {
  TempDir dir;
  std::string p = dir.file("a.ckpt");
  write_checkpoint(p, sample());
  auto bytes = slurp(p);
  bytes[8] = 2;  // version field follows the 8-byte magic
  spit(p, bytes);
  try {
    read_checkpoint(p, "");
    FAIL() << "foreign version accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("version 2"), std::string::npos) << e.what();
  }
  write_checkpoint(p, sample());
  try {
    read_checkpoint(p, "glm5:other");
    FAIL() << "other model accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
}

TEST(CheckpointFile, ReservedOrEmptySectionNamesAreRejectedOnWrite) {
  TempDir dir;
  auto c = sample();
  c.sections.push_back({"tokens", {}});
  EXPECT_THROW(write_checkpoint(dir.file("a.ckpt"), c), Error);
  EXPECT_FALSE(fs::exists(dir.file("a.ckpt")));
}

}  // namespace
}  // namespace ds4
