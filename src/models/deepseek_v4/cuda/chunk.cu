// The multi-row forward of the CUDA DeepSeek V4 model: a chunk of up to cl.rows tokens
// (prefill chunk, speculative verify of k+1 rows) through every layer with each weight matrix
// read once per chunk (backend/cuda gemv_rows; a prefill chunk, tensor_core_rows(opt) rows
// or more, does its dense projections as TF32 GEMMs and its routed experts as BF16 MMAs
// (with act_quant and int8_experts: int8 MMAs on quantized rows) on tensor cores, issue #22:
// then the HC mixes, the router logits and the indexer's inputs keep FP32 operands (mexact),
// so Sinkhorn and the top-k choices see FP32 values; the chunk is within tests/unit/deepseek_v4/
// tc_criterion.h of the CPU model, not bit for bit), every other op one launch for all rows:
//   - projections, o LoRA, shared expert, HC head, lm_head: gemv_rows over the chunk;
//   - MoE: routing per row (one launch), the (token, expert) pairs grouped per expert
//     (backend/cuda moe_group) so each used expert is read once for all the rows routed to it;
//   - mHC, norms, rope: the Rows variants of the decode kernels (rows are independent);
//   - the parts that carry state from one token to the next:
//       KV rows: every row's KV row goes into the window ring first (the ring has kRingSlack
//         spare slots, so no row of the chunk overwrites a position an earlier row still sees);
//       compressor lanes: one block per window the chunk closes pools it from the chunk's rows
//         (and the slots of a window begun before it), then the slots are left as after the
//         rows in order (lane_chunk.cu; bit for bit the row-by-row walk of a decode step);
//       indexer + attention: then row t scores / attends at position *pos + t over exactly the
//         ring rows and entries it would see as a decode step (later rows' entries are never
//         read: the counts come from the row's own position).
// Row t computes with the decode step's code on its own copy of the step scratch
// (step_layout.h ChunkLayout), and gemv_rows equals the decode step's direct-path gemv bit for
// bit, so a chunk's logits and state equal as many decode steps exactly (test_deepseek_v4_cuda).
// A chunk of a given size and logits mode is captured once per state as a CUDA graph.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/graph_step.h"
#include "backend/cuda/grouped_mma_int8.h"
#include "backend/cuda/routed_experts.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/moe_group.h"
#include "backend/cuda/moe_group_rows.h"
#include "backend/cuda/norm.h"
#include "models/deepseek_v4/cuda/model_impl.h"

namespace ds4::deepseek_v4 {

// Rows [r0, r1) of a stacked projection again with FP32 operands (mexact, after a tensor-core
// mproj): the router logits pick experts, the indexer's inputs pick entries.
void DeepseekV4CudaModel::Impl::mproj_exact(const DProj& p, size_t x_off, size_t y_off, int64_t r0, int64_t r1) {
  int64_t at = 0;
  for (const WeightMatrix& m : p.runs) {
    const int64_t a = std::max(at, r0), b = std::min(at + m.rows, r1);
    if (a < b) {
      WeightMatrix sub = m;
      sub.data = static_cast<const uint8_t*>(m.data) + (a - at) * m.row_stride_bytes();
      sub.rows = b - a;
      ActIn x = f32_in(R(0, x_off), rs(), rows);  // (a tensor-core chunk: no act slots)
      mexact(sub, x, R(0, y_off + size_t(a) * 4), dc::MatmulBatch{});
    }
    at += m.rows;
  }
}

// hc_pre() over the rows: the fused kernel with one grid row per token (the decode step's
// launch, so row t equals a decode step bit for bit; FP32 operands in a tensor-core chunk too,
// and fn, 24 rows, is read from L2 per row block instead of a GEMM with N = 24), else fn's column
// blocks {splits, mix} per row, then the split + collapse.
void DeepseekV4CudaModel::Impl::hc_pre_rows(const DHc& h, const float* norm, size_t x_off,
                                            const dc::HcPostIn* post_in) {
  const dc::HcRows hr{rows, rs()};
  if (hc_fused(h, false)) {
    dc::hc_pre_fused(hc_fn(h), h.scale, h.base, hcd, R(0, x_off), post_in, norm, R(0, sl.col), R(0, sl.post),
                     R(0, sl.comb), dc::HcFusedScratch{R(0, sl.mix), hc_counts.as<unsigned>()}, hr, stream);
    mark(post_in ? "hc_post_pre" : "hc_pre");
    return;
  }
  if (post_in) {
    dc::hc_post_f32(hcd, post_in->block_out, post_in->residual, post_in->post, post_in->comb, R(0, x_off), hr, stream);
    mark("hc_post");
  }
  // FP32 operands at any row count (mexact): the mixes go through Sinkhorn's exponentials.
  // f32 x with act_quant too: ds4 files store fn as F16, and the CPU's hc_pre_f32 reads f32 x.
  ActIn x = f32_in(R(0, x_off), rs(), rows);
  mexact(h.fn, x, R(0, sl.mix), dc::MatmulBatch{int(h.splits), h.split_stride, 0, h.fn.cols, h.fn.rows});
  dc::HcDims d = hcd;
  d.mix_splits = h.splits;
  dc::hc_pre_f32(R(0, sl.mix), h.scale, h.base, d, R(0, x_off), norm, R(0, sl.col), R(0, sl.post), R(0, sl.comb),
                 hr, stream);
  mark("hc_pre");
}

// attention() over the rows (the same streams and order of dependencies; see the file comment).
// groups: the states of the rows, each owning consecutive rows at consecutive positions (a
// chunk: one group, the stateful kernels one launch for all rows; decode_batch, batch.cu: one
// row per state, each launch exactly the decode step's on row i's scratch; verify_batch: one
// group per verify window, each launched exactly as that window's own chunk).
void DeepseekV4CudaModel::Impl::attention_rows(std::span<const RowGroup> groups, int64_t l) {
  const DLayer& L = dw.layers[size_t(l)];
  const LayerOffsets& o = lay.layers[size_t(l)];
  const int64_t hd = c.head_dim;
  const float* inv = L.ratio > 0 ? dw.inv_comp : dw.inv_main;
  auto RI = [&](int64_t t, size_t off) { return reinterpret_cast<int32_t*>(R(t, off)); };
  // attn_in outputs per row, byte offsets: {q_lora | hd | comp width x2 | index width x2 | index_heads}
  const size_t cw = L.ratio > 0 ? size_t(L.comp.width) * 4 : 0, iwd = L.has_indexer ? size_t(L.index.width) * 4 : 0;
  const size_t qr = sl.ain, kv = qr + size_t(c.q_lora) * 4, ckv = kv + size_t(hd) * 4, cgate = ckv + cw;
  const size_t ikv = cgate + cw, igate = ikv + iwd, iw = igate + iwd;
  // launch(state buffer, its position counter, first row, rows, group) for every row group;
  // a decode batch (one row per state) in one launch over all its sequences (Rows::shift).
  const Rows seq = seq_rows(groups);
  auto each = [&](auto&& launch) {
    if (seq.shift) {
      uint8_t* sb = groups[0].st->buf.as<uint8_t>();
      launch(sb, reinterpret_cast<const int32_t*>(sb + lay.pos), int64_t(0), seq, groups[0]);
      return;
    }
    for (const RowGroup& g : groups) {
      uint8_t* sb = g.st->buf.as<uint8_t>();
      launch(sb, reinterpret_cast<const int32_t*>(sb + lay.pos), g.r0, group_rows(g), g);
    }
  };
  // a captured verify window (n > 1) also logs what each row overwrites (spec_commit.cu)
  auto undo = [&](LaneArgs& la, int lane, const RowGroup& g) {
    if (capturing && g.n > 1) lane_undo_args(la, lane, *g.st);
  };
  ActIn xin = in_rows(sl.col, c.hidden, kActCol);
  mproj(L.attn_in, xin, sl.ain);
  // The indexer's inputs (its kv / gate / head weights, its queries) pick entries by top-k:
  // FP32 operands on a tensor-core chunk too (mexact).
  if (tensor_core_chunk() && L.has_indexer)
    mproj_exact(L.attn_in, sl.col, sl.ain, c.q_lora + hd + (L.ratio > 0 ? 2 * L.comp.width : 0), L.attn_in.rows);
  mark("attn_in_proj");
  // side branch: every row's KV row into the ring, the compressor lanes (chunk form)
  fork();
  each([&](uint8_t* sb, const int32_t* pos, int64_t t, const Rows& rr, const RowGroup&) {
    float* ring = reinterpret_cast<float*>(sb + o.window);
    norm_rope(R(t, kv), NormRope{1, hd, c.rope_dim, L.kv_norm, c.rms_eps, inv, ring, lay.ring_rows, c.ds4_numerics},
              pos, side(), rr);
  });
  mark("attn_kv");
  if (L.ratio > 0) {
    each([&](uint8_t* sb, const int32_t* pos, int64_t t, const Rows& rr, const RowGroup& g) {
      LaneArgs la = lane_args(L.comp, o.comp, sb, R(t, ckv), R(t, cgate), L.ratio, L.has_indexer);
      undo(la, cap.comp_lane[size_t(l)], g);
      compressor_step(la, pos, side(), rr);
    });
    mark("comp_lane_pool");
  }
  if (L.has_indexer) {
    each([&](uint8_t* sb, const int32_t* pos, int64_t t, const Rows& rr, const RowGroup& g) {
      LaneArgs la = lane_args(L.index, o.index, sb, R(t, ikv), R(t, igate), L.ratio, true);
      undo(la, cap.index_lane[size_t(l)], g);
      compressor_step(la, pos, side(), rr);
    });
    mark("index_lane_pool");
  }
  // main branch: the queries
  dc::rmsnorm_strided_f32(R(0, qr), rs(), L.q_a_norm, R(0, qr), rs(), rows, c.q_lora, c.rms_eps, stream);
  ActIn xqr = in_rows(qr, c.q_lora, kActQr);
  mgemv(L.q_b, xqr, sl.q, stream);
  each([&](uint8_t*, const int32_t* pos, int64_t t, const Rows& rr, const RowGroup&) {
    norm_rope(R(t, sl.q), NormRope{c.heads, hd, c.rope_dim, nullptr, c.rms_eps, inv}, pos, stream, rr);
  });
  if (L.has_indexer) mexact(L.index_q_b, xqr, R(0, sl.iq), dc::MatmulBatch{});
  mark("attn_q");
  join();
  // the indexer's selection of every row first (its own op in the profile): on a tensor-core
  // chunk its scores are one 3xTF32 GEMM over the chunk (indexer_tc.cu), else exact
  if (L.has_indexer) {
    each([&](uint8_t* sb, const int32_t* pos, int64_t t, const Rows& rr, const RowGroup&) {
      const IndexerArgs ia{R(t, sl.iq), R(t, iw), reinterpret_cast<const float*>(sb + o.index.entries),
                           c.index_heads, c.index_dim, c.rope_dim, L.ratio, c.index_topk,
                           lane_entries(lay.max_ctx, L.ratio), c.ds4_numerics, dw.inv_comp, R(t, sl.iscores),
                           RI(t, sl.sel), RI(t, sl.nsel)};
      if (tensor_core_chunk())
        indexer_select_tc(ia, pos, stream, rr);
      else
        indexer_select(ia, pos, stream, rr);
    });
    mark("indexer");
  }
  each([&](uint8_t* sb, const int32_t* pos, int64_t t, const Rows& rr, const RowGroup&) {
    AttendArgs a{R(t, sl.q), reinterpret_cast<const float*>(sb + o.window), c.window, lay.ring_rows, nullptr, 0,
                 nullptr, nullptr, L.sinks, c.heads, hd, sl.max_rows, R(t, sl.part), R(t, sl.part_ml),
                 R(t, sl.heads), c.rope_dim, inv};
    if (L.ratio > 0) {
      if (L.has_indexer) {
        a.sel = RI(t, sl.sel);
        a.nsel = RI(t, sl.nsel);
      }
      a.entries = reinterpret_cast<const float*>(sb + o.comp.entries);
      a.ratio = L.ratio;
    }
    // a tensor-core chunk: the products on tensor cores (attention_tc.cu); else attend() exactly
    if (tensor_core_chunk())
      attend_tc(a, pos, stream, rr);
    else
      attend(a, pos, stream, rr);
  });
  mark("attend");
  out_rows(L);
}

// Grouped o LoRA per row: group g's heads through rows [g * o_lora, (g+1) * o_lora) of o_a,
// then o_b: heads -> y (the trunk's attention and DSpark's K5 attention).
void DeepseekV4CudaModel::Impl::out_rows(const DLayer& L) {
  WeightMatrix oa = L.o_a;
  oa.rows = c.o_lora;
  const dc::MatmulBatch b{int(c.o_groups), size_t(c.o_lora * L.o_a.row_stride_bytes()), 0,
                          c.heads * c.head_dim / c.o_groups, c.o_lora};
  ActIn xheads = in_rows(sl.heads, c.heads * c.head_dim, kActHeads), xlow = in_rows(sl.low, c.o_groups * c.o_lora, kActLow);
  mrows(oa, xheads, R(0, sl.low), rs(), b, stream);
  mgemv(L.o_b, xlow, sl.y, stream);
  mark("attn_out");
}

// moe() over the rows: route every row, group the pairs per expert, each used expert read once.
void DeepseekV4CudaModel::Impl::moe_rows(int64_t l) {
  const DLayer& L = dw.layers[size_t(l)];
  const int64_t K = c.experts_used, F = c.expert_ff, H = c.hidden, E = c.experts, pairs = rows * K;
  const size_t shg = sl.min, shu = shg + size_t(F) * 4, router = shu + size_t(F) * 4;  // moe_in outputs per row
  const Rows all = all_rows();
  ActIn xin = in_rows(sl.col, H, kActCol), xsh = in_rows(shg, F, kActShared);
  mproj(L.moe_in, xin, sl.min);
  if (tensor_core_chunk()) mproj_exact(L.moe_in, sl.col, sl.min, 2 * F, 2 * F + E);
  mark("moe_in_proj");
  fork();  // side branch: the shared expert
  swiglu_clamp(R(0, shg), R(0, shu), rows, F, rs(), c.swiglu_limit, R(0, shg), side(), rs());
  mgemv(L.sh_down, xsh, sl.sh, side());
  mark("shared_expert");
  int32_t* ids = C<int32_t>(cl.ids);  // {rows, K}
  float* wts = C(cl.wts);
  moe_route(RouteArgs{R(0, router), L.router_bias, L.tid2eid, reinterpret_cast<const int32_t*>(R(0, sl.tok)),
                      c.experts, K, int(c.score), c.norm_topk, float(c.routed_scale), ids, wts},
            stream, all);
  // Entries of up to S rows: 4 for a small pass on the exact kernels (a decode batch, a verify
  // window: moe_group_stride says why), else 16 (the tensor-core kernels' tiles).
  const bool tc_experts = opt.expert_mma && tensor_core_chunk();
  const int64_t S = dc::moe_group_stride(rows, tc_experts);
  const dc::MoeGroup g{C<int32_t>(cl.experts), C<int32_t>(cl.live), C<int32_t>(cl.counts), C<int32_t>(cl.tok),
                       C<int32_t>(cl.slot), S};
  dc::moe_group(ids, rows, K, E, g, stream);
  mark("moe_route");
  // Entry u = up to S rows of a used expert (*live of at most moe_group_entries decides on the
  // device; a pass of at most S rows has one entry per used expert). r.n bounds an entry's rows (the
  // kernels read min(count, n) of them): top-k picks an expert once per row, so at most `rows`;
  // a hash table row may name one expert twice (nothing in the format forbids it; random
  // synthetic tables do, ~1 row in E), so up to rows * K there. With `rows` there, an expert
  // named twice by 3 of 4 rows lost its 5th and 6th pairs (their outputs stayed stale): the
  // H200's decode_batch difference on the synthetic act_quant model.
  dc::GemvRows r = dc::moe_group_rows(g, rows, K, E, L.tid2eid ? pairs : rows, L.gate_up.stride);
  r.x_row = rs(), r.x_idx = g.tok, r.y_row = 2 * F, r.y_idx = g.slot;  // col rows -> egu {rows * K, 2F}
  // A tensor-core chunk runs the experts on tensor cores (same entries: BF16 MMAs, or cuBLAS
  // grouped GEMMs from grouped_gemm_min_rows pairs per expert), else exact. With act_quant
  // (ds4's numerics quantize the experts' inputs) and int8_experts a tensor-core chunk's experts
  // are int8 MMAs on the quantized rows instead (grouped_mma_int8: each output = the CPU's
  // dot_act of its row).
  const int64_t rows_per_expert = rows * K / E;
  const bool int8 = int8_experts && c.act_quant && tc_experts &&
                    dc::grouped_mma_int8_supports(L.gate_up.first) && dc::grouped_mma_int8_supports(L.down.first);
  const dc::ExpertPath path =
      int8 ? dc::ExpertPath::kMma
           : dc::plan_experts(tc_experts, L.gate_up.first, L.down.first, r,
                              rows_per_expert, gg.get(), stream);
  // With act_quant outside tensor-core chunks (path kGemv) the same entries on quantized rows
  // (x_row in values: the slot's rows are packed).
  auto experts = [&](const WeightMatrix& w, ActIn& x, ActKind k, float* y) {
    if (int8) int8_entries(w, x, k, y, r, rows_per_expert);
    else if (auto q = act_for(x, w, stream)) act_entries(w, *q, y, r, stream);
    else dc::grouped_experts(w, x.x, y, r, path, stream, rows_per_expert, gg.get());
  };
  experts(L.gate_up.first, xin, kActCol, C(cl.egu));
  mark("experts_gate_up");
  swiglu_clamp(C(cl.egu), C(cl.egu) + F, pairs, F, 2 * F, c.swiglu_limit, C(cl.eact), stream);
  r.batch.id_stride = L.down.stride;
  r.x_row = F, r.x_idx = g.slot, r.y_row = H;  // eact {rows * K, F} -> ey {rows * K, H}
  ActIn xact = act_in(C(cl.eact), F, pairs, F, kActExperts, true);
  experts(L.down.first, xact, kActExperts, C(cl.ey));
  mark("experts_down");
  join();
  moe_combine(C(cl.ey), wts, K, R(0, sl.sh), H, R(0, sl.y), stream, all);
  mark("moe_combine");
}

// The pinned input rows [token id | embedding] into the rows' scratch (sl.tok = 0, then sl.emb),
// every row's HC streams started as its embedding.
void DeepseekV4CudaModel::Impl::rows_in() {
  DS4_CUDA_CHECK(cudaMemcpy2DAsync(R(0, sl.tok), cl.row_bytes, in_host->p, sl.in_bytes, sl.in_bytes, size_t(rows),
                                   cudaMemcpyHostToDevice, stream));
  dc::hc_expand_f32(R(0, sl.emb), hcd, R(0, sl.xa), dc::HcRows{rows, rs()}, stream);
  mark("embed");
}

// HC head + norm + lm_head of rows t0 .. t0 + n - 1, their logits to pinned rows 0 .. n - 1
// (a decode batch in candidates mode: their candidates, batch_cand).
void DeepseekV4CudaModel::Impl::head_rows(int64_t t0, int64_t n) {
  const int64_t V = c.vocab;
  const DHc& h = dw.head_hc;
  if (hc_fused(h, true)) {  // (hc_pre_rows says why)
    dc::hc_head_fused(hc_fn(h), h.scale, h.base, hcd, R(t0, sl.xa), nullptr, dw.norm, R(t0, sl.hout),
                      dc::HcFusedScratch{R(t0, sl.mix), hc_counts.as<unsigned>()}, dc::HcRows{n, rs()}, stream);
  } else {
    ActIn xa = f32_in(R(t0, sl.xa), rs(), n);  // (f32 x: hc_pre_rows says why)
    mexact(h.fn, xa, R(t0, sl.mix), dc::MatmulBatch{int(h.splits), h.split_stride, 0, h.fn.cols, h.fn.rows});
    dc::HcDims d = hcd;
    d.mix_splits = h.splits;
    dc::hc_head_f32(R(t0, sl.mix), h.scale, h.base, d, R(t0, sl.xa), dw.norm, R(t0, sl.hout), dc::HcRows{n, rs()},
                    stream);
  }
  ActIn xh = act_in(R(t0, sl.hout), rs(), n, c.hidden, kActCol, true);
  mrows(dw.lm_head, xh, R(t0, sl.logits), rs(), dc::MatmulBatch{}, stream);
  enqueue_logits_rows(R(t0, sl.logits), size_t(rs()), n, V, logits_host->p, batch_cand.active(), stream);
  mark("head");
}

// Everything of one multi-row forward of `rows` tokens: the pinned input rows in, every layer,
// logits out (row rows-1 to pinned row 0 for kLast; every row for kAll), each group's
// position counter += its rows.
void DeepseekV4CudaModel::Impl::enqueue_chunk(std::span<const RowGroup> groups, Logits mode) {
  const CudaState& st = *groups[0].st;  // the head flags (alike in every group)
  mark("start");
  rows_in();
  for (int64_t l = 0; l < c.layers; ++l) {
    layer_rows(groups, l);
    if (st.dspark_on) dspark_tap(l, R(0, sl.xa), rows, rs());
  }
  if (mode == Logits::kAll) head_rows(0, rows);
  else if (mode == Logits::kLast) head_rows(rows - 1, 1);
  if (st.mtp_on) mtp_record_rows(groups);  // at the rows' positions: before the increment
  if (st.dspark_on) dspark_record_rows(groups);
  if (const Rows seq = seq_rows(groups); seq.shift) {
    seq_positions_increment(reinterpret_cast<int32_t*>(groups[0].st->buf.as<uint8_t>() + lay.pos), seq, stream);
    return;
  }
  for (const RowGroup& g : groups)
    dc::enqueue_position_increment(reinterpret_cast<int32_t*>(g.st->buf.as<uint8_t>() + lay.pos), int32_t(g.n), stream);
}

Rows DeepseekV4CudaModel::Impl::seq_rows(std::span<const RowGroup> groups) const {
  // (a verify forward's groups, even of one row each, launch per group: run_batch alone writes
  // the shift fields)
  if (groups.size() < 2 || !opt.seq_launches || capturing) return Rows{};
  for (const RowGroup& g : groups)
    if (g.n != 1) return Rows{};
  static_assert(sizeof(int64_t) % sizeof(float) == 0);
  if (sl.shift % sizeof(int64_t) || cl.row_bytes % sizeof(int64_t))
    throw Error("deepseek_v4 cuda: the rows' shift fields are not 8-byte aligned");
  return Rows{rows, rs(), reinterpret_cast<const int64_t*>(R(0, sl.shift)), int64_t(cl.row_bytes / sizeof(int64_t))};
}

void DeepseekV4CudaModel::Impl::layer_rows(std::span<const RowGroup> groups, int64_t l) {
  const DLayer& L = dw.layers[size_t(l)];
  const dc::HcRows hr{rows, rs()};
  hc_pre_rows(L.attn_hc, L.attn_norm, sl.xa);
  if (dw.has_dspark && l >= c.layers) k5_attention_rows(*groups[0].st, l - c.layers);  // a DSpark stage (K5 pass)
  else attention_rows(groups, l);
  const dc::HcPostIn attn_out{R(0, sl.y), R(0, sl.xa), R(0, sl.post), R(0, sl.comb)};  // -> xb
  hc_pre_rows(L.ffn_hc, L.ffn_norm, sl.xb, &attn_out);
  moe_rows(l);
  dc::hc_post_f32(hcd, R(0, sl.y), R(0, sl.xb), R(0, sl.post), R(0, sl.comb), R(0, sl.xa), hr, stream);
  mark("hc_post");
}

void DeepseekV4CudaModel::Impl::run_chunk(CudaState& st, int64_t n, Logits mode) {
  fresh_graphs(st);
  rows = n;
  const int64_t key = (n * 3 + (mode == Logits::kAll ? 2 : mode == Logits::kLast ? 1 : 0)) * 2 + (capturing ? 1 : 0);
  // A prefill chunk (more rows than a verify) launches directly: its hundreds of ms dwarf the
  // launches, and capturing + instantiating a graph per state and size stalls other threads'
  // launches (the GPU canary saw 363 ms) for a graph that a fresh state replays a few times.
  const bool graph = opt.graphs && n <= opt.chunk_rows;
  const RowGroup all{&st, 0, n};
  dc::run_graph_step(stream, st.chunk_graph[key], graph, [&] { enqueue_chunk({&all, 1}, mode); });
  collect_profile();
}

}  // namespace ds4::deepseek_v4
