// The chunk form of a compressor lane (issue #22): what compressor_walk does row by row in
// one block, done in parallel. A chunk of n rows at positions p0 .. p0 + n - 1 (p0 = *pos,
// read on the device so a captured graph replays at any position) closes the windows whose
// last position lies in it; each closed window is pooled by its own block, reading its rows
// where they are at the chunk's start (see ChunkSource), then one grid leaves the pending
// slots, the Ca half and the undo log exactly as the walk leaves them. Two launches, in this
// order: the pool reads the lane state as it was before the chunk, the state kernel then
// overwrites it.
#include <algorithm>

#include "backend/cuda/check.h"
#include "models/deepseek_v4/cuda/kernels.h"
#include "models/deepseek_v4/cuda/lane_pool.cuh"

namespace ds4::deepseek_v4::cuda {
namespace {

// Row r of the window starting at w0 (position q = w0 + r, slot r), column c of the lane's
// width, as the walk's pending slot would hold it: a position of the chunk (q >= p0) is chunk
// row q - p0 (the stored gate adds ape, the same single float add as the walk's store); an
// earlier one belongs to the window open when the chunk began and is still in its slot. The
// address is chosen first and every load is unconditional, so the pooling loops keep many
// rows' loads in flight.
struct ChunkSource {
  const LaneArgs& a;
  int64_t p0, stride;
  __device__ float kv(int64_t w0, int64_t r, int64_t c) const {
    const int64_t q = w0 + r;
    return *(q >= p0 ? a.kv + (q - p0) * stride + c : a.pend_kv + r * a.width + c);
  }
  __device__ float gate(int64_t w0, int64_t r, int64_t c) const {
    const int64_t q = w0 + r;
    const float g = *(q >= p0 ? a.gate + (q - p0) * stride + c : a.pend_gate + r * a.width + c);
    const float ape = a.ape[r * a.width + c];
    return q >= p0 ? g + ape : g;
  }
};

// The first position >= p0 that closes a window ((p + 1) % R == 0).
__device__ __forceinline__ int64_t first_close(int64_t p0, int64_t R) { return p0 + (R - 1 - p0 % R); }

// Block k pools the k-th window the chunk closes (the grid is sized for the most a chunk of
// `rows` rows can close; blocks past the last return). Thread j owns feature j as in the walk.
__global__ void chunk_pool_kernel(LaneArgs a, const int32_t* __restrict__ pos, int64_t rows, int64_t stride) {
  extern __shared__ float row[];  // {dim}
  const int64_t R = a.ratio, D = a.dim, p0 = *pos;
  const int64_t pc = first_close(p0, R) + int64_t(blockIdx.x) * R;  // the closing position
  if (pc >= p0 + rows) return;  // uniform over the block
  const int64_t t = pc - p0, e = (pc + 1) / R - 1, w0 = pc + 1 - R, off = a.overlap ? D : 0;
  const bool has_prev = a.overlap && e > 0;
  // The Ca half this window pools with (and the walk's undo log saves): window e - 1's rows
  // when that window closed in this chunk, else what the lane kept of it (prev_*).
  const bool prev_in_chunk = w0 - 1 >= p0;
  const ChunkSource src{a, p0, stride};
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    auto pg = [&](int64_t r) { return prev_in_chunk ? src.gate(w0 - R, r, j) : a.prev_gate[r * D + j]; };
    auto pv = [&](int64_t r) { return prev_in_chunk ? src.kv(w0 - R, r, j) : a.prev_kv[r * D + j]; };
    row[j] = lane_detail::pool_feature(
        R, has_prev, pg, pv, [&](int64_t r) { return src.gate(w0, r, off + j); },
        [&](int64_t r) { return src.kv(w0, r, off + j); });
    if (a.overlap && a.undo_prev_kv)
      for (int64_t r = 0; r < R; ++r) {
        a.undo_prev_kv[(t * R + r) * D + j] = pv(r);
        a.undo_prev_gate[(t * R + r) * D + j] = pg(r);
      }
  }
  lane_detail::finish_entry(a, row, w0, e);  // rope at the window's first position
}

// After the pool: element i < R * W is slot s = i / W, column c = i % W (one thread reads the
// slot's old value, logs it and writes the new one, so no other thread reads it meanwhile):
//   - the pending slot ends with the chunk's last row of that slot (untouched if none);
//   - the undo log of that slot's first row is the slot's old value;
//   - with overlap, c < D: the Ca half of the last window the chunk closed, from the chunk's
//     rows or (a window begun before the chunk) the slot's old value.
// Elements past R * W: the undo log of rows t >= R, which is row t - R's store.
__global__ void chunk_state_kernel(LaneArgs a, const int32_t* __restrict__ pos, int64_t rows, int64_t stride) {
  const int64_t R = a.ratio, W = a.width, D = a.dim, p0 = *pos, n_slot = R * W;
  const int64_t n_undo = a.undo_kv && rows > R ? (rows - R) * W : 0;
  const int64_t pc0 = first_close(p0, R);
  const bool closed = pc0 < p0 + rows;
  const int64_t last_w0 = closed ? pc0 + ((p0 + rows - 1 - pc0) / R) * R + 1 - R : 0;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_slot + n_undo; i += step) {
    if (i >= n_slot) {
      const int64_t t = R + (i - n_slot) / W, c = (i - n_slot) % W, slot = (p0 + t) % R;
      a.undo_kv[t * W + c] = a.kv[(t - R) * stride + c];
      a.undo_gate[t * W + c] = a.gate[(t - R) * stride + c] + a.ape[slot * W + c];
      continue;
    }
    const int64_t s = i / W, c = i % W;
    const float old_kv = a.pend_kv[i], old_gate = a.pend_gate[i];
    if (a.overlap && closed && c < D) {
      const int64_t q = last_w0 + s;
      a.prev_kv[s * D + c] = q >= p0 ? a.kv[(q - p0) * stride + c] : old_kv;
      a.prev_gate[s * D + c] = q >= p0 ? a.gate[(q - p0) * stride + c] + a.ape[i] : old_gate;
    }
    const int64_t t_first = (s - p0 % R + R) % R;  // the chunk's first row of slot s
    if (t_first >= rows) continue;
    if (a.undo_kv) {
      a.undo_kv[t_first * W + c] = old_kv;
      a.undo_gate[t_first * W + c] = old_gate;
    }
    const int64_t t_last = t_first + ((rows - 1 - t_first) / R) * R;
    a.pend_kv[i] = a.kv[t_last * stride + c];
    a.pend_gate[i] = a.gate[t_last * stride + c] + a.ape[i];
  }
}

}  // namespace

void compressor_chunk(const LaneArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows) {
  if (rows.count < 1) return;
  const int64_t windows = (rows.count + a.ratio - 1) / a.ratio;  // the most n rows can close
  chunk_pool_kernel<<<unsigned(windows), lane_detail::kLaneThreads, size_t(a.dim) * 4, s>>>(a, pos, rows.count,
                                                                                           rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
  constexpr int kThreads = 256;
  const int64_t n = a.ratio * a.width + (a.undo_kv && rows.count > a.ratio ? (rows.count - a.ratio) * a.width : 0);
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, 1024);
  chunk_state_kernel<<<unsigned(blocks), kThreads, 0, s>>>(a, pos, rows.count, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::deepseek_v4::cuda
