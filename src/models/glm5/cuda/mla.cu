// MLA decode kernels (CPU: mla.cpp): the latent cache append and the absorbed attention
// over the selected latent rows (scores, softmax, weighted sum: three kernels over the
// indexer's position list, each row read once for all heads in the first and once per 8
// heads in the last; the cost does not grow with the context once the selection is sparse). The W_uk / W_uv
// products are batched gemvs (model_cuda.cu).
#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <cfloat>

#include "backend/cuda/check.h"
#include "backend/cuda/env_setting.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/seq_rows.cuh"
#include "models/glm5/cuda/kernels.h"

namespace ds4::glm5::cuda {
namespace {

namespace cg = cooperative_groups;

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::seq_shift;
using ds4::cuda::detail::shifted;
using ds4::cuda::detail::SumOp;
using ds4::cuda::detail::warp_reduce;

__global__ void mla_append_kernel(const float* __restrict__ kv, const float* __restrict__ w, float* __restrict__ latent,
                                  const int32_t* __restrict__ pos, MlaShape sh, Rows rr, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
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

// The scores / output kernels' token blockIdx.z of a chunk: every per-token pointer offset by its
// row, the latent cache that of the token's sequence (a decode batch: each row its own cache).
template <class L, class... P>
__device__ __forceinline__ void to_token(const Rows& rr, int64_t token, L& latent, P&... per_token) {
  const int64_t o = token * rr.stride;
  ((per_token += o), ...);
  latent = shifted(latent, seq_shift(rr.seq, token));
}

// Scores {heads, width} of the selected rows. Block (row group, head group, token): the head
// group's queries staged in shared memory once, each warp holding kScoreRows selected rows in
// registers (lane l: columns l, l + 32, ...) and dotting them with every query of the group.
// Each score is the same sum as the one-warp-per-row kernel of before (lane partials in column
// order, the warp's butterfly), so decode, chunks and batches agree bit for bit as before. That
// kernel reread every query from global memory per row: all SMs loading the same 2 KB query at
// once, 168 us a layer at 2K (H100, session 25 call 1) for ~4 MB of rows.
constexpr int kScoreHeads = 16;  // queries per block: 16 x 512 floats = 32 KB of shared memory
constexpr int kScoreRows = 4;    // selected rows per warp at a time (4 x 16 registers a lane)
constexpr int kScoreThreads = 256;
__global__ void __launch_bounds__(kScoreThreads)
    mla_scores_kernel(const float* __restrict__ q_lat, const float* __restrict__ latent,
                      const int32_t* __restrict__ sel_idx, const int32_t* __restrict__ sel_count, MlaShape sh,
                      float* __restrict__ scores, Rows rr, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  to_token(rr, blockIdx.z, latent, q_lat, sel_idx, sel_count, scores);
  __shared__ float qs[kScoreHeads * kMaxKvLora];
  constexpr int kPer = kMaxKvLora / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t n = sh.kv_lora, count = *sel_count, h0 = int64_t(blockIdx.y) * kScoreHeads;
  const int hn = int(sh.heads - h0 < kScoreHeads ? sh.heads - h0 : kScoreHeads);
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < hn * n; i += blockDim.x) qs[i] = q_lat[h0 * n + i];
  __syncthreads();
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t t0 = (int64_t(blockIdx.x) * (blockDim.x / 32) + warp) * kScoreRows; t0 < count;
       t0 += warps * kScoreRows) {
    float r[kScoreRows][kPer];
#pragma unroll
    for (int j = 0; j < kScoreRows; ++j) {
      const float* row = t0 + j < count ? latent + int64_t(sel_idx[t0 + j]) * n : nullptr;
#pragma unroll
      for (int u = 0; u < kPer; ++u) r[j][u] = row && lane + 32 * u < n ? row[lane + 32 * u] : 0.f;
    }
    for (int hh = 0; hh < hn; ++hh) {
      const float* q = qs + hh * n;
      float d[kScoreRows];
#pragma unroll
      for (int j = 0; j < kScoreRows; ++j) d[j] = 0.f;
#pragma unroll
      for (int u = 0; u < kPer; ++u)
        if (lane + 32 * u < n) {
          const float qv = q[lane + 32 * u];
#pragma unroll
          for (int j = 0; j < kScoreRows; ++j) d[j] = fmaf(qv, r[j][u], d[j]);
        }
#pragma unroll
      for (int j = 0; j < kScoreRows; ++j) d[j] = warp_reduce(d[j], SumOp{});
      if (lane == 0) {
#pragma unroll
        for (int j = 0; j < kScoreRows; ++j)
          if (t0 + j < count) scores[(h0 + hh) * sh.width + t0 + j] = d[j] * sh.scale;
      }
    }
  }
}

// One block per head: scores -> probabilities in place (exp(s - max) * 1/sum).
__global__ void mla_softmax_kernel(const int32_t* __restrict__ sel_count, MlaShape sh, float* __restrict__ scores,
                                   int64_t stride, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
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
// order within each of `segments` fixed spans of the selection (mla_output_segment_rows), the
// spans' sums then added in span order. Block: 8 warps = 8 heads over one 32-wide column chunk
// (blockIdx.x) and one span (blockIdx.z % segments; the token is blockIdx.z / segments, plus
// row0). Groups of kOutGroup selected rows go through shared memory, loaded once for the block
// (each warp 16 rows' column chunk), double-buffered: group g + 1's rows are in flight while
// group g is summed, and their positions (sel_idx) were loaded one group earlier still, so one
// memory latency, not two, stands between groups. A token's span blocks are one thread block
// cluster: each leaves its sums in shared memory and the first block adds them (distributed
// shared memory, after a cluster barrier). One span per token read its whole selection behind
// one block's chain of groups: 128 blocks for a decode step, 73 us of GLM's 2K step a layer
// (in-graph exposed, H100 session 37). The spans depend only on the width, and every token's
// sum is the same operations in the same order, so decode, chunks and batches agree bit for bit;
// `segments` 1 is the one-span kernel of before, bit for bit.
constexpr int kOutThreads = 256, kOutGroup = 128, kMaxOutSegments = 8;
__device__ __host__ inline int64_t mla_output_segment_rows(int64_t width, int segments) {
  const int64_t per = (width + segments - 1) / segments;
  return (per + kOutGroup - 1) / kOutGroup * kOutGroup;
}
__global__ void __launch_bounds__(kOutThreads)
    mla_output_kernel(const float* __restrict__ probs, const float* __restrict__ latent,
                      const int32_t* __restrict__ sel_idx, const int32_t* __restrict__ sel_count, MlaShape sh,
                      float* __restrict__ o_lat, Rows rr, int segments, int64_t row0, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int seg = int(blockIdx.z % unsigned(segments));
  to_token(rr, row0 + blockIdx.z / unsigned(segments), latent, probs, sel_idx, sel_count, o_lat);
  constexpr int kWarps = kOutThreads / 32, kPer = kOutGroup / kWarps, kLaneP = kOutGroup / 32;
  __shared__ float tile[2][kOutGroup][32];  // {group row, column}, two groups
  __shared__ float span_sum[kOutThreads];   // this span's sums, read by the cluster's first block
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t h = int64_t(blockIdx.y) * kWarps + warp;
  const int64_t i = int64_t(blockIdx.x) * 32 + lane, n = sh.kv_lora;
  const int64_t span = mla_output_segment_rows(sh.width, segments), begin = seg * span;
  const int64_t end = begin + span < *sel_count ? begin + span : *sel_count;
  const bool head = h < sh.heads;  // (warps past the heads still load and reach the barriers)
  const float* p = probs + (head ? h : 0) * sh.width;
  // group t0: this warp's kPer rows' positions (-1 past the span), then their column i
  auto load_idx = [&](int64_t t0, int32_t (&j)[kPer]) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t t = t0 + warp * kPer + k;
      j[k] = t < end ? sel_idx[t] : -1;
    }
  };
  auto load_rows = [&](const int32_t (&j)[kPer], float (&lv)[kPer]) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) lv[k] = j[k] >= 0 && i < n ? latent[int64_t(j[k]) * n + i] : 0.f;
  };
  auto store = [&](int buf, const float (&lv)[kPer]) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) tile[buf][warp * kPer + k][lane] = lv[k];
  };
  // lane l holds the probabilities of rows t0 + l, t0 + 32 + l, ...
  auto load_p = [&](int64_t t0, float(&pt)[kLaneP]) {
#pragma unroll
    for (int q = 0; q < kLaneP; ++q) pt[q] = head && t0 + 32 * q + lane < end ? p[t0 + 32 * q + lane] : 0.f;
  };
  float acc = 0.f, lv[kPer], pt[kLaneP];
  int32_t jn[kPer];
  load_idx(begin, jn);
  load_rows(jn, lv);
  load_p(begin, pt);
  store(0, lv);
  load_idx(begin + kOutGroup, jn);
  __syncthreads();
  int buf = 0;
  for (int64_t t0 = begin; t0 < end; t0 += kOutGroup) {
    const bool more = t0 + kOutGroup < end;
    float ln[kPer], pn[kLaneP];
    if (more) {
      load_rows(jn, ln);
      load_p(t0 + kOutGroup, pn);
      load_idx(t0 + 2 * kOutGroup, jn);
    }
    const int64_t m = end - t0;
#pragma unroll
    for (int q = 0; q < kLaneP; ++q)
#pragma unroll
      for (int b = 0; b < 32; ++b) {
        const float w = __shfl_sync(0xffffffffu, pt[q], b);
        if (32 * q + b < m && i < n) acc += w * tile[buf][32 * q + b][lane];
      }
    if (!more) break;
    store(buf ^ 1, ln);  // the other buffer: last read before the previous barrier
    __syncthreads();
    buf ^= 1;
#pragma unroll
    for (int q = 0; q < kLaneP; ++q) pt[q] = pn[q];
  }
  if (segments == 1) {
    if (head && i < n) o_lat[h * n + i] = acc;
    return;
  }
  span_sum[threadIdx.x] = acc;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every span's sums are in its block's shared memory
  if (cluster.block_rank() == 0 && head && i < n) {
    float part[kMaxOutSegments];
#pragma unroll
    for (int r = 0; r < kMaxOutSegments; ++r)
      part[r] = r < segments ? *cluster.map_shared_rank(span_sum + threadIdx.x, r) : 0.f;
    float sum = part[0];
#pragma unroll
    for (int r = 1; r < kMaxOutSegments; ++r)
      if (r < segments) sum += part[r];
    o_lat[h * n + i] = sum;
  }
  cluster.sync();  // the other blocks' shared memory stays until the first block has read it
}

// Tensor-core chunk (chunk_gemm.cu): token blockIdx.y's selected latent rows copied out in
// selection order, g {width, kv_lora} per token; rows past its count are zeros (their scores
// are then 0 and their probabilities never written, so they add nothing to the output).
__global__ void mla_gather_kernel(const float* __restrict__ latent, const int32_t* __restrict__ sel_idx,
                                  const int32_t* __restrict__ sel_count, MlaShape sh, float* __restrict__ g,
                                  int64_t stride, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int64_t t = blockIdx.y, j = blockIdx.x, n = sh.kv_lora;
  sel_idx += t * stride, sel_count += t * stride;
  float* out = g + (t * sh.width + j) * n;
  const float* row = j < *sel_count ? latent + int64_t(sel_idx[j]) * n : nullptr;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = row ? row[i] : 0.f;
}

std::atomic<int> g_out_segments{-1};  // mla_output_segments

}  // namespace

void mla_gather(const float* latent, const int32_t* sel_idx, const int32_t* sel_count, const MlaShape& sh, float* g,
                cudaStream_t s, const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(mla_gather_kernel, dim3(unsigned(sh.width), unsigned(rows.count)), 128, 0, s,
                                       latent, sel_idx, sel_count, sh, g, rows.stride);
}

void mla_softmax(const int32_t* sel_count, const MlaShape& sh, float* scores, cudaStream_t s, const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(mla_softmax_kernel, dim3(unsigned(sh.heads), unsigned(rows.count)), 256, 0, s,
                                       sel_count, sh, scores, rows.stride);
}

void mla_append(const float* kv, const float* w, float* latent, const int32_t* pos, const MlaShape& sh,
                cudaStream_t s, const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(mla_append_kernel, dim3(unsigned(rows.count)), 256, 0, s, kv, w, latent, pos, sh,
                                       rows);
}

void mla_scores(const float* q_lat, const float* latent, const int32_t* sel_idx, const int32_t* sel_count,
                const MlaShape& sh, float* scores, cudaStream_t s, const Rows& rows) {
  if (sh.kv_lora > kMaxKvLora)
    throw InputError("glm5 cuda: kv_lora_rank " + std::to_string(sh.kv_lora) + " > " + std::to_string(kMaxKvLora));
  // The count lives on the device: fixed grids (the step is a CUDA graph), grid-stride rows.
  // Row groups: one group of kScoreRows rows per warp at the width, at most ~2 blocks per SM in all.
  const int64_t head_groups = (sh.heads + kScoreHeads - 1) / kScoreHeads;
  const int64_t per_block = (kScoreThreads / 32) * kScoreRows;
  const int64_t row_blocks = std::max<int64_t>(1, std::min<int64_t>((sh.width + per_block - 1) / per_block,
                                                                    (264 + head_groups - 1) / head_groups));
  ds4::cuda::gemv_detail::launch_small(mla_scores_kernel,
                                       dim3(unsigned(row_blocks), unsigned(head_groups), unsigned(rows.count)),
                                       kScoreThreads, 0, s, q_lat, latent, sel_idx, sel_count, sh, scores, rows);
}

int mla_output_segments() {
  // 8 spans: GLM's decode at 2K +10.2 % over the one-block kernel, 16 streams +2.8 % (H100, with the
  // hc cluster form; session 39).
  return ds4::cuda::env_setting(g_out_segments, "DS4_MLA_SEGMENTS", {1, 2, 4, 8}, "1, 2, 4 or 8", 8);
}
void mla_output_set_segments(int segments) {
  if (segments != 1 && segments != 2 && segments != 4 && segments != 8)
    throw InputError("glm5 cuda: mla_output segments must be 1, 2, 4 or 8, not " + std::to_string(segments));
  g_out_segments.store(segments, std::memory_order_relaxed);
}

void mla_output(const float* probs, const float* latent, const int32_t* sel_idx, const int32_t* sel_count,
                const MlaShape& sh, float* o_lat, cudaStream_t s, const Rows& rows) {
  const int segments = mla_output_segments();
  // As launch_small, counting one token's span blocks (a cluster) as one block: a decode step's
  // 128 clusters launch as a programmatic dependent, a 16-row batch's 2048 do not.
  const bool pdl = ds4::cuda::small_kernel_pdl() &&
                   int64_t(rows.count) * ((sh.kv_lora + 31) / 32) * ((sh.heads + 7) / 8) <=
                       ds4::cuda::gemv_detail::kSmallPdlBlocksPerSm * ds4::cuda::gemv_detail::sm_count();
  const int64_t max_rows = 65535 / segments;  // grid.z
  for (int64_t row0 = 0; row0 < rows.count; row0 += max_rows) {
    const int64_t nr = std::min<int64_t>(max_rows, rows.count - row0);
    ds4::cuda::gemv_detail::launch_cluster_maybe_pdl(
        pdl, dim3(1, 1, unsigned(segments)), mla_output_kernel,
        dim3(unsigned((sh.kv_lora + 31) / 32), unsigned((sh.heads + 7) / 8), unsigned(nr * segments)), kOutThreads, 0,
        s, probs, latent, sel_idx, sel_count, sh, o_lat, rows, segments, row0, pdl);
  }
}

void mla_attend(const float* q_lat, const float* latent, const int32_t* sel_idx, const int32_t* sel_count,
                const MlaShape& sh, float* scores, float* o_lat, cudaStream_t s, const Rows& rows) {
  mla_scores(q_lat, latent, sel_idx, sel_count, sh, scores, s, rows);
  mla_softmax(sel_count, sh, scores, s, rows);
  mla_output(scores, latent, sel_idx, sel_count, sh, o_lat, s, rows);
}

}  // namespace ds4::glm5::cuda
