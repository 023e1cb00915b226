// The multi-row forward of the CUDA Qwen3.8 Flash Next model: a chunk of up to cl.rows
// tokens (prefill chunk, speculative verify of k+1 rows) through every layer with each weight
// matrix read once per chunk (backend/cuda gemv_rows), while the parts that carry state from
// one token to the next take all rows in one launch and keep token order inside it:
//   - GDN: conv1d state and the delta-rule recurrence loop the rows inside their kernels;
//   - PLE: the dilated n-gram conv likewise (conv1d_rows_f32, dilation ngram); the host
//     gathered every row's n-gram rows into the pinned input (fill_input, row by row);
//   - QSA: every row's K/V/raw indexer key appended first, then the blocks they complete
//     pooled, then one selection and one attention launch, row t at its own position pos + t
//     (it sees positions <= pos + t and the blocks complete there, nothing a later row wrote);
//   - MoE: routing per row, then the (token, expert) pairs grouped per expert (moe_group) so
//     each used expert is read once for all the rows routed to it.
// Row t's arithmetic is the decode step's (the same kernels, kernels.h Rows), on row t's copy
// of the step scratch (step_layout.h ChunkLayout); its position is positions[t] = *pos + t on
// the device, so a chunk of a given size and logits mode is captured once per state as a
// CUDA graph (verify-sized chunks; a prefill chunk launches directly). Also here: the MTP ring
// around a chunk (forward_chunk), the captured verify (records per row) and commit_prefix.
// Tensor cores (issue #22): a prefill chunk of at least CudaModelOptions::gemm_rows rows runs
// every dense projection as a TF32 GEMM (backend/cuda matmul_rows) and the routed experts as
// grouped BF16 MMAs (grouped_mma_bf16) over entries of <= 16 rows per expert, or from
// grouped_gemm_min_rows pairs per expert as cuBLAS grouped GEMMs (grouped_gemm.h); the router
// logits and the QSA indexer's q/k are computed again on the exact path (they pick experts
// and blocks, so the chunk chooses what decode steps would choose; the hyper-connection mixes
// are continuous sigmoid gates and take the GEMM). Such a chunk equals decode steps within
// TF32/BF16 rounding, not bit for bit; with gemm_rows 0 every chunk is exact.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cuda/conv1d.h"
#include "backend/cuda/routed_experts.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/moe_group.h"
#include "backend/cuda/moe_group_rows.h"
#include "core/dtype.h"
#include "core/error.h"
#include "models/capture_rows.h"
#include "models/qwen_next/cuda/model_impl.h"

namespace ds4::qwen_next {

namespace {

__global__ void chunk_positions_kernel(const int32_t* pos, int32_t* positions, int32_t rows) {
  const int32_t t = int32_t(blockIdx.x * blockDim.x + threadIdx.x);
  if (t < rows) positions[t] = *pos + t;
}

// Rows [r0, r0 + n) of m as a matrix of their own (MLX scales and biases follow the rows).
WeightMatrix row_slice(const WeightMatrix& m, int64_t r0, int64_t n) {
  WeightMatrix s = m;
  s.rows = n;
  s.data = static_cast<const uint8_t*>(m.data) + r0 * m.row_stride_bytes();
  if (m.scales) {
    const int64_t sb = (m.cols / m.group_size) * row_bytes(m.scale_type, 1);
    s.scales = static_cast<const uint8_t*>(m.scales) + r0 * sb;
    s.biases = static_cast<const uint8_t*>(m.biases) + r0 * sb;
  }
  return s;
}

int64_t chunk_key(int64_t rows, Logits mode, bool capture) {
  return (rows * 3 + (mode == Logits::kAll ? 2 : mode == Logits::kLast ? 1 : 0)) * 2 + (capture ? 1 : 0);
}

// launch(group, its state buffer, Rows of its rows) per row group (model_impl.h SeqGroup).
template <class Launch>
void each_group(std::span<const SeqGroup> groups, int64_t stride, Launch&& launch) {
  for (const SeqGroup& g : groups) launch(g, g.st->buf.as<uint8_t>(), Rows{g.n, stride});
}

}  // namespace

// y rows {rows, ...} = W x rows, both in the row scratches (stride rs() floats): gemv_rows in
// groups of 16 rows (exact: equal to the step's gemv) below gemm_rows rows, a TF32 GEMM from
// there (backend/cuda matmul_rows).
void QwenNextCudaModel::Impl::mgemv(const WeightMatrix& w, size_t x_off, size_t y_off, bool cuda_cores) {
  dc::MatmulBatch b;
  b.cuda_cores = cuda_cores;
  dc::matmul_rows(w, R(0, x_off), rs(), R(0, y_off), rs(), rows, b, *mm, stream);
}

// A stacked projection: one product per stacked run, outputs back to back in each row.
void QwenNextCudaModel::Impl::mproj(const DProj& p, size_t x_off, size_t y_off, bool cuda_cores) {
  if (p.fused.rows > 0) return mgemv(p.fused, x_off, y_off, cuda_cores);
  for (const WeightMatrix& m : p.parts) {
    mgemv(m, x_off, y_off, cuda_cores);
    y_off += size_t(m.rows) * sizeof(float);
  }
}

void QwenNextCudaModel::Impl::mproj_exact(const DProj& p, size_t x_off, size_t y_off, int64_t r0, int64_t r1) {
  if (!tensor_cores()) return;  // mproj was exact already
  int64_t at = 0;
  auto one = [&](const WeightMatrix& m) {
    const int64_t a = std::max(at, r0), b = std::min(at + m.rows, r1);
    if (a < b) {
      const WeightMatrix sub = row_slice(m, a - at, b - a);
      float* y = R(0, y_off + size_t(a) * sizeof(float));
      if (opt.fp32_gemms) dc::matmul_rows_f32(sub, R(0, x_off), rs(), y, rs(), rows, dc::MatmulBatch{}, *mm, stream);
      else dc::matmul_rows_exact(sub, R(0, x_off), rs(), y, rs(), rows, dc::MatmulBatch{}, stream);
    }
    at += m.rows;
  };
  if (p.fused.rows > 0) one(p.fused);
  else
    for (const WeightMatrix& m : p.parts) one(m);
}

// hyper_read() of model_cuda.cu over the rows: mixed {rows, d} (and inject {rows, hc} when
// `inject`: a mixer has none) from the streams at x_off {rows, hc*d}.
void QwenNextCudaModel::Impl::hyper_read_rows(const DHyper& h, size_t x_off, bool inject) {
  const int64_t hc = c.hc, d = c.hidden;
  const Rows all = all_rows();
  hc_norm(R(0, x_off), h.norm, hc, d, c.rms_eps, R(0, sl.normed), stream, all);
  mproj(h.down_inject, sl.normed, sl.low, true);  // {rows, [low {rank} | inject {hc}]}
  hc_low_act(R(0, sl.low), c.hc_rank, hc, stream, all);
  mgemv(h.up, sl.low, sl.mix, true);
  hc_combine(R(0, sl.mix), R(0, sl.normed), hc, d, R(0, sl.mixed), inject ? R(0, sl.inject) : nullptr, stream, all);
  mark("hc_read");
}

// The conv history of a captured verify: [state before the window ; the rows' conv inputs]
// (step_layout.h CaptureLayout), copied before the conv advances the state.
// state {state_rows, width}; in_rows: row 0's input {width} in the row scratch.
void QwenNextCudaModel::Impl::record_history(float* hist, const float* state, int64_t state_rows, const float* in_rows,
                                             int64_t width, int64_t n) {
  const size_t wb = size_t(width) * sizeof(float);
  DS4_CUDA_CHECK(cudaMemcpyAsync(hist, state, size_t(state_rows) * wb, cudaMemcpyDeviceToDevice, stream));
  DS4_CUDA_CHECK(cudaMemcpy2DAsync(hist + state_rows * width, wb, in_rows, cl.row_bytes, wb, size_t(n),
                                   cudaMemcpyDeviceToDevice, stream));
}

// The PLE block of layer() over the rows; conv_off the layer's dilated conv state in each
// state's buffer, k->ple_conv (a capturing group) its history record.
void QwenNextCudaModel::Impl::ple_rows(const DPle& p, std::span<const SeqGroup> groups, size_t conv_off,
                                       const CaptureOffsets* k) {
  const int64_t hc = c.hc, d = c.hidden, W = c.wide();
  const Rows all = all_rows();
  mproj(p.in, sl.ple_emb + size_t(p.index * sl.ple_stride) * 4, sl.ple_key);  // {rows, [key {hc*d} | value {d}]}
  ple_gate(R(0, sl.ple_key), R(0, sl.ple_val), R(0, sl.h), p.norm_key, p.norm_query, p.norm_conv, hc, d, c.rms_eps,
           R(0, sl.ple_gv), R(0, sl.ple_gvn), stream, all);
  each_group(groups, rs(), [&](const SeqGroup& g, uint8_t* sb, const Rows& rr) {
    const int64_t t = g.r0;
    float* conv = reinterpret_cast<float*>(sb + conv_off);
    if (g.capture) record_history(CAP(*g.st, k->ple_conv), conv, (c.ple_conv_k - 1) * c.ngram, R(t, sl.ple_gvn), W, g.n);
    dc::conv1d_rows_f32(R(t, sl.ple_gvn), p.conv, conv, W, c.ple_conv_k, c.ngram, true, R(t, sl.ple_conv),
                        dc::Conv1dRows{rr.count, rs(), rs()}, stream);
  });
  ple_add(R(0, sl.h), R(0, sl.ple_gv), R(0, sl.ple_conv), W, stream, all);
  mark("ple");
}

// The GDN block of layer() over the rows; o: the layer's conv and recurrent state offsets in
// each state's buffer; k->conv / k->ssm (a capturing group): the conv history and the
// recurrent state after each row.
void QwenNextCudaModel::Impl::gdn_rows(const DGdn& g, std::span<const SeqGroup> groups, const LayerOffsets& o,
                                       const CaptureOffsets* k) {
  const GdnShape sh{c.k_heads, c.v_heads, c.k_dim, c.v_dim, c.rms_eps, c.gate_sigmoid};
  const Rows all = all_rows();
  const int64_t cdim = c.conv_dim();
  mproj(g.in, sl.mixed, sl.raw);  // {rows, [qkv | z | b | a]}
  mark("gdn_in_proj");
  // The conv state advances row by row inside one launch (a thread per channel).
  each_group(groups, rs(), [&](const SeqGroup& gr, uint8_t* sb, const Rows& rr) {
    const int64_t t = gr.r0;
    float* conv = reinterpret_cast<float*>(sb + o.conv);
    if (gr.capture) record_history(CAP(*gr.st, k->conv), conv, c.conv_k - 1, R(t, sl.raw), cdim, gr.n);
    dc::conv1d_rows_f32(R(t, sl.raw), g.conv, conv, cdim, c.conv_k, 1, true, R(t, sl.qkv),
                        dc::Conv1dRows{rr.count, rs(), rs()}, stream);
  });
  gdn_prep(R(0, sl.qkv), R(0, sl.b), R(0, sl.a), g.a_log, g.dt_bias, sh, stream, all);
  mark("gdn_conv_prep");
  // One launch per sequence; the recurrence loops a chunk's rows in order inside the kernel.
  each_group(groups, rs(), [&](const SeqGroup& gr, uint8_t* sb, const Rows& rr) {
    const int64_t t = gr.r0;
    gdn_recurrent(R(t, sl.qkv), R(t, sl.a), R(t, sl.b), reinterpret_cast<float*>(sb + o.ssm), R(t, sl.o), sh, stream,
                  rr, gr.capture ? CAP(*gr.st, k->ssm) : nullptr);
  });
  mark("gdn_recurrence");
  gdn_gated_norm(R(0, sl.o), R(0, sl.z), g.norm, sh, stream, all);
  mgemv(g.out, sl.o, sl.out);
  mark("gdn_out");
}

// The QSA block of layer() over the rows. The projection does not read the cache, so it runs
// for all rows first; qsa_prep appends every row's K/V/raw key at its position and pools the
// blocks they complete (a second launch, after all appends); then one select and one attend
// launch: row t at pos + t reads only positions <= pos + t and blocks complete there.
// Several groups (decode_batch, verify_batch): each group's three launches on its own caches,
// row t at positions[t].
void QwenNextCudaModel::Impl::qsa_rows(const DQsa& a, const LayerOffsets& o, std::span<const SeqGroup> groups) {
  const QsaShape sh{c.heads, c.kv_heads, c.head_dim, c.rot_dim, c.idx_heads, c.idx_dim, c.idx_budget,
                    c.idx_ratio, lay.max_ctx, c.rms_eps, dw.inv_freq};
  auto cache_of = [&](uint8_t* sb) {
    auto SF = [&](size_t off) { return reinterpret_cast<float*>(sb + off); };
    return QsaCache{SF(o.k), SF(o.v), SF(o.idx_raw), SF(o.idx_pooled)};
  };
  const int32_t* positions = C<int32_t>(cl.positions);
  mproj(a.in, sl.mixed, sl.qg);  // {rows, [q+gate | k | v | indexer q+k]}
  // The indexer's q and k score blocks for a top-k: exact on a tensor-core chunk too.
  const int64_t idx0 = c.heads * 2 * c.head_dim + 2 * c.kv_heads * c.head_dim;
  mproj_exact(a.in, sl.mixed, sl.qg, idx0, idx0 + (c.idx_heads + 1) * c.idx_dim);
  mark("qsa_in_proj");
  each_group(groups, rs(), [&](const SeqGroup& g, uint8_t* sb, const Rows& rr) {
    const int64_t t = g.r0;
    qsa_prep(R(t, sl.qg), R(t, sl.k), R(t, sl.v), R(t, sl.iqk),
             QsaNorms{a.q_norm, a.k_norm, a.idx_q_norm, a.idx_k_norm}, cache_of(sb), sh, positions + t, R(t, sl.q),
             R(t, sl.gate), stream, rr);
  });
  mark("qsa_prep_pool");
  each_group(groups, rs(), [&](const SeqGroup& g, uint8_t* sb, const Rows& rr) {
    const int64_t t = g.r0;
    uint8_t* keep = reinterpret_cast<uint8_t*>(R(t, sl.keep));  // row t's at t * rs() * 4 bytes
    qsa_select(R(t, sl.iqk), cache_of(sb), sh, positions + t, R(t, sl.block_scores), keep, stream, rr);
  });
  mark("qsa_select");
  each_group(groups, rs(), [&](const SeqGroup& g, uint8_t* sb, const Rows& rr) {
    const int64_t t = g.r0;
    qsa_attend(R(t, sl.q), R(t, sl.gate), cache_of(sb), sh, positions + t, reinterpret_cast<const uint8_t*>(R(t, sl.keep)),
               R(t, sl.att_scores), R(t, sl.att), stream, rr, tensor_cores());
  });
  mark("qsa_attend");
  mgemv(a.o, sl.att, sl.out);
  mark("qsa_out");
}

// The MoE of layer() over the rows: route each row, group, each used expert once for its rows.
void QwenNextCudaModel::Impl::moe_rows(const DMoe& m) {
  const int64_t d = c.hidden, K = c.top_k, I = c.moe_inter, E = c.experts, pairs = rows * K;
  const Rows all = all_rows();
  int32_t* ids = C<int32_t>(cl.ids);
  float* wts = C(cl.wts);
  mproj(m.in, sl.mixed, sl.sh_g);  // {rows, [shared gate | shared up | router | shared gate scalar]}
  // The router logits pick experts: exact on a tensor-core chunk too.
  mproj_exact(m.in, sl.mixed, sl.sh_g, 2 * c.shared_inter, 2 * c.shared_inter + E);
  mark("moe_in_proj");
  moe_route(R(0, sl.router), E, K, c.norm_topk, ids, wts, stream, all);  // ids, wts {rows, K}
  // Entries of up to S rows (moe_group_stride: 4 for a small exact pass, else kGroupRows).
  const int64_t S = dc::moe_group_stride(rows, opt.expert_mma && tensor_cores());
  const dc::MoeGroup g{C<int32_t>(cl.experts), C<int32_t>(cl.live), C<int32_t>(cl.counts), C<int32_t>(cl.tok),
                       C<int32_t>(cl.slot), S};
  dc::moe_group(ids, rows, K, E, g, stream);
  mark("moe_route_group");
  moe_swiglu(R(0, sl.sh_g), rows, c.shared_inter, R(0, sl.sh_g), stream, rs(), rs());
  mgemv(m.sh_down, sl.sh_g, sl.sh_out);
  mark("shared_expert");
  // Entry u = up to S rows of a used expert (at most moe_group_entries of them; *live decides on
  // the device; a pass of at most S rows has one entry per used expert).
  dc::GemvRows r = dc::moe_group_rows(g, rows, K, E, rows, m.gate_up.stride, m.gate_up.scale_stride);
  r.x_row = rs(), r.x_idx = g.tok, r.y_row = 2 * I, r.y_idx = g.slot;  // mixed rows -> gu {rows * K, 2I}
  // A tensor-core chunk: the same entries as BF16 MMAs (each entry's expert decoded once), or
  // from grouped_gemm_min_rows pairs per expert as cuBLAS grouped GEMMs.
  const dc::ExpertPath path = dc::plan_experts(opt.expert_mma && tensor_cores(), m.gate_up.first, m.down.first, r,
                                               rows * K / E, gg.get(), stream);
  // x16: BF16 copies of x (DS4_GROUPED_MMA_X16, on by default) in a buffer idle during the product: gate_up's
  // rows in ey (pairs x d floats >= rows x d BF16), down's in gu (pairs x 2I floats).
  auto experts = [&](const WeightMatrix& w, const float* x, int64_t x_rows, float* y, void* x16) {
    dc::grouped_experts(w, x, y, r, path, stream, rows * K / E, gg.get(), x16, x_rows);
  };
  experts(m.gate_up.first, R(0, sl.mixed), rows, C(cl.gu), C(cl.ey));
  mark("experts_gate_up");
  moe_swiglu(C(cl.gu), pairs, I, C(cl.act), stream);  // act {rows * K, I}
  r.batch.id_stride = m.down.stride, r.batch.id_scale_stride = m.down.scale_stride;
  r.x_row = I, r.x_idx = g.slot, r.y_row = d;  // act {rows * K, I} -> ey {rows * K, d}
  experts(m.down.first, C(cl.act), pairs, C(cl.ey), C(cl.gu));
  mark("experts_swiglu_down");
  moe_combine(C(cl.ey), wts, K, R(0, sl.sh_out), R(0, sl.sg), d, R(0, sl.out), stream, all);  // ey {rows, K, d}
  mark("moe_combine");
}

void QwenNextCudaModel::Impl::positions_in(std::span<const SeqGroup> groups) {
  for (const SeqGroup& g : groups) {
    const int32_t* pos = reinterpret_cast<const int32_t*>(g.st->buf.as<uint8_t>() + lay.pos);
    chunk_positions_kernel<<<unsigned((g.n + 255) / 256), 256, 0, stream>>>(pos, C<int32_t>(cl.positions) + g.r0,
                                                                            int32_t(g.n));
    DS4_CUDA_CHECK_LAUNCH();
  }
}

// Every layer over the groups' rows; a capturing group also writes the verify records (capl)
// of every GDN and PLE layer into its state's cap buffer.
void QwenNextCudaModel::Impl::layers_rows(std::span<const SeqGroup> groups) {
  const int64_t hc = c.hc, d = c.hidden;
  const Rows all = all_rows();
  bool capture = false;
  for (const SeqGroup& g : groups) capture = capture || g.capture;
  for (int64_t l = 0; l < c.layers; ++l) {
    const DLayer& L = dw.layers[size_t(l)];
    const LayerOffsets& o = lay.layers[size_t(l)];
    const CaptureOffsets* k = capture ? &capl.layers[size_t(l)] : nullptr;
    if (L.ple) ple_rows(*L.ple, groups, o.ple_conv, k);
    hyper_read_rows(L.attn_hc, sl.h, true);
    if (L.gdn) gdn_rows(*L.gdn, groups, o, k);
    else qsa_rows(*L.qsa, o, groups);
    hc_write(R(0, sl.h), R(0, sl.out), R(0, sl.inject), hc, d, stream, all);
    mark("hc_write");
    hyper_read_rows(L.mlp_hc, sl.h, true);
    moe_rows(L.moe);
    hc_write(R(0, sl.h), R(0, sl.out), R(0, sl.inject), hc, d, stream, all);
    mark("hc_write");
  }
}

void QwenNextCudaModel::Impl::head_all_rows() {
  const int64_t V = c.vocab;
  hyper_read_rows(dw.mixer, sl.h, false);
  mgemv(dw.lm_head, sl.mixed, sl.logits);
  // (a decode batch in candidates mode: only their candidates, batch_cand)
  enqueue_logits_rows(R(0, sl.logits), size_t(rs()), rows, V, logits_host->p, batch_cand.active(), stream);
}

void QwenNextCudaModel::Impl::enqueue_chunk(CudaState& st, Logits mode, bool capture) {
  uint8_t* sb = st.buf.as<uint8_t>();
  int32_t* pos = reinterpret_cast<int32_t*>(sb + lay.pos);
  const int64_t V = c.vocab;
  mark("start");
  // Input rows {rows, [h {hc*d} | PLE rows]}: pinned row t -> row t's scratch.
  DS4_CUDA_CHECK(cudaMemcpy2DAsync(R(0, sl.h), cl.row_bytes, in_host->p, sl.in_bytes, sl.in_bytes, size_t(rows),
                                   cudaMemcpyHostToDevice, stream));
  const SeqGroup one{&st, 0, rows, capture};
  positions_in({&one, 1});
  mark("input");
  layers_rows({&one, 1});
  if (mode != Logits::kNone) {
    if (mode == Logits::kAll) {
      head_all_rows();
    } else {  // every row's mixer (small), one lm_head row
      hyper_read_rows(dw.mixer, sl.h, false);
      const int64_t t = rows - 1;
      gemv(dw.lm_head, R(t, sl.mixed), R(t, sl.logits));
      DS4_CUDA_CHECK(cudaMemcpyAsync(logits_host->p, R(t, sl.logits), size_t(V) * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream));
    }
  }
  mark("head");
  dc::enqueue_position_increment(pos, int32_t(rows), stream);
}

void QwenNextCudaModel::Impl::run_chunk(CudaState& st, int64_t n, Logits mode, bool capture) {
  rows = n;
  // A prefill chunk (more rows than a verify) launches directly: its time dwarfs the
  // launches, and capturing + instantiating a graph per state and size would stall other
  // threads' launches (DeepSeek's GPU canary saw 363 ms) for a graph replayed a few times.
  const bool graph = opt.graphs && n <= opt.chunk_rows;
  cudaGraphExec_t& exec = st.chunk_graph[chunk_key(n, mode, capture)];
  const bool profiling = prof.on;
  prof.on = profiling && !graph;  // events inside a captured graph are not timed
  dc::run_graph_step(stream, exec, graph, [&] { enqueue_chunk(st, mode, capture); });
  prof.collect();
  prof.on = profiling;
}

// The MTP ring around a chunk: the room first (a catch-up runs the head's layer on S(sl.h)
// and the head's scratch, never on the chunk scratch, and it must run before the pushes since
// the last row's slot may hold a pending row), then the chunk, then every row's final
// pre-mixer h (row t's R(t, sl.h): the mixer of the logits reads it, writes elsewhere) and
// token into slot (pos + t) % ring, in one launch, in position order. A prefill chunk of more
// rows than one push takes (kRingPushMax; the ring keeps kMtpRing) goes in after it ran, piece
// by piece, each piece's room first: the catch-ups leave the chunk scratch's rows alone, and
// the head consumes the same pairs in the same order (on its decode-step code, one per row).
void QwenNextCudaModel::Impl::forward_chunk(CudaState& st, std::span<const int32_t> tokens, Logits mode,
                                            bool capture) {
  const int64_t n = int64_t(tokens.size());
  const bool one_push = n <= kRingPushMax;
  if (st.mtp_on && one_push) mtp_room(st, st.pos, n);
  for (int64_t t = 0; t < n; ++t) fill_input(st, tokens[size_t(t)], t);
  run_chunk(st, n, mode, capture);
  if (st.mtp_on && one_push) mtp_push(st, st.pos, tokens, R(0, sl.h), rs());
  if (st.mtp_on && !one_push)
    for (int64_t t0 = 0; t0 < n; t0 += kRingPushMax) {
      const int64_t r = std::min<int64_t>(kRingPushMax, n - t0);
      mtp_room(st, st.pos + t0, r);
      mtp_push(st, st.pos + t0, tokens.subspan(size_t(t0), size_t(r)), R(t0, sl.h), rs());
    }
  st.pos += n;
}

// ---- captured-prefix commit (MTPLX capture_commit; CPU: spec_commit.cpp) ----

bool QwenNextCudaModel::verify_capture(ModelState& trial, std::span<const int32_t> tokens,
                                       std::vector<float>& logits) {
  CudaState* st = &cuda_state(trial);
  Impl& m = *impl_;
  const int64_t n = int64_t(tokens.size());
  // A pending window must be committed first (as on the CPU). Each state holds its own
  // records, so other states' windows stay pending beside it.
  if (!st->cap_tokens.empty()) throw Error("qwen_next cuda: verify_capture over an uncommitted captured window");
  const int64_t cap_rows = m.capture_limit();
  if (n < 1 || (n > 1 && n > cap_rows)) return false;  // not one recorded chunk: the loop verifies on a clone
  m.check_input(*st, tokens);
  std::vector<std::vector<int32_t>> ctx0 = st->ple_ctx;
  if (n == 1) {  // nothing to cut back: commit_prefix can only keep the one row
    forward(trial, tokens, Logits::kAll, logits);
  } else {
    if (m.capl.rows == 0) m.capl = capture_layout(m.c, cap_rows);  // chunk_rows, capture_rows fixed at load
    if (st->cap.bytes() == 0)  // sized once: the state's captured graphs hold its address
      st->cap = dc::DeviceBuffer(m.capl.bytes, "qwen_next verify capture records (per state)");
    const int64_t V = m.c.vocab;
    try {
      m.forward_chunk(*st, tokens, Logits::kAll, true);
    } catch (...) {
      st->ple_ctx = std::move(ctx0);
      throw;
    }
    // The MTP push is still in flight, and clone() copies on the legacy stream.
    if (st->mtp_on) DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
    const float* src = static_cast<const float*>(m.logits_host->p);
    logits.assign(src, src + n * V);
  }
  st->cap_tokens.assign(tokens.begin(), tokens.end());
  st->cap_ple_ctx0 = std::move(ctx0);
  return true;
}

void QwenNextCudaModel::commit_prefix(ModelState& trial, int64_t keep) {
  CudaState& st = cuda_state(trial);
  Impl& m = *impl_;
  const Config& c = m.c;
  const int64_t n = int64_t(st.cap_tokens.size());
  check_commit_keep("qwen_next cuda", n, keep);
  if (keep < n) {
    uint8_t* sb = st.buf.as<uint8_t>();
    const size_t ssm_bytes = size_t(c.v_heads * c.k_dim * c.v_dim) * sizeof(float);
    const int64_t C = c.conv_dim(), W = c.wide(), ple_hist = (c.ple_conv_k - 1) * c.ngram;
    for (int64_t l = 0; l < c.layers; ++l) {
      const LayerOffsets& o = m.lay.layers[size_t(l)];
      const CaptureOffsets& k = m.capl.layers[size_t(l)];
      const DLayer& L = m.dw.layers[size_t(l)];
      if (L.gdn) {  // state after row keep-1; conv state = history rows keep .. keep+K-2
        DS4_CUDA_CHECK(cudaMemcpyAsync(sb + o.ssm, m.CAP(st, k.ssm) + (keep - 1) * (ssm_bytes / sizeof(float)), ssm_bytes,
                                       cudaMemcpyDeviceToDevice, m.stream));
        DS4_CUDA_CHECK(cudaMemcpyAsync(sb + o.conv, m.CAP(st, k.conv) + keep * C, size_t((c.conv_k - 1) * C) * sizeof(float),
                                       cudaMemcpyDeviceToDevice, m.stream));
      }
      if (L.ple) {
        DS4_CUDA_CHECK(cudaMemcpyAsync(sb + o.ple_conv, m.CAP(st, k.ple_conv) + keep * W, size_t(ple_hist * W) * sizeof(float),
                                       cudaMemcpyDeviceToDevice, m.stream));
        const size_t pi = size_t(L.ple->index);
        std::vector<int32_t> hist(st.cap_ple_ctx0[pi]);  // last ngram-1 of [context before ; kept tokens]
        hist.insert(hist.end(), st.cap_tokens.begin(), st.cap_tokens.begin() + keep);
        st.ple_ctx[pi].assign(hist.end() - int64_t(st.cap_ple_ctx0[pi].size()), hist.end());
      }
    }
    // QSA needs no copy: K/V/raw keys past the position are rewritten before any row reads
    // them, and a pooled block the dropped rows completed is pooled again when a later row
    // completes it (select reads only blocks complete at its position).
    st.pos = st.pos - n + keep;
    const int32_t p = int32_t(st.pos);
    DS4_CUDA_CHECK(cudaMemcpyAsync(sb + m.lay.pos, &p, sizeof p, cudaMemcpyHostToDevice, m.stream));
    DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  }
  // The MTP head: its ring holds the window's rows by position, so the kept ones are its
  // pending rows and last_wide already; only pairs consumed past them go back (none unless a
  // draft ran on the uncommitted window: forward_chunk catches up to the window's start).
  m.mtp_keep_through(st, st.pos);
  st.cap_tokens.clear();
  st.cap_ple_ctx0.clear();
}

}  // namespace ds4::qwen_next
