#pragma once
// Internal to the CUDA GLM 5.x model: byte offsets of a state's device buffer (per-layer
// caches sized for max_ctx, and the position counter) and of the model's step scratch.
// Every piece starts 256-byte aligned (gemv reads x with 16-byte loads).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/hyper_connections.h"
#include "backend/cuda/layout.h"
#include "backend/cuda/moe_group.h"
#include "models/glm5/config.h"

namespace ds4::glm5::cuda {

struct LayerOffsets {
  size_t conv = 0, rec = 0;                          // KDA: {K-1, 3*qkv}, {heads, hd, hd}
  size_t latent = 0, idx_keys = 0, idx_gates = 0, idx_pools = 0;  // DSA: {max_ctx, ...}
};

// The MTP draft head (mtp.cu): chains are at most this deep, so its layer's caches hold
// max_ctx + kMtpMaxDepth positions (a draft at the context's end still fits).
inline constexpr int64_t kMtpMaxDepth = 16;
// Queued (trunk row, next token) pairs the head has not consumed: a forward that would push
// past this many runs the head over the queue first (the result is the same, mtp.cu).
inline constexpr int64_t kMtpQueueChunks = 4;  // capacity = kMtpQueueChunks * max(chunk_rows, 4)

struct MtpOffsets {
  LayerOffsets layer;    // the head layer's caches (KDA or DSA with its own indexer)
  size_t pos = 0;        // int32: the head layer's own position counter
  size_t qlen = 0;       // int32: queued pairs (written by the trunk's push, host-mirrored)
  size_t last = 0;       // {hidden}: trunk normed output of the last consumed token
  size_t queue = 0;      // {qcap, hidden}: trunk rows of the queued pairs (next tokens: host)
  int64_t qcap = 0;
};

struct StateLayout {
  std::vector<LayerOffsets> layers;
  size_t pos = 0;  // int32 position counter
  size_t bytes = 0;
  int64_t max_ctx = 0, max_pools = 0;
  bool has_mtp = false;
  MtpOffsets mtp;
};

// What state_layout needs of the MTP head (kind: its layer's; qcap: queue rows; 0 = no head).
struct MtpShape {
  LayerKind kind = LayerKind::kLinear;
  int64_t qcap = 0;
};

// Column blocks of a hyper-connection fn at most (device_weights.h DHc): the mix partials
// {splits, m + 1} of hc_fused.cu (or {splits, m} of the blocks' gemv) fit in `mix`.
inline constexpr int64_t kMaxHcSplits = ds4::cuda::kHcMaxSplits;

struct ScratchLayout {
  // Step input from the pinned buffer: the streams {hc, hidden}, then (a decode batch, batch.cu)
  // the row's Rows::seq shift (int64: bytes from the first row's state buffer to its own).
  size_t x = 0, shift = 0, in_bytes = 0;
  size_t x2;                   // the other stream buffer (hc_post writes out of place)
  size_t mix, post, comb, in, y;
  size_t kraw, fa, ga, kb, kconv, kg, kgate, ko;                  // KDA
  size_t mraw, mkv, ik, igate, iw, qres, q, qlat, olat, ov, iq;   // MLA + indexer
  size_t pool_scores, keep, sel_idx, sel_count, att_scores;
  size_t gu, act, router, ids, wts, sh_out, egu, eact, ey;        // MLP / MoE
  size_t hfin, logits;
  size_t memb, mcat, mpre;  // MTP head input and HC mean
  size_t bytes = 0;
};

using ::ds4::cuda::layout_align;

// Every part gets its own slot, even an empty one (min_floats 1).
struct LayoutTaker : ::ds4::cuda::LayoutTaker {
  LayoutTaker() { min_floats = 1; }
};

// One layer's caches: KDA, or DSA with (own_indexer) or without its indexer's.
inline LayerOffsets layer_offsets(const Config& c, LayoutTaker& t, LayerKind kind, bool own_indexer, int64_t ctx,
                                  int64_t pools) {
  const int64_t qkv = c.linear_num_heads * c.linear_head_dim;
  LayerOffsets o;
  if (kind == LayerKind::kLinear) {
    o.conv = t.take((c.linear_conv_kernel_dim - 1) * 3 * qkv);
    o.rec = t.take(c.linear_num_heads * c.linear_head_dim * c.linear_head_dim);
  } else {
    o.latent = t.take(ctx * c.kv_lora_rank);
    if (own_indexer) {
      o.idx_keys = t.take(ctx * c.index_head_dim);
      o.idx_gates = t.take(ctx * c.index_head_dim);
      o.idx_pools = t.take(pools * c.index_head_dim);
    }
  }
  return o;
}

inline StateLayout state_layout(const Config& c, int64_t max_ctx, const MtpShape& mtp = {}) {
  StateLayout s;
  s.max_ctx = max_ctx;
  s.has_mtp = mtp.qcap > 0;
  // Pools of the head's longer history too (one max_pools for every indexer: the scratch).
  const int64_t head_ctx = max_ctx + (s.has_mtp ? kMtpMaxDepth : 0);
  s.max_pools = head_ctx / c.index_kpool + 1;
  LayoutTaker t;
  s.pos = t.take(1);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    s.layers.push_back(
        layer_offsets(c, t, c.layer_types[size_t(l)], !c.indexer_shared[size_t(l)], max_ctx, s.max_pools));
  if (s.has_mtp) {
    MtpOffsets& m = s.mtp;
    m.layer = layer_offsets(c, t, mtp.kind, true, head_ctx, s.max_pools);  // weights.cpp: DSA head has its indexer
    m.pos = t.take(1), m.qlen = t.take(1), m.last = t.take(c.hidden_size);
    m.queue = t.take(mtp.qcap * c.hidden_size);
    m.qcap = mtp.qcap;
  }
  s.bytes = t.at;
  return s;
}

inline ScratchLayout scratch_layout(const Config& c, int64_t max_ctx) {
  ScratchLayout s;
  LayoutTaker t;
  auto after = LayoutTaker::after;
  const int64_t H = c.hidden_size, hc = c.hc_mult, W = hc * H;
  const int64_t hd = c.linear_head_dim, nh = c.linear_num_heads, qkv = hd * nh;
  const int64_t nah = c.num_attention_heads, kvr = c.kv_lora_rank, qr = c.q_lora_rank;
  const int64_t id = c.index_head_dim, ih = c.index_n_heads;
  s.x = t.take(W), s.shift = t.take(2);
  s.in_bytes = s.shift + sizeof(int64_t);
  s.x2 = t.take(W), s.mix = t.take(kMaxHcSplits * ((2 + hc) * hc + 1)), s.post = t.take(hc), s.comb = t.take(hc * hc);
  s.in = t.take(H), s.y = t.take(H);
  // Outputs of one stacked projection are consecutive floats; the parts a later gemv reads
  // as x (f_a, g_a) need 16-byte alignment, checked at load (qkv and hd multiples of 4).
  s.kraw = t.take(3 * qkv + 2 * hd + nh), s.fa = after(s.kraw, 3 * qkv), s.ga = after(s.fa, hd), s.kb = after(s.ga, hd);
  s.kconv = t.take(3 * qkv), s.kg = t.take(qkv), s.kgate = t.take(qkv), s.ko = t.take(qkv);
  s.mraw = t.take(qr + kvr + 2 * id + ih), s.mkv = after(s.mraw, qr), s.ik = after(s.mkv, kvr);
  s.igate = after(s.ik, id), s.iw = after(s.igate, id);
  s.qres = t.take(qr), s.q = t.take(nah * c.qk_nope_head_dim), s.qlat = t.take(nah * kvr), s.olat = t.take(nah * kvr);
  s.ov = t.take(nah * c.v_head_dim), s.iq = t.take(ih * id);
  const int64_t pools = max_ctx / c.index_kpool + 1;
  // The selection: at most index_topk + kpool - 1 positions (budget pools plus the tail).
  const int64_t width = c.index_topk + c.index_kpool - 1;
  s.pool_scores = t.take(pools), s.keep = t.take(pools / 4 + 1);
  s.sel_idx = t.take(width), s.sel_count = t.take(1), s.att_scores = t.take(nah * width);
  const int64_t I = c.moe_intermediate_size, S = I * c.n_shared_experts, E = c.n_routed_experts, K = c.num_experts_per_tok;
  s.gu = t.take(std::max(2 * c.intermediate_size, 2 * S + E)), s.router = after(s.gu, 2 * S);
  s.act = t.take(std::max(c.intermediate_size, S)), s.sh_out = t.take(H);
  s.ids = t.take(K), s.wts = t.take(K);
  s.egu = t.take(K * 2 * I), s.eact = t.take(K * I), s.ey = t.take(K * H);
  s.hfin = t.take(H), s.logits = t.take(c.vocab_size);
  // MTP head input (mtp.cu): embedding row, [enorm(embed) | hnorm(prev)], the HC mean (pre-norm).
  s.memb = t.take(H), s.mcat = t.take(2 * H), s.mpre = t.take(H);
  s.bytes = t.at;
  return s;
}

// A multi-row forward (prefill chunk, speculative verify) of up to `rows` tokens: row t has
// its own copy of the step scratch at t * row_bytes (so every per-token kernel runs on row t
// unchanged, and every buffer is a strided {rows, ...} array for gemv_rows: row stride
// row_bytes / 4 floats, a multiple of 64), then the chunk-wide parts below.
struct ChunkLayout {
  int64_t rows = 0;
  size_t row_bytes = 0;
  size_t positions = 0;                    // int32 {rows}: the rows' positions (device, per replay)
  size_t ids = 0, wts = 0;                 // MoE routing {rows, K}: slot s = t * K + j
  size_t egu = 0, eact = 0, ey = 0;        // {rows * K, 2I}, {rows * K, I}, {rows * K, H}
  size_t experts = 0, live = 0, counts = 0, tok = 0, slot = 0;  // grouping (moe_group)
  // MTP draft head (mtp.cu): token ids of the head rows {max(qcap, rows) + kMtpMaxDepth + 1}
  // (from the host; a prefill chunk's pairs take up to rows), argmax results {kMtpMaxDepth, 8 words} (sample_reduce, k = 1), the head position
  // and KDA state saved across a draft chain.
  size_t mids = 0, mout = 0, mpos_save = 0, mkda_save = 0;
  size_t bytes = 0;
};

inline constexpr int64_t kGroupRows = 16;  // = ds4::cuda::kGemvMaxRows (tok/slot row stride)
// Rows of a prefill chunk at most (CudaModelOptions::prefill_rows): the chunk scratch holds a
// copy of the step scratch per row (~2 MB at full size, logits and attention scores included).
inline constexpr int64_t kMaxPrefillRows = 2048;
// Elements of the GEMMs' dequantized weight tile (f32 for TF32: 128 MiB; lm_head in ~20 pieces).
inline constexpr int64_t kMatmulTile = int64_t(32) << 20;

inline ChunkLayout chunk_layout(const Config& c, const ScratchLayout& sl, int64_t rows, int64_t mtp_qcap = 0) {
  ChunkLayout s;
  s.rows = rows;
  s.row_bytes = sl.bytes;
  LayoutTaker t;
  t.at = layout_align(size_t(rows) * sl.bytes);
  const int64_t K = c.num_experts_per_tok, I = c.moe_intermediate_size, H = c.hidden_size, RK = rows * K;
  s.positions = t.take(rows);
  s.ids = t.take(RK), s.wts = t.take(RK);
  s.egu = t.take(RK * 2 * I), s.eact = t.take(RK * I), s.ey = t.take(RK * H);
  // moe_group entries: an expert with more rows than the stride takes several; sized for either
  // stride moe_group_stride picks.
  const int64_t entries = ::ds4::cuda::moe_group_capacity(rows, K, c.n_routed_experts);
  s.experts = t.take(entries), s.live = t.take(1), s.counts = t.take(entries);
  s.tok = t.take(entries * kGroupRows), s.slot = t.take(entries * kGroupRows);
  if (mtp_qcap > 0) {
    s.mids = t.take(std::max(mtp_qcap, rows) + kMtpMaxDepth + 1), s.mout = t.take(kMtpMaxDepth * 8), s.mpos_save = t.take(1);
    const int64_t qkv = c.linear_num_heads * c.linear_head_dim, rec = c.linear_num_heads * c.linear_head_dim * c.linear_head_dim;
    s.mkda_save = t.take((c.linear_conv_kernel_dim - 1) * 3 * qkv + rec);  // conv, then rec
  }
  s.bytes = t.at;
  return s;
}

}  // namespace ds4::glm5::cuda
