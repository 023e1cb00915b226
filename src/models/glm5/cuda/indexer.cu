// DSA indexer decode kernels (CPU: indexer.cpp): cache append with k-pool compression,
// pool scoring, the top-k of pools as keep flags, and the selected position list.
#include <cfloat>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/seq_rows.cuh"
#include "backend/cuda/topk_select.h"
#include "models/glm5/cuda/kernels.h"

namespace ds4::glm5::cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::seq_shift;
using ds4::cuda::detail::shifted;
using ds4::cuda::detail::SumOp;
using ds4::cuda::detail::warp_reduce;

// One block; tokens in order. LayerNorm (biased variance) of the new key, both rows stored at
// pos; when pos completes a pool, each thread finishes one channel of that pool's key (it may
// read keys an earlier token of the same launch wrote). A decode batch (rows.seq): block t
// appends token t alone to its own sequence's cache.
__global__ void indexer_append_kernel(const float* __restrict__ k0, const float* __restrict__ gate0,
                                      const float* __restrict__ nw, const float* __restrict__ nb,
                                      const float* __restrict__ ape, IndexerCache c, IndexerShape sh,
                                      const int32_t* __restrict__ pos, Rows rows, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  int64_t t0 = 0, t1 = rows.count;
  if (rows.seq.at) {
    t0 = blockIdx.x, t1 = t0 + 1;
    const int64_t b = seq_shift(rows.seq, t0);
    c.keys = shifted(c.keys, b), c.gates = shifted(c.gates, b), c.pools = shifted(c.pools, b);
  }
  for (int64_t t = t0; t < t1; ++t) {
    const float* k = k0 + t * rows.stride;
    const float* gate = gate0 + t * rows.stride;
    const int64_t dim = sh.dim, p = pos[t], kp = sh.kpool;
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) s += k[i];
    const float mean = block_reduce(s, SumOp{}, 0.f) / float(dim);
    float v = 0.f;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) v += (k[i] - mean) * (k[i] - mean);
    const float r = rsqrtf(block_reduce(v, SumOp{}, 0.f) / float(dim) + 1e-6f);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
      c.keys[p * dim + i] = (k[i] - mean) * r * nw[i] + nb[i];
      c.gates[p * dim + i] = gate[i];
    }
    if ((p + 1) % kp != 0) continue;  // uniform over the block
    __syncthreads();  // the new rows are read below by other threads
    const int64_t pool = (p + 1) / kp - 1, first = pool * kp;
    for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
      float m = -INFINITY;
      for (int64_t j = 0; j < kp; ++j) m = fmaxf(m, c.gates[(first + j) * dim + d] + ape[j * dim + d]);
      float sum = 0.f, acc = 0.f;
      for (int64_t j = 0; j < kp; ++j) {
        const float e = expf(c.gates[(first + j) * dim + d] + ape[j * dim + d] - m);
        sum += e;
        acc += e * c.keys[(first + j) * dim + d];
      }
      c.pools[pool * dim + d] = acc / sum;
    }
  }
}

// One warp per complete pool: score = sum_h w[h]/sqrt(heads) * relu(q_h . pool / sqrt(dim)).
__global__ void indexer_score_kernel(const float* __restrict__ q, const float* __restrict__ w, IndexerCache c,
                                     IndexerShape sh, const int32_t* __restrict__ pos, float* __restrict__ scores,
                                     Rows rr, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  {  // token blockIdx.y of a chunk (a decode batch: on its own sequence's pools)
    const int64_t o = int64_t(blockIdx.y) * rr.stride;
    q += o, w += o, scores += o, pos += blockIdx.y;
    c.pools = shifted(c.pools, seq_shift(rr.seq, blockIdx.y));
  }
  const int64_t pool = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t complete = (int64_t(*pos) + 1) / sh.kpool;
  if (pool >= complete || complete <= sh.budget) return;  // dense: no scores needed
  const float head_scale = rsqrtf(float(sh.heads)), softmax_scale = rsqrtf(float(sh.dim));
  const float* key = c.pools + pool * sh.dim;
  float score = 0.f;
  for (int64_t h = 0; h < sh.heads; ++h) {
    float d = 0.f;
    for (int64_t i = lane; i < sh.dim; i += 32) d += q[h * sh.dim + i] * key[i];
    d = warp_reduce(d, SumOp{});
    score += (w[h] * head_scale) * fmaxf(d * softmax_scale, 0.f);
  }
  if (lane == 0) scores[pool] = score;
}

// One block of kListThreads: keep flags -> the ascending position list (kept pools' rows,
// then the tail), through a block-wide prefix sum of kept pools over contiguous pool ranges.
constexpr int kListThreads = 1024;
__global__ void selection_list_kernel(const uint8_t* __restrict__ keep, IndexerShape sh,
                                      const int32_t* __restrict__ pos, int32_t* __restrict__ idx,
                                      int32_t* __restrict__ count, int64_t stride, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  {  // token blockIdx.x of a chunk
    const int64_t o = int64_t(blockIdx.x) * stride;
    keep += 4 * o, idx += o, count += o, pos += blockIdx.x;
  }
  __shared__ int sums[kListThreads];
  const int64_t last = *pos, kp = sh.kpool, complete = (last + 1) / kp, tail0 = complete * kp;
  const int tid = threadIdx.x;
  if (complete <= sh.budget) {  // dense: every visible position
    for (int64_t j = tid; j <= last; j += kListThreads) idx[j] = int32_t(j);
    if (tid == 0) *count = int32_t(last + 1);
    return;
  }
  const int64_t chunk = (complete + kListThreads - 1) / kListThreads;
  const int64_t p0 = tid * chunk < complete ? tid * chunk : complete;
  const int64_t p1 = p0 + chunk < complete ? p0 + chunk : complete;
  int c = 0;
  for (int64_t p = p0; p < p1; ++p) c += keep[p];
  sums[tid] = c;
  __syncthreads();
  for (int off = 1; off < kListThreads; off <<= 1) {  // inclusive scan
    const int v = tid >= off ? sums[tid - off] : 0;
    __syncthreads();
    sums[tid] += v;
    __syncthreads();
  }
  int64_t at = int64_t(sums[tid] - c) * kp;
  for (int64_t p = p0; p < p1; ++p) {
    if (!keep[p]) continue;
    for (int64_t r = 0; r < kp; ++r) idx[at + r] = int32_t(p * kp + r);
    at += kp;
  }
  const int64_t base = int64_t(sums[kListThreads - 1]) * kp;
  for (int64_t j = tail0 + tid; j <= last; j += kListThreads) idx[base + j - tail0] = int32_t(j);
  if (tid == 0) *count = int32_t(base + last + 1 - tail0);
}

}  // namespace

void indexer_append(const float* k, const float* gate, const float* norm_w, const float* norm_b, const float* ape,
                    const IndexerCache& c, const IndexerShape& sh, const int32_t* pos, cudaStream_t s,
                    const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(indexer_append_kernel, dim3(rows.seq.at ? unsigned(rows.count) : 1u), 128, 0, s,
                                       k, gate, norm_w, norm_b, ape, c, sh, pos, rows);
}

void indexer_select(const float* q, const float* w, const IndexerCache& c, const IndexerShape& sh,
                    const int32_t* pos, float* scores, uint8_t* keep, int32_t* sel_idx, int32_t* sel_count,
                    cudaStream_t s, const Rows& rows) {
  const unsigned T = unsigned(rows.count);
  // Sized for the most pools the state can hold; blocks past the current count exit at once.
  ds4::cuda::gemv_detail::launch_small(indexer_score_kernel, dim3(unsigned((sh.max_pools + 7) / 8), T), 256, 0, s, q, w,
                                       c, sh, pos, scores, rows);
  // keep {complete}: the top `budget` pools (score desc, index asc, as cpu::topk_f32; every
  // pool while complete <= budget); the same set as the rank loop it replaced, NaN aside.
  ds4::cuda::TopkSelectArgs ta;
  ta.scores = scores, ta.score_stride = rows.stride, ta.k = sh.budget, ta.rows = rows.count;
  ta.n = ds4::cuda::TopkCount{pos, 1, 0, sh.kpool};  // complete = (pos[t] + 1) / kpool
  ta.keep = keep, ta.keep_stride = 4 * rows.stride;  // bytes in the float row scratch
  ds4::cuda::topk_select_f32(ta, s);
  ds4::cuda::gemv_detail::launch_small(selection_list_kernel, dim3(T), kListThreads, 0, s, keep, sh, pos, sel_idx,
                                       sel_count, rows.stride);
}

}  // namespace ds4::glm5::cuda
