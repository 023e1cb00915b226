// The CUDA Qwen3.8 Flash Next model: per-state device caches, the decode step (one token
// through every layer, all on one stream, position read from device memory) and its CUDA
// graph, and the host side of each token (embedding row and PLE n-gram rows, gathered on
// the host and shipped with the step's inputs). forward() of more than one token runs the
// multi-row chunk of chunk.cu; with the MTP head on, every consumed token's final trunk row
// goes into the state's ring for the head (mtp.cu).
#include "models/qwen_next/cuda/model_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "backend/cpu/rope.h"
#include "backend/cuda/activation.h"
#include "backend/cuda/check.h"
#include "backend/cuda/conv1d.h"
#include "backend/cuda/embed.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/graph_step.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/synthetic_fill.h"
#include "core/error.h"
#include "models/cuda_candidates.h"
#include "models/cuda_chunking.h"
#include "models/qwen_next/config.h"
#include "models/qwen_next/cuda/device_weights.h"
#include "models/qwen_next/cuda/hyper_fused.h"
#include "models/qwen_next/cuda/kernels.h"
#include "models/qwen_next/cuda/model_impl.h"
#include "models/qwen_next/cuda/step_layout.h"
#include "models/qwen_next/cuda/synthetic.h"
#include "models/qwen_next/ple_hash.h"
#include "models/qwen_next/weights.h"

namespace ds4::qwen_next {

void QwenNextCudaModel::Impl::proj(const DProj& p, const float* x, float* y) {
  dc::gemv_proj(p, x, y, stream, gemv_options());
}

// mixed {d} (and inject {hc}, which follows the low-rank row in scratch) from h {hc*d}.
void QwenNextCudaModel::Impl::hyper_read(const DHyper& h, const float* x, float* mixed, float* inject) {
  const int64_t hc = c.hc, d = c.hidden;
  float* normed = S(sl.normed);
  // Two launches instead of five where the formats allow (hyper_fused.cu; same bits). The
  // inject gate lands after the low-rank row (sl.inject), where the fused kernel writes it.
  const DProj& di = h.down_inject;
  const WeightMatrix* down = di.fused.rows > 0 ? &di.fused : di.parts.size() == 1 ? &di.parts[0] : nullptr;
  if (down && (!inject || inject == S(sl.low) + c.hc_rank) &&
      hyper_read_fusable(*down, h.up, hc, d, c.hc_rank)) {
    hyper_read_fused(*down, h.up, x, h.norm, hc, d, c.hc_rank, c.rms_eps, normed, S(sl.low), mixed, inject != nullptr,
                     stream);
    return;
  }
  hc_norm(x, h.norm, hc, d, c.rms_eps, normed, stream);
  // [low {rank} | inject {hc}]: ~324 rows of hc*d columns, 2 rows per block to spread them
  // over the GPU (rows per block change no result: the chunk's gemv_rows still equals this).
  // cuda_cores: the fused form's arithmetic, also under DS4_MLX4_TC (hyper_read_rows the same).
  dc::GemvOptions few = gemv_options();
  few.rows_per_block = 2;
  few.cuda_cores = true;
  dc::gemv_proj(h.down_inject, normed, S(sl.low), stream, few);
  hc_low_act(S(sl.low), c.hc_rank, hc, stream);
  dc::GemvOptions up = gemv_options();
  up.cuda_cores = true;
  dc::gemv(h.up, S(sl.low), S(sl.mix), stream, up);
  hc_combine(S(sl.mix), normed, hc, d, mixed, inject, stream);
}

namespace {

// Profiling only: the GPU waits `us` microseconds (a single-thread spin on the global timer)
// so the host can queue the layer's launches and events before the GPU reaches them; the
// per-op intervals are then GPU time, not the host's launch rate (direct launches cost the
// host a few us each, about what a small kernel takes on the GPU).
__global__ void profile_lead_kernel(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); while (t - t0 < ns);
}

int64_t profile_lead_us() {  // DS4_PROFILE_LEAD_US: 0 = off (the table as before: GPU time + launch gaps)
  static const int64_t us = [] {
    const char* e = std::getenv("DS4_PROFILE_LEAD_US");
    return e ? std::max<int64_t>(0, std::atoll(e)) : int64_t(300);
  }();
  return us;
}

}  // namespace

void QwenNextCudaModel::Impl::layer(CudaState& st, int64_t l) {
  if (prof.on && profile_lead_us() > 0) {
    profile_lead_kernel<<<1, 1, 0, stream>>>(uint64_t(profile_lead_us()) * 1000);
    DS4_CUDA_CHECK_LAUNCH();
    mark("(profiling lead: not a model op)");
  }
  uint8_t* sb = st.buf.as<uint8_t>();
  layer(dw.layers[size_t(l)], lay.layers[size_t(l)], sb, reinterpret_cast<const int32_t*>(sb + lay.pos), lay.max_ctx);
}

void QwenNextCudaModel::Impl::layer(const DLayer& L, const LayerOffsets& o, uint8_t* sb, const int32_t* pos,
                                    int64_t max_ctx) {
  auto SF = [&](size_t off) { return reinterpret_cast<float*>(sb + off); };
  const int64_t hc = c.hc, d = c.hidden, W = c.wide();
  float* h = S(sl.h);
  float *mixed = S(sl.mixed), *out = S(sl.out), *inject = S(sl.inject);  // inject: written by hyper_read
  if (L.ple) {
    const DPle& p = *L.ple;
    const float* emb = S(sl.ple_emb) + p.index * sl.ple_stride;
    proj(p.in, emb, S(sl.ple_key));  // [key | value]
    ple_gate(S(sl.ple_key), S(sl.ple_val), h, p.norm_key, p.norm_query, p.norm_conv, hc, d, c.rms_eps, S(sl.ple_gv),
             S(sl.ple_gvn), stream);
    dc::conv1d_step_f32(S(sl.ple_gvn), p.conv, SF(o.ple_conv), W, c.ple_conv_k, c.ngram, true, S(sl.ple_conv),
                        stream);
    ple_add(h, S(sl.ple_gv), S(sl.ple_conv), W, stream);
    mark("ple");
  }
  hyper_read(L.attn_hc, h, mixed, inject);
  mark("hc_read");
  if (L.gdn) {
    const DGdn& g = *L.gdn;
    const GdnShape sh{c.k_heads, c.v_heads, c.k_dim, c.v_dim, c.rms_eps, c.gate_sigmoid};
    proj(g.in, mixed, S(sl.raw));  // [qkv | z | b | a]
    mark("gdn_in_proj");
    if (gdn_conv_prep_fusable(sh)) {
      gdn_conv_prep(S(sl.raw), g.conv, SF(o.conv), c.conv_k, S(sl.qkv), S(sl.b), S(sl.a), g.a_log, g.dt_bias, sh, stream);
    } else {
      dc::conv1d_step_f32(S(sl.raw), g.conv, SF(o.conv), c.conv_dim(), c.conv_k, 1, true, S(sl.qkv), stream);
      gdn_prep(S(sl.qkv), S(sl.b), S(sl.a), g.a_log, g.dt_bias, sh, stream);
    }
    mark("gdn_conv_prep");
    gdn_recurrent(S(sl.qkv), S(sl.a), S(sl.b), SF(o.ssm), S(sl.o), sh, stream);
    mark("gdn_recurrent");
    gdn_gated_norm(S(sl.o), S(sl.z), g.norm, sh, stream);
    gemv(g.out, S(sl.o), out);
    mark("gdn_norm_out_proj");
  } else {
    const DQsa& a = *L.qsa;
    const QsaShape sh{c.heads, c.kv_heads, c.head_dim, c.rot_dim, c.idx_heads, c.idx_dim, c.idx_budget,
                      c.idx_ratio, max_ctx, c.rms_eps, dw.inv_freq};
    const QsaCache cache{SF(o.k), SF(o.v), SF(o.idx_raw), SF(o.idx_pooled)};
    proj(a.in, mixed, S(sl.qg));  // [q+gate | k | v | indexer q+k]
    mark("qsa_in_proj");
    qsa_prep(S(sl.qg), S(sl.k), S(sl.v), S(sl.iqk), QsaNorms{a.q_norm, a.k_norm, a.idx_q_norm, a.idx_k_norm}, cache,
             sh, pos, S(sl.q), S(sl.gate), stream);
    mark("qsa_prep");
    uint8_t* keep = scratch.as<uint8_t>() + sl.keep;
    qsa_select_scores(S(sl.iqk), cache, sh, pos, S(sl.block_scores), stream);
    mark("qsa_select_scores");
    qsa_select_keep(sh, pos, S(sl.block_scores), keep, stream);
    mark("qsa_select_topk");
    qsa_attend(S(sl.q), S(sl.gate), cache, sh, pos, keep, S(sl.att_scores), S(sl.att), stream);
    mark("qsa_attend");
    gemv(a.o, S(sl.att), out);
    mark("qsa_out_proj");
  }
  hc_write(h, out, inject, hc, d, stream);
  mark("hc_write");
  hyper_read(L.mlp_hc, h, mixed, inject);
  mark("hc_read");
  const DMoe& m = L.moe;
  const int64_t K = c.top_k, I = c.moe_inter;
  int32_t* ids = reinterpret_cast<int32_t*>(scratch.as<uint8_t>() + sl.ids);
  proj(m.in, mixed, S(sl.sh_g));  // [shared gate | shared up | router | shared gate scalar]
  // The shared expert's [gate | up] is one {1, 2S} row of moe_swiglu (the chunk's kernel too),
  // here inside the router's launch.
  moe_route(S(sl.router), c.experts, K, c.norm_topk, ids, S(sl.wts), stream, Rows{}, S(sl.sh_g), c.shared_inter);
  mark("moe_in_proj_route");
  gemv(m.sh_down, S(sl.sh_g), S(sl.sh_out));
  mark("shared_expert");
  dc::gemv_batched(m.gate_up.first, mixed, S(sl.gu),
                   dc::GemvBatch{int(K), ids, m.gate_up.stride, m.gate_up.scale_stride, 0, 2 * I}, stream,
                   gemv_options());
  mark("experts_gate_up");
  moe_swiglu(S(sl.gu), K, I, S(sl.act), stream);
  dc::gemv_batched(m.down.first, S(sl.act), S(sl.ey),
                   dc::GemvBatch{int(K), ids, m.down.stride, m.down.scale_stride, I, d}, stream, gemv_options());
  mark("experts_down");
  moe_combine_write(S(sl.ey), S(sl.wts), K, S(sl.sh_out), S(sl.sg), d, out, h, inject, hc, stream);
  mark("moe_combine_hc_write");
}

void QwenNextCudaModel::Impl::enqueue_step(CudaState& st, bool logits) {
  mark("start");
  DS4_CUDA_CHECK(cudaMemcpyAsync(S(sl.h), in_host->p, sl.in_bytes, cudaMemcpyHostToDevice, stream));
  mark("input_upload");
  for (int64_t l = 0; l < c.layers; ++l) layer(st, l);
  if (logits) {
    hyper_read(dw.mixer, S(sl.h), S(sl.mixed), nullptr);
    gemv(dw.lm_head, S(sl.mixed), S(sl.logits));
    if (top_only) cand->enqueue(S(sl.logits), c.vocab, stream);
    else DS4_CUDA_CHECK(cudaMemcpyAsync(logits_host->p, S(sl.logits), size_t(c.vocab) * sizeof(float),
                                        cudaMemcpyDeviceToHost, stream));
    mark("head");
  }
  dc::enqueue_position_increment(reinterpret_cast<int32_t*>(st.buf.as<uint8_t>() + lay.pos), stream);
}

void QwenNextCudaModel::Impl::run_step(CudaState& st, bool logits) {
  dc::run_graph_step(stream, st.graph[!logits ? 0 : top_only ? 2 : 1], opt.graphs, [&] { enqueue_step(st, logits); });
  if (prof.on) prof.collect();
}

void QwenNextCudaModel::Impl::check_input(const CudaState& st, std::span<const int32_t> tokens) const {
  check_window("qwen_next", info, st.pos, tokens);
}

void QwenNextCudaModel::Impl::fill_input(CudaState& st, int32_t tok, int64_t row) {
  const int64_t d = c.hidden, heads = (c.ngram - 1) * c.heads_per_ngram;
  float* in = static_cast<float*>(in_host->p) + row * int64_t(sl.in_bytes / sizeof(float));  // {h | PLE rows}
  if (opt.synthetic_seed) dc::synthetic_row(opt.synthetic_seed, tok, d, 1.0f, in);  // synthetic_full.h
  else dequantize_row(w.embed, tok, in);  // the step's input row, repeated per stream
  for (int64_t k = 1; k < c.hc; ++k) std::memcpy(in + k * d, in, size_t(d) * sizeof(float));
  std::vector<int64_t> ids(static_cast<size_t>(heads));
  std::vector<int32_t> window(static_cast<size_t>(c.ngram));
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const auto& lw = w.layers[l];
    if (!lw.ple) continue;
    const int64_t pi = dw.layers[l].ple->index;
    auto& ctx = st.ple_ctx[size_t(pi)];
    std::copy(ctx.begin(), ctx.end(), window.begin());
    window.back() = tok;
    ple_ngram_ids(c, *lw.ple, window.data(), ids.data());
    for (int64_t id : ids)
      if (id < 0 || id >= lw.ple->table->rows()) throw Error("PLE n-gram row " + std::to_string(id) + " out of range");
    lw.ple->table->gather(ids.data(), heads, in + sl.ple_emb_in + pi * sl.ple_stride);
    ctx.assign(window.begin() + 1, window.end());
  }
}

QwenNextCudaModel::QwenNextCudaModel(std::unique_ptr<TensorSource> src, const LoadOptions& opt,
                                     const CudaModelOptions& copt)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.src = std::move(src);
  m.opt = copt;
  m.c = parse_config(m.src->config(), m.src->path());
  m.w = bind_weights(*m.src, m.c, opt);
  const Config& c = m.c;
  m.info.family = "qwen_next";
  m.info.name = m.src->config().value("_name_or_path", std::string("qwen4_exp"));
  if (m.info.name.empty()) m.info.name = "qwen4_exp";
  m.info.vocab_size = c.vocab;
  m.info.hidden_size = c.hidden;
  m.info.max_context = opt.max_context > 0 ? std::min(opt.max_context, c.max_position) : c.max_position;
  m.info.eos_token_ids = c.eos_ids;
  m.info.default_prefill_chunk = 2048;
  if (copt.chunk_rows < 1 || copt.chunk_rows > dc::kGemvMaxRows)
    throw InputError("qwen_next cuda: chunk_rows " + std::to_string(copt.chunk_rows) + " is not in 1.." +
                     std::to_string(dc::kGemvMaxRows));
  if (copt.prefill_rows < 0 || copt.prefill_rows > kMaxPrefillRows || copt.gemm_rows < 0)
    throw InputError("qwen_next cuda: prefill_rows " + std::to_string(copt.prefill_rows) + " is not in 0.." +
                     std::to_string(kMaxPrefillRows) + " (or gemm_rows < 0)");
  if (copt.batch_rows < 1) throw InputError("qwen_next cuda: batch_rows " + std::to_string(copt.batch_rows) + " < 1");
  for (const auto* mat : {&m.w.lm_head, &m.w.layers[0].moe.router, &m.w.layers[0].moe.gate_up[0]})
    if (!dc::gemv_supports(mat->type))
      throw InputError(m.src->path() + ": weight type " + std::string(dtype_name(mat->type)) +
                       " has no CUDA gemv");
  // The MTP head needs a device embedding (its draft tokens are chosen on the GPU).
  const bool mtp = m.w.mtp && dc::embed_rows_supports(m.w.embed.type);
  if (copt.synthetic_seed != 0) {  // synthetic_full.h: matrices made on the GPU, PLE rows per lookup
    for (auto& l : m.w.layers)
      if (l.ple) l.ple->table = qwen_next::cuda::synthetic_ple_table(l.ple->table->rows(), l.ple->table->cols(),
                                                                      copt.synthetic_seed);
    dc::MatrixFill fill = dc::SyntheticFiller{copt.synthetic_seed};
    m.dw = upload_weights(c, m.w, cpu::rope_inv_freq(c.rot_dim, c.rope_theta), copt.fuse_projections, &fill, mtp);
  } else {
    m.dw = upload_weights(c, m.w, cpu::rope_inv_freq(c.rot_dim, c.rope_theta), copt.fuse_projections, nullptr, mtp);
  }
  m.info.has_draft_head = m.has_mtp();
  m.lay = state_layout(c, m.info.max_context);
  // With the head, the QSA scratch (scores, block flags) also covers the head's draft rows
  // past max_ctx (MtpLayout::ctx).
  m.sl = scratch_layout(c, m.info.max_context + (m.has_mtp() ? kMtpMaxDepth : 0));
  m.scratch = dc::DeviceBuffer(m.sl.bytes, "qwen_next step scratch");
  // The chunk scratch holds the larger of a verify chunk and a prefill chunk. A row costs a
  // step scratch (attention scores for max_context positions per head: ~4.5 MB at full size
  // and 32K, 25 MB at 256K), so prefill chunks take at most a quarter of the device memory
  // free after the weights (the states' caches need the rest): fewer rows on a long context.
  // DeviceBuffer admits the result and names the bytes when even that does not fit.
  int64_t prefill = copt.prefill_rows;
  if (prefill > copt.chunk_rows) {
    const size_t quarter = dc::device_memory_info().free_bytes / 4;
    const int64_t fit = int64_t(quarter / std::max<size_t>(m.sl.bytes, 1));
    prefill = std::max<int64_t>(copt.chunk_rows, std::min<int64_t>(prefill, fit));
  }
  m.opt.prefill_rows = int(prefill);
  m.cl = chunk_layout(c, m.sl, std::max<int64_t>(copt.chunk_rows, prefill));
  if (m.cl.rows > 1) m.chunk = dc::DeviceBuffer(m.cl.bytes, "qwen_next chunk scratch");
  m.info.batched_decode = m.cl.rows > 1;  // decode_batch's rows live in the chunk scratch (batch.cu)
  // verify_batch: the same rows, one group per window (verify_batch.cu), every window the engine
  // sends within the capture records (chunk_rows and capture_rows are fixed at load).
  m.info.batched_verify = m.info.batched_decode && captures_every_window(m.capture_limit());
  {  // widest input of a chunk's product: the hyper-connections' normed streams {hc * d}
    const int64_t cols = std::max({c.wide(), c.hidden, c.heads * c.head_dim, c.value_dim(), c.shared_inter,
                                   c.hc_rank + c.hc, c.ple_dim});
    constexpr int64_t kTile = int64_t(32) << 20;  // f32 weight tile (TF32): 128 MiB, lm_head in ~20 pieces
    m.mm = std::make_unique<dc::MatmulWorkspace>(std::max<int64_t>(m.cl.rows, 1), cols, kTile, copt.gemm_rows,
                                                 "qwen_next matmul", dc::model_matmul_precision());
    const int64_t d = c.hidden, I = c.moe_inter;  // experts: gate|up {2I, d}, down {d, I}
    m.gg = dc::make_grouped_gemm(m.cl.rows, c.top_k, c.experts, std::max(2 * I, d), std::max(d, I), *m.mm,
                                 "qwen_next");
  }
  // Pinned input and logits rows for a whole chunk (as many as the chunk scratch); the
  // one-token step uses row 0.
  m.in_host = std::make_unique<Pinned>(m.sl.in_bytes * size_t(m.cl.rows));
  m.logits_host = std::make_unique<Pinned>(size_t(c.vocab) * sizeof(float) * size_t(m.cl.rows));
  DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  if (m.has_mtp()) m.mtp_init();
}

QwenNextCudaModel::~QwenNextCudaModel() {
  if (!impl_) return;
  impl_->batch_graphs.clear();
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

const ModelInfo& QwenNextCudaModel::info() const { return impl_->info; }
const CudaModelOptions& QwenNextCudaModel::options() const { return impl_->opt; }
void QwenNextCudaModel::set_profiling(bool on) {
  Impl& m = *impl_;
  if (on && !m.prof.on) {  // a fresh table; turning it off keeps the table for op_times()
    m.graphs_before_profiling = m.opt.graphs;
    m.prof.reset();
  }
  m.prof.on = on;
  m.opt.graphs = on ? false : m.graphs_before_profiling;  // events inside a captured graph are not timed
}
const std::map<std::string, double>& QwenNextCudaModel::op_times() const { return impl_->prof.ms(); }
void QwenNextCudaModel::reset_op_times() { impl_->prof.reset(); }

void QwenNextCudaModel::set_options(const CudaModelOptions& copt) {
  Impl& m = *impl_;
  // The chunk scratch and pinned rows are sized at load (fewer prefill rows are fine); the
  // capture records are sized on first use from chunk_rows and capture_rows, which stay.
  if (copt.chunk_rows != m.opt.chunk_rows || copt.capture_rows != m.opt.capture_rows || copt.prefill_rows < 0 ||
      copt.prefill_rows > m.cl.rows || copt.gemm_rows < 0 || copt.batch_rows < 1)
    throw InputError("qwen_next cuda: set_options: prefill_rows " + std::to_string(copt.prefill_rows) +
                     " exceeds the " + std::to_string(m.cl.rows) +
                     " rows the model was loaded with, gemm_rows < 0, batch_rows < 1, or chunk_rows / capture_rows "
                     "changed");
  CudaModelOptions o = copt;
  o.graphs = m.opt.graphs, o.fuse_projections = m.opt.fuse_projections, o.synthetic_seed = m.opt.synthetic_seed;
  m.opt = o;
  m.mm->set_min_rows(o.gemm_rows);
}
size_t QwenNextCudaModel::weight_bytes() const { return impl_->dw.buffer.bytes(); }

size_t QwenNextCudaModel::weight_bytes_per_token() const {
  const Config& c = impl_->c;
  size_t routed = 0;
  for (const auto& l : impl_->w.layers)
    for (const WeightMatrix& e : {l.moe.gate_up[0], l.moe.down[0]})
      routed += size_t(c.experts) * (dc::Uploader::data_bytes(e) + 2 * dc::Uploader::scale_bytes(e));
  return impl_->dw.trunk_bytes - routed + size_t(double(routed) * double(c.top_k) / double(c.experts));
}

double QwenNextCudaModel::chunk_bytes_ratio(int64_t rows) const {
  const Config& c = impl_->c;
  double routed = 0;
  for (const auto& l : impl_->w.layers)
    for (const WeightMatrix& e : {l.moe.gate_up[0], l.moe.down[0]})
      routed += double(c.experts) * double(dc::Uploader::data_bytes(e) + 2 * dc::Uploader::scale_bytes(e));
  const double E = double(c.experts), k = double(c.top_k);
  const double used = E * (1.0 - std::pow(1.0 - k / E, double(rows)));  // expected distinct experts
  return (double(impl_->dw.trunk_bytes) - routed + routed * used / E) / double(weight_bytes_per_token());
}

std::unique_ptr<ModelState> QwenNextCudaModel::new_state() const {
  return std::make_unique<CudaState>(impl_->lay, impl_->c, impl_->has_mtp() ? &impl_->ml : nullptr);
}

void QwenNextCudaModel::forward(ModelState& state, std::span<const int32_t> tokens, Logits mode,
                                std::vector<float>& logits) {
  CudaState& st = cuda_state(state);
  Impl& m = *impl_;
  const Config& c = m.c;
  const int64_t n = int64_t(tokens.size()), V = c.vocab;
  logits.clear();
  if (n == 0) return;
  m.check_input(st, tokens);
  if (mode == Logits::kAll) logits.resize(size_t(n * V));
  // Long forwards in prefill chunks (tensor cores from gemm_rows rows), the rest in chunk_rows,
  // with or without the MTP head (chunk.cu forward_chunk feeds its ring piece by piece).
  const bool prefill = n > m.opt.chunk_rows && m.opt.prefill_rows > m.opt.chunk_rows;
  const int64_t C = prefill ? m.opt.prefill_rows : m.opt.chunk_rows;
  if (n > 1 && C > 1) {  // chunks of up to C rows (a last chunk of one row too: it equals the step)
    forward_in_chunks(n, C, mode, V, static_cast<const float*>(m.logits_host->p), logits,
                      [&](int64_t t0, int64_t T, Logits cm) {
                        m.forward_chunk(st, tokens.subspan(size_t(t0), size_t(T)), cm, false);
                      });
  } else {
    for (int64_t t = 0; t < n; ++t) {
      m.fill_input(st, tokens[size_t(t)], 0);
      const bool want = mode == Logits::kAll || (mode == Logits::kLast && t == n - 1);
      if (st.mtp_on) m.mtp_room(st, st.pos, 1);  // MTP head (mtp.cu): a catch-up overwrites S(sl.h)
      m.run_step(st, want);
      // The step's final h row and its token into the ring, on the device (before the next
      // step or catch-up overwrites S(sl.h)).
      if (st.mtp_on) m.mtp_push(st, st.pos, tokens.subspan(size_t(t), 1), m.S(m.sl.h), 0);
      st.pos += 1;
      if (want && !m.top_only) {
        const float* src = static_cast<const float*>(m.logits_host->p);
        if (mode == Logits::kAll) std::copy_n(src, V, logits.data() + t * V);
        else logits.assign(src, src + V);
      }
    }
  }
  // The last push is still in flight, and clone() copies on the legacy stream.
  if (st.mtp_on) DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
}

void QwenNextCudaModel::forward_candidates(ModelState& state, std::span<const int32_t> tokens,
    const CandidateRequest& req, SampleCandidates& out, std::vector<float>& logits, const NeedFull& need_full) {
  Impl& m = *impl_;
  if (!cuda_forward_candidates(m.cand, req, tokens.size(), m.top_only,
                               [&] { forward(state, tokens, Logits::kLast, logits); }, m.S(m.sl.logits),
                               m.logits_host->p, m.c.vocab, m.stream, out, logits, need_full))
    Model::forward_candidates(state, tokens, req, out, logits, need_full);
}

std::unique_ptr<Model> load_cuda(const std::string& path, const LoadOptions& opt, const CudaModelOptions& copt) {
  return std::make_unique<QwenNextCudaModel>(open_tensor_source(path), opt, copt);
}

}  // namespace ds4::qwen_next
