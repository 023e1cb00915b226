#pragma once
// Everything a GLM 5.x conversation accumulates. KDA layers carry a fixed-size conv window
// and recurrent matrix; DSA layers grow a compressed MLA latent per position plus, on
// full-indexer layers, the indexer's per-position key/gate rows and the finished k-pool keys.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/paged_rows.h"
#include "models/model.h"

namespace ds4::glm5 {

// What a KDA layer records during a captured verify window (spec_commit.cpp): the layer
// cannot cut its recurrent matrix or conv window back, so it keeps them per row.
struct KdaCapture {
  bool on = false;
  std::vector<float> conv0, conv_in;  // conv state before the window; its input rows {n, 3*qkv}
  std::vector<float> rec;             // recurrent state after rows 0..n-2 {n-1, heads, hd, hd}
};

struct KdaState {
  std::vector<float> conv;        // {kernel-1, 3*qkv} pre-conv inputs, oldest first
  std::vector<float> recurrent;   // {heads, head_dim(k), head_dim(v)}
  KdaCapture cap;                 // verify window being captured (speculative decoding)
};

// Paged (core/paged_rows.h): a clone shares the blocks, so a cached prefix costs no copy.
struct MlaState {
  PagedRows latent;      // {positions, kv_lora}: kv_a_layernorm(kv_a_proj(x))
  PagedRows idx_keys;    // {positions, index_head_dim}: LayerNorm(wk x)
  PagedRows idx_gates;   // {positions, index_head_dim}: compress_gate x
  PagedRows pool_keys;   // {complete pools, index_head_dim}
  // The caches' bytes, each counted by paged(const PagedRows&).
  template <class Paged>
  size_t count_bytes(Paged&& paged) const {
    return paged(latent) + paged(idx_keys) + paged(idx_gates) + paged(pool_keys);
  }
};

class State final : public ModelState {
 public:
  std::unique_ptr<ModelState> clone() const override { return std::make_unique<State>(*this); }
  int64_t position() const override { return pos; }
  void save(std::vector<StateSection>& out) const override;  // state_io.cpp
  void load(const std::vector<StateSection>& in) override;
  size_t bytes() const override { return count_bytes([](const PagedRows& p) { return p.bytes(); }); }
  size_t proportional_bytes() const override {
    return count_bytes([](const PagedRows& p) { return p.proportional_bytes(); });
  }
  // Every buffer's bytes, the paged caches counted by paged(const PagedRows&).
  template <class Paged>
  size_t count_bytes(Paged&& paged) const {
    size_t b = 0;
    for (const auto& k : kda) b += (k.conv.size() + k.recurrent.size()) * sizeof(float);
    for (const auto& m : mla) b += m.count_bytes(paged);
    b += (mtp_kda.conv.size() + mtp_kda.recurrent.size() + last_hidden.size() + pending_hidden.size()) * sizeof(float);
    return b + mtp_mla.count_bytes(paged);
  }

  int64_t pos = 0;
  std::vector<KdaState> kda;  // per layer (empty for DSA layers)
  std::vector<MlaState> mla;  // per layer (empty for KDA layers)
  // MTP head (mtp.cpp): its own layer history (row i pairs the trunk's normed output at i
  // with token i+1), the trunk's normed output of the last consumed token, and rows whose
  // next token is known but that the head has not consumed yet.
  bool mtp_on = false;
  KdaState mtp_kda;
  MlaState mtp_mla;
  int64_t mtp_pos = 0;
  std::vector<float> last_hidden;     // {hidden}
  std::vector<float> pending_hidden;  // {k, hidden}
  std::vector<int32_t> pending_next;  // {k}
  // Tokens of the captured verify window awaiting commit_prefix (empty: none).
  std::vector<int32_t> cap_tokens;
};

struct Config;
// A fresh state shaped for the config (KDA windows zeroed, the paged caches' row widths): the
// CPU model's new_state() and the CUDA state's host copy for checkpoints (state_io.cpp).
State make_state(const Config& c);

}  // namespace ds4::glm5
