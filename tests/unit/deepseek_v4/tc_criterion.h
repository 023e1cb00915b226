#pragma once
// The accuracy criterion of DeepSeek V4's tensor-core prefill chunk (issue #22), shared by the
// CPU test that derives it (test_tc_emulation.cpp) and the CUDA test that applies it
// (tests/cuda/test_deepseek_v4_cuda.cu item 8).
//
// Why not a plain max |logit diff| vs the exact model: TF32 operands (2^-11 relative) move
// the first layers' HC state by ~1e-3 relative, and the model's discrete steps (the CSA
// indexer's top-k of compressed entries, the experts' top-k, and in ds4 files the FP8 / FP4
// row round trips) turn that into different selections for some rows, i.e. jumps of O(1) in
// some logits. The CPU model rounding the same operands (set_tensor_core_emulation) shows it
// on the tiny 5-layer model: max |diff| 1.9, 3 of 300 argmax flips, all at top-2 margins under
// 0.4, the layer-0 state within 1.1e-3 relative RMS and a jump at layer 2, the first indexer
// layer (test_tc_emulation prints it). The GPU itself, against that emulation, still shows
// O(1) jumps in a few rows (H200, bench/results/cuda-prefill-h200-2026-12-04b: max 0.79 / 0.53,
// one argmax flip at a margin of 0.12): its tensor-core sums differ from the CPU's FP32 sums
// by more than FP32 ordering, and a near-tie in a top-k turns that into a jump too. So no
// bound on the max is honest; the criterion bounds the bulk and the clear decisions:
//  (a) vs the CPU model with the same operand rounding: p50 |diff| <= kVsEmulatedP50, mean
//      <= kVsEmulatedMean (H200: p50 6e-4..7e-4, mean 1.7e-3..4.4e-3), the same argmax
//      wherever that reference's top-2 margin exceeds kMargin. Another operand rounding
//      breaks it (the truncating emulation vs the nearest one: p50 5.6e-3..6.8e-3), and so
//      does a wrong product, row or tile (O(1) everywhere);
//  (b) vs the exact CPU model, the price of the precision: p50 |diff| <= kP50, mean <= kMean
//      (emulation and H200: p50 3e-3..9e-3, mean 9e-3..3.2e-2), the same argmax wherever the
//      exact top-2 margin exceeds kMargin (flips seen: margins <= 0.38).
// What it cannot see: a bug confined to a few rows looks like a discrete jump; the exact path's
// bit-for-bit items (same row logic, only the products differ) and test_cuda_matmul's GEMMs vs
// a double reference cover those.
#include "../common/logit_agreement.h"

namespace ds4_test::tc_criterion {

inline constexpr float kVsEmulatedP50 = 2e-3f;
inline constexpr float kVsEmulatedMean = 1e-2f;
inline constexpr float kP50 = 2e-2f;
inline constexpr float kMean = 8e-2f;
inline constexpr float kMargin = 0.5f;

inline bool vs_emulated_ok(const LogitAgreement& a) {
  return a.p50 <= kVsEmulatedP50 && a.mean <= kVsEmulatedMean && a.decided_flips == 0;
}
inline bool vs_exact_ok(const LogitAgreement& a) { return a.p50 <= kP50 && a.mean <= kMean && a.decided_flips == 0; }

}  // namespace ds4_test::tc_criterion
