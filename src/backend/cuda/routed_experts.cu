// plan_experts / grouped_experts (routed_experts.h).
#include "backend/cuda/routed_experts.h"

#include "backend/cuda/check.h"
#include "backend/cuda/grouped_mma.h"
#include "core/error.h"

namespace ds4::cuda {

ExpertPath plan_experts(bool tensor_chunk, const WeightMatrix& gate_up, const WeightMatrix& down, const GemvRows& r,
                        int64_t rows_per_expert, GroupedGemm* gg, cudaStream_t s) {
  if (!grouped_mma_usable(tensor_chunk, gate_up, down)) return ExpertPath::kGemv;
  if (!gg || grouped_gemm_mode() == 0 || rows_per_expert < grouped_gemm_min_rows() || !gg->supports(gate_up) ||
      !gg->supports(down))
    return ExpertPath::kMma;
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  DS4_CUDA_CHECK(cudaStreamIsCapturing(s, &cs));
  if (cs != cudaStreamCaptureStatusNone) return ExpertPath::kMma;  // a graph cannot read the grouping back
  gg->plan(r, s);
  return ExpertPath::kGemm;
}

void grouped_experts(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, ExpertPath path,
                     cudaStream_t s, int64_t rows_per_expert, GroupedGemm* gg) {
  switch (path) {
    case ExpertPath::kGemv: return gemv_rows(w, x, y, r, s);
    case ExpertPath::kMma: return grouped_mma_bf16(w, x, y, r, s, rows_per_expert);
    case ExpertPath::kGemm:
      if (!gg) throw InputError("cuda grouped_experts: the grouped GEMM path without a GroupedGemm");
      return gg->run(w, x, y, r, s);
  }
}

}  // namespace ds4::cuda
