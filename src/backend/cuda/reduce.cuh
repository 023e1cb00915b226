#pragma once
// Internal: block-wide sum and max for row kernels (rmsnorm, softmax). blockDim.x must be
// a multiple of 32 and at most 1024; every thread of the block must call.
namespace ds4::cuda::detail {

template <class Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <class Op>
__device__ float block_reduce(float v, Op op, float identity) {
  __shared__ float part[32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  v = warp_reduce(v, op);
  __syncthreads();  // `part` may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x / 32) ? part[lane] : identity;
  return warp_reduce(v, op);
}

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

}  // namespace ds4::cuda::detail
