#pragma once
// `serve` as a reusable entry: settings from YAML/CLI, the engine, the HTTP server, the
// receipt, and graceful shutdown on SIGINT/SIGTERM. The caller supplies how a model and
// its codec are opened (the ds4server binary: the registry; the test binary: a test model).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/canary_monitor.h"
#include "engine/backend_choice.h"
#include "engine/codec.h"
#include "engine/engine.h"
#include "engine/settings.h"
#include "models/model.h"

namespace ds4::server {

struct Loaded {
  std::unique_ptr<Model> model;
  std::unique_ptr<engine::Codec> codec;
  engine::BackendChoice backend;            // empty backend: the loader did not choose (tests)
  std::shared_ptr<CanaryMonitor> canary;    // the CUDA model's GPU canary; null on the CPU
};
using Loader = std::function<Loaded(const engine::Settings&)>;

// Settings after the model is known: family sampler defaults, context and chunk filled in.
engine::Settings effective_settings(const engine::Settings& s, const engine::Engine& e);
engine::EngineOptions engine_options(const engine::Settings& s);
// The settings' options plus what the loader brought (the GPU canary); records the chosen
// backend in s.backend (the receipt shows the backend that runs) and logs why on stderr.
engine::EngineOptions engine_options(engine::Settings& s, const Loaded& l);
// "# backend: cuda (auto: ...)\n" for the receipt; empty when the loader did not choose.
std::string backend_comment(const Loaded& l);

// args: argv after "serve". Returns the exit code.
int serve_main(const std::vector<std::string>& args, const Loader& load);

}  // namespace ds4::server
