// ds4's activation quantizers and integer dot products (core/act_quant.h). The f32 steps are
// written in the order of ds4's portable scalar path (dot_q8_0_row, ds4_vec_dot_q2_K_q8_K,
// ds4_vec_dot_iq2_xxs_q8_K) and core builds with -ffp-contract=off, so every product and sum
// rounds where the source says it does. (ds4 itself builds with -ffast-math, which lets the
// compiler reassociate; its source order is the only order that is defined.)
#include "core/act_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/act_quant_ints.h"
#include "core/error.h"
#include "core/half.h"
#include "core/simd.h"
#include "core/thread_pool.h"

namespace ds4 {
namespace {

void require_whole_blocks(const char* who, int64_t n, int64_t block) {
  if (n < 0 || n % block != 0)
    throw InputError(std::string(who) + ": " + std::to_string(n) + " values is not a whole number of " +
                     std::to_string(block) + "-value blocks");
}

// lrintf rounds to nearest, ties to even (the default rounding mode); ds4 clamps to int8.
// For finite inputs |v| <= 127 * (1 + a few ulps), so the clamp only guards non-finite rows.
inline int8_t round_to_i8(float v) {
  int q = int(std::lrintf(v));
  if (q > 127) q = 127;
  if (q < -128) q = -128;
  return int8_t(q);
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Calls f(block index, its exact integer sum) for the nb blocks of a row in row order; the
// sums come from act_quant_ints (the CPU's SIMD level), kChunk blocks at a time.
template <class F>
inline void each_block_sum(ActIntFn ints, const uint8_t* row, int64_t block_bytes, const int8_t* xq,
                           int64_t block_values, int64_t nb, F&& f) {
  constexpr int64_t kChunk = 64;
  int32_t sums[kChunk];
  for (int64_t b0 = 0; b0 < nb; b0 += kChunk) {
    const int64_t len = std::min(kChunk, nb - b0);
    ints(row + b0 * block_bytes, xq + b0 * block_values, len, sums);
    for (int64_t j = 0; j < len; ++j) f(b0 + j, sums[j]);
  }
}

// Formats whose block starts with its f16 scale d_w and whose weight is d_w * (integer part):
// acc += (d_w * d_x) * isum, block after block (ds4's dot_q8_0_row; the IQ2_XXS loop of
// ds4_vec_dot_iq2_xxs_q8_K before its final 0.125).
float scale_first_dot(ActIntFn ints, int64_t block_bytes, int64_t block_values, const uint8_t* row,
                      const ActQ8View& x) {
  float acc = 0.0f;
  each_block_sum(ints, row, block_bytes, x.q, block_values, x.n / block_values, [&](int64_t b, int32_t isum) {
    acc += f16_to_f32(load_u16(row + b * block_bytes)) * x.d[b] * float(isum);
  });
  return acc;
}

// Q8_0 weights: 34-byte blocks {f16 d; i8 q[32]}.
float dot_q8_0(const ActIntKernels& k, const uint8_t* row, const ActQ8View& x) {
  return scale_first_dot(k.q8_0, 34, kActQ8_0Block, row, x);
}

// IQ2_XXS weights (66-byte super-blocks, f16 d first). The weight is
// d * (0.5 + s) * 0.25 * signed grid = d * (2s + 1) * signed grid / 8: the integer sum carries
// the (2s + 1), the 1/8 comes last.
float dot_iq2_xxs(const ActIntKernels& k, const uint8_t* row, const ActQ8View& x) {
  return 0.125f * scale_first_dot(k.iq2_xxs, 66, kActQ8KBlock, row, x);
}

// Q2_K weights (84-byte super-blocks: 16 scale bytes, low nibble scale, high nibble min; q;
// f16 d at 80, dmin at 82). Per super-block two exact integer sums, the scaled 2-bit dot and
// the min term through the activation's bsums, then sumf += (d_x * d) * isum - (d_x * dmin) * summs.
float dot_q2_k(const ActIntKernels& k, const uint8_t* row, const ActQ8View& x) {
  float sumf = 0.0f;
  each_block_sum(k.q2_k, row, 84, x.q, kActQ8KBlock, x.n / kActQ8KBlock, [&](int64_t i, int32_t isum) {
    const uint8_t* blk = row + i * 84;
    const int16_t* bsums = x.bsums + i * (kActQ8KBlock / kActQ8KSumBlock);
    int32_t summs = 0;
    for (int s = 0; s < 16; ++s) summs += int32_t(bsums[s]) * int32_t(blk[s] >> 4);
    const float dall = x.d[i] * f16_to_f32(load_u16(blk + 80));
    const float dmin = x.d[i] * f16_to_f32(load_u16(blk + 82));
    sumf += dall * float(isum) - dmin * float(summs);
  });
  return sumf;
}

using RowDotFn = float (*)(const ActIntKernels& k, const uint8_t* row, const ActQ8View& x);

// The row dot of a weight format act_block_for maps (checked by the callers).
RowDotFn row_dot(DType t) {
  return t == DType::Q8_0 ? dot_q8_0 : t == DType::Q2_K ? dot_q2_k : dot_iq2_xxs;
}

void check_operands(const WeightMatrix& w, const ActQ8View& x) {
  if (x.block == ActBlock::kNone || x.block != act_block_for(w.type))
    throw InputError(std::string("dot_act: activation blocks do not match ") + std::string(dtype_name(w.type)) + " weights");
  if (x.n != w.cols) throw InputError("dot_act: activation has " + std::to_string(x.n) + " values, weight rows " +
                                      std::to_string(w.cols));
  if (!x.q || !x.d || (x.block == ActBlock::kQ8_K && !x.bsums))
    throw InputError("dot_act: activation without its values, scales or (Q8_K) block sums");
}

const uint8_t* weight_row(const WeightMatrix& w, int64_t r) {
  return static_cast<const uint8_t*>(w.data) + r * w.row_stride_bytes();
}

}  // namespace

ActBlock act_block_for(DType weight_type) {
  switch (weight_type) {
    case DType::Q8_0: return ActBlock::kQ8_0;
    case DType::Q2_K:
    case DType::IQ2_XXS: return ActBlock::kQ8_K;
    default: return ActBlock::kNone;
  }
}

void quantize_act_q8_0(const float* x, int64_t n, int8_t* q, float* d) {
  require_whole_blocks("quantize_act_q8_0", n, kActQ8_0Block);
  for (int64_t b = 0; b < n / kActQ8_0Block; ++b, x += kActQ8_0Block, q += kActQ8_0Block) {
    float amax = 0.0f;
    for (int i = 0; i < kActQ8_0Block; ++i)
      if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]);
    const float scale = amax / 127.0f;
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    d[b] = scale;
    for (int i = 0; i < kActQ8_0Block; ++i) q[i] = round_to_i8(x[i] * inv);
  }
}

namespace {

void sum_per_16(const int8_t* q, int16_t* bsums) {
  for (int64_t j = 0; j < kActQ8KBlock / kActQ8KSumBlock; ++j) {
    int sum = 0;
    for (int64_t i = 0; i < kActQ8KSumBlock; ++i) sum += q[j * kActQ8KSumBlock + i];
    bsums[j] = int16_t(sum);  // |sum| <= 16 * 128: fits
  }
}

// quantize_act_q8_k, and with q_lo its low plane (quantize_act_q8_k_planes).
void q8_k_blocks(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsums, int8_t* q_lo, float* d_lo,
                 int16_t* bsums_lo) {
  constexpr int64_t B = kActQ8KBlock, kSums = kActQ8KBlock / kActQ8KSumBlock;
  for (int64_t b = 0; b < n / B; ++b, x += B, q += B, bsums += kSums) {
    float max = 0.0f, amax = 0.0f;  // max keeps its sign: the scale maps it to -127
    for (int j = 0; j < B; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
    int8_t* ql = q_lo ? q_lo + b * B : nullptr;
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::memset(q, 0, size_t(B));
      std::memset(bsums, 0, sizeof(int16_t) * size_t(kSums));
      if (ql) {
        d_lo[b] = 0.0f;
        std::memset(ql, 0, size_t(B));
        std::memset(bsums_lo + b * kSums, 0, sizeof(int16_t) * size_t(kSums));
      }
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < B; ++j) {
      const float s = iscale * x[j];
      q[j] = round_to_i8(s);
      if (ql) ql[j] = round_to_i8((s - float(q[j])) * 128.0f);  // (exact residual, exact scaling)
    }
    sum_per_16(q, bsums);
    d[b] = 1.0f / iscale;
    if (ql) {
      sum_per_16(ql, bsums_lo + b * kSums);
      d_lo[b] = d[b] * 0.0078125f;  // d / 128, exact
    }
  }
}

}  // namespace

void quantize_act_q8_k(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsums) {
  require_whole_blocks("quantize_act_q8_k", n, kActQ8KBlock);
  q8_k_blocks(x, n, q, d, bsums, nullptr, nullptr, nullptr);
}

void quantize_act_q8_k_planes(const float* x, int64_t n, int8_t* q_hi, float* d_hi, int16_t* bsums_hi, int8_t* q_lo,
                              float* d_lo, int16_t* bsums_lo) {
  require_whole_blocks("quantize_act_q8_k_planes", n, kActQ8KBlock);
  q8_k_blocks(x, n, q_hi, d_hi, bsums_hi, q_lo, d_lo, bsums_lo);
}

ActQ8View ActQ8Rows::row(int64_t i) const {
  if (i < 0 || i >= rows) throw InputError("ActQ8Rows::row: row " + std::to_string(i) + " of " + std::to_string(rows));
  ActQ8View v;
  v.q = q.data() + i * n;
  v.d = d.data() + i * (n / act_values_per_scale(block));
  v.bsums = block == ActBlock::kQ8_K ? bsums.data() + i * (n / kActQ8KSumBlock) : nullptr;
  v.n = n;
  v.block = block;
  return v;
}

ActQ8Rows quantize_act_rows(ActBlock block, const float* x, int64_t n, int64_t rows) {
  if (block == ActBlock::kNone) throw InputError("quantize_act_rows: no activation block for this weight format");
  if (rows < 0) throw InputError("quantize_act_rows: negative row count");
  require_whole_blocks("quantize_act_rows", n, act_values_per_scale(block));
  ActQ8Rows out;
  out.block = block;
  out.n = n;
  out.rows = rows;
  out.q.resize(size_t(rows * n));
  out.d.resize(size_t(rows * (n / act_values_per_scale(block))));
  if (block == ActBlock::kQ8_K) out.bsums.resize(size_t(rows * (n / kActQ8KSumBlock)));
  for (int64_t i = 0; i < rows; ++i) {
    int8_t* q = out.q.data() + i * n;
    float* d = out.d.data() + i * (n / act_values_per_scale(block));
    if (block == ActBlock::kQ8_0) quantize_act_q8_0(x + i * n, n, q, d);
    else quantize_act_q8_k(x + i * n, n, q, d, out.bsums.data() + i * (n / kActQ8KSumBlock));
  }
  return out;
}

ActQ8Rows quantize_act_planes_rows(const float* x, int64_t n, int64_t rows) {
  if (rows < 0) throw InputError("quantize_act_planes_rows: negative row count");
  require_whole_blocks("quantize_act_planes_rows", n, kActQ8KBlock);
  ActQ8Rows out;
  out.block = ActBlock::kQ8_K;
  out.n = n;
  out.rows = 2 * rows;
  out.q.resize(size_t(2 * rows * n));
  out.d.resize(size_t(2 * rows * (n / kActQ8KBlock)));
  out.bsums.resize(size_t(2 * rows * (n / kActQ8KSumBlock)));
  auto q = [&](int64_t r) { return out.q.data() + r * n; };
  auto d = [&](int64_t r) { return out.d.data() + r * (n / kActQ8KBlock); };
  auto bs = [&](int64_t r) { return out.bsums.data() + r * (n / kActQ8KSumBlock); };
  for (int64_t i = 0; i < rows; ++i)
    quantize_act_q8_k_planes(x + i * n, n, q(2 * i), d(2 * i), bs(2 * i), q(2 * i + 1), d(2 * i + 1), bs(2 * i + 1));
  return out;
}

float dot_act(const WeightMatrix& w, int64_t r, const ActQ8View& x) {
  check_operands(w, x);
  if (r < 0 || r >= w.rows) throw InputError("dot_act: row " + std::to_string(r) + " of " + std::to_string(w.rows));
  return row_dot(w.type)(act_int_kernels(simd_level()), weight_row(w, r), x);
}

void matmul_act(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
  const ActBlock block = act_block_for(w.type);
  if (block == ActBlock::kNone)
    throw InputError(std::string("matmul_act: ") + std::string(dtype_name(w.type)) + " weights take f32 activations");
  const ActQ8Rows xq = quantize_act_rows(block, x, w.cols, n);  // the operands match by construction
  const RowDotFn dot = row_dot(w.type);
  const ActIntKernels& k = act_int_kernels(simd_level());
  // Split by weight rows (as matmul does): each weight row is read once and dotted with every
  // quantized input row while it is in cache; every output is one dot_act, whatever the split.
  std::vector<ActQ8View> views(static_cast<size_t>(n));  // the row views once, not per (weight row, token)
  for (int64_t t = 0; t < n; ++t) views[size_t(t)] = xq.row(t);
  parallel_for(pool, w.rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t t = 0; t < n; ++t) y[t * w.rows + r] = dot(k, weight_row(w, r), views[size_t(t)]);
  }, 16);
}

}  // namespace ds4
