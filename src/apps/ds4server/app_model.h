#pragma once
// Opening the configured model with its tokenizer/template codec (shared by serve/chat/run).
#include <memory>
#include <string>

#include "models/model.h"
#include "server/serve.h"

namespace ds4::cli {
server::Loaded load_for_settings(const engine::Settings& s);
// load_model on a backend: "cpu" (every family) or "cuda" (Qwen3.8 Flash Next, DeepSeek V4; only in a
// DS4_CUDA build). Throws InputError naming the backend otherwise.
std::unique_ptr<Model> load_model_on(const std::string& path, const LoadOptions& o, const std::string& backend);
}  // namespace ds4::cli
