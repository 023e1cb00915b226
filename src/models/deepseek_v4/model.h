#pragma once
// DeepSeek V4 Flash (HF `deepseek_v4`, antirez/ds4's GGUF layout) on the CPU backend.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "formats/tensor_source.h"
#include "models/deepseek_v4/config.h"
#include "models/model.h"

namespace ds4::deepseek_v4 {

// The config of an opened checkpoint: HF config.json, or the deepseek4.* keys of a GGUF.
Config config_of(const TensorSource& src);
// Whether to apply ds4's storage numerics (Config::ds4_numerics): on for ds4-layout files,
// DS4_DSV4_NUMERICS=hf|ds4 overrides. Throws InputError for another value.
bool ds4_numerics_for(bool ds4_layout);
// Whether to quantize activations before Q8_0 / Q2_K / IQ2_XXS products as ds4 does
// (Config::act_quant): DS4_ACT_QUANT=q8 on, =f32 off; unset: on exactly when ds4's numerics
// are (`ds4_numerics`, ds4_numerics_for: ds4-layout files, so HF checkpoints and
// DS4_DSV4_NUMERICS=hf keep HF's f32 activations). The CPU and CUDA models both take it at
// load. Throws InputError for another value.
bool act_quant_for(bool ds4_numerics);

// config.json model_type "deepseek_v4", or a GGUF with general.architecture "deepseek4".
bool probe(const std::string& path);
std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options);

// Debugging: called after every layer with its output HC state x {tokens, hc, hidden} of the
// current forward chunk. Throws ds4::Error if `m` is not a DeepSeek V4 model.
using LayerObserver = std::function<void(int64_t layer, const float* x, int64_t tokens)>;
void set_layer_observer(Model& m, LayerObserver fn);

// Diagnostics (issue #22): forwards of at least `min_rows` tokens round the operands of the
// products that the CUDA tensor-core chunk runs in TF32 / BF16 as it does (operand_rounding.h;
// `truncate`: drop the extra mantissa bits instead of rounding to nearest); 0 = exact again.
void set_tensor_core_emulation(Model& m, int64_t min_rows, bool truncate = false);

// Tests: the MTP draft chain (m.draft_head()->draft) with its logits {depth + 1, vocab}:
// row 0 = the head's prediction after the last consumed token, rows 1.. the drafts.
void mtp_draft_logits(Model& m, ModelState& state, int32_t next_token, int depth, std::vector<float>& logits,
                      std::vector<int32_t>& drafts);

// Tests: one DSpark K5 pass (checkpoint with DSpark weights): logits {5, vocab} (neural +
// Markov bias), the five drafts and their confidences. Leaves `state` unchanged.
void dspark_draft_details(Model& m, ModelState& state, int32_t primary, std::vector<float>& logits,
                          std::vector<int32_t>& drafts, std::vector<float>& confidence);

}  // namespace ds4::deepseek_v4
