#include "models/deepseek_v4/weights.h"

#include <map>
#include <string>

#include "core/error.h"

namespace ds4::deepseek_v4 {
namespace {

// HF layer-relative name -> ds4 GGUF suffix (ds4.c weights_bind).
const std::map<std::string, std::string>& ds4_layer_names() {
  static const std::map<std::string, std::string> m = {
      {"attn_hc.fn", "hc_attn_fn.weight"}, {"attn_hc.base", "hc_attn_base.weight"},
      {"attn_hc.scale", "hc_attn_scale.weight"}, {"ffn_hc.fn", "hc_ffn_fn.weight"},
      {"ffn_hc.base", "hc_ffn_base.weight"}, {"ffn_hc.scale", "hc_ffn_scale.weight"},
      {"input_layernorm.weight", "attn_norm.weight"}, {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_a_proj.weight", "attn_q_a.weight"}, {"self_attn.q_a_norm.weight", "attn_q_a_norm.weight"},
      {"self_attn.q_b_proj.weight", "attn_q_b.weight"}, {"self_attn.kv_proj.weight", "attn_kv.weight"},
      {"self_attn.kv_norm.weight", "attn_kv_a_norm.weight"}, {"self_attn.sinks", "attn_sinks.weight"},
      {"self_attn.o_a_proj.weight", "attn_output_a.weight"}, {"self_attn.o_b_proj.weight", "attn_output_b.weight"},
      {"self_attn.compressor.position_bias", "attn_compressor_ape.weight"},
      {"self_attn.compressor.kv_proj.weight", "attn_compressor_kv.weight"},
      {"self_attn.compressor.gate_proj.weight", "attn_compressor_gate.weight"},
      {"self_attn.compressor.kv_norm.weight", "attn_compressor_norm.weight"},
      {"self_attn.compressor.indexer.q_b_proj.weight", "indexer.attn_q_b.weight"},
      {"self_attn.compressor.indexer.scorer.weights_proj.weight", "indexer.proj.weight"},
      {"self_attn.compressor.indexer.position_bias", "indexer_compressor_ape.weight"},
      {"self_attn.compressor.indexer.kv_proj.weight", "indexer_compressor_kv.weight"},
      {"self_attn.compressor.indexer.gate_proj.weight", "indexer_compressor_gate.weight"},
      {"self_attn.compressor.indexer.kv_norm.weight", "indexer_compressor_norm.weight"},
      {"mlp.gate.weight", "ffn_gate_inp.weight"}, {"mlp.gate.e_score_correction_bias", "exp_probs_b.bias"},
      {"mlp.gate.tid2eid", "ffn_gate_tid2eid.weight"},
      {"mlp.shared_experts.gate_proj.weight", "ffn_gate_shexp.weight"},
      {"mlp.shared_experts.up_proj.weight", "ffn_up_shexp.weight"},
      {"mlp.shared_experts.down_proj.weight", "ffn_down_shexp.weight"},
  };
  return m;
}

struct Binder {
  const TensorSource& src;
  bool ds4;
  std::string mtp;  // non-empty: layer names live under this prefix (the MTP block)

  std::string global(const std::string& hf) const {
    if (!ds4) return hf;
    static const std::map<std::string, std::string> g = {
        {"model.embed_tokens.weight", "token_embd.weight"}, {"lm_head.weight", "output.weight"},
        {"model.norm.weight", "output_norm.weight"}, {"model.hc_head.hc_fn", "output_hc_fn.weight"},
        {"model.hc_head.hc_base", "output_hc_base.weight"}, {"model.hc_head.hc_scale", "output_hc_scale.weight"}};
    return g.at(hf);
  }
  std::string layer(int64_t l, const std::string& hf) const {
    if (!ds4) return (mtp.empty() ? "model.layers." + std::to_string(l) + "." : mtp) + hf;
    return blk(l) + ds4_layer_names().at(hf);
  }
  std::string blk(int64_t l) const { return mtp.empty() ? "blk." + std::to_string(l) + "." : mtp; }
  WeightMatrix mat(const std::string& name, int64_t rows, int64_t cols) const {
    return as_matrix(src.get(name, {rows, cols}));
  }
  std::vector<float> vec(const std::string& name, const std::vector<int64_t>& shape) const {
    const TensorInfo& t = src.get(name, shape);
    const int64_t cols = shape.back(), rows = t.numel() / cols;
    WeightMatrix w{t.type, rows, cols, t.data};
    std::vector<float> out(static_cast<size_t>(t.numel()));
    for (int64_t r = 0; r < rows; ++r) dequantize_row(w, r, out.data() + r * cols);
    return out;
  }
  HcBlock hc(const std::string& fn, const std::string& base, const std::string& scale, int64_t mix,
             int64_t flat, int64_t n_scale) const {
    return {mat(fn, mix, flat), vec(base, {mix}), vec(scale, {n_scale})};
  }
};

CompressorWeights compressor(const Binder& b, int64_t l, const std::string& pre, int64_t ratio, int64_t dim,
                             int64_t width, int64_t hidden) {
  CompressorWeights c;
  c.dim = dim;
  c.width = width;
  c.kv = b.mat(b.layer(l, pre + "kv_proj.weight"), width, hidden);
  c.gate = b.mat(b.layer(l, pre + "gate_proj.weight"), width, hidden);
  c.ape = b.vec(b.layer(l, pre + "position_bias"), {ratio, width});
  c.norm = b.vec(b.layer(l, pre + "kv_norm.weight"), {dim});
  return c;
}

std::vector<int32_t> hash_table(const Binder& b, int64_t l, const Config& c) {
  const TensorInfo& t = b.src.get(b.layer(l, "mlp.gate.tid2eid"), {c.vocab, c.experts_used});
  std::vector<int32_t> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v;
    if (t.type == DType::I32) v = static_cast<const int32_t*>(t.data)[i];
    else if (t.type == DType::I64) v = static_cast<const int64_t*>(t.data)[i];
    else throw InputError(t.file + ": tensor " + t.name + " must be I32 or I64");
    if (v < 0 || v >= c.experts)
      throw InputError(t.file + ": tensor " + t.name + " routes to expert " + std::to_string(v) +
                       " outside [0, " + std::to_string(c.experts) + ")");
    out[size_t(i)] = int32_t(v);
  }
  return out;
}

void bind_experts(const Binder& b, int64_t l, const Config& c, LayerWeights& w) {
  const int64_t E = c.experts, F = c.expert_ff, H = c.hidden;
  if (b.ds4) {
    const std::string blk = b.blk(l);
    const TensorInfo& g = b.src.get(blk + "ffn_gate_exps.weight", {E, F, H});
    const TensorInfo& u = b.src.get(blk + "ffn_up_exps.weight", {E, F, H});
    const TensorInfo& d = b.src.get(blk + "ffn_down_exps.weight", {E, H, F});
    for (int64_t e = 0; e < E; ++e) {
      w.exp_gate.push_back(as_matrix_slice(g, e));
      w.exp_up.push_back(as_matrix_slice(u, e));
      w.exp_down.push_back(as_matrix_slice(d, e));
    }
    return;
  }
  // HF packs gate and up as one {E, 2F, H} tensor: gate rows [0, F), up rows [F, 2F).
  const TensorInfo& gu = b.src.get(b.layer(l, "mlp.experts.gate_up_proj"), {E, 2 * F, H});
  const TensorInfo& d = b.src.get(b.layer(l, "mlp.experts.down_proj"), {E, H, F});
  for (int64_t e = 0; e < E; ++e) {
    WeightMatrix m = as_matrix_slice(gu, e);
    WeightMatrix gate = m, up = m;
    gate.rows = up.rows = F;
    up.data = static_cast<const uint8_t*>(m.data) + F * m.row_stride_bytes();
    w.exp_gate.push_back(gate);
    w.exp_up.push_back(up);
    w.exp_down.push_back(as_matrix_slice(d, e));
  }
}

LayerWeights bind_layer(const Binder& b, int64_t l, const Config& c) {
  LayerWeights w;
  const int64_t H = c.hidden, n = c.hc, mix = (2 + n) * n, hd = c.head_dim;
  auto L = [&](const char* s) { return b.layer(l, s); };
  w.attn_hc = b.hc(L("attn_hc.fn"), L("attn_hc.base"), L("attn_hc.scale"), mix, n * H, 3);
  w.ffn_hc = b.hc(L("ffn_hc.fn"), L("ffn_hc.base"), L("ffn_hc.scale"), mix, n * H, 3);
  w.attn_norm = b.vec(L("input_layernorm.weight"), {H});
  w.ffn_norm = b.vec(L("post_attention_layernorm.weight"), {H});
  w.q_a = b.mat(L("self_attn.q_a_proj.weight"), c.q_lora, H);
  w.q_a_norm = b.vec(L("self_attn.q_a_norm.weight"), {c.q_lora});
  w.q_b = b.mat(L("self_attn.q_b_proj.weight"), c.heads * hd, c.q_lora);
  w.kv = b.mat(L("self_attn.kv_proj.weight"), hd, H);
  w.kv_norm = b.vec(L("self_attn.kv_norm.weight"), {hd});
  w.sinks = b.vec(L("self_attn.sinks"), {c.heads});
  w.o_a = b.mat(L("self_attn.o_a_proj.weight"), c.o_groups * c.o_lora, c.heads * hd / c.o_groups);
  w.o_b = b.mat(L("self_attn.o_b_proj.weight"), H, c.o_groups * c.o_lora);
  const int64_t ratio = c.ratio(l);
  if (ratio > 0) {
    const bool csa = c.attn_types[size_t(l)] == AttnType::kCompressedSparse;
    w.has_compressor = true;
    w.comp = compressor(b, l, "self_attn.compressor.", ratio, hd, csa ? 2 * hd : hd, H);
    if (csa) {
      w.has_indexer = true;
      w.index = compressor(b, l, "self_attn.compressor.indexer.", ratio, c.index_dim, 2 * c.index_dim, H);
      w.index.indexer = true;
      w.index_q_b = b.mat(L("self_attn.compressor.indexer.q_b_proj.weight"), c.index_heads * c.index_dim, c.q_lora);
      w.index_proj = b.mat(L("self_attn.compressor.indexer.scorer.weights_proj.weight"), c.index_heads, H);
    }
  }
  w.router = b.mat(L("mlp.gate.weight"), c.experts, H);
  if (c.hash_moe[size_t(l)]) {
    w.tid2eid = hash_table(b, l, c);
  } else if (b.src.find(L("mlp.gate.e_score_correction_bias"))) {
    w.router_bias = b.vec(L("mlp.gate.e_score_correction_bias"), {c.experts});
  }
  bind_experts(b, l, c, w);
  w.sh_gate = b.mat(L("mlp.shared_experts.gate_proj.weight"), c.expert_ff, H);
  w.sh_up = b.mat(L("mlp.shared_experts.up_proj.weight"), c.expert_ff, H);
  w.sh_down = b.mat(L("mlp.shared_experts.down_proj.weight"), H, c.expert_ff);
  return w;
}

std::unique_ptr<MtpWeights> bind_mtp(const TensorSource& src, bool ds4, const Config& c) {
  if (!src.find("mtp.0.e_proj.weight")) return nullptr;
  const Config cm = with_mtp_layer(c);
  const Binder b{src, ds4, ds4 ? "mtp.0." : "mtp.0.block."};
  const int64_t H = c.hidden;
  auto m = std::make_unique<MtpWeights>();
  m->e_proj = b.mat("mtp.0.e_proj.weight", H, H);
  m->h_proj = b.mat("mtp.0.h_proj.weight", H, H);
  m->enorm = b.vec("mtp.0.enorm.weight", {H});
  m->hnorm = b.vec("mtp.0.hnorm.weight", {H});
  m->norm = b.vec("mtp.0.norm.weight", {H});
  m->head_hc = ds4 ? b.hc("mtp.0.hc_head_fn.weight", "mtp.0.hc_head_base.weight", "mtp.0.hc_head_scale.weight", c.hc,
                          c.hc * H, 1)
                   : b.hc("mtp.0.hc_head.hc_fn", "mtp.0.hc_head.hc_base", "mtp.0.hc_head.hc_scale", c.hc, c.hc * H, 1);
  m->block = bind_layer(b, c.layers, cm);
  if (m->block.router_bias.empty())
    throw InputError(src.path() + ": MTP block has no router bias (" + b.layer(c.layers, "mlp.gate.e_score_correction_bias") +
                     "), which ds4 requires");
  return m;
}

std::unique_ptr<DsparkWeights> bind_dspark(const TensorSource& src, const Config& c) {
  if (!src.find("mtp.0.main_proj.weight")) return nullptr;
  const Config cd = with_dspark_layers(c);
  const int64_t H = c.hidden, V = c.vocab, taps = int64_t(c.dspark_taps.size());
  auto d = std::make_unique<DsparkWeights>();
  for (int64_t s = 0; s < 3; ++s) {
    const Binder b{src, false, "mtp." + std::to_string(s) + "."};
    d->stages.push_back(bind_layer(b, c.layers + s, cd));
  }
  const Binder b{src, false, {}};
  d->main_proj = b.mat("mtp.0.main_proj.weight", H, taps * H);
  d->main_norm = b.vec("mtp.0.main_norm.weight", {H});
  d->norm = b.vec("mtp.2.norm.weight", {H});
  d->head_hc = b.hc("mtp.2.hc_head.hc_fn", "mtp.2.hc_head.hc_base", "mtp.2.hc_head.hc_scale", c.hc, c.hc * H, 1);
  const TensorInfo* w1 = src.find("mtp.2.markov_head.markov_w1.weight");
  if (!w1 || w1->shape.size() != 2) throw InputError(src.path() + ": DSpark needs mtp.2.markov_head.markov_w1.weight {vocab, rank}");
  d->rank = w1->shape[1];
  d->markov_w1 = b.mat("mtp.2.markov_head.markov_w1.weight", V, d->rank);
  d->markov_w2 = b.mat("mtp.2.markov_head.markov_w2.weight", V, d->rank);
  d->conf_proj = b.vec("mtp.2.confidence_head.proj.weight", {1, H + d->rank});
  if (c.dspark_noise < 0)
    throw InputError(src.path() + ": DSpark weights need config field 'dspark_noise_token_id'");
  return d;
}

}  // namespace

Config with_dspark_layers(Config c) {
  for (int s = 0; s < 3; ++s) {
    c.attn_types.push_back(AttnType::kSliding);
    c.hash_moe.push_back(false);
  }
  return c;
}

Config with_mtp_layer(Config c) {
  c.attn_types.push_back(AttnType::kSliding);
  c.hash_moe.push_back(false);
  return c;
}

Weights bind_weights(const TensorSource& src, const Config& c) {
  Weights w;
  w.ds4_layout = src.find("token_embd.weight") != nullptr;
  const Binder b{src, w.ds4_layout, {}};
  w.embed = b.mat(b.global("model.embed_tokens.weight"), c.vocab, c.hidden);
  // HF ties lm_head to the embedding whenever the config says so, whatever the file holds.
  w.lm_head = c.tie_embeddings ? w.embed : b.mat(b.global("lm_head.weight"), c.vocab, c.hidden);
  w.norm = b.vec(b.global("model.norm.weight"), {c.hidden});
  w.head_hc = b.hc(b.global("model.hc_head.hc_fn"), b.global("model.hc_head.hc_base"),
                   b.global("model.hc_head.hc_scale"), c.hc, c.hc * c.hidden, 1);
  for (int64_t l = 0; l < c.layers; ++l) w.layers.push_back(bind_layer(b, l, c));
  w.mtp = bind_mtp(src, w.ds4_layout, c);
  if (!w.ds4_layout) w.dspark = bind_dspark(src, c);
  return w;
}

}  // namespace ds4::deepseek_v4
