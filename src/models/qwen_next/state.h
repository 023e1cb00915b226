#pragma once
// Everything that grows with a conversation, per decoder layer. Plain vectors: clone() is
// a deep copy, so a snapshot continues bit-identically.
#include <cstdint>
#include <vector>

#include "core/paged_rows.h"
#include "models/model.h"

namespace ds4::qwen_next {

// Per-row history of one verify window, recorded only while a speculative verify captures
// (QwenNextModel::verify_capture), so that the accepted prefix can be committed without
// re-running it (MTPLX gdn_capture.commit_captured_prefix). Empty otherwise.
struct RowCapture {
  bool on = false;
  std::vector<float> conv0, conv_in;     // GDN: conv state before the window; its input rows {n, conv_dim}
  std::vector<float> ssm;                // GDN: recurrent state after each row {n, v_heads*k_dim*v_dim}
  std::vector<int32_t> ple_ctx0;         // PLE: token context before the window
  std::vector<float> ple_conv0, ple_in;  // PLE: conv history before; its input rows {n, hc*d}
  size_t bytes() const;
};

struct LayerState {
  // Gated DeltaNet
  std::vector<float> conv;       // {K-1, conv_dim}: last pre-conv qkv rows
  std::vector<float> ssm;        // {v_heads, k_dim, v_dim}: recurrent state
  // PLE
  std::vector<int32_t> ple_ctx;  // {ngram-1}: previous tokens, EOS before the first
  std::vector<float> ple_conv;   // {(K-1)*ngram, hc*d}: dilated conv history
  // QSA attention. Paged (core/paged_rows.h): a clone shares the blocks.
  PagedRows k, v;       // {pos, kv_heads*head_dim} after norm + rope
  PagedRows idx_raw;    // {pos, idx_dim}: raw indexer keys
  PagedRows idx_pooled; // {blocks, idx_dim}: mean -> norm -> rope, per full block
  RowCapture cap;                // verify window being captured (speculative decoding)
  // Every buffer's bytes, the paged caches counted by paged(const PagedRows&).
  template <class Paged>
  size_t count_bytes(Paged&& paged) const {
    return (conv.size() + ssm.size() + ple_conv.size()) * sizeof(float) + paged(k) + paged(v) + paged(idx_raw) +
           paged(idx_pooled) + ple_ctx.size() * sizeof(int32_t) + cap.bytes();
  }
};

class State : public ModelState {
 public:
  std::unique_ptr<ModelState> clone() const override { return std::make_unique<State>(*this); }
  int64_t position() const override { return pos; }
  void save(std::vector<StateSection>& out) const override;  // state_io.cpp
  void load(const std::vector<StateSection>& in) override;
  size_t bytes() const override;
  size_t proportional_bytes() const override;

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
  // Captured verify window (spec_commit.cpp): its tokens; empty when nothing is captured.
  std::vector<int32_t> cap_tokens;
};

struct Config;
// A fresh state shaped for the config (layers as new_layer_state, the MTP head's QSA layer):
// the CPU model's new_state() and the CUDA state's host copy for checkpoints (state.cpp).
State make_state(const Config& c);

}  // namespace ds4::qwen_next
