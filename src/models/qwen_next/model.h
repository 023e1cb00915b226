#pragma once
// Qwen3.8 Flash Next on the CPU backend. Golden master: MTPLX mtplx/models/qwen4_exp.py;
// runnable oracle: HF transformers qwen4_exp (tools/reference/qwen_next/).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "formats/tensor_source.h"
#include "models/draft_head.h"
#include "models/model.h"
#include "models/qwen_next/config.h"
#include "models/qwen_next/state.h"
#include "models/qwen_next/weights.h"

namespace ds4::qwen_next {

class QwenNextModel : public Model, public DraftHead {
 public:
  QwenNextModel(std::unique_ptr<TensorSource> src, const LoadOptions& opt);
  const ModelInfo& info() const override { return info_; }
  StateCost state_cost(bool draft) override;  // state_cost.cpp
  std::unique_ptr<ModelState> new_state() const override;
  void forward(ModelState& state, std::span<const int32_t> tokens, Logits mode, std::vector<float>& logits) override;
  // One token for each of N sequences, each weight read once for all (forward.cpp).
  void decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                    std::vector<float>& logits) override;
  void prefill_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                     std::vector<float>& logits) override;
  // Every sequence's verify window in one forward, captured per state (spec_commit.cpp).
  bool verify_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                    std::vector<float>& logits) override;

  const Config& config() const { return cfg_; }
  // Debug hook: called after every decoder layer with the widened rows h {n, hc*d}
  // (layer = -1: the final mixer output {n, d}). Empty by default.
  std::function<void(int64_t layer, const float* h, int64_t n)> on_layer;
  // PLE sidecar counters summed over PLE layers (zeros for in-memory tables).
  PleTableStats ple_stats() const;

  // MTP draft head (MTPLX Qwen4ExpMTP). enable_mtp() makes `state` keep the head's
  // history from the next forward on (it costs one QSA+MoE layer per token, so AR-only
  // states do not pay it). mtp_draft(): greedy draft chain of `depth` tokens after the
  // state's last token, given the trunk's next token; logits {depth, vocab}.
  void enable_mtp(ModelState& state) const;
  void mtp_draft(ModelState& state, int32_t next_token, int depth, std::vector<float>& logits,
                 std::vector<int32_t>& drafts, const DraftHead::Pick& pick = {});

  // DraftHead over the MTP head (nullptr when the checkpoint has no mtp.* tensors).
  DraftHead* draft_head() override { return w_.mtp ? this : nullptr; }
  void enable_draft(ModelState& state) const override { enable_mtp(state); }
  void draft(ModelState& state, int32_t next_token, int depth, std::vector<int32_t>& drafts) override {
    mtp_draft(state, next_token, depth, draft_logits_, drafts);
  }
  bool draft_picked(ModelState& state, int32_t next_token, int depth, const Pick& pick,
                    std::vector<int32_t>& drafts) override {
    mtp_draft(state, next_token, depth, draft_logits_, drafts, pick);
    return true;
  }

  // Captured-prefix commit (spec_commit.cpp).
  bool verify_capture(ModelState& trial, std::span<const int32_t> tokens, std::vector<float>& logits) override;
  void commit_prefix(ModelState& trial, int64_t keep) override;

 private:
  void mtp_catch_up(State& st);
  // decode_batch / verify_batch: forward() over several states' windows in one pass.
  void forward_windows(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                       Logits mode, std::vector<float>& logits);
  void record_rows(State& st, std::span<const int32_t> tokens, const float* h);
  std::vector<float> draft_logits_;  // scratch for draft(): {depth, vocab}

  std::unique_ptr<TensorSource> src_;
  Config cfg_;
  Weights w_;
  ModelInfo info_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<float> inv_freq_;
};

bool probe(const std::string& path);
std::unique_ptr<Model> load(const std::string& path, const LoadOptions& opt);

}  // namespace ds4::qwen_next
