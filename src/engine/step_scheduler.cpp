#include "engine/step_scheduler.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ds4::engine {

StepScheduler::StepScheduler(int64_t step_tokens, int64_t chunk) : step_tokens_(step_tokens), chunk_(chunk) {
  if (chunk_ < 1) throw InputError("scheduler: prefill chunk must be >= 1, got " + std::to_string(chunk_));
}

std::vector<int64_t> StepScheduler::grant(int64_t decode_tokens, std::span<const int64_t> pending) {
  const size_t n = pending.size();
  std::vector<int64_t> out(n, 0);
  if (n == 0) return out;
  if (step_tokens_ <= 0) {  // no budget: a whole chunk for everyone
    for (size_t i = 0; i < n; ++i) out[i] = std::min(pending[i], chunk_);
    return out;
  }
  int64_t left = std::max(step_tokens_ - decode_tokens, std::max<int64_t>(1, step_tokens_ / 4));
  // Round-robin from the cursor: an equal share for every sequence that still has tokens
  // (the last ones get the remainder), each capped at a chunk and its own pending count.
  size_t start = cursor_ % n, last_granted = start;
  bool any = false;
  for (size_t k = 0; k < n && left > 0; ++k) {
    const size_t i = (start + k) % n;
    const int64_t share = std::max<int64_t>(1, left / int64_t(n - k));
    out[i] = std::min({pending[i], chunk_, share, left});
    left -= out[i];
    if (out[i] > 0) last_granted = i, any = true;
  }
  // Leftover budget (a short prompt took less than its share): hand it out in order.
  for (size_t k = 0; k < n && left > 0; ++k) {
    const size_t i = (start + k) % n;
    const int64_t more = std::min({pending[i] - out[i], chunk_ - out[i], left});
    if (more > 0) out[i] += more, left -= more, any = true;
  }
  // Next iteration starts after the last sequence served, so none is always last.
  cursor_ = any ? last_granted + 1 : cursor_;
  return out;
}

}  // namespace ds4::engine
