// plan_experts / grouped_experts (routed_experts.h).
#include "backend/cuda/routed_experts.h"

#include "backend/cuda/check.h"
#include "backend/cuda/dequant.h"
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
                     cudaStream_t s, int64_t rows_per_expert, GroupedGemm* gg, void* x16, int64_t x_rows) {
  switch (path) {
    case ExpertPath::kGemv: return gemv_rows(w, x, y, r, s);
    case ExpertPath::kMma:
      if (x16 && grouped_mma_x16()) {
        if (r.batch.x_stride != 0 || x_rows < 1)
          throw InputError("cuda grouped_experts: BF16 x needs x_rows >= 1 and no per-entry x stride");
        rows_to_bf16(x, r.x_row, x_rows, w.cols, x16, s);
        GemvRows r16 = r;
        r16.x_row = w.cols;
        return grouped_mma_bf16_x16(w, x16, y, r16, s, rows_per_expert);
      }
      return grouped_mma_bf16(w, x, y, r, s, rows_per_expert);
    case ExpertPath::kGemm:
      if (!gg) throw InputError("cuda grouped_experts: the grouped GEMM path without a GroupedGemm");
      return gg->run(w, x, y, r, s);
  }
}

}  // namespace ds4::cuda
