// Depthwise causal conv1d, one decode step (see conv1d.h). One thread per channel: the
// channel's state column is independent of every other, so the shift is done in place.
#include "backend/cuda/check.h"
#include "backend/cuda/conv1d.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/seq_rows.cuh"

namespace ds4::cuda {
namespace {

__global__ void conv1d_step_kernel(const float* __restrict__ x_new, const float* __restrict__ w,
                                   float* __restrict__ state, int64_t C, int K, int dil, bool silu,
                                   float* __restrict__ y, Conv1dRows rows, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const int s = (K - 1) * dil;
  int64_t t0 = 0, t1 = rows.count;
  if (rows.seq.at) {  // a decode batch: grid row blockIdx.y steps its own sequence's state once
    t0 = blockIdx.y, t1 = t0 + 1;
    state = detail::shifted(state, detail::seq_shift(rows.seq, t0));
  }
  for (int64_t t = t0; t < t1; ++t) {  // rows in token order: the state carries between them
    const float xn = x_new[t * rows.x_stride + c];
    float acc = 0.f;
    for (int j = 0; j < K; ++j) {
      const int r = j * dil;  // row of concat(state, x_new)
      const float v = r < s ? state[int64_t(r) * C + c] : xn;
      acc += w[c * K + j] * v;  // plain multiply-add order of the CPU reference
    }
    for (int r = 0; r + 1 < s; ++r) state[int64_t(r) * C + c] = state[int64_t(r + 1) * C + c];
    if (s > 0) state[int64_t(s - 1) * C + c] = xn;
    y[t * rows.y_stride + c] = silu ? acc / (1.f + expf(-acc)) : acc;
  }
}

// A chunk of consecutive rows of one sequence (issue #22: the row-serial kernel above took
// 0.36 ms for 512 rows of 10240 channels, a global-memory round trip per row): rows run in
// parallel, row t reading its window straight from concat(state, x_new) (ext[t + j * dil]; no
// value depends on an earlier row's output), with the same multiply-add order per row, so
// every y is the single step's. Block: 32 channels x kConvRowGroups row ranges; the state is
// rewritten after a barrier, once every row of the block's channels has read the old one.
constexpr int kConvRowGroups = 8;

__global__ void __launch_bounds__(32 * kConvRowGroups)
    conv1d_chunk_kernel(const float* __restrict__ x_new, const float* __restrict__ w, float* __restrict__ state,
                        int64_t C, int K, int dil, bool silu, float* __restrict__ y, int64_t count, int64_t x_stride,
                        int64_t y_stride, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int64_t c = int64_t(blockIdx.x) * 32 + threadIdx.x % 32;
  const int g = threadIdx.x / 32;
  const int s = (K - 1) * dil;
  const bool live = c < C;
  auto ext = [&](int64_t i) {  // concat(state, x_new) at time i, before any update
    return i < s ? state[i * C + c] : x_new[(i - s) * x_stride + c];
  };
  const int64_t per = (count + kConvRowGroups - 1) / kConvRowGroups;
  const int64_t t0 = g * per, t1 = t0 + per < count ? t0 + per : count;
  if (live)
    for (int64_t t = t0; t < t1; ++t) {
      float acc = 0.f;
      for (int j = 0; j < K; ++j) acc += w[c * K + j] * ext(t + int64_t(j) * dil);  // conv1d_step_kernel's order
      y[t * y_stride + c] = silu ? acc / (1.f + expf(-acc)) : acc;
    }
  // new state[i] = ext[count + i], i < s: read by row group 0 before the barrier, written after
  constexpr int kMaxState = 32;
  float keep[kMaxState];
  if (live && g == 0)
#pragma unroll
    for (int i = 0; i < kMaxState; ++i)
      if (i < s) keep[i] = ext(count + i);
  __syncthreads();
  if (live && g == 0)
#pragma unroll
    for (int i = 0; i < kMaxState; ++i)
      if (i < s) state[int64_t(i) * C + c] = keep[i];
}

}  // namespace

void conv1d_rows_f32(const float* x_new, const float* w, float* state, int64_t channels, int64_t kernel,
                     int64_t dilation, bool silu, float* y, const Conv1dRows& rows, cudaStream_t stream) {
  if (rows.count <= 0) return;
  if (!rows.seq.at && rows.count > 1 && (kernel - 1) * dilation <= 32) {
    ds4::cuda::gemv_detail::launch_small(conv1d_chunk_kernel, dim3(unsigned((channels + 31) / 32)), 32 * kConvRowGroups,
                                         0, stream, x_new, w, state, channels, int(kernel), int(dilation), silu, y,
                                         rows.count, rows.x_stride, rows.y_stride);
    return;
  }
  const int threads = 128;
  const dim3 grid(unsigned((channels + threads - 1) / threads), rows.seq.at ? unsigned(rows.count) : 1u);
  ds4::cuda::gemv_detail::launch_small(conv1d_step_kernel, dim3(grid), threads, 0, stream, x_new, w, state, channels,
                                       int(kernel), int(dilation), silu, y, rows);
}

void conv1d_step_f32(const float* x_new, const float* w, float* state, int64_t channels, int64_t kernel,
                     int64_t dilation, bool silu, float* y, cudaStream_t stream) {
  conv1d_rows_f32(x_new, w, state, channels, kernel, dilation, silu, y, Conv1dRows{}, stream);
}

}  // namespace ds4::cuda
