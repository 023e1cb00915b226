#include "engine/prefix_cache.h"

namespace ds4::engine {

std::optional<PrefixCache::Hit> PrefixCache::lookup(const Usable& usable, bool use_alias) {
  std::lock_guard lk(mu_);
  auto best = lru_.end();
  std::vector<int32_t> best_append;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    if (best != lru_.end() && it->tokens.size() <= best->tokens.size()) continue;
    auto app = usable(it->tokens);
    if (!app && use_alias && !it->alias.empty()) app = usable(it->alias);
    if (app) best = it, best_append = std::move(*app);
  }
  if (best == lru_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, best);
  Hit h;
  h.state = best->state->clone();
  h.logits = best->logits;
  h.tokens = best->tokens;
  h.append = std::move(best_append);
  return h;
}

void PrefixCache::insert(std::vector<int32_t> tokens, std::unique_ptr<ModelState> state,
                         std::vector<float> logits, std::vector<int32_t> alias) {
  Entry e;
  e.bytes = state->bytes() + logits.size() * sizeof(float) + (tokens.size() + alias.size()) * sizeof(int32_t);
  if (e.bytes > max_bytes_) return;  // would evict everything and still not fit
  e.tokens = std::move(tokens);
  e.alias = std::move(alias);
  e.state = std::move(state);
  e.logits = std::move(logits);
  std::lock_guard lk(mu_);
  for (auto it = lru_.begin(); it != lru_.end(); ++it)
    if (it->tokens == e.tokens) {
      bytes_ -= it->bytes;
      lru_.erase(it);
      break;
    }
  bytes_ += e.bytes;
  lru_.push_front(std::move(e));
  evict_locked();
}

void PrefixCache::evict_locked() {
  while (bytes_ > max_bytes_ && !lru_.empty()) {
    bytes_ -= lru_.back().bytes;
    lru_.pop_back();
    evictions_++;
  }
}

size_t PrefixCache::bytes() const {
  std::lock_guard lk(mu_);
  return bytes_;
}

size_t PrefixCache::entries() const {
  std::lock_guard lk(mu_);
  return lru_.size();
}

}  // namespace ds4::engine
