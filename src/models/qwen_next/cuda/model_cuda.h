#pragma once
// Qwen3.8 Flash Next on the CUDA backend (issues #10, #11). Same Model interface and results
// as the CPU model (src/models/qwen_next/model.h) within float32 rounding; weights are
// uploaded once at load (after memory admission), each state's caches live on the GPU. One
// token is one decode step, replayed from a CUDA graph captured per state; more than one
// token (prefill, speculative verify) runs in chunks of up to chunk_rows rows (chunk.cu),
// each weight read once per chunk, each chunk shape a CUDA graph per state too; every chunk
// row equals its decode step bit for bit.
// With mtp.* tensors the model is its own DraftHead (mtp.cu): the MTP head's layer runs
// through the trunk's decode-step code on the state's head caches, a greedy draft chain is
// one CUDA graph with one copy back of its draft ids; every consumed token's final trunk row
// (decode step or chunk row) goes into the state's ring of trunk rows for the head. The
// speculative loop verifies through verify_capture (one recorded chunk on the state itself)
// and keeps any prefix with commit_prefix, which cuts the trunk back from the records and
// the head's bookkeeping with mtp_keep_through: no clone, no re-run (no repair).
// A state saves and loads the CPU State's named sections (state_io.cu), so chat checkpoints
// move between the CPU and CUDA models either way (the head's history included).
#include <map>
#include <memory>
#include <string>

#include "backend/cuda/memory.h"
#include "formats/tensor_source.h"
#include "models/draft_head.h"
#include "models/cuda_tensor_cores_env.h"
#include "models/model.h"

namespace ds4::qwen_next {

struct CudaModelOptions {
  bool graphs = true;            // replay the decode step from a CUDA graph (false: launch each kernel)
  bool fuse_projections = true;  // stack projections of one input into one gemv (false: one each)
  // Non-zero: a synthetic model (models/qwen_next/synthetic_full.h): every matrix generated
  // on the GPU from this seed, embedding rows and PLE rows made per token on the host.
  uint64_t synthetic_seed = 0;
  int chunk_rows = 16;  // rows per multi-row chunk, 1..16 (1: every token is a decode step)
  // Prefill (issue #22): a forward of more than chunk_rows tokens (with or without the MTP head:
  // its ring takes a prefill chunk's rows piece by piece, chunk.cu forward_chunk) runs chunks of up to `prefill_rows` tokens (0 or <= chunk_rows: chunk_rows chunks;
  // at most kMaxPrefillRows; the chunk scratch is sized for it at load, ~4.5 MB per row at
  // full size with a 32K context, and the load lowers it to what a quarter of the device memory
  // free after the weights holds: options() tells what was kept). A chunk of at least `gemm_rows` rows runs its dense
  // projections as tensor-core GEMMs (kF16 / kTf32: model_matmul_precision, backend/cuda matmul_rows) and, with `expert_mma`, its routed
  // experts as grouped BF16 MMAs (grouped_mma_bf16): within TF32 / BF16 rounding of the CPU
  // model, not bit for bit (test_qwen_next_cuda item 8 states the bound); its QSA attention on
  // tensor cores too (qsa_tc.cu; DS4_QSA_TC=0 for the FP32 group kernel: H100, 2K prefill 2416 vs
  // 1915 tok/s, bench/results/session23-2026-12-06 call 4). The MoE router logits and the QSA
  // indexer's q/k (they pick experts and blocks) keep FP32 (fp32_gemms below).
  // gemm_rows 0 (the default) = every chunk exact: a prefill chunk's rows equal decode steps
  // bit for bit; the server (cuda_options_from_env) takes gemm_rows 17 (kServedTensorCoreRows).
  int prefill_rows = 512;
  int gemm_rows = 0;
  bool expert_mma = true;
  // In a tensor-core chunk, those exact products (router logits, indexer q / k) as FP32 cuBLAS
  // GEMMs (backend/cuda matmul_rows_f32: FP32 operands and rounding, another summation order)
  // instead of gemv_rows in groups of 16 rows (~a decode product per 16 rows: most of the 2K
  // prefill's moe_in_proj, 106 of 1097 ms on the H100, bench/results/session23-2026-12-06 call 3),
  // as DeepSeek's and GLM's fp32_gemms. false: gemv_rows (each row = its decode step's bits).
  bool fp32_gemms = true;
  // Most rows verify_capture records (made on its first use, min(capture_rows, chunk_rows)
  // rows; full size ~3.2 MB of GDN state per GDN layer and row, ~0.9 GB at 8 rows).
  int capture_rows = 8;
  // decode_batch (batch.cu): sequences per batched forward at most (more run as several
  // forwards), within the chunk scratch's rows. H200, full-size synthetic Qwen, context 2K
  // (bench/results/session11-h200-2026-12-04i): batch_rows 4: 145.2 / 145.2 / 145.2, 8: 144.4 / 153.0 / 153.3, 16: 145.2 / 106.7 / 106.8; 1 stream 125.1. 8 is
  // best but batching gains only 1.1-1.2x: gemv_rows still costs about a gemv per row.
  int batch_rows = 8;
};

// The options of the serving binary (ds4server): CudaModelOptions{} with every prefill chunk of
// more than 16 rows on tensor cores (kServedTensorCoreRows; 64 before 2026-12-05), unless the
// environment has DS4_CUDA_TENSOR_CORES=0 (models/cuda_tensor_cores_env.h). Verify windows and
// draft-head chunks (<= 16 rows) stay exact either way.
inline CudaModelOptions cuda_options_from_env() {
  CudaModelOptions o;
  const bool tensor_cores = cuda_tensor_cores_from_env();
  o.gemm_rows = tensor_cores ? kServedTensorCoreRows : 0;
  // Tensor-core prefill chunks of 1024 rows (of kMaxPrefillRows = 2048; admission at load may shrink
  // them): more rows per expert per decoded weight tile (bench/results/prefill-h200-2026-12-04g:
  // 2024 vs 1791 tok/s at 2K, canary max 0.48 ms in 512-row chunks). Exact mode keeps 512.
  if (tensor_cores) o.prefill_rows = 1024;
  return o;
}

class QwenNextCudaModel : public Model, public DraftHead {
 public:
  QwenNextCudaModel(std::unique_ptr<TensorSource> src, const LoadOptions& opt, const CudaModelOptions& copt = {});
  ~QwenNextCudaModel() override;
  const ModelInfo& info() const override;
  std::unique_ptr<ModelState> new_state() const override;
  // Admission control (engine/state_budget.h): free device memory less the allocation headroom.
  size_t state_memory_available() override {
    const size_t free = ds4::cuda::device_memory_info().free_bytes;
    return free > ds4::cuda::kDefaultHeadroom ? free - ds4::cuda::kDefaultHeadroom : 0;
  }
  void forward(ModelState& state, std::span<const int32_t> tokens, Logits mode, std::vector<float>& logits) override;
  // One token: the candidates are picked on the GPU and only they are copied back.
  void forward_candidates(ModelState& state, std::span<const int32_t> tokens, const CandidateRequest& req,
                          SampleCandidates& out, std::vector<float>& logits, const NeedFull& need_full) override;

  // Captured-prefix commit (DraftHead::verify_capture / commit_prefix, MTPLX semantics):
  // verify_capture runs `tokens` (1..min(capture_rows, chunk_rows) of them; more: returns
  // false, state untouched) as one Logits::kAll chunk on `trial` itself while recording per
  // row what cannot be cut back (GDN recurrent state and conv input rows, PLE conv input rows
  // and token context); with the MTP head on, the rows also enter the state's trunk-row ring
  // as any forward's do. commit_prefix(keep) makes `trial` the state after its first `keep`
  // rows, the head's pending pairs included (Impl::mtp_keep_through). The records live in the
  // state (made at its first window of more than one row; a clone copies a pending window's),
  // so several states can hold a pending window at once (sessions speculating side by side).
  bool verify_capture(ModelState& trial, std::span<const int32_t> tokens, std::vector<float>& logits) override;
  // Continuous batching (batch.cu): one forward over N rows, each weight read once for the
  // batch (exact products only), the GDN / PLE conv states, GDN recurrences and QSA caches per
  // sequence; row i equals the state's decode step bit for bit. One sequence, a state with the
  // MTP head on (its ring takes every row) or with a pending captured window, and every row
  // while profiling take the single-sequence step. At most batch_rows (and chunk-scratch rows)
  // per forward; more run as several.
  void decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                    std::vector<float>& logits) override;
  // decode_batch ending in each row's sampling candidates on the GPU (batch.cu,
  // cuda_decode_batch_candidates): only they, and the rows asked for, are copied back.
  void decode_batch_candidates(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                               std::span<const CandidateRequest> reqs, std::vector<SampleCandidates>& out,
                               std::vector<float>& logits, const NeedFullRow& need_full) override;
  // Batched speculative verify (verify_batch.cu): every state's verify window (1..min(capture_rows,
  // chunk_rows) tokens) as one forward over the stacked rows, each state's rows, captured window
  // and MTP ring bit for bit its own verify_capture's. At most batch_rows states and the chunk
  // scratch's rows per forward. A longer window: the fallback loop (Model::verify_batch).
  bool verify_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                    std::vector<float>& logits) override;
  void commit_prefix(ModelState& trial, int64_t keep) override;

  // Changes prefill_rows (up to the value loaded with), gemm_rows and expert_mma of a loaded
  // model (bench: the old and the new path in one process; InputError otherwise); the rest
  // stays as loaded. Use new states after it: a captured chunk graph keeps its path.
  void set_options(const CudaModelOptions& copt);
  const CudaModelOptions& options() const;
  // Benches: GPU ms per named op (backend/cuda/op_timer.h) of decode steps (issue #23's per-op
  // table) and of prefill chunks (issue #22's phases), summed since the last reset. On: direct
  // launches (no graph replay) with an event after each op, the table reset when it turns
  // on; off: graphs again as loaded, the table kept for op_times().
  void set_profiling(bool on);
  const std::map<std::string, double>& op_times() const;
  void reset_op_times();

  size_t weight_bytes() const;  // device bytes of the uploaded weights
  // Bytes of weights one decode token reads: all but the routed experts, plus top_k of
  // experts of them (state and KV reads come on top).
  size_t weight_bytes_per_token() const;
  // Weight bytes a chunk of `rows` rows reads over one token's (the bench's bytes floor):
  // everything but the routed experts once, routed experts as the expected union of the
  // rows' top-k under uniform routing.
  double chunk_bytes_ratio(int64_t rows) const;

  // MTP draft head (MTPLX Qwen4ExpMTP), the CPU model's semantics (models/qwen_next/model.h):
  // nullptr without mtp.* tensors, for synthetic models, or for an embedding type the GPU
  // cannot decode a row of (backend/cuda/embed.h). Depth at most 16 (cuda::kMtpMaxDepth).
  DraftHead* draft_head() override;
  void enable_draft(ModelState& state) const override;
  void draft(ModelState& state, int32_t next_token, int depth, std::vector<int32_t>& drafts) override;
  bool draft_picked(ModelState& state, int32_t next_token, int depth, const Pick& pick,
                    std::vector<int32_t>& drafts) override;
  // Tests: the same chain with its logits {depth, vocab} copied back (CPU: mtp_draft).
  void mtp_draft(ModelState& state, int32_t next_token, int depth, std::vector<float>& logits,
                 std::vector<int32_t>& drafts, const Pick& pick = {});
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

std::unique_ptr<Model> load_cuda(const std::string& path, const LoadOptions& opt, const CudaModelOptions& copt = {});

}  // namespace ds4::qwen_next
