// DeepSeek V4 MoE routing and combination kernels (CPU: moe.cpp). The experts' matrices run
// through backend/cuda gemv_batched with the ids this router writes: no host round trip.
#include <cfloat>

#include "backend/cuda/act_quantize.cuh"
#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/hc_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "models/deepseek_v4/cuda/kernels.h"
#include "core/error.h"
#include "models/deepseek_v4/config.h"

namespace ds4::deepseek_v4::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::SumOp;

constexpr int kMaxK = 64;

__device__ __forceinline__ float score_of(int f, float x) {
  if (f == int(ScoreFunc::kSqrtSoftplus)) return sqrtf(x > 20.0f ? x : log1pf(expf(x)));
  if (f == int(ScoreFunc::kSigmoid)) return 1.0f / (1.0f + expf(-x));
  return x;  // softmax: normalized over the row below
}

// One block per token: scores, then the chosen experts (hash table row, or top-k of score +
// bias with ties to the lower index, in rank order as topk_f32) and their normalized, scaled
// weights. Token t (blockIdx.x) reads logits / token at t * stride, writes ids / weights at t * K.
__device__ void route_token(RouteArgs a, int64_t t, int64_t stride) {
  a.logits += t * stride, a.token += t * stride, a.ids += t * a.k, a.weights += t * a.k;
  extern __shared__ float4 p4[];  // {E} scores, then {E} biased (float4: 16-byte aligned)
  float* p = reinterpret_cast<float*>(p4);
  float* biased = p + a.experts;
  __shared__ int chosen[kMaxK];
  const int64_t E = a.experts, K = a.k;
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) p[e] = score_of(a.score, a.logits[e]);
  if (a.score == int(ScoreFunc::kSoftmax)) {
    __syncthreads();
    float m = -FLT_MAX;
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) m = fmaxf(m, p[e]);
    m = block_reduce(m, MaxOp{}, -FLT_MAX);
    float s = 0.f;
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) s += (p[e] = expf(p[e] - m));
    s = block_reduce(s, SumOp{}, 0.f);
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) p[e] /= s;
  }
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) biased[e] = p[e] + (a.bias ? a.bias[e] : 0.f);
  __syncthreads();
  if (a.tid2eid) {
    if (threadIdx.x < K) chosen[threadIdx.x] = a.tid2eid[int64_t(*a.token) * K + threadIdx.x];
  } else {
    // rank of e = experts ahead of it (greater, or equal at a lower index); E % 4 == 0 (256 in
    // Flash): four at a time from one broadcast float4 read (issue #23: the scalar scan was most
    // of this kernel's time)
    const bool by4 = E % 4 == 0;
    for (int64_t e = threadIdx.x; e < E; e += blockDim.x) {
      const float be = biased[e];
      int rank = 0;
      if (by4) {
        const float4* b4 = reinterpret_cast<const float4*>(biased);
        for (int64_t q = 0; q < E / 4; ++q) {
          const float4 v = b4[q];
          const int64_t o = 4 * q;
          rank += int(v.x > be || (v.x == be && o < e)) + int(v.y > be || (v.y == be && o + 1 < e)) +
                  int(v.z > be || (v.z == be && o + 2 < e)) + int(v.w > be || (v.w == be && o + 3 < e));
        }
      } else {
        for (int64_t o = 0; o < E; ++o) rank += int(biased[o] > be || (biased[o] == be && o < e));
      }
      if (rank < K) chosen[rank] = int(e);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.f;
    for (int64_t k = 0; k < K; ++k) sum += p[chosen[k]];
    const float norm = a.norm_topk ? sum + 1e-20f : 1.0f;  // HF: weights / (sum + 1e-20)
    for (int64_t k = 0; k < K; ++k) {
      a.ids[k] = chosen[k];
      a.weights[k] = p[chosen[k]] / norm * a.routed_scale;
    }
  }
}

__global__ void route_kernel(RouteArgs a, int64_t stride, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  route_token(a, blockIdx.x, stride);
}

// One value of swiglu_clamp: every kernel that computes it calls this (same bits).
__device__ __forceinline__ float swiglu_value(float gv, float uv, float limit) {
  if (limit > 0.f) {
    gv = fminf(gv, limit);
    uv = fminf(fmaxf(uv, -limit), limit);
  }
  return gv / (1.f + expf(-gv)) * uv;
}

__device__ __forceinline__ float4 swiglu4(float4 g, float4 u, float limit) {
  return make_float4(swiglu_value(g.x, u.x, limit), swiglu_value(g.y, u.y, limit), swiglu_value(g.z, u.z, limit),
                     swiglu_value(g.w, u.w, limit));
}

__global__ void swiglu_clamp_kernel(const float* __restrict__ g, const float* __restrict__ u, int64_t rows,
                                    int64_t cols, int64_t in_stride, float limit, float* __restrict__ y,
                                    int64_t out_stride, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const int64_t r = i / cols, c = i % cols;
  y[r * out_stride + c] = swiglu_value(g[r * in_stride + c], u[r * in_stride + c], limit);
}

constexpr int kQuantWarps = 4;

struct QuantOut {
  int8_t* q;
  float* d;
  int16_t* bs;
  int64_t n;  // values per quantized row
};

// swiglu_clamp_quant: one warp per tile of row blockIdx.y (Q8_0: 128 values, 4 per lane; Q8_K:
// one 256-value block, values 4l.. and 128 + 4l.. per lane: quantize_act's layouts), the values
// computed in registers, stored to y and quantized by act_quantize.cuh's functions.
template <bool kQ8K>
__global__ void __launch_bounds__(kQuantWarps * 32)
    swiglu_quant_kernel(const float* g, const float* u, int64_t cols, int64_t in_stride, float limit, float* y, QuantOut o) {
  using namespace ds4::cuda::act_quant_detail;
  ds4::cuda::gemv_detail::pdl_begin();
  const int lane = threadIdx.x & 31;
  const int64_t row = blockIdx.y, tile = int64_t(blockIdx.x) * kQuantWarps + threadIdx.x / 32;
  g += row * in_stride, u += row * in_stride, y += row * cols;
  if constexpr (kQ8K) {
    if (tile * 256 >= cols) return;  // whole warp
    float v[8];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t c = tile * 256 + 128 * h + 4 * lane;
      const float4 f = swiglu4(*reinterpret_cast<const float4*>(g + c), *reinterpret_cast<const float4*>(u + c), limit);
      *reinterpret_cast<float4*>(y + c) = f;
      v[4 * h] = f.x, v[4 * h + 1] = f.y, v[4 * h + 2] = f.z, v[4 * h + 3] = f.w;
    }
    q8_k_block(v, lane, o.q + row * o.n + tile * 256, o.bs + row * (o.n / 16) + tile * 16, o.d + row * (o.n / 256) + tile);
  } else {
    const int64_t t0 = tile * 128, c = t0 + 4 * lane;
    if (t0 >= cols) return;  // whole warp
    const bool live = c < cols;  // whole 8-lane blocks
    float4 f = make_float4(0.f, 0.f, 0.f, 0.f);
    if (live) {
      f = swiglu4(*reinterpret_cast<const float4*>(g + c), *reinterpret_cast<const float4*>(u + c), limit);
      *reinterpret_cast<float4*>(y + c) = f;
    }
    q8_0_tile(f, live, lane, o.q + row * o.n + t0, o.d + row * (o.n / 32) + t0 / 32);
  }
}

// Warp `tile` of x {n} quantized into o's row 0 as quantize_act does it (Q8_0: 128 values, Q8_K:
// one 256-value block); the whole warp calls it.
template <bool kQ8K>
__device__ __forceinline__ void quantize_tile(const float* x, int64_t n, int64_t tile, int lane, const QuantOut& o) {
  using namespace ds4::cuda::act_quant_detail;
  if constexpr (kQ8K) {
    const float4 f0 = *reinterpret_cast<const float4*>(x + tile * 256 + 4 * lane);
    const float4 f1 = *reinterpret_cast<const float4*>(x + tile * 256 + 128 + 4 * lane);
    const float v[8] = {f0.x, f0.y, f0.z, f0.w, f1.x, f1.y, f1.z, f1.w};
    q8_k_block(v, lane, o.q + tile * 256, o.bs + tile * 16, o.d + tile);
  } else {
    const int64_t c = tile * 128 + 4 * lane;
    const bool live = c < n;
    const float4 f = live ? *reinterpret_cast<const float4*>(x + c) : make_float4(0.f, 0.f, 0.f, 0.f);
    q8_0_tile(f, live, lane, o.q + tile * 128, o.d + tile * 4);
  }
}

// moe_route_quant: block 0 routes the one token (route_kernel's code), blocks 1.. quantize x,
// a warp per tile: the routed experts' input quantized beside the router instead of in a
// launch of its own between the router and gate|up (issue #23).
template <bool kQ8K>
__global__ void route_quant_kernel(RouteArgs a, const float* x, int64_t n, QuantOut o, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  if (blockIdx.x == 0) {
    route_token(a, 0, 0);
    return;
  }
  const int64_t tile = int64_t(blockIdx.x - 1) * (blockDim.x / 32) + threadIdx.x / 32;
  if (tile * (kQ8K ? 256 : 128) >= n) return;  // whole warp
  quantize_tile<kQ8K>(x, n, tile, int(threadIdx.x & 31), o);
}

// rmsnorm_quant: rmsnorm_kernel's sums (backend/cuda/rmsnorm.cu: the same threads, fmaf order
// and block_reduce, so the same inv and values), the row staged in shared memory, then one warp
// per tile as in swiglu_quant_kernel.
template <bool kQ8K>
__global__ void rmsnorm_quant_kernel(const float* x, const float* __restrict__ w, float* y, int64_t dim, float eps,
                                     QuantOut o) {
  using namespace ds4::cuda::act_quant_detail;
  __shared__ float4 row4[kNormQuantMax / 4];
  float* row = reinterpret_cast<float*>(row4);
  ds4::cuda::gemv_detail::pdl_begin();
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss = fmaf(x[i], x[i], ss);
  ss = block_reduce(ss, SumOp{}, 0.f);
  const float inv = rsqrtf(ss / float(dim) + eps);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = w ? x[i] * inv * w[i] : x[i] * inv;
    y[i] = v;
    row[i] = v;
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warps = int(blockDim.x / 32);
  if constexpr (kQ8K) {
    for (int64_t b = threadIdx.x / 32; b * 256 < dim; b += warps) {
      const float4 f0 = row4[b * 64 + lane], f1 = row4[b * 64 + 32 + lane];
      const float v[8] = {f0.x, f0.y, f0.z, f0.w, f1.x, f1.y, f1.z, f1.w};
      q8_k_block(v, lane, o.q + b * 256, o.bs + b * 16, o.d + b);
    }
  } else {
    for (int64_t t0 = int64_t(threadIdx.x / 32) * 128; t0 < dim; t0 += int64_t(warps) * 128) {
      const bool live = t0 + 4 * lane < dim;
      const float4 f = live ? row4[t0 / 4 + lane] : make_float4(0.f, 0.f, 0.f, 0.f);
      q8_0_tile(f, live, lane, o.q + t0, o.d + t0 / 32);
    }
  }
}

// The quantized rows' pointers, checked against the values a launch writes.
QuantOut quant_out(const char* who, const ds4::cuda::DeviceActQ8& q, int64_t rows, int64_t cols) {
  const int64_t bv = q.block == ActBlock::kQ8_0 ? 32 : 256;
  if (q.block == ActBlock::kNone || q.n != cols || q.rows < rows || cols % bv != 0 || !q.q || !q.d ||
      (q.block == ActBlock::kQ8_K && !q.bsums))
    throw InputError(std::string(who) + ": quantized rows of " + std::to_string(q.n) + " values (" +
                     std::to_string(q.rows) + " rows) for " + std::to_string(rows) + " x " + std::to_string(cols));
  return QuantOut{q.q, q.d, q.bsums, q.n};
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

__global__ void combine_kernel(const float* __restrict__ y, const float* __restrict__ w, int64_t k,
                               const float* __restrict__ sh, int64_t d, float* __restrict__ out, int64_t stride,
                               bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  {
    const int64_t t = blockIdx.y;
    y += t * k * d, w += t * k, sh += t * stride, out += t * stride;
  }
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= d) return;
  out[i] = ds4::cuda::hc_detail::combine_value(y, w, k, sh, d, i);  // (the fused hc_pre's prologue recomputes it)
}

}  // namespace

void moe_route(const RouteArgs& a, cudaStream_t s, const Rows& rows) {
  if (a.k < 1 || a.k > kMaxK || a.k > a.experts)
    throw InputError("deepseek_v4 cuda: experts_used " + std::to_string(a.k) + " unsupported (1.." +
                     std::to_string(kMaxK) + ")");
  ds4::cuda::gemv_detail::launch_small(route_kernel, dim3(unsigned(rows.count)), 256, size_t(a.experts) * 8, s, a,
                                       rows.stride);
}

void swiglu_clamp(const float* g, const float* u, int64_t rows, int64_t cols, int64_t in_stride, float limit,
                  float* y, cudaStream_t s, int64_t out_stride) {
  ds4::cuda::gemv_detail::launch_small(swiglu_clamp_kernel, dim3(unsigned((rows * cols + 255) / 256)), 256, 0, s, g, u,
                                       rows, cols, in_stride, limit, y, out_stride ? out_stride : cols);
}

void moe_route_quant(const RouteArgs& a, const float* x, const ds4::cuda::DeviceActQ8& q, cudaStream_t s) {
  if (a.k < 1 || a.k > kMaxK || a.k > a.experts)
    throw InputError("deepseek_v4 cuda: experts_used " + std::to_string(a.k) + " unsupported (1.." +
                     std::to_string(kMaxK) + ")");
  const QuantOut o = quant_out("deepseek_v4 cuda moe_route_quant", q, 1, q.n);
  if (!aligned16(x)) throw InputError("deepseek_v4 cuda moe_route_quant: x not 16-byte aligned");
  constexpr int kThreads = 256;  // moe_route's (its softmax sums depend on it)
  const int64_t tiles = q.block == ActBlock::kQ8_K ? q.n / 256 : (q.n + 127) / 128;
  const unsigned blocks = unsigned(1 + (tiles + kThreads / 32 - 1) / (kThreads / 32));
  if (q.block == ActBlock::kQ8_K)
    ds4::cuda::gemv_detail::launch_small(route_quant_kernel<true>, dim3(blocks), kThreads, size_t(a.experts) * 8, s, a,
                                         x, q.n, o);
  else
    ds4::cuda::gemv_detail::launch_small(route_quant_kernel<false>, dim3(blocks), kThreads, size_t(a.experts) * 8, s, a,
                                         x, q.n, o);
}

void swiglu_clamp_quant(const float* g, const float* u, int64_t rows, int64_t cols, int64_t in_stride, float limit,
                        float* y, const ds4::cuda::DeviceActQ8& q, cudaStream_t s) {
  constexpr const char* kWho = "deepseek_v4 cuda swiglu_clamp_quant";
  const QuantOut o = quant_out(kWho, q, rows, cols);
  if (rows < 1 || rows > 65535 || in_stride % 4 != 0 || !aligned16(g) || !aligned16(u) || !aligned16(y))
    throw InputError(std::string(kWho) + ": rows " + std::to_string(rows) + ", in_stride " + std::to_string(in_stride) +
                     " or pointers not 16-byte aligned");
  using ds4::cuda::gemv_detail::launch_maybe_pdl;
  const int64_t tiles = q.block == ActBlock::kQ8_K ? cols / 256 : (cols + 127) / 128;
  const dim3 blocks(unsigned((tiles + kQuantWarps - 1) / kQuantWarps), unsigned(rows));
  if (q.block == ActBlock::kQ8_K)
    launch_maybe_pdl(ds4::cuda::gemv_pdl(), swiglu_quant_kernel<true>, blocks, kQuantWarps * 32, s, g, u, cols,
                     in_stride, limit, y, o);
  else
    launch_maybe_pdl(ds4::cuda::gemv_pdl(), swiglu_quant_kernel<false>, blocks, kQuantWarps * 32, s, g, u, cols,
                     in_stride, limit, y, o);
}

void rmsnorm_quant(const float* x, const float* w, float* y, int64_t dim, float eps, const ds4::cuda::DeviceActQ8& q,
                   cudaStream_t s) {
  constexpr const char* kWho = "deepseek_v4 cuda rmsnorm_quant";
  const QuantOut o = quant_out(kWho, q, 1, dim);
  if (dim > kNormQuantMax || !aligned16(x) || !aligned16(y))
    throw InputError(std::string(kWho) + ": " + std::to_string(dim) + " values (at most " +
                     std::to_string(kNormQuantMax) + ") or pointers not 16-byte aligned");
  const int threads = dim >= 1024 ? 512 : 128;  // rmsnorm_strided_f32's, so its sums
  using ds4::cuda::gemv_detail::launch_maybe_pdl;
  if (q.block == ActBlock::kQ8_K)
    launch_maybe_pdl(ds4::cuda::gemv_pdl(), rmsnorm_quant_kernel<true>, dim3(1), threads, s, x, w, y, dim, eps, o);
  else
    launch_maybe_pdl(ds4::cuda::gemv_pdl(), rmsnorm_quant_kernel<false>, dim3(1), threads, s, x, w, y, dim, eps, o);
}

void moe_combine(const float* y, const float* w, int64_t k, const float* sh, int64_t d, float* out,
                 cudaStream_t s, const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(combine_kernel, dim3(unsigned((d + 255) / 256), unsigned(rows.count)), 256, 0, s,
                                       y, w, k, sh, d, out, rows.stride);
}

}  // namespace ds4::deepseek_v4::cuda
