// The multi-row forward of the CUDA GLM 5.x model: a chunk of up to cl.rows tokens (prefill
// chunk, speculative verify of k+1 rows) through every layer with each weight matrix read
// once per chunk (backend/cuda gemv_rows), while the parts that carry state from one token to
// the next run row by row in token order inside the layer:
//   - KDA: conv1d state and the delta-rule recurrence, per row;
//   - MLA: latent append, indexer append + selection, attention, per row at its own position
//     (row t sees the rows before it: they were appended earlier in the same layer);
//   - MoE: routing per row, then the (token, expert) pairs grouped per expert (moe_group) so
//     each used expert is read once for all the rows routed to it.
// Row t's per-token kernels are the decode step's, run on row t's copy of the step scratch
// (step_layout.h ChunkLayout); row t's position is positions[t] = *pos + t on the device, so
// a chunk of a given size and logits mode is captured once per state as a CUDA graph.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/activation.h"
#include "backend/cuda/conv1d.h"
#include "backend/cuda/delta_rule.h"
#include "backend/cuda/hyper_connections.h"
#include "backend/cuda/moe_group.h"
#include "backend/cuda/norm.h"
#include "models/glm5/cuda/kernels.h"
#include "models/glm5/cuda/model_impl.h"

namespace ds4::glm5 {

namespace {

__global__ void chunk_positions_kernel(const int32_t* pos, int32_t* positions, int32_t rows) {
  if (int32_t(threadIdx.x) < rows) positions[threadIdx.x] = *pos + int32_t(threadIdx.x);
}
__global__ void advance_kernel(int32_t* pos, int32_t rows) { *pos += rows; }

}  // namespace

// y rows {rows, ...} = W x rows, both in the row scratches (stride rs() floats).
void Glm5CudaModel::Impl::mgemv(const WeightMatrix& w, size_t x_off, size_t y_off) {
  dc::GemvRows r;
  r.n = int(rows), r.x_row = rs(), r.y_row = rs();
  dc::gemv_rows(w, R(0, x_off), R(0, y_off), r, stream);
}

void Glm5CudaModel::Impl::mproj(const dc::DProj& p, size_t x_off, size_t y_off) {
  dc::GemvRows r;
  r.n = int(rows), r.x_row = rs(), r.y_row = rs();
  dc::gemv_proj_rows(p, R(0, x_off), R(0, y_off), r, stream);
}

void Glm5CudaModel::Impl::hc_in_rows(const DHc& h, const float* norm) {
  mgemv(h.fn, cur_off, sl.mix);
  dc::hc_pre_f32(R(0, sl.mix), h.scale, h.base, h.dims, R(0, cur_off), norm, R(0, sl.in), R(0, sl.post), R(0, sl.comb),
                 dc::HcRows{rows, rs()}, stream);
}

void Glm5CudaModel::Impl::hc_out_rows(const DHc& h) {
  dc::hc_post_f32(h.dims, R(0, sl.y), R(0, cur_off), R(0, sl.post), R(0, sl.comb), R(0, alt_off),
                  dc::HcRows{rows, rs()}, stream);
  std::swap(cur_off, alt_off);
}

// kda() of model_cuda.cu over the rows; conv state and recurrence advance row by row.
void Glm5CudaModel::Impl::kda_rows(const DKda& k, float* conv, float* rec) {
  const int64_t hd = c.linear_head_dim, nh = c.linear_num_heads, qkv = hd * nh;
  const KdaShape ksh{nh, hd, c.has_lower_bound, c.linear_lower_bound, c.rms_norm_eps};
  const dc::DeltaRuleShape dsh{nh, nh, hd, hd, true};
  mproj(k.in, sl.in, sl.kraw);  // {rows, [q | k | v | f_a | g_a | b]}
  for (int64_t t = 0; t < rows; ++t)
    dc::conv1d_step_f32(R(t, sl.kraw), k.conv, conv, 3 * qkv, c.linear_conv_kernel_dim, 1, true, R(t, sl.kconv), stream);
  mgemv(k.f_b, sl.fa, sl.kg);
  mgemv(k.g_b, sl.ga, sl.kgate);
  const Rows all{rows, rs()};  // gates and the output norm do not read the recurrent state
  kda_gates(R(0, sl.kg), R(0, sl.kb), k.a_log, k.dt_bias, ksh, stream, all);
  for (int64_t t = 0; t < rows; ++t) {
    dc::delta_rule_qk_l2norm(R(t, sl.kconv), dsh, stream);
    dc::delta_rule_step(R(t, sl.kconv), R(t, sl.kg), R(t, sl.kb), rec, R(t, sl.ko), dsh, stream);
  }
  kda_gated_norm(R(0, sl.ko), R(0, sl.kgate), k.o_norm, ksh, stream, all);
  mgemv(k.o, sl.ko, sl.y);
}

// mla() of model_cuda.cu over the rows. The projections (q_a, kv_a, indexer, q_b, W_uk) do
// not read the cache, so they run for all rows first; then per row in order: append its
// latent (and indexer key) at its position, select, attend. Each row keeps its own
// selection list (row scratch) for the shared-indexer layers after this one.
void Glm5CudaModel::Impl::mla_rows(const DMla& m, const LayerOffsets& o, uint8_t* sb) {
  auto SF = [&](size_t off) { return reinterpret_cast<float*>(sb + off); };
  const int64_t nah = c.num_attention_heads, kvr = c.kv_lora_rank, nope = c.qk_nope_head_dim, vd = c.v_head_dim;
  const MlaShape msh{nah, kvr, c.index_topk + c.index_kpool - 1, 1.0f / std::sqrt(float(nope)), c.rms_norm_eps};
  const IndexerShape ish{c.index_n_heads, c.index_head_dim, c.index_kpool, c.kpool_budget(), lay.max_pools};
  const IndexerCache ic{SF(o.idx_keys), SF(o.idx_gates), SF(o.idx_pools)};
  const int32_t* positions = C<int32_t>(cl.positions);
  mproj(m.in, sl.in, sl.mraw);  // {rows, [q_a | kv_a | idx k | idx gate | idx weights]}
  for (int64_t t = 0; t < rows; ++t)
    dc::rmsnorm_f32(R(t, sl.mraw), m.q_a_norm, R(t, sl.qres), 1, c.q_lora_rank, c.rms_norm_eps, stream);
  if (m.has_indexer) mgemv(m.idx.wq_b, sl.qres, sl.iq);
  mgemv(m.q_b, sl.qres, sl.q);  // {rows, heads, nope}
  dc::GemvRows r;  // per head (batch entry) and row: q_lat[t][h] = W_uk[h]^T q[t][h]
  r.n = int(rows), r.x_row = rs(), r.y_row = rs();
  r.batch = dc::GemvBatch{int(nah), nullptr, m.uk_stride, 0, nope, kvr};
  dc::gemv_rows(m.uk_t, R(0, sl.q), R(0, sl.qlat), r, stream);
  for (int64_t t = 0; t < rows; ++t) {
    int32_t* sel_idx = reinterpret_cast<int32_t*>(R(t, sl.sel_idx));
    int32_t* sel_count = reinterpret_cast<int32_t*>(R(t, sl.sel_count));
    mla_append(R(t, sl.mkv), m.kv_a_norm, SF(o.latent), positions + t, msh, stream);
    if (m.has_indexer) {
      indexer_append(R(t, sl.ik), R(t, sl.igate), m.idx.k_norm_w, m.idx.k_norm_b, m.idx.ape, ic, ish, positions + t,
                     stream);
      indexer_select(R(t, sl.iq), R(t, sl.iw), ic, ish, positions + t, R(t, sl.pool_scores),
                     reinterpret_cast<uint8_t*>(R(t, sl.keep)), sel_idx, sel_count, stream);
    }
    mla_attend(R(t, sl.qlat), SF(o.latent), sel_idx, sel_count, msh, R(t, sl.att_scores), R(t, sl.olat), stream);
  }
  r.batch = dc::GemvBatch{int(nah), nullptr, m.uv_stride, 0, kvr, vd};  // o[t][h] = W_uv[h] o_lat[t][h]
  dc::gemv_rows(m.uv, R(0, sl.olat), R(0, sl.ov), r, stream);
  mgemv(m.o, sl.ov, sl.y);
}

// ffn()'s MoE over the rows: route each row, group, each used expert once for its rows.
void Glm5CudaModel::Impl::moe_rows(const DMoe& m) {
  const int64_t H = c.hidden_size, K = c.num_experts_per_tok, I = c.moe_intermediate_size, Sh = m.sh_down.cols;
  const int64_t E = c.n_routed_experts, pairs = rows * K;
  const float lim = c.swiglu_limit;
  int32_t* ids = C<int32_t>(cl.ids);
  float* wts = C(cl.wts);
  mproj(m.in, sl.in, sl.gu);  // {rows, [shared gate | shared up | router]}
  const RouteShape rsh{E, K, c.norm_topk_prob, c.routed_scaling_factor};
  moe_route(R(0, sl.router), m.bias, rsh, ids, wts, stream, Rows{rows, rs()});  // ids, wts {rows, K}
  const dc::MoeGroup g{C<int32_t>(cl.experts), C<int32_t>(cl.live), C<int32_t>(cl.counts), C<int32_t>(cl.tok),
                   C<int32_t>(cl.slot), kGroupRows};
  dc::moe_group(ids, rows, K, E, g, stream);
  for (int64_t t = 0; t < rows; ++t) dc::swiglu_clamp_rows_f32(R(t, sl.gu), 1, Sh, lim, R(t, sl.act), stream);
  mgemv(m.sh_down, sl.act, sl.sh_out);
  // Entry u = a used expert (at most min(E, rows * K) of them, *live decides on the device).
  dc::GemvRows r;
  r.n = int(rows);
  r.batch = dc::GemvBatch{int(std::min(E, pairs)), g.experts, m.gate_up.stride, m.gate_up.scale_stride, 0, 0};
  r.live = g.live, r.counts = g.counts;
  r.x_row = rs(), r.x_idx = g.tok, r.y_row = 2 * I, r.y_idx = g.slot;  // egu {rows * K, 2I}
  dc::gemv_rows(m.gate_up.first, R(0, sl.in), C(cl.egu), r, stream);
  dc::swiglu_clamp_rows_f32(C(cl.egu), pairs, I, lim, C(cl.eact), stream);
  r.batch.id_stride = m.down.stride, r.batch.id_scale_stride = m.down.scale_stride;
  r.x_row = I, r.x_idx = g.slot, r.y_row = H;  // eact {rows * K, I} -> ey {rows * K, H}
  dc::gemv_rows(m.down.first, C(cl.eact), C(cl.ey), r, stream);
  moe_combine(C(cl.ey), wts, K, R(0, sl.sh_out), H, R(0, sl.y), stream, Rows{rows, rs()});  // ey {rows, K, H}
}

void Glm5CudaModel::Impl::ffn_rows(const DLayer& L) {
  if (L.sparse) return moe_rows(L.moe);
  const int64_t inter = L.mlp.down.cols;
  mproj(L.mlp.gate_up, sl.in, sl.gu);
  for (int64_t t = 0; t < rows; ++t)
    dc::swiglu_clamp_rows_f32(R(t, sl.gu), 1, inter, c.swiglu_limit, R(t, sl.act), stream);
  mgemv(L.mlp.down, sl.act, sl.y);
}

// Everything of one chunk of `rows` tokens: input rows in, every layer, logits out (row
// rows-1 to pinned row 0 for kLast; all rows for kAll), position counter += rows.
void Glm5CudaModel::Impl::enqueue_chunk(CudaState& st, Logits mode) {
  uint8_t* sb = st.buf.as<uint8_t>();
  int32_t* pos = reinterpret_cast<int32_t*>(sb + lay.pos);
  const int64_t V = c.vocab_size;
  cur_off = sl.x, alt_off = sl.x2;
  DS4_CUDA_CHECK(cudaMemcpy2DAsync(R(0, sl.x), cl.row_bytes, in_host->p, sl.in_bytes, sl.in_bytes, size_t(rows),
                                   cudaMemcpyHostToDevice, stream));
  chunk_positions_kernel<<<1, 32, 0, stream>>>(pos, C<int32_t>(cl.positions), int32_t(rows));
  DS4_CUDA_CHECK_LAUNCH();
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const DLayer& L = dw.layers[size_t(l)];
    const LayerOffsets& o = lay.layers[size_t(l)];
    hc_in_rows(L.attn_hc, L.input_norm);
    if (L.kda) kda_rows(*L.kda, reinterpret_cast<float*>(sb + o.conv), reinterpret_cast<float*>(sb + o.rec));
    else mla_rows(*L.mla, o, sb);
    hc_out_rows(L.attn_hc);
    hc_in_rows(L.ffn_hc, L.post_norm);
    ffn_rows(L);
    hc_out_rows(L.ffn_hc);
  }
  if (mode == Logits::kAll) {
    for (int64_t t = 0; t < rows; ++t)
      hc_mean_norm(R(t, cur_off), c.hc_mult, c.hidden_size, dw.norm, c.rms_norm_eps, R(t, sl.hfin), stream);
    mgemv(dw.lm_head, sl.hfin, sl.logits);
    DS4_CUDA_CHECK(cudaMemcpy2DAsync(logits_host->p, size_t(V) * sizeof(float), R(0, sl.logits), cl.row_bytes,
                                     size_t(V) * sizeof(float), size_t(rows), cudaMemcpyDeviceToHost, stream));
  } else if (mode == Logits::kLast) {
    const int64_t t = rows - 1;
    hc_mean_norm(R(t, cur_off), c.hc_mult, c.hidden_size, dw.norm, c.rms_norm_eps, R(t, sl.hfin), stream);
    dc::gemv(dw.lm_head, R(t, sl.hfin), R(t, sl.logits), stream);
    DS4_CUDA_CHECK(cudaMemcpyAsync(logits_host->p, R(t, sl.logits), size_t(V) * sizeof(float), cudaMemcpyDeviceToHost,
                                   stream));
  }
  advance_kernel<<<1, 1, 0, stream>>>(pos, int32_t(rows));
  DS4_CUDA_CHECK_LAUNCH();
}

void Glm5CudaModel::Impl::run_chunk(CudaState& st, int64_t n, Logits mode) {
  rows = n;
  const int64_t key = n * 3 + (mode == Logits::kAll ? 2 : mode == Logits::kLast ? 1 : 0);
  cudaGraphExec_t& exec = st.chunk_graph[key];
  replay(exec, false, [&] { enqueue_chunk(st, mode); });
}

}  // namespace ds4::glm5
