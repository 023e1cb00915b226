#include "engine/prefix_cache.h"

#include <algorithm>

namespace ds4::engine {

std::optional<PrefixCache::Hit> PrefixCache::lookup(const Usable& usable, bool use_alias) {
  std::lock_guard lk(mu_);
  auto best = lru_.end();
  std::vector<int32_t> best_append;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    if (best != lru_.end() && it->tokens.size() <= best->tokens.size()) continue;
    auto app = usable(it->tokens);
    if (!app && use_alias && !it->alias.empty()) {
      app = usable(it->alias);
      // The state stands for alias[0, alias_fed): the rest of the alias is still to feed.
      if (app) app->insert(app->begin(), it->alias.begin() + long(it->alias_fed), it->alias.end());
    }
    // A snapshot without logits (a prefill chunk end) needs at least one token fed after it.
    if (app && app->empty() && it->logits.empty()) app.reset();
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
                         std::vector<float> logits, std::vector<int32_t> alias, size_t alias_fed) {
  Entry e;
  e.alias_fed = std::min(alias_fed, alias.size());
  e.extra = logits.size() * sizeof(float) + (tokens.size() + alias.size()) * sizeof(int32_t);
  e.bytes = state->bytes() + e.extra;
  if (e.bytes > max_bytes_) return;  // would evict everything and still not fit
  e.tokens = std::move(tokens);
  e.alias = std::move(alias);
  e.state = std::move(state);
  e.logits = std::move(logits);
  std::lock_guard lk(mu_);
  for (auto it = lru_.begin(); it != lru_.end(); ++it)
    if (it->tokens == e.tokens) {
      if (e.logits.empty() && !it->logits.empty()) {  // same state, and the old one has logits
        lru_.splice(lru_.begin(), lru_, it);
        return;
      }
      bytes_ -= it->bytes;
      lru_.erase(it);
      break;
    }
  bytes_ += e.bytes;
  lru_.push_front(std::move(e));
  evict_locked();
}

void PrefixCache::evict_locked() { evict_to_locked(max_bytes_); }

size_t PrefixCache::evict_to_locked(size_t bytes) {
  size_t n = 0;
  while (bytes_ > bytes && !lru_.empty()) {
    bytes_ -= lru_.back().bytes;
    lru_.pop_back();
    evictions_++;
    n++;
  }
  return n;
}

size_t PrefixCache::evict_to(size_t bytes) {
  std::lock_guard lk(mu_);
  return evict_to_locked(bytes);
}

size_t PrefixCache::share_locked() const {
  size_t b = 0;
  for (const Entry& e : lru_) b += e.state->proportional_bytes() + e.extra;
  return b;
}

size_t PrefixCache::share_bytes() const {
  std::lock_guard lk(mu_);
  return share_locked();
}

size_t PrefixCache::fit_share(size_t bytes) {
  std::lock_guard lk(mu_);
  size_t share = share_locked();
  while (share > bytes && !lru_.empty()) {
    bytes_ -= lru_.back().bytes;
    lru_.pop_back();
    evictions_++;
    share = share_locked();
  }
  return share;
}

void PrefixCache::set_max_bytes(size_t bytes) {
  std::lock_guard lk(mu_);
  max_bytes_ = bytes;
  evict_locked();
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
