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

#include "backend/cuda/act_quantize.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/gemv_act.h"
#include "backend/cuda/gemv_device.cuh"
#include "core/error.h"

namespace ds4::cuda {

namespace {

using namespace act_quant_detail;
using gemv_detail::launch_maybe_pdl;
using gemv_detail::pdl_launch_dependents;
using gemv_detail::pdl_wait;

constexpr int kWarps = 4;

size_t round16(size_t v) { return (v + 15) / 16 * 16; }

struct QArgs {
  const float* x;
  int64_t x_row, n;
  int8_t* q;
  float* d;
  int16_t* bs;
  bool planes = false;  // Q8_K: rows 2 i (high plane) and 2 i + 1 (low plane) for x row i
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
  q8_0_tile(f, live, lane, a.q + row * a.n + tile, a.d + row * (a.n / 32) + tile / 32);
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
  const int64_t o = a.planes ? 2 * row : row;  // the output row (the high plane's)
  auto q = [&](int64_t r) { return a.q + r * a.n + blk * 256; };
  auto bs = [&](int64_t r) { return a.bs + r * (a.n / 16) + blk * 16; };
  auto d = [&](int64_t r) { return a.d + r * (a.n / 256) + blk; };
  if (a.planes) q8_k_block(v, lane, q(o), bs(o), d(o), q(o + 1), bs(o + 1), d(o + 1));
  else q8_k_block(v, lane, q(o), bs(o), d(o));
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

namespace {

void quantize_rows(const float* x, int64_t x_row, int64_t rows, const DeviceActQ8& out, bool planes, cudaStream_t stream) {
  if (out.block == ActBlock::kNone) throw InputError("cuda quantize_act: no activation block");
  if (planes && out.block != ActBlock::kQ8_K) throw InputError("cuda quantize_act_planes: the planes are Q8_K rows");
  const int64_t bv = act_values_per_scale(out.block), n = out.n;
  if (n <= 0 || n % bv != 0)
    throw InputError("cuda quantize_act: " + std::to_string(n) + " values is not a positive multiple of " +
                     std::to_string(bv));
  if (rows < 0 || (planes ? 2 : 1) * rows > out.rows || rows > 65535)
    throw InputError("cuda quantize_act: " + std::to_string(rows) + " rows" + (planes ? " (two planes each)" : "") +
                     " into a buffer of " + std::to_string(out.rows) + " (at most 65535 per launch)");
  if (x_row < n || x_row % 4 != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0)
    throw InputError("cuda quantize_act: x must be 16-byte aligned with a row stride (" + std::to_string(x_row) +
                     ") >= n and a multiple of 4");
  if (!out.q || !out.d || reinterpret_cast<uintptr_t>(out.q) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(out.d) % 4 != 0 ||
      (out.block == ActBlock::kQ8_K && (!out.bsums || reinterpret_cast<uintptr_t>(out.bsums) % 4 != 0)))
    throw InputError("cuda quantize_act: output pointers missing or misaligned (q 16 bytes, d and bsums 4)");
  if (rows == 0) return;
  const QArgs a{x, x_row, n, out.q, out.d, out.bsums, planes};
  const int64_t per_warp = out.block == ActBlock::kQ8_0 ? 128 : 256;
  const int64_t tiles = (n + per_warp - 1) / per_warp;
  const dim3 blocks(unsigned((tiles + kWarps - 1) / kWarps), unsigned(rows));
  if (out.block == ActBlock::kQ8_0) launch_maybe_pdl(gemv_pdl(), quantize_q8_0_kernel, blocks, kWarps * 32, stream, a);
  else launch_maybe_pdl(gemv_pdl(), quantize_q8_k_kernel, blocks, kWarps * 32, stream, a);
}

}  // namespace

void quantize_act(const float* x, int64_t x_row, int64_t rows, const DeviceActQ8& out, cudaStream_t stream) {
  quantize_rows(x, x_row, rows, out, false, stream);
}

void quantize_act_planes(const float* x, int64_t x_row, int64_t rows, const DeviceActQ8& out, cudaStream_t stream) {
  quantize_rows(x, x_row, rows, out, true, stream);
}

}  // namespace ds4::cuda
