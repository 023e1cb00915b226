#pragma once
// Routed experts of a large prefill chunk as cuBLAS grouped GEMMs (issue #22). grouped_mma_bf16
// decodes every weight tile in shared memory for at most 64 rows of one expert, so its speed
// stops growing with the chunk (H200: 74-77 TFLOP/s at 2048-row chunks vs 870 for a dense BF16
// GEMM). Here, for the same entries (GemvRows of moe_group's layout):
//   plan  the chunk's grouping (live, expert ids, row counts) copied to the host: ONE stream
//         synchronization per MoE layer (a prefill chunk launches directly, never captured;
//         cuBLAS's grouped GEMM takes its sizes from host arrays), shared by both projections;
//   run   per call: the entries' x rows gathered to BF16 in entry order (row d = u * 16 + i of
//         entry u, so an expert's rows are contiguous: moe_group fills all its entries but the
//         last), then per batch of experts (as many whole expert matrices as the BF16 weight
//         scratch holds) the experts decoded to BF16 by dequant_bf16_experts (the GEMV's format
//         decoders: one place for the formats) and one cublasGemmGroupedBatchedEx (BF16 in,
//         FP32 compute and out) over them, then the rows scattered to y.
// Operands are rounded exactly as in grouped_mma_bf16 (decoded weight -> BF16, x -> BF16), the
// FP32 summation order is cuBLAS's: results agree with grouped_mma_bf16 to rounding, not bit for
// bit, and a row's result may depend on how many rows its expert has (the GEMM shape picks the
// algorithm). Rows of no live entry are never written.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/gemv.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/memory.h"
#include "core/weight.h"

namespace ds4::cuda {

// A chunk takes the grouped GEMM from this many (token, expert) pairs per expert on average
// (below it the GEMMs are too thin and grouped_mma_bf16 wins); experts per weight batch at load.
inline constexpr int64_t kGroupedGemmMinRowsPerExpert = 32;
inline constexpr int64_t kGroupedGemmBatchExperts = 32;

// The mode, read from DS4_GROUPED_GEMM on first use: 0 = off (grouped_mma_bf16 always; the
// switch if this path misbehaves on a device), 1 = cublasGemmGroupedBatchedEx per batch (the
// default), 2 = one cublasGemmEx per expert (the bench's comparison). DS4_GROUPED_GEMM_MIN_ROWS
// overrides kGroupedGemmMinRowsPerExpert (>= 1). Not thread safe against calls in flight.
int grouped_gemm_mode();
void grouped_gemm_set_mode(int mode);  // 0, 1 or 2; throws InputError otherwise
int64_t grouped_gemm_min_rows();
void grouped_gemm_set_min_rows(int64_t rows);  // >= 1
// Experts per weight batch at most (DS4_GROUPED_GEMM_BATCH, read on first use; 0 = as many as
// the scratch holds, the default): smaller batches keep the decoded experts in L2 between the
// decode and the GEMM, larger ones give the GEMM more tiles at once (the bench sweeps it).
int64_t grouped_gemm_batch_experts();
void grouped_gemm_set_batch_experts(int64_t experts);  // >= 0

class GroupedGemm {
 public:
  // max_entries: the most GemvRows entries a call has (moe_group_entries of the largest chunk);
  // max_out / max_in: the largest rows / cols of an expert matrix; weight_bytes: the BF16 scratch
  // for one batch of decoded experts (at least one max_out x max_in matrix); mm: the stream's
  // cuBLAS handle and workspace (matmul_rows.h), shared. Allocates under admission (memory.h).
  GroupedGemm(int64_t max_entries, int64_t max_out, int64_t max_in, size_t weight_bytes, MatmulWorkspace& mm,
              const std::string& what);
  ~GroupedGemm();
  GroupedGemm(const GroupedGemm&) = delete;
  GroupedGemm& operator=(const GroupedGemm&) = delete;

  // Device bytes the constructor allocates (for admission and the load log).
  static size_t device_bytes(int64_t max_entries, int64_t max_out, int64_t max_in, size_t weight_bytes);
  // Whether run() takes this matrix: a grouped_mma_bf16 format, within the scratch's shape.
  bool supports(const WeightMatrix& w) const;
  // The grouping of r's entries (r.live, r.batch.ids, r.counts; null ones as in gemv_rows) to
  // the host: synchronizes `s`. Throws InputError for more entries than max_entries, or while
  // `s` is being captured into a graph.
  void plan(const GemvRows& r, cudaStream_t s);
  // y rows of r's live entries = W_e x rows, as grouped_mma_bf16(w, x, y, r) (x_idx, y_idx,
  // x_row, y_row, x_stride, y_stride, id_stride, id_scale_stride as there), for the entries of
  // the last plan(): r's live, ids and counts must be the ones planned.
  void run(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, cudaStream_t s);
  // Experts with rows in the last plan (the GEMMs of a run), and their rows.
  int64_t groups() const { return int64_t(groups_.size()); }
  int64_t planned_rows() const { return planned_rows_; }

 private:
  struct Group {
    int32_t expert, row0, rows;  // row0: the first gathered row (entry * kGemvMaxRows)
  };
  int64_t max_entries_, max_out_, max_in_;
  size_t weight_elems_;
  MatmulWorkspace& mm_;
  DeviceBuffer w_, x_, y_;       // BF16 experts {batch, out, in}, BF16 rows {entries * 16, in}, f32 {entries * 16, out}
  DeviceBuffer dgroups_, dptr_;  // {2, max_entries} int32 (expert, row0); {3, max_entries} operand pointers
  std::unique_ptr<PinnedHost> host_;  // {1 + 2 max_entries} grouping read back, then {2, max_entries} groups up
  std::vector<Group> groups_;
  int64_t planned_rows_ = 0;
};

// The models' load: a GroupedGemm for chunks of up to `rows` rows of `k` experts per token over
// `experts` (kGroupedGemmBatchExperts experts per weight batch), or null when such a chunk never
// reaches kGroupedGemmMinRowsPerExpert pairs per expert, or the scratch does not fit under
// admission's headroom (logged to stderr: prefill then keeps grouped_mma_bf16).
std::unique_ptr<GroupedGemm> make_grouped_gemm(int64_t rows, int64_t k, int64_t experts, int64_t max_out,
                                               int64_t max_in, MatmulWorkspace& mm, const std::string& what);

}  // namespace ds4::cuda
