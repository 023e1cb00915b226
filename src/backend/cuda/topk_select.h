#pragma once
// Top-k selection of score rows for the sparse-attention indexers (Qwen QSA blocks, GLM DSA
// pools, DeepSeek V4 lightning-indexer entries): per row, the k entries first in the order
// (score descending, index ascending), the order of cpu::topk_f32 and of the rank
// definition rank(i) = #{j : x[j] > x[i] || (x[j] == x[i] && j < i)}, kept iff rank(i) < k.
// The set is exact (comparisons only), deterministic, one launch for all rows, no host sync.
#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::cuda {

// How many scores row r has, read on the device when the kernel runs (so a captured graph
// takes each step's position): n = (pos[r * pos_stride] + r * row_step + 1) / ratio.
//   Qwen / GLM: a position per row (pos_stride 1, row_step 0), ratio = block / pool size;
//   DeepSeek V4: one base position for consecutive rows (pos_stride 0, row_step 1).
struct TopkCount {
  const int32_t* pos = nullptr;  // device
  int64_t pos_stride = 1, row_step = 0, ratio = 1;
  // DeepSeek V4's decode batch (one token of each of several sequences): row r's position is
  // the counter shift[r * shift_stride] bytes from pos (each sequence's own state buffer);
  // pos_stride and row_step are then not read. null: as above.
  const int64_t* shift = nullptr;
  int64_t shift_stride = 0;
};

struct TopkSelectArgs {
  const float* scores = nullptr;  // row r at r * score_stride: {n} (not read when n <= k)
  int64_t score_stride = 0;
  int64_t k = 0;
  TopkCount n;
  int64_t rows = 1;
  uint8_t* keep = nullptr;  // row r at r * keep_stride bytes: keep[0..n) = 0/1; null: no mask
  int64_t keep_stride = 0;
  int32_t* list = nullptr;   // row r at r * list_stride: the kept indices ascending; null: none
  int32_t* count = nullptr;  // row r at r * count_stride: how many (= min(n, k)); with list
  int64_t list_stride = 0, count_stride = 0;
};

// Per row: n <= k keeps all n (keep = 1, list 0..n-1) without reading the scores; n > k
// keeps exactly k. Ties at the boundary go to the lower indices; -0.0 == +0.0 (float
// compare); +-inf order as numbers. NaN ranks below every number, -inf included (NaNs among
// themselves by index), so a row always keeps exactly min(n, k) entries. (The old per-model
// rank kernels gave a NaN rank 0, keeping every NaN on top of the k best numbers;
// cpu::topk_f32 has no defined order for NaN.) Entries >= n are never written. k < 1 keeps
// nothing (count 0). One block of 1024 threads per row: a 4 x 8-bit radix select of the
// k-th key, then an index-ordered fill; O(n) per row, 6 reads of the row (L2-resident).
void topk_select_f32(const TopkSelectArgs& a, cudaStream_t stream);

}  // namespace ds4::cuda
