#include "models/qwen_next/weights.h"

#include <filesystem>

#include "core/error.h"
#include "models/qwen_next/ple_hash.h"

namespace ds4::qwen_next {
namespace {

struct Binder {
  const TensorSource& src;
  const Config& c;
  const LoadOptions& opt;

  // A linear layer "<name>.weight" {rows, cols}, or its MLX affine triple.
  WeightMatrix linear(const std::string& name, int64_t rows, int64_t cols) const {
    WeightMatrix w = src.find(name + ".scales") ? mlx_matrix(src, name)
                                                : as_matrix(src.get(name + ".weight", {rows, cols}));
    if (w.rows != rows || w.cols != cols)
      throw InputError(src.path() + ": tensor " + name + " is {" + std::to_string(w.rows) + ", " +
                       std::to_string(w.cols) + "}, expected {" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "}");
    return w;
  }
  // A small tensor of `n` elements (any float type) copied to f32.
  Vec vec(const std::string& name, int64_t n) const {
    const TensorInfo& t = src.get(name);
    if (t.numel() != n)
      throw InputError(src.path() + ": tensor " + name + " has " + std::to_string(t.numel()) +
                       " elements, expected " + std::to_string(n));
    WeightMatrix m;
    m.type = t.type;
    m.rows = 1;
    m.cols = n;
    m.data = t.data;
    Vec v(static_cast<size_t>(n));
    dequantize_row(m, 0, v.data());
    return v;
  }

  HyperWeights hyper(const std::string& p, bool inject) const {
    HyperWeights h;
    h.norm = vec(p + ".hc_norm.weight", c.wide());
    h.down = linear(p + ".input_mix_weight_down", c.hc_rank, c.wide());
    h.up = linear(p + ".input_mix_weight_up", c.wide(), c.hc_rank);
    if (inject) h.inject = linear(p + ".block_inject_weight", c.hc, c.wide());
    return h;
  }

  std::unique_ptr<GdnWeights> gdn(const std::string& p) const {
    auto g = std::make_unique<GdnWeights>();
    const int64_t d = c.hidden;
    g->qkv = linear(p + ".in_proj_qkv", c.conv_dim(), d);
    g->z = linear(p + ".in_proj_z", c.value_dim(), d);
    g->b = linear(p + ".in_proj_b", c.v_heads, d);
    g->a = linear(p + ".in_proj_a", c.v_heads, d);
    g->out = linear(p + ".out_proj", d, c.value_dim());
    g->conv = vec(p + ".conv1d.weight", c.conv_dim() * c.conv_k);
    g->a_log = vec(p + ".A_log", c.v_heads);
    g->dt_bias = vec(p + ".dt_bias", c.v_heads);
    g->norm = vec(p + ".norm.weight", c.v_dim);
    return g;
  }

  std::unique_ptr<QsaWeights> qsa(const std::string& p) const {
    auto a = std::make_unique<QsaWeights>();
    const int64_t d = c.hidden, hd = c.head_dim;
    a->q = linear(p + ".q_proj", c.heads * hd * 2, d);
    a->k = linear(p + ".k_proj", c.kv_heads * hd, d);
    a->v = linear(p + ".v_proj", c.kv_heads * hd, d);
    a->o = linear(p + ".o_proj", d, c.heads * hd);
    a->q_norm = vec(p + ".q_norm.weight", hd);
    a->k_norm = vec(p + ".k_norm.weight", hd);
    a->idx_qk = linear(p + ".indexer.index_qk_proj", (c.idx_heads + 1) * c.idx_dim, d);
    a->idx_q_norm = vec(p + ".indexer.q_layernorm.weight", c.idx_dim);
    a->idx_k_norm = vec(p + ".indexer.k_layernorm.weight", c.idx_dim);
    return a;
  }

  // Stacked experts {E, rows, cols}: one WeightMatrix view per expert.
  std::vector<WeightMatrix> stacked(const std::string& name, int64_t rows, int64_t cols) const {
    std::vector<WeightMatrix> out;
    if (src.find(name + ".scales")) {  // MLX affine experts {E, rows, packed} + scales/biases
      for (int64_t e = 0; e < c.experts; ++e) {
        out.push_back(mlx_matrix_slice(src, name, e));
        if (out.back().rows != rows || out.back().cols != cols)
          throw InputError(src.path() + ": tensor " + name + " expert slices are not {" + std::to_string(rows) +
                           ", " + std::to_string(cols) + "}");
      }
      return out;
    }
    const TensorInfo& t = src.get(name, {c.experts, rows, cols});
    for (int64_t e = 0; e < c.experts; ++e) out.push_back(as_matrix_slice(t, e));
    return out;
  }

  MoeWeights moe(const std::string& p) const {
    MoeWeights m;
    const int64_t d = c.hidden;
    m.router = linear(p + ".gate", c.experts, d);
    m.gate_up = stacked(p + ".experts.gate_up_proj", 2 * c.moe_inter, d);
    m.down = stacked(p + ".experts.down_proj", d, c.moe_inter);
    m.sh_gate = linear(p + ".shared_expert.gate_proj", c.shared_inter, d);
    m.sh_up = linear(p + ".shared_expert.up_proj", c.shared_inter, d);
    m.sh_down = linear(p + ".shared_expert.down_proj", d, c.shared_inter);
    m.sh_gate_scalar = linear(p + ".shared_expert_gate", 1, d);
    return m;
  }

  static std::string shard_name(const std::string& p, int64_t i) {
    return p + ".ple_embedding.ngram_embedding.shard_" + std::to_string(i) + ".weight";
  }
  // HF save_pretrained's layout of the n-gram table: shard_0 .. shard_{split_ngram_parts-1}.
  std::vector<WeightMatrix> ple_shards(const std::string& p) const {
    std::vector<WeightMatrix> out;
    for (int64_t i = 0; const TensorInfo* t = src.find(shard_name(p, i)); ++i) out.push_back(as_matrix(*t));
    return out;
  }

  std::unique_ptr<PleWeights> ple(const std::string& p, int64_t ple_index) const {
    auto w = std::make_unique<PleWeights>();
    const int64_t heads = (c.ngram - 1) * c.heads_per_ngram;
    ple_hash_constants(c, ple_index, *w);
    const int64_t total = w->head_offset.back() + w->head_vocab.back();
    const int64_t padded = (total + c.ngram_divisor - 1) / c.ngram_divisor * c.ngram_divisor;
    const std::string name = p + ".ple_embedding.ngram_embedding.weight";
    const auto sidecar = std::filesystem::path(src.path()) / "ngram-table.safetensors";
    if (std::filesystem::is_directory(src.path()) && std::filesystem::exists(sidecar))
      w->table = sidecar_table(sidecar.string(), name, opt.ple_cache_bytes, opt.ple_readers);
    else if (!src.find(name) && src.find(shard_name(p, 0)))
      w->table = sharded_table(ple_shards(p));
    else
      w->table = memory_table(as_matrix(src.get(name, {padded, c.ple_dim / heads})));
    if (w->table->rows() != padded || w->table->cols() != c.ple_dim / heads)
      throw InputError(src.path() + ": " + name + " is not {" + std::to_string(padded) + ", " +
                       std::to_string(c.ple_dim / heads) + "}");
    w->key = linear(p + ".key_proj", c.wide(), c.ple_dim);
    w->value = linear(p + ".value_proj", c.hidden, c.ple_dim);
    w->norm_key = vec(p + ".norm_key.weight", c.wide());
    w->norm_query = vec(p + ".norm_query.weight", c.wide());
    w->norm_conv = vec(p + ".norm_conv.weight", c.wide());
    w->conv = vec(p + ".conv1d.weight", c.wide() * c.ple_conv_k);
    return w;
  }

  void layer(const std::string& p, int64_t l, bool linear_attn, LayerWeights& w) const {
    w.attn_hc = hyper(p + ".attn_hyper_connection", true);
    w.mlp_hc = hyper(p + ".mlp_hyper_connection", true);
    if (linear_attn) w.gdn = gdn(p + ".linear_attn");
    else w.qsa = qsa(p + ".self_attn");
    if (l >= 0 && c.ple_index(l) >= 0) w.ple = ple(p + ".ple", c.ple_index(l));
    w.moe = moe(p + ".mlp");
  }
};

}  // namespace

Weights bind_weights(const TensorSource& src, const Config& c, const LoadOptions& opt) {
  Binder b{src, c, opt};
  // Text-only checkpoints use "model."; the multimodal wrapper "model.language_model.".
  const std::string pre = src.find("model.language_model.embed_tokens.weight") ? "model.language_model." : "model.";
  Weights w;
  w.embed = b.linear(pre + "embed_tokens", c.vocab, c.hidden);
  w.lm_head = c.tie_embeddings ? w.embed : b.linear("lm_head", c.vocab, c.hidden);
  w.layers.resize(size_t(c.layers));
  for (int64_t l = 0; l < c.layers; ++l)
    b.layer(pre + "layers." + std::to_string(l), l, c.is_linear[size_t(l)], w.layers[size_t(l)]);
  w.mixer = b.hyper(pre + "hyper_connection_mixer", false);
  if (src.find("mtp.fc_hidden.weight") || src.find("mtp.fc_hidden.scales")) {
    auto m = std::make_unique<MtpWeights>();
    m->norm_emb = b.vec("mtp.pre_fc_norm_embedding.weight", c.hidden);
    m->norm_hidden = b.vec("mtp.pre_fc_norm_hidden.weight", c.wide());
    m->fc_emb = b.linear("mtp.fc_embedding", c.hidden, c.hidden);
    m->fc_hidden = b.linear("mtp.fc_hidden", c.hidden, c.hidden);
    b.layer("mtp.layers.0", -1, false, m->layer);  // -1: never a PLE layer
    m->mixer = b.hyper("mtp.hyper_connection_mixer", false);
    w.mtp = std::move(m);
  }
  return w;
}

}  // namespace ds4::qwen_next
