// The CUDA GLM 5.x Flash model: per-state device caches, the decode step (one token through
// every layer, all on one stream, position read from device memory) and its CUDA graph, and
// the host side of each token (the embedding row, dequantized on the host and shipped as
// the step's input streams).
#include "models/glm5/cuda/model_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "backend/cuda/activation.h"
#include "backend/cuda/check.h"
#include "backend/cuda/conv1d.h"
#include "backend/cuda/delta_rule.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/hyper_connections.h"
#include "backend/cuda/embed.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/synthetic_fill.h"
#include "core/error.h"
#include "models/cuda_chunking.h"
#include "models/glm5/config.h"
#include "models/glm5/cuda/cuda_state.h"
#include "models/glm5/cuda/device_weights.h"
#include "models/glm5/cuda/kernels.h"
#include "models/glm5/cuda/model_impl.h"
#include "models/glm5/cuda/step_layout.h"
#include "models/glm5/weights.h"

namespace ds4::glm5 {

void Glm5CudaModel::Impl::embed(int32_t t, float* out) const {
  if (opt.synthetic_seed == 0) return dequantize_row(w.embed, t, out);
  dc::synthetic_row(opt.synthetic_seed, t, c.hidden_size, 1.0f, out);
}

void Glm5CudaModel::Impl::input_row(int32_t t, int64_t row) const {
  const int64_t H = c.hidden_size;
  float* in = static_cast<float*>(in_host->p) + row * int64_t(sl.in_bytes / sizeof(float));
  embed(t, in);  // every stream starts as the embedding
  for (int64_t k = 1; k < c.hc_mult; ++k) std::memcpy(in + k * H, in, size_t(H) * sizeof(float));
}

// in {hidden} = rmsnorm(collapse(streams), norm); post/comb kept in scratch for hc_out.
// backend/cuda/hyper_connections: fn runs on the raw streams, the flat norm is a scalar.
// A split fn (DHc::splits > 1) takes hc_fused.cu: one launch for the product, the flat norm,
// Sinkhorn and the collapse, with the pending hc_post folded in (it writes the streams first,
// exactly as hc_post_f32 would); the chunk's rows take the same kernel (chunk.cu hc_in_rows),
// so a decode step still equals a chunk's row bit for bit. decode_tuning does not switch this
// path: off, it used to take the split fn's gemv_batched + hc_pre_f32, another rounding than
// the chunk rows' fused kernel, so decode steps stopped equalling chunk rows. Both stay on the
// fused kernel (their equality measured on the H200: test_glm5_cuda item 7), and decode_tuning
// switches only launches that never change a result (f_b|g_b as one launch, rows per block,
// the side stream).
void Glm5CudaModel::Impl::hc_in(const DHc& h, const float* norm) {
  if (h.splits > 1) {
    const bool fold = post_pending;
    dc::hc_pre_fused(hc_fn(h), h.scale, h.base, h.dims, fold ? alt : cur, fold ? &pending_post : nullptr, norm,
                     S(sl.in), S(sl.post), S(sl.comb), hc_scratch(S(sl.mix)), dc::HcRows{}, stream);
    if (fold) std::swap(cur, alt), post_pending = false;
    op(fold ? "hc post + pre (fused)" : "hc pre (fused)");
    return;
  }
  flush_post();
  // A row-major fn (one split), as the chunk's rows: rows per block never change a gemv's
  // result (gemv.h): 24 one-row blocks instead of 3.
  dc::gemv(h.fn, cur, S(sl.mix), stream, dc::GemvOptions{dc::GemvPath::kAuto, opt.decode_tuning ? 1 : 0});
  op("hc mix (fn gemv)");
  dc::HcDims d = h.dims;
  d.mix_splits = h.splits;
  dc::hc_pre_f32(S(sl.mix), h.scale, h.base, d, cur, norm, S(sl.in), S(sl.post), S(sl.comb), stream);
  op("hc pre (sinkhorn, collapse, norm)");
}

// streams = post * y + comb^T streams, written to the other buffer (the step's buffer choice
// is fixed at capture: two swaps per layer). With the fused hc_in it waits for the next one.
void Glm5CudaModel::Impl::hc_out(const DHc& h) {
  pending_post = dc::HcPostIn{S(sl.y), cur, S(sl.post), S(sl.comb)};
  pending_dims = h.dims;
  post_pending = true;
  if (h.splits <= 1) flush_post();
}

void Glm5CudaModel::Impl::flush_post() {
  if (!post_pending) return;
  const dc::HcPostIn& p = pending_post;
  dc::hc_post_f32(pending_dims, p.block_out, p.residual, p.post, p.comb, alt, stream);
  op("hc post");
  std::swap(cur, alt);
  post_pending = false;
}

// KDA (kda.cpp): y = o_proj(gated_norm(delta_rule(conv(q|k|v)))).
void Glm5CudaModel::Impl::kda(const DKda& k, float* conv, float* rec) {
  const int64_t hd = c.linear_head_dim, nh = c.linear_num_heads, qkv = hd * nh;
  const KdaShape ksh{nh, hd, c.has_lower_bound, c.linear_lower_bound, c.rms_norm_eps};
  const dc::DeltaRuleShape dsh{nh, nh, hd, hd, true};
  dc::gemv_proj(k.in, S(sl.in), S(sl.kraw), stream, gopt());  // [q | k | v | f_a | g_a | b]
  op("kda in proj");
  // Side branch: the gates (f_a, g_a, b of kraw -> kg, kgate, kb); main: the conv of q|k|v.
  fork();
  // f_b and g_b as one launch's two entries (the same kernel per entry: gemv's bits) where the
  // uploads and the scratch put them at fixed strides.
  const int64_t x_step = int64_t(sl.ga - sl.fa) / 4, y_step = int64_t(sl.kgate - sl.kg) / 4;
  if (opt.decode_tuning && k.fg_stride && x_step % 4 == 0 && x_step >= hd && y_step >= qkv) {
    dc::gemv_batched(k.f_b, S(sl.fa), S(sl.kg), dc::GemvBatch{2, nullptr, k.fg_stride, 0, x_step, y_step}, side(),
                     gopt());
    op("kda f_b|g_b");
  } else {
    dc::gemv(k.f_b, S(sl.fa), S(sl.kg), side());
    op("kda f_b");
    dc::gemv(k.g_b, S(sl.ga), S(sl.kgate), side());
    op("kda g_b");
  }
  kda_gates(S(sl.kg), S(sl.kb), k.a_log, k.dt_bias, ksh, side());
  op("kda gates");
  dc::conv1d_step_f32(S(sl.kraw), k.conv, conv, 3 * qkv, c.linear_conv_kernel_dim, 1, true, S(sl.kconv), stream);
  op("kda conv");
  dc::delta_rule_qk_l2norm(S(sl.kconv), dsh, stream);
  op("kda qk l2norm");
  join();
  dc::delta_rule_step(S(sl.kconv), S(sl.kg), S(sl.kb), rec, S(sl.ko), dsh, stream);
  op("kda recurrence");
  kda_gated_norm(S(sl.ko), S(sl.kgate), k.o_norm, ksh, stream);
  op("kda gated norm");
  dc::gemv(k.o, S(sl.ko), S(sl.y), stream, gopt());
  op("kda o");
}

// MLA + DSA (mla.cpp, indexer.cpp), absorbed form over the latent cache.
void Glm5CudaModel::Impl::mla(const DMla& m, const LayerOffsets& o, uint8_t* sb, const int32_t* pos) {
  auto SF = [&](size_t off) { return reinterpret_cast<float*>(sb + off); };
  const int64_t nah = c.num_attention_heads, kvr = c.kv_lora_rank, nope = c.qk_nope_head_dim, vd = c.v_head_dim;
  const MlaShape msh{nah, kvr, c.index_topk + c.index_kpool - 1, 1.0f / std::sqrt(float(nope)), c.rms_norm_eps};
  // The selection: written by full-indexer layers, read by the shared layers after them.
  int32_t* sel_idx = reinterpret_cast<int32_t*>(scratch.as<uint8_t>() + sl.sel_idx);
  int32_t* sel_count = reinterpret_cast<int32_t*>(scratch.as<uint8_t>() + sl.sel_count);
  dc::gemv_proj(m.in, S(sl.in), S(sl.mraw), stream, gopt());  // [q_a | kv_a | idx k | idx gate | idx weights]
  op("mla in proj");
  dc::rmsnorm_f32(S(sl.mraw), m.q_a_norm, S(sl.qres), 1, c.q_lora_rank, c.rms_norm_eps, stream);
  op("mla q_a norm");
  // Side branch: the latent append and the indexer (the selection); main: q_b and W_uk.
  fork();
  mla_append(S(sl.mkv), m.kv_a_norm, SF(o.latent), pos, msh, side());
  op("mla append");
  if (m.has_indexer) {
    const IndexerShape ish{c.index_n_heads, c.index_head_dim, c.index_kpool, c.kpool_budget(), lay.max_pools};
    const IndexerCache ic{SF(o.idx_keys), SF(o.idx_gates), SF(o.idx_pools)};
    indexer_append(S(sl.ik), S(sl.igate), m.idx.k_norm_w, m.idx.k_norm_b, m.idx.ape, ic, ish, pos, side());
    op("indexer append");
    dc::gemv(m.idx.wq_b, S(sl.qres), S(sl.iq), side(), gopt());
    op("indexer wq_b");
    indexer_select(S(sl.iq), S(sl.iw), ic, ish, pos, S(sl.pool_scores), scratch.as<uint8_t>() + sl.keep, sel_idx,
                   sel_count, side());
    op("indexer select");
  }
  dc::gemv(m.q_b, S(sl.qres), S(sl.q), stream, gopt());  // {heads, nope}
  op("mla q_b");
  // q_lat[h] = W_uk[h]^T q[h] {heads, kv_lora}; attention; o[h] = W_uv[h] o_lat[h] {heads, v}.
  dc::gemv_batched(m.uk_t, S(sl.q), S(sl.qlat), dc::GemvBatch{int(nah), nullptr, m.uk_stride, 0, nope, kvr}, stream);
  op("mla uk (absorbed q)");
  join();
  // mla_attend's three launches, timed apart by the profile.
  mla_scores(S(sl.qlat), SF(o.latent), sel_idx, sel_count, msh, S(sl.att_scores), stream);
  op("mla attend: scores");
  mla_softmax(sel_count, msh, S(sl.att_scores), stream, Rows{});
  op("mla attend: softmax");
  mla_output(S(sl.att_scores), SF(o.latent), sel_idx, sel_count, msh, S(sl.olat), stream);
  op("mla attend: output");
  dc::gemv_batched(m.uv, S(sl.olat), S(sl.ov), dc::GemvBatch{int(nah), nullptr, m.uv_stride, 0, kvr, vd}, stream);
  op("mla uv");
  dc::gemv(m.o, S(sl.ov), S(sl.y), stream, gopt());
  op("mla o");
}

// Dense clamped-SwiGLU MLP or the routed MoE with its shared expert (moe.cpp).
void Glm5CudaModel::Impl::ffn(const DLayer& L) {
  const int64_t H = c.hidden_size;
  const float lim = c.swiglu_limit;
  if (!L.sparse) {
    const int64_t inter = L.mlp.down.cols;
    dc::gemv_proj(L.mlp.gate_up, S(sl.in), S(sl.gu), stream, gopt());
    op("dense mlp gate_up");
    dc::swiglu_clamp_rows_f32(S(sl.gu), 1, inter, lim, S(sl.act), stream);
    op("dense mlp swiglu");
    dc::gemv(L.mlp.down, S(sl.act), S(sl.y), stream, gopt());
    op("dense mlp down");
    return;
  }
  const DMoe& m = L.moe;
  const int64_t K = c.num_experts_per_tok, I = c.moe_intermediate_size, Sh = m.sh_down.cols;
  int32_t* ids = reinterpret_cast<int32_t*>(scratch.as<uint8_t>() + sl.ids);
  dc::gemv_proj(m.in, S(sl.in), S(sl.gu), stream, gopt());  // [shared gate | shared up | router]
  op("moe in proj (shared gate|up, router)");
  const RouteShape rsh{c.n_routed_experts, K, c.norm_topk_prob, c.routed_scaling_factor, c.n_group, c.topk_group};
  // Side branch: the shared expert (act, sh_out); main: the router and the routed experts.
  fork();
  if (Sh > 0) {
    dc::swiglu_clamp_rows_f32(S(sl.gu), 1, Sh, lim, S(sl.act), side());
    op("moe shared swiglu");
    dc::gemv(m.sh_down, S(sl.act), S(sl.sh_out), side(), gopt());
    op("moe shared down");
  } else {  // n_shared_experts = 0: no shared expert (an empty launch is a CUDA error)
    DS4_CUDA_CHECK(cudaMemsetAsync(S(sl.sh_out), 0, size_t(H) * sizeof(float), side()));
  }
  moe_route(S(sl.router), m.bias, rsh, ids, S(sl.wts), stream);
  op("moe route");
  dc::gemv_batched(m.gate_up.first, S(sl.in), S(sl.egu),
                   dc::GemvBatch{int(K), ids, m.gate_up.stride, m.gate_up.scale_stride, 0, 2 * I}, stream, gopt());
  op("moe experts gate_up");
  dc::swiglu_clamp_rows_f32(S(sl.egu), K, I, lim, S(sl.eact), stream);
  op("moe experts swiglu");
  dc::gemv_batched(m.down.first, S(sl.eact), S(sl.ey),
                   dc::GemvBatch{int(K), ids, m.down.stride, m.down.scale_stride, I, H}, stream, gopt());
  op("moe experts down");
  join();
  moe_combine(S(sl.ey), S(sl.wts), K, S(sl.sh_out), H, S(sl.y), stream);
  op("moe combine");
}

void Glm5CudaModel::Impl::layer(CudaState& st, int64_t l) {
  const DLayer& L = dw.layers[size_t(l)];
  const LayerOffsets& o = lay.layers[size_t(l)];
  uint8_t* sb = st.buf.as<uint8_t>();
  const int32_t* pos = reinterpret_cast<const int32_t*>(sb + lay.pos);
  hc_in(L.attn_hc, L.input_norm);
  if (L.kda) kda(*L.kda, reinterpret_cast<float*>(sb + o.conv), reinterpret_cast<float*>(sb + o.rec));
  else mla(*L.mla, o, sb, pos);
  hc_out(L.attn_hc);
  hc_in(L.ffn_hc, L.post_norm);
  ffn(L);
  hc_out(L.ffn_hc);
}

void Glm5CudaModel::Impl::enqueue_step(CudaState& st, bool logits) {
  const int64_t W = c.hc_mult * c.hidden_size;
  cur = S(sl.x), alt = S(sl.x2);
  post_pending = false;
  op("start");
  DS4_CUDA_CHECK(cudaMemcpyAsync(cur, in_host->p, sl.in_bytes, cudaMemcpyHostToDevice, stream));
  op("input copy");
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    layer(st, l);
    if (tap) flush_post();
    if (tap) {  // direct launches only (never captured)
      std::vector<float> row(static_cast<size_t>(W));
      DS4_CUDA_CHECK(cudaMemcpyAsync(row.data(), cur, size_t(W) * 4, cudaMemcpyDeviceToHost, stream));
      DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
      auto& out = (*tap)[size_t(l)];
      out.insert(out.end(), row.begin(), row.end());
    }
  }
  flush_post();  // the last layer's
  // The MTP head queues every token's normed output (mtp.cu), logits or not.
  if (logits || st.mtp_on) {
    hc_mean_norm(cur, c.hc_mult, c.hidden_size, dw.norm, c.rms_norm_eps, S(sl.hfin), stream);
    op("head norm");
  }
  if (st.mtp_on) {
    mtp_push(st, S(sl.hfin), 1, 0);
    op("mtp push");
  }
  if (logits) {
    dc::gemv(dw.lm_head, S(sl.hfin), S(sl.logits), stream);
    op("lm_head");
    if (top_only) cand->enqueue(S(sl.logits), c.vocab_size, stream);
    else DS4_CUDA_CHECK(cudaMemcpyAsync(logits_host->p, S(sl.logits), size_t(c.vocab_size) * sizeof(float),
                                        cudaMemcpyDeviceToHost, stream));
    op("logits out");
  }
  dc::enqueue_position_increment(reinterpret_cast<int32_t*>(st.buf.as<uint8_t>() + lay.pos), stream);
  op("position");
}

void Glm5CudaModel::Impl::run_step(CudaState& st, bool logits, bool direct) {
  fresh_graphs(st);
  replay(st.graph[!logits ? 0 : top_only ? 2 : 1], direct || prof.on, [&] { enqueue_step(st, logits); });
  if (prof.on) prof.collect();
}

namespace {

void check_gemv_rows(const CudaModelOptions& o) {
  const int r = o.decode_gemv_rows;
  if (r != 0 && r != 1 && r != 2 && r != 4 && r != 8)
    throw InputError("glm5 cuda: decode_gemv_rows " + std::to_string(r) + " is not 0, 1, 2, 4 or 8");
}

// What the GPU step cannot run yet, refused at load with the field named.
void check_supported(const Config& c, const Weights& w, const std::string& where) {
  if (c.linear_head_dim % 4 != 0)
    throw InputError(where + ": linear_head_dim " + std::to_string(c.linear_head_dim) +
                     " must be a multiple of 4 on the CUDA backend");
  if (c.hc_mult > dc::kMaxHc)
    throw InputError(where + ": hc_mult " + std::to_string(c.hc_mult) + " > " + std::to_string(dc::kMaxHc));
  if (c.num_experts_per_tok > 64)
    throw InputError(where + ": num_experts_per_tok " + std::to_string(c.num_experts_per_tok) + " > 64");
  for (const WeightMatrix* m : {&w.lm_head, &w.layers[0].attn_hc.w.fn})
    if (!dc::gemv_supports(m->type))
      throw InputError(where + ": weight type " + std::string(dtype_name(m->type)) + " has no CUDA gemv");
}

// Rows of the chunk scratch: chunk_rows, or prefill_rows when larger, halved (not below
// chunk_rows) while the scratch, the GEMMs' weight tile and one state of max_context would
// not fit beside the uploaded weights under admission's headroom (memory.h).
int64_t prefill_chunk_rows(const Config& c, const Glm5CudaModel::Impl& m, const CudaModelOptions& copt) {
  const int64_t base = copt.chunk_rows;
  if (copt.prefill_rows <= base) return base;
  const size_t fixed = m.lay.bytes + size_t(kMatmulTile) * sizeof(float) + (size_t(64) << 20) + dc::kDefaultHeadroom;
  const int64_t rows = rows_that_fit(base, copt.prefill_rows, dc::device_memory_info().free_bytes, fixed,
                                     [&](int64_t r) { return chunk_layout(c, m.sl, r, m.qcap).bytes; });
  if (rows < copt.prefill_rows)
    std::fprintf(stderr, "glm5 cuda: prefill chunks of %lld rows (%d asked; device memory)\n", (long long)rows,
                 copt.prefill_rows);
  return std::max(rows, base);
}

}  // namespace

Glm5CudaModel::Glm5CudaModel(std::unique_ptr<TensorSource> src, const LoadOptions& opt, const CudaModelOptions& copt)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.src = std::move(src);
  m.opt = copt;
  const std::string type = m.src->config().value("model_type", std::string());
  if (type != "glm5_next" && type != "glm5_next_text")
    throw InputError(m.src->path() + ": model_type '" + type + "' is not glm5_next");
  m.c = parse_config(m.src->config(), m.src->path());
  m.w = bind_weights(*m.src, m.c);
  const Config& c = m.c;
  check_supported(c, m.w, m.src->path());
  m.info.family = "glm5";
  m.info.name = m.src->config().value("_name_or_path", std::string("glm5"));
  if (m.info.name.empty()) m.info.name = "glm5";
  m.info.vocab_size = c.vocab_size;
  m.info.hidden_size = c.hidden_size;
  m.info.max_context = opt.max_context > 0 ? std::min(opt.max_context, c.max_position_embeddings)
                                           : c.max_position_embeddings;
  m.info.eos_token_ids = c.eos_token_ids;
  m.info.default_prefill_chunk = 2048;
  if (copt.synthetic_seed != 0) {
    dc::MatrixFill fill = dc::SyntheticFiller{copt.synthetic_seed};
    m.dw = upload_weights(c, m.w, copt.fuse_projections, &fill);
  } else {
    // The MTP head looks its input rows up by device ids: the embedding itself goes up when
    // the device can decode its type (else mtp_enable builds an f32 table).
    m.dw = upload_weights(c, m.w, copt.fuse_projections, nullptr, dc::embed_rows_supports(m.w.embed.type));
  }
  check_hc_fused(m.dw);
  m.info.has_draft_head = m.dw.mtp.has_value();  // the integrated MTP layer (mtp.cu)
  if (copt.chunk_rows < 1 || copt.chunk_rows > dc::kGemvMaxRows)
    throw InputError("glm5 cuda: chunk_rows " + std::to_string(copt.chunk_rows) + " is not in 1.." +
                     std::to_string(dc::kGemvMaxRows));
  if (copt.prefill_rows < 0 || copt.prefill_rows > kMaxPrefillRows || copt.gemm_rows < 0)
    throw InputError("glm5 cuda: prefill_rows " + std::to_string(copt.prefill_rows) + " is not in 0.." +
                     std::to_string(kMaxPrefillRows) + " (or gemm_rows " + std::to_string(copt.gemm_rows) + " < 0)");
  if (copt.batch_rows < 1) throw InputError("glm5 cuda: batch_rows " + std::to_string(copt.batch_rows) + " < 1");
  check_gemv_rows(copt);
  MtpShape mtp;
  if (m.dw.mtp) {
    m.qcap = kMtpQueueChunks * std::max<int64_t>(copt.chunk_rows, 4);
    mtp = MtpShape{m.dw.mtp->layer.kind, m.qcap};
  }
  m.lay = state_layout(c, m.info.max_context, mtp);
  // The scratch's pool scores cover the MTP head's longer history too.
  m.sl = scratch_layout(c, m.info.max_context + (m.dw.mtp ? kMtpMaxDepth : 0));
  m.scratch = dc::DeviceBuffer(m.sl.bytes, "glm5 step scratch");
  m.verify_rows = copt.chunk_rows;
  m.cl = chunk_layout(c, m.sl, prefill_chunk_rows(c, m, copt), m.qcap);
  // The MTP head runs on the chunk path's row scratch, with chunk_rows = 1 too.
  if (m.cl.rows > 1 || m.dw.mtp) m.chunk = dc::DeviceBuffer(m.cl.bytes, "glm5 chunk scratch");
  m.hc_counts = dc::DeviceBuffer(size_t(std::max<int64_t>(m.cl.rows, 1)) * sizeof(unsigned), "glm5 hc counters");
  DS4_CUDA_CHECK(cudaMemset(m.hc_counts.get(), 0, m.hc_counts.bytes()));
  m.info.batched_decode = m.cl.rows > 1;  // decode_batch's rows live in the chunk scratch (batch.cu)
  // verify_batch: the same rows, one group per window (verify_batch.cu), every window the engine
  // sends within one chunk (set_options keeps this up to date).
  m.info.batched_verify = m.info.batched_decode && captures_every_window(m.opt.chunk_rows);
  if (m.cl.rows > copt.chunk_rows) {  // prefill chunks: the GEMMs' cuBLAS handle and weight tile
    const int64_t qkv = c.linear_num_heads * c.linear_head_dim;
    const int64_t cols = std::max({c.hc_mult * c.hidden_size, c.hidden_size, qkv, c.q_lora_rank,
                                   c.num_attention_heads * c.v_head_dim, c.intermediate_size,
                                   c.moe_intermediate_size * c.n_shared_experts, c.qk_nope_head_dim, c.kv_lora_rank});
    m.mm = std::make_unique<dc::MatmulWorkspace>(m.cl.rows, cols, kMatmulTile, 1, "glm5 matmul", dc::model_matmul_precision());
    const int64_t H = c.hidden_size, I = c.moe_intermediate_size;  // experts: gate|up {2I, H}, down {H, I}
    m.gg = dc::make_grouped_gemm(m.cl.rows, c.num_experts_per_tok, c.n_routed_experts, std::max(2 * I, H),
                                 std::max(H, I), *m.mm, "glm5");
  }
  if (m.dw.mtp) {
    m.mids_host = std::make_unique<Pinned>(size_t(std::max(m.qcap, m.cl.rows) + kMtpMaxDepth + 1) * sizeof(int32_t));
    m.mout_host = std::make_unique<Pinned>(size_t(kMtpMaxDepth) * 8 * sizeof(int32_t));
  }
  // Rows of the step input and logits (a chunk's); the one-token step uses row 0.
  const size_t host_rows = size_t(std::max<int64_t>(m.cl.rows, 1));
  m.in_host = std::make_unique<Pinned>(m.sl.in_bytes * host_rows);
  m.logits_host = std::make_unique<Pinned>(size_t(c.vocab_size) * sizeof(float) * host_rows);
  DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&m.side_stream, cudaStreamNonBlocking));
  DS4_CUDA_CHECK(cudaEventCreateWithFlags(&m.fork_ev, cudaEventDisableTiming));
  DS4_CUDA_CHECK(cudaEventCreateWithFlags(&m.join_ev, cudaEventDisableTiming));
}

Glm5CudaModel::~Glm5CudaModel() {
  if (!impl_) return;
  impl_->batch_graphs.clear();
  for (cudaEvent_t e : {impl_->fork_ev, impl_->join_ev})
    if (e) cudaEventDestroy(e);
  for (cudaStream_t s : {impl_->stream, impl_->side_stream})
    if (s) cudaStreamDestroy(s);
}

const ModelInfo& Glm5CudaModel::info() const { return impl_->info; }
const Config& Glm5CudaModel::config() const { return impl_->c; }
const CudaModelOptions& Glm5CudaModel::options() const { return impl_->opt; }
int64_t Glm5CudaModel::prefill_rows() const { return impl_->cl.rows > impl_->verify_rows ? impl_->cl.rows : 0; }

void Glm5CudaModel::set_profiling(bool on) {
  Impl& m = *impl_;
  if (on && !m.prof.on) m.prof.reset();  // a fresh table; turning it off keeps it for op_times()
  m.prof.on = on;
}
const std::map<std::string, double>& Glm5CudaModel::op_times() const { return impl_->prof.ms(); }
void Glm5CudaModel::reset_op_times() { impl_->prof.reset(); }

void Glm5CudaModel::set_options(const CudaModelOptions& copt) {
  Impl& m = *impl_;
  if (copt.synthetic_seed != m.opt.synthetic_seed || copt.fuse_projections != m.opt.fuse_projections)
    throw InputError("glm5 cuda: set_options cannot change synthetic_seed or fuse_projections (fixed at load)");
  check_gemv_rows(copt);
  if (copt.chunk_rows < 1 || copt.chunk_rows > m.verify_rows)
    throw InputError("glm5 cuda: chunk_rows " + std::to_string(copt.chunk_rows) + " is not in 1.." +
                     std::to_string(m.verify_rows) + " (the value loaded with)");
  if (copt.gemm_rows < 0 || copt.prefill_rows < 0 || copt.batch_rows < 1 ||
      (copt.prefill_rows > copt.chunk_rows && copt.prefill_rows > prefill_rows()))
    throw InputError("glm5 cuda: prefill_rows " + std::to_string(copt.prefill_rows) + " exceeds the " +
                     std::to_string(prefill_rows()) + " rows the chunk scratch was sized for (or gemm_rows < 0, " +
                     "batch_rows < 1)");
  // The captured decode step's launches read decode_tuning, decode_side_stream and
  // decode_gemv_rows (kda's f_b|g_b, the hc fn gemv's rows per block, gopt, two_streams): a
  // change drops every captured graph rather than replay the old options' launches (each
  // state's before its next replay, fresh_graphs; the batch graphs now, though none reads these
  // today). No other option shapes a captured graph: chunk, batch, verify and draft graphs take
  // exact-path launches, and a tensor-core prefill chunk launches directly.
  if (copt.decode_tuning != m.opt.decode_tuning || copt.decode_side_stream != m.opt.decode_side_stream ||
      copt.decode_gemv_rows != m.opt.decode_gemv_rows) {
    ++m.graph_epoch;
    m.batch_graphs.clear();
  }
  if (copt.seq_launches != m.opt.seq_launches) m.batch_graphs.clear();  // the batch graphs hold the launches
  m.opt = copt;
  m.info.batched_verify = m.info.batched_decode && captures_every_window(copt.chunk_rows);
}
size_t Glm5CudaModel::weight_bytes() const { return impl_->dw.buffer.bytes(); }

size_t Glm5CudaModel::weight_bytes_per_token() const {
  const Config& c = impl_->c;
  const size_t routed = impl_->dw.routed_bytes;
  return impl_->dw.buffer.bytes() - impl_->dw.mtp_bytes - routed +
         size_t(double(routed) * double(c.num_experts_per_tok) / double(c.n_routed_experts));
}

double Glm5CudaModel::chunk_bytes_ratio(int64_t rows) const {
  const Config& c = impl_->c;
  const double routed = double(impl_->dw.routed_bytes), all = double(impl_->dw.buffer.bytes() - impl_->dw.mtp_bytes);
  const double E = double(c.n_routed_experts), k = double(c.num_experts_per_tok);
  const double used = E * (1.0 - std::pow(1.0 - k / E, double(rows)));
  return (all - routed + routed * used / E) / double(weight_bytes_per_token());
}

std::unique_ptr<ModelState> Glm5CudaModel::new_state() const {
  return std::make_unique<CudaState>(impl_->c, impl_->lay);
}

void Glm5CudaModel::forward(ModelState& state, std::span<const int32_t> tokens, Logits mode,
                            std::vector<float>& logits) {
  CudaState& st = cuda_state(state);
  Impl& m = *impl_;
  const Config& c = m.c;
  const int64_t n = int64_t(tokens.size()), V = c.vocab_size;
  logits.clear();
  if (n == 0) return;
  check_window("glm5", m.info, st.pos, tokens);
  if (mode == Logits::kAll) logits.resize(size_t(n * V));
  // Long forwards in prefill chunks (chunk.cu run_chunk: tensor cores from gemm_rows rows), the
  // rest in chunk_rows. With the MTP head on, a chunk of up to chunk_rows rows queues its pairs
  // for the head (a queue of a few verify chunks); a larger one runs them through the head
  // right after it (mtp.cu mtp_chunk_pairs), the queue caught up first.
  const bool prefill = n > m.opt.chunk_rows && m.opt.chunk_rows > 1 && m.opt.prefill_rows > m.opt.chunk_rows;
  const int64_t C = prefill ? std::min<int64_t>(m.opt.prefill_rows, m.cl.rows) : m.opt.chunk_rows;
  if (n > 1 && C > 1 && !m.tap) {  // chunks of up to C rows
    forward_in_chunks(n, C, mode, V, static_cast<const float*>(m.logits_host->p), logits,
                      [&](int64_t t0, int64_t T, Logits cm) {
                        for (int64_t t = 0; t < T; ++t) m.input_row(tokens[size_t(t0 + t)], t);
                        const auto chunk = tokens.subspan(size_t(t0), size_t(T));
                        const bool direct = st.mtp_on && m.mtp_direct(T);
                        if (direct) m.mtp_catch_up(st);
                        else m.mtp_before_forward(st, T);
                        m.run_chunk(st, T, cm);
                        if (direct) m.mtp_chunk_pairs(st, chunk, st.pos);
                        else m.mtp_after_forward(st, chunk, st.pos);
                        st.pos += T;
                      });
    return;
  }
  for (int64_t t = 0; t < n; ++t) {
    m.input_row(tokens[size_t(t)], 0);
    const bool want = mode == Logits::kAll || (mode == Logits::kLast && t == n - 1);
    m.mtp_before_forward(st, 1);
    m.run_step(st, want, m.tap != nullptr);
    m.mtp_after_forward(st, tokens.subspan(size_t(t), 1), st.pos);
    st.pos += 1;
    if (want && !m.top_only) {
      const float* src = static_cast<const float*>(m.logits_host->p);
      if (mode == Logits::kAll) std::copy_n(src, V, logits.data() + t * V);
      else logits.assign(src, src + V);
    }
  }
}

void Glm5CudaModel::forward_candidates(ModelState& state, std::span<const int32_t> tokens,
    const CandidateRequest& req, SampleCandidates& out, std::vector<float>& logits, const NeedFull& need_full) {
  Impl& m = *impl_;
  if (!cuda_forward_candidates(m.cand, req, tokens.size(), m.top_only,
                               [&] { forward(state, tokens, Logits::kLast, logits); }, m.S(m.sl.logits),
                               m.logits_host->p, m.c.vocab_size, m.stream, out, logits, need_full))
    Model::forward_candidates(state, tokens, req, out, logits, need_full);
}

std::vector<std::vector<float>> Glm5CudaModel::layer_outputs(std::span<const int32_t> tokens) {
  std::vector<std::vector<float>> out(size_t(impl_->c.num_hidden_layers));
  auto st = new_state();
  std::vector<float> logits;
  impl_->tap = &out;
  try {
    forward(*st, tokens, Logits::kNone, logits);
  } catch (...) {
    impl_->tap = nullptr;
    throw;
  }
  impl_->tap = nullptr;
  return out;
}

std::unique_ptr<Model> load_cuda(const std::string& path, const LoadOptions& opt, const CudaModelOptions& copt) {
  return std::make_unique<Glm5CudaModel>(open_tensor_source(path), opt, copt);
}

}  // namespace ds4::glm5
