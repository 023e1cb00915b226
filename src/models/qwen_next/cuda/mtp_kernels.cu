// Small kernels of the MTP draft head (CPU: forward.cpp mtp_prepare and the pending rows of
// State): the state's ring of trunk rows and the embedding term added to every stream.
#include <algorithm>

#include "backend/cuda/check.h"
#include "models/qwen_next/cuda/kernels.h"

namespace ds4::qwen_next::cuda {
namespace {

// One block row (blockIdx.y) per pushed row.
__global__ void ring_push_kernel(const float* __restrict__ h, int64_t h_stride, float* __restrict__ rows,
                                 int32_t* __restrict__ next, int64_t W, int64_t ring, RingPush p) {
  const int64_t t = blockIdx.y, slot = (p.first + t) % ring;
  const float* src = h + t * h_stride;
  float* dst = rows + slot * W;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < W; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
  if (blockIdx.x == 0 && threadIdx.x == 0) next[slot] = p.token[t];
}

__device__ __forceinline__ int64_t wrap(int64_t q, int64_t ring) { return ((q % ring) + ring) % ring; }

__global__ void ring_read_kernel(const float* __restrict__ rows, const int32_t* __restrict__ next, int64_t ring,
                                 int64_t W, const int32_t* __restrict__ pos, int32_t row_off, float* __restrict__ row_out,
                                 int32_t* __restrict__ tok_out) {
  const int64_t q = int64_t(*pos) + row_off;
  const float* src = rows + wrap(q, ring) * W;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < W; i += int64_t(gridDim.x) * blockDim.x)
    row_out[i] = src[i];
  if (tok_out && blockIdx.x == 0 && threadIdx.x == 0) *tok_out = next[wrap(q + 1, ring)];
}

__global__ void add_streams_kernel(float* __restrict__ h, const float* __restrict__ x, int64_t hc, int64_t d) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < hc * d; j += int64_t(gridDim.x) * blockDim.x)
    h[j] += x[j % d];
}

unsigned blocks_for(int64_t n) { return unsigned(std::min<int64_t>((n + 255) / 256, 1024)); }

}  // namespace

void mtp_ring_push(const float* h, int64_t h_stride, float* rows, int32_t* next, int64_t W, int64_t ring,
                   const RingPush& p, cudaStream_t s) {
  if (p.count <= 0) return;
  ring_push_kernel<<<dim3(blocks_for(W), unsigned(p.count)), 256, 0, s>>>(h, h_stride, rows, next, W, ring, p);
  DS4_CUDA_CHECK_LAUNCH();
}

void mtp_ring_read(const float* rows, const int32_t* next, int64_t ring, int64_t W, const int32_t* pos,
                   int32_t row_off, float* row_out, int32_t* tok_out, cudaStream_t s) {
  ring_read_kernel<<<blocks_for(W), 256, 0, s>>>(rows, next, ring, W, pos, row_off, row_out, tok_out);
  DS4_CUDA_CHECK_LAUNCH();
}

void mtp_add_streams(float* h, const float* x, int64_t hc, int64_t d, cudaStream_t s) {
  add_streams_kernel<<<blocks_for(hc * d), 256, 0, s>>>(h, x, hc, d);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::qwen_next::cuda
