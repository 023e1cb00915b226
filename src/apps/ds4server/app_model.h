#pragma once
// Opening the configured model with its tokenizer/template codec (shared by serve/chat/run).
#include <memory>
#include <string>

#include "engine/backend_choice.h"
#include "models/model.h"
#include "server/serve.h"

namespace ds4::cli {
// Opens s.model on the backend s.backend resolves to (auto: resolve_backend), with the GPU
// canary of a CUDA model.
server::Loaded load_for_settings(const engine::Settings& s);
// auto / cpu / cuda -> the backend to use and why (engine/backend_choice.h); auto asks the
// CUDA runtime for devices and probes the checkpoint against the CUDA families.
engine::BackendChoice resolve_backend(const std::string& path, const std::string& requested);
// load_model on a backend: "cpu" (every family), "cuda" (the families listed in
// app_model.cpp kCudaFamilies, only in a DS4_CUDA build) or "auto" (resolved, logged on
// stderr). Throws InputError naming the backend otherwise.
std::unique_ptr<Model> load_model_on(const std::string& path, const LoadOptions& o, const std::string& backend);
}  // namespace ds4::cli
