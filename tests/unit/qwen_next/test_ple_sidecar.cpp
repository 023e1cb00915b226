// PLE table streamed from an SSD sidecar (ngram-table.safetensors, MTPLX layout) through a
// tiny LRU with parallel readers gives bit-identical logits to the in-memory table.
#include <gtest/gtest.h>

#include <unistd.h>

#include "golden.h"
#include "writers.h"

namespace ds4::qwen_next::test {
namespace {

namespace fs = std::filesystem;

TEST(QwenPleSidecar, StreamedRowsEqualInMemoryTable) {
  auto src = open_tensor_source(model_dir());
  const fs::path dir = fs::temp_directory_path() / ("ds4_qwen_sidecar_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(model_dir() + "/config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  std::map<std::string, OutTensor> main, table;
  for (const auto& t : src->tensors())
    (t.name.find("ngram_embedding") != std::string::npos ? table : main)[t.name] = plain(t, DType::F32);
  ASSERT_EQ(table.size(), 1u);
  write_safetensors(dir / "model.safetensors", main);
  write_safetensors(dir / "ngram-table.safetensors", table);

  LoadOptions o;
  o.threads = 2;
  o.ple_cache_bytes = 50 * 8 * sizeof(float);  // 50 rows of 8 floats: constant eviction
  o.ple_readers = 4;
  QwenNextModel streamed(open_tensor_source(dir.string()), o);
  auto mem = load_tiny();
  Golden g;
  const auto tokens = g.i32("p300.tokens");
  const auto greedy = g.i32("p300.greedy");
  auto a = streamed.new_state(), b = mem->new_state();
  EXPECT_EQ(streamed.prefill(*a, tokens, 64), mem->prefill(*b, tokens, 64));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(streamed.decode(*a, greedy[size_t(i)]), mem->decode(*b, greedy[size_t(i)]));
  const PleTableStats s = streamed.ple_stats();
  std::printf("[qwen ple sidecar] hits %lld misses %lld evictions %lld bytes %lld\n", (long long)s.hits,
              (long long)s.misses, (long long)s.evictions, (long long)s.bytes_read);
  EXPECT_GT(s.misses, 0);
  EXPECT_GT(s.evictions, 0);
  EXPECT_EQ(s.bytes_read, s.misses * int64_t(8 * sizeof(float)));
  EXPECT_EQ(s.hits + s.misses, (300 + 8) * 4);  // every position gathers 4 n-gram heads
  EXPECT_EQ(mem->ple_stats().misses, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ds4::qwen_next::test
