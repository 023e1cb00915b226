#pragma once
// The hyper-connection read of one decode token in two launches (hyper_fused.cu), bit for bit
// hc_norm -> gemv(down_inject) -> hc_low_act -> gemv(up) -> hc_combine (kernels.h, gemv.h).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/weight.h"

namespace ds4::qwen_next::cuda {

// Whether the fused read takes these matrices: down {rank (+ hc), hc*d} and up {hc*d, rank}
// in F32/F16/BF16/MLX q4/q8 (up also plain floats of any width), hc <= 8, d % 32 == 0,
// hc * d floats within 44 KB (staged in shared memory).
bool hyper_read_fusable(const WeightMatrix& down, const WeightMatrix& up, int64_t hc, int64_t d, int64_t rank);
// normed {hc*d} = per-stream rmsnorm(h) * norm; low {rank} = silu(down normed / hc), and with
// `inject` low[rank + k] = 2 sigmoid(inject row k / hc) (else the raw rows past rank);
// mixed {d} = mean_k sigmoid(up low)[k*d + i] * normed[k*d + i].
void hyper_read_fused(const WeightMatrix& down, const WeightMatrix& up, const float* h, const float* norm, int64_t hc,
                      int64_t d, int64_t rank, float eps, float* normed, float* low, float* mixed, bool inject,
                      cudaStream_t s);

}  // namespace ds4::qwen_next::cuda
