#pragma once
// The sublayers the DeepSeek V4 forward composes (internal to the family folder).
#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/hyper_connections.h"
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/operand_rounding.h"
#include "models/deepseek_v4/state.h"
#include "models/deepseek_v4/weights.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::deepseek_v4 {

struct Ctx {
  const Config& c;
  ThreadPool* pool;
  const std::vector<float>& inv_freq_main;      // sliding-only layers
  const std::vector<float>& inv_freq_compress;  // CSA / HCA layers, compressors, indexer
  // Diagnostics: the CUDA tensor-core chunk's operand rounding (operand_rounding.h); null = exact.
  const OperandRounding* rounding = nullptr;
};

// ds4 numerics (Config::ds4_numerics): FP8 round trip of a KV row's non-rope part (blocks
// of 64), Hadamard + FP4 round trip of an indexer row (128 wide, blocks of 32). Each is
// applied only where ds4's shape condition holds, so tiny models are unaffected.
void ds4_kv_storage(const Config& c, float* row, int64_t dim);
void ds4_indexer_storage(const Config& c, float* row, int64_t dim);

// Y {n, w.rows} = X {n, w.cols} W^T the way ctx computes products (operand_rounding.h product:
// ctx.rounding, then ctx.c.act_quant, else f32 matmul on ctx.pool).
void product(const Ctx& ctx, const WeightMatrix& w, const float* x, int64_t n, float* y);
// The same into a new vector (`what` names the product for the reader).
std::vector<float> project(const Ctx& ctx, const WeightMatrix& w, const float* x, int64_t n, const char* what);

// Appends T tokens (x {T, hidden}, positions p0..) to a compressor lane; emits one entry
// per closed window. overlap = CSA (width = 2 * dim). `cap` (captured verify window) gets
// the lane before and the pushed rows.
void compressor_push(const Ctx& ctx, const CompressorWeights& w, int64_t ratio, bool overlap,
                     CompressorState& s, const float* x, int64_t T, int64_t p0, LaneCapture* cap = nullptr);
// Captured commit: the lane after the first `keep` of the captured rows (pushed at p0..),
// from the capture and the entries already pooled; nothing is pooled again.
void compressor_commit(const CompressorWeights& w, int64_t ratio, bool overlap, CompressorState& s,
                       const LaneCapture& cap, int64_t keep, int64_t p0);

// Captured commit of one layer's attention state (window + lanes) to `keep` rows at p0...
void attention_commit(const Config& c, const LayerWeights& w, int64_t layer, LayerState& s, int64_t keep, int64_t p0);

// Lightning indexer: for each query t the compressed entries it may attend to (top-k of the
// causally visible ones). qr {T, q_lora} (q LoRA after its norm), x {T, hidden}.
std::vector<std::vector<int32_t>> indexer_select(const Ctx& ctx, const LayerWeights& w, int64_t ratio,
                                                 const CompressorState& index, const float* qr,
                                                 const float* x, int64_t T, int64_t p0);

// Attention sublayer: x {T, hidden} (already normed) -> out {T, hidden}; updates the state.
void attention_forward(const Ctx& ctx, const LayerWeights& w, int64_t layer, LayerState& s, const float* x,
                       int64_t T, int64_t p0, float* out);

// One sequence's rows inside a multi-sequence pass (batched decode): its layer state, the
// position of its first row and its row count.
struct SeqRows {
  LayerState* s;
  int64_t p0;
  int64_t T;
};
// Attention over several sequences' rows: the q / kv / output projections once over all
// rows; norms, rope, window, compressor lanes, indexer and attention per sequence. Every
// row's result is the one attention_forward gives that sequence alone.
void attention_forward_seqs(const Ctx& ctx, const LayerWeights& w, int64_t layer, std::span<const SeqRows> seqs,
                            const float* x, float* out);

// Grouped o LoRA: heads {T, heads * head_dim} (rope tail already rotated back) -> out {T, hidden}.
void grouped_output(const Ctx& ctx, const LayerWeights& w, const float* heads, int64_t T, float* out);

// MoE sublayer: routed experts (hash or top-k) + shared expert. x {T, hidden} -> out {T, hidden}.
void moe_forward(const Ctx& ctx, const LayerWeights& w, int64_t layer, const int32_t* tokens, const float* x,
                 int64_t T, float* out);

// One decoder layer (HC pre, attention, HC post, HC pre, MoE, HC post): x {T, hc, hidden}
// in/out at positions p0.. `layer` indexes ctx.c's per-layer schedule (model.cpp).
void decoder_layer(const Ctx& ctx, const cpu::HcShape& hc, const LayerWeights& w, int64_t layer, LayerState& s,
                   const int32_t* tokens, int64_t T, int64_t p0, std::vector<float>& x);

// The same layer over several sequences' rows (batched decode): sequence i owns the next
// seqs[i].T rows of x and tokens, at its positions p0... The HC mixes, norms, the MoE (routed
// experts + shared expert) and the attention projections run once over all rows; the
// attention's keys, compressor lanes and indexer per sequence (attention_forward_seqs; the
// compressors' and indexer's own projections are read once per sequence). Every row's
// result is the one decoder_layer gives it alone.
void decoder_layer_seqs(const Ctx& ctx, const cpu::HcShape& hc, const LayerWeights& w, int64_t layer,
                        std::span<const SeqRows> seqs, const int32_t* tokens, std::vector<float>& x);

}  // namespace ds4::deepseek_v4
