#pragma once
// Activation quantization before integer dot products, as antirez/ds4 computes its Q8_0,
// Q2_K and IQ2_XXS products (docs/reference-differences.md, DeepSeek #8): the activation row
// is quantized once (Q8_0 weights: blocks of 32 with an f32 scale; Q2_K / IQ2_XXS: Q8_K blocks
// of 256 with an f32 scale and int16 sums per 16), every block's dot is an exact integer sum,
// and the f32 part is the per-block scaling and the sum over blocks. The CUDA integer GEMV
// (backend/cuda/gemv_act.h) computes the same integers; only the order of the f32 sum over
// blocks differs (so CPU and GPU agree to rounding, and gemv_act_rows equals gemv_act bit for bit).
// Layout: structure of arrays (q, d, bsums), as the GPU reads it.
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/weight.h"

namespace ds4 {

class ThreadPool;

// Which activation block a weight format is dotted with (kNone: the format keeps f32 x).
enum class ActBlock : uint8_t { kNone, kQ8_0, kQ8_K };
ActBlock act_block_for(DType weight_type);
inline constexpr int64_t kActQ8_0Block = 32;   // values per Q8_0 activation block (one f32 scale)
inline constexpr int64_t kActQ8KBlock = 256;   // values per Q8_K activation block (one f32 scale)
inline constexpr int64_t kActQ8KSumBlock = 16; // values per int16 bsum inside a Q8_K block
// Values per activation scale: 32 (Q8_0) or 256 (Q8_K); 0 for kNone.
inline int64_t act_values_per_scale(ActBlock block) {
  return block == ActBlock::kQ8_0 ? kActQ8_0Block : block == ActBlock::kQ8_K ? kActQ8KBlock : 0;
}

// One quantized activation row of n values: q[n]; d[n / block]; bsums[n / 16] (Q8_K only,
// else null).
struct ActQ8View {
  const int8_t* q = nullptr;
  const float* d = nullptr;
  const int16_t* bsums = nullptr;
  int64_t n = 0;
  ActBlock block = ActBlock::kNone;
};

// ds4's quantizers (n a multiple of the block; throws InputError otherwise).
//   Q8_0: d = amax / 127, q = clamp(lrintf(x * (1 / d)), -128, 127) (q = 0 when d = 0).
//   Q8_K: max = the value of largest |x| (first one on ties), iscale = -127 / max,
//         q = clamp(lrintf(iscale * x)), d = 1 / iscale, bsums = sums of q per 16; an
//         all-zero block has d = 0, q = 0, bsums = 0.
// lrintf rounds ties to even. For finite x every q is in [-127, 127] (the block's largest |x|
// lands on +-127 exactly); the clamp at -128 only guards non-finite rows, whose lrintf value
// is the platform's (ds4's too).
void quantize_act_q8_0(const float* x, int64_t n, int8_t* q, float* d);
void quantize_act_q8_k(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsums);
// Two Q8_K planes for products that want more than 8 bits of activation (the tensor-core chunks
// of models without ds4's activation quantization, issue #22): the high plane is
// quantize_act_q8_k's block (same bytes), the low plane quantizes its residual at 1/128 of the
// scale: s = iscale * x (the high plane's product), q_lo = clamp(lrintf((s - q_hi) * 128)),
// d_lo = d_hi / 128, bsums_lo = sums of q_lo per 16 (s - q_hi is exact and in [-0.5, 0.5], so
// |q_lo| <= 64). x = d_hi q_hi + d_lo q_lo to within |d_hi| / 256 per value (~3e-5 of the
// block's largest |x|), so a product is dot_act(hi) + dot_act(lo) (each an exact Q8_K dot).
void quantize_act_q8_k_planes(const float* x, int64_t n, int8_t* q_hi, float* d_hi, int16_t* bsums_hi, int8_t* q_lo,
                              float* d_lo, int16_t* bsums_lo);

// Owning buffers for one or more quantized rows of the same length (rows * n values).
struct ActQ8Rows {
  ActBlock block = ActBlock::kNone;
  int64_t n = 0, rows = 0;
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int16_t> bsums;
  ActQ8View row(int64_t i) const;
};
ActQ8Rows quantize_act_rows(ActBlock block, const float* x, int64_t n, int64_t rows);
// quantize_act_q8_k_planes of `rows` rows: Q8_K rows 2 i (high plane) and 2 i + 1 (low plane).
ActQ8Rows quantize_act_planes_rows(const float* x, int64_t n, int64_t rows);

// Row `r` of w (format with act_block_for(w.type) == x.block, w.cols == x.n) dotted with x:
// ds4's scalar formula and serial block order. The integer sums run on the CPU's SIMD level
// (core/act_quant_ints.h); they are exact, so every level gives the same bits.
float dot_act(const WeightMatrix& w, int64_t r, const ActQ8View& x);

// Y[n x rows] = X W^T with every row of X quantized for w's format first (matmul's threading
// and row split; each output is dot_act). Throws InputError when act_block_for(w.type) is kNone.
void matmul_act(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool* pool = nullptr);

}  // namespace ds4
