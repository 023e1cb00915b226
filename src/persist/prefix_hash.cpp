#include "persist/prefix_hash.h"

namespace ds4 {
namespace {
constexpr uint64_t kSeed = 0x6473345f63686b70ull;  // "ds4_chkp"
// splitmix64 finalizer: full avalanche, so neighbouring prefixes give unrelated keys.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t prefix_hash_step(uint64_t h, int32_t token) {
  return mix64(h ^ (uint64_t(uint32_t(token)) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2)));
}

std::vector<uint64_t> prefix_hash_chain(std::span<const int32_t> tokens) {
  std::vector<uint64_t> out;
  out.reserve(tokens.size() + 1);
  uint64_t h = kSeed;
  out.push_back(h);
  for (int32_t t : tokens) out.push_back(h = prefix_hash_step(h, t));
  return out;
}

uint64_t prefix_hash(std::span<const int32_t> tokens) { return prefix_hash_chain(tokens).back(); }
}  // namespace ds4
