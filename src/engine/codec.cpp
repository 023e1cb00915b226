#include "engine/codec.h"

namespace ds4::engine {

tok::Continuation Codec::continuation(const std::vector<int32_t>& history,
                                      const tok::Conversation& conv) const {
  auto full = render(conv);
  size_t keep = 0;
  while (keep < history.size() && keep < full.size() && history[keep] == full[keep]) ++keep;
  tok::Continuation c;
  c.keep = keep;
  c.append.assign(full.begin() + keep, full.end());
  return c;
}

}  // namespace ds4::engine
