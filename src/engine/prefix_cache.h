#pragma once
// Model-state snapshots at turn ends, prompt ends and prefill chunk boundaries, keyed by the
// exact tokens they hold, bounded in bytes with LRU eviction. Recurrent state cannot be cut
// back, so a snapshot is only usable when all of its tokens are a prefix of the new prompt;
// the caller decides that (the template's continuation rule), the cache only picks the
// longest usable entry.
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "models/model.h"

namespace ds4::engine {

class PrefixCache {
 public:
  explicit PrefixCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  struct Hit {
    std::unique_ptr<ModelState> state;  // a clone; the entry stays cached
    std::vector<float> logits;          // last-position logits of the entry
    std::vector<int32_t> tokens;        // tokens the state holds
    std::vector<int32_t> append;        // what the caller must feed next
  };
  // usable(entry_tokens) -> tokens to append, or nullopt if the entry cannot be continued.
  using Usable = std::function<std::optional<std::vector<int32_t>>(const std::vector<int32_t>&)>;
  // use_alias: an entry whose own tokens are not usable may still be continued through its
  // alias (see insert); Hit::tokens are always the tokens the state really holds.
  std::optional<Hit> lookup(const Usable& usable, bool use_alias = false);
  // Takes ownership. Replaces an entry with identical tokens. `alias`: the canonical
  // re-render of the same turn (what a client sending the answer back produces) when it
  // differs from the generated tokens, e.g. edge whitespace the template strips. The state
  // stands for alias[0, alias_fed) (default: all of it); a hit through the alias feeds
  // alias[alias_fed...] first (a turn cut by max_tokens or a stop string lacks its end marker,
  // which the alias still carries so that it only matches a prompt that closes the turn).
  // Empty logits: the caller must feed at least one token after this state.
  void insert(std::vector<int32_t> tokens, std::unique_ptr<ModelState> state, std::vector<float> logits,
              std::vector<int32_t> alias = {}, size_t alias_fed = size_t(-1));

  size_t bytes() const;
  size_t entries() const;
  size_t max_bytes() const { return max_bytes_; }
  // Admission control (engine_admission.cpp): evicts least recently used entries until the
  // cache holds at most `bytes`; returns how many it evicted.
  size_t evict_to(size_t bytes);
  // Admission control's count: evicts least recently used entries until the entries' share of
  // memory is at most `bytes` and returns that share. An entry's share is its state's
  // ModelState::proportional_bytes (blocks it shares with live states or other entries count
  // in part) plus its logits and tokens; evicting an entry raises the others' shares of the
  // blocks it held, so the share is recounted after each eviction. (The cache's own bound,
  // max_bytes, counts every entry's whole bytes.)
  size_t fit_share(size_t bytes);
  size_t share_bytes() const;  // that share, evicting nothing
  // Lowers (or raises) the budget; evicts down to it.
  void set_max_bytes(size_t bytes);
  uint64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    std::vector<int32_t> tokens;
    std::vector<int32_t> alias;  // empty: none
    size_t alias_fed = 0;        // alias tokens the state holds the equivalent of
    std::unique_ptr<ModelState> state;
    std::vector<float> logits;
    size_t bytes = 0;  // the state's bytes + extra
    size_t extra = 0;  // logits and tokens
  };
  size_t share_locked() const;
  void evict_locked();
  size_t evict_to_locked(size_t bytes);
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // front = most recently used
  size_t max_bytes_;
  size_t bytes_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace ds4::engine
