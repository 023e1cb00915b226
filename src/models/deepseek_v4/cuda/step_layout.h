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
#include "backend/cuda/moe_group.h"
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
  // The trunk's layers, then (with the MTP head on the GPU) the head's layer at index
  // c.layers: a window ring only (a sliding layer).
  std::vector<LayerOffsets> layers;
  size_t mtp_y = 0;  // {hc, hidden}: the head's output HC state for the last consumed token
  // DSpark (dspark.cu): per stage the rope'd K/V rows of main_q, position-indexed like the
  // trunk's window ring ({ring_rows, head_dim}, position p at slot p % ring_rows); the K5 pass
  // reads the last min(pos, window) positions (= the CPU's dspark_n, since the drafter is on
  // from position 0 and every forward records), so no row count is stored.
  std::vector<size_t> dspark_ring;
  size_t pos = 0;  // int32 position counter
  size_t bytes = 0;
  int64_t max_ctx = 0;
  int64_t ring_rows = 0;  // window + kRingSlack (kernels.h: a chunk appends before it attends)
};

struct ScratchLayout {
  // Step inputs, copied from the pinned host buffer of the same layout in one transfer:
  // the token id (int32, for hash routing), in a decode batch the row's Rows::shift (int64:
  // bytes from row 0's state buffer to its own; batch.cu writes it), and its embedding row {hidden}.
  size_t tok = 0, shift = 0, emb = 0, in_bytes = 0;
  // HC streams {hc, hidden} x2, the HC mix partials ({splits, mix + 1}: hc_fused.cu's sum of
  // squares after each split's mix), the split (post, comb), the collapsed input, the block's output
  size_t xa, xb, mix, post, comb, col, y;
  // ain: outputs of DLayer::attn_in back to back [qr | kv | comp kv | comp gate | index kv |
  // index gate | index head weights]; min: of DLayer::moe_in [sh gate | sh up | router].
  size_t ain, q, heads, low;                      // attention
  size_t iq, iscores, sel, nsel;                  // indexer
  size_t part, part_ml;                           // attention partials (kernels.h attend)
  size_t min, ids, wts, egu, eact, ey, sh;        // MoE
  size_t hout, logits;
  size_t me, mep;  // MTP head: normed embedding {hidden}, its e_proj {hidden}
  // DSpark record: the tap layers' HC means {taps, hidden} (written as the tap layers run),
  // main_q {hidden}, the stages' ring rows {stages, head_dim}.
  size_t taps, dmain, dkv;
  size_t bytes = 0;
  int64_t max_rows = 0;     // keys one query can see: window + compressed entries
  int64_t max_entries = 0;  // compressed entries of the densest indexer lane
};

using ::ds4::cuda::layout_align;

// DSpark (MTPLX): the K5 block [primary, noise x 4] through three stages.
inline constexpr int64_t kDsparkBlock = 5;
inline constexpr int64_t kDsparkStages = 3;

// Rows of a verify / exact chunk at most (CudaModelOptions::chunk_rows), and of a prefill chunk
// (prefill_rows); both within the ring's slack (kernels.h). moe_group's tok/slot stride is
// gemv_rows' row limit: a prefill chunk's expert with more rows takes several entries.
inline constexpr int64_t kMaxChunkRows = 16;
inline constexpr int64_t kMaxPrefillRows = 2048;
static_assert(kMaxChunkRows <= ::ds4::cuda::kGemvMaxRows, "a verify chunk's experts are one gemv_rows entry each");
static_assert(kMaxPrefillRows <= kRingSlack + 1, "a chunk's later rows would overwrite an earlier row's window");

inline int64_t lane_entries(int64_t max_ctx, int64_t ratio) { return max_ctx / ratio + 1; }

inline StateLayout state_layout(const Config& c, int64_t max_ctx, bool mtp = false, int64_t dspark_stages = 0) {
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
  if (mtp) {
    LayerOffsets o;
    o.window = take(s.ring_rows * c.head_dim);
    s.layers.push_back(o);
    s.mtp_y = take(c.hc * c.hidden);
  }
  for (int64_t i = 0; i < dspark_stages; ++i) s.dspark_ring.push_back(take(s.ring_rows * c.head_dim));
  s.bytes = t.at;
  return s;
}

inline ScratchLayout scratch_layout(const Config& c, int64_t max_ctx) {
  ScratchLayout s;
  ::ds4::cuda::LayoutTaker t;
  auto take = [&](int64_t floats) { return t.take(floats); };
  const int64_t H = c.hidden, n = c.hc, hd = c.head_dim, K = c.experts_used, F = c.expert_ff;
  s.tok = take(1), s.shift = take(2), s.emb = take(H);
  s.in_bytes = s.emb + size_t(H) * 4;
  s.xa = take(n * H), s.xb = take(n * H), s.mix = take(kMaxHcSplits * ((2 + n) * n + 1));
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
  s.me = take(H), s.mep = take(H);
  // (sized whether or not the checkpoint has DSpark: a few rows of floats)
  s.taps = take(std::max<int64_t>(int64_t(c.dspark_taps.size()), 1) * H), s.dmain = take(H);
  s.dkv = take(kDsparkStages * hd);
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
  int64_t entries = 0;  // moe_group entries at most (experts split past kGemvMaxRows rows)
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
  s.entries = ::ds4::cuda::moe_group_capacity(rows, K, c.experts);  // either stride (moe_group_stride)
  s.experts = t.take(s.entries), s.live = t.take(1), s.counts = t.take(s.entries);
  s.tok = t.take(s.entries * ::ds4::cuda::kGemvMaxRows), s.slot = t.take(s.entries * ::ds4::cuda::kGemvMaxRows);
  s.bytes = t.at;
  return s;
}

// The draft buffers (mtp.cu: the MTP chain; dspark.cu: the K5 pass's ids, confidences and Markov
// rows; one per model: a draft runs to its end before the
// next forward). Depth is at most kMaxDraftDepth (verify rows = depth + 1 <= kMaxChunkRows + 1).
inline constexpr int64_t kMaxDraftDepth = 16;
inline constexpr int64_t kDraftSlotWords = 8;  // sample_reduce_words(1): {argmax, ...}
// The words after the slots (device and pinned host alike): DSpark's confidences {5} (f32
// bits), so ids and confidences come back in one copy; then the host's position word
// (commit_prefix's counter upload).
inline constexpr int64_t kDraftConfWord = (kMaxDraftDepth + 1) * kDraftSlotWords;
inline constexpr int64_t kDraftPosWord = kDraftConfWord + kDsparkBlock;
inline constexpr int64_t kDraftHostWords = kDraftPosWord + 1;
struct DraftLayout {
  size_t ring = 0;    // {ring_rows, head_dim}: the head's window ring before the chain
  size_t pos = 0;     // int32: the position counter before the chain
  size_t slots = 0;   // int32 {kMaxDraftDepth + 1, kDraftSlotWords}: slot k word 0 = token k
                      // (slot 0 = next_token from the host, slot k = argmax of logits row k;
                      // DSpark: slot r + 1 = draft r), then the confidences (kDraftConfWord)
  size_t noise = 0;   // int32: DSpark's noise token (block rows 1..4), set at load
  size_t mk = 0, mbias = 0;  // DSpark's Markov chain: markov_w1 row {rank}, markov_w2 of it {vocab}
  size_t logits = 0;  // {kMaxDraftDepth + 1, vocab}: row 0 from mtp_y, row k after draft k-1
  size_t bytes = 0;
};

inline DraftLayout draft_layout(const Config& c, const StateLayout& lay, int64_t markov_rank = 0) {
  DraftLayout d;
  ::ds4::cuda::LayoutTaker t;
  d.ring = t.take(lay.ring_rows * c.head_dim);
  d.pos = t.take(1);
  d.slots = t.take(kDraftPosWord);
  d.noise = t.take(1);
  d.mk = t.take(std::max<int64_t>(markov_rank, 1)), d.mbias = t.take(markov_rank > 0 ? c.vocab : 1);
  d.logits = t.take((kMaxDraftDepth + 1) * c.vocab);
  d.bytes = t.at;
  return d;
}

// A captured verify window's records (spec_commit.cu; one buffer per state, CudaState::cap_buf,
// for its pending verify_capture): per compressor lane its undo log (LaneArgs::undo_*) for up to `rows` rows,
// and the MTP head's output rows {rows, hc, hidden}. The window ring needs no record: it has
// kRingSlack spare slots, so a dropped row (at most kMaxChunkRows - 1 of them) only
// overwrites positions no later row attends to, and its own slot is rewritten before it is read.
struct CaptureLayout {
  std::vector<LaneUndo> lanes;
  std::vector<int> comp_lane, index_lane;  // per trunk layer: index into lanes, -1 = none
  size_t mtp_y = 0;
  size_t bytes = 0;
  int64_t rows = 0;
};

inline CaptureLayout capture_layout(const Config& c, const StateLayout& lay, int64_t rows) {
  CaptureLayout cap;
  cap.rows = rows;
  ::ds4::cuda::LayoutTaker t;
  auto lane = [&](const LaneOffsets& o, int64_t ratio, int64_t dim, int64_t width, bool overlap) {
    LaneUndo u{o.pend_kv, o.pend_gate, o.prev_kv, o.prev_gate, 0, 0, 0, 0, ratio, width, dim, overlap ? 1 : 0};
    u.undo_kv = t.take(rows * width), u.undo_gate = t.take(rows * width);
    if (overlap) u.undo_prev_kv = t.take(rows * ratio * dim), u.undo_prev_gate = t.take(rows * ratio * dim);
    cap.lanes.push_back(u);
    return int(cap.lanes.size()) - 1;
  };
  for (int64_t l = 0; l < c.layers; ++l) {
    const int64_t ratio = c.ratio(l);
    const LayerOffsets& o = lay.layers[size_t(l)];
    const bool csa = ratio > 0 && c.attn_types[size_t(l)] == AttnType::kCompressedSparse;
    cap.comp_lane.push_back(ratio > 0 ? lane(o.comp, ratio, c.head_dim, csa ? 2 * c.head_dim : c.head_dim, csa) : -1);
    cap.index_lane.push_back(csa ? lane(o.index, ratio, c.index_dim, 2 * c.index_dim, true) : -1);
  }
  cap.mtp_y = t.take(rows * c.hc * c.hidden);
  cap.bytes = t.at;
  return cap;
}

}  // namespace ds4::deepseek_v4::cuda
