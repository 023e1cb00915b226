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

// The warp's best candidate by (value desc, index asc); every lane gets it. A lane with nothing to
// offer passes (-inf, none) with none above every real index. A strict total order when no NaN is
// offered, so the butterfly agrees on every lane. (Routers' top-k: GLM's and Qwen's moe.cu.)
__device__ __forceinline__ void warp_best(float& v, int& i) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int oi = __shfl_xor_sync(0xffffffffu, i, o);
    if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
  }
}

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

}  // namespace ds4::cuda::detail
