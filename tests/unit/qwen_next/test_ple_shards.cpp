// The PLE n-gram table read as HF save_pretrained writes it: row shards (unequal sizes)
// concatenated in order, gathered in place.
#include <gtest/gtest.h>

#include <vector>

#include "core/error.h"
#include "models/qwen_next/ple_table.h"

namespace ds4::qwen_next {
namespace {

WeightMatrix f32(const std::vector<float>& v, int64_t rows, int64_t cols) {
  WeightMatrix w;
  w.rows = rows;
  w.cols = cols;
  w.data = v.data();
  return w;
}

TEST(PleShards, GatherCrossesShardEdges) {
  // rows 0..4 of a 5 x 2 table: value = 10 * row + col, split 2 / 1 / 2
  const std::vector<float> a = {0, 1, 10, 11}, b = {20, 21}, c = {30, 31, 40, 41};
  auto t = sharded_table({f32(a, 2, 2), f32(b, 1, 2), f32(c, 2, 2)});
  EXPECT_EQ(t->rows(), 5);
  EXPECT_EQ(t->cols(), 2);
  const std::vector<int64_t> ids = {4, 0, 2, 1, 3};
  std::vector<float> out(ids.size() * 2);
  t->gather(ids.data(), int64_t(ids.size()), out.data());
  EXPECT_EQ(out, (std::vector<float>{40, 41, 0, 1, 20, 21, 10, 11, 30, 31}));
  const int64_t bad = 5;
  EXPECT_THROW(t->gather(&bad, 1, out.data()), Error);
}

TEST(PleShards, RefusesMixedWidths) {
  const std::vector<float> a = {0, 1}, b = {2, 3, 4};
  EXPECT_THROW(sharded_table({f32(a, 1, 2), f32(b, 1, 3)}), InputError);
}

}  // namespace
}  // namespace ds4::qwen_next
