// Activations: one elementwise kernel, the function a template parameter.
#include "backend/cuda/activation.h"
#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"

namespace ds4::cuda {
namespace {

__device__ __forceinline__ float silu(float v) { return v / (1.f + expf(-v)); }

struct Silu {
  __device__ float operator()(float a, float) const { return silu(a); }
};
struct SwiGlu {
  __device__ float operator()(float gate, float up) const { return silu(gate) * up; }
};

template <class Op>
__global__ void unary_binary_kernel(const float* a, const float* b, float* y, int64_t n, Op op, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = op(a[i], b ? b[i] : 0.f);
}

template <class Op>
void launch(const float* a, const float* b, float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const int threads = 256;
  const int64_t want = (n + threads - 1) / threads;
  const unsigned blocks = unsigned(want < 65536 ? want : 65536);  // grid-stride beyond that
  ds4::cuda::gemv_detail::launch_small(unary_binary_kernel<Op>, dim3(blocks), threads, 0, stream, a, b, y, n, Op{});
}

__global__ void swiglu_clamp_rows_kernel(const float* __restrict__ gu, int64_t gs, int64_t rows, int64_t n, float limit,
                                         float* __restrict__ y, int64_t ys, bool pdl_trigger) {
  ds4::cuda::gemv_detail::pdl_begin(pdl_trigger);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * n) return;
  const int64_t r = i / n, c = i % n;
  const float g = fminf(gu[r * gs + c], limit), u = fminf(fmaxf(gu[r * gs + n + c], -limit), limit);
  y[r * ys + c] = silu(g) * u;
}

}  // namespace

void swiglu_clamp_strided_f32(const float* gu, int64_t gu_stride, int64_t rows, int64_t n, float limit, float* y,
                              int64_t y_stride, cudaStream_t stream) {
  if (rows * n <= 0) return;
  ds4::cuda::gemv_detail::launch_small(swiglu_clamp_rows_kernel, dim3(unsigned((rows * n + 255) / 256)), 256, 0, stream,
                                       gu, gu_stride, rows, n, limit, y, y_stride);
}

void swiglu_clamp_rows_f32(const float* gu, int64_t rows, int64_t n, float limit, float* y, cudaStream_t stream) {
  swiglu_clamp_strided_f32(gu, 2 * n, rows, n, limit, y, n, stream);
}

void silu_f32(const float* x, float* y, int64_t n, cudaStream_t stream) { launch<Silu>(x, nullptr, y, n, stream); }

void swiglu_f32(const float* gate, const float* up, float* y, int64_t n, cudaStream_t stream) {
  launch<SwiGlu>(gate, up, y, n, stream);
}

}  // namespace ds4::cuda
