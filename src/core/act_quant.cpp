// ds4's activation quantizers and integer dot products (core/act_quant.h). The f32 steps are
// written in the order of ds4's portable scalar path (dot_q8_0_row, ds4_vec_dot_q2_K_q8_K,
// ds4_vec_dot_iq2_xxs_q8_K) and core builds with -ffp-contract=off, so every product and sum
// rounds where the source says it does. (ds4 itself builds with -ffast-math, which lets the
// compiler reassociate; its source order is the only order that is defined.)
#include "core/act_quant.h"

#include <cmath>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"

namespace ds4 {
namespace {

#include "core/iq2_xxs_tables.inc"

int64_t values_per_scale(ActBlock block) { return block == ActBlock::kQ8_0 ? kActQ8_0Block : kActQ8KBlock; }

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

// Q8_0 weights: 34-byte blocks {f16 d; i8 q[32]}. acc += (d_w * d_x) * isum, block by block.
float dot_q8_0(const uint8_t* row, const ActQ8View& x) {
  float acc = 0.0f;
  for (int64_t b = 0; b < x.n / kActQ8_0Block; ++b, row += 34) {
    const int8_t* wq = reinterpret_cast<const int8_t*>(row + 2);
    const int8_t* xq = x.q + b * kActQ8_0Block;
    int32_t isum = 0;
    for (int i = 0; i < kActQ8_0Block; ++i) isum += int32_t(wq[i]) * int32_t(xq[i]);
    acc += f16_to_f32(load_u16(row)) * x.d[b] * float(isum);
  }
  return acc;
}

// Q2_K weights (84-byte super-blocks, see core/quant_q2_k.cpp). Per super-block two exact
// integer sums: the scaled 2-bit dot and the min term through the activation's bsums, then
// sumf += (d_x * d) * isum - (d_x * dmin) * summs.
float dot_q2_k(const uint8_t* blk, const ActQ8View& x) {
  float sumf = 0.0f;
  for (int64_t i = 0; i < x.n / kActQ8KBlock; ++i, blk += 84) {
    const uint8_t* sc = blk;
    const uint8_t* q2 = blk + 16;
    const int8_t* q8 = x.q + i * kActQ8KBlock;
    const int16_t* bsums = x.bsums + i * (kActQ8KBlock / kActQ8KSumBlock);
    int32_t summs = 0;
    for (int j = 0; j < 16; ++j) summs += int32_t(bsums[j]) * int32_t(sc[j] >> 4);
    const float dall = x.d[i] * f16_to_f32(load_u16(blk + 80));
    const float dmin = x.d[i] * f16_to_f32(load_u16(blk + 82));
    int32_t isum = 0;
    for (int h = 0; h < 2; ++h)        // 128-value halves: 32 packed bytes each
      for (int s = 0; s < 4; ++s)      // bit pair 2s of those bytes
        for (int part = 0; part < 2; ++part) {  // 16-value sub-block h*8 + 2s + part
          const uint8_t* qq = q2 + 32 * h + 16 * part;
          const int8_t* xx = q8 + 128 * h + 32 * s + 16 * part;
          int32_t sub = 0;
          for (int l = 0; l < 16; ++l) sub += int32_t((qq[l] >> (2 * s)) & 3) * int32_t(xx[l]);
          isum += int32_t(sc[h * 8 + 2 * s + part] & 0x0F) * sub;
        }
    sumf += dall * float(isum) - dmin * float(summs);
  }
  return sumf;
}

// IQ2_XXS weights (66-byte super-blocks, see core/quant_iq2_xxs.cpp). The weight is
// d * (0.5 + s) * 0.25 * signed grid = d * (2s + 1) * signed grid / 8, so each 32-value group
// contributes (2s + 1) * its exact signed-grid dot; sumf += (d_w * d_x) * bsum; result 0.125 * sumf.
float dot_iq2_xxs(const uint8_t* blk, const ActQ8View& x) {
  float sumf = 0.0f;
  for (int64_t i = 0; i < x.n / kActQ8KBlock; ++i, blk += 66) {
    const float d = f16_to_f32(load_u16(blk)) * x.d[i];
    const int8_t* q8 = x.q + i * kActQ8KBlock;
    int32_t bsum = 0;
    for (int g = 0; g < 8; ++g, q8 += 32) {
      uint32_t aux[2];
      std::memcpy(aux, blk + 2 + 8 * g, 8);
      const int32_t ls = int32_t(2 * (aux[1] >> 28) + 1);
      int32_t sumi = 0;
      for (int l = 0; l < 4; ++l) {
        const uint64_t grid = kIq2xxsGrid[(aux[0] >> (8 * l)) & 0xFF];
        const uint8_t signs = kIq2xxsSigns[(aux[1] >> (7 * l)) & 127];
        for (int j = 0; j < 8; ++j) {
          const int32_t v = int32_t(uint8_t(grid >> (8 * j)));
          sumi += ((signs >> j) & 1 ? -v : v) * int32_t(q8[8 * l + j]);
        }
      }
      bsum += sumi * ls;
    }
    sumf += d * float(bsum);
  }
  return 0.125f * sumf;
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

void quantize_act_q8_k(const float* x, int64_t n, int8_t* q, float* d, int16_t* bsums) {
  require_whole_blocks("quantize_act_q8_k", n, kActQ8KBlock);
  constexpr int64_t kSums = kActQ8KBlock / kActQ8KSumBlock;
  for (int64_t b = 0; b < n / kActQ8KBlock; ++b, x += kActQ8KBlock, q += kActQ8KBlock, bsums += kSums) {
    float max = 0.0f, amax = 0.0f;  // max keeps its sign: the scale maps it to -127
    for (int j = 0; j < kActQ8KBlock; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::memset(q, 0, size_t(kActQ8KBlock));
      std::memset(bsums, 0, sizeof(int16_t) * size_t(kSums));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kActQ8KBlock; ++j) q[j] = round_to_i8(iscale * x[j]);
    for (int64_t j = 0; j < kSums; ++j) {
      int sum = 0;
      for (int64_t i = 0; i < kActQ8KSumBlock; ++i) sum += q[j * kActQ8KSumBlock + i];
      bsums[j] = int16_t(sum);  // |sum| <= 16 * 128: fits
    }
    d[b] = 1.0f / iscale;
  }
}

ActQ8View ActQ8Rows::row(int64_t i) const {
  if (i < 0 || i >= rows) throw InputError("ActQ8Rows::row: row " + std::to_string(i) + " of " + std::to_string(rows));
  ActQ8View v;
  v.q = q.data() + i * n;
  v.d = d.data() + i * (n / values_per_scale(block));
  v.bsums = block == ActBlock::kQ8_K ? bsums.data() + i * (n / kActQ8KSumBlock) : nullptr;
  v.n = n;
  v.block = block;
  return v;
}

ActQ8Rows quantize_act_rows(ActBlock block, const float* x, int64_t n, int64_t rows) {
  if (block == ActBlock::kNone) throw InputError("quantize_act_rows: no activation block for this weight format");
  if (rows < 0) throw InputError("quantize_act_rows: negative row count");
  require_whole_blocks("quantize_act_rows", n, values_per_scale(block));
  ActQ8Rows out;
  out.block = block;
  out.n = n;
  out.rows = rows;
  out.q.resize(size_t(rows * n));
  out.d.resize(size_t(rows * (n / values_per_scale(block))));
  if (block == ActBlock::kQ8_K) out.bsums.resize(size_t(rows * (n / kActQ8KSumBlock)));
  for (int64_t i = 0; i < rows; ++i) {
    int8_t* q = out.q.data() + i * n;
    float* d = out.d.data() + i * (n / values_per_scale(block));
    if (block == ActBlock::kQ8_0) quantize_act_q8_0(x + i * n, n, q, d);
    else quantize_act_q8_k(x + i * n, n, q, d, out.bsums.data() + i * (n / kActQ8KSumBlock));
  }
  return out;
}

float dot_act(const WeightMatrix& w, int64_t r, const ActQ8View& x) {
  if (x.block == ActBlock::kNone || x.block != act_block_for(w.type))
    throw InputError(std::string("dot_act: activation blocks do not match ") + std::string(dtype_name(w.type)) + " weights");
  if (x.n != w.cols) throw InputError("dot_act: activation has " + std::to_string(x.n) + " values, weight rows " +
                                      std::to_string(w.cols));
  if (r < 0 || r >= w.rows) throw InputError("dot_act: row " + std::to_string(r) + " of " + std::to_string(w.rows));
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * w.row_stride_bytes();
  switch (w.type) {
    case DType::Q8_0: return dot_q8_0(row, x);
    case DType::Q2_K: return dot_q2_k(row, x);
    default: return dot_iq2_xxs(row, x);  // the only other type act_block_for maps
  }
}

void matmul_act(const WeightMatrix& w, const float* x, int64_t n, float* y, ThreadPool* pool) {
  const ActBlock block = act_block_for(w.type);
  if (block == ActBlock::kNone)
    throw InputError(std::string("matmul_act: ") + std::string(dtype_name(w.type)) + " weights take f32 activations");
  const ActQ8Rows xq = quantize_act_rows(block, x, w.cols, n);
  // Split by weight rows (as matmul does): each weight row is read once and dotted with every
  // quantized input row while it is in cache; every output is one dot_act, whatever the split.
  parallel_for(pool, w.rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t t = 0; t < n; ++t) y[t * w.rows + r] = dot_act(w, r, xq.row(t));
  }, 16);
}

}  // namespace ds4
