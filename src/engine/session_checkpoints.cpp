#include "engine/session_checkpoints.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace ds4::engine {
namespace {
// Engine-side data travels next to the model's sections under a prefix the models never use.
// Model sections are stored as "state.<name>" ("tokens"/"alias" are the file format's own).
const char* const kLogits = "engine.logits";
const std::string kStatePrefix = "state.";

// Checkpoint log lines by level. DS4_LOG_LEVEL=debug|info|warn (default info): faults
// (rejected files, failed saves) are warnings, restores info, skipped saves debug.
enum class Level { kDebug = 0, kInfo = 1, kWarn = 2 };

Level log_threshold() {
  static const Level level = [] {
    const char* v = std::getenv("DS4_LOG_LEVEL");
    const std::string_view s = v ? v : "";
    return s == "debug" ? Level::kDebug : s == "warn" || s == "error" ? Level::kWarn : Level::kInfo;
  }();
  return level;
}

void log(Level level, const std::string& line) {
  if (level < log_threshold()) return;
  static const char* const names[] = {"debug", "info", "warn"};
  std::fprintf(stderr, "ds4: %s: checkpoint: %s\n", names[int(level)], line.c_str());
}
}  // namespace

SessionCheckpoints::SessionCheckpoints(Model& model, const std::string& dir, uint64_t budget_bytes,
                                       bool draft_state)
    : model_(model),
      fingerprint_(model.fingerprint() + (draft_state ? "+draft" : "")),
      store_(CheckpointStoreOptions{.dir = dir, .budget_bytes = budget_bytes}) {
  report_problems();  // files refused while the manifest was rebuilt
}

SessionCheckpoints::~SessionCheckpoints() {
  store_.flush();
  report_problems();
}

void SessionCheckpoints::report_problems() {
  for (const auto& p : store_.take_problems()) log(Level::kWarn, p);
}

void SessionCheckpoints::save(const std::vector<int32_t>& tokens, const ModelState& state,
                              const std::vector<float>& logits, const std::vector<int32_t>& alias) {
  report_problems();  // faults of earlier (asynchronous) saves
  if (tokens.empty() || logits.empty()) {
    log(Level::kDebug, "save skipped: " + std::to_string(tokens.size()) + " tokens, " +
                           std::to_string(logits.size()) + " logits");
    return;
  }
  Checkpoint ck;
  ck.fingerprint = fingerprint_;
  ck.tokens = tokens;
  if (alias != tokens) ck.alias = alias;
  std::vector<StateSection> sections;
  try {
    state.save(sections);
  } catch (const std::exception& e) {
    log(Level::kDebug, std::string("save skipped: ") + e.what());
    return;
  }
  ck.sections.reserve(sections.size() + 1);
  for (auto& s : sections) ck.sections.push_back(CheckpointSection{kStatePrefix + s.name, std::move(s.bytes)});
  CheckpointSection lg{kLogits, std::vector<uint8_t>(logits.size() * sizeof(float))};
  std::memcpy(lg.bytes.data(), logits.data(), lg.bytes.size());
  ck.sections.push_back(std::move(lg));
  store_.save_async(std::move(ck));
}

SessionCheckpoints::Restore SessionCheckpoints::restore(const std::vector<int32_t>& prompt,
                                                        std::shared_ptr<Pending>& pending,
                                                        std::optional<PrefixCache::Hit>& out,
                                                        std::chrono::microseconds wait) {
  if (!pending) {
    // Only the manifest is consulted here; a prompt no stored key matches costs no thread.
    if (!store_.has_candidate(fingerprint_, prompt)) return Restore::kDone;
    pending = std::make_shared<Pending>();
    pending->read = std::async(std::launch::async, [this, prompt] {
      Read r;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        r.ckpt = store_.restore_longest(fingerprint_, prompt);
      } catch (const std::exception& e) {
        log(Level::kWarn, std::string("restore failed: ") + e.what());
      }
      r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      return r;
    });
  }
  if (pending->read.wait_for(wait) != std::future_status::ready) return Restore::kPending;
  out = install(pending->read.get(), prompt);
  pending.reset();
  return Restore::kDone;
}

std::optional<PrefixCache::Hit> SessionCheckpoints::restore(const std::vector<int32_t>& prompt) {
  std::shared_ptr<Pending> pending;
  std::optional<PrefixCache::Hit> out;
  while (restore(prompt, pending, out, std::chrono::seconds(1)) == Restore::kPending) {
  }
  return out;
}

// Turns a verified checkpoint into a fresh state (engine thread: the model's buffers live there).
std::optional<PrefixCache::Hit> SessionCheckpoints::install(Read read, const std::vector<int32_t>& prompt) {
  const auto t0 = std::chrono::steady_clock::now();
  std::optional<Checkpoint>& ck = read.ckpt;
  report_problems();
  if (!ck || ck->tokens.empty()) return std::nullopt;
  auto is_prefix = [&](const std::vector<int32_t>& t) {
    return !t.empty() && t.size() <= prompt.size() && std::equal(t.begin(), t.end(), prompt.begin());
  };
  // The prompt continues after the longer of the two keys it starts with.
  size_t covered = is_prefix(ck->tokens) ? ck->tokens.size() : 0;
  if (is_prefix(ck->alias) && ck->alias.size() > covered) covered = ck->alias.size();
  if (covered == 0) return std::nullopt;
  PrefixCache::Hit hit;
  std::vector<StateSection> sections;
  for (auto& s : ck->sections) {
    if (s.name == kLogits) {
      hit.logits.resize(s.bytes.size() / sizeof(float));
      std::memcpy(hit.logits.data(), s.bytes.data(), hit.logits.size() * sizeof(float));
    } else if (s.name.rfind(kStatePrefix, 0) == 0) {
      sections.push_back(StateSection{s.name.substr(kStatePrefix.size()), std::move(s.bytes)});
    } else {
      store_.reject("refused: unknown section '" + s.name + "'");
      report_problems();
      return std::nullopt;
    }
  }
  if (hit.logits.size() != size_t(model_.info().vocab_size)) {
    store_.reject("refused: " + std::to_string(hit.logits.size()) + " logits for a vocabulary of " +
                  std::to_string(model_.info().vocab_size));
    report_problems();
    return std::nullopt;
  }
  hit.state = model_.new_state();
  try {
    hit.state->load(sections);
  } catch (const std::exception& e) {
    store_.reject(std::string("refused: ") + e.what());
    report_problems();
    return std::nullopt;
  }
  // The state must hold exactly the stored tokens: the checksums prove the file is as
  // written, not that its state and its token key agree; continuing a state of another
  // length would serve tokens computed at the wrong positions.
  if (hit.state->position() != int64_t(ck->tokens.size())) {
    store_.reject("refused: the state holds " + std::to_string(hit.state->position()) + " positions, its key " +
                  std::to_string(ck->tokens.size()) + " tokens");
    report_problems();
    return std::nullopt;
  }
  char times[96];
  std::snprintf(times, sizeof times, "read+verify %.2f ms (reader thread), install %.2f ms", read.ms,
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  log(Level::kInfo, "restored " + std::to_string(ck->tokens.size()) + " tokens (prompt " +
                        std::to_string(prompt.size()) + "): " + times);
  hit.tokens = std::move(ck->tokens);
  hit.append.assign(prompt.begin() + long(covered), prompt.end());
  return hit;
}

}  // namespace ds4::engine
