#pragma once
// Internal to the CUDA DeepSeek V4 model: byte offsets of a state's device buffer (per layer
// the sliding-window ring, the compressor lanes and their entries sized for max_ctx, and the
// position counter) and of the model's step scratch. Every piece starts 256-byte aligned.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/cuda/gemv.h"
#include "backend/cuda/layout.h"
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/cuda/device_weights.h"
#include "models/deepseek_v4/cuda/kernels.h"

namespace ds4::deepseek_v4::cuda {

// One compressor lane (CPU: CompressorState). The open window's rows sit at slot pos % ratio.
struct LaneOffsets {
  size_t pend_kv = 0, pend_gate = 0;  // {ratio, width}; the gate already has the position bias
  size_t prev_kv = 0, prev_gate = 0;  // {ratio, dim}: Ca half of the last closed window (CSA)
  size_t entries = 0;                 // {max_ctx / ratio + 1, dim}
};
struct LayerOffsets {
  size_t window = 0;  // {ring_rows, head_dim}: rope'd KV rows, row of position p at slot p % ring_rows
  LaneOffsets comp, index;
};
struct StateLayout {
  std::vector<LayerOffsets> layers;
  size_t pos = 0;  // int32 position counter
  size_t bytes = 0;
  int64_t max_ctx = 0;
  int64_t ring_rows = 0;  // window + kRingSlack (kernels.h: a chunk appends before it attends)
};

struct ScratchLayout {
  // Step inputs, copied from the pinned host buffer of the same layout in one transfer:
  // the token id (int32, for hash routing) and its embedding row {hidden}.
  size_t tok = 0, emb = 0, in_bytes = 0;
  size_t xa, xb, mix, post, comb, col, y;  // HC streams {hc, hidden} x2, the HC mix and split
  // ain: outputs of DLayer::attn_in back to back [qr | kv | comp kv | comp gate | index kv |
  // index gate | index head weights]; min: of DLayer::moe_in [sh gate | sh up | router].
  size_t ain, q, heads, low;                      // attention
  size_t iq, iscores, sel, nsel;                  // indexer
  size_t part, part_ml;                           // attention partials (kernels.h attend)
  size_t min, ids, wts, egu, eact, ey, sh;        // MoE
  size_t hout, logits;
  size_t bytes = 0;
  int64_t max_rows = 0;     // keys one query can see: window + compressed entries
  int64_t max_entries = 0;  // compressed entries of the densest indexer lane
};

using ::ds4::cuda::layout_align;

// Rows of a multi-row chunk at most: gemv_rows' limit, and the ring's slack (kernels.h).
inline constexpr int64_t kMaxChunkRows = 16;
static_assert(kMaxChunkRows == ::ds4::cuda::kGemvMaxRows, "moe_group's tok/slot stride is gemv_rows' row limit");
static_assert(kMaxChunkRows <= kRingSlack + 1, "a chunk's later rows would overwrite an earlier row's window");

inline int64_t lane_entries(int64_t max_ctx, int64_t ratio) { return max_ctx / ratio + 1; }

inline StateLayout state_layout(const Config& c, int64_t max_ctx) {
  StateLayout s;
  s.max_ctx = max_ctx;
  ::ds4::cuda::LayoutTaker t;
  auto take = [&](int64_t floats) { return t.take(floats); };
  auto lane = [&](int64_t ratio, int64_t dim, int64_t width) {
    LaneOffsets o;
    o.pend_kv = take(ratio * width), o.pend_gate = take(ratio * width);
    o.prev_kv = take(ratio * dim), o.prev_gate = take(ratio * dim);
    o.entries = take(lane_entries(max_ctx, ratio) * dim);
    return o;
  };
  s.pos = take(1);
  s.ring_rows = c.window + kRingSlack;
  for (int64_t l = 0; l < c.layers; ++l) {
    LayerOffsets o;
    o.window = take(s.ring_rows * c.head_dim);
    const int64_t ratio = c.ratio(l);
    if (ratio > 0) {
      const bool csa = c.attn_types[size_t(l)] == AttnType::kCompressedSparse;
      o.comp = lane(ratio, c.head_dim, csa ? 2 * c.head_dim : c.head_dim);
      if (csa) o.index = lane(ratio, c.index_dim, 2 * c.index_dim);
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
  const int64_t H = c.hidden, n = c.hc, hd = c.head_dim, K = c.experts_used, F = c.expert_ff;
  s.tok = take(1), s.emb = take(H);
  s.in_bytes = s.emb + size_t(H) * 4;
  s.xa = take(n * H), s.xb = take(n * H), s.mix = take(kMaxHcSplits * (2 + n) * n);
  s.post = take(n), s.comb = take(n * n), s.col = take(H), s.y = take(H);
  s.ain = take(c.q_lora + hd + 4 * hd + 4 * c.index_dim + c.index_heads);
  s.q = take(c.heads * hd), s.heads = take(c.heads * hd);
  s.low = take(c.o_groups * c.o_lora);
  int64_t comp_rows = 0;
  for (int64_t l = 0; l < c.layers; ++l) {
    const int64_t ratio = c.ratio(l);
    if (ratio <= 0) continue;
    const bool csa = c.attn_types[size_t(l)] == AttnType::kCompressedSparse;
    comp_rows = std::max(comp_rows, csa ? c.index_topk : lane_entries(max_ctx, ratio));
    if (csa) s.max_entries = std::max(s.max_entries, lane_entries(max_ctx, ratio));
  }
  s.max_rows = c.window + comp_rows;
  s.iq = take(c.index_heads * c.index_dim);
  s.iscores = take(std::max<int64_t>(s.max_entries, 1)), s.sel = take(std::max<int64_t>(c.index_topk, 1));
  s.nsel = take(1);
  const int64_t chunks = attend_chunks(s.max_rows);
  s.part = take(chunks * c.heads * hd), s.part_ml = take(chunks * c.heads * 2);
  s.min = take(2 * F + c.experts), s.ids = take(K), s.wts = take(K), s.sh = take(H);
  s.egu = take(K * 2 * F), s.eact = take(K * F), s.ey = take(K * H);
  s.hout = take(H), s.logits = take(c.vocab);
  s.bytes = t.at;
  return s;
}

// A multi-row forward (prefill chunk, speculative verify) of up to `rows` tokens: row t has
// its own copy of the step scratch at t * row_bytes (every per-token buffer becomes a strided
// {rows, ...} array for gemv_rows and the Rows kernels: row stride row_bytes / 4 floats, a
// multiple of 64), then the chunk-wide MoE buffers below (the experts' rows are grouped
// across tokens, so they are packed, not per row).
struct ChunkLayout {
  int64_t rows = 0;
  size_t row_bytes = 0;
  size_t ids = 0, wts = 0;                 // routing {rows, K}: slot s = t * K + j
  size_t egu = 0, eact = 0, ey = 0;        // {rows * K, 2F}, {rows * K, F}, {rows * K, H}
  size_t experts = 0, live = 0, counts = 0, tok = 0, slot = 0;  // backend/cuda moe_group
  size_t bytes = 0;
};

inline ChunkLayout chunk_layout(const Config& c, const ScratchLayout& sl, int64_t rows) {
  ChunkLayout s;
  s.rows = rows;
  s.row_bytes = sl.bytes;
  ::ds4::cuda::LayoutTaker t;
  t.at = layout_align(size_t(rows) * sl.bytes);
  const int64_t K = c.experts_used, F = c.expert_ff, H = c.hidden, RK = rows * K;
  s.ids = t.take(RK), s.wts = t.take(RK);
  s.egu = t.take(RK * 2 * F), s.eact = t.take(RK * F), s.ey = t.take(RK * H);
  s.experts = t.take(RK), s.live = t.take(1), s.counts = t.take(RK);
  s.tok = t.take(RK * kMaxChunkRows), s.slot = t.take(RK * kMaxChunkRows);
  s.bytes = t.at;
  return s;
}

}  // namespace ds4::deepseek_v4::cuda
