// The hyper-connection read of one decode token in two launches instead of five (issue #23:
// hc_read was 27% of a decode token, 96 calls of five latency-bound launches each):
//   hc_down:       per-stream rms + normed on the fly + [low | inject] rows + their activations
//   hc_up_combine: the up rows of NI consecutive hidden indices in every stream + the combine
// Bit for bit the sequence hc_norm -> gemv(down_inject) -> hc_low_act -> gemv(up) ->
// hc_combine of hyper.cu and backend/cuda/gemv.cu (so the chunk's hyper_read_rows, which still
// runs that sequence through gemv_rows, equals the decode step; test_qwen_next_cuda items 2/5):
// - the sum of squares keeps hc_norm_kernel's 256-thread order (each thread here plays two of
//   its threads, the two halves of the block_reduce tree are rebuilt as they were);
// - every matrix row keeps the direct gemv's split: threads_for(units) threads over units
//   t, t + threads, ..., the format's dot (dot2 under gemv kernels 2 and 3), warp_sum, warps summed
//   in order from 0.f; a plain-float row of cols % 32 != 0 keeps gemv_small_kernel's form;
// - activations, inject gate and combine are the same expressions as hyper.cu's kernels.
// This mirrors gemv.cu's per-row arithmetic: a change there (unit split, decoders) has to be
// made here too, or the decode step leaves the chunk's rows (the tests above catch it).
// PDL by default (DS4_HC_PDL=0: plain launches): hc_down triggers its dependents at
// its start (and is itself a dependent of the kernel before it, DS4_HC_DOWN_PDL: its weights
// before griddepcontrol.wait, h after) and hc_up_combine is a programmatic dependent (sm_90
// PDL) that loads its first weights (immutable, through __ldg) before griddepcontrol.wait and
// everything hc_down writes (low, normed) after it with plain loads, then triggers the kernel
// after it (the next product's weight prefetch). An earlier PDL version read the low-rank row through __ldg after
// the wait and gave different mixed values on the H200 (bench/results/qwen-decode-h200-2026-12-04g):
// ptxas may hoist a non-coherent load above the wait (the read-only path is only defined for
// data no running kernel writes), so nothing hc_down writes goes through it here.
#include <algorithm>
#include <atomic>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/env_setting.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/gemv_formats.cuh"
#include "backend/cuda/smem_opt_in.h"
#include "core/error.h"
#include "models/qwen_next/cuda/hyper_fused.h"

namespace ds4::qwen_next::cuda {
namespace {

using namespace ds4::cuda::gemv_detail;

constexpr int kThreads = 128;     // gemv.cu kMaxThreads: a row's threads fit in one block
constexpr int kNormThreads = 256; // hc_norm_kernel's block size (its reduction order)
constexpr int kMaxHc = 8;
// Rows per hc_down block (DS4_HC_DOWN_ROWS: 1, 2 or 4; every block stages all of h for the
// norms, so fewer rows = more blocks on the SMs and more copies of h read from L2).
constexpr int kDownRowsDefault = 4;
constexpr int kMaxPhases = 3;     // units per gemv thread slot: hc * d <= 44 KB of floats gives <= 3
constexpr int kDownMaxThreads = kThreads * kMaxPhases;
constexpr int kUpIdx = 8;         // hidden indices per hc_up_combine block (rows per stream)
// hc_up_combine: teams of `group` threads, kUpRows rows per team; 3 blocks of 256 threads per SM
// (registers) keep the full-size read's 320 blocks one wave (512 threads at 77 registers: 3 waves).
constexpr int kUpThreads = 256;
constexpr int kUpRows = 4;
constexpr int64_t kMaxHSmem = 44 * 1024;  // h staged by hc_down (hyper_read_fusable's bound)

__device__ __forceinline__ float sigm(float x) { return 1.f / (1.f + expf(-x)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// h staged with 4 floats of padding after every 32 (one unit): the gemv threads read their
// units' float4 at a 144-byte stride (no bank conflicts; 128 bytes were 8-way), the norm's
// threads consecutive floats of one unit.
__host__ __device__ __forceinline__ int64_t padded(int64_t e) { return e + 4 * (e >> 5); }

struct HcArgs {
  const float* h;     // {hc*d}
  const float* norm;  // {hc*d}
  float* normed;      // {hc*d}
  float* low;         // [low {rank} | inject {hc}]
  float* mixed;       // {d}
  int64_t hc, d, rank;
  float eps, inv_hc;
  bool inject;        // rows past rank are the inject gate (2 sigmoid(v / hc))
  bool pdl;           // DS4_HC_PDL: hc_up_combine is hc_down's programmatic dependent
};

// Block: kDownRows rows of [down | inject]; blockDim = max(kThreads, group * phases). The gemv's
// thread slot t (of `group` = gemv threads_for(units)) sums units t, t + group, ... in that
// order; here thread (t, k) computes the dot of unit t + k * group alone (all units' weight
// and norm loads in flight at once, one dependent step each instead of `phases`), the dots go
// through shared memory and slot t adds them in the gemv's order, so every row is gemv's bits.
// Dynamic shared memory: h {padded(hc*d)} (every block needs all of it for the per-stream rms)
// then the dots {phases, kDownRows, group}.
template <class F, int V, int kDownRows>
__global__ void __launch_bounds__(kDownMaxThreads, 1) hc_down_kernel(Args a, HcArgs p, int group, int phases) {
  extern __shared__ float4 hsm4[];
  float* hsm = reinterpret_cast<float*>(hsm4);
  const int64_t W = p.hc * p.d, units = a.cols / kUnit;
  float* dots = hsm + padded(W);
  __shared__ float part[kMaxHc][kNormThreads / 32];
  __shared__ float rs[kMaxHc];
  __shared__ float red[kDownRows][kThreads / 32];
  if (p.pdl) pdl_launch_dependents();  // hc_up_combine's blocks may start loading weights
  const int tid = threadIdx.x, nthreads = blockDim.x, warp = tid / 32, lane = tid % 32;
  const int t = tid % group, k = tid / group;
  const int64_t u = t + int64_t(k) * group, row0 = int64_t(blockIdx.x) * kDownRows;
  const bool mine = k < phases && u < units;
  typename F::Raw raw[kDownRows];  // this unit's weights and norm weights, in flight while h is staged
  float4 nw[kUnit / 4];
  if (mine) {
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) {
      const int64_t row = min(row0 + r, a.rows - 1);
      raw[r] = F::template load<FromGlobal>(a, a.data + row * a.row_stride, row, u);
    }
    // (as 16-byte words: tools/device/pdl_sass_check.py reads a float4 __ldg as load_x's input load)
    const uint8_t* nb = reinterpret_cast<const uint8_t*>(p.norm + u * kUnit);
#pragma unroll
    for (int c = 0; c < kUnit / 4; ++c) {
      const uint4 q = FromGlobal::u4(nb + 16 * c);
      nw[c] = make_float4(__uint_as_float(q.x), __uint_as_float(q.y), __uint_as_float(q.z), __uint_as_float(q.w));
    }
  }
  // The first normed element this thread writes: its norm weight in flight with the rest (the
  // write loop below runs once for every shape whose grid covers W, the full-size one included).
  const int64_t j_first = int64_t(blockIdx.x) * nthreads + tid;
  const float norm_first = j_first < W ? __ldg(p.norm + j_first) : 0.f;
  const int64_t W4 = W / 4;
  const float4* h4 = reinterpret_cast<const float4*>(p.h);
  // Unconditional (a no-op in a plain launch): as a programmatic dependent (DS4_HC_DOWN_PDL) the
  // weights above stream while the kernel before finishes; h, which it writes, only from here on.
  pdl_wait();
#pragma unroll 8
  for (int64_t q = tid; q < W4; q += nthreads) hsm4[q + (q >> 3)] = h4[q];  // PDL: input load
  __syncthreads();
  if (tid < kThreads)  // warps 0-3: thread tid plays hc_norm's threads tid and tid + 128
    for (int s = 0; s < p.hc; ++s) {
      const int64_t e0 = s * p.d;
      float s0 = 0.f, s1 = 0.f;
#pragma unroll 4
      for (int64_t i = tid; i < p.d; i += kNormThreads) {
        const float x = hsm[padded(e0 + i)];
        s0 += x * x;
      }
#pragma unroll 4
      for (int64_t i = tid + kThreads; i < p.d; i += kNormThreads) {
        const float x = hsm[padded(e0 + i)];
        s1 += x * x;
      }
      s0 = warp_sum(s0), s1 = warp_sum(s1);
      if (lane == 0) part[s][warp] = s0, part[s][warp + kThreads / 32] = s1;
    }
  __syncthreads();
  if (warp == 0)
    for (int s = 0; s < p.hc; ++s) {
      const float ss = warp_sum(lane < kNormThreads / 32 ? part[s][lane] : 0.f);
      if (lane == 0) rs[s] = rsqrtf(ss / float(p.d) + p.eps);
    }
  __syncthreads();
  for (int64_t j = j_first; j < W; j += int64_t(gridDim.x) * nthreads)  // combine's input (hc_up_combine)
    p.normed[j] = (hsm[padded(j)] * rs[j / p.d]) * (j == j_first ? norm_first : p.norm[j]);

  if (mine) {
    const int64_t j0 = u * kUnit;  // d % 32 == 0: a unit lies in one stream
    const float r_k = rs[j0 / p.d];
    const float4* hv4 = hsm4 + u * 9;
    float xv[kUnit];
#pragma unroll
    for (int c = 0; c < kUnit / 4; ++c) {
      const float4 hv = hv4[c], wv = nw[c];
      xv[4 * c] = (hv.x * r_k) * wv.x, xv[4 * c + 1] = (hv.y * r_k) * wv.y;
      xv[4 * c + 2] = (hv.z * r_k) * wv.z, xv[4 * c + 3] = (hv.w * r_k) * wv.w;
    }
    x_for_dot<V, F>(xv);
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) dots[(k * kDownRows + r) * group + t] = dot_v<V, F>(raw[r], u, xv, nullptr);
  }
  __syncthreads();
  if (tid >= group) return;  // whole warps (group % 32 == 0)
  float acc[kDownRows];
#pragma unroll
  for (int r = 0; r < kDownRows; ++r) acc[r] = 0.f;
  for (int ph = 0; ph < phases && t + int64_t(ph) * group < units; ++ph)
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) acc[r] += dots[(ph * kDownRows + r) * group + t];
#pragma unroll
  for (int r = 0; r < kDownRows; ++r) {
    const float s = warp_sum(acc[r]);
    if (lane == 0) red[r][warp] = s;
  }
  // the slot's warps only: named barrier 1 over `group` threads
  asm volatile("bar.sync 1, %0;" ::"r"(group) : "memory");
  if (tid < kDownRows && row0 + tid < a.rows) {
    const int64_t row = row0 + tid;
    float s = 0.f;
    for (int w = 0; w < group / 32; ++w) s += red[tid][w];
    if (row < p.rank) {
      const float v = s * p.inv_hc;
      p.low[row] = v / (1.f + expf(-v));
    } else {
      p.low[row] = p.inject ? 2.f * sigm(s * p.inv_hc) : s;
    }
  }
}

// The normed stream values of the hidden index this thread combines (threads t < kUpIdx), loaded
// at the kernel's start: hc_down wrote them before this launch, and in combine() their loads
// were hc dependent L2 round trips after the block's last barrier (the kernel's tail).
struct CombineIn {
  float v[kMaxHc];
};
__device__ __forceinline__ CombineIn combine_prefetch(const HcArgs& p, int64_t i0) {
  CombineIn c;
  const int t = threadIdx.x;
  const int64_t i = i0 + t;
#pragma unroll
  for (int k = 0; k < kMaxHc; ++k)
    c.v[k] = (t < kUpIdx && i < p.d && k < p.hc) ? p.normed[k * p.d + i] : 0.f;  // PDL: input load
  return c;
}

// The combine of hidden indices i0 .. i0 + kUpIdx - 1 from their hc mix values.
__device__ __forceinline__ void combine(const float (&mixv)[kMaxHc][kUpIdx], const CombineIn& in, const HcArgs& p,
                                        int64_t i0) {
  const int t = threadIdx.x;
  const int64_t i = i0 + t;
  if (t < kUpIdx && i < p.d) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k)
      if (k < p.hc) s += sigm(mixv[k][t]) * in.v[k];
    p.mixed[i] = s * p.inv_hc;
  }
}

// Block: hidden indices i0 .. i0 + kUpIdx - 1 of every stream, hc * kUpIdx rows (row q: stream
// q / kUpIdx, index q % kUpIdx); teams of `group` threads (gemv threads_for(units)) take kUpRows
// rows each (the full-size up rows are 10 units: 8 teams of one warp, four rows each), every
// row gemv's split, warp sums and warps in order.
template <class F, int V>
__global__ void __launch_bounds__(kUpThreads, 3) hc_up_combine_kernel(Args a, HcArgs p, int group) {
  __shared__ float red[kMaxHc * kUpIdx][kThreads / 32];
  __shared__ float mixv[kMaxHc][kUpIdx];
  const int lane = threadIdx.x % 32;
  const int teams = kUpThreads / group, g = threadIdx.x / group, t = threadIdx.x % group, wpg = group / 32;
  const int wt = t / 32;  // this thread's warp in its team
  const int64_t i0 = int64_t(blockIdx.x) * kUpIdx, units = a.cols / kUnit;
  const int nq = int(p.hc) * kUpIdx;
  // Row r of the team's row set starting at q0: its index in the matrix.
  auto row_of = [&](int q0, int r) {
    const int q = min(q0 + r, nq - 1);
    return min(int64_t(q / kUpIdx) * p.d + i0 + q % kUpIdx, a.rows - 1);
  };
  // The first row set's first unit: weights only, before the wait (programmatic dependent).
  typename F::Raw first[kUpRows];
  const bool has_first = g < teams && g * kUpRows < nq && t < units;
  if (has_first)
#pragma unroll
    for (int r = 0; r < kUpRows; ++r) {
      const int64_t row = row_of(g * kUpRows, r);
      first[r] = F::template load<FromGlobal>(a, a.data + row * a.row_stride, row, t);
    }
  // Unconditional (a no-op in a plain launch): ptxas hoisted a load above a wait inside a branch
  // in an earlier version (tools/device/pdl_sass_check.py).
  pdl_wait();  // PDL: hc_down's low and normed, plain loads only from here on
  if (p.pdl) pdl_launch_dependents();
  const CombineIn cin = combine_prefetch(p, i0);
  // (threads past the last whole team, when group does not divide the block, take no rows)
  for (int q0 = g * kUpRows; g < teams && q0 < nq; q0 += teams * kUpRows) {
    const uint8_t* rows_p[kUpRows];
    int64_t rows[kUpRows];
#pragma unroll
    for (int r = 0; r < kUpRows; ++r) {
      rows[r] = row_of(q0, r);
      rows_p[r] = a.data + rows[r] * a.row_stride;
    }
    float acc[kUpRows];
#pragma unroll
    for (int r = 0; r < kUpRows; ++r) acc[r] = 0.f;
    for (int64_t u = t; u < units; u += group) {
      typename F::Raw raw[kUpRows];
      const bool pre = q0 == g * kUpRows && u == t;  // has_first's unit
#pragma unroll
      for (int r = 0; r < kUpRows; ++r) raw[r] = pre ? first[r] : F::template load<FromGlobal>(a, rows_p[r], rows[r], u);
      float xv[kUnit];
#pragma unroll
      for (int c = 0; c < kUnit; c += 4) {
        // not __ldg (see the top)
        const float4 f = *reinterpret_cast<const float4*>(p.low + u * kUnit + c);  // PDL: input load
        xv[c] = f.x, xv[c + 1] = f.y, xv[c + 2] = f.z, xv[c + 3] = f.w;
      }
      x_for_dot<V, F>(xv);
#pragma unroll
      for (int r = 0; r < kUpRows; ++r) acc[r] += dot_v<V, F>(raw[r], u, xv, nullptr);
    }
#pragma unroll
    for (int r = 0; r < kUpRows; ++r) {
      const float s = warp_sum(acc[r]);
      if (lane == 0 && q0 + r < nq) red[q0 + r][wt] = s;
    }
  }
  __syncthreads();
  for (int q = threadIdx.x; q < nq; q += kUpThreads) {
    float s = 0.f;
    for (int w = 0; w < wpg; ++w) s += red[q][w];
    mixv[q / kUpIdx][q % kUpIdx] = s;
  }
  __syncthreads();
  combine(mixv, cin, p, i0);
}

// gemv_small_kernel's rows (plain floats, cols % 32 != 0: one warp per row), then the combine.
template <int kType>  // 0 F32, 1 F16, 2 BF16
__global__ void __launch_bounds__(kThreads) hc_up_combine_small_kernel(Args a, HcArgs p) {
  __shared__ float mixv[kMaxHc][kUpIdx];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t i0 = int64_t(blockIdx.x) * kUpIdx;
  const CombineIn cin = combine_prefetch(p, i0);
  for (int q = warp; q < p.hc * kUpIdx; q += kThreads / 32) {
    const int k = q / kUpIdx, r = q % kUpIdx;
    const int64_t row = min(k * p.d + i0 + r, a.rows - 1);
    const uint8_t* rp = a.data + row * a.row_stride;
    float s = 0.f;
    for (int64_t c = lane; c < a.cols; c += 32) {
      float w;
      if constexpr (kType == 0) w = __ldg(reinterpret_cast<const float*>(rp) + c);
      else {
        const uint16_t hb = __ldg(reinterpret_cast<const unsigned short*>(rp) + c);
        w = kType == 1 ? f16_bits(hb) : bf16_bits(hb);
      }
      s = fmaf(w, p.low[c], s);
    }
    s = warp_sum(s);
    if (lane == 0) mixv[k][r] = s;
  }
  __syncthreads();
  combine(mixv, cin, p, i0);
}

bool is_plain(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// The unit formats the fused path decodes (the hyper matrices of every checkpoint we load).
bool unit_format(const WeightMatrix& w) {
  if (w.cols % kUnit != 0) return false;
  if (is_plain(w.type)) return true;
  if (w.type != DType::MLX_Q4 && w.type != DType::MLX_Q8) return false;
  if (w.group_size < kUnit || (w.group_size & (w.group_size - 1)) != 0 || w.cols % w.group_size != 0) return false;
  return (w.scale_type == DType::F16 || w.scale_type == DType::BF16) && w.scales && w.biases;
}

Args args_of(const WeightMatrix& w) {  // gemv.cu make_args
  Args a{static_cast<const uint8_t*>(w.data), w.row_stride_bytes(), w.scales, w.biases, 0, 0, w.rows, w.cols,
         nullptr, 0, 0, 0, 0};
  if (w.type == DType::MLX_Q4 || w.type == DType::MLX_Q8) {
    while ((int64_t(1) << a.group_shift) < w.group_size) ++a.group_shift;
    a.groups_per_row = w.cols / w.group_size;
  }
  return a;
}

int threads_for(int64_t units) { return int(std::min<int64_t>(kThreads, (units + 31) / 32 * 32)); }  // gemv.cu

// Calls fn(F-typed tag, V) for w's format.
template <class Fn>
void with_format(const WeightMatrix& w, Fn&& fn) {
  // The GEMV's own choice (kernel 3 reads MLX with dot2 as kernel 2 does; a copy of the rule
  // here once kept dot under 3 and left the chunk's gemv_rows rows).
  const bool v2 = ds4::cuda::gemv_dot_generation(w) == 2, bf = w.scale_type == DType::BF16;
  auto mlx = [&](auto tag4, auto tag4f, auto v) {
    (void)tag4f;
    if (bf) fn(tag4, v);
    else fn(tag4f, v);
  };
  using V1 = std::integral_constant<int, 1>;
  using V2 = std::integral_constant<int, 2>;
  switch (w.type) {
    case DType::F32: return fn(F32{}, V2{});
    case DType::BF16: return fn(Half16<true>{}, V2{});
    case DType::F16: return fn(Half16<false>{}, V2{});
    case DType::MLX_Q4:
      return v2 ? mlx(MlxAffine<4, true>{}, MlxAffine<4, false>{}, V2{}) : mlx(MlxAffine<4, true>{}, MlxAffine<4, false>{}, V1{});
    case DType::MLX_Q8:
      return v2 ? mlx(MlxAffine<8, true>{}, MlxAffine<8, false>{}, V2{}) : mlx(MlxAffine<8, true>{}, MlxAffine<8, false>{}, V1{});
    default: break;
  }
}

unsigned blocks(int64_t n, int64_t per) { return unsigned((n + per - 1) / per); }

std::atomic<int> g_down_rows{-1}, g_pdl{-1}, g_down_pdl{-1};
// Default on: Qwen decode at 2K on the H100 109.45 -> 113.44 tok/s (bench/results/session31-2026-12-07
// call 1; the three plain-launch runs of that round 109.34-109.77), bit-identical outputs
// (test_qwen_hyper_fused_cuda, test_qwen_next_cuda with it on). DS4_HC_PDL=0: plain launches.
bool hc_pdl() { return ds4::cuda::env_setting(g_pdl, "DS4_HC_PDL", {0, 1}, "0 or 1", 1) == 1; }
// hc_down as a programmatic dependent of the kernel before it (its weights and norm weights load
// before griddepcontrol.wait, h after it): Qwen decode at 2K on the H100 129.39 / 126.90 ->
// 134.16 / 132.78 tok/s, the Qwen CUDA tests passing (bench/results/session37-2026-12-07 call B).
// DS4_HC_DOWN_PDL=0: the plain launch (the same bits either way).
bool hc_down_pdl() {
  return ds4::cuda::gemv_pdl() && ds4::cuda::env_setting(g_down_pdl, "DS4_HC_DOWN_PDL", {0, 1}, "0 or 1", 1) == 1;
}
int hc_down_rows() {
  return ds4::cuda::env_setting(g_down_rows, "DS4_HC_DOWN_ROWS", {1, 2, 4}, "1, 2 or 4", kDownRowsDefault);
}

// Units per gemv thread slot of down (hc_down's thread phases).
int64_t down_phases(const WeightMatrix& down) {
  const int64_t units = down.cols / kUnit;
  return (units + threads_for(units) - 1) / threads_for(units);
}

template <class F, int V, int R>
void launch_down(const Args& a, const HcArgs& p, int group, int phases, cudaStream_t s) {
  if (phases < 1 || phases > kMaxPhases) throw InputError("qwen_next cuda: hyper read down rows past hyper_read_fusable");
  const int threads = std::max(kThreads, group * phases);
  const size_t smem = size_t(padded(p.hc * p.d) + int64_t(phases) * R * group) * sizeof(float);
  // Past the default 48 KB with the static part: opted in for the largest shape hyper_read_fusable admits.
  constexpr size_t kMaxSmem = size_t(kMaxHSmem / 4 + 4 * (kMaxHSmem / 4 / 32) + kMaxPhases * R * kThreads) * sizeof(float);
  ds4::cuda::opt_in_smem_once<hc_down_kernel<F, V, R>>(kMaxSmem);
  launch_maybe_pdl_smem(hc_down_pdl(), hc_down_kernel<F, V, R>, dim3(blocks(a.rows, R)), threads, smem, s, a, p, group,
                        phases);
}

}  // namespace

bool hyper_read_fusable(const WeightMatrix& down, const WeightMatrix& up, int64_t hc, int64_t d, int64_t rank) {
  // The fused kernels repeat gemv's CUDA-core arithmetic: the unfused form and the chunk's rows ask
  // for it too (GemvOptions / MatmulBatch cuda_cores), also under DS4_MLX4_TC.
  if (hc < 1 || hc > kMaxHc || d % kUnit != 0 || down.cols != hc * d || up.rows != hc * d || up.cols != rank)
    return false;
  if (down.rows != rank && down.rows != rank + hc) return false;
  if (hc * d * int64_t(sizeof(float)) > kMaxHSmem) return false;  // hc_down stages h in shared memory
  if (unit_format(down) && down_phases(down) > kMaxPhases) return false;  // (implied by the bound above)
  return unit_format(down) && (unit_format(up) || is_plain(up.type));
}

void hyper_read_fused(const WeightMatrix& down, const WeightMatrix& up, const float* h, const float* norm, int64_t hc,
                      int64_t d, int64_t rank, float eps, float* normed, float* low, float* mixed, bool inject,
                      cudaStream_t s) {
  const HcArgs p{h, norm, normed, low, mixed, hc, d, rank, eps, 1.f / float(hc), inject, hc_pdl() && unit_format(up)};
  {
    const Args a = args_of(down);
    const int group = threads_for(down.cols / kUnit), phases = int(down_phases(down));
    const int down_rows = hc_down_rows();
    with_format(down, [&](auto f, auto v) {
      using Fm = decltype(f);
      constexpr int Vv = decltype(v)::value;
      if (down_rows == 1) launch_down<Fm, Vv, 1>(a, p, group, phases, s);
      else if (down_rows == 4) launch_down<Fm, Vv, 4>(a, p, group, phases, s);
      else launch_down<Fm, Vv, 2>(a, p, group, phases, s);
    });
    DS4_CUDA_CHECK_LAUNCH();
  }
  const Args a = args_of(up);
  const unsigned nb = blocks(d, kUpIdx);
  if (!unit_format(up)) {
    if (up.type == DType::F32) hc_up_combine_small_kernel<0><<<nb, kThreads, 0, s>>>(a, p);
    else if (up.type == DType::F16) hc_up_combine_small_kernel<1><<<nb, kThreads, 0, s>>>(a, p);
    else hc_up_combine_small_kernel<2><<<nb, kThreads, 0, s>>>(a, p);
  } else {
    const int group = threads_for(up.cols / kUnit);
    with_format(up, [&](auto f, auto v) {
      launch_maybe_pdl(p.pdl, hc_up_combine_kernel<decltype(f), decltype(v)::value>, dim3(nb), kUpThreads,
                                    s, a, p, group);
    });
  }
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::qwen_next::cuda
