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

std::optional<std::vector<int32_t>> byte_continuation(const Codec& codec, const std::vector<int32_t>& cached,
                                                      const std::vector<int32_t>& full) {
  std::string have;
  for (int32_t id : cached) have += codec.token_bytes(id);
  size_t at = 0;
  for (size_t j = 0; j < full.size(); ++j) {
    if (at == have.size()) return std::vector<int32_t>(full.begin() + long(j), full.end());
    const std::string piece = codec.token_bytes(full[j]);
    if (at + piece.size() > have.size() || have.compare(at, piece.size(), piece) != 0) return std::nullopt;
    at += piece.size();
  }
  return std::nullopt;
}

}  // namespace ds4::engine
