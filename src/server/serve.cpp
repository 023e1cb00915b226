#include "server/serve.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <thread>

#include "core/error.h"
#include "server/server.h"
#include "server/speculation_report.h"

namespace ds4::server {

engine::Settings effective_settings(const engine::Settings& s, const engine::Engine& e) {
  engine::Settings out = s;
  auto p = engine::default_sampler_params(e.sampler_kind());
  if (!out.temperature) out.temperature = p.temperature;
  if (!out.top_p) out.top_p = p.top_p;
  if (!out.top_k) out.top_k = p.top_k;
  if (!out.min_p) out.min_p = p.min_p;
  // seed stays unset ("auto"): every request then gets a fresh one (api_common resolve_sampler).
  out.context_size = e.context_size();
  if (e.speculative_depth() == 0) out.speculative = false;  // asked for, but no draft head to run
  out.prefill_chunk = e.prefill_chunk();
  out.cache_snapshot_every = e.snapshot_every() > 0 ? e.snapshot_every() : -1;
  return out;
}

engine::EngineOptions engine_options(const engine::Settings& s) {
  engine::EngineOptions o;
  o.context_size = s.context_size;
  o.prefill_chunk = s.prefill_chunk;
  o.cache_bytes = size_t(s.cache_mib) << 20;
  o.snapshot_every = s.cache_snapshot_every;
  o.checkpoint_dir = s.checkpoint_dir;
  o.checkpoint_budget_bytes = uint64_t(s.checkpoint_budget_bytes);
  o.spec_depth = s.speculative.value_or(true) ? s.depth : 0;
  o.spec_default = s.speculative;  // unset: the engine's cost model decides
  o.spec_sampling = s.spec_sampling;
  o.dspark_confidence = s.dspark_confidence;
  o.sample_candidates = s.sample_candidates;
  o.sample_candidates_k = s.sample_candidates_k;
  o.batching = s.batching;
  o.step_tokens = s.batching_step_tokens;
  o.state_memory_bytes = size_t(s.batching_state_memory_mib) << 20;
  o.preempt_swap = s.batching_preempt == "swap";
  o.swap_bytes = size_t(s.batching_swap_mib) << 20;
  return o;
}

engine::EngineOptions engine_options(engine::Settings& s, const Loaded& l) {
  engine::EngineOptions o = engine_options(s);
  o.canary = l.canary;
  if (!l.backend.backend.empty()) {
    s.backend = l.backend.backend;
    std::fprintf(stderr, "backend: %s (%s)%s\n", l.backend.backend.c_str(), l.backend.reason.c_str(),
                 l.canary ? "; GPU canary on" : "");
  }
  // auto: swap where the states live in device memory (a re-prefill there costs far more
  // than copying the caches out and back); on the CPU swapping would free nothing.
  o.preempt_swap = s.batching_preempt == "swap" || (s.batching_preempt == "auto" && s.backend == "cuda");
  return o;
}

std::string backend_comment(const Loaded& l) {
  if (l.backend.backend.empty()) return "";
  return "# backend: " + l.backend.backend + " (" + l.backend.reason + ")\n";
}

// Speculation asked for but impossible is said once, not silently dropped: the family's CUDA
// model has no draft head yet (GLM, DeepSeek; Qwen's has one), or the checkpoint carries none.
// Empty when speculation runs or was not asked.
std::string speculative_note(const engine::Settings& s, const engine::Engine& e, const std::string& backend) {
  if (!s.speculative.value_or(true) || e.speculative_depth() > 0) return "";
  return backend == "cuda" ? "off (the cuda model has no draft head: none for this family on the GPU yet, or none in the checkpoint)"
                           : "off (the model has no draft head)";
}

int serve_main(const std::vector<std::string>& args, const Loader& load) {
  engine::Settings settings;
  // --help / -h anywhere: the usage and every setting with its default, nothing loaded.
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    std::printf("usage: ds4server serve [--config FILE] [--SETTING VALUE | --SETTING=VALUE]... [--print-config]\n"
                "  serves the OpenAI (/v1/chat/completions, /v1/completions, /v1/responses) and Anthropic\n"
                "  (/v1/messages) APIs and the web chat page; --print-config prints the effective settings\n"
                "  and exits. A setting SECTION.NAME is --SECTION.NAME on the command line (- or _ alike).\n"
                "settings and their defaults:\n%s",
                engine::settings_yaml(settings, /*redact_secrets=*/true).c_str());
    return 0;
  }
  auto rest = engine::apply_cli(settings, args, {"--print-config"});
  const bool print_only = !rest.empty();
  // Block the stop signals in every thread; one thread waits for them (no work in handlers).
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  Loaded l = load(settings);
  const std::string family = l.model->info().family;
  const std::string why = l.backend.reason;
  std::string comment = backend_comment(l);
  const std::string backend = l.backend.backend;
  engine::Engine eng(std::move(l.model), std::move(l.codec), engine_options(settings, l));
  if (const std::string note = speculative_note(settings, eng, backend); !note.empty()) {
    std::fprintf(stderr, "speculative: %s\n", note.c_str());
    comment += "# speculative: " + note + "\n";
  }
  comment += speculation_receipt_line(eng);
  const std::string receipt = comment + engine::settings_yaml(effective_settings(settings, eng), /*redact_secrets=*/true);
  if (print_only) {
    std::fputs(receipt.c_str(), stdout);
    return 0;
  }
  // Validate the settings' sampler against the family once, at start.
  engine::SamplerParams sp = engine::default_sampler_params(eng.sampler_kind());
  if (settings.min_p) sp.min_p = *settings.min_p;
  if (settings.temperature) sp.temperature = *settings.temperature;
  if (settings.top_p) sp.top_p = *settings.top_p;
  if (settings.top_k) sp.top_k = *settings.top_k;
  engine::validate_sampler_params(eng.sampler_kind(), sp);

  Server srv(eng, settings, receipt, why);
  const int port = srv.bind();
  std::fprintf(stderr, "# ds4server effective settings (family %s, sampler %s)\n%s", family.c_str(),
               engine::sampler_kind_name(eng.sampler_kind()), receipt.c_str());
  std::fprintf(stderr, "listening on http://%s:%d\n", settings.host.c_str(), port);
  if (const std::string w = exposure_warning(settings); !w.empty()) std::fprintf(stderr, "WARNING: %s\n", w.c_str());
  std::fflush(stderr);
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    std::fprintf(stderr, "signal %d: shutting down\n", sig);
    srv.stop();
  });
  srv.serve();
  // serve() returned without a signal (listener failure): wake the waiter.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  return 0;
}

}  // namespace ds4::server
