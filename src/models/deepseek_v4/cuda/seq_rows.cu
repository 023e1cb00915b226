// The position counters of a decode batch's sequences (Rows::shift, kernels.h) in one launch.
#include "backend/cuda/check.h"
#include "models/deepseek_v4/cuda/kernels.h"
#include "models/deepseek_v4/cuda/seq_rows.cuh"

namespace ds4::deepseek_v4::cuda {
namespace {

__global__ void seq_positions_increment_kernel(int32_t* pos, Rows rr) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < rr.count) *detail::shifted(pos, detail::row_shift(rr, t)) += 1;
}

}  // namespace

void seq_positions_increment(int32_t* pos, const Rows& rows, cudaStream_t s) {
  if (!rows.shift) throw InputError("deepseek_v4 cuda: seq_positions_increment needs Rows::shift");
  seq_positions_increment_kernel<<<unsigned((rows.count + 127) / 128), 128, 0, s>>>(pos, rows);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::deepseek_v4::cuda
