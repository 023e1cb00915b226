#pragma once
// DeepSeek V4 weights bound by name from a TensorSource: HF safetensors names
// (DeepseekV4ForCausalLM.state_dict()) or antirez/ds4's GGUF names ("blk.N.attn_q_a.weight",
// ffn_gate_exps/ffn_up_exps split, ...). Matrices stay zero-copy WeightMatrix views in
// whatever type the file has; small vectors (norms, biases, sinks, HC base/scale) are
// converted to owned f32.
#include <cstdint>
#include <memory>
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

// antirez/ds4's MTP draft head `mtp.0.*` (ds4.c ds4_mtp_weights; tools/reference/
// deepseek_v4/dspark_ref.py). HF-style names: mtp.0.{e_proj,h_proj,enorm,hnorm,norm}.weight,
// mtp.0.hc_head.{hc_fn,hc_base,hc_scale}, mtp.0.block.<decoder layer names>; ds4 GGUF
// names: mtp.0.<ds4 suffix> (docs/formats/ds4-gguf-layout.md).
struct MtpWeights {
  WeightMatrix e_proj, h_proj;            // {hidden, hidden}
  std::vector<float> enorm, hnorm, norm;  // {hidden}
  HcBlock head_hc;                        // the head's own output-HC collapse
  LayerWeights block;                     // a sliding-only, top-k routed layer
};

struct Weights {
  WeightMatrix embed, lm_head;  // {vocab, hidden}
  std::vector<float> norm;
  HcBlock head_hc;              // fn {hc, hc * hidden}, base {hc}, scale {1}
  std::vector<LayerWeights> layers;
  std::unique_ptr<MtpWeights> mtp;  // null: no mtp.0.* tensors
  bool ds4_layout = false;      // GGUF written the way antirez/ds4 writes it
};

// The MTP block runs as one more layer, index c.layers: sliding window only, top-k routing
// (ds4 metal_graph_encode_decode_layer(il = 1) with no compressor and no tid2eid).
Config with_mtp_layer(Config c);

// Throws ds4::InputError naming the file, tensor, expected and actual shape.
Weights bind_weights(const TensorSource& src, const Config& c);

}  // namespace ds4::deepseek_v4
