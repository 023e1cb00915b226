#pragma once
// GLM 5.x weights bound from a TensorSource: zero-copy WeightMatrix views for every
// projection; small vectors (norms, biases, gates) and the MLA kv_b_proj (needed
// transposed by the absorbed attention) are converted to f32 once at load.
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/hyper_connections.h"
#include "core/weight.h"
#include "models/glm5/config.h"

namespace ds4 {
class TensorSource;
}

namespace ds4::glm5 {

struct KdaWeights {
  WeightMatrix q, k, v;            // {qkv, hidden} each
  WeightMatrix f_a, f_b;           // forget gate LoRA: {head_dim, hidden}, {qkv, head_dim}
  WeightMatrix b;                  // {heads, hidden}
  WeightMatrix g_a, g_b;           // output gate LoRA
  WeightMatrix o;                  // {hidden, qkv}
  std::vector<float> conv;         // {3*qkv, kernel}
  std::vector<float> dt_bias;      // {qkv}
  std::vector<float> a_log;        // {heads}
  std::vector<float> o_norm;       // {head_dim}
};

struct IndexerWeights {
  WeightMatrix wq_b;               // {heads*dim, q_lora}
  WeightMatrix wk;                 // {dim, hidden}
  WeightMatrix weights_proj;       // {heads, hidden}
  WeightMatrix compress_gate;      // {dim, hidden}
  std::vector<float> k_norm_w, k_norm_b;  // LayerNorm {dim}
  std::vector<float> ape;          // {kpool, dim}
};

struct MlaWeights {
  WeightMatrix q_a, q_b;           // {q_lora, hidden}, {heads*nope, q_lora}
  WeightMatrix kv_a;               // {kv_lora, hidden}
  WeightMatrix o;                  // {hidden, heads*v}
  std::vector<float> q_a_norm, kv_a_norm;
  std::vector<float> w_uk;         // {heads, nope, kv_lora}  (rows of kv_b_proj)
  std::vector<float> w_uv;         // {heads, v, kv_lora}
  bool has_indexer = false;
  IndexerWeights indexer;
};

struct MlpWeights {
  WeightMatrix gate, up, down;
};

struct MoeWeights {
  WeightMatrix router;             // {experts, hidden}
  std::vector<float> bias;         // e_score_correction_bias {experts}
  std::vector<WeightMatrix> gate_up;  // per expert {2*inter, hidden}: gate rows, then up rows
  std::vector<WeightMatrix> down;     // per expert {hidden, inter}
  MlpWeights shared;
};

struct HcStore {
  cpu::HcWeights w;
  cpu::HcShape shape;
  std::vector<float> base, scale;
};

struct LayerWeights {
  LayerKind kind = LayerKind::kLinear;
  bool sparse_mlp = false;
  KdaWeights kda;
  MlaWeights mla;
  MlpWeights mlp;
  MoeWeights moe;
  std::vector<float> input_norm, post_norm;
  HcStore attn_hc, ffn_hc;
};

// Integrated MTP head, checkpoint layer `layers.<num_hidden_layers>.` (GLM-4.x nextn layout;
// tools/reference/glm5/mtp_ref.py): eh_proj over [enorm(embed(t)), hnorm(h)], one decoder
// layer, shared_head.norm; logits through the trunk lm_head.
struct MtpWeights {
  std::vector<float> enorm, hnorm, shared_norm;  // {hidden}
  WeightMatrix eh_proj;            // {hidden, 2*hidden}
  LayerWeights layer;
};

struct Weights {
  WeightMatrix embed;              // {vocab, hidden}
  WeightMatrix lm_head;            // {vocab, hidden}
  std::vector<float> norm;
  std::vector<LayerWeights> layers;
  std::unique_ptr<MtpWeights> mtp;  // null when the checkpoint has no MTP layer
};

Weights bind_weights(const TensorSource& src, const Config& c);

}  // namespace ds4::glm5
