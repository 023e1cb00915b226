#pragma once
// The CUDA DeepSeek V4 model against the CPU model with ds4's activation quantization on
// (Config::act_quant, the default for ds4-layout files): test_deepseek_v4_actq_cuda and
// test_deepseek_v4_cuda's ds4 GGUF item.
//
// Why a criterion of its own: with act_quant the CPU and the GPU quantize the same way, but a
// value that their f32 rounding (~1e-7 relative, as without act_quant) puts on the other side
// of a rounding boundary of its block quantizes one step (1/254 of the block's max) apart: at
// lm_head's input that alone moves some logits by ~1e-2. Expected: most rows at the f32 level
// (~1e-5), a few rows of a sequence up to ~1e-2, and rarely (a flip that turns a top-k choice)
// more. So each row is one decode step from the same state (the GPU state's checkpoint loaded
// into a CPU state: what one step adds, without the drift of a sequence), and the rows pass
// when their median max |diff| <= kActqMedian and at most a third of them exceed kTol (a
// wrong kernel moves every row far more). Without act_quant every row stays within kTol.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "core/state_sections.h"
#include "models/model.h"
#include "test_common.h"

namespace ds4::cuda_test {

constexpr float kActqTol = 1e-3f;     // a row over it counts against the third
constexpr float kActqMedian = 1e-4f;  // the rows' median max |diff| at most

// Logits rows of the two models, concatenated in the same order.
struct RowsPair {
  std::vector<float> cpu, gpu;
};

// After `prompt` (prefilled on the GPU), `steps` decode steps, each from one state: before
// every step the GPU state's checkpoint is loaded into a fresh CPU state (state_io: the
// sections are interchangeable), both decode the token, and the rows are kept. Tokens: the
// CPU's greedy ones.
inline RowsPair stepwise(Model& cpu, Model& gpu, std::span<const int32_t> prompt, int steps) {
  const int64_t V = gpu.info().vocab_size;
  RowsPair r;
  auto sg = gpu.new_state();
  const auto l0 = gpu.prefill(*sg, prompt);
  int32_t t = argmax(l0.data(), V);
  for (int i = 0; i < steps; ++i) {
    std::vector<StateSection> sec;
    sg->save(sec);
    auto sc = cpu.new_state();
    sc->load(sec);
    const auto lc = cpu.decode(*sc, t), lg = gpu.decode(*sg, t);
    r.cpu.insert(r.cpu.end(), lc.begin(), lc.end());
    r.gpu.insert(r.gpu.end(), lg.begin(), lg.end());
    t = argmax(lc.data(), V);
  }
  return r;
}

// `prompt` prefilled on both, then `steps` decode steps with the CPU's greedy tokens: every
// logits row of each (the prefill row, then one per step), the sequence with its drift.
inline RowsPair teacher_forced(Model& cpu, Model& gpu, std::span<const int32_t> prompt, int steps) {
  const int64_t V = gpu.info().vocab_size;
  RowsPair r;
  auto sc = cpu.new_state(), sg = gpu.new_state();
  auto lc = cpu.prefill(*sc, prompt), lg = gpu.prefill(*sg, prompt);
  for (int i = 0;; ++i) {
    r.cpu.insert(r.cpu.end(), lc.begin(), lc.end());
    r.gpu.insert(r.gpu.end(), lg.begin(), lg.end());
    if (i == steps) break;
    const int32_t t = argmax(lc.data(), V);
    lc = cpu.decode(*sc, t);
    lg = gpu.decode(*sg, t);
  }
  return r;
}

// Per row max |diff|: the largest, the median, and how many rows exceed `tol`.
struct RowDiffs {
  float worst = INFINITY, median = INFINITY;
  int over = 0, rows = 0;
};
inline RowDiffs row_diffs(const std::vector<float>& a, const std::vector<float>& b, int64_t V, float tol = kActqTol) {
  RowDiffs d;
  if (a.size() != b.size() || a.empty()) return d;
  std::vector<float> rows;
  for (size_t i = 0; i < a.size(); i += size_t(V)) rows.push_back(max_diff(a.data() + i, b.data() + i, size_t(V)));
  d.rows = int(rows.size());
  d.worst = *std::max_element(rows.begin(), rows.end());
  for (float r : rows) d.over += r > tol;
  std::nth_element(rows.begin(), rows.begin() + rows.size() / 2, rows.end());
  d.median = rows[rows.size() / 2];
  return d;
}

// The act_quant criterion above on stepwise rows (row_diffs with kActqTol).
inline bool actq_rows_ok(const RowDiffs& d) { return d.rows > 0 && d.median <= kActqMedian && d.over * 3 <= d.rows; }

}  // namespace ds4::cuda_test
