#pragma once
// DeepSeek V4 Flash on the CUDA backend (issue #10). Same Model interface and results as
// the CPU model (src/models/deepseek_v4/model.h) within float32 rounding; weights are
// uploaded once at load (after memory admission, streamed from the mmap), each state's
// caches (window ring, compressor lanes and entries) live on the GPU; a single token is one
// decode step, replayed from a CUDA graph captured per state; a forward of T > 1 tokens
// (prefill, speculative verify) runs chunks of up to chunk_rows tokens that read every weight
// once per chunk (chunk.cu), each chunk shape captured as its own graph, with logits equal to
// as many decode steps bit for bit.
// Speculative decoding (issue #11): with ds4's MTP head in the checkpoint (mtp.0.*) the model is
// its own DraftHead (mtp.cu): the head's layer (index config().layers, the trunk's layer code)
// has its window ring and mtp_last_y in each head-enabled state, fed on the device after every
// trunk forward; draft() runs the greedy chain on the device (argmax per row, the ids copied
// back once) and leaves the state as it was; verify_capture() records a compressor-lane undo log
// and the head's rows during the verify chunk, so commit_prefix(keep) costs one kernel and
// a copy (spec_commit.cu). With MTPLX's DSpark drafter in the checkpoint (mtp.0.main_proj.weight;
// it wins over mtp.0.* as on the CPU) the DraftHead is DSpark's (dspark.cu): per stage a ring of
// main_q's K/V rows in each drafter-enabled state, recorded on the device from the tap layers'
// HC means in every trunk step / chunk; draft() is one K5 pass as a graph (stages, logits, the
// Markov chain and confidences on the device, ids and confidences copied back once), then the
// depth cut and the confidence gate (draft_gated) as the CPU; draft_picked declines; the
// captured commit needs no DSpark record. No draft head for an embedding (or DSpark markov_w1)
// type the device lookup lacks (backend/cuda/embed.h: F32, F16, BF16, Q8_0).
// Checkpoints (state_io.cu): a state's save()/load() use the CPU State's named sections, so
// GPU and CPU checkpoints load into each other; load refuses (InputError, nothing written)
// what the device state cannot hold; save throws while a captured verify window is pending.
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "backend/cuda/memory.h"
#include "models/cuda_tensor_cores_env.h"
#include "models/deepseek_v4/model.h"
#include "models/draft_head.h"
#include "models/model.h"

namespace ds4::deepseek_v4 {

struct CudaModelOptions {
  bool graphs = true;    // replay the decode step from a CUDA graph (false: launch each kernel)
  bool profile = false;  // direct launches only: CUDA events around each op, summed per op name
  bool fuse_projections = true;  // stack projections of one input into one gemv (false: one each)
  // Independent branches of a layer on a second stream (KV row + compressor lanes beside the
  // q path; the shared expert beside the routed experts), joined by events (also in graphs).
  // Bit-identical to one stream (test); H200, synthetic Flash at 2048: 58.0 vs 55.8 tok/s
  // (bench/results/cuda-all-h200-2026-12-01). Profiling turns it off (events time one stream).
  bool streams = true;
  // Tokens per multi-row forward (prefill chunk / verify rows, 1..16): every weight matrix is
  // read once per chunk. 1 = every token through the one-token decode step. set_options may
  // lower it below the value the model was loaded with, not raise it.
  int chunk_rows = 16;
  // Prefill (issue #22), one chunk policy: a forward of more than chunk_rows tokens (with or
  // without a draft head enabled: the head records the chunk's rows with the same products) runs
  // chunks of up to `prefill_rows` tokens (at most
  // kMaxPrefillRows; 0, or <= chunk_rows: every forward in chunk_rows chunks). A prefill chunk of
  // more than 16 rows (tensor_core_rows) with `tensor_cores` does its dense projections (q_a,
  // kv, compressor kv / gate, q_b, o LoRA, shared expert, lm_head) as tensor-core GEMMs (kF16 / kTf32: model_matmul_precision, backend/cuda
  // matmul_rows) and its routed experts BF16 MMAs (grouped_mma_bf16, where cols % 128 == 0; int8
  // MMAs on quantized rows with act_quant and int8_experts, grouped_mma_int8);
  // the HC mixes, the router logits and the indexer's inputs stay exact (they feed Sinkhorn and
  // top-k choices). Within the stated tolerance of the CPU model, not bit for bit:
  // test_deepseek_v4_cuda item 8 compares it with the CPU model rounding the same operands
  // (deepseek_v4::set_tensor_core_emulation). Without `tensor_cores`, and for every chunk of
  // <= 16 rows (decode steps, verify windows, short prompts), bit-identical to decode steps.
  // (The server takes kServedPrefillRows: cuda_options_from_env.) Fewer rows when the chunk
  // scratch does not fit beside the weights (model_cuda.cu prefill_chunk_rows).
  int prefill_rows = 512;
  bool tensor_cores = true;
  // In a tensor-core chunk, the products kept exact (HC mixes, router logits, indexer inputs)
  // as FP32 GEMMs (cuBLAS pedantic FP32: FP32 rounding in another summation order, no tensor
  // cores) instead of gemv_rows in groups of 16 rows (false; bit-identical to decode steps).
  bool fp32_gemms = true;
  // Diagnostics: false keeps gemv_rows (exact per row) for the routed experts of a tensor-core
  // chunk while its dense projections are GEMMs (the bench's middle table).
  bool expert_mma = true;
  // With act_quant, a tensor-core chunk's routed experts as int8 MMAs on quantized rows
  // (backend/cuda grouped_mma_int8: each output = the CPU's dot_act of its row, as ds4's own
  // expert products) instead of BF16 MMAs. Unset at load = DS4_INT8_EXPERTS (0 or 1), else on
  // (since session 23: every DeepSeek CUDA test passed with it, bench/results/session23-2026-12-06
  // call 1; H100, 30-layer synthetic Flash, 2K prefill 4407 tok/s with the staged int8 kernel vs
  // 3685 with BF16 experts, session 22). test_deepseek_v4_actq_cuda item 8 checks both paths
  // against the CPU act model; test_deepseek_v4_cuda item 8 pins BF16 experts (its references
  // take f32 activations). Unset in set_options = keep the current setting; switching it makes
  // states recapture their graphs at their next forward. options() reports the resolved value.
  std::optional<bool> int8_experts = std::nullopt;
  // With act_quant, a tensor-core chunk's dense act products (Q8_0 in ds4 files: attn_in's
  // stacked q_a | kv, q_b, index_q_b, o_a's groups, o_b, moe_in, the shared expert, lm_head) as
  // int8 MMAs on quantized rows (backend/cuda grouped_mma_int8_dense: each output = the CPU's
  // dot_act of its quantized row, as a decode step's gemv_act to rounding) instead of TF32 GEMMs
  // of f32 rows (index_q_b: FP32). Products of other formats (F16 / F32: HC mixes, router,
  // compressor, indexer kv / gate) keep their operands. Unset at load = DS4_INT8_DENSE (0 or 1),
  // else off; unset in set_options = keep; switching makes states recapture their graphs.
  // Off: measured SLOWER (H100, 30-layer synthetic Flash, 1024-row chunks, same machine:
  // 2K prefill 3696 vs 4159 tok/s; a 512-row chunk's attn_out 21.1 vs 20.8 ms, attn_q 16.4 vs
  // 15.4: Q8_0's per-32-column f32 block terms keep the int8 MMAs ALU-bound), though closer to
  // the CPU act model (test_deepseek_v4_actq_cuda item 9; bench/results/session23-2026-12-06 call 3).
  std::optional<bool> int8_dense = std::nullopt;
  // decode_batch (batch.cu): sequences per batched forward at most (more run as several
  // forwards; also bounded by the chunk scratch's rows). 16 since 2026-12-05: on the H100 with the
  // 30-layer synthetic Flash (bench/results/session18-h100-2026-12-05 call 1, one process) a
  // 4-row forward took 12.42 ms and a 16-row forward 39.11 ms, so 16 streams in one forward beat
  // four 4-row forwards (49.7 ms) by 1.27x; 64 streams ran as four 16-row forwards (156.45 ms).
  // (It was 4 while a 16-row forward cost 0.80x sixteen decode steps, before the routed entry
  // stride, the one-launch stateful kernels and the Q8_0 split: cuda-batching-h200-2026-12-04g.)
  int batch_rows = 16;
  // decode_batch: the stateful kernels (KV ring, compressor / indexer lanes, indexer, attention,
  // position counters) as one launch over all the batch's sequences (kernels.h Rows::shift),
  // each row on its own state exactly as its decode step; false: one launch per sequence (the
  // bench's A/B). The same bits either way (test_deepseek_v4_batch_cuda).
  bool seq_launches = true;
  // ds4's activation quantization (Config::act_quant; act_inputs.h says which products): unset
  // at load = deepseek_v4::act_quant_for(ds4_numerics), as the CPU model (on for ds4-layout
  // files, off for HF checkpoints; DS4_ACT_QUANT=q8|f32 overrides);
  // unset in set_options = keep the current setting. Switching it makes states recapture their
  // graphs at their next forward. In tensor-core prefill chunks it quantizes only the routed
  // experts' inputs, with int8_experts, and the dense act products' inputs, with int8_dense
  // (every other product there keeps f32 x).
  std::optional<bool> act_quant = std::nullopt;
  // With act_quant: the dense act products (a decode step's gemv_act and unbatched
  // gemv_act_batched, a chunk's / batch's gemv_act_rows of the same weights; products.cu) on
  // int8 tensor cores (backend/cuda/gemv_act_mma.h), one kernel for 1..16 rows. Steps, chunks
  // and batch rows switch together, so they stay equal bit for bit; outputs move by f32
  // rounding (another order of the sum over blocks). Routed experts and o_a's groups keep
  // gemv_act. Unset at load = DS4_ACT_MMA (0 / 1) where set, else products.cu's
  // kActMmaDefault; unset in set_options = keep. Switching makes states recapture graphs.
  std::optional<bool> act_mma = std::nullopt;
};

// The first chunk size that runs on tensor cores under `o` (0: none): prefill chunks of more
// than 16 rows (chunk_rows' maximum: no verify window, DSpark K5 block or draft chain ever
// reaches it, whatever chunk_rows is set to).
inline int tensor_core_rows(const CudaModelOptions& o) {
  return o.tensor_cores && o.prefill_rows > o.chunk_rows ? kServedTensorCoreRows : 0;
}

// The options of the serving binary (ds4server): CudaModelOptions{} with prefill chunks of
// kServedPrefillRows, or tensor_cores off (and 512-row chunks) where the environment has
// DS4_CUDA_TENSOR_CORES=0 (exactness checks of the served model against a float32 reference,
// e.g. the fuzz corpus on CUDA). Another value than 0 / 1 throws InputError.
// 1024 rows since session 25 (H100, 30-layer synthetic Flash, one build: 2K / 8K prefill 3458.5 /
// 3428.2 tok/s in 512-row chunks, 4320.9 / 4248.2 in 1024; bench/results/session25-2026-12-06 call 7);
// 2048 since session 28, with the int8 experts' 4-entry kernel at two blocks per SM (H100, same
// binaries: 5148.5 / 4718.1 tok/s in 1024-row chunks, 5502.3 / 5282.3 in 2048;
// bench/results/session28-2026-12-06 call 2). Admission at load shrinks it where memory is short.
inline constexpr int kServedPrefillRows = 2048;
CudaModelOptions cuda_options_from_env();

// Default context of a CUDA state when LoadOptions::max_context is 0: every state holds its
// caches for the whole context on the device, and the engine clones states.
inline constexpr int64_t kCudaDefaultContext = 32768;

class DeepseekV4CudaModel : public Model, public DraftHead {
 public:
  DeepseekV4CudaModel(std::unique_ptr<TensorSource> src, const LoadOptions& opt, const CudaModelOptions& copt = {});
  ~DeepseekV4CudaModel() override;
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
  // batch, the window rings / lanes / attention per sequence; row i equals the state's decode
  // step bit for bit. One sequence, a draft-head state (it records head rows per forward) or a
  // state with a pending captured window takes the single-sequence step. At most
  // CudaModelOptions::batch_rows and the chunk scratch's rows (max(chunk_rows, prefill_rows), fewer
  // where they do not fit: fixed at load) per forward; more run as several.
  void decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                    std::vector<float>& logits) override;
  // decode_batch ending in each row's sampling candidates on the GPU (batch.cu,
  // cuda_decode_batch_candidates): only they, and the rows asked for, are copied back.
  void decode_batch_candidates(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                               std::span<const CandidateRequest> reqs, std::vector<SampleCandidates>& out,
                               std::vector<float>& logits, const NeedFullRow& need_full) override;
  // Batched speculative verify (verify_batch.cu): every state's verify window (1..chunk_rows
  // tokens) as one forward over the stacked rows, each state's rows and captured window bit for
  // bit its own verify_capture's. At most batch_rows states and the chunk scratch's rows per
  // forward. The fallback loop (Model::verify_batch) with the layer observer or a window
  // verify_capture would not capture.
  bool verify_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                    std::vector<float>& logits) override;

  // DraftHead (DSpark's, else ds4's MTP head; nullptr without either, see above). enable_draft
  // before the first forward, as on the CPU. MTP depth at most 16 (kMaxDraftDepth; DSpark: any
  // depth, at most 5 drafts); verify_capture takes windows of
  // up to chunk_rows tokens (false beyond: the loop re-runs the kept prefix, a counted repair).
  DraftHead* draft_head() override;
  void enable_draft(ModelState& state) const override;
  void draft(ModelState& state, int32_t next_token, int depth, std::vector<int32_t>& drafts) override;
  bool draft_picked(ModelState& state, int32_t next_token, int depth, const Pick& pick,
                    std::vector<int32_t>& drafts) override;
  // DSpark's gate (SPEC §2; MTP has no confidence head: draft()).
  void draft_gated(ModelState& state, int32_t next_token, int depth, double min_confidence,
                   std::vector<int32_t>& drafts) override;
  bool verify_capture(ModelState& trial, std::span<const int32_t> tokens, std::vector<float>& logits) override;
  void commit_prefix(ModelState& trial, int64_t keep) override;
  // Tests / bench: draft() with its logits {depth + 1, vocab} copied back (row 0 = the head's
  // prediction after the last consumed token; CPU deepseek_v4::mtp_draft_logits).
  void draft_logits(ModelState& state, int32_t next_token, int depth, std::vector<float>& logits,
                    std::vector<int32_t>& drafts);
  // Tests: the logits rows 1..depth of the last draft_picked() {depth, vocab}.
  void last_picked_logits(int depth, std::vector<float>& logits) const;
  // Tests / bench, DSpark: one K5 pass after the state's consumed tokens, `primary` the target's
  // token for the next position: logits {5, vocab} (neural + Markov bias), the 5 drafts and
  // their confidences, no gate (CPU deepseek_v4::dspark_draft_details). State unchanged.
  void dspark_draft_details(ModelState& state, int32_t primary, std::vector<float>& logits,
                            std::vector<int32_t>& drafts, std::vector<float>& confidence);

  const Config& config() const;
  // Tests: products enqueued on the act_quant path since load, by activation block (a graph
  // counts once, at its capture).
  struct ActLaunches {
    int64_t q8_0 = 0, q8_k = 0;
    int64_t int8_dense = 0;  // dense act products enqueued as grouped_mma_int8_dense (int8_dense)
  };
  ActLaunches act_launches() const;
  bool has_dspark() const;  // the draft head on the GPU is DSpark's (else MTP's, or none)
  size_t weight_bytes() const;           // device bytes of the uploaded weights
  // Weight bytes one decode token reads: dense parts of the layers, experts_used routed
  // experts per layer, HC head + lm_head (the roofline's numerator is their sum).
  struct DecodeBytes {
    size_t dense = 0, experts = 0, head = 0;
    size_t total() const { return dense + experts + head; }
  };
  DecodeBytes decode_bytes_per_token() const;
  // Weight bytes one chunk of `rows` tokens reads over one decode token's: every matrix once,
  // routed experts as the expected union of the rows' top-k sets, E (1 - (1 - k/E)^rows),
  // under uniform independent routing (the bytes floor of a verify of `rows` rows).
  double chunk_bytes_ratio(int64_t rows) const;
  // Debugging (direct launches only): called after every layer with its output HC state
  // {hc, hidden} (one token). Throws ds4::Error with graphs on.
  void set_layer_observer(LayerObserver fn);
  // Bench only (issue #23: decode speed at 32K without a 32K prefill): `state` as if
  // `position` tokens had been consumed, its caches (window ring, compressor lanes, entries)
  // random values in [-0.5, 0.5] from `seed`, so a decode step reads and selects over as many
  // rows as at that context; the tokens are not a real prefix. No draft head on the state.
  void fill_context_for_bench(ModelState& state, int64_t position, uint64_t seed = 7) const;
  // With CudaModelOptions::profile: milliseconds per op name summed since the last reset.
  const std::map<std::string, double>& op_times() const;
  // Switch graphs / profiling for later steps (states keep graphs already captured); a change
  // of act_quant, act_mma, int8_experts or of the side stream (streams, profile) makes every
  // state recapture at its next forward and drops the batch graphs. fuse_projections stays as
  // loaded (it shaped the upload).
  void set_options(const CudaModelOptions& copt);
  const CudaModelOptions& options() const;
  void reset_op_times();
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

std::unique_ptr<Model> load_cuda(const std::string& path, const LoadOptions& opt, const CudaModelOptions& copt = {});

}  // namespace ds4::deepseek_v4
