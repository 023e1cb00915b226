#pragma once
// Everything that grows with a conversation, per decoder layer. Plain vectors: clone() is
// a deep copy, so a snapshot continues bit-identically.
#include <cstdint>
#include <vector>

#include "models/model.h"

namespace ds4::qwen_next {

struct LayerState {
  // Gated DeltaNet
  std::vector<float> conv;       // {K-1, conv_dim}: last pre-conv qkv rows
  std::vector<float> ssm;        // {v_heads, k_dim, v_dim}: recurrent state
  // PLE
  std::vector<int32_t> ple_ctx;  // {ngram-1}: previous tokens, EOS before the first
  std::vector<float> ple_conv;   // {(K-1)*ngram, hc*d}: dilated conv history
  // QSA attention
  std::vector<float> k, v;       // {pos, kv_heads*head_dim} after norm + rope
  std::vector<float> idx_raw;    // {pos, idx_dim}: raw indexer keys
  std::vector<float> idx_pooled; // {blocks, idx_dim}: mean -> norm -> rope, per full block
  size_t bytes() const;
};

class State : public ModelState {
 public:
  std::unique_ptr<ModelState> clone() const override { return std::make_unique<State>(*this); }
  int64_t position() const override { return pos; }
  void save(std::vector<StateSection>& out) const override;  // state_io.cpp
  void load(const std::vector<StateSection>& in) override;
  size_t bytes() const override;

  int64_t pos = 0;
  std::vector<LayerState> layers;
  // MTP head: its own QSA layer history, and the trunk's pre-mixer widened row of the
  // last consumed token (the head's input for the next draft).
  bool mtp_on = false;
  LayerState mtp;
  int64_t mtp_pos = 0;
  std::vector<float> last_wide;     // {hc*d}: trunk row of the last consumed token
  std::vector<float> pending_wide;  // {k, hc*d}: rows whose next token is known but that
  std::vector<int32_t> pending_next;  // the head has not consumed yet (with those tokens)
};

}  // namespace ds4::qwen_next
