#pragma once
// The engine's bridge to the on-disk checkpoint store: at a turn's end the session state
// is serialized (a memory copy on the engine thread, like the prefix cache's clone) and
// queued to the store's writer thread; a new request with no in-memory prefix asks the
// store for the longest stored prefix of its prompt and continues from it.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/prefix_cache.h"
#include "models/model.h"
#include "persist/checkpoint_store.h"

namespace ds4::engine {

class SessionCheckpoints {
 public:
  // Computes the model fingerprint (one short probe forward) once.
  SessionCheckpoints(Model& model, const std::string& dir, uint64_t budget_bytes);
  // Queues the state holding `tokens` (with its last-position logits). Never throws: a
  // state that cannot be serialized is just not checkpointed.
  void save(const std::vector<int32_t>& tokens, const ModelState& state, const std::vector<float>& logits);
  // The longest stored exact token prefix of `prompt`, loaded into a fresh state.
  std::optional<PrefixCache::Hit> restore(const std::vector<int32_t>& prompt);
  ~SessionCheckpoints();  // finishes queued saves and reports their faults
  void flush() { store_.flush(); }
  CheckpointStore& store() { return store_; }

 private:
  Model& model_;
  std::string fingerprint_;
  CheckpointStore store_;
};

}  // namespace ds4::engine
