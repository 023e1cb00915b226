#pragma once
// The engine's bridge to the on-disk checkpoint store: at a turn's end the session state
// is serialized (a memory copy on the engine thread, like the prefix cache's clone) and
// queued to the store's writer thread; a new request with no in-memory prefix asks the
// store for the longest stored prefix of its prompt and continues from it. The file read
// and its checksums run on a reader thread; only the state install runs on the engine's.
#include <chrono>
#include <cstdint>
#include <future>
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
  // Computes the model fingerprint (one short probe forward) once. `draft_state`: the
  // engine's states carry the draft head's state (speculation on); it is part of the key,
  // since a state without it cannot speculate and one with it costs the head's work.
  SessionCheckpoints(Model& model, const std::string& dir, uint64_t budget_bytes, bool draft_state = false);
  // Queues the state holding `tokens` (with its last-position logits). `alias`: the turn's
  // canonical re-render when it differs from `tokens` (engine turn_alias), a second key.
  // Never throws: a state that cannot be serialized is just not checkpointed.
  void save(const std::vector<int32_t>& tokens, const ModelState& state, const std::vector<float>& logits,
            const std::vector<int32_t>& alias = {});

  // A restore in flight, owned by the job that asked for it.
  struct Read {
    std::optional<Checkpoint> ckpt;
    double ms = 0;  // read + verify time on the reader thread
  };
  struct Pending {
    std::future<Read> read;
  };
  enum class Restore { kPending, kDone };
  // Non-blocking restore of the longest stored prefix of `prompt`. The first call starts the
  // read + verify on a reader thread (none when no stored key matches: kDone at once) and
  // keeps it in `pending`; calls return kPending until it is done, then kDone with `out` set
  // to the hit (state installed on the calling thread) or left empty. `wait`: how long a
  // call may block on the read (0 when other sessions must keep stepping).
  Restore restore(const std::vector<int32_t>& prompt, std::shared_ptr<Pending>& pending,
                  std::optional<PrefixCache::Hit>& out, std::chrono::microseconds wait);
  // Blocking form (tests, bench).
  std::optional<PrefixCache::Hit> restore(const std::vector<int32_t>& prompt);

  ~SessionCheckpoints();  // finishes queued saves and reports their faults
  void flush() { store_.flush(); }
  CheckpointStore& store() { return store_; }
  CheckpointStats stats() const { return store_.stats(); }

 private:
  std::optional<PrefixCache::Hit> install(Read read, const std::vector<int32_t>& prompt);
  void report_problems();

  Model& model_;
  std::string fingerprint_;
  CheckpointStore store_;
};

}  // namespace ds4::engine
