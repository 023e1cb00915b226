#pragma once
// Hash chain over a token prefix: h[0] = seed, h[i+1] = mix(h[i], token[i]). A checkpoint is
// keyed by the hash of the prefix it holds, so finding the longest cached prefix of a new
// prompt is one table lookup per position. Collisions are ruled out afterwards by comparing
// the stored tokens.
#include <cstdint>
#include <span>
#include <vector>

namespace ds4 {
uint64_t prefix_hash_step(uint64_t h, int32_t token);
// hashes[i] = hash of tokens[0, i) for i in [0, n]; n + 1 values.
std::vector<uint64_t> prefix_hash_chain(std::span<const int32_t> tokens);
uint64_t prefix_hash(std::span<const int32_t> tokens);
}  // namespace ds4
