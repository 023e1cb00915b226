#pragma once
// Internal to the CUDA Qwen model: byte offsets of a state's device buffer (per-layer
// caches sized for max_ctx, and the position counter), of the model's step scratch, of the
// chunk scratch (rows of step scratch) and of a captured verify's records.
// Every piece starts 256-byte aligned (gemv reads x with 16-byte loads).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/layout.h"
#include "backend/cuda/moe_group.h"
#include "models/qwen_next/config.h"
#include "models/qwen_next/cuda/kernels.h"

namespace ds4::qwen_next::cuda {

struct LayerOffsets {
  size_t conv = 0, ssm = 0, ple_conv = 0, k = 0, v = 0, idx_raw = 0, idx_pooled = 0;
};

struct StateLayout {
  std::vector<LayerOffsets> layers;
  size_t pos = 0;  // int32 position counter
  size_t bytes = 0;
  int64_t ple_layers = 0, max_ctx = 0;
};

// The MTP draft head's part of a state (allocated by enable_draft, so AR-only states do not
// pay it). Trunk rows are kept by position: slot p % ring holds the final pre-mixer h
// {hc*d} of the token consumed at position p and that token, so with q = the head's
// position (mtp_pos) the rows q .. pos-2 pair with the tokens q+1 .. pos-1 (the pending
// pairs the head has not consumed; CPU State::pending_wide/pending_next) and slot pos-1 is
// last_wide. A push at position p needs p - mtp_pos < ring (QwenNextCudaModel::Impl::mtp_room).
inline constexpr int64_t kMtpRing = 64;
// Longest draft chain: the head's caches hold this many rows past max_ctx for the draft
// steps, which write past mtp_pos and never advance it.
inline constexpr int64_t kMtpMaxDepth = 16;

struct MtpLayout {
  LayerOffsets layer;  // the head's QSA caches, {ctx, ...} rows
  size_t pos = 0;      // int32: mtp_pos (rows the head has consumed)
  size_t draft_pos = 0;  // int32: position of the draft step running (scratch; never read after a draft)
  size_t rows = 0;     // {ring, hc*d}: trunk rows by position % ring
  size_t next = 0;     // int32 {ring}: the token consumed at that position
  int64_t ring = kMtpRing, ctx = 0;
  size_t bytes = 0;
};

inline MtpLayout mtp_layout(const Config& c, int64_t max_ctx) {
  MtpLayout m;
  m.ctx = max_ctx + kMtpMaxDepth;
  ::ds4::cuda::LayoutTaker t;
  m.pos = t.take(1);
  m.draft_pos = t.take(1);
  m.layer.k = t.take(m.ctx * c.kv_heads * c.head_dim);
  m.layer.v = t.take(m.ctx * c.kv_heads * c.head_dim);
  m.layer.idx_raw = t.take(m.ctx * c.idx_dim);
  m.layer.idx_pooled = t.take((m.ctx / c.idx_ratio + 1) * c.idx_dim);
  m.rows = t.take(m.ring * c.wide());
  m.next = t.take(m.ring);
  m.bytes = t.at;
  return m;
}

// The draft chain's own scratch (model-wide, next to ScratchLayout's; the head's layer runs
// in ScratchLayout with h = ScratchLayout::h).
struct MtpScratch {
  size_t row = 0;     // {hc*d}: the step's input row (trunk row, then the head's own output)
  size_t normed = 0;  // {hc*d}: full-width rmsnorm of row
  size_t emb = 0;     // {d}: embedding of the step's token, normed in place
  size_t femb = 0;    // {d}: fc_embedding of it
  size_t tok = 0;     // int32 {kMtpMaxDepth}: step tokens that come from the host
  size_t catch_tok = 0;  // int32: the token of the pending pair being consumed
  size_t picks = 0;   // int32 {kMtpMaxDepth, sample_reduce_words(1)}: each step's argmax record
  size_t logits = 0;  // {kMtpMaxDepth, vocab}: each step's logits row
  int64_t pick_words = 0;
  size_t bytes = 0;
};

inline MtpScratch mtp_scratch_layout(const Config& c, int64_t pick_words) {
  MtpScratch m;
  ::ds4::cuda::LayoutTaker t;
  m.row = t.take(c.wide()), m.normed = t.take(c.wide()), m.emb = t.take(c.hidden), m.femb = t.take(c.hidden);
  m.tok = t.take(kMtpMaxDepth), m.catch_tok = t.take(1);
  m.pick_words = pick_words;
  m.picks = t.take(kMtpMaxDepth * pick_words);
  m.logits = t.take(kMtpMaxDepth * c.vocab);
  m.bytes = t.at;
  return m;
}

struct ScratchLayout {
  // Step inputs: h {hc*d} then the gathered PLE rows {ple_layers, ple_stride}, copied from the
  // pinned host buffer of the same layout in one transfer of in_bytes.
  size_t h = 0, ple_emb = 0, in_bytes = 0;
  int64_t ple_emb_in = 0, ple_stride = 0;  // floats
  size_t normed, low, mix, mixed, inject, out;
  size_t raw, qkv, z, b, a, o;
  size_t qg, k, v, iqk, q, gate, keep, block_scores, att_scores, att;
  size_t router, ids, wts, sh_g, sh_u, sh_out, sg, gu, act, ey;
  size_t ple_key, ple_val, ple_gv, ple_gvn, ple_conv;
  size_t logits;
  size_t bytes = 0;
};

using ::ds4::cuda::layout_align;

inline StateLayout state_layout(const Config& c, int64_t max_ctx) {
  StateLayout s;
  s.max_ctx = max_ctx;
  ::ds4::cuda::LayoutTaker t;
  auto take = [&](int64_t floats) { return t.take(floats); };
  s.pos = take(1);
  for (int64_t l = 0; l < c.layers; ++l) {
    LayerOffsets o;
    if (c.is_linear[size_t(l)]) {
      o.conv = take((c.conv_k - 1) * c.conv_dim());
      o.ssm = take(c.v_heads * c.k_dim * c.v_dim);
    } else {
      o.k = take(max_ctx * c.kv_heads * c.head_dim);
      o.v = take(max_ctx * c.kv_heads * c.head_dim);
      o.idx_raw = take(max_ctx * c.idx_dim);
      o.idx_pooled = take((max_ctx / c.idx_ratio + 1) * c.idx_dim);
    }
    if (c.ple_index(l) >= 0) {
      o.ple_conv = take((c.ple_conv_k - 1) * c.ngram * c.wide());
      ++s.ple_layers;
    }
    s.layers.push_back(o);
  }
  s.bytes = t.at;
  return s;
}

inline ScratchLayout scratch_layout(const Config& c, int64_t max_ctx) {
  ScratchLayout s;
  ::ds4::cuda::LayoutTaker t;
  auto take = [&](int64_t floats) { return t.take(floats); };
  const int64_t W = c.wide(), d = c.hidden, C = c.conv_dim(), V = c.value_dim(), hd = c.head_dim;
  int64_t ple_layers = 0;
  for (int64_t l = 0; l < c.layers; ++l) ple_layers += c.ple_index(l) >= 0;
  s.h = take(W);
  s.ple_stride = (c.ple_dim + 63) / 64 * 64;
  s.ple_emb = take(ple_layers * s.ple_stride);
  s.ple_emb_in = int64_t(s.ple_emb / 4);
  s.in_bytes = s.ple_emb + size_t(ple_layers * s.ple_stride) * 4;
  // Outputs of one stacked projection (DProj) are consecutive floats; the first part of
  // each run is the one a later gemv reads as x (aligned).
  auto after = [](size_t off, int64_t floats) { return off + size_t(floats) * 4; };
  s.normed = take(W), s.low = take(c.hc_rank + c.hc), s.inject = after(s.low, c.hc_rank);
  s.mix = take(W), s.mixed = take(d), s.out = take(d);
  s.raw = take(C + V + 2 * c.v_heads), s.z = after(s.raw, C), s.b = after(s.z, V), s.a = after(s.b, c.v_heads);
  s.qkv = take(C), s.o = take(V);
  const int64_t kvd = c.kv_heads * hd;
  s.qg = take(c.heads * 2 * hd + 2 * kvd + (c.idx_heads + 1) * c.idx_dim);
  s.k = after(s.qg, c.heads * 2 * hd), s.v = after(s.k, kvd), s.iqk = after(s.v, kvd);
  s.q = take(c.heads * hd), s.gate = take(c.heads * hd);
  const int64_t blocks = max_ctx / std::max<int64_t>(c.idx_ratio, 1) + 1;
  s.keep = take(blocks / 4 + 1), s.block_scores = take(blocks), s.att_scores = take(qsa_attend_scratch(c.heads, hd, max_ctx));
  s.att = take(c.heads * hd);
  const int64_t S = c.shared_inter;
  s.sh_g = take(2 * S + c.experts + 1), s.sh_u = after(s.sh_g, S), s.router = after(s.sh_u, S);
  s.sg = after(s.router, c.experts);
  s.ids = take(c.top_k), s.wts = take(c.top_k), s.sh_out = take(d);
  s.gu = take(c.top_k * 2 * c.moe_inter), s.act = take(c.top_k * c.moe_inter), s.ey = take(c.top_k * d);
  s.ple_key = take(W + d), s.ple_val = after(s.ple_key, W), s.ple_gv = take(W), s.ple_gvn = take(W), s.ple_conv = take(W);
  s.logits = take(c.vocab);
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
  size_t gu = 0, act = 0, ey = 0;          // experts {rows * K, 2I}, {rows * K, I}, {rows * K, d}
  size_t experts = 0, live = 0, counts = 0, tok = 0, slot = 0;  // grouping (backend/cuda moe_group)
  size_t bytes = 0;
};

inline constexpr int64_t kGroupRows = 16;  // = ds4::cuda::kGemvMaxRows (tok/slot row stride)
// Rows of a prefill chunk at most (CudaModelOptions::prefill_rows): its routed experts split
// into entries of kGroupRows rows (backend/cuda moe_group), its positions set by one launch.
inline constexpr int64_t kMaxPrefillRows = 2048;

inline ChunkLayout chunk_layout(const Config& c, const ScratchLayout& sl, int64_t rows) {
  ChunkLayout s;
  s.rows = rows;
  s.row_bytes = sl.bytes;
  ::ds4::cuda::LayoutTaker t;
  t.at = layout_align(size_t(rows) * sl.bytes);
  const int64_t K = c.top_k, I = c.moe_inter, RK = rows * K;
  s.positions = t.take(rows);
  s.ids = t.take(RK), s.wts = t.take(RK);
  s.gu = t.take(RK * 2 * I), s.act = t.take(RK * I), s.ey = t.take(RK * c.hidden);
  // entries: one per used expert, more where an expert has more rows than the stride (sized for
  // either stride moe_group_stride picks)
  const int64_t entries = ::ds4::cuda::moe_group_capacity(rows, K, c.experts);
  s.experts = t.take(entries), s.live = t.take(1), s.counts = t.take(entries);
  s.tok = t.take(entries * kGroupRows), s.slot = t.take(entries * kGroupRows);
  s.bytes = t.at;
  return s;
}

// The records of a captured speculative verify of up to `rows` rows (model_cuda.h
// verify_capture / commit_prefix), per layer:
//   ssm       GDN recurrent state after each row {rows, v_heads, k_dim, v_dim}
//   conv      GDN conv history [state before the window {K-1, conv_dim} ; input rows {rows, conv_dim}]
//   ple_conv  PLE dilated conv history [state before {(K-1)*ngram, hc*d} ; input rows {rows, hc*d}]
// A history is laid out so that the conv state after keeping `keep` rows is one contiguous
// run: its K-1 (or (K-1)*ngram) rows starting at row `keep`.
struct CaptureOffsets {
  size_t ssm = 0, conv = 0, ple_conv = 0;
};
struct CaptureLayout {
  int64_t rows = 0;
  std::vector<CaptureOffsets> layers;
  size_t bytes = 0;
};

inline CaptureLayout capture_layout(const Config& c, int64_t rows) {
  CaptureLayout s;
  s.rows = rows;
  ::ds4::cuda::LayoutTaker t;
  for (int64_t l = 0; l < c.layers; ++l) {
    CaptureOffsets o;
    if (c.is_linear[size_t(l)]) {
      o.ssm = t.take(rows * c.v_heads * c.k_dim * c.v_dim);
      o.conv = t.take((c.conv_k - 1 + rows) * c.conv_dim());
    }
    if (c.ple_index(l) >= 0) o.ple_conv = t.take(((c.ple_conv_k - 1) * c.ngram + rows) * c.wide());
    s.layers.push_back(o);
  }
  s.bytes = t.at;
  return s;
}

}  // namespace ds4::qwen_next::cuda
