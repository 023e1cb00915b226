#pragma once
// GLM 5.x Flash (HF glm5_next, text part) on CPU: the ds4::Model for this family.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/model.h"

namespace ds4 {
class TensorSource;
}

namespace ds4::glm5 {

// True when `path` holds a glm5_next checkpoint (config.json model_type, or GGUF architecture).
bool probe(const std::string& path);
std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options);
// Takes ownership of an opened source (tests, converters).
std::unique_ptr<Model> load_source(std::unique_ptr<TensorSource> src, const LoadOptions& options);

// Debugging aid (tests, backend ports): prefills `tokens` into a fresh state and returns the
// output streams {tokens, hc, hidden} of every decoder layer. `model` must be a glm5 model.
std::vector<std::vector<float>> layer_outputs(Model& model, std::span<const int32_t> tokens);

// Tests: the MTP draft chain (model.draft_head()->draft) with its logits {depth, vocab}.
void mtp_draft_logits(Model& model, ModelState& state, int32_t next_token, int depth, std::vector<float>& logits,
                      std::vector<int32_t>& drafts);

}  // namespace ds4::glm5
