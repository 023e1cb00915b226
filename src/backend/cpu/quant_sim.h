#pragma once
// Round trips that simulate low-precision storage in f32 (the value a tensor would have
// after being stored in that format and read back), as antirez/ds4 applies them on the CPU
// path of DeepSeek V4 (ds4.c dsv4_fp8_kv_quantize_row_inplace_cpu,
// dsv4_fp4_act_quantize_row_inplace_cpu, dsv4_hadamard128_inplace_cpu): the model was
// trained with FP8 KV and an FP4 indexer, and top-k choices depend on these roundings.
#include <cstdint>

namespace ds4::cpu {

// Nearest E4M3FN value (max 448), ties to even mantissa; |x| clamped to 448.
float e4m3fn_round(float x);
// Nearest E2M1 value (0, 0.5, 1, 1.5, 2, 3, 4, 6), ties to even; |x| clamped to 6.
float e2m1_round(float x);

// In place, per block of `block` values: scale = 2^ceil(log2(amax / 448)) (amax floored at
// 1e-4), x = e4m3(x / scale) * scale. n must be a multiple of block.
void fp8_e4m3_roundtrip_f32(float* x, int64_t n, int64_t block);
// In place, per block: scale = 2^ceil(log2(amax / 6)) (amax floored at 7.05e-38),
// x = e2m1(x / scale) * scale. n must be a multiple of block.
void fp4_e2m1_roundtrip_f32(float* x, int64_t n, int64_t block);
// In place: unnormalized Walsh-Hadamard transform of n = 2^k values, times 1/sqrt(n).
void hadamard_f32(float* x, int64_t n);

}  // namespace ds4::cpu
