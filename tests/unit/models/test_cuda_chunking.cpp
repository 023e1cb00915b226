// rows_that_fit (models/cuda_chunking.h): the CUDA models' prefill chunk rows under a memory
// budget, halved from the asked size, never below the verify rows.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "models/cuda_chunking.h"

namespace ds4 {
namespace {

// A scratch of `per_row` bytes a row plus `base_bytes`.
struct Linear {
  size_t per_row, base_bytes;
  size_t operator()(int64_t rows) const { return base_bytes + size_t(rows) * per_row; }
};

TEST(RowsThatFit, KeepsTheAskedRowsWhenTheyFit) {
  EXPECT_EQ(rows_that_fit(16, 1024, 1 << 20, 0, Linear{1024, 0}), 1024);  // exactly the free bytes
  EXPECT_EQ(rows_that_fit(16, 2048, size_t(1) << 40, size_t(1) << 30, Linear{1 << 20, 1 << 20}), 2048);
}

TEST(RowsThatFit, HalvesUntilTheScratchAndTheFixedBytesFit) {
  // 1024 rows need 1 MiB + 64 KiB fixed: over 1 MiB free; 512 rows fit.
  EXPECT_EQ(rows_that_fit(16, 1024, 1 << 20, 64 << 10, Linear{1024, 0}), 512);
  // the per-row cost of 2048 rows at 1000 bytes a row and 300000 free: 2048 -> ... -> 256
  EXPECT_EQ(rows_that_fit(1, 2048, 300000, 0, Linear{1000, 0}), 256);
  // the sizes it tries, in order
  std::vector<int64_t> tried;
  rows_that_fit(16, 1024, 100 * 1024, 0, [&](int64_t r) {
    tried.push_back(r);
    return size_t(r) * 1024;
  });
  EXPECT_EQ(tried, (std::vector<int64_t>{1024, 512, 256, 128, 64}));
}

TEST(RowsThatFit, NeverBelowTheBaseRows) {
  EXPECT_EQ(rows_that_fit(16, 1024, 0, 0, Linear{1024, 0}), 16);       // nothing fits: the base
  EXPECT_EQ(rows_that_fit(16, 8, size_t(1) << 40, 0, Linear{1, 0}), 16);  // asked below the base
  EXPECT_EQ(rows_that_fit(6, 1000, 10 * 1024, 0, Linear{1024, 0}), 7);  // 1000 -> 500 -> ... -> 7 (> 6)
  EXPECT_EQ(rows_that_fit(6, 1000, 5 * 1024, 0, Linear{1024, 0}), 6);   // 7 does not fit: the base
}

}  // namespace
}  // namespace ds4
