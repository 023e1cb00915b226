// Writes a DeepSeek V4 model in antirez/ds4's GGUF layout (see gguf.h). Tensor data is
// produced one tensor at a time: dequantize the source rows to f32, re-encode.
#include <cstring>
#include <functional>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/quant.h"
#include "formats/gguf.h"
#include "models/deepseek_v4/gguf.h"

namespace ds4::deepseek_v4 {
namespace {

struct Item {
  std::string name;
  DType type;
  std::vector<int64_t> shape;                          // torch order
  std::function<std::vector<uint8_t>()> bytes;         // produced on demand
};

std::vector<float> rows_f32(const TensorInfo& t) {
  const int64_t cols = t.shape.back(), rows = t.numel() / cols;
  WeightMatrix w{t.type, rows, cols, t.data};
  std::vector<float> out(static_cast<size_t>(t.numel()));
  for (int64_t r = 0; r < rows; ++r) dequantize_row(w, r, out.data() + r * cols);
  return out;
}

// Rows [r0, r0 + n) of t, byte for byte (t already has the target type).
std::vector<uint8_t> raw_rows(const TensorInfo& t, int64_t r0, int64_t n) {
  const int64_t rb = row_bytes(t.type, t.shape.back());
  const uint8_t* p = static_cast<const uint8_t*>(t.data) + r0 * rb;
  return std::vector<uint8_t>(p, p + n * rb);
}

std::vector<uint8_t> encode(const std::vector<float>& x, int64_t cols, DType type, const std::string& name) {
  const int64_t rows = int64_t(x.size()) / cols;
  std::vector<uint8_t> out(static_cast<size_t>(rows * row_bytes(type, cols)));
  const int64_t rb = row_bytes(type, cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = x.data() + r * cols;
    uint8_t* d = out.data() + r * rb;
    switch (type) {
      case DType::F32: std::memcpy(d, s, size_t(cols) * 4); break;
      case DType::F16:
        for (int64_t i = 0; i < cols; ++i) {
          const uint16_t h = f32_to_f16(s[i]);
          std::memcpy(d + 2 * i, &h, 2);
        }
        break;
      case DType::BF16:
        for (int64_t i = 0; i < cols; ++i) {
          const uint16_t h = f32_to_bf16(s[i]);
          std::memcpy(d + 2 * i, &h, 2);
        }
        break;
      case DType::Q8_0: quantize_q8_0(s, d, cols); break;
      case DType::Q4_K: quantize_q4_k(s, d, cols); break;
      default: throw Error("export_ds4_gguf: cannot encode " + name + " as " + std::string(dtype_name(type)));
    }
  }
  return out;
}

class Plan {
 public:
  Plan(const TensorSource& src, std::optional<DType> dense) : src_(src), dense_(dense) {}
  // Re-encodes HF tensor `hf` as `name` in `type` (dense tensors: `dense` overrides).
  void add(const std::string& name, const std::string& hf, DType type, bool expert = false) {
    if (dense_ && !expert) type = *dense_;
    const TensorInfo& t = src_.get(hf);
    const int64_t rows = t.numel() / t.shape.back();
    items_.push_back({name, type, t.shape, [&t, type, name, rows] {
                        return t.type == type ? raw_rows(t, 0, rows) : encode(rows_f32(t), t.shape.back(), type, name);
                      }});
  }
  // Stacked HF experts gate_up {E, 2F, H}: gate (half 0) or up (half 1) as {E, F, H}.
  void add_half(const std::string& name, const std::string& hf, int half, DType type) {
    const TensorInfo& t = src_.get(hf);
    const int64_t E = t.shape[0], F2 = t.shape[1], H = t.shape[2];
    items_.push_back({name, type, {E, F2 / 2, H}, [&t, type, name, half, E, F2, H] {
                        if (t.type == type) {
                          std::vector<uint8_t> out;
                          for (int64_t e = 0; e < E; ++e) {
                            const std::vector<uint8_t> r = raw_rows(t, e * F2 + half * (F2 / 2), F2 / 2);
                            out.insert(out.end(), r.begin(), r.end());
                          }
                          return out;
                        }
                        const std::vector<float> all = rows_f32(t);
                        std::vector<float> part;
                        for (int64_t e = 0; e < E; ++e) {
                          const float* b = all.data() + (e * F2 + half * (F2 / 2)) * H;
                          part.insert(part.end(), b, b + (F2 / 2) * H);
                        }
                        return encode(part, H, type, name);
                      }});
  }
  void add_i32(const std::string& name, const std::string& hf) {
    const TensorInfo& t = src_.get(hf);
    items_.push_back({name, DType::I32, t.shape, [&t, name] {
                        std::vector<uint8_t> out(static_cast<size_t>(t.numel()) * 4);
                        for (int64_t i = 0; i < t.numel(); ++i) {
                          const int32_t v = t.type == DType::I64 ? int32_t(static_cast<const int64_t*>(t.data)[i])
                                          : t.type == DType::I32 ? static_cast<const int32_t*>(t.data)[i]
                                          : throw Error("export_ds4_gguf: " + name + " is not an integer table");
                          std::memcpy(out.data() + 4 * i, &v, 4);
                        }
                        return out;
                      }});
  }
  void write(GgufWriter& w) {
    for (const Item& it : items_) w.add_tensor(it.name, it.type, it.shape);
    for (const Item& it : items_) {
      const std::vector<uint8_t> b = it.bytes();
      w.write(b.data(), b.size());
    }
  }

 private:
  const TensorSource& src_;
  std::optional<DType> dense_;
  std::vector<Item> items_;
};

void plan_layer(Plan& p, const Config& c, int64_t l, const Ds4ExportOptions& opt) {
  const std::string blk = "blk." + std::to_string(l) + ".", hf = "model.layers." + std::to_string(l) + ".";
  for (const char* s : {"attn", "ffn"}) {
    p.add(blk + "hc_" + s + "_fn.weight", hf + s + "_hc.fn", DType::F16);
    p.add(blk + "hc_" + s + "_scale.weight", hf + s + "_hc.scale", DType::F32);
    p.add(blk + "hc_" + s + "_base.weight", hf + s + "_hc.base", DType::F32);
  }
  const std::string a = hf + "self_attn.";
  p.add(blk + "attn_norm.weight", hf + "input_layernorm.weight", DType::F32);
  p.add(blk + "attn_q_a.weight", a + "q_a_proj.weight", DType::Q8_0);
  p.add(blk + "attn_q_a_norm.weight", a + "q_a_norm.weight", DType::F32);
  p.add(blk + "attn_q_b.weight", a + "q_b_proj.weight", DType::Q8_0);
  p.add(blk + "attn_kv.weight", a + "kv_proj.weight", DType::Q8_0);
  p.add(blk + "attn_kv_a_norm.weight", a + "kv_norm.weight", DType::F32);
  p.add(blk + "attn_sinks.weight", a + "sinks", DType::F32);
  p.add(blk + "attn_output_a.weight", a + "o_a_proj.weight", DType::Q8_0);
  p.add(blk + "attn_output_b.weight", a + "o_b_proj.weight", DType::Q8_0);
  if (c.ratio(l) > 0) {
    const std::string cp = a + "compressor.";
    p.add(blk + "attn_compressor_ape.weight", cp + "position_bias", DType::F16);
    p.add(blk + "attn_compressor_kv.weight", cp + "kv_proj.weight", DType::F16);
    p.add(blk + "attn_compressor_gate.weight", cp + "gate_proj.weight", DType::F16);
    p.add(blk + "attn_compressor_norm.weight", cp + "kv_norm.weight", DType::F32);
  }
  if (c.attn_types[size_t(l)] == AttnType::kCompressedSparse) {
    const std::string ix = a + "compressor.indexer.";
    p.add(blk + "indexer.attn_q_b.weight", ix + "q_b_proj.weight", DType::F16);
    p.add(blk + "indexer.proj.weight", ix + "scorer.weights_proj.weight", DType::F16);
    p.add(blk + "indexer_compressor_ape.weight", ix + "position_bias", DType::F16);
    p.add(blk + "indexer_compressor_kv.weight", ix + "kv_proj.weight", DType::F16);
    p.add(blk + "indexer_compressor_gate.weight", ix + "gate_proj.weight", DType::F16);
    p.add(blk + "indexer_compressor_norm.weight", ix + "kv_norm.weight", DType::F32);
  }
  const std::string m = hf + "mlp.";
  p.add(blk + "ffn_norm.weight", hf + "post_attention_layernorm.weight", DType::F32);
  p.add(blk + "ffn_gate_inp.weight", m + "gate.weight", DType::F16);
  if (c.hash_moe[size_t(l)]) p.add_i32(blk + "ffn_gate_tid2eid.weight", m + "gate.tid2eid");
  else p.add(blk + "exp_probs_b.bias", m + "gate.e_score_correction_bias", DType::F32);
  p.add_half(blk + "ffn_gate_exps.weight", m + "experts.gate_up_proj", 0, opt.expert_type);
  p.add_half(blk + "ffn_up_exps.weight", m + "experts.gate_up_proj", 1, opt.expert_type);
  p.add(blk + "ffn_down_exps.weight", m + "experts.down_proj", opt.expert_down_type, true);
  p.add(blk + "ffn_gate_shexp.weight", m + "shared_experts.gate_proj.weight", DType::Q8_0);
  p.add(blk + "ffn_up_shexp.weight", m + "shared_experts.up_proj.weight", DType::Q8_0);
  p.add(blk + "ffn_down_shexp.weight", m + "shared_experts.down_proj.weight", DType::Q8_0);
}

GgufValue u32(int64_t v) { return GgufValue::scalar(GgufType::U32, v); }
GgufValue f32(double v) { return GgufValue::scalar(GgufType::F32, v); }

void write_metadata(GgufWriter& w, const Config& c) {
  const std::string k = "deepseek4.";
  w.set("general.architecture", GgufValue::string("deepseek4"));
  w.set(k + "block_count", u32(c.layers));
  w.set(k + "embedding_length", u32(c.hidden));
  w.set(k + "vocab_size", u32(c.vocab));
  w.set(k + "context_length", u32(c.max_positions));
  w.set(k + "attention.head_count", u32(c.heads));
  w.set(k + "attention.head_count_kv", u32(1));
  w.set(k + "attention.key_length", u32(c.head_dim));
  w.set(k + "attention.value_length", u32(c.head_dim));
  w.set(k + "rope.dimension_count", u32(c.rope_dim));
  w.set(k + "attention.q_lora_rank", u32(c.q_lora));
  w.set(k + "attention.output_lora_rank", u32(c.o_lora));
  w.set(k + "attention.output_group_count", u32(c.o_groups));
  w.set(k + "expert_count", u32(c.experts));
  w.set(k + "expert_used_count", u32(c.experts_used));
  w.set(k + "expert_feed_forward_length", u32(c.expert_ff));
  w.set(k + "expert_shared_count", u32(1));
  int64_t n_hash = 0;
  while (n_hash < c.layers && c.hash_moe[size_t(n_hash)]) ++n_hash;
  w.set(k + "hash_layer_count", u32(n_hash));
  w.set(k + "attention.sliding_window", u32(c.window));
  w.set(k + "attention.indexer.head_count", u32(c.index_heads));
  w.set(k + "attention.indexer.key_length", u32(c.index_dim));
  w.set(k + "attention.indexer.top_k", u32(c.index_topk));
  w.set(k + "hyper_connection.count", u32(c.hc));
  w.set(k + "hyper_connection.sinkhorn_iterations", u32(c.sinkhorn_iters));
  w.set(k + "hyper_connection.epsilon", f32(c.hc_eps));
  GgufValue ratios{GgufType::ARRAY, nullptr, GgufType::U32, {}}, clamp{GgufType::ARRAY, nullptr, GgufType::F32, {}};
  for (int64_t l = 0; l < c.layers; ++l) ratios.items.push_back(u32(c.ratio(l))), clamp.items.push_back(f32(c.swiglu_limit));
  w.set(k + "attention.compress_ratios", ratios);
  w.set(k + "swiglu_clamp_exp", clamp);
  const auto& y = c.rope_compress.yarn_params;
  w.set(k + "rope.scaling.original_context_length", GgufValue::scalar(GgufType::U64, y.original_max_positions));
  w.set(k + "rope.freq_base", f32(c.rope_main.theta));
  w.set(k + "rope.scaling.factor", f32(c.rope_compress.yarn ? y.factor : 1.0));
  w.set(k + "rope.scaling.yarn_beta_fast", f32(y.beta_fast));
  w.set(k + "rope.scaling.yarn_beta_slow", f32(y.beta_slow));
  w.set(k + "attention.compress_rope_freq_base", f32(c.rope_compress.theta));
  w.set(k + "expert_weights_scale", f32(c.routed_scale));
  w.set(k + "attention.layer_norm_rms_epsilon", f32(c.rms_eps));
  w.set(k + "expert_weights_norm", GgufValue::scalar(GgufType::BOOL, c.norm_topk));
  if (!c.eos.empty()) w.set("tokenizer.ggml.eos_token_id", u32(c.eos[0]));
}

}  // namespace

void export_ds4_gguf(const TensorSource& src, const Config& c, const std::string& path, const Ds4ExportOptions& opt) {
  for (DType t : {opt.expert_type, opt.expert_down_type})
    if (block_geometry(t).elements > 1 && (c.hidden % block_geometry(t).elements || c.expert_ff % block_geometry(t).elements))
      throw InputError("export_ds4_gguf: expert type " + std::string(dtype_name(t)) + " needs hidden (" +
                       std::to_string(c.hidden) + ") and expert ff (" + std::to_string(c.expert_ff) +
                       ") to be multiples of " + std::to_string(block_geometry(t).elements));
  GgufWriter w(path);
  write_metadata(w, c);
  Plan p(src, opt.dense_type);
  p.add("token_embd.weight", "model.embed_tokens.weight", DType::F16);
  p.add("output.weight", "lm_head.weight", DType::Q8_0);
  p.add("output_norm.weight", "model.norm.weight", DType::F32);
  p.add("output_hc_base.weight", "model.hc_head.hc_base", DType::F32);
  p.add("output_hc_fn.weight", "model.hc_head.hc_fn", DType::F16);
  p.add("output_hc_scale.weight", "model.hc_head.hc_scale", DType::F32);
  for (int64_t l = 0; l < c.layers; ++l) plan_layer(p, c, l, opt);
  p.write(w);
  w.finish();
}

}  // namespace ds4::deepseek_v4
