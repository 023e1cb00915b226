// Depthwise causal conv1d, one decode step (see conv1d.h). One thread per channel: the
// channel's state column is independent of every other, so the shift is done in place.
#include "backend/cuda/check.h"
#include "backend/cuda/conv1d.h"
#include "backend/cuda/seq_rows.cuh"

namespace ds4::cuda {
namespace {

__global__ void conv1d_step_kernel(const float* __restrict__ x_new, const float* __restrict__ w,
                                   float* __restrict__ state, int64_t C, int K, int dil, bool silu,
                                   float* __restrict__ y, Conv1dRows rows) {
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

}  // namespace

void conv1d_rows_f32(const float* x_new, const float* w, float* state, int64_t channels, int64_t kernel,
                     int64_t dilation, bool silu, float* y, const Conv1dRows& rows, cudaStream_t stream) {
  if (rows.count <= 0) return;
  const int threads = 128;
  const dim3 grid(unsigned((channels + threads - 1) / threads), rows.seq.at ? unsigned(rows.count) : 1u);
  conv1d_step_kernel<<<grid, threads, 0, stream>>>(
      x_new, w, state, channels, int(kernel), int(dilation), silu, y, rows);
  DS4_CUDA_CHECK_LAUNCH();
}

void conv1d_step_f32(const float* x_new, const float* w, float* state, int64_t channels, int64_t kernel,
                     int64_t dilation, bool silu, float* y, cudaStream_t stream) {
  conv1d_rows_f32(x_new, w, state, channels, kernel, dilation, silu, y, Conv1dRows{}, stream);
}

}  // namespace ds4::cuda
