#include "models/glm5/weights.h"

#include "core/error.h"
#include "formats/tensor_source.h"

namespace ds4::glm5 {
namespace {

// Binds tensors under one name prefix and checks every shape against the config.
class Binder {
 public:
  Binder(const TensorSource& src, std::string prefix) : src_(src), prefix_(std::move(prefix)) {}

  WeightMatrix mat(const std::string& name, int64_t rows, int64_t cols) const {
    return as_matrix(src_.get(prefix_ + name, {rows, cols}));
  }
  std::vector<float> vec(const std::string& name, const std::vector<int64_t>& shape) const {
    return to_f32(src_.get(prefix_ + name, shape));
  }
  const TensorInfo& raw(const std::string& name, const std::vector<int64_t>& shape) const {
    return src_.get(prefix_ + name, shape);
  }
  static std::vector<float> to_f32(const TensorInfo& t) {
    WeightMatrix w;
    w.type = t.type;
    w.rows = 1;
    w.cols = t.numel();
    w.data = t.data;
    std::vector<float> out(size_t(t.numel()));
    dequantize_row(w, 0, out.data());
    return out;
  }

 private:
  const TensorSource& src_;
  std::string prefix_;
};

std::string layer_name(int64_t l, const char* rest) { return "layers." + std::to_string(l) + "." + rest; }

void bind_hc(const Binder& b, const Config& c, const std::string& name, HcStore& hc) {
  const int64_t mixes = (2 + c.hc_mult) * c.hc_mult;
  hc.base = b.vec(name + ".base", {mixes});
  hc.scale = b.vec(name + ".scale", {3});
  hc.w.fn = b.mat(name + ".fn", mixes, c.hc_mult * c.hidden_size);
  hc.w.base = hc.base.data();
  hc.w.scale = hc.scale.data();
  hc.shape.n_hc = c.hc_mult;
  hc.shape.hidden = c.hidden_size;
  hc.shape.sinkhorn_iters = int(c.hc_sinkhorn_iters);
  hc.shape.hc_eps = c.hc_eps;
  hc.shape.norm_eps = c.rms_norm_eps;  // HF: the unweighted norm takes rms_norm_eps
}

void bind_kda(const Binder& b, const Config& c, const std::string& p, KdaWeights& w) {
  const int64_t H = c.hidden_size, hd = c.linear_head_dim, nh = c.linear_num_heads, qkv = hd * nh;
  w.q = b.mat(p + "q_proj.weight", qkv, H);
  w.k = b.mat(p + "k_proj.weight", qkv, H);
  w.v = b.mat(p + "v_proj.weight", qkv, H);
  w.f_a = b.mat(p + "forget_gate.f_a_proj.weight", hd, H);
  w.f_b = b.mat(p + "forget_gate.f_b_proj.weight", qkv, hd);
  w.b = b.mat(p + "b_proj.weight", nh, H);
  w.g_a = b.mat(p + "g_a_proj.weight", hd, H);
  w.g_b = b.mat(p + "g_b_proj.weight", qkv, hd);
  w.o = b.mat(p + "o_proj.weight", H, qkv);
  w.conv = b.vec(p + "conv1d.weight", {3 * qkv, 1, c.linear_conv_kernel_dim});
  w.dt_bias = b.vec(p + "forget_gate.dt_bias", {qkv});
  w.a_log = b.vec(p + "forget_gate.A_log", {nh});
  w.o_norm = b.vec(p + "o_norm.weight", {hd});
}

void bind_mla(const Binder& b, const Config& c, const std::string& p, bool indexer, MlaWeights& w) {
  const int64_t H = c.hidden_size, nh = c.num_attention_heads, nope = c.qk_nope_head_dim, vd = c.v_head_dim;
  const int64_t kvr = c.kv_lora_rank, qr = c.q_lora_rank;
  w.q_a = b.mat(p + "q_a_proj.weight", qr, H);
  w.q_b = b.mat(p + "q_b_proj.weight", nh * nope, qr);
  w.kv_a = b.mat(p + "kv_a_proj_with_mqa.weight", kvr, H);
  w.o = b.mat(p + "o_proj.weight", H, nh * vd);
  w.q_a_norm = b.vec(p + "q_a_layernorm.weight", {qr});
  w.kv_a_norm = b.vec(p + "kv_a_layernorm.weight", {kvr});
  // kv_b_proj {heads*(nope+v), kv_lora}: per head `nope` key rows then `v` value rows.
  const WeightMatrix kvb = b.mat(p + "kv_b_proj.weight", nh * (nope + vd), kvr);
  w.w_uk.resize(size_t(nh * nope * kvr));
  w.w_uv.resize(size_t(nh * vd * kvr));
  for (int64_t h = 0; h < nh; ++h) {
    for (int64_t r = 0; r < nope; ++r) dequantize_row(kvb, h * (nope + vd) + r, &w.w_uk[size_t((h * nope + r) * kvr)]);
    for (int64_t r = 0; r < vd; ++r) dequantize_row(kvb, h * (nope + vd) + nope + r, &w.w_uv[size_t((h * vd + r) * kvr)]);
  }
  w.has_indexer = indexer;
  if (!indexer) return;
  const int64_t ih = c.index_n_heads, id = c.index_head_dim;
  IndexerWeights& x = w.indexer;
  x.wq_b = b.mat(p + "indexer.wq_b.weight", ih * id, qr);
  x.wk = b.mat(p + "indexer.wk.weight", id, H);
  x.weights_proj = b.mat(p + "indexer.weights_proj.weight", ih, H);
  x.compress_gate = b.mat(p + "indexer.index_kpool_compress_gate", id, H);
  x.k_norm_w = b.vec(p + "indexer.k_norm.weight", {id});
  x.k_norm_b = b.vec(p + "indexer.k_norm.bias", {id});
  x.ape = b.vec(p + "indexer.index_kpool_compress_ape", {c.index_kpool, id});
}

void bind_mlp(const Binder& b, const std::string& p, int64_t H, int64_t inter, MlpWeights& w) {
  w.gate = b.mat(p + "gate_proj.weight", inter, H);
  w.up = b.mat(p + "up_proj.weight", inter, H);
  w.down = b.mat(p + "down_proj.weight", H, inter);
}

void bind_moe(const Binder& b, const Config& c, const std::string& p, MoeWeights& w) {
  const int64_t H = c.hidden_size, E = c.n_routed_experts, I = c.moe_intermediate_size;
  w.router = b.mat(p + "gate.weight", E, H);
  w.bias = b.vec(p + "gate.e_score_correction_bias", {E});
  const TensorInfo& gu = b.raw(p + "experts.gate_up_proj", {E, 2 * I, H});
  const TensorInfo& dn = b.raw(p + "experts.down_proj", {E, H, I});
  for (int64_t e = 0; e < E; ++e) {
    w.gate_up.push_back(as_matrix_slice(gu, e));
    w.down.push_back(as_matrix_slice(dn, e));
  }
  bind_mlp(b, p + "shared_experts.", H, I * c.n_shared_experts, w.shared);
}

// The MTP layer's kind is not in the config (layer_types covers the trunk only): read it
// from the tensors present. A DSA layer must carry its own indexer (nothing precedes it).
void bind_mtp(const TensorSource& src, const Binder& b, const std::string& prefix, const Config& c, Weights& w) {
  const std::string p = "layers." + std::to_string(c.num_hidden_layers) + ".";
  if (!src.find(prefix + p + "eh_proj.weight")) return;
  auto m = std::make_unique<MtpWeights>();
  const int64_t H = c.hidden_size;
  m->enorm = b.vec(p + "enorm.weight", {H});
  m->hnorm = b.vec(p + "hnorm.weight", {H});
  m->shared_norm = b.vec(p + "shared_head.norm.weight", {H});
  m->eh_proj = b.mat(p + "eh_proj.weight", H, 2 * H);
  LayerWeights& L = m->layer;
  const bool kda = src.find(prefix + p + "self_attn.q_proj.weight") != nullptr;
  L.kind = kda ? LayerKind::kLinear : LayerKind::kIndexed;
  L.sparse_mlp = src.find(prefix + p + "mlp.gate.weight") != nullptr;
  if (kda) {
    bind_kda(b, c, p + "self_attn.", L.kda);
  } else {
    if (!src.find(prefix + p + "self_attn.indexer.wq_b.weight"))
      throw InputError(src.path() + ": MTP layer '" + prefix + p + "' is a DSA layer without its own indexer "
                       "(self_attn.indexer.*): no earlier layer can lend it a selection");
    bind_mla(b, c, p + "self_attn.", true, L.mla);
  }
  if (L.sparse_mlp) bind_moe(b, c, p + "mlp.", L.moe);
  else bind_mlp(b, p + "mlp.", H, c.intermediate_size, L.mlp);
  L.input_norm = b.vec(p + "input_layernorm.weight", {H});
  L.post_norm = b.vec(p + "post_attention_layernorm.weight", {H});
  bind_hc(b, c, p + "attn_hc", L.attn_hc);
  bind_hc(b, c, p + "ffn_hc", L.ffn_hc);
  w.mtp = std::move(m);
}

}  // namespace

Weights bind_weights(const TensorSource& src, const Config& c) {
  // Flat text-only checkpoints use "model."; the multimodal layout nests the text model.
  std::string prefix = "model.";
  if (src.find("model.language_model.embed_tokens.weight")) prefix = "model.language_model.";
  const Binder b(src, prefix);
  Weights w;
  w.embed = b.mat("embed_tokens.weight", c.vocab_size, c.hidden_size);
  w.norm = b.vec("norm.weight", {c.hidden_size});
  // Tied checkpoints (tie_word_embeddings) may leave lm_head.weight out: the embeddings serve.
  if (c.tie_word_embeddings && !src.find("lm_head.weight")) w.lm_head = w.embed;
  else w.lm_head = as_matrix(src.get("lm_head.weight", {c.vocab_size, c.hidden_size}));
  w.layers.resize(size_t(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights& L = w.layers[size_t(l)];
    L.kind = c.layer_types[size_t(l)];
    L.sparse_mlp = c.mlp_sparse[size_t(l)];
    const std::string attn = layer_name(l, "self_attn.");
    if (L.kind == LayerKind::kLinear) bind_kda(b, c, attn, L.kda);
    else bind_mla(b, c, attn, !c.indexer_shared[size_t(l)], L.mla);
    if (L.sparse_mlp) bind_moe(b, c, layer_name(l, "mlp."), L.moe);
    else bind_mlp(b, layer_name(l, "mlp."), c.hidden_size, c.intermediate_size, L.mlp);
    L.input_norm = b.vec(layer_name(l, "input_layernorm.weight"), {c.hidden_size});
    L.post_norm = b.vec(layer_name(l, "post_attention_layernorm.weight"), {c.hidden_size});
    bind_hc(b, c, layer_name(l, "attn_hc"), L.attn_hc);
    bind_hc(b, c, layer_name(l, "ffn_hc"), L.ffn_hc);
  }
  bind_mtp(src, b, prefix, c, w);
  return w;
}

}  // namespace ds4::glm5
