// The CUDA DeepSeek V4 model: per-state device caches, the decode step (one token through
// every layer on one stream, the position read from device memory) and its CUDA graph, and
// the host side of a token (its embedding row, dequantized from the mmap).
#include "models/deepseek_v4/cuda/model_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <vector>

#include "backend/cpu/rope.h"
#include "backend/cpu/rope_yarn.h"
#include "backend/cuda/embed.h"
#include "backend/cuda/graph_step.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/synthetic_fill.h"
#include "core/error.h"
#include "models/cuda_chunking.h"
#include "models/cuda_tensor_cores_env.h"
#include "models/deepseek_v4/cuda/model_impl.h"

namespace ds4::deepseek_v4 {

namespace {

std::vector<float> inv_freq(const RopeConfig& r, int64_t rot_dim) {
  return r.yarn ? cpu::rope_yarn_inv_freq(rot_dim, r.theta, r.yarn_params) : cpu::rope_inv_freq(rot_dim, r.theta);
}

}  // namespace

void DeepseekV4CudaModel::Impl::fork() {
  if (!two_streams()) return;
  DS4_CUDA_CHECK(cudaEventRecord(fork_ev, stream));
  DS4_CUDA_CHECK(cudaStreamWaitEvent(side_stream, fork_ev, 0));
}

void DeepseekV4CudaModel::Impl::join() {
  if (!two_streams()) return;
  DS4_CUDA_CHECK(cudaEventRecord(join_ev, side_stream));
  DS4_CUDA_CHECK(cudaStreamWaitEvent(stream, join_ev, 0));
}

void DeepseekV4CudaModel::Impl::mark(const char* name) {
  prof.mark(stream, name);  // records only while prof.on (opt.profile with direct launches)
}

void DeepseekV4CudaModel::Impl::collect_profile() { prof.collect(); }

// col {hidden} = norm(sum_j pre[j] x[j]) from the streams x {hc, hidden}; post and comb stay
// in scratch for hc_post (CPU: hc_pre_f32 + rmsnorm in decoder_layer).
// fn runs on the raw streams, split into column blocks (DHc): mix {splits, rows} partials.
// fn has (2+n)*n = 24 rows: 2 rows per block spread it over more SMs (rows per block change
// no result, so the chunk's gemv_rows of the same blocks still equals this bit for bit).
// f32 x whatever Config::act_quant says: ds4 files store fn as F16, and the CPU's hc_pre_f32 /
// hc_head_f32 multiply f32 x (the mixes feed Sinkhorn).
void DeepseekV4CudaModel::Impl::hc_mix(const DHc& h, const float* x) {
  dc::GemvOptions o = gemv_options(h.fn.type);
  o.rows_per_block = 2;
  dc::gemv_batched(h.fn, x, S(sl.mix),
                   dc::GemvBatch{int(h.splits), nullptr, h.split_stride, 0, h.fn.cols, h.fn.rows}, stream, o);
}

dc::HcFn DeepseekV4CudaModel::Impl::hc_fn(const DHc& h) const {
  return dc::HcFn{h.fn.data, h.fn.type, h.fn.rows, h.fn.cols, h.splits, h.split_stride};
}

bool DeepseekV4CudaModel::Impl::hc_fused(const DHc& h, bool head) const {
  return dc::hc_fused_supported(hc_fn(h), hcd, head);
}

// Fused (issue #23): the fn product, the split and the collapse in one launch, with the hc_post
// before it folded in when post_in. Else hc_pre_f32 sums the gemv's partials and applies the
// flat rmsnorm factor and the input norm.
void DeepseekV4CudaModel::Impl::hc_pre(const DHc& h, const float* norm, float* x, const dc::HcPostIn* post_in,
                                       ActIn* col, const WeightMatrix* w) {
  if (hc_fused(h, false)) {
    dc::HcFusedScratch sc{S(sl.mix), hc_counts.as<unsigned>()};
    auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };  // (hc_pre_fused's terms)
    if (const auto q = col && w ? act_slot(*col, *w) : std::nullopt;
        q && q->block == ActBlock::kQ8_0 && col->x == S(sl.col) && dc::hc_fused_quant_supported(hcd) &&
        a16(q->q) && a16(x) && a16(S(sl.col)) && (!norm || a16(norm))) {
      sc.q8_0 = q->q, sc.q8_0_d = q->d;  // (the collapse writes the product's Q8_0 input too)
      col->have = ActBlock::kQ8_0;
    }
    dc::hc_pre_fused(hc_fn(h), h.scale, h.base, hcd, x, post_in, norm, S(sl.col), S(sl.post), S(sl.comb), sc,
                     dc::HcRows{}, stream);
    mark(post_in ? "hc_post_pre" : "hc_pre");
    return;
  }
  if (post_in) {  // (layer_step folds the MoE's combination in only when the fused kernel runs)
    dc::hc_post_f32(hcd, post_in->block_out, post_in->residual, post_in->post, post_in->comb, x, stream);
    mark("hc_post");
  }
  hc_mix(h, x);
  mark("hc_mix");  // the profile splits the mix gemv from the split + collapse kernel
  dc::HcDims d = hcd;
  d.mix_splits = h.splits;
  dc::hc_pre_f32(S(sl.mix), h.scale, h.base, d, x, norm, S(sl.col), S(sl.post), S(sl.comb), stream);
  mark("hc_pre");
}

// The HC head collapse + the output norm of the streams x into out (decode step).
void DeepseekV4CudaModel::Impl::hc_head(const DHc& h, const float* norm, float* x, float* out) {
  if (hc_fused(h, true)) {
    dc::hc_head_fused(hc_fn(h), h.scale, h.base, hcd, x, nullptr, norm, out,
                      dc::HcFusedScratch{S(sl.mix), hc_counts.as<unsigned>()}, dc::HcRows{}, stream);
    return;
  }
  hc_mix(h, x);
  dc::HcDims d = hcd;
  d.mix_splits = h.splits;
  dc::hc_head_f32(S(sl.mix), h.scale, h.base, d, x, norm, out, stream);
}

// One compressor lane's arguments (CPU compressor_push); kv / gate {width} are the token's
// projections (part of attn_in; row 0's in a chunk).
LaneArgs DeepseekV4CudaModel::Impl::lane_args(const DCompressor& d, const LaneOffsets& o, uint8_t* sb, const float* kv,
                                              const float* gate, int64_t ratio, bool overlap) const {
  auto SF = [&](size_t off) { return reinterpret_cast<float*>(sb + off); };
  return LaneArgs{kv, gate, d.ape, d.norm, SF(o.pend_kv), SF(o.pend_gate), SF(o.prev_kv),
                  SF(o.prev_gate), SF(o.entries), ratio, d.dim, d.width, c.rope_dim, overlap,
                  c.ds4_numerics && !d.indexer, c.ds4_numerics && d.indexer, c.rms_eps, dw.inv_comp};
}

// CPU attention_forward with T = 1: out in scratch y.
void DeepseekV4CudaModel::Impl::attention(CudaState& st, int64_t l, ActIn* col_in) {
  const DLayer& L = dw.layers[size_t(l)];
  const LayerOffsets& o = lay.layers[size_t(l)];
  uint8_t* sb = st.buf.as<uint8_t>();
  const int32_t* pos = reinterpret_cast<const int32_t*>(sb + lay.pos);
  const int64_t hd = c.head_dim;
  const float* inv = L.ratio > 0 ? dw.inv_comp : dw.inv_main;
  // attn_in outputs {q_lora | hd | comp width x2 | index width x2 | index_heads}
  const int64_t cw = L.ratio > 0 ? L.comp.width : 0, iwd = L.has_indexer ? L.index.width : 0;
  float *col = S(sl.col), *qr = S(sl.ain), *q = S(sl.q), *kv = qr + c.q_lora;
  float *ckv = kv + hd, *cgate = ckv + cw, *ikv = cgate + cw, *igate = ikv + iwd, *iw = igate + iwd;
  ActIn xin = col_in ? *col_in : in_step(col, c.hidden, kActCol);
  proj(L.attn_in, xin, qr);
  mark("attn_in_proj");
  // side branch: the KV row into the ring, the compressor lanes (they read only attn_in outputs
  // other than qr, and the state)
  fork();
  float* ring = reinterpret_cast<float*>(sb + o.window);
  norm_rope(kv, NormRope{1, hd, c.rope_dim, L.kv_norm, c.rms_eps, inv, ring, lay.ring_rows, c.ds4_numerics}, pos, side());
  mark("attn_kv");
  if (L.ratio > 0) {
    compressor_step(lane_args(L.comp, o.comp, sb, ckv, cgate, L.ratio, L.has_indexer), pos, side());
    mark("comp_lane_pool");
  }
  if (L.has_indexer) {
    compressor_step(lane_args(L.index, o.index, sb, ikv, igate, L.ratio, true), pos, side());
    mark("index_lane_pool");
  }
  // main branch: the queries
  ActIn xqr = in_step(qr, c.q_lora, kActQr);
  rmsnorm_act(L.q_a_norm, xqr, L.q_b, stream);  // (+ its quantized copy for q_b and index_q_b)
  mv(L.q_b, xqr, q, stream);
  norm_rope(q, NormRope{c.heads, hd, c.rope_dim, nullptr, c.rms_eps, inv}, pos, stream);  // per head, unweighted
  if (L.has_indexer) mv(L.index_q_b, xqr, S(sl.iq), stream);
  mark("attn_q");
  join();
  AttendArgs a{q, ring, c.window, lay.ring_rows, nullptr, 0, nullptr, nullptr, L.sinks, c.heads, hd, sl.max_rows,
               S(sl.part), S(sl.part_ml), S(sl.heads), c.rope_dim, inv};
  if (L.ratio > 0) {
    if (L.has_indexer) {
      const IndexerArgs ia{S(sl.iq), iw, reinterpret_cast<const float*>(sb + o.index.entries), c.index_heads,
                           c.index_dim, c.rope_dim, L.ratio, c.index_topk, lane_entries(lay.max_ctx, L.ratio),
                           c.ds4_numerics, dw.inv_comp, S(sl.iscores), SI(sl.sel), SI(sl.nsel)};
      indexer_select(ia, pos, stream);
      a.sel = SI(sl.sel);
      a.nsel = SI(sl.nsel);
      mark("indexer");
    }
    a.entries = reinterpret_cast<const float*>(sb + o.comp.entries);
    a.ratio = L.ratio;
  }
  attend(a, pos, stream);
  mark("attend");
  // grouped o LoRA: group g's heads {heads/G * hd} through rows [g * o_lora, (g+1) * o_lora) of o_a
  WeightMatrix oa = L.o_a;
  oa.rows = c.o_lora;
  const int64_t in = c.heads * hd / c.o_groups;
  ActIn xheads = in_step(S(sl.heads), c.heads * hd, kActHeads), xlow = in_step(S(sl.low), c.o_groups * c.o_lora, kActLow);
  mv_batched(oa, xheads, S(sl.low),
             dc::GemvBatch{int(c.o_groups), nullptr, size_t(c.o_lora * L.o_a.row_stride_bytes()), 0, in, c.o_lora}, stream);
  mv(L.o_b, xlow, S(sl.y), stream);
  mark("attn_out");
}

// CPU moe_forward with T = 1: routed experts (hash or top-k) + shared expert -> scratch y.
void DeepseekV4CudaModel::Impl::moe(int64_t l, bool combine, ActIn* col_in) {
  const DLayer& L = dw.layers[size_t(l)];
  const int64_t K = c.experts_used, F = c.expert_ff, H = c.hidden;
  float *col = S(sl.col), *shg = S(sl.min), *shu = shg + F, *router = shu + F;  // moe_in outputs
  int32_t* ids = SI(sl.ids);
  ActIn xin = col_in ? *col_in : in_step(col, H, kActCol), xsh = in_step(shg, F, kActShared);
  proj(L.moe_in, xin, shg);
  mark("moe_in_proj");
  fork();  // side branch: the shared expert
  swiglu_act(shg, shu, 1, F, F, xsh, L.sh_down, side());  // in place (+ quantized for sh_down)
  mv(L.sh_down, xsh, S(sl.sh), side());
  mark("shared_expert");
  const RouteArgs ra{router, L.router_bias, L.tid2eid, SI(sl.tok), c.experts, K, int(c.score), c.norm_topk,
                     float(c.routed_scale), ids, S(sl.wts)};
  if (const auto q = act_slot(xin, L.gate_up.first); q && q->block != xin.have) {  // gate|up's input beside it
    moe_route_quant(ra, col, *q, stream);
    xin.have = q->block;
  } else {
    moe_route(ra, stream);
  }
  mark("moe_route");
  float* egu = S(sl.egu);  // {K, 2F}: gate rows then up rows per chosen expert
  mv_batched(L.gate_up.first, xin, egu, dc::GemvBatch{int(K), ids, L.gate_up.stride, 0, 0, 2 * F}, stream);
  mark("experts_gate_up");
  ActIn xact = in_step(S(sl.eact), F, kActExperts, K);  // K rows of F: expert b reads row b
  swiglu_act(egu, egu + F, K, F, 2 * F, xact, L.down.first, stream);
  mv_batched(L.down.first, xact, S(sl.ey), dc::GemvBatch{int(K), ids, L.down.stride, 0, F, H}, stream);
  mark("experts_down");
  join();
  if (!combine) return;  // the next layer's first hc_pre computes it (layer_step)
  moe_combine(S(sl.ey), S(sl.wts), K, S(sl.sh), H, S(sl.y), stream);
  mark("moe_combine");
}

void DeepseekV4CudaModel::Impl::enqueue_step(CudaState& st, bool logits) {
  const int64_t H = c.hidden;
  mark("start");
  DS4_CUDA_CHECK(cudaMemcpyAsync(scratch.as<uint8_t>() + sl.tok, in_host->p, sl.in_bytes, cudaMemcpyHostToDevice,
                                 stream));
  dc::hc_expand_f32(S(sl.emb), hcd, S(sl.xa), stream);  // every stream starts as the embedding
  mark("embed");
  // Each layer's last hc_post goes into the next layer's first hc_pre (one launch fewer) unless
  // something reads the streams between layers (DSpark's taps, the observer).
  const bool defer = !st.dspark_on && !observer;
  for (int64_t l = 0; l < c.layers; ++l) {
    layer_step(st, l, defer && l > 0, defer && l + 1 < c.layers);
    if (st.dspark_on) dspark_tap(l, S(sl.xa), 1, 0);
    if (observer) {
      observed.resize(size_t(c.hc * H));
      DS4_CUDA_CHECK(cudaMemcpyAsync(observed.data(), S(sl.xa), observed.size() * 4, cudaMemcpyDeviceToHost, stream));
      DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
      observer(l, observed.data(), 1);
    }
  }
  if (logits) {
    hc_head(dw.head_hc, dw.norm, S(sl.xa), S(sl.hout));
    ActIn xh = in_step(S(sl.hout), H, kActCol);
    mv(dw.lm_head, xh, S(sl.logits), stream);
    if (top_only) cand->enqueue(S(sl.logits), c.vocab, stream);
    else DS4_CUDA_CHECK(cudaMemcpyAsync(logits_host->p, S(sl.logits), size_t(c.vocab) * sizeof(float),
                                        cudaMemcpyDeviceToHost, stream));
    mark("head");
  }
  if (st.mtp_on) mtp_record_step(st);  // at this token's position: before the increment
  if (st.dspark_on) dspark_record_step(st);
  dc::enqueue_position_increment(reinterpret_cast<int32_t*>(st.buf.as<uint8_t>() + lay.pos), stream);
}

void DeepseekV4CudaModel::Impl::layer_step(CudaState& st, int64_t l, bool post_pending, bool defer_post) {
  const DLayer& L = dw.layers[size_t(l)];
  // the previous layer's MoE output -> xa (its moe_combine folded in too when this hc_pre is fused)
  dc::HcPostIn moe_out{S(sl.y), S(sl.xb), S(sl.post), S(sl.comb)};
  if (hc_fused(L.attn_hc, false))
    moe_out = {nullptr, S(sl.xb), S(sl.post), S(sl.comb), S(sl.ey), S(sl.wts), S(sl.sh), c.experts_used};
  const dc::HcPostIn attn_out{S(sl.y), S(sl.xa), S(sl.post), S(sl.comb)};  // -> xb
  // the collapsed row, each time quantized for its first product by the fused hc_pre when it can
  ActIn col = in_step(S(sl.col), c.hidden, kActCol);
  hc_pre(L.attn_hc, L.attn_norm, S(sl.xa), post_pending ? &moe_out : nullptr, &col, &L.attn_in.runs.front());
  attention(st, l, &col);
  col = in_step(S(sl.col), c.hidden, kActCol);
  hc_pre(L.ffn_hc, L.ffn_norm, S(sl.xb), &attn_out, &col, &L.moe_in.runs.front());
  // a deferred hc_post takes the MoE's combination with it when the next hc_pre is fused
  const bool fold = defer_post && hc_fused(dw.layers[size_t(l + 1)].attn_hc, false);
  moe(l, !fold, &col);
  if (defer_post) return;
  dc::hc_post_f32(hcd, S(sl.y), S(sl.xb), S(sl.post), S(sl.comb), S(sl.xa), stream);
  mark("hc_post");
}

void DeepseekV4CudaModel::Impl::run_step(CudaState& st, bool logits) {
  fresh_graphs(st);
  dc::run_graph_step(stream, st.graph[!logits ? 0 : top_only ? 2 : 1], opt.graphs, [&] { enqueue_step(st, logits); });
  collect_profile();
}

// An unset CudaModelOptions switch at load: the environment variable `name` (0 or 1), else `unset`
// (DS4_INT8_EXPERTS: on; DS4_INT8_DENSE: off; DS4_ACT_MMA: products.cu's default).
bool flag_from_env(const char* name, bool unset) {
  const char* e = std::getenv(name);
  if (!e) return unset;
  const std::string v = e;
  if (v != "0" && v != "1") throw InputError(std::string(name) + "=" + v + ": expected 0 or 1");
  return v == "1";
}

namespace {

// The matmul workspaces' shape: the widest input of a multi-row product (the HC mixes read
// hc * hidden, o_a a head group) and the weight tile in elements (BF16: 64 MiB, lm_head in ~16
// pieces; TF32 / kF16: the tile is f32, 128 MiB per workspace).
int64_t matmul_cols(const Config& c) {
  return std::max({c.hc * c.hidden, c.heads * c.head_dim, c.o_groups * c.o_lora, c.expert_ff, c.q_lora, c.hidden});
}
constexpr int64_t kMatmulTile = int64_t(32) << 20;

// Rows of the chunk scratch: the larger of the verify rows and prefill_rows, halved (not below the
// verify rows) while the scratch, its act_quant slots, the two matmul workspaces' per-row 16-bit
// copies and the grouped expert products' rows would not fit beside the uploaded weights, their
// weight tiles, one state of max_context and admission's headroom (memory.h).
int64_t prefill_chunk_rows(const Config& c, const ScratchLayout& sl, size_t state_bytes, int64_t verify_rows,
                           int64_t prefill_rows, bool mtp, int64_t taps) {
  if (prefill_rows <= verify_rows) return verify_rows;
  const int64_t cols = matmul_cols(c);
  const size_t fixed = state_bytes + 2 * size_t(kMatmulTile) * sizeof(float) + (size_t(64) << 20) + dc::kDefaultHeadroom;
  auto bytes_of = [&](int64_t r) {  // the scratch + act slots, two 16-bit x copies, the expert rows
    const size_t x16 = 2 * size_t(r * cols) * 2;
    const size_t experts = 2 * size_t(r * c.experts_used) * size_t(std::max(2 * c.expert_ff, c.hidden)) * sizeof(float);
    return act_layout(c, r, chunk_layout(c, sl, r).bytes, mtp, taps, 0).end + x16 + experts;
  };
  const int64_t rows =
      rows_that_fit(verify_rows, prefill_rows, dc::device_memory_info().free_bytes, fixed, bytes_of);
  if (rows < prefill_rows)
    std::fprintf(stderr, "deepseek_v4 cuda: prefill chunks of %lld rows (%lld asked; device memory)\n", (long long)rows,
                 (long long)prefill_rows);
  return rows;
}

}  // namespace

DeepseekV4CudaModel::DeepseekV4CudaModel(std::unique_ptr<TensorSource> src, const LoadOptions& opt,
                                         const CudaModelOptions& copt)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.src = std::move(src);
  m.opt = copt;
  m.prof.on = copt.profile && !copt.graphs;
  m.c = config_of(*m.src);
  m.w = bind_weights(*m.src, m.c);
  m.c.ds4_numerics = ds4_numerics_for(m.w.ds4_layout);
  m.c.act_quant = copt.act_quant ? *copt.act_quant : act_quant_for(m.c.ds4_numerics);
  m.opt.act_mma = copt.act_mma ? *copt.act_mma : act_mma_default();
  m.int8_experts = copt.int8_experts ? *copt.int8_experts : flag_from_env("DS4_INT8_EXPERTS", true);
  m.opt.int8_experts = m.int8_experts;  // options() reports the resolved value (as act_mma)
  m.int8_dense = copt.int8_dense ? *copt.int8_dense : flag_from_env("DS4_INT8_DENSE", false);
  m.opt.int8_dense = m.int8_dense;
  // A draft head on the GPU: MTPLX's DSpark when the checkpoint has it (it wins over ds4's MTP
  // head, as on the CPU), else ds4's MTP head; either only when the device can look its
  // tokens' embedding rows up (and, for DSpark, its Markov rows).
  const bool dspark = m.w.dspark && dc::embed_rows_supports(m.w.embed.type) &&
                      dc::embed_rows_supports(m.w.dspark->markov_w1.type);
  const bool mtp = m.w.mtp && !m.w.dspark && dc::embed_rows_supports(m.w.embed.type);
  if (mtp) m.c = with_mtp_layer(m.c);        // the head's layer is index c.layers
  if (dspark) m.c = with_dspark_layers(m.c);  // stages c.layers .. c.layers + 2
  const Config& c = m.c;
  m.info.family = "deepseek_v4";
  m.info.name = m.src->config().value("_name_or_path", std::filesystem::path(m.src->path()).filename().string());
  m.info.vocab_size = c.vocab;
  m.info.hidden_size = c.hidden;
  const int64_t ctx = opt.max_context > 0 ? opt.max_context : kCudaDefaultContext;
  m.info.max_context = std::min(ctx, c.max_positions);
  m.info.eos_token_ids = c.eos;
  m.info.default_prefill_chunk = 4096;  // SPEC §4
  m.info.has_draft_head = mtp || dspark;
  const LayerWeights& l0 = m.w.layers[0];
  const WeightMatrix* probe[] = {&m.w.lm_head, &l0.q_a, &l0.attn_hc.fn, &l0.router, &l0.exp_gate[0], &l0.exp_down[0]};
  std::vector<const WeightMatrix*> mats(std::begin(probe), std::end(probe));
  if (mtp)
    for (const WeightMatrix* mat : {&m.w.mtp->e_proj, &m.w.mtp->h_proj, &m.w.mtp->block.q_a, &m.w.mtp->block.exp_gate[0],
                                    &m.w.mtp->block.exp_down[0]})
      mats.push_back(mat);
  if (dspark) {
    const DsparkWeights& d = *m.w.dspark;
    if (int64_t(d.stages.size()) != kDsparkStages)
      throw InputError(m.src->path() + ": DSpark needs " + std::to_string(kDsparkStages) + " stages");
    for (const WeightMatrix* mat : {&d.main_proj, &d.markov_w2, &d.head_hc.fn})
      mats.push_back(mat);
    for (const LayerWeights& st : d.stages)
      for (const WeightMatrix* mat : {&st.q_a, &st.kv, &st.q_b, &st.o_a, &st.exp_gate[0], &st.exp_down[0]})
        mats.push_back(mat);
  }
  for (const WeightMatrix* mat : mats)
    if (!dc::gemv_supports(mat->type))
      throw InputError(m.src->path() + ": weight type " + std::string(dtype_name(mat->type)) + " has no CUDA gemv");
  m.hcd = dc::HcDims{c.hc, c.hidden, c.sinkhorn_iters, c.hc_eps, c.rms_eps};
  m.dw = upload_weights(c, m.w, inv_freq(c.rope_main, c.rope_dim), inv_freq(c.rope_compress, c.rope_dim),
                        UploadOptions{copt.fuse_projections, mtp, dspark});
  const auto db = deepseek_v4::cuda::decode_bytes_per_token(c, m.w);
  m.decode_bytes = DecodeBytes{db.dense, db.experts, db.head};
  m.lay = state_layout(c, m.info.max_context, mtp, dspark ? kDsparkStages : 0);
  m.sl = scratch_layout(c, m.info.max_context);
  // act_quant's slots (act_inputs.h) after the step scratch's buffers (the chunk rows copy
  // only sl.bytes) and after the chunk's MoE buffers; sized whether or not it is on now
  // (set_options switches it).
  const int64_t taps = dspark ? int64_t(c.dspark_taps.size()) : 0, rank = dspark ? m.w.dspark->rank : 0;
  m.sa = act_layout(c, 1, m.sl.bytes, mtp, taps, rank);
  m.scratch = dc::DeviceBuffer(m.sa.end, "deepseek_v4 step scratch");
  if (copt.chunk_rows < 1 || copt.chunk_rows > kMaxChunkRows)
    throw InputError("deepseek_v4 cuda: chunk_rows " + std::to_string(copt.chunk_rows) + " is not in 1.." +
                     std::to_string(kMaxChunkRows));
  if (copt.prefill_rows < 0 || copt.prefill_rows > kMaxPrefillRows)
    throw InputError("deepseek_v4 cuda: prefill_rows " + std::to_string(copt.prefill_rows) + " is not in 0.." +
                     std::to_string(kMaxPrefillRows));
  if (copt.batch_rows < 1) throw InputError("deepseek_v4 cuda: batch_rows " + std::to_string(copt.batch_rows) + " < 1");
  // DSpark's K5 pass runs its five block rows in the chunk scratch, whatever chunk_rows is.
  const int64_t verify_rows = dspark ? std::max<int64_t>(copt.chunk_rows, kDsparkBlock) : copt.chunk_rows;
  m.cl = chunk_layout(c, m.sl, prefill_chunk_rows(c, m.sl, m.lay.bytes, verify_rows, copt.prefill_rows, mtp, taps));
  m.opt.prefill_rows = int(std::min<int64_t>(copt.prefill_rows, m.cl.rows));  // (the rows that fit)
  m.ca = act_layout(c, m.cl.rows, m.cl.bytes, mtp, taps, 0);
  if (m.cl.rows > 1) m.chunk = dc::DeviceBuffer(m.ca.end, "deepseek_v4 chunk scratch");
  m.hc_counts = dc::DeviceBuffer(size_t(std::max<int64_t>(m.cl.rows, 1)) * sizeof(unsigned), "deepseek_v4 hc counters");
  DS4_CUDA_CHECK(cudaMemset(m.hc_counts.get(), 0, m.hc_counts.bytes()));
  m.info.batched_decode = m.cl.rows > 1;  // decode_batch's rows live in the chunk scratch (batch.cu)
  {
    const int64_t cols = matmul_cols(c), mr = std::max<int64_t>(m.cl.rows, 1);
    m.mm_main = std::make_unique<dc::MatmulWorkspace>(mr, cols, kMatmulTile, tensor_core_rows(copt), "deepseek_v4 matmul",
                                                     dc::model_matmul_precision());
    m.mm_side = std::make_unique<dc::MatmulWorkspace>(mr, cols, kMatmulTile, tensor_core_rows(copt),
                                                     "deepseek_v4 side matmul", dc::model_matmul_precision());
    // experts: gate|up {2F, hidden}, down {hidden, F}; they run on `stream` (mm_main)
    m.gg = dc::make_grouped_gemm(mr, c.experts_used, c.experts, std::max(2 * c.expert_ff, c.hidden),
                                 std::max(c.hidden, c.expert_ff), *m.mm_main, "deepseek_v4");
  }
  // Rows of the step input and logits (as many as the chunk scratch: set_options may raise
  // chunk_rows up to cl.rows); the one-token step uses row 0.
  m.in_host = std::make_unique<Pinned>(m.sl.in_bytes * size_t(m.cl.rows));
  m.logits_host = std::make_unique<Pinned>(size_t(c.vocab) * sizeof(float) * size_t(m.cl.rows));
  if (mtp || dspark) {  // the draft's buffers and the captured verify window's records
    m.dl = draft_layout(c, m.lay, dspark ? m.w.dspark->rank : 0);
    m.draft = dc::DeviceBuffer(m.dl.bytes, mtp ? "deepseek_v4 MTP draft chain" : "deepseek_v4 DSpark draft");
    m.draft_host = std::make_unique<Pinned>(size_t(kDraftHostWords) * sizeof(int32_t));
    if (dspark) {
      const int32_t noise = int32_t(c.dspark_noise);
      DS4_CUDA_CHECK(cudaMemcpy(m.draft.as<uint8_t>() + m.dl.noise, &noise, 4, cudaMemcpyHostToDevice));
    }
    m.cap = capture_layout(c, m.lay, verify_rows);  // each state's records (CudaState::cap_buf)
    if (!m.cap.lanes.empty()) {
      m.cap_lanes = dc::DeviceBuffer(m.cap.lanes.size() * sizeof(LaneUndo), "deepseek_v4 lane undo table");
      DS4_CUDA_CHECK(cudaMemcpy(m.cap_lanes.get(), m.cap.lanes.data(), m.cap.lanes.size() * sizeof(LaneUndo),
                                cudaMemcpyHostToDevice));
    }
  }
  // verify_batch: the same rows, one group per window (verify_batch.cu), every window the engine
  // sends within one chunk's capture records (set_options keeps this up to date). After cap is
  // laid out: before it, cap.rows was 0 and a loaded model never declared batched_verify.
  m.info.batched_verify = m.info.batched_decode && captures_every_window(std::min<int64_t>(m.opt.chunk_rows, m.cap.rows));
  DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking));
  DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&m.side_stream, cudaStreamNonBlocking));
  DS4_CUDA_CHECK(cudaEventCreateWithFlags(&m.fork_ev, cudaEventDisableTiming));
  DS4_CUDA_CHECK(cudaEventCreateWithFlags(&m.join_ev, cudaEventDisableTiming));
}

DeepseekV4CudaModel::~DeepseekV4CudaModel() {
  if (!impl_) return;
  impl_->batch_graphs.clear();
  for (cudaEvent_t e : {impl_->fork_ev, impl_->join_ev})
    if (e) cudaEventDestroy(e);
  for (cudaStream_t s : {impl_->stream, impl_->side_stream})
    if (s) cudaStreamDestroy(s);
}

const ModelInfo& DeepseekV4CudaModel::info() const { return impl_->info; }
const Config& DeepseekV4CudaModel::config() const { return impl_->c; }
DeepseekV4CudaModel::ActLaunches DeepseekV4CudaModel::act_launches() const { return impl_->act_n; }
bool DeepseekV4CudaModel::has_dspark() const { return impl_->dw.has_dspark; }
size_t DeepseekV4CudaModel::weight_bytes() const { return impl_->dw.buffer.bytes(); }
DeepseekV4CudaModel::DecodeBytes DeepseekV4CudaModel::decode_bytes_per_token() const { return impl_->decode_bytes; }
const std::map<std::string, double>& DeepseekV4CudaModel::op_times() const { return impl_->prof.ms(); }
void DeepseekV4CudaModel::reset_op_times() { impl_->prof.reset(); }

void DeepseekV4CudaModel::fill_context_for_bench(ModelState& state, int64_t position, uint64_t seed) const {
  auto& st = dynamic_cast<CudaState&>(state);
  const Impl& m = *impl_;
  if (position < 0 || position >= m.lay.max_ctx)
    throw InputError("deepseek_v4 cuda: bench context " + std::to_string(position) + " outside [0, max_context)");
  if (st.mtp_on || st.dspark_on) throw InputError("deepseek_v4 cuda: bench context fill on a state with a draft head");
  // Every byte of the state but the position counter is float caches (step_layout.h): one
  // F32 "matrix" over the floats before the counter, one over those after it.
  auto fill = [&](size_t from, size_t to) {
    if (to <= from) return;
    WeightMatrix w;
    w.type = DType::F32, w.rows = 1, w.cols = int64_t((to - from) / 4);
    w.data = st.buf.as<uint8_t>() + from;
    dc::fill_random_matrix(w, seed++, 0.5f, m.stream);
  };
  fill(0, m.lay.pos);
  fill(dc::layout_align(m.lay.pos + 4), m.lay.bytes);  // the counter has its own aligned piece
  const int32_t p = int32_t(position);
  DS4_CUDA_CHECK(cudaMemcpyAsync(st.buf.as<uint8_t>() + m.lay.pos, &p, 4, cudaMemcpyHostToDevice, m.stream));
  DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  st.pos = position;
  st.drop_graphs();
}
const CudaModelOptions& DeepseekV4CudaModel::options() const { return impl_->opt; }
void DeepseekV4CudaModel::set_options(const CudaModelOptions& copt) {
  if (copt.graphs && impl_->observer) throw Error("deepseek_v4 cuda: the layer observer needs direct launches (graphs off)");
  // The chunk scratch and pinned rows are sized at load: fewer rows are fine, more are not; a
  // verify chunk stays exact (<= kMaxChunkRows) and within each state's capture records
  // (cap.rows: the load's verify rows).
  if (copt.chunk_rows < 1 || copt.chunk_rows > std::max<int64_t>(impl_->cl.rows, 1) ||
      copt.chunk_rows > kMaxChunkRows || (impl_->cap.rows > 0 && copt.chunk_rows > impl_->cap.rows) ||
      (copt.chunk_rows > 1 && impl_->cl.rows < 2))
    throw InputError("deepseek_v4 cuda: chunk_rows " + std::to_string(copt.chunk_rows) + " exceeds the rows the model "
                     "was loaded with (" + std::to_string(std::min<int64_t>(impl_->cl.rows, impl_->cap.rows > 0 ? impl_->cap.rows : kMaxChunkRows)) +
                     ")");
  if (copt.prefill_rows < 0 || copt.prefill_rows > impl_->cl.rows)
    throw InputError("deepseek_v4 cuda: prefill_rows " + std::to_string(copt.prefill_rows) + " exceeds the " +
                     std::to_string(impl_->cl.rows) + " rows the model was loaded with");
  if (copt.batch_rows < 1) throw InputError("deepseek_v4 cuda: batch_rows " + std::to_string(copt.batch_rows) + " < 1");
  const bool mma = impl_->opt.act_mma.value_or(false), int8 = impl_->int8_experts, int8_dense = impl_->int8_dense;
  const bool two_streams = impl_->two_streams(), fuse = impl_->opt.fuse_projections, seq = impl_->opt.seq_launches;
  impl_->opt = copt;
  // fuse_projections shaped the upload (load only): options() keeps reporting what was loaded.
  impl_->opt.fuse_projections = fuse;
  impl_->info.batched_verify =
      impl_->info.batched_decode && captures_every_window(std::min<int64_t>(copt.chunk_rows, impl_->cap.rows));
  // The optional fields resolve as at load, unset = keep the current setting (int8_experts was
  // read at load only: an explicit value here was dropped while options() reported it).
  impl_->opt.act_mma = copt.act_mma.value_or(mma);
  impl_->int8_experts = copt.int8_experts.value_or(int8);
  impl_->opt.int8_experts = impl_->int8_experts;
  impl_->int8_dense = copt.int8_dense.value_or(int8_dense);
  impl_->opt.int8_dense = impl_->int8_dense;
  // What a forward enqueues changes: every captured graph goes (the states' at their next
  // forward, fresh_graphs; the batch graphs now). int8_experts only shapes tensor-core chunks,
  // which launch directly today (run_chunk), but a graph that held one would be stale.
  if ((copt.act_quant && *copt.act_quant != impl_->c.act_quant) || *impl_->opt.act_mma != mma ||
      impl_->int8_experts != int8 || impl_->int8_dense != int8_dense || impl_->two_streams() != two_streams) {
    if (copt.act_quant) impl_->c.act_quant = *copt.act_quant;
    ++impl_->graph_epoch;
    impl_->batch_graphs.clear();
  }
  if (copt.seq_launches != seq) impl_->batch_graphs.clear();  // the batch graphs hold the launches
  impl_->prof.on = copt.profile && !copt.graphs;
  impl_->mm_main->set_min_rows(tensor_core_rows(copt));
  impl_->mm_side->set_min_rows(tensor_core_rows(copt));
}

double DeepseekV4CudaModel::chunk_bytes_ratio(int64_t rows) const {
  const Config& c = impl_->c;
  const DecodeBytes& d = impl_->decode_bytes;
  const double E = double(c.experts), k = double(c.experts_used);
  const double used = E * (1.0 - std::pow(1.0 - k / E, double(rows)));  // expected union of the rows' top-k sets
  return (double(d.dense) + double(d.head) + double(d.experts) * used / k) / double(d.total());
}

void DeepseekV4CudaModel::set_layer_observer(LayerObserver fn) {
  if (impl_->opt.graphs && fn) throw Error("deepseek_v4 cuda: the layer observer needs direct launches (graphs off)");
  impl_->observer = std::move(fn);
}

std::unique_ptr<ModelState> DeepseekV4CudaModel::new_state() const { return std::make_unique<CudaState>(impl_->c, impl_->lay); }

void DeepseekV4CudaModel::forward(ModelState& state, std::span<const int32_t> tokens, Logits mode,
                                  std::vector<float>& logits) {
  CudaState& st = cuda_state(state);
  Impl& m = *impl_;
  const Config& c = m.c;
  const int64_t n = int64_t(tokens.size()), V = c.vocab;
  logits.clear();
  if (n == 0) return;
  check_window("deepseek_v4", m.info, st.pos, tokens);
  if (mode == Logits::kAll) logits.resize(size_t(n * V));
  uint8_t* in = static_cast<uint8_t*>(m.in_host->p);
  // Long forwards in prefill chunks (tensor cores: tensor_core_rows), the rest in chunk_rows,
  // with or without a draft head: the head records the chunk's rows with the chunk's own
  // multi-row products (mtp.cu mtp_record_rows, dspark.cu dspark_record_rows).
  const bool prefill = n > m.opt.chunk_rows && m.opt.prefill_rows > m.opt.chunk_rows;
  const int64_t C = prefill ? m.opt.prefill_rows : m.opt.chunk_rows;  // (<= cl.rows: load and set_options)
  if (n > 1 && C > 1 && !m.observer) {  // chunks of up to C rows (chunk.cu)
    forward_in_chunks(n, C, mode, V, static_cast<const float*>(m.logits_host->p), logits,
                      [&](int64_t t0, int64_t T, Logits cm) {
                        for (int64_t t = 0; t < T; ++t) {  // pinned row t: [token id | embedding row]
                          uint8_t* row = in + size_t(t) * m.sl.in_bytes;
                          const int32_t tok = tokens[size_t(t0 + t)];
                          std::memcpy(row + m.sl.tok, &tok, sizeof tok);
                          dequantize_row(m.w.embed, tok, reinterpret_cast<float*>(row + m.sl.emb));
                        }
                        m.run_chunk(st, T, cm);
                        st.pos += T;
                      });
    return;
  }
  for (int64_t t = 0; t < n; ++t) {
    const int32_t tok = tokens[size_t(t)];
    std::memcpy(in + m.sl.tok, &tok, sizeof tok);  // hash-routed layers read it on the device
    dequantize_row(m.w.embed, tok, reinterpret_cast<float*>(in + m.sl.emb));
    const bool want = mode == Logits::kAll || (mode == Logits::kLast && t == n - 1);
    m.run_step(st, want);
    st.pos += 1;
    if (want && !m.top_only) {
      const float* src = static_cast<const float*>(m.logits_host->p);
      if (mode == Logits::kAll) std::copy_n(src, V, logits.data() + t * V);
      else logits.assign(src, src + V);
    }
  }
}

void DeepseekV4CudaModel::forward_candidates(ModelState& state, std::span<const int32_t> tokens,
    const CandidateRequest& req, SampleCandidates& out, std::vector<float>& logits, const NeedFull& need_full) {
  Impl& m = *impl_;
  if (!cuda_forward_candidates(m.cand, req, tokens.size(), m.top_only,
                               [&] { forward(state, tokens, Logits::kLast, logits); }, m.S(m.sl.logits),
                               m.logits_host->p, m.c.vocab, m.stream, out, logits, need_full))
    Model::forward_candidates(state, tokens, req, out, logits, need_full);
}

CudaModelOptions cuda_options_from_env() {
  CudaModelOptions o;
  o.tensor_cores = cuda_tensor_cores_from_env();
  static_assert(kServedPrefillRows <= kMaxPrefillRows);
  if (o.tensor_cores) o.prefill_rows = kServedPrefillRows;
  return o;
}

std::unique_ptr<Model> load_cuda(const std::string& path, const LoadOptions& opt, const CudaModelOptions& copt) {
  return std::make_unique<DeepseekV4CudaModel>(open_tensor_source(path), opt, copt);
}

}  // namespace ds4::deepseek_v4
