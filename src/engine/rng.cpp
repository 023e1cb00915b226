// Constants and step orders follow NumPy's bit_generator.pyx (SeedSequence: hashmix, mix,
// mix_entropy, generate_state) and pcg64.h (pcg64_set_seed, XSL-RR output), and ds4.c's
// sample_rng_next/sample_rng_f32. Verified draw for draw by tests/unit/engine/test_rng.cpp
// against tests/data/sampler/pcg64_vectors.json (made by real NumPy).
#include "engine/rng.h"

#include <random>

namespace ds4::engine {

uint64_t fresh_seed() {
  std::random_device rd;
  return ((uint64_t(rd()) << 32) | rd()) & ((uint64_t(1) << 53) - 1);
}
namespace {
constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875;
constexpr uint32_t kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
constexpr uint32_t kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
constexpr int kXShift = 16;

uint32_t hashmix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  return r ^ (r >> kXShift);
}

constexpr unsigned __int128 kPcgMult =
    (static_cast<unsigned __int128>(0x2360ED051FC65DA4ULL) << 64) | 0x4385DF649FCCF645ULL;
}  // namespace

std::vector<uint32_t> seed_words(uint64_t lo, uint64_t hi) {
  std::vector<uint32_t> w = {uint32_t(lo), uint32_t(lo >> 32), uint32_t(hi), uint32_t(hi >> 32)};
  while (w.size() > 1 && w.back() == 0) w.pop_back();
  return w;
}

SeedSequence::SeedSequence(const std::vector<uint32_t>& entropy) {
  uint32_t hash_const = kInitA;
  const size_t n = pool_.size();
  for (size_t i = 0; i < n; ++i) pool_[i] = hashmix(i < entropy.size() ? entropy[i] : 0, hash_const);
  for (size_t src = 0; src < n; ++src)
    for (size_t dst = 0; dst < n; ++dst)
      if (src != dst) pool_[dst] = mix(pool_[dst], hashmix(pool_[src], hash_const));
  for (size_t src = n; src < entropy.size(); ++src)
    for (size_t dst = 0; dst < n; ++dst) pool_[dst] = mix(pool_[dst], hashmix(entropy[src], hash_const));
}

std::vector<uint32_t> SeedSequence::generate_state_u32(size_t n_words) const {
  std::vector<uint32_t> out(n_words);
  uint32_t hash_const = kInitB;
  for (size_t i = 0; i < n_words; ++i) {
    uint32_t v = pool_[i % pool_.size()];
    v ^= hash_const;
    hash_const *= kMultB;
    v *= hash_const;
    v ^= v >> kXShift;
    out[i] = v;
  }
  return out;
}

std::vector<uint64_t> SeedSequence::generate_state_u64(size_t n_words) const {
  auto w = generate_state_u32(2 * n_words);
  std::vector<uint64_t> out(n_words);
  for (size_t i = 0; i < n_words; ++i) out[i] = uint64_t(w[2 * i]) | (uint64_t(w[2 * i + 1]) << 32);
  return out;
}

Pcg64::Pcg64(const SeedSequence& seq) {
  // pcg64_set_seed: seed = (v0 << 64) | v1, inc = (v2 << 64) | v3; then pcg srandom.
  auto v = seq.generate_state_u64(4);
  unsigned __int128 seed = (static_cast<unsigned __int128>(v[0]) << 64) | v[1];
  unsigned __int128 seq_id = (static_cast<unsigned __int128>(v[2]) << 64) | v[3];
  state_ = 0;
  inc_ = (seq_id << 1) | 1;
  state_ = state_ * kPcgMult + inc_;
  state_ += seed;
  state_ = state_ * kPcgMult + inc_;
}

uint64_t Pcg64::next_u64() {
  state_ = state_ * kPcgMult + inc_;
  uint64_t x = uint64_t(state_ >> 64) ^ uint64_t(state_);
  unsigned rot = unsigned(state_ >> 122);
  return (x >> rot) | (x << ((64 - rot) & 63));
}

uint64_t Ds4Rng::next_u64() {
  uint64_t x = state_;
  if (x == 0) x = 0x9e3779b97f4a7c15ULL;  // ds4: a zero state would stay zero forever
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  state_ = x;
  return x * 0x2545f4914f6cdd1dULL;
}

float Ds4Rng::next_f32() {
  return float((next_u64() >> 40) & 0xffffffu) / 16777216.0f;
}

}  // namespace ds4::engine
