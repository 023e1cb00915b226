#pragma once
// Stop strings over streamed text: text that might be the start of a stop string is held
// back until it is known not to be, so a stop string never reaches the client even when it
// arrives split across tokens.
#include <string>
#include <string_view>
#include <vector>

namespace ds4::engine {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Appends `text`; returns what is safe to emit. After a match, matched() is true, the text
  // before the stop string has been returned and everything after is dropped.
  std::string feed(std::string_view text);
  // End of generation: releases whatever was held back.
  std::string flush();
  bool matched() const { return matched_ >= 0; }
  // Text is held back: what came since it was last empty may begin a stop string.
  bool holding() const { return !held_.empty(); }
  const std::string& matched_string() const { return stops_[matched_]; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  int matched_ = -1;
};

}  // namespace ds4::engine
