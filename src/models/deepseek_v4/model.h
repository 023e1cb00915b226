#pragma once
// DeepSeek V4 Flash (HF `deepseek_v4`, antirez/ds4's GGUF layout) on the CPU backend.
#include <memory>
#include <string>

#include "models/model.h"

namespace ds4::deepseek_v4 {

// config.json model_type "deepseek_v4", or a GGUF with general.architecture "deepseek4".
bool probe(const std::string& path);
std::unique_ptr<Model> load(const std::string& path, const LoadOptions& options);

}  // namespace ds4::deepseek_v4
