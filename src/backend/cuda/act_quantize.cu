// quantize_act (gemv_act.h): ds4's activation quantizers (core/act_quant.h) on the device, one
// warp per tile of values, the same arithmetic as the CPU code value for value: IEEE division
// (__fdiv_rn, whatever nvcc's -prec-div), products rounded alone (__fmul_rn: no contraction),
// lrintf's rounding (__float2int_rn: nearest, ties to even), the same int8 clamp, and for Q8_K
// the first value of largest |x| (lowest index on ties), found by a warp reduction over
// (|x|, index). Finite inputs give the CPU's bytes exactly (test_gemv_act compares them);
// non-finite ones may differ (lrintf of +-inf is undefined behaviour on the CPU side).
//
// Q8_0: a warp takes 128 values (4 blocks of 32, 8 lanes each, a float4 per lane).
// Q8_K: a warp takes one 256-value block (two float4 per lane: values 4l.. and 128 + 4l..).
// PDL: launched as a programmatic dependent of the kernel before it (gemv_pdl()); it lets the
// GEMV after it start at once and waits before reading x.
#include <algorithm>
#include <climits>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_act.h"
#include "backend/cuda/gemv_device.cuh"
#include "core/error.h"

namespace ds4::cuda {

namespace {

using gemv_detail::launch_maybe_pdl;
using gemv_detail::pdl_launch_dependents;
using gemv_detail::pdl_wait;

constexpr int kWarps = 4;

size_t round16(size_t v) { return (v + 15) / 16 * 16; }

__device__ __forceinline__ int8_t round_to_i8(float v) {
  const int q = __float2int_rn(v);
  return int8_t(q > 127 ? 127 : q < -128 ? -128 : q);
}

__device__ __forceinline__ uint32_t pack4(int8_t a, int8_t b, int8_t c, int8_t d) {
  return uint32_t(uint8_t(a)) | uint32_t(uint8_t(b)) << 8 | uint32_t(uint8_t(c)) << 16 | uint32_t(uint8_t(d)) << 24;
}

struct QArgs {
  const float* x;
  int64_t x_row, n;
  int8_t* q;
  float* d;
  int16_t* bs;
};

__global__ void __launch_bounds__(kWarps * 32) quantize_q8_0_kernel(QArgs a) {
  pdl_launch_dependents();
  pdl_wait();
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.y;
  const int64_t tile = (int64_t(blockIdx.x) * kWarps + threadIdx.x / 32) * 128;
  if (tile >= a.n) return;  // whole warp
  const int64_t v = tile + 4 * lane;
  const bool live = v < a.n;  // whole 8-lane blocks (n is a multiple of 32)
  const float4 f = live ? *reinterpret_cast<const float4*>(a.x + row * a.x_row + v) : float4{0.f, 0.f, 0.f, 0.f};  // PDL: input load
  // fmaxf skips NaN as the CPU's `fabs(x) > amax` does; the max is the same in any order.
  float amax = fmaxf(fmaxf(fabsf(f.x), fabsf(f.y)), fmaxf(fabsf(f.z), fabsf(f.w)));
#pragma unroll
  for (int o = 1; o < 8; o <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float d = __fdiv_rn(amax, 127.0f);
  const float inv = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
  if (!live) return;
  *reinterpret_cast<uint32_t*>(a.q + row * a.n + v) =
      pack4(round_to_i8(__fmul_rn(f.x, inv)), round_to_i8(__fmul_rn(f.y, inv)), round_to_i8(__fmul_rn(f.z, inv)),
            round_to_i8(__fmul_rn(f.w, inv)));
  if (lane % 8 == 0) a.d[row * (a.n / 32) + v / 32] = d;
}

// (value, index) of the first largest |x|: the larger |value| wins, the lower index on ties.
__device__ __forceinline__ void take_first_max(float& val, int& idx, float v, int i) {
  const float av = fabsf(v), a = fabsf(val);
  if (av > a || (av == a && i < idx)) val = v, idx = i;
}

__global__ void __launch_bounds__(kWarps * 32) quantize_q8_k_kernel(QArgs a) {
  pdl_launch_dependents();
  pdl_wait();
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.y;
  const int64_t blk = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (blk * 256 >= a.n) return;  // whole warp
  const float* xb = a.x + row * a.x_row + blk * 256;
  const float4 f0 = *reinterpret_cast<const float4*>(xb + 4 * lane);  // PDL: input load
  const float4 f1 = *reinterpret_cast<const float4*>(xb + 128 + 4 * lane);  // PDL: input load
  const float v[8] = {f0.x, f0.y, f0.z, f0.w, f1.x, f1.y, f1.z, f1.w};
  // The lane's first largest |x| in index order (strictly larger, from 0, as the CPU scans:
  // zeros and NaN are never taken), then the warp's.
  float best = 0.0f;
  int idx = INT_MAX;
#pragma unroll
  for (int j = 0; j < 8; ++j)
    if (fabsf(v[j]) > fabsf(best)) best = v[j], idx = (j < 4 ? 4 * lane : 128 + 4 * lane) + (j & 3);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    take_first_max(best, idx, ov, oi);
  }
  int8_t* q = a.q + row * a.n + blk * 256;
  int16_t* bs = a.bs + row * (a.n / 16) + blk * 16;
  if (fabsf(best) == 0.0f) {  // all zeros (or NaN): d = 0, q = 0, bsums = 0
    *reinterpret_cast<uint32_t*>(q + 4 * lane) = 0;
    *reinterpret_cast<uint32_t*>(q + 128 + 4 * lane) = 0;
    if (lane < 16) bs[lane] = 0;
    if (lane == 0) a.d[row * (a.n / 256) + blk] = 0.0f;
    return;
  }
  const float iscale = __fdiv_rn(-127.0f, best);
  int8_t qv[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) qv[j] = round_to_i8(__fmul_rn(iscale, v[j]));
  *reinterpret_cast<uint32_t*>(q + 4 * lane) = pack4(qv[0], qv[1], qv[2], qv[3]);
  *reinterpret_cast<uint32_t*>(q + 128 + 4 * lane) = pack4(qv[4], qv[5], qv[6], qv[7]);
  // bsums: lanes 4g .. 4g + 3 hold group g (first float4) and group 8 + g (second).
  int s0 = qv[0] + qv[1] + qv[2] + qv[3], s1 = qv[4] + qv[5] + qv[6] + qv[7];
#pragma unroll
  for (int o = 1; o < 4; o <<= 1) {
    s0 += __shfl_xor_sync(0xffffffffu, s0, o);
    s1 += __shfl_xor_sync(0xffffffffu, s1, o);
  }
  if (lane % 4 == 0) bs[lane / 4] = int16_t(s0), bs[8 + lane / 4] = int16_t(s1);
  if (lane == 0) a.d[row * (a.n / 256) + blk] = __fdiv_rn(1.0f, iscale);
}

}  // namespace

ActQ8View DeviceActQ8::row(int64_t i) const {
  if (block == ActBlock::kNone || i < 0 || i >= rows)
    throw InputError("DeviceActQ8::row: row " + std::to_string(i) + " of " + std::to_string(rows) +
                     (block == ActBlock::kNone ? " (no activation block)" : ""));
  const int64_t bv = act_values_per_scale(block);
  ActQ8View v;
  v.q = q + i * n;
  v.d = d + i * (n / bv);
  v.bsums = block == ActBlock::kQ8_K ? bsums + i * (n / kActQ8KSumBlock) : nullptr;
  v.n = n;
  v.block = block;
  return v;
}

size_t act_q8_row_bytes(ActBlock block, int64_t n) {
  if (block == ActBlock::kNone || n <= 0 || n % act_values_per_scale(block) != 0)
    throw InputError("act_q8_row_bytes: " + std::to_string(n) + " values is not a positive number of activation blocks");
  const size_t bsums = block == ActBlock::kQ8_K ? round16(size_t(n / kActQ8KSumBlock) * sizeof(int16_t)) : 0;
  return round16(size_t(n)) + round16(size_t(n / act_values_per_scale(block)) * sizeof(float)) + bsums;
}

DeviceActQ8 act_q8_carve(void* base, ActBlock block, int64_t n, int64_t rows) {
  const size_t row_bytes = act_q8_row_bytes(block, n);  // checks block and n
  (void)row_bytes;
  if (rows <= 0) throw InputError("act_q8_carve: rows " + std::to_string(rows));
  if (!base || reinterpret_cast<uintptr_t>(base) % 16 != 0) throw InputError("act_q8_carve: base must be 16-byte aligned");
  uint8_t* p = static_cast<uint8_t*>(base);
  DeviceActQ8 out;
  out.n = n, out.rows = rows, out.block = block;
  out.q = reinterpret_cast<int8_t*>(p);
  p += round16(size_t(rows * n));
  out.d = reinterpret_cast<float*>(p);
  p += round16(size_t(rows * (n / act_values_per_scale(block))) * sizeof(float));
  if (block == ActBlock::kQ8_K) out.bsums = reinterpret_cast<int16_t*>(p);
  return out;
}

void quantize_act(const float* x, int64_t x_row, int64_t rows, const DeviceActQ8& out, cudaStream_t stream) {
  if (out.block == ActBlock::kNone) throw InputError("cuda quantize_act: no activation block");
  const int64_t bv = act_values_per_scale(out.block), n = out.n;
  if (n <= 0 || n % bv != 0)
    throw InputError("cuda quantize_act: " + std::to_string(n) + " values is not a positive multiple of " +
                     std::to_string(bv));
  if (rows < 0 || rows > out.rows || rows > 65535)
    throw InputError("cuda quantize_act: " + std::to_string(rows) + " rows into a buffer of " +
                     std::to_string(out.rows) + " (at most 65535 per launch)");
  if (x_row < n || x_row % 4 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0)
    throw InputError("cuda quantize_act: x must be 16-byte aligned with a row stride (" + std::to_string(x_row) +
                     ") >= n and a multiple of 4");
  if (!out.q || !out.d || reinterpret_cast<uintptr_t>(out.q) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(out.d) % 4 != 0 ||
      (out.block == ActBlock::kQ8_K && (!out.bsums || reinterpret_cast<uintptr_t>(out.bsums) % 4 != 0)))
    throw InputError("cuda quantize_act: output pointers missing or misaligned (q 16 bytes, d and bsums 4)");
  if (rows == 0) return;
  const QArgs a{x, x_row, n, out.q, out.d, out.bsums};
  const int64_t per_warp = out.block == ActBlock::kQ8_0 ? 128 : 256;
  const int64_t tiles = (n + per_warp - 1) / per_warp;
  const dim3 blocks(unsigned((tiles + kWarps - 1) / kWarps), unsigned(rows));
  if (out.block == ActBlock::kQ8_0) launch_maybe_pdl(gemv_pdl(), quantize_q8_0_kernel, blocks, kWarps * 32, stream, a);
  else launch_maybe_pdl(gemv_pdl(), quantize_q8_k_kernel, blocks, kWarps * 32, stream, a);
}

}  // namespace ds4::cuda
