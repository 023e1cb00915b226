// GEMV kernel: one template over the format decoders in gemv_formats.cuh.
//
// Work split: a thread block owns F::kRows consecutive rows; its threads stride over the
// row's 32-weight units. Per unit a thread first issues the loads of all kRows rows (so
// they are in flight together), then loads the 32 x values once (L1-resident, 16-byte
// loads) and reuses them for every row. Partial sums are reduced by warp shuffles, then
// across warps in shared memory.
#include "backend/cuda/gemv.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_formats.cuh"
#include "backend/cuda/iq2xxs_grid.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

using namespace gemv_detail;

constexpr int kMaxThreads = 128;

__constant__ uint64_t c_iq2xxs_grid[256];

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class F>
__global__ void __launch_bounds__(kMaxThreads) gemv_kernel(Args a, const float* __restrict__ x,
                                                          float* __restrict__ y) {
  constexpr int R = F::kRows;
  // Only IQ2_XXS reads it, but staging 2 KiB costs every format next to nothing and keeps
  // one kernel body. Lanes index the codebook at random: shared memory, not constant
  // memory (which serializes divergent addresses).
  __shared__ uint64_t grid[std::is_same_v<F, IQ2_XXS> ? 256 : 1];
  if constexpr (std::is_same_v<F, IQ2_XXS>) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) grid[i] = c_iq2xxs_grid[i];
    __syncthreads();
  }
  const int64_t row0 = int64_t(blockIdx.x) * R;
  const int64_t units = a.cols / kUnit;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;

  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
    typename F::Raw raw[R];
#pragma unroll
    for (int r = 0; r < R; ++r) raw[r] = F::load(a, min(row0 + r, a.rows - 1), u);  // tail rows: re-read the last
    float xv[kUnit];
    const float4* xp = reinterpret_cast<const float4*>(x + u * kUnit);
#pragma unroll
    for (int i = 0; i < kUnit / 4; ++i) {
      const float4 f = __ldg(xp + i);
      xv[4 * i] = f.x, xv[4 * i + 1] = f.y, xv[4 * i + 2] = f.z, xv[4 * i + 3] = f.w;
    }
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] += F::dot(raw[r], u, xv, grid);
  }

  __shared__ float part[R][kMaxThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = warp_sum(acc[r]);
    if (lane == 0) part[r][warp] = s;
  }
  __syncthreads();
  if (threadIdx.x < R && row0 + threadIdx.x < a.rows) {
    float s = 0.f;
    for (int w = 0; w < int(blockDim.x / 32); ++w) s += part[threadIdx.x][w];
    y[row0 + threadIdx.x] = s;
  }
}

void upload_grid_once() {
  static bool done = false;  // per process; the backend runs on one device for now
  if (done) return;
  DS4_CUDA_CHECK(cudaMemcpyToSymbol(c_iq2xxs_grid, kIq2xxsGrid, sizeof(kIq2xxsGrid)));
  done = true;
}

template <class F>
void launch(const Args& a, const float* x, float* y, cudaStream_t stream) {
  const int64_t units = a.cols / kUnit;
  // Narrow rows (expert down-projections) get fewer threads rather than idle ones.
  const int threads = int(std::min<int64_t>(kMaxThreads, (units + 31) / 32 * 32));
  const int64_t blocks = (a.rows + F::kRows - 1) / F::kRows;
  if (std::is_same_v<F, IQ2_XXS>) upload_grid_once();
  gemv_kernel<F><<<unsigned(blocks), threads, 0, stream>>>(a, x, y);
  DS4_CUDA_CHECK_LAUNCH();
}

int log2_exact(int64_t v) {
  int s = 0;
  while ((int64_t(1) << s) < v) ++s;
  return (int64_t(1) << s) == v ? s : -1;
}

void check_shape(const WeightMatrix& w, int64_t multiple) {
  if (w.rows <= 0 || w.cols <= 0 || w.cols % multiple != 0)
    throw InputError("cuda gemv: " + std::string(dtype_name(w.type)) + " weight of " + std::to_string(w.rows) + "x" +
                     std::to_string(w.cols) + ": cols must be a positive multiple of " + std::to_string(multiple));
}

}  // namespace

bool gemv_supports(DType t) {
  switch (t) {
    case DType::BF16: case DType::F16: case DType::Q8_0: case DType::Q4_K: case DType::Q2_K:
    case DType::IQ2_XXS: case DType::MLX_Q4: case DType::MLX_Q8:
      return true;
    default:
      return false;
  }
}

void gemv(const WeightMatrix& w, const float* x, float* y, cudaStream_t stream) {
  if (!gemv_supports(w.type))
    throw InputError("cuda gemv: weight type " + std::string(dtype_name(w.type)) + " is not supported");
  const bool k_block = w.type == DType::Q4_K || w.type == DType::Q2_K || w.type == DType::IQ2_XXS;
  check_shape(w, k_block ? 256 : kUnit);
  Args a{static_cast<const uint8_t*>(w.data), w.row_stride_bytes(), w.scales, w.biases, 0, 0, w.rows, w.cols};
  if (w.type == DType::MLX_Q4 || w.type == DType::MLX_Q8) {
    a.group_shift = log2_exact(w.group_size);
    if (a.group_shift < 5 || w.cols % w.group_size != 0)
      throw InputError("cuda gemv: MLX group size " + std::to_string(w.group_size) +
                       " must be a power of two >= 32 dividing cols " + std::to_string(w.cols));
    if (w.scale_type != DType::F16 && w.scale_type != DType::BF16)
      throw InputError("cuda gemv: MLX scale type " + std::string(dtype_name(w.scale_type)) + " is not F16/BF16");
    if (!w.scales || !w.biases) throw InputError("cuda gemv: MLX weight without scales/biases");
    a.groups_per_row = w.cols / w.group_size;
  }
  const bool bf16s = w.scale_type == DType::BF16;
  switch (w.type) {
    case DType::BF16: return launch<Half16<true>>(a, x, y, stream);
    case DType::F16: return launch<Half16<false>>(a, x, y, stream);
    case DType::Q8_0: return launch<Q8_0>(a, x, y, stream);
    case DType::Q4_K: return launch<Q4_K>(a, x, y, stream);
    case DType::Q2_K: return launch<Q2_K>(a, x, y, stream);
    case DType::IQ2_XXS: return launch<IQ2_XXS>(a, x, y, stream);
    case DType::MLX_Q4: return bf16s ? launch<MlxAffine<4, true>>(a, x, y, stream) : launch<MlxAffine<4, false>>(a, x, y, stream);
    case DType::MLX_Q8: return bf16s ? launch<MlxAffine<8, true>>(a, x, y, stream) : launch<MlxAffine<8, false>>(a, x, y, stream);
    default: break;
  }
}

}  // namespace ds4::cuda
