// MLA decode kernels (CPU: mla.cpp): the latent cache append and the absorbed attention
// over the selected latent rows (scores, softmax, weighted sum: three kernels over the
// indexer's position list, each row read once for all heads in the first and once per 8
// heads in the last; the cost does not grow with the context once the selection is sparse). The W_uk / W_uv
// products are batched gemvs (model_cuda.cu).
#include <algorithm>
#include <cfloat>

#include "backend/cuda/check.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/seq_rows.cuh"
#include "models/glm5/cuda/kernels.h"

namespace ds4::glm5::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::seq_shift;
using ds4::cuda::detail::shifted;
using ds4::cuda::detail::SumOp;
using ds4::cuda::detail::warp_reduce;

__global__ void mla_append_kernel(const float* __restrict__ kv, const float* __restrict__ w, float* __restrict__ latent,
                                  const int32_t* __restrict__ pos, MlaShape sh, Rows rr) {
  kv += int64_t(blockIdx.x) * rr.stride;  // token blockIdx.x of a chunk
  latent = shifted(latent, seq_shift(rr.seq, blockIdx.x));  // a decode batch: its own sequence's cache
  const int64_t n = sh.kv_lora;
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += kv[i] * kv[i];
  ss = block_reduce(ss, SumOp{}, 0.f);
  const float r = rsqrtf(ss / float(n) + sh.eps);
  float* row = latent + int64_t(pos[blockIdx.x]) * n;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) row[i] = (kv[i] * r) * w[i];
}

// Scores {heads, width} of the selected rows: one warp per row (grid-stride), the row held
// in registers and dotted with every head's query, so each row is read once for all heads.
__global__ void mla_scores_kernel(const float* __restrict__ q_lat, const float* __restrict__ latent,
                                  const int32_t* __restrict__ sel_idx, const int32_t* __restrict__ sel_count,
                                  MlaShape sh, float* __restrict__ scores, Rows rr) {
  {  // token blockIdx.y of a chunk (a decode batch: on its own sequence's cache)
    const int64_t o = int64_t(blockIdx.y) * rr.stride;
    q_lat += o, sel_idx += o, sel_count += o, scores += o;
    latent = shifted(latent, seq_shift(rr.seq, blockIdx.y));
  }
  constexpr int kPer = kMaxKvLora / 32;
  const int lane = threadIdx.x % 32;
  const int64_t n = sh.kv_lora, count = *sel_count;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t t = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; t < count; t += warps) {
    float r[kPer];
    const float* row = latent + int64_t(sel_idx[t]) * n;
#pragma unroll
    for (int u = 0; u < kPer; ++u) r[u] = lane + 32 * u < n ? row[lane + 32 * u] : 0.f;
    for (int64_t h = 0; h < sh.heads; ++h) {
      const float* q = q_lat + h * n;
      float d = 0.f;
#pragma unroll
      for (int u = 0; u < kPer; ++u)
        if (lane + 32 * u < n) d += __ldg(q + lane + 32 * u) * r[u];
      d = warp_reduce(d, SumOp{});
      if (lane == 0) scores[h * sh.width + t] = d * sh.scale;
    }
  }
}

// One block per head: scores -> probabilities in place (exp(s - max) * 1/sum).
__global__ void mla_softmax_kernel(const int32_t* __restrict__ sel_count, MlaShape sh, float* __restrict__ scores,
                                   int64_t stride) {
  sel_count += int64_t(blockIdx.y) * stride;  // token blockIdx.y
  float* sc = scores + int64_t(blockIdx.y) * stride + int64_t(blockIdx.x) * sh.width;
  const int64_t count = *sel_count;
  float m = -FLT_MAX;
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x) m = fmaxf(m, sc[t]);
  m = block_reduce(m, MaxOp{}, -FLT_MAX);
  float sum = 0.f;
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
    const float e = expf(sc[t] - m);
    sc[t] = e;
    sum += e;
  }
  sum = block_reduce(sum, SumOp{}, 0.f);
  const float inv = 1.f / sum;
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x) sc[t] *= inv;
}

// o_lat[h][i] = sum_t p[h][t] latent[sel_idx[t]][i], in selection (= ascending position)
// order. Block: 8 warps = 8 heads over one 32-wide column chunk (blockIdx.x), so the chunk
// of each selected row is read from L1 by all 8; lanes load 32 (p, row) pairs at a time, and
// the next 32 rows' loads are issued before this group's sum (one memory latency per group
// was the loop's cost; the sum is the same operations in the same order).
__global__ void mla_output_kernel(const float* __restrict__ probs, const float* __restrict__ latent,
                                  const int32_t* __restrict__ sel_idx, const int32_t* __restrict__ sel_count,
                                  MlaShape sh, float* __restrict__ o_lat, Rows rr) {
  {  // token blockIdx.z of a chunk (a decode batch: on its own sequence's cache)
    const int64_t o = int64_t(blockIdx.z) * rr.stride;
    probs += o, sel_idx += o, sel_count += o, o_lat += o;
    latent = shifted(latent, seq_shift(rr.seq, blockIdx.z));
  }
  const int lane = threadIdx.x % 32;
  const int64_t h = int64_t(blockIdx.y) * (blockDim.x / 32) + threadIdx.x / 32;
  const int64_t i = int64_t(blockIdx.x) * 32 + lane, n = sh.kv_lora, count = *sel_count;
  if (h >= sh.heads) return;
  const float* p = probs + h * sh.width;
  float acc = 0.f;
  // Group t0's 32 (p, row) pairs: lane b's p and position, and this lane's column of each row.
  auto load = [&](int64_t t0, float& pt, float (&lv)[32]) {
    const bool in = t0 + lane < count;
    pt = in ? p[t0 + lane] : 0.f;
    const int32_t jt = in ? sel_idx[t0 + lane] : 0;
    const int m = int(count - t0 < 32 ? count - t0 : 32);
#pragma unroll
    for (int b = 0; b < 32; ++b) {
      const int64_t j = __shfl_sync(0xffffffffu, jt, b);
      lv[b] = b < m && i < n ? latent[j * n + i] : 0.f;
    }
  };
  float pt = 0.f, lv[32];
  if (count > 0) load(0, pt, lv);
  for (int64_t t0 = 0; t0 < count; t0 += 32) {
    float pn = 0.f, ln[32];
    const bool more = t0 + 32 < count;
    if (more) load(t0 + 32, pn, ln);
    const int m = int(count - t0 < 32 ? count - t0 : 32);
#pragma unroll
    for (int b = 0; b < 32; ++b) {
      const float w = __shfl_sync(0xffffffffu, pt, b);
      if (b < m && i < n) acc += w * lv[b];
    }
    if (!more) break;
    pt = pn;
#pragma unroll
    for (int b = 0; b < 32; ++b) lv[b] = ln[b];
  }
  if (i < n) o_lat[h * n + i] = acc;
}

// Tensor-core chunk (chunk_gemm.cu): token blockIdx.y's selected latent rows copied out in
// selection order, g {width, kv_lora} per token; rows past its count are zeros (their scores
// are then 0 and their probabilities never written, so they add nothing to the output).
__global__ void mla_gather_kernel(const float* __restrict__ latent, const int32_t* __restrict__ sel_idx,
                                  const int32_t* __restrict__ sel_count, MlaShape sh, float* __restrict__ g,
                                  int64_t stride) {
  const int64_t t = blockIdx.y, j = blockIdx.x, n = sh.kv_lora;
  sel_idx += t * stride, sel_count += t * stride;
  float* out = g + (t * sh.width + j) * n;
  const float* row = j < *sel_count ? latent + int64_t(sel_idx[j]) * n : nullptr;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = row ? row[i] : 0.f;
}

}  // namespace

void mla_gather(const float* latent, const int32_t* sel_idx, const int32_t* sel_count, const MlaShape& sh, float* g,
                cudaStream_t s, const Rows& rows) {
  mla_gather_kernel<<<dim3(unsigned(sh.width), unsigned(rows.count)), 128, 0, s>>>(latent, sel_idx, sel_count, sh, g,
                                                                                   rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

void mla_softmax(const int32_t* sel_count, const MlaShape& sh, float* scores, cudaStream_t s, const Rows& rows) {
  mla_softmax_kernel<<<dim3(unsigned(sh.heads), unsigned(rows.count)), 256, 0, s>>>(sel_count, sh, scores, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

void mla_append(const float* kv, const float* w, float* latent, const int32_t* pos, const MlaShape& sh,
                cudaStream_t s, const Rows& rows) {
  mla_append_kernel<<<unsigned(rows.count), 256, 0, s>>>(kv, w, latent, pos, sh, rows);
  DS4_CUDA_CHECK_LAUNCH();
}

void mla_scores(const float* q_lat, const float* latent, const int32_t* sel_idx, const int32_t* sel_count,
                const MlaShape& sh, float* scores, cudaStream_t s, const Rows& rows) {
  if (sh.kv_lora > kMaxKvLora)
    throw InputError("glm5 cuda: kv_lora_rank " + std::to_string(sh.kv_lora) + " > " + std::to_string(kMaxKvLora));
  // The count lives on the device: fixed grids (the step is a CUDA graph), grid-stride rows.
  const unsigned row_blocks = unsigned(std::min<int64_t>((sh.width + 7) / 8, 256));
  mla_scores_kernel<<<dim3(row_blocks, unsigned(rows.count)), 256, 0, s>>>(q_lat, latent, sel_idx, sel_count, sh,
                                                                          scores, rows);
  DS4_CUDA_CHECK_LAUNCH();
}

void mla_output(const float* probs, const float* latent, const int32_t* sel_idx, const int32_t* sel_count,
                const MlaShape& sh, float* o_lat, cudaStream_t s, const Rows& rows) {
  const dim3 grid(unsigned((sh.kv_lora + 31) / 32), unsigned((sh.heads + 7) / 8), unsigned(rows.count));
  mla_output_kernel<<<grid, 256, 0, s>>>(probs, latent, sel_idx, sel_count, sh, o_lat, rows);
  DS4_CUDA_CHECK_LAUNCH();
}

void mla_attend(const float* q_lat, const float* latent, const int32_t* sel_idx, const int32_t* sel_count,
                const MlaShape& sh, float* scores, float* o_lat, cudaStream_t s, const Rows& rows) {
  mla_scores(q_lat, latent, sel_idx, sel_count, sh, scores, s, rows);
  mla_softmax(sel_count, sh, scores, s, rows);
  mla_output(scores, latent, sel_idx, sel_count, sh, o_lat, s, rows);
}

}  // namespace ds4::glm5::cuda
