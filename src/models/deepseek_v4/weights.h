#pragma once
// DeepSeek V4 weights bound by name from a TensorSource: HF safetensors names
// (DeepseekV4ForCausalLM.state_dict()) or antirez/ds4's GGUF names ("blk.N.attn_q_a.weight",
// ffn_gate_exps/ffn_up_exps split, ...). Matrices stay zero-copy WeightMatrix views in
// whatever type the file has; small vectors (norms, biases, sinks, HC base/scale) are
// converted to owned f32.
#include <cstdint>
#include <vector>

#include "backend/cpu/hyper_connections.h"
#include "core/weight.h"
#include "formats/tensor_source.h"
#include "models/deepseek_v4/config.h"

namespace ds4::deepseek_v4 {

struct HcBlock {
  WeightMatrix fn;
  std::vector<float> base, scale;
  cpu::HcWeights view() const { return {fn, base.data(), scale.data()}; }
};

struct CompressorWeights {
  WeightMatrix kv, gate;       // {width, hidden}; width = dim (HCA) or 2 * dim (CSA overlap)
  std::vector<float> ape;      // {ratio, width}: position bias added to the gate
  std::vector<float> norm;     // {dim}
  int64_t dim = 0, width = 0;
  bool indexer = false;        // the CSA indexer's key lane (vs the attention KV lane)
};

struct LayerWeights {
  HcBlock attn_hc, ffn_hc;
  std::vector<float> attn_norm, ffn_norm;
  WeightMatrix q_a, q_b, kv, o_a, o_b;  // o_a {groups * o_lora, heads * head_dim / groups}
  std::vector<float> q_a_norm, kv_norm, sinks;
  bool has_compressor = false, has_indexer = false;
  CompressorWeights comp, index;
  WeightMatrix index_q_b, index_proj;  // {index_heads * index_dim, q_lora}, {index_heads, hidden}
  WeightMatrix router;                  // {experts, hidden}
  std::vector<float> router_bias;       // {experts} (empty: none)
  std::vector<int32_t> tid2eid;         // {vocab, experts_used} for hash layers
  std::vector<WeightMatrix> exp_gate, exp_up, exp_down;  // per expert {ff, hidden} / {hidden, ff}
  WeightMatrix sh_gate, sh_up, sh_down;
};

struct Weights {
  WeightMatrix embed, lm_head;  // {vocab, hidden}
  std::vector<float> norm;
  HcBlock head_hc;              // fn {hc, hc * hidden}, base {hc}, scale {1}
  std::vector<LayerWeights> layers;
  bool ds4_layout = false;      // GGUF written the way antirez/ds4 writes it
};

// Throws ds4::InputError naming the file, tensor, expected and actual shape.
Weights bind_weights(const TensorSource& src, const Config& c);

}  // namespace ds4::deepseek_v4
