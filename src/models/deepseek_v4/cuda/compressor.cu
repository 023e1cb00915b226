// KV compression and the lightning indexer on the GPU (CPU: compressor.cpp). Everything
// depends on the device position only, so the kernels replay inside a CUDA graph: a lane
// kernel that does not close a window just stores its row and returns.
#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/topk_select.h"
#include "models/deepseek_v4/cuda/kernels.h"
#include "models/deepseek_v4/cuda/lane_pool.cuh"
#include "models/deepseek_v4/cuda/seq_rows.cuh"

namespace ds4::deepseek_v4::cuda {
namespace {

using ds4::cuda::detail::SumOp;
using ds4::cuda::detail::warp_reduce;
using lane_detail::entry_storage;
using lane_detail::rope_row;

// One token of the lane at position p (kv, gate {width}; row t of its chunk): store, and pool
// when it closes the window. With an undo log each thread saves the values it overwrites
// (the same thread later restores them: compressor_undo walks the same index ranges).
__device__ void lane_row(const LaneArgs& a, float* row, int64_t p, const float* kv, const float* gate, int64_t t) {
  const int64_t R = a.ratio, W = a.width, D = a.dim, slot = p % R;
  for (int64_t j = threadIdx.x; j < W; j += blockDim.x) {
    if (a.undo_kv) {
      a.undo_kv[t * W + j] = a.pend_kv[slot * W + j];
      a.undo_gate[t * W + j] = a.pend_gate[slot * W + j];
    }
    a.pend_kv[slot * W + j] = kv[j];
    a.pend_gate[slot * W + j] = gate[j] + a.ape[slot * W + j];
  }
  if ((p + 1) % R != 0) return;  // the window stays open (uniform over the block)
  __syncthreads();                // the slot just written is read below by other threads
  const int64_t e = (p + 1) / R - 1, off = a.overlap ? D : 0;
  const bool has_prev = a.overlap && e > 0;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    row[j] = lane_detail::pool_feature(
        R, has_prev, [&](int64_t r) { return a.prev_gate[r * D + j]; }, [&](int64_t r) { return a.prev_kv[r * D + j]; },
        [&](int64_t r) { return a.pend_gate[r * W + off + j]; }, [&](int64_t r) { return a.pend_kv[r * W + off + j]; });
    if (a.overlap)  // this window's Ca half pools with the next window (same feature, same thread)
      for (int64_t r = 0; r < R; ++r) {
        if (a.undo_prev_kv) {
          a.undo_prev_kv[(t * R + r) * D + j] = a.prev_kv[r * D + j];
          a.undo_prev_gate[(t * R + r) * D + j] = a.prev_gate[r * D + j];
        }
        a.prev_kv[r * D + j] = a.pend_kv[r * W + j];
        a.prev_gate[r * D + j] = a.pend_gate[r * W + j];
      }
  }
  // (it ends with a barrier: the next row's store overwrites slots read above)
  lane_detail::finish_entry(a, row, p + 1 - R, e);  // rope at the window's first position
}

// One block walks the rows (a chunk's tokens) in order: each row's step sees the lane state
// the previous row left, exactly as consecutive one-token steps.
__global__ void compressor_kernel(LaneArgs a, const int32_t* __restrict__ pos, int64_t rows, int64_t stride,
                                  bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ float row[];  // {dim}
  const int64_t p0 = *pos;
  for (int64_t t = 0; t < rows; ++t) lane_row(a, row, p0 + t, a.kv + t * stride, a.gate + t * stride, t);
}

// A decode batch (Rows::shift): block t steps row t's own sequence's lane (the lane pointers
// name row 0's state) at that sequence's position, exactly as its one-token step's walk does.
// No undo log: a decode batch never captures.
__global__ void compressor_seq_kernel(LaneArgs a, const int32_t* __restrict__ pos, Rows rr, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ float row[];  // {dim}
  const int64_t t = blockIdx.x, b = detail::row_shift(rr, t);
  a.pend_kv = detail::shifted(a.pend_kv, b), a.pend_gate = detail::shifted(a.pend_gate, b);
  a.prev_kv = detail::shifted(a.prev_kv, b), a.prev_gate = detail::shifted(a.prev_gate, b);
  a.entries = detail::shifted(a.entries, b);
  lane_row(a, row, detail::row_position(pos, rr, t), a.kv + t * rr.stride, a.gate + t * rr.stride, 0);
}

// One block per lane: rows rows-1 .. keep undone newest first. Thread j owns the same
// indices as in lane_row (j over W for the slots, over D for the Ca half), so its own
// program order is the only ordering needed.
__global__ void undo_kernel(const LaneUndo* __restrict__ lanes, uint8_t* st, const uint8_t* cap, int64_t p0,
                            int64_t rows, int64_t keep, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const LaneUndo u = lanes[blockIdx.x];
  auto S = [&](uint64_t off) { return reinterpret_cast<float*>(st + off); };
  auto C = [&](uint64_t off) { return reinterpret_cast<const float*>(cap + off); };
  float *pend_kv = S(u.pend_kv), *pend_gate = S(u.pend_gate), *prev_kv = S(u.prev_kv), *prev_gate = S(u.prev_gate);
  const float *ukv = C(u.undo_kv), *ugate = C(u.undo_gate), *upkv = C(u.undo_prev_kv), *upgate = C(u.undo_prev_gate);
  const int64_t R = u.ratio, W = u.width, D = u.dim;
  for (int64_t t = rows - 1; t >= keep; --t) {
    const int64_t p = p0 + t, slot = p % R;
    if (u.overlap && (p + 1) % R == 0)
      for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
        for (int64_t r = 0; r < R; ++r) {
          prev_kv[r * D + j] = upkv[(t * R + r) * D + j];
          prev_gate[r * D + j] = upgate[(t * R + r) * D + j];
        }
    for (int64_t j = threadIdx.x; j < W; j += blockDim.x) {
      pend_kv[slot * W + j] = ukv[t * W + j];
      pend_gate[slot * W + j] = ugate[t * W + j];
    }
  }
}

// Row t of a chunk: its own query, head weights, scores and selection (stride floats apart),
// and in a decode batch its own sequence's entries (Rows::shift); returns its position.
__device__ __forceinline__ int64_t to_row(IndexerArgs& a, int64_t t, const Rows& r, const int32_t* pos) {
  const int64_t o = t * r.stride;
  a.q += o, a.w += o, a.scores += o, a.sel += o, a.nsel += o;
  a.entries = detail::shifted(a.entries, detail::row_shift(r, t));
  return detail::row_position(pos, r, t);
}

// One block per indexer head (and row: blockIdx.y): rope the query tail, then the storage
// round trip.
__global__ void index_q_kernel(IndexerArgs a, const int32_t* __restrict__ pos, Rows rr, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ float row[];  // {d}
  const int64_t p = to_row(a, blockIdx.y, rr, pos);
  float* q = a.q + int64_t(blockIdx.x) * a.d;
  for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x) row[j] = q[j];
  __syncthreads();
  rope_row(row, a.d, a.rope_dim, a.inv_freq, p);
  entry_storage(row, a.d, a.rope_dim, false, a.sim);
  for (int64_t j = threadIdx.x; j < a.d; j += blockDim.x) q[j] = row[j];
}

// One warp per closed entry (grid-stride); lanes split the heads, the queries sit in shared
// with a row stride of d + 1 floats (lanes read the same feature of different heads: an
// unpadded stride of d would put them all in one bank). The warp first copies its entry to
// shared with all lanes' loads in flight (issue #23: every lane walking the entry itself
// waited a memory latency per feature); the dot products run in the same order as before.
__global__ void index_score_kernel(IndexerArgs a, const int32_t* __restrict__ pos, Rows rr, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  extern __shared__ float sq[];  // {nh, d + 1} then {nh}, then {warps, d}: each warp's entry
  const int64_t p = to_row(a, blockIdx.y, rr, pos);
  const int64_t nh = a.nh, d = a.d, ld = d + 1, visible = (p + 1) / a.ratio;
  if (int64_t(blockIdx.x) * (blockDim.x / 32) >= visible) return;  // the grid is sized for max_ctx
  {  // all heads' queries, kQBatch float4 loads in flight per thread (issue #23: a loop of one
     // load and one store per value waited a memory latency per iteration, ~32 of them)
    constexpr int kQBatch = 8;
    const int n4 = int(nh * d / 4), d4 = int(d / 4);  // d % 4 == 0 (indexer_select checks)
    const float4* q4 = reinterpret_cast<const float4*>(a.q);
    for (int i0 = threadIdx.x; i0 < n4; i0 += kQBatch * blockDim.x) {
      float4 v[kQBatch];
#pragma unroll
      for (int j = 0; j < kQBatch; ++j) {
        const int i = i0 + j * int(blockDim.x);
        if (i < n4) v[j] = q4[i];
      }
#pragma unroll
      for (int j = 0; j < kQBatch; ++j) {
        const int i = i0 + j * int(blockDim.x);
        if (i >= n4) break;
        float* dst = sq + int64_t(i / d4) * ld + int64_t(i % d4) * 4;
        dst[0] = v[j].x, dst[1] = v[j].y, dst[2] = v[j].z, dst[3] = v[j].w;
      }
    }
  }
  for (int64_t i = threadIdx.x; i < nh; i += blockDim.x) sq[nh * ld + i] = a.w[i];
  __syncthreads();
  const float score_scale = 1.0f / sqrtf(float(d)), head_scale = 1.0f / sqrtf(float(nh));
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  float* e = sq + nh * ld + nh + int64_t(threadIdx.x / 32) * d;
  for (int64_t k = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; k < visible; k += warps) {
    const float* src = a.entries + k * d;
    __syncwarp();  // the previous entry's reads are done
#pragma unroll 8
    for (int64_t i = lane; i < d; i += 32) e[i] = src[i];
    __syncwarp();
    float s = 0.f;
    for (int64_t h = lane; h < nh; h += 32) {
      const float* qh = sq + h * ld;
      float dot = 0.f;
      for (int64_t i = 0; i < d; ++i) dot = fmaf(qh[i], e[i], dot);
      s += fmaxf(dot, 0.f) * score_scale * (sq[nh * ld + h] * head_scale);
    }
    s = warp_reduce(s, SumOp{});
    if (lane == 0) a.scores[k] = s;
  }
}

}  // namespace

void compressor_walk(const LaneArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  if (rows.shift) {  // a decode batch: one block per sequence
    if (a.undo_kv) throw InputError("deepseek_v4 cuda: a decode batch's lanes keep no undo log");
    ds4::cuda::gemv_detail::launch_small(compressor_seq_kernel, dim3(unsigned(rows.count)), lane_detail::kLaneThreads,
                                         size_t(a.dim) * 4, s, a, pos, rows);
  } else {
    ds4::cuda::gemv_detail::launch_small(compressor_kernel, dim3(1), lane_detail::kLaneThreads, size_t(a.dim) * 4, s, a,
                                         pos, rows.count, rows.stride);
  }
  DS4_CUDA_CHECK_LAUNCH();
}

void compressor_step(const LaneArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  if (rows.count > 1 && !rows.shift)
    compressor_chunk(a, pos, s, rows);
  else
    compressor_walk(a, pos, s, rows);
}

void compressor_undo(const LaneUndo* lanes, int64_t n_lanes, uint8_t* state, const uint8_t* cap, int64_t p0,
                     int64_t rows, int64_t keep, cudaStream_t s) {
  if (n_lanes == 0 || keep >= rows) return;
  ds4::cuda::gemv_detail::launch_small(undo_kernel, dim3(unsigned(n_lanes)), 512, 0, s, lanes, state, cap, p0, rows,
                                       keep);
}

void indexer_queries(const IndexerArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  ds4::cuda::gemv_detail::launch_small(index_q_kernel, dim3(unsigned(a.nh), unsigned(rows.count)), 128, size_t(a.d) * 4,
                                       s, a, pos, rows);
}

void indexer_scores(const IndexerArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  constexpr int kScoreThreads = 256;
  const size_t shm = size_t(a.nh * (a.d + 1) + a.nh + (kScoreThreads / 32) * a.d) * 4;
  if (shm > 48 * 1024) throw InputError("deepseek_v4 cuda: indexer queries exceed 48 KiB of shared memory");
  // One warp per entry up to 512 blocks (4K warps), grid-stride beyond: every block first
  // copies all heads' queries (32 KiB for the Flash; issue #23). Which warp scores an entry
  // changes nothing.
  if (a.d % 4) throw InputError("deepseek_v4 cuda: indexer head_dim " + std::to_string(a.d) + " not a multiple of 4");
  const int64_t blocks = (a.max_entries + 7) / 8;
  const dim3 grid(unsigned(blocks < 1 ? 1 : (blocks > 512 ? 512 : blocks)), unsigned(rows.count));
  ds4::cuda::gemv_detail::launch_small(index_score_kernel, dim3(grid), kScoreThreads, shm, s, a, pos, rows);
}

void indexer_topk(const IndexerArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  // sel: the top min(topk, visible) entries ascending (score desc, index asc, as
  // cpu::topk_f32). The bitwise search it replaced ordered -0 below +0; the scores here are
  // sums from +0.f, never -0, so the sets agree; NaN aside (topk_select.h).
  ds4::cuda::TopkSelectArgs ta;
  ta.scores = a.scores, ta.score_stride = rows.stride, ta.k = a.topk, ta.rows = rows.count;
  ta.n = ds4::cuda::TopkCount{pos, 0, 1, a.ratio};  // row t at *pos + t: (*pos + t + 1) / ratio
  ta.n.shift = rows.shift, ta.n.shift_stride = rows.shift_stride;  // a decode batch: each row's own counter
  ta.list = a.sel, ta.count = a.nsel, ta.list_stride = ta.count_stride = rows.stride;
  ds4::cuda::topk_select_f32(ta, s);
}

void indexer_select(const IndexerArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  indexer_queries(a, pos, s, rows);
  indexer_scores(a, pos, s, rows);
  indexer_topk(a, pos, s, rows);
}

}  // namespace ds4::deepseek_v4::cuda
