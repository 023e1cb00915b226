#include "engine/session_checkpoints.h"

#include <cstring>
#include <cstdio>

namespace ds4::engine {
namespace {
// Engine-side data travels next to the model's sections under a prefix the models never use.
// Model sections are stored as "state.<name>" ("tokens" is the file format's own section).
const char* const kLogits = "engine.logits";
const std::string kStatePrefix = "state.";
}  // namespace

SessionCheckpoints::SessionCheckpoints(Model& model, const std::string& dir, uint64_t budget_bytes)
    : model_(model),
      fingerprint_(model.fingerprint()),
      store_(CheckpointStoreOptions{.dir = dir, .budget_bytes = budget_bytes}) {}

SessionCheckpoints::~SessionCheckpoints() {
  store_.flush();
  for (const auto& p : store_.take_problems()) std::fprintf(stderr, "ds4: checkpoint: %s\n", p.c_str());
}

void SessionCheckpoints::save(const std::vector<int32_t>& tokens, const ModelState& state,
                              const std::vector<float>& logits) {
  if (tokens.empty() || logits.empty()) {
    std::fprintf(stderr, "ds4: checkpoint skipped: %zu tokens %zu logits\n", tokens.size(), logits.size());
    return;
  }
  Checkpoint ck;
  ck.fingerprint = fingerprint_;
  ck.tokens = tokens;
  std::vector<StateSection> sections;
  try {
    state.save(sections);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds4: checkpoint skipped: %s\n", e.what());
    return;
  }
  ck.sections.reserve(sections.size() + 1);
  for (auto& s : sections) ck.sections.push_back(CheckpointSection{kStatePrefix + s.name, std::move(s.bytes)});
  CheckpointSection lg{kLogits, std::vector<uint8_t>(logits.size() * sizeof(float))};
  std::memcpy(lg.bytes.data(), logits.data(), lg.bytes.size());
  ck.sections.push_back(std::move(lg));
  store_.save_async(std::move(ck));
}

std::optional<PrefixCache::Hit> SessionCheckpoints::restore(const std::vector<int32_t>& prompt) {
  std::optional<Checkpoint> ck;
  try {
    ck = store_.restore_longest(fingerprint_, prompt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds4: checkpoint restore failed: %s\n", e.what());
    return std::nullopt;
  }
  for (const auto& p : store_.take_problems()) std::fprintf(stderr, "ds4: checkpoint: %s\n", p.c_str());
  if (!ck || ck->tokens.empty() || ck->tokens.size() > prompt.size()) return std::nullopt;
  PrefixCache::Hit hit;
  std::vector<StateSection> sections;
  for (auto& s : ck->sections) {
    if (s.name == kLogits) {
      hit.logits.resize(s.bytes.size() / sizeof(float));
      std::memcpy(hit.logits.data(), s.bytes.data(), hit.logits.size() * sizeof(float));
    } else if (s.name.rfind(kStatePrefix, 0) == 0) {
      sections.push_back(StateSection{s.name.substr(kStatePrefix.size()), std::move(s.bytes)});
    } else {
      std::fprintf(stderr, "ds4: checkpoint refused: unknown section '%s'\n", s.name.c_str());
      return std::nullopt;
    }
  }
  if (hit.logits.size() != size_t(model_.info().vocab_size)) return std::nullopt;
  hit.state = model_.new_state();
  try {
    hit.state->load(sections);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds4: checkpoint refused: %s\n", e.what());
    return std::nullopt;
  }
  hit.tokens = std::move(ck->tokens);
  hit.append.assign(prompt.begin() + long(hit.tokens.size()), prompt.end());
  return hit;
}

}  // namespace ds4::engine
