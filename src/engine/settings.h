#pragma once
// All run settings in one struct (SPEC.md §4): loaded from YAML, overridden from the CLI,
// printed back as YAML (the receipt; printing then loading gives the same struct).
// Every key has one dotted name ("sampler.temperature"); the CLI takes --<dotted name>
// or --<last part> when that is unambiguous ("--temperature 0.7", "--port 8080").
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ds4::engine {

struct Settings {
  std::string model = "models/default/model.gguf";  // the shipped Q8_0 default (issue #13)
  int power = 100;                 // percent of the machine's compute to use
  int64_t prefill_chunk = 0;       // 0 = auto (model default: 2048 Qwen/GLM, 4096 DeepSeek)
  int64_t context_size = 0;        // 0 = model maximum
  // auto (cuda when the build has CUDA, a device is visible and the family has a CUDA model,
  // else cpu: engine/backend_choice.h), cpu (every family) or cuda (the families with a CUDA
  // model, DS4_CUDA builds; the loader refuses it with a clear error elsewhere).
  std::string backend = "auto";
  std::string thinking = "on";     // off | on | low | medium | high | max
  bool plain_chat = false;         // no tool/skill text injected
  int threads = 0;                 // 0 = all cores (scaled by power)
  // Sampler: unset = the family default (MTPLX: T 1, top-p 0.95, top-k 20; ds4: T 1,
  // top-p 1, top-k 0, min-p 0.05; seed 12345 for both).
  std::optional<double> temperature, top_p, min_p;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
  // Decode steps draw from the model's top candidates where the settings allow (on CUDA the
  // step copies back those instead of the logits row); candidates_k: how many for ds4's min-p
  // without top-k (EngineOptions::sample_candidates{,_k}).
  bool sample_candidates = true;
  int sample_candidates_k = 256;
  // Speculative decoding. Unset ("auto") = on where the engine's measured cost model
  // expects it to be faster (engine/spec_cost.h, Engine::speculate_by_default); true = on
  // by default; false = off for the whole server (states carry no draft head).
  std::optional<bool> speculative;
  int depth = 3;                        // MTP depth D1..D5
  std::optional<double> dspark_confidence;  // unset = per-turn rule of SPEC §2
  std::string spec_sampling = "exact";  // sampled turns: exact | opportunistic | target_only
  // Continuous batching (EngineOptions::batching / step_tokens): false = round-robin steps
  // without a token budget or batched decode; step_tokens 0 = auto (one prefill chunk).
  bool batching = true;
  int64_t batching_step_tokens = 0;
  // Admission control (EngineOptions::state_memory_bytes): MiB the sessions' model states and
  // the prefix cache may hold together; 0 = auto (90% of the memory free at start: host
  // memory for the CPU models, device memory for the CUDA ones).
  int64_t batching_state_memory_mib = 0;
  // Preemption (EngineOptions::preempt_swap): "swap" (state sections to host memory),
  // "recompute" (drop the state, re-feed its tokens), "auto" (swap on CUDA, where the states
  // live in device memory; recompute on CPU, where swapping frees nothing).
  std::string batching_preempt = "auto";
  // Host MiB swapped states may hold together; 0 = half the host's available memory.
  int64_t batching_swap_mib = 0;
  // Prefix cache.
  int64_t cache_mib = 2048;
  // Prefill snapshots every N prompt tokens (branch points for prompts sharing a long prefix;
  // EngineOptions::snapshot_every): 0 = auto (4096), -1 = off.
  int64_t cache_snapshot_every = 0;
  // On-disk session checkpoints: empty dir = off.
  std::string checkpoint_dir;
  int64_t checkpoint_budget_bytes = int64_t(4) << 30;
  // Server.
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;             // empty = no auth
  std::string cors_origin;         // empty = CORS off
  int64_t max_body_bytes = 8 << 20;
  int64_t max_tokens_limit = 32768;   // upper bound a request may ask for
  int64_t default_max_tokens = 4096;
  int http_threads = 64;
  // Slow or hostile clients (server/conn_guard.h): a request's header block must arrive
  // within header_timeout_s of a worker taking the connection (or of a keep-alive follow-up's
  // first byte), its body within body_timeout_s after the headers; a peer address holds at
  // most max_connections_per_client connections holding a worker (0 = auto: http_threads / 2
  // for remote peers, none for loopback ones, which all share one address; a set value
  // applies to every peer).
  int header_timeout_s = 10;
  int body_timeout_s = 60;
  int max_connections_per_client = 0;
  std::string web_root = "web";
  std::string js_root = "/usr/share/javascript";
};

// Applies one key (dotted name or unambiguous last part). Throws ds4::InputError naming
// `where` (e.g. "config.yaml:12" or "--port"), the key and the value.
void set_setting(Settings& s, const std::string& key, const std::string& value, const std::string& where);
// Loads YAML (nested maps) into s; unknown keys and bad values are errors with line numbers.
void load_settings_file(Settings& s, const std::string& path);
void load_settings_yaml(Settings& s, const std::string& yaml_text, const std::string& name);
// argv after the subcommand: --config FILE is applied first, then every --key value in
// order. Returns the arguments it did not consume (flags such as --print-config).
std::vector<std::string> apply_cli(Settings& s, const std::vector<std::string>& args,
                                   const std::vector<std::string>& own_flags);
// YAML of every key. Unset optionals print as "auto". redact_secrets: the API key prints
// as "<set>" (for receipts that leave the process: /health, logs).
std::string settings_yaml(const Settings& s, bool redact_secrets = false);
std::vector<std::string> setting_keys();

}  // namespace ds4::engine
