#pragma once
// GLM 5.x Flash on the CUDA backend (issue #10). Same Model interface and results as the
// CPU model (src/models/glm5/model.h) within float32 rounding; weights are uploaded once at
// load (after memory admission), each state's caches live on the GPU; a single token is one
// decode step, replayed from a CUDA graph captured per state; a forward of T > 1 tokens
// (prefill, speculative verify) runs chunks of up to chunk_rows tokens that read every
// weight once per chunk (chunk.cu), each chunk shape captured as its own graph, and a long
// prefill chunks of up to prefill_rows, launched directly, on tensor cores from gemm_rows. When the
// checkpoint has the integrated MTP layer the model is its own DraftHead (issue #11):
// the head's layer caches and the queue of trunk rows live in the state on the GPU, the
// trunk forward fills the queue on the device, a greedy draft chain is one CUDA graph with
// one copy of the ids back (mtp.cu); verify_capture / commit_prefix keep any verified prefix
// from per-row KDA records without a second forward (spec_commit.cu). States save and load
// the CPU model's checkpoint sections (the MTP head's history too), so a checkpoint moves
// between the two.
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/memory.h"
#include "formats/tensor_source.h"
#include "models/draft_head.h"
#include "models/glm5/config.h"
#include "models/cuda_tensor_cores_env.h"
#include "models/model.h"

namespace ds4::glm5 {

struct CudaModelOptions {
  bool graphs = true;            // replay the decode step from a CUDA graph (false: launch each kernel)
  bool fuse_projections = true;  // stack projections of one input into one gemv (false: one each)
  // Tokens per multi-row forward (prefill chunk / verify rows, 1..16): each weight matrix is
  // read once per chunk. 1 = every token through the one-token decode step.
  int chunk_rows = 16;
  // Non-zero: a synthetic model (glm5/cuda/synthetic.h): every matrix generated on the GPU
  // from this seed (the source's matrices are shapes only), embedding rows made per token.
  uint64_t synthetic_seed = 0;
  // Prefill (issue #22): a forward of more than chunk_rows tokens (chunk_rows > 1, no MTP head
  // enabled on the state) runs chunks of up to `prefill_rows` tokens, each weight read once per
  // chunk. At load the chunk scratch is sized for prefill_rows and halved while it does not fit
  // beside one state under memory admission (prefill_rows() says what was kept); 0 (or <=
  // chunk_rows) = every forward in chunk_rows chunks. Such a chunk stays on the exact path
  // (bit-identical to decode steps) unless it has at least `gemm_rows` rows (gemm_rows > 0):
  // then the dense projections (KDA, MLA q_a / kv_a / q_b / W_uk / W_uv / o, shared expert,
  // dense MLP, lm_head) are tensor-core GEMMs (backend/cuda matmul_rows, model_matmul_precision) and, with expert_mma, the
  // routed experts grouped BF16 MMAs (grouped_mma_bf16), while the products that feed discrete
  // choices stay exact (hyper-connection mixes -> Sinkhorn, router logits -> top-k, the DSA
  // indexer's keys / gates / weights / queries -> pool top-k): within TF32 / BF16 rounding of
  // the CPU model, not bit for bit (test_glm5_cuda item 8 states the tolerance).
  // Default gemm_rows 0 (exact: the tests' reference); the server takes 17 (cuda_options_from_env, kServedTensorCoreRows).
  int prefill_rows = 512;
  int gemm_rows = 0;
  bool expert_mma = true;
  // In a tensor-core chunk also the HC mixes (F32 weights) and the MLA attention (each token's
  // selected latent rows gathered, scores and output as strided-batched GEMMs) as FP32 cuBLAS
  // GEMMs (chunk_gemm.cu): 15% and 51% of a 512-row chunk on the H200 as per-row kernels; and
  // (session 23) the other exact products (router logits, the indexer's inputs) as FP32 GEMMs
  // (matmul_rows_f32) instead of gemv_rows per 16 rows. The MLA attention of a tensor-core chunk
  // runs on tensor cores whatever this says (mla_tc.cu; DS4_MLA_TC=0 for the FP32 GEMM form: H100,
  // 2K prefill 1402 vs 1320 tok/s, bench/results/session23-2026-12-06 call 6).
  // H200, full-size synthetic: 911.6 tok/s at 2K vs 446.8 without, 872.7 at 32K; test_glm5_cuda
  // item 8's fp32_gemms rows pass (bench/results/cuda-glm5-fp32-h200-2026-12-04e).
  bool fp32_gemms = true;
  // decode_batch (batch.cu): sequences per batched forward at most (more run as several
  // forwards), within the chunk scratch's rows. H200, full-size synthetic GLM, context 2K
  // (bench/results/session11-h200-2026-12-04i): batch_rows 4: 66.7 / 66.6 / 66.7 tok/s aggregate at 4 / 16 / 64 streams, 8: 66.7 / 68.1 / 68.1, 16: 66.7 / 48.6 / 48.6; 1 stream 61.3. 8 is
  // best but batching gains only 1.1-1.2x: gemv_rows still costs about a gemv per row.
  int batch_rows = 8;
  // decode_batch: the stateful kernels (KDA conv + recurrence, MLA latent append, indexer key
  // append + pool selection, MLA attention, position counters) as one launch over all the batch's
  // sequences (kernels.h Rows::seq), each row on its own state exactly as its decode step; false:
  // one launch per sequence (the form before 2026-12-05; test_glm5_batch_cuda runs both).
  bool seq_launches = true;
  // The decode step's launches of issue #23 (bench/cuda_glm5 --profile compares them with false
  // in one run): KDA's f_b|g_b as one batched gemv, a row-major fn's gemv one row per block,
  // and a side stream for the independent branches (shared expert, KDA gates, MLA append +
  // indexer). None changes a result: decode steps equal the chunked forward's rows bit for bit
  // either way. A split hyper-connection fn (README: hc_fused.cu) takes the fused kernel with
  // the hc_post folded into the next hc_pre whatever this says (the chunk's rows always take
  // it; false used to run gemv + hc_pre_f32 there: other rounding than the chunk rows).
  bool decode_tuning = true;
  // With decode_tuning: the side stream for the independent branches. Off by default: written
  // and built but not yet run on a GPU (session 13's second request did not run); the bench's
  // --profile measures it as its last variant.
  bool decode_side_stream = false;
  // Rows per thread block of the decode step's weight gemvs (GemvOptions::rows_per_block: 0 =
  // gemv's choice, or 1 / 2 / 4 / 8). Never changes a result; the bench's --profile sweeps it.
  int decode_gemv_rows = 0;
};

// The options of the serving binary (ds4server): CudaModelOptions{} with every prefill chunk of
// more than 16 rows on tensor cores (kServedTensorCoreRows; 64 before 2026-12-05), unless the
// environment has DS4_CUDA_TENSOR_CORES=0 (models/cuda_tensor_cores_env.h). Verify windows and
// draft-head chunks (<= 16 rows) stay exact either way.
inline CudaModelOptions cuda_options_from_env() {
  CudaModelOptions o;
  const bool tensor_cores = cuda_tensor_cores_from_env();
  o.gemm_rows = tensor_cores ? kServedTensorCoreRows : 0;
  // Tensor-core prefill chunks of 2048 rows (kMaxPrefillRows; admission at load may shrink
  // them): more rows per expert per decoded weight tile (bench/results/prefill-h200-2026-12-04g:
  // 1559 vs 1012 tok/s at 2K, canary max 0.50 ms in 512-row chunks). Exact mode keeps 512.
  if (tensor_cores) o.prefill_rows = 2048;
  return o;
}

// Per-section GPU time of one multi-row forward (profile_chunk): sections in order of first
// appearance, each summed over the layers.
struct ChunkProfile {
  std::vector<std::pair<std::string, double>> sections;  // {name, ms}
  double total_ms = 0;
};

class Glm5CudaModel : public Model, public DraftHead {
 public:
  Glm5CudaModel(std::unique_ptr<TensorSource> src, const LoadOptions& opt, const CudaModelOptions& copt = {});
  ~Glm5CudaModel() override;
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
  // Continuous batching (batch.cu): one forward over N rows, each weight read once for the
  // batch (exact products only), the KDA conv states and recurrences, MLA latent caches,
  // indexer caches, selection and attention per sequence; row i equals the state's decode step
  // bit for bit. One sequence, a state with the MTP head on (its queue takes every row) or
  // with a pending captured window, and layer_outputs() take the single-sequence step. At
  // most batch_rows (and chunk-scratch rows) per forward; more run as several.
  void decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                    std::vector<float>& logits) override;
  // decode_batch ending in each row's sampling candidates on the GPU (batch.cu,
  // cuda_decode_batch_candidates): only they, and the rows asked for, are copied back.
  void decode_batch_candidates(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                               std::span<const CandidateRequest> reqs, std::vector<SampleCandidates>& out,
                               std::vector<float>& logits, const NeedFullRow& need_full) override;
  // Batched speculative verify (verify_batch.cu): every state's verify window as one forward
  // over the stacked rows (the same rows and exact products as decode_batch, one row group per
  // window), each window's rows, KDA records and MTP queue bit for bit its own verify_capture's.
  // Windows longer than chunk_rows or layer_outputs() take Model's loop of verify_capture calls.
  bool verify_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                    std::vector<float>& logits) override;

  const Config& config() const;
  // Changes the per-forward options of the loaded model (the bench's old vs new path): the load-
  // time fields (synthetic_seed, fuse_projections) must stay, chunk_rows may not exceed the
  // value loaded with, prefill_rows not the rows the chunk scratch was sized for (InputError).
  // A change of decode_tuning, decode_side_stream or decode_gemv_rows (what the captured decode
  // step launches) drops every captured graph: the batch graphs now, each state's at its next
  // forward or draft; otherwise states keep the graphs they captured (chunks of <= chunk_rows rows).
  void set_options(const CudaModelOptions& copt);
  const CudaModelOptions& options() const;
  int64_t prefill_rows() const;  // rows of the chunk scratch (the largest prefill chunk)
  size_t weight_bytes() const;       // device bytes of the uploaded weights
  // Bytes of weights one decode token reads: everything but the routed experts, plus k of
  // E experts per MoE layer (the KV/indexer cache reads come on top, growing with position).
  size_t weight_bytes_per_token() const;
  // Weight bytes one chunk of `rows` tokens reads over one decode token's: every matrix once,
  // routed experts as the expected union of the rows' top-k sets, E (1 - (1 - k/E)^rows),
  // under uniform independent routing: the floor of the verify-cost ratio from bytes alone.
  double chunk_bytes_ratio(int64_t rows) const;
  // Debugging aid (tests): prefills `tokens` into a fresh state with direct launches and
  // returns the output streams {tokens, hc, hidden} of every decoder layer, the layout of
  // glm5::layer_outputs on the CPU model.
  std::vector<std::vector<float>> layer_outputs(std::span<const int32_t> tokens);
  // Bench aid (bench_glm5_cuda --profile): forward of `tokens` (1..chunk_rows, chunk_rows > 1,
  // Logits::kAll; or a prefill chunk of up to prefill_rows on forward()'s path, kLast) through
  // the multi-row path with direct launches and a cudaEvent at each section start
  // (hyper-connections, KDA projections / conv / recurrence, MLA projections / append + select
  // / attend, MoE route / shared / experts, head); the state advances as forward() would.
  // A hold kernel first (20 ms; 300 ms for a prefill chunk) lets the host enqueue the whole
  // chunk before the GPU starts it, so the sections time the GPU, not the launch rate; events
  // add a little to each section.
  ChunkProfile profile_chunk(ModelState& state, std::span<const int32_t> tokens);
  // Bench aid (issue #23's per-op table): on = decode steps run with direct launches and an
  // event after every op (backend/cuda/op_timer.h), GPU ms summed per op name (all layers);
  // off = graphs again as loaded, the table kept for op_times(). Turning it on clears the table.
  void set_profiling(bool on);
  const std::map<std::string, double>& op_times() const;
  void reset_op_times();

  // DraftHead over the integrated MTP layer (nullptr when the checkpoint has none); the CPU
  // model's semantics (mtp.cpp, spec_commit.cpp). Draft depth 0..16.
  DraftHead* draft_head() override;
  void enable_draft(ModelState& state) const override;
  void draft(ModelState& state, int32_t next_token, int depth, std::vector<int32_t>& drafts) override;
  bool draft_picked(ModelState& state, int32_t next_token, int depth, const Pick& pick,
                    std::vector<int32_t>& drafts) override;
  // Logits {depth, vocab} of the last draft_picked() (tests: a pick = argmax gives the greedy chain's).
  const std::vector<float>& last_draft_logits() const;
  // Verify rows <= chunk_rows (and chunk_rows > 1, or one row) capture; more return false.
  bool verify_capture(ModelState& trial, std::span<const int32_t> tokens, std::vector<float>& logits) override;
  void commit_prefix(ModelState& trial, int64_t keep) override;
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

std::unique_ptr<Model> load_cuda(const std::string& path, const LoadOptions& opt, const CudaModelOptions& copt = {});

}  // namespace ds4::glm5
