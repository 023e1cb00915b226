// Weight upload for the CUDA GLM 5.x model through backend/cuda/weight_upload.h: one pass
// sizes everything, admission checks it, a second pass copies into one device buffer
// (pinned staging, progress on stderr).
#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"

#include "models/glm5/cuda/device_weights.h"

namespace ds4::glm5::cuda {
namespace {

using ds4::cuda::Uploader;

// Column blocks of fn for hc_fused.cu: the most (up to hc_split_target()) that leave whole rows of
// at least 64 columns, 16-byte aligned, at most kHcFusedMaxCols wide; 1 = keep it row-major
// (a type the fused kernel does not read, or a shape it cannot split).
int64_t hc_splits(const WeightMatrix& f) {
  if (f.type != DType::F32 && f.type != DType::F16 && f.type != DType::BF16) return 1;
  const int64_t elem = f.type == DType::F32 ? 4 : 2;
  auto whole = [&](int64_t sp) {
    const int64_t cols = f.cols / sp;
    return f.cols % sp == 0 && cols >= 64 && cols % 8 == 0 && (cols * elem) % 16 == 0;
  };
  int64_t sp = 1;
  while (sp < ds4::cuda::hc_split_target() && whole(sp * 2)) sp *= 2;
  return sp > 1 && f.cols / sp <= ds4::cuda::kHcFusedMaxCols ? sp : 1;
}

// gen: the matrices are generated on the device (fill mode): fn's values are random in any
// layout, so the generated row-major bytes are read as the column blocks.
DHc hc(Uploader& u, const HcStore& h, bool gen) {
  DHc d;
  const WeightMatrix& f = h.w.fn;
  const int64_t sp = hc_splits(f);
  if (sp == 1) {
    d.fn = u.mat(f);
  } else {
    d.fn = f;
    d.fn.cols = f.cols / sp;
    d.splits = sp;
    const size_t row_b = size_t(f.row_stride_bytes()), chunk = row_b / size_t(sp);
    d.split_stride = size_t(f.rows) * chunk;
    if (gen) {
      d.fn.data = u.mat(f).data;
    } else {
      std::vector<uint8_t> t;  // staged by add() before it returns
      if (u.copying()) {       // {splits, rows, chunk}: column block s of every row, then the next block
        t.resize(size_t(f.rows) * row_b);
        const uint8_t* src = static_cast<const uint8_t*>(f.data);
        for (int64_t s = 0; s < sp; ++s)
          for (int64_t r = 0; r < f.rows; ++r)
            std::memcpy(t.data() + size_t(s * f.rows + r) * chunk, src + size_t(r) * row_b + size_t(s) * chunk, chunk);
      }
      d.fn.data = u.add(t.data(), size_t(f.rows) * row_b);
    }
  }
  d.base = u.vec(h.base);
  d.scale = u.vec(h.scale);
  const cpu::HcShape& sh = h.shape;
  d.dims = ds4::cuda::HcDims{sh.n_hc, sh.hidden, sh.sinkhorn_iters, sh.hc_eps, sh.norm_eps, 1};
  return d;
}

// Per-head f32 blocks {heads, rows, cols} as a WeightMatrix of head 0 plus a byte stride.
WeightMatrix f32_heads(Uploader& u, const std::vector<float>& v, int64_t rows, int64_t cols) {
  WeightMatrix m;
  m.type = DType::F32;
  m.rows = rows;
  m.cols = cols;
  m.data = u.add(v.data(), v.size() * sizeof(float));
  return m;
}

DMla mla(Uploader& u, const Config& c, const MlaWeights& w, bool fuse) {
  const int64_t nh = c.num_attention_heads, nope = c.qk_nope_head_dim, vd = c.v_head_dim, kvr = c.kv_lora_rank;
  DMla d;
  d.in = w.has_indexer ? u.proj({&w.q_a, &w.kv_a, &w.indexer.wk, &w.indexer.compress_gate, &w.indexer.weights_proj}, fuse)
                       : u.proj({&w.q_a, &w.kv_a}, fuse);
  d.q_b = u.mat(w.q_b);
  d.o = u.mat(w.o);
  // w_uk {heads, nope, kv_lora} -> {heads, kv_lora, nope}: q_lat[h] = W_uk[h]^T q[h] is then a gemv.
  std::vector<float> ukt(w.w_uk.size());
  for (int64_t h = 0; h < nh; ++h)
    for (int64_t r = 0; r < nope; ++r)
      for (int64_t i = 0; i < kvr; ++i) ukt[size_t((h * kvr + i) * nope + r)] = w.w_uk[size_t((h * nope + r) * kvr + i)];
  d.uk_t = f32_heads(u, ukt, kvr, nope);
  d.uk_stride = size_t(kvr * nope) * sizeof(float);
  d.uv = f32_heads(u, w.w_uv, vd, kvr);
  d.uv_stride = size_t(vd * kvr) * sizeof(float);
  d.q_a_norm = u.vec(w.q_a_norm);
  d.kv_a_norm = u.vec(w.kv_a_norm);
  d.has_indexer = w.has_indexer;
  if (w.has_indexer)
    d.idx = DIndexer{u.mat(w.indexer.wq_b), u.vec(w.indexer.k_norm_w), u.vec(w.indexer.k_norm_b), u.vec(w.indexer.ape)};
  return d;
}

DLayer layer(Uploader& u, const Config& c, const LayerWeights& w, bool fuse, bool gen, size_t& routed) {
  DLayer d;
  d.kind = w.kind;
  d.sparse = w.sparse_mlp;
  d.attn_hc = hc(u, w.attn_hc, gen);
  d.ffn_hc = hc(u, w.ffn_hc, gen);
  d.input_norm = u.vec(w.input_norm);
  d.post_norm = u.vec(w.post_norm);
  if (w.kind == LayerKind::kLinear) {
    const KdaWeights& k = w.kda;
    d.kda = DKda{u.proj({&k.q, &k.k, &k.v, &k.f_a, &k.g_a, &k.b}, fuse), u.mat(k.f_b), u.mat(k.g_b), u.mat(k.o),
                 u.vec(k.conv), u.vec(k.dt_bias), u.vec(k.a_log), u.vec(k.o_norm)};
    const WeightMatrix &f = d.kda->f_b, &g = d.kda->g_b;
    if (f.type == g.type && f.rows == g.rows && f.cols == g.cols && !f.scales && !g.scales && g.data > f.data)
      d.kda->fg_stride = size_t(static_cast<const uint8_t*>(g.data) - static_cast<const uint8_t*>(f.data));
  } else {
    d.mla = mla(u, c, w.mla, fuse);
  }
  if (w.sparse_mlp) {
    const MoeWeights& m = w.moe;
    // n_shared_experts = 0: the router alone (a 0-row part would be an empty gemv launch);
    // the stacked rows keep their layout (router after 2 x 0 shared rows).
    if (m.shared.gate.rows == 0) d.moe.in = u.proj({&m.router}, fuse);
    else d.moe.in = u.proj({&m.shared.gate, &m.shared.up, &m.router}, fuse);
    d.moe.sh_down = u.mat(m.shared.down);
    d.moe.bias = u.vec(m.bias);
    const size_t before = u.used();
    d.moe.gate_up = u.experts(m.gate_up);
    d.moe.down = u.experts(m.down);
    routed += u.used() - before;
  } else {
    d.mlp = DMlp{u.proj({&w.mlp.gate, &w.mlp.up}, fuse), u.mat(w.mlp.down)};
  }
  return d;
}

void bind_all(Uploader& u, const Config& c, const Weights& w, bool fuse, bool gen, bool mtp_embed, DeviceWeights& d) {
  d.layers.clear();
  d.routed_bytes = 0;
  for (const auto& l : w.layers) d.layers.push_back(layer(u, c, l, fuse, gen, d.routed_bytes));
  d.norm = u.vec(w.norm);
  d.lm_head = u.mat(w.lm_head);
  d.mtp.reset();
  d.mtp_bytes = 0;
  if (w.mtp) {
    const size_t before = u.used();
    size_t head_routed = 0;  // not added to routed_bytes: weight_bytes_per_token is the trunk's
    const MtpWeights& m = *w.mtp;
    d.mtp = DMtp{u.mat(m.eh_proj), u.vec(m.enorm), u.vec(m.hnorm), u.vec(m.shared_norm),
                 layer(u, c, m.layer, fuse, gen, head_routed), WeightMatrix{}};
    if (mtp_embed) d.mtp->embed = u.mat(w.embed);
    d.mtp_bytes = u.used() - before;
  }
}

}  // namespace

DeviceWeights upload_weights(const Config& c, const Weights& w, bool fuse, ds4::cuda::MatrixFill* fill,
                             bool mtp_embed) {
  DeviceWeights d;
  d.buffer = ds4::cuda::upload_two_pass("glm5 weights", fill,
                                        [&](Uploader& u) { bind_all(u, c, w, fuse, fill != nullptr, mtp_embed, d); });
  return d;
}

void check_hc_fused(const DeviceWeights& d) {
  auto check = [](const DLayer& l) {
    for (const DHc* h : {&l.attn_hc, &l.ffn_hc})
      if (h->splits > 1 && !ds4::cuda::hc_fused_supported(hc_fn(*h), h->dims, false))
        throw InputError("glm5 cuda: hyper-connection fn of " + std::to_string(h->fn.rows) + " x " +
                         std::to_string(h->splits) + " x " + std::to_string(h->fn.cols) +
                         " does not fit the fused kernel (backend/cuda/hc_fused.cu)");
  };
  for (const DLayer& l : d.layers) check(l);
  if (d.mtp) check(d.mtp->layer);
}

}  // namespace ds4::glm5::cuda
