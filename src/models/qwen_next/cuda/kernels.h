#pragma once
// Qwen3.8 Flash Next kernels for one decode token, and for the rows of a chunk (prefill
// chunk, speculative verify: chunk.cu). Each mirrors the CPU block in
// src/models/qwen_next/*.cpp named beside it. All pointers are device pointers; `pos` is the
// device position counter (read by the kernels, so a captured CUDA graph replays at any
// position), or for rows the device array {rows} of the rows' positions.
// Norm weights arrive with their offset already applied (1 + w for zero-centered ones).
// `rows`: the same kernel over rows.count rows in one launch, row t's buffers at t * stride
// floats after row 0's (every row in its own copy of the step scratch); each row does the
// decode step's arithmetic exactly, so the default (one row) is the decode step itself.
#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::qwen_next::cuda {

struct Rows {
  int64_t count = 1, stride = 0;  // stride in floats
};

// ---- hyper.cu (hyper.cpp) ----
// normed {hc*d} = per-stream rmsnorm of h with w {hc*d}.
void hc_norm(const float* h, const float* w, int64_t hc, int64_t d, float eps, float* normed, cudaStream_t s,
             const Rows& rows = {});
// low {r} = silu(low / hc) in place.
void hc_low_act(float* low, int64_t r, int64_t hc, cudaStream_t s, const Rows& rows = {});
// mixed {d} = mean_k sigmoid(mix[k]) * normed[k]; inject {hc} (optional) = 2 sigmoid(inject / hc).
void hc_combine(const float* mix, const float* normed, int64_t hc, int64_t d, float* mixed, float* inject,
                cudaStream_t s, const Rows& rows = {});
// h[k*d + i] += out[i] * inject[k].
void hc_write(float* h, const float* out, const float* inject, int64_t hc, int64_t d, cudaStream_t s,
              const Rows& rows = {});
// h {hc*d} = x {d} repeated in every stream.
void hc_broadcast(const float* x, int64_t hc, int64_t d, float* h, cudaStream_t s);

// ---- gdn.cu (gdn.cpp) ----
struct GdnShape {
  int64_t k_heads, v_heads, k_dim, v_dim;
  float eps;
  bool gate_sigmoid;
};
// qkv {conv_dim} after conv+silu: l2-normalize q and k heads, scale q; beta {vh} = sigmoid(b),
// g {vh} = -exp(a_log) softplus(a + dt_bias) (in place over b and a).
void gdn_prep(float* qkv, float* b, float* a, const float* a_log, const float* dt_bias, const GdnShape& g,
              cudaStream_t s, const Rows& rows = {});
// Decode step: conv1d_step_f32(raw -> qkv, silu, dilation 1) + gdn_prep in one launch, same
// bits; raw {conv_dim} the in-projection's qkv part, b/a as gdn_prep. Needs k_dim <= 256.
bool gdn_conv_prep_fusable(const GdnShape& g);
void gdn_conv_prep(const float* raw, const float* conv_w, float* conv_state, int64_t conv_k, float* qkv, float* b,
                   float* a, const float* a_log, const float* dt_bias, const GdnShape& g, cudaStream_t s);
// One step of the gated delta rule per value head; S {vh, k_dim, v_dim}; o {vh * v_dim}.
// Rows run in order inside one launch; `states` (optional, a speculative verify's records)
// receives S after each row {rows, vh, k_dim, v_dim}.
void gdn_recurrent(const float* qkv, const float* g, const float* beta, float* S, float* o, const GdnShape& sh,
                   cudaStream_t s, const Rows& rows = {}, float* states = nullptr);
// o = rmsnorm(o per head) * w * act(z), act sigmoid or silu.
void gdn_gated_norm(float* o, const float* z, const float* w, const GdnShape& g, cudaStream_t s,
                    const Rows& rows = {});

// ---- qsa.cu (qsa.cpp) ----
// qsa_attend splits each row's keys into this many position ranges (flash decoding).
inline constexpr int kQsaSplits = 32;
// Floats of qsa_attend's scores scratch per row: the old per-key scores {heads, max_ctx} (head
// dims over 256) or the splits' partials {kQsaSplits, heads, hd + 2}, whichever is larger.
inline int64_t qsa_attend_scratch(int64_t heads, int64_t head_dim, int64_t max_ctx) {
  const int64_t per_head = max_ctx > kQsaSplits * (head_dim + 2) ? max_ctx : kQsaSplits * (head_dim + 2);
  return heads * per_head;
}
struct QsaShape {
  int64_t heads, kv_heads, head_dim, rot_dim;
  int64_t idx_heads, idx_dim, idx_budget, idx_ratio;
  int64_t max_ctx;
  float eps;
  const float* inv_freq;  // device {rot_dim / 2}
};
struct QsaCache {
  float* k;           // {max_ctx, kv_heads*hd}
  float* v;           // {max_ctx, kv_heads*hd}
  float* idx_raw;     // {max_ctx, idx_dim}
  float* idx_pooled;  // {max_ctx / ratio, idx_dim}
};
struct QsaNorms {
  const float *q, *k, *idx_q, *idx_k;
};
// qg {heads, 2*hd} -> q {heads, hd} normed + roped, gate {heads, hd}; k, v -> cache at pos;
// iqk {(idx_heads+1), idx_dim}: queries normed + roped in place, the key into idx_raw; pools
// the block the new row completes. Rows: every row appends first, then (second launch) each
// row pools the block it completes, so a pool never reads a raw key not yet written.
void qsa_prep(const float* qg, const float* k, const float* v, float* iqk, const QsaNorms& n, const QsaCache& c,
              const QsaShape& sh, const int32_t* pos, float* q, float* gate, cudaStream_t s, const Rows& rows = {});
// Indexer selection for the query at pos: keep {max_ctx / ratio} = 1 for kept blocks
// (only blocks complete at pos: (pos + 1) / ratio of them). keep is a byte array inside
// the float row scratch (row t's at t * stride * 4 bytes).
void qsa_select(const float* iqk, const QsaCache& c, const QsaShape& sh, const int32_t* pos, float* scores,
                uint8_t* keep, cudaStream_t s, const Rows& rows = {});
// qsa_select's two launches (the decode step times them apart): the block scores, then the kept set.
void qsa_select_scores(const float* iqk, const QsaCache& c, const QsaShape& sh, const int32_t* pos, float* scores,
                       cudaStream_t s, const Rows& rows = {});
void qsa_select_keep(const QsaShape& sh, const int32_t* pos, const float* scores, uint8_t* keep, cudaStream_t s,
                     const Rows& rows = {});
// att {heads, hd} = softmax attention over the selected keys (positions <= pos), times sigmoid(gate).
// scores: scratch of qsa_attend_scratch floats per row (the splits' partial outputs).
// many_rows: a tensor-core prefill chunk, whose rows may differ from decode steps in summation
// order (one block per KV head and row); false keeps the decode step's kernel for every row.
void qsa_attend(const float* q, const float* gate, const QsaCache& c, const QsaShape& sh, const int32_t* pos,
                const uint8_t* keep, float* scores, float* att, cudaStream_t s, const Rows& rows = {},
                bool many_rows = false);
// many_rows on tensor cores (qsa_tc.cu: TF32 products, flash style, the split kernel's keys and
// partials) where the shape fits (<= 16 query heads per KV head, head_dim a multiple of 8 up to
// 256); off: the FP32 group kernel. DS4_QSA_TC (0 or 1; unset = on) is read on first use.
void qsa_attend_set_tc(bool on);
// The tensor-core form's multi-row blocks (4 consecutive rows of a chunk per block sharing each key /
// value tile, where all 4 are within the index budget; the others keep one block per row): within
// rounding of the single-row blocks. DS4_QSA_TC_ROWS (0 or 1; unset = 0: written in session 29,
// unrun) is read on first use.
void qsa_attend_set_tc_rows(bool on);

// ---- moe.cu (moe.cpp) ----
// Router softmax + top-k (ties: lower index), ids ascending, weights (normalized when norm).
// Rows: logits at rows.stride, ids and weights packed {rows, k}.
// shared_gu (one row only): also moe_swiglu(shared_gu, 1, shared_inter, shared_gu) in the launch.
void moe_route(const float* logits, int64_t experts, int64_t k, bool norm, int32_t* ids, float* weights,
               cudaStream_t s, const Rows& rows = {}, float* shared_gu = nullptr, int64_t shared_inter = 0);
// act {k, I} = silu(gu[:, :I]) * gu[:, I:] for gu {k, 2I}; row strides (floats, 0: packed
// 2I and I) let it run over the chunk's row scratches, act may alias gu's gate half.
void moe_swiglu(const float* gu, int64_t k, int64_t inter, float* act, cudaStream_t s, int64_t gu_stride = 0,
                int64_t act_stride = 0);
// out {d} = sum_j w[j] y[j] (ascending expert order) + sh * sigmoid(sg[0]).
// Rows: y {rows, k, d} and w {rows, k} packed; sh, sg, out at rows.stride.
void moe_combine(const float* y, const float* w, int64_t k, const float* sh, const float* sg, int64_t d,
                 float* out, cudaStream_t s, const Rows& rows = {});

// moe_combine (one row) followed by hc_write(h, out, inject) in one launch, same bits.
void moe_combine_write(const float* y, const float* w, int64_t k, const float* sh, const float* sg, int64_t d,
                       float* out, float* h, const float* inject, int64_t hc, cudaStream_t s);

// ---- ple.cu (ple.cpp) ----
// key {hc*d}, val {d}, h {hc*d} -> gv {hc*d} (gated value) and gvn = rmsnorm(gv) (norm_conv).
void ple_gate(const float* key, const float* val, const float* h, const float* norm_key, const float* norm_query,
              const float* norm_conv, int64_t hc, int64_t d, float eps, float* gv, float* gvn, cudaStream_t s,
              const Rows& rows = {});
// h += gv + conv (conv already silu'd).
void ple_add(float* h, const float* gv, const float* conv, int64_t n, cudaStream_t s, const Rows& rows = {});

// ---- mtp_kernels.cu (forward.cpp: the MTP head's input rows, mtp_prepare) ----
// The trunk-row ring of a state (step_layout.h MtpLayout): rows {ring, W}, next {ring}.
// The consumed rows of positions first .. first+count-1 (a decode step: one; a chunk: its
// rows, row t's h at h + t * h_stride floats): rows[(first + t) % ring] = h_t {W},
// next[(first + t) % ring] = token[t]. The tokens travel by value (the push is launched
// outside the captured graphs, after the step or chunk).
inline constexpr int kRingPushMax = 16;  // = the chunk's most rows (ds4::cuda::kGemvMaxRows)
struct RingPush {
  int64_t first = 0;
  int32_t count = 0;
  int32_t token[kRingPushMax] = {};
};
void mtp_ring_push(const float* h, int64_t h_stride, float* rows, int32_t* next, int64_t W, int64_t ring,
                   const RingPush& p, cudaStream_t s);
// With q = *pos + row_off (a device counter, so a captured graph replays at any position):
// row_out {W} = rows[q mod ring]; tok_out (optional) = next[(q + 1) mod ring], the token
// that follows row q.
void mtp_ring_read(const float* rows, const int32_t* next, int64_t ring, int64_t W, const int32_t* pos,
                   int32_t row_off, float* row_out, int32_t* tok_out, cudaStream_t s);
// h[k*d + i] += x[i] for every stream k (the embedding term of mtp_prepare).
void mtp_add_streams(float* h, const float* x, int64_t hc, int64_t d, cudaStream_t s);

}  // namespace ds4::qwen_next::cuda
