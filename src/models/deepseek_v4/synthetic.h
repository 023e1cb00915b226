#pragma once
// Synthetic DeepSeek V4 models for speed work (issue #10): the real shapes and tensor list of
// a config, with no data behind them. export_ds4_gguf() fills such tensors with generated
// values (seeded by tensor name, valid block scales) instead of converting, so a full-size
// file is written one tensor at a time and never lives in RAM whole.
#include <memory>

#include <nlohmann/json.hpp>

#include "formats/tensor_source.h"
#include "models/deepseek_v4/config.h"

namespace ds4::deepseek_v4 {

// HF-style config.json of DeepSeek V4 Flash as antirez/ds4 ships it (docs/formats/
// ds4-gguf-layout.md: 43 layers, hidden 4096, 256 experts of 2048, 64 heads of 512, ...).
nlohmann::json flash_hf_config();

// Every HF-named tensor the loader and the exporter use for this config, with its shape,
// dtype F32 and data == nullptr (tensors()/get() work; reading data is the caller's job).
std::unique_ptr<TensorSource> synthetic_source(const nlohmann::json& hf_config);

}  // namespace ds4::deepseek_v4
