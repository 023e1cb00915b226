#include "engine/stop_matcher.h"

#include <algorithm>

namespace ds4::engine {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::feed(std::string_view text) {
  if (matched()) return {};
  held_.append(text);
  // Earliest full match wins (what a client scanning the whole text would see first).
  size_t best = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    size_t at = held_.find(stops_[i]);
    if (at != std::string::npos && (best == std::string::npos || at < best)) best = at, matched_ = int(i);
  }
  if (best != std::string::npos) {
    std::string out = held_.substr(0, best);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_)
    for (size_t n = std::min(s.size() - 1, held_.size()); n > hold; --n)
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  std::string out = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  if (!matched()) out.swap(held_);
  held_.clear();
  return out;
}

}  // namespace ds4::engine
