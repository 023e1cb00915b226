#include "engine/turn_boundary.h"

#include <algorithm>
#include <exception>

namespace ds4::engine {

size_t turn_boundary(const Codec& codec, const tok::Conversation& conv, const std::vector<int32_t>& prompt) {
  if (!conv.add_generation_prompt) return 0;
  tok::Conversation head = conv;
  head.add_generation_prompt = false;
  std::vector<int32_t> r;
  try {
    r = codec.render(head);
  } catch (const std::exception&) {
    return 0;
  }
  // A token prefix only: the state there must hold exactly what the next prompt starts with.
  if (r.empty() || r.size() >= prompt.size() || !std::equal(r.begin(), r.end(), prompt.begin())) return 0;
  return r.size();
}

}  // namespace ds4::engine
