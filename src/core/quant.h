#pragma once
// Block formats: row decoders (scalar reference + AVX2/AVX-512 builds of the same code,
// chosen at run time) and quantizers. ggml layouts as in gguf/llama.cpp:
//   Q8_0    {f16 d; i8 q[32]}                                  w = d*q
//   Q4_K    {f16 d, dmin; u8 scales[12]; u8 q[128]} / 256      w = (d*sc)*q - dmin*m   (6-bit sc, m per 32)
//   Q2_K    {u8 scales[16]; u8 q[64]; f16 d, dmin} / 256        w = (d*(s&15))*q - dmin*(s>>4)  (per 16)
//   IQ2_XXS {f16 d; u16 q[32]} / 256: per 32, 4 grid bytes + (4 x 7-bit sign index, 4-bit scale)
//   MLX affine: u32 words of 32/bits values (low bits first), per group scale and bias: w = s*q + b
// The scalar decoders are bit-exact with gguf's NumPy dequantizers (same f32 operation order,
// no FMA contraction: core is built with -ffp-contract=off).
#include <cstdint>

#include "core/dtype.h"
#include "core/simd.h"
#include "core/weight.h"

namespace ds4 {

// Decodes columns [c0, c0 + len) of row r into out[len]; c0 and len are whole blocks
// (whole groups for MLX).
using RowDecodeFn = void (*)(const WeightMatrix& w, int64_t r, int64_t c0, int64_t len, float* out);

RowDecodeFn row_decoder(DType t, SimdLevel level);  // throws ds4::Error for non-weight types
// Column granularity a decoder accepts for this matrix (block size, or MLX group).
int64_t decode_granularity(const WeightMatrix& w);

// Per-format decoder tables (one file per format).
RowDecodeFn plain_decoder(DType t, SimdLevel level);  // F32 F16 BF16 F8_E4M3
RowDecodeFn q8_0_decoder(SimdLevel level);
RowDecodeFn q4_k_decoder(SimdLevel level);
RowDecodeFn q2_k_decoder(SimdLevel level);
RowDecodeFn iq2_xxs_decoder(SimdLevel level);
RowDecodeFn mlx_decoder(SimdLevel level);

// Quantizers: `n` is a multiple of the block size; dst holds row_bytes(type, n).
void quantize_q8_0(const float* src, void* dst, int64_t n);  // bit-exact with gguf's Q8_0.quantize
void quantize_q4_k(const float* src, void* dst, int64_t n);
// MLX affine (bits 4/8, group 32/64): per group scale = (max-min)/(2^bits-1), bias = min,
// q = round((w - bias)/scale) clamped; scales/biases written in `scale_type` (F16/BF16/F32),
// and q computed against the stored (rounded) scale and bias.
void quantize_mlx(const float* src, int64_t n, int bits, int64_t group, DType scale_type, uint32_t* q,
                  void* scales, void* biases);

// Reads a scale stored as F16/BF16/F32.
float load_scale(const void* p, int64_t i, DType t);

}  // namespace ds4
