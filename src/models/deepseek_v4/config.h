#pragma once
// DeepSeek V4 Flash hyper-parameters, read from an HF config.json (or the equivalent JSON
// a GGUF carries). Every shape the forward uses comes from here; nothing is hard-coded.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/rope_yarn.h"

namespace ds4::deepseek_v4 {

enum class AttnType { kSliding, kCompressedSparse, kHeavilyCompressed };
enum class ScoreFunc { kSqrtSoftplus, kSigmoid, kSoftmax };

struct RopeConfig {
  double theta = 10000.0;
  bool yarn = false;
  cpu::YarnParams yarn_params;
};

struct Config {
  int64_t vocab = 0, hidden = 0, layers = 0;
  int64_t heads = 0, head_dim = 0, rope_dim = 0;
  int64_t q_lora = 0, o_groups = 0, o_lora = 0;
  int64_t experts = 0, experts_used = 0, expert_ff = 0;
  double routed_scale = 1.0;
  ScoreFunc score = ScoreFunc::kSqrtSoftplus;
  bool norm_topk = true;
  std::vector<AttnType> attn_types;
  std::vector<bool> hash_moe;  // per layer: hash-routed (tid2eid) instead of top-k
  int64_t csa_ratio = 4, hca_ratio = 128;
  RopeConfig rope_main, rope_compress;
  int64_t hc = 4;
  int sinkhorn_iters = 20;
  float hc_eps = 1e-6f;
  float swiglu_limit = 0.0f;  // 0 = no clamp
  int64_t window = 0;
  int64_t index_heads = 0, index_dim = 0, index_topk = 0;
  float rms_eps = 1e-6f;
  int64_t max_positions = 0;
  bool tie_embeddings = false;  // tie_word_embeddings: lm_head is the embedding (HF ties them)
  std::vector<int32_t> eos;
  // antirez/ds4's storage simulation (docs/reference-differences.md #1, #2): FP8 round trip
  // of the KV rows' non-rope part, Hadamard + FP4 round trip of indexer queries and keys.
  // Not part of HF's graph; on by default for ds4-layout GGUF files (model.cpp).
  bool ds4_numerics = false;
  // antirez/ds4's activation quantization (reference-differences #8, core/act_quant.h): x is
  // quantized to Q8_0 / Q8_K blocks before every Q8_0 / Q2_K / IQ2_XXS product (CPU matmul_act,
  // CUDA gemv_act). On by default with ds4_numerics (ds4-layout files), off for HF checkpoints;
  // DS4_ACT_QUANT=q8|f32 overrides (model.h act_quant_for).
  bool act_quant = false;
  // DSpark drafter (MTPLX ModelArgs dspark_*; used only when the checkpoint has DSpark
  // weights): the noise token of block rows 1..4 (-1: absent from the config) and the trunk
  // layers whose HC means feed main_proj (default: the last three layers).
  int64_t dspark_noise = -1;
  std::vector<int64_t> dspark_taps;

  int64_t ratio(int64_t layer) const;  // 0 for sliding-only layers
};

// Throws ds4::InputError naming `where`, the field and the value.
Config parse_config(const nlohmann::json& j, const std::string& where);

}  // namespace ds4::deepseek_v4
