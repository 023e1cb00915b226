#pragma once
// antirez/ds4's GGUF layout for DeepSeek V4 (docs/formats/ds4-gguf-layout.md): the
// "deepseek4.*" metadata <-> our Config, and a writer that lays a model out the way ds4's
// quantizer does (names, F16 / Q8_0 / F32 / I32 per tensor, routed experts in a 2-4 bit
// block type).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "formats/tensor_source.h"
#include "models/deepseek_v4/config.h"

namespace ds4::deepseek_v4 {

// TensorSource::config() of a deepseek4 GGUF (its keys without the "deepseek4." prefix)
// -> an HF-style config for parse_config. Throws InputError naming the missing key.
nlohmann::json hf_config_from_ds4(const nlohmann::json& g, const std::string& where);

struct Ds4ExportOptions {
  // ds4 files use IQ2_XXS (gate/up) + Q2_K (down), or Q4_K for all three; those need rows
  // that are a multiple of 256. Q8_0 / F32 keep tiny test models (hidden 64) writable.
  // A source tensor already in the requested block type is copied byte for byte.
  DType expert_type = DType::Q4_K;
  DType expert_down_type = DType::Q4_K;
  // Testing aid: when set (F32 or F16), every non-expert float tensor is written in this
  // type instead of ds4's per-tensor choice (layout and metadata checked without quant error).
  std::optional<DType> dense_type;
  // Synthetic sources only (synthetic.h): routed experts left as file holes (zeros, which
  // read at the same bandwidth) so a full-size file fits a smaller disk as a sparse file.
  bool synthetic_expert_holes = false;
  // When set: tokenizer.ggml.{model,pre,tokens,merges} from this HF tokenizer.json.
  std::string tokenizer_json;
};

// Writes `src` (HF names, any float type) as a ds4-layout GGUF at `path`.
void export_ds4_gguf(const TensorSource& src, const Config& c, const std::string& path,
                     const Ds4ExportOptions& opt = {});

}  // namespace ds4::deepseek_v4
