#include "models/qwen_next/ple_hash.h"

#include <vector>

namespace ds4::qwen_next {
namespace {

constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;

uint64_t splitmix64(uint64_t v) {
  v += kGamma;
  v = (v ^ (v >> 30)) * 0xBF58476D1CE4E5B9ull;
  v = (v ^ (v >> 27)) * 0x94D049BB133111EBull;
  return v ^ (v >> 31);
}

bool is_prime(int64_t v) {
  if (v < 2) return false;
  if (v % 2 == 0) return v == 2;
  for (int64_t d = 3; d * d <= v; d += 2)
    if (v % d == 0) return false;
  return true;
}

}  // namespace

void ple_hash_constants(const Config& c, int64_t ple_index, PleWeights& w) {
  const uint64_t max_long = (uint64_t(1) << 63) - 1;
  const uint64_t half_bound = std::max<uint64_t>(1, (max_long / uint64_t(std::max<int64_t>(c.vocab, 1))) / 2);
  const uint64_t base_seed = uint64_t(c.seed) + 10007ull * uint64_t(ple_index);
  w.multipliers.clear();
  for (int64_t i = 0; i < c.ngram; ++i)
    w.multipliers.push_back(int64_t(2 * (splitmix64(base_seed + kGamma * uint64_t(i + 1)) % half_bound) + 1));
  // Head h of PLE layer p uses the (p * heads + h + 1)-th prime above base - 1.
  const int64_t heads = (c.ngram - 1) * c.heads_per_ngram;
  w.head_vocab.clear();
  w.head_offset.clear();
  int64_t prime = c.ngram_vocab_base - 1, total = 0;
  for (int64_t g = 0; g < (ple_index + 1) * heads; ++g) {
    do ++prime; while (!is_prime(prime));
    if (g >= ple_index * heads) {
      w.head_vocab.push_back(prime);
      w.head_offset.push_back(total);
      total += prime;
    }
  }
}

void ple_ngram_ids(const Config& c, const PleWeights& w, const int32_t* window, int64_t* ids) {
  const int64_t n = c.ngram, cur = n - 1;
  std::vector<int64_t> shifted(static_cast<size_t>(n));
  bool blocked = false;  // an EOS seen between the shifted token and the current one
  for (int64_t k = 0; k < n; ++k) {
    if (k > 0) blocked = blocked || window[cur - k] == c.eos;
    shifted[size_t(k)] = k == 0 ? window[cur] : (blocked ? c.eos : window[cur - k]);
  }
  int64_t out = 0;
  for (int64_t g = 2; g <= n; ++g) {
    // Products wrap like torch int64 (two's complement), so multiply as uint64.
    uint64_t mixed = uint64_t(shifted[0]) * uint64_t(w.multipliers[0]);
    for (int64_t k = 1; k < g; ++k) mixed ^= uint64_t(shifted[size_t(k)]) * uint64_t(w.multipliers[size_t(k)]);
    for (int64_t h = 0; h < c.heads_per_ngram; ++h, ++out) {
      const int64_t v = w.head_vocab[size_t(out)];
      int64_t r = int64_t(mixed) % v;  // torch.remainder: result takes the divisor's sign
      if (r < 0) r += v;
      ids[out] = r + w.head_offset[size_t(out)];
    }
  }
}

}  // namespace ds4::qwen_next
