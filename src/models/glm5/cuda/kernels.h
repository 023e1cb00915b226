#pragma once
// GLM 5.x Flash kernels for one decode token (the CUDA model runs every token through them;
// prefill loops tokens). Each mirrors the CPU block in src/models/glm5/*.cpp named beside
// it. All pointers are device pointers; `pos` is the device position counter (read by the
// kernels, so a captured CUDA graph replays at any position). Generic ops (gemv, rmsnorm,
// conv1d, delta rule, hyper-connections, clamped SwiGLU) come from src/backend/cuda.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/seq_shift.h"

namespace ds4::glm5::cuda {

// Several tokens in one launch (the multi-row forward, chunk.cu): token t's buffers lie
// t * stride floats after token 0's (weights shared). Default: one token. With seq
// (a decode batch, backend/cuda/seq_shift.h) the tokens are one of each of `count` sequences:
// token t's state (caches, latent) lies seq.at[t] bytes from the state the call names, and each
// token runs exactly its sequence's one-token step, all in one launch.
struct Rows {
  int64_t count = 1, stride = 0;
  ds4::cuda::SeqShift seq;
};

// ---- kda.cu (kda.cpp) ----
struct KdaShape {
  int64_t heads, head_dim;
  bool has_lower_bound;
  float lower_bound, eps;
};
// g {qkv} = f_b output -> log decay (forget_gate of kda.cpp), in place; beta {heads} =
// sigmoid(b) in place.
void kda_gates(float* g, float* beta, const float* a_log, const float* dt_bias, const KdaShape& sh, cudaStream_t s,
               const Rows& rows = {});
// o {heads, head_dim} = rmsnorm(o per head) * w * sigmoid(gate).
void kda_gated_norm(float* o, const float* gate, const float* w, const KdaShape& sh, cudaStream_t s,
                    const Rows& rows = {});

// ---- mla.cu (mla.cpp) ----
inline constexpr int64_t kMaxKvLora = 512;  // latent rows live in registers (16 floats a lane)
struct MlaShape {
  int64_t heads, kv_lora;
  int64_t width;  // max selected positions per query = index_topk + index_kpool - 1
  float scale, eps;
};
// latent[pos] {kv_lora} = rmsnorm(kv) * w: the new position's compressed KV row.
// Rows: token t's kv at t * rows.stride, its position pos[t] (one block each).
void mla_append(const float* kv, const float* w, float* latent, const int32_t* pos, const MlaShape& sh,
                cudaStream_t s, const Rows& rows = {});
// o_lat {heads, kv_lora} = softmax attention of q_lat {heads, kv_lora} over the latent rows
// sel_idx[0 .. *sel_count) (ascending positions, from indexer_select). scores {heads, width}
// scratch (left holding the probabilities). kv_lora <= kMaxKvLora.
// Rows: token t's q_lat, sel_idx, sel_count, scores and o_lat at t * rows.stride (4-byte
// elements); each token attends over its own list (grid.y / grid.z = token).
void mla_attend(const float* q_lat, const float* latent, const int32_t* sel_idx, const int32_t* sel_count,
                const MlaShape& sh, float* scores, float* o_lat, cudaStream_t s, const Rows& rows = {});
// mla_attend's weighted sum splits each token's selection into this many fixed spans, one block
// of a thread block cluster each, their sums added in span order (1: one block reads the whole
// selection). DS4_MLA_SEGMENTS (1, 2, 4 or 8; unset = 8) read on
// first use, or the setter. Any value gives decode, chunks and batches the same bits; different
// values differ in rounding.
int mla_output_segments();
void mla_output_set_segments(int segments);
// The pieces of a tensor-core chunk's attention (chunk_gemm.cu, the products as FP32 GEMMs):
// g {rows, width, kv_lora} = each token's selected latent rows in selection order, zeros past
// its count; scores {heads, width} (raw, scaled) -> probabilities over [0, count) in place.
void mla_gather(const float* latent, const int32_t* sel_idx, const int32_t* sel_count, const MlaShape& sh, float* g,
                cudaStream_t s, const Rows& rows);
// mla_attend of a tensor-core chunk's rows (one state, no seq) on tensor cores (mla_tc.cu: TF32
// products, flash style, the selected rows read in place): o_lat within TF32 rounding of
// mla_attend's. kv_lora a multiple of 16 up to kMaxKvLora (mla_attend_tc_supports). On by default
// in tensor-core chunks; DS4_MLA_TC (0 or 1) read on first use, or mla_attend_set_tc.
bool mla_attend_tc_supports(const MlaShape& sh);
void mla_attend_tc(const float* q_lat, const float* latent, const int32_t* sel_idx, const int32_t* sel_count,
                   const MlaShape& sh, float* o_lat, cudaStream_t s, const Rows& rows);
bool mla_attend_tc_on();
void mla_attend_set_tc(bool on);
// mla_attend_tc for more than 32 heads as 64-head blocks on FP16 operands (backend/cuda/flash_f16.cuh:
// each selected latent row read once per token; the same 10-bit mantissa as TF32, nearest even;
// FP16's range) where q's rows are 16-byte aligned: DS4_MLA_TC_F16 (0 or 1; unset = 1) read on first
// use, or mla_attend_set_tc_f16. Not thread safe against launches in flight on other threads.
void mla_attend_set_tc_f16(bool on);
bool mla_attend_tc_f16();
// Whether mla_attend_tc(q_lat, ..., sh, ..., rows) takes the FP16 form now (the setting, the heads, q's alignment).
bool mla_attend_tc_takes_f16(const float* q_lat, const MlaShape& sh, const Rows& rows);
void mla_softmax(const int32_t* sel_count, const MlaShape& sh, float* scores, cudaStream_t s, const Rows& rows);
// mla_attend's first and last launches (scores {heads, width}; the weighted sum of the rows by
// the probabilities left in scores), for the decode step's per-op profile.
void mla_scores(const float* q_lat, const float* latent, const int32_t* sel_idx, const int32_t* sel_count,
                const MlaShape& sh, float* scores, cudaStream_t s, const Rows& rows = {});
void mla_output(const float* probs, const float* latent, const int32_t* sel_idx, const int32_t* sel_count,
                const MlaShape& sh, float* o_lat, cudaStream_t s, const Rows& rows = {});

// ---- indexer.cu (indexer.cpp) ----
struct IndexerShape {
  int64_t heads, dim, kpool, budget, max_pools;
};
struct IndexerCache {
  float* keys;   // {max_ctx, dim}: LayerNorm(wk x)
  float* gates;  // {max_ctx, dim}: compress_gate x
  float* pools;  // {max_pools, dim}: finished pool keys
};
// Appends the new position's key (LayerNorm with w, b; eps 1e-6) and gate at pos, and
// finishes the pool that position completes (softmax over the pool of gate + ape per channel).
// Rows: token t's k and gate at t * rows.stride, position pos[t]; one block appends the
// tokens in order (a pool a token completes may hold keys of the tokens before it).
void indexer_append(const float* k, const float* gate, const float* norm_w, const float* norm_b, const float* ape,
                    const IndexerCache& c, const IndexerShape& sh, const int32_t* pos, cudaStream_t s,
                    const Rows& rows = {});
// The positions the query at pos attends to, ascending: every complete pool while they fit
// the budget, else the top `budget` pools by the weighted ReLU score (ties: lower index),
// then the incomplete tail pool. sel_idx {budget * kpool + kpool - 1}, sel_count {1}.
// q {heads, dim}, w {heads} (weights_proj x); scores {max_pools}, keep {max_pools} scratch.
// Rows: token t at position pos[t], its q, w, scores, keep, sel_idx, sel_count at
// t * rows.stride 4-byte elements (grid.y = token). Every token's key must be appended
// first: token t reads only pools complete at pos[t], which later tokens do not touch.
void indexer_select(const float* q, const float* w, const IndexerCache& c, const IndexerShape& sh,
                    const int32_t* pos, float* scores, uint8_t* keep, int32_t* sel_idx, int32_t* sel_count,
                    cudaStream_t s, const Rows& rows = {});

// ---- moe.cu (moe.cpp) ----
struct RouteShape {
  int64_t experts, k;
  bool norm_topk;
  float scaling;
  int64_t groups = 1, topk_groups = 1;  // n_group / topk_group
};
// Sigmoid scores, top-k of score + bias (ties: lower index), weights = scores normalized
// (over the top-k, in rank order) times scaling; ids written in ascending expert order.
// With groups > topk_groups the top-k is taken over the experts of the topk_groups groups
// with the best sum of their two best choices (ties: lower group index), as on the CPU.
// Rows: token t's logits at t * rows.stride; its ids / weights at t * k.
void moe_route(const float* logits, const float* bias, const RouteShape& sh, int32_t* ids, float* weights,
               cudaStream_t s, const Rows& rows = {});
// out {d} = sh {d} + sum_j w[j] y[j] (j in ascending expert order).
// Rows: token t's y at t * k * d, w at t * k, sh and out at t * rows.stride.
void moe_combine(const float* y, const float* w, int64_t k, const float* sh, int64_t d, float* out, cudaStream_t s,
                 const Rows& rows = {});

// Multi-row MoE: the chunk's (token, expert) pairs are grouped per expert by
// backend/cuda/moe_group.h (shared with DeepSeek V4).

// ---- head.cu (layer.cpp hc_mean) ----
// out {hidden} = rmsnorm(mean over the n streams of x {n, hidden}) * norm: the final collapse.
// Rows: token t's x and out at t * rows.stride (one block each).
void hc_mean_norm(const float* x, int64_t n, int64_t hidden, const float* norm, float eps, float* out, cudaStream_t s,
                  const Rows& rows = {});
// out {hidden} = mean over the n streams of x, no norm (the MTP head's pre-norm output).
void hc_mean(const float* x, int64_t n, int64_t hidden, float* out, cudaStream_t s, const Rows& rows = {});

}  // namespace ds4::glm5::cuda
