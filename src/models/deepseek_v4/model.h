#pragma once
// DeepSeek V4 Flash (HF `deepseek_v4`, antirez/ds4's GGUF layout) on the CPU backend.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace ds4::deepseek_v4 {

// config.json model_type "deepseek_v4", or a GGUF with general.architecture "deepseek4".
bool probe(const std::string& path);
std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options);

// Debugging: called after every layer with its output HC state x {tokens, hc, hidden} of the
// current forward chunk. Throws ds4::Error if `m` is not a DeepSeek V4 model.
using LayerObserver = std::function<void(int64_t layer, const float* x, int64_t tokens)>;
void set_layer_observer(Model& m, LayerObserver fn);

// Tests: the MTP draft chain (m.draft_head()->draft) with its logits {depth + 1, vocab}:
// row 0 = the head's prediction after the last consumed token, rows 1.. the drafts.
void mtp_draft_logits(Model& m, ModelState& state, int32_t next_token, int depth, std::vector<float>& logits,
                      std::vector<int32_t>& drafts);

}  // namespace ds4::deepseek_v4
