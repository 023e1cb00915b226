#pragma once
// Everything a GLM 5.x conversation accumulates. KDA layers carry a fixed-size conv window
// and recurrent matrix; DSA layers grow a compressed MLA latent per position plus, on
// full-indexer layers, the indexer's per-position key/gate rows and the finished k-pool keys.
#include <cstdint>
#include <memory>
#include <vector>

#include "models/model.h"

namespace ds4::glm5 {

struct KdaState {
  std::vector<float> conv;        // {kernel-1, 3*qkv} pre-conv inputs, oldest first
  std::vector<float> recurrent;   // {heads, head_dim(k), head_dim(v)}
};

struct MlaState {
  std::vector<float> latent;      // {positions, kv_lora}: kv_a_layernorm(kv_a_proj(x))
  std::vector<float> idx_keys;    // {positions, index_head_dim}: LayerNorm(wk x)
  std::vector<float> idx_gates;   // {positions, index_head_dim}: compress_gate x
  std::vector<float> pool_keys;   // {complete pools, index_head_dim}
};

class State final : public ModelState {
 public:
  std::unique_ptr<ModelState> clone() const override { return std::make_unique<State>(*this); }
  int64_t position() const override { return pos; }
  void save(std::vector<StateSection>& out) const override;  // state_io.cpp
  void load(const std::vector<StateSection>& in) override;
  size_t bytes() const override {
    size_t b = 0;
    for (const auto& k : kda) b += (k.conv.size() + k.recurrent.size()) * sizeof(float);
    for (const auto& m : mla)
      b += (m.latent.size() + m.idx_keys.size() + m.idx_gates.size() + m.pool_keys.size()) * sizeof(float);
    return b;
  }

  int64_t pos = 0;
  std::vector<KdaState> kda;  // per layer (empty for DSA layers)
  std::vector<MlaState> mla;  // per layer (empty for KDA layers)
};

}  // namespace ds4::glm5
