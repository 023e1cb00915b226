// Synthetic full-size GLM 5.x Flash (see synthetic_full.h). Tensor names and shapes are the
// ones weights.cpp binds (the same lists as synthetic.cpp, which makes small BF16 models).
#include "models/glm5/synthetic_full.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/synthetic_fill_blocks.h"
#include "core/error.h"
#include "core/synthetic_weights.h"
#include "models/glm5/config.h"

namespace ds4::glm5 {
namespace {

namespace sy = ds4::synth;

// Host fill of one matrix with the device generator's block functions.
void host_fill(DType t, int64_t rows, int64_t cols, uint64_t seed, uint8_t* out) {
  const float amp = 1.0f / std::sqrt(float(cols));
  const int64_t rb = row_bytes(t, cols);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* p = out + r * rb;
    const uint64_t u0 = uint64_t(r);
    switch (t) {
      case DType::F32:
        for (int64_t i = 0; i < cols; ++i) {
          const float v = sy::plain(seed, u0 * uint64_t(cols) + uint64_t(i), 0.f, amp);
          std::memcpy(p + 4 * i, &v, 4);
        }
        break;
      case DType::BF16:
        for (int64_t i = 0; i < cols; ++i) sy::put16(p + 2 * i, sy::to_bf16(sy::plain(seed, u0 * uint64_t(cols) + uint64_t(i), 0.f, amp)));
        break;
      case DType::Q8_0:
        for (int64_t b = 0; b < cols / 32; ++b) sy::q8_0_block(p + b * sy::kQ8Bytes, seed, u0 * uint64_t(cols / 32) + uint64_t(b), amp);
        break;
      case DType::Q4_K:
        for (int64_t b = 0; b < cols / 256; ++b) sy::q4_k_block(p + b * sy::kQ4KBytes, seed, u0 * uint64_t(cols / 256) + uint64_t(b), amp);
        break;
      case DType::Q2_K:
        for (int64_t b = 0; b < cols / 256; ++b) sy::q2_k_block(p + b * sy::kQ2KBytes, seed, u0 * uint64_t(cols / 256) + uint64_t(b), amp);
        break;
      default: throw InputError("glm5 synthetic-full: cannot generate " + std::string(dtype_name(t)) + " on the host");
    }
  }
}

class Source final : public TensorSource {
 public:
  Source(nlohmann::json config, const SyntheticFullOptions& o) : config_(std::move(config)), o_(o) {}
  // Matrix {rows, cols} or stacked {n, rows, cols} of type t: shapes only unless materialized
  // (or `host`: bind_weights reads it on the host).
  void mat(const std::string& name, std::vector<int64_t> shape, DType t, bool host = false) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const int64_t cols = shape.back(), rows = numel / cols;
    TensorInfo info;
    info.name = name;
    info.type = t;
    info.shape = std::move(shape);
    info.bytes = size_t(rows * row_bytes(t, cols));
    info.file = "synthetic-full:glm5";
    if (host || o_.materialize) {
      data_.emplace_back(info.bytes);
      host_fill(t, rows, cols, seed_from_name(name.c_str(), o_.seed), data_.back().data());
      info.data = data_.back().data();
    }
    tensors_.push_back(std::move(info));
  }
  void vec(const std::string& name, std::vector<int64_t> shape, float center, float spread) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    data_.emplace_back(size_t(numel) * 4);
    fill_synthetic(DType::F32, 1, numel, seed_from_name(name.c_str(), o_.seed), SyntheticFill{center, spread},
                   data_.back().data());
    TensorInfo info;
    info.name = name;
    info.type = DType::F32;
    info.shape = std::move(shape);
    info.bytes = size_t(numel) * 4;
    info.data = data_.back().data();
    info.file = "synthetic-full:glm5";
    tensors_.push_back(std::move(info));
  }
  const std::vector<TensorInfo>& tensors() const override { return tensors_; }
  const nlohmann::json& config() const override { return config_; }
  const nlohmann::json& metadata() const override { return empty_; }
  const std::string& path() const override { return path_; }
  std::string format() const override { return "synthetic"; }

 private:
  nlohmann::json config_;
  SyntheticFullOptions o_;
  std::vector<TensorInfo> tensors_;
  std::vector<std::vector<uint8_t>> data_;
  nlohmann::json empty_ = nlohmann::json::object();
  std::string path_ = "synthetic-full:glm5";
};

void hc(Source& s, const Config& c, const std::string& p) {
  const int64_t mix = (2 + c.hc_mult) * c.hc_mult;
  s.mat(p + ".fn", {mix, c.hc_mult * c.hidden_size}, DType::F32);
  s.vec(p + ".base", {mix}, 0.0f, 0.5f);
  s.vec(p + ".scale", {3}, 0.5f, 0.1f);
}

void attention(Source& s, const Config& c, int64_t l, const std::string& p, DType t) {
  const int64_t H = c.hidden_size;
  if (c.layer_types[size_t(l)] == LayerKind::kLinear) {
    const int64_t hd = c.linear_head_dim, nh = c.linear_num_heads, qkv = hd * nh;
    for (const char* n : {"q_proj.weight", "k_proj.weight", "v_proj.weight"}) s.mat(p + n, {qkv, H}, t);
    s.mat(p + "forget_gate.f_a_proj.weight", {hd, H}, t);
    s.mat(p + "forget_gate.f_b_proj.weight", {qkv, hd}, t);
    s.mat(p + "b_proj.weight", {nh, H}, t);
    s.mat(p + "g_a_proj.weight", {hd, H}, t);
    s.mat(p + "g_b_proj.weight", {qkv, hd}, t);
    s.mat(p + "o_proj.weight", {H, qkv}, t);
    s.vec(p + "conv1d.weight", {3 * qkv, 1, c.linear_conv_kernel_dim}, 0.0f, 0.5f);
    s.vec(p + "forget_gate.dt_bias", {qkv}, 0.0f, 0.5f);
    s.vec(p + "forget_gate.A_log", {nh}, 0.0f, 0.5f);
    s.vec(p + "o_norm.weight", {hd}, 1.0f, 0.05f);
    return;
  }
  const int64_t nh = c.num_attention_heads, nope = c.qk_nope_head_dim, vd = c.v_head_dim;
  const int64_t kvr = c.kv_lora_rank, qr = c.q_lora_rank;
  s.mat(p + "q_a_proj.weight", {qr, H}, t);
  s.mat(p + "q_b_proj.weight", {nh * nope, qr}, t);
  s.mat(p + "kv_a_proj_with_mqa.weight", {kvr, H}, t);
  s.mat(p + "o_proj.weight", {H, nh * vd}, t);
  s.vec(p + "q_a_layernorm.weight", {qr}, 1.0f, 0.05f);
  s.vec(p + "kv_a_layernorm.weight", {kvr}, 1.0f, 0.05f);
  s.mat(p + "kv_b_proj.weight", {nh * (nope + vd), kvr}, t, true);  // read on the host (W_uk, W_uv)
  if (c.indexer_shared[size_t(l)]) return;
  const int64_t ih = c.index_n_heads, id = c.index_head_dim;
  s.mat(p + "indexer.wq_b.weight", {ih * id, qr}, t);
  s.mat(p + "indexer.wk.weight", {id, H}, t);
  s.mat(p + "indexer.weights_proj.weight", {ih, H}, t);
  s.mat(p + "indexer.index_kpool_compress_gate", {id, H}, t);
  s.vec(p + "indexer.k_norm.weight", {id}, 1.0f, 0.05f);
  s.vec(p + "indexer.k_norm.bias", {id}, 0.0f, 0.05f);
  s.vec(p + "indexer.index_kpool_compress_ape", {c.index_kpool, id}, 0.0f, 0.5f);
}

void mlp(Source& s, const Config& c, int64_t l, const std::string& p, const SyntheticFullOptions& o) {
  const int64_t H = c.hidden_size;
  auto dense = [&](const std::string& q, int64_t inter) {
    s.mat(q + "gate_proj.weight", {inter, H}, o.dense);
    s.mat(q + "up_proj.weight", {inter, H}, o.dense);
    s.mat(q + "down_proj.weight", {H, inter}, o.dense);
  };
  if (!c.mlp_sparse[size_t(l)]) return dense(p, c.intermediate_size);
  const int64_t E = c.n_routed_experts, I = c.moe_intermediate_size;
  s.mat(p + "gate.weight", {E, H}, o.dense);
  s.vec(p + "gate.e_score_correction_bias", {E}, 0.0f, 0.01f);
  s.mat(p + "experts.gate_up_proj", {E, 2 * I, H}, o.experts);
  s.mat(p + "experts.down_proj", {E, H, I}, o.experts);
  dense(p + "shared_experts.", I * c.n_shared_experts);
}

DType type_named(const std::string& s) {
  if (s == "q2_k") return DType::Q2_K;
  if (s == "q4_k") return DType::Q4_K;
  if (s == "q8_0") return DType::Q8_0;
  if (s == "bf16") return DType::BF16;
  throw InputError("synthetic-full: expert type '" + s + "' is not q2_k, q4_k, q8_0 or bf16");
}

}  // namespace

nlohmann::json synthetic_full_config(const SyntheticFullOptions& o) {
  // Everything else: parse_config's defaults, which are HF glm5_next's (GLM-5.3-Flash).
  nlohmann::json j = {{"model_type", "glm5_next"}, {"_name_or_path", "synthetic-full-glm5-flash"},
                      {"eos_token_id", {154820}}};
  if (o.layers > 0) j["num_hidden_layers"] = o.layers;
  if (o.n_experts > 0) j["n_routed_experts"] = o.n_experts;
  if (o.vocab > 0) j["vocab_size"] = o.vocab, j["eos_token_id"] = {o.vocab - 1};
  return j;
}

std::unique_ptr<TensorSource> synthetic_full_source(const SyntheticFullOptions& o) {
  nlohmann::json j = synthetic_full_config(o);
  const Config c = parse_config(j, "synthetic-full glm5 config");
  auto s = std::make_unique<Source>(j, o);
  const int64_t H = c.hidden_size;
  s->mat("model.embed_tokens.weight", {c.vocab_size, H}, o.dense);  // rows made per token (never read)
  s->vec("model.norm.weight", {H}, 1.0f, 0.05f);
  s->mat("lm_head.weight", {c.vocab_size, H}, o.dense);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    attention(*s, c, l, p + "self_attn.", o.dense);
    mlp(*s, c, l, p + "mlp.", o);
    s->vec(p + "input_layernorm.weight", {H}, 1.0f, 0.05f);
    s->vec(p + "post_attention_layernorm.weight", {H}, 1.0f, 0.05f);
    hc(*s, c, p + "attn_hc");
    hc(*s, c, p + "ffn_hc");
  }
  return s;
}

bool parse_synthetic_full(const std::string& spec, SyntheticFullOptions& o) {
  const std::string head = "synthetic-full";
  if (spec.rfind(head, 0) != 0) return false;
  std::vector<std::string> f;
  for (size_t at = head.size(); at < spec.size();) {
    if (spec[at] != ':') throw InputError("synthetic-full: expected ':' in '" + spec + "'");
    const size_t next = spec.find(':', at + 1);
    f.push_back(spec.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1));
    at = next == std::string::npos ? spec.size() : next;
  }
  try {
    if (f.size() > 0 && !f[0].empty()) o.experts = type_named(f[0]);
    if (f.size() > 1 && !f[1].empty()) o.n_experts = std::stoll(f[1]);
    if (f.size() > 2 && !f[2].empty()) o.layers = std::stoll(f[2]);
  } catch (const std::logic_error&) {
    throw InputError("synthetic-full: bad number in '" + spec + "' (synthetic-full[:TYPE[:EXPERTS[:LAYERS]]])");
  }
  return true;
}

}  // namespace ds4::glm5
