#pragma once
// The two random generators of the golden-master samplers, reproduced bit for bit.
//   Pcg64: NumPy's `default_rng(seed)` = SeedSequence(seed) -> PCG64 (XSL-RR 128/64), with
//          Generator.random() doubles. MTPLX (Qwen) draws from it.
//   Ds4Rng: antirez/ds4 ds4.c sample_rng_next()/sample_rng_f32(): xorshift64* whose state 0
//          is replaced by a fixed constant (so seed 0 is a valid, deterministic seed).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace ds4::engine {

// A fresh seed for a turn that names none (issue #25: "regenerate" must give a new draw).
// Below 2^53 so it survives a round trip through JavaScript numbers back into `seed`.
uint64_t fresh_seed();

// Arbitrary-size non-negative seeds as NumPy accepts them (Python ints), little-endian
// 32-bit words; {0} for zero.
std::vector<uint32_t> seed_words(uint64_t lo, uint64_t hi = 0);

// numpy.random.SeedSequence without spawn keys (pool size 4).
class SeedSequence {
 public:
  explicit SeedSequence(const std::vector<uint32_t>& entropy);
  std::vector<uint32_t> generate_state_u32(size_t n_words) const;
  std::vector<uint64_t> generate_state_u64(size_t n_words) const;  // pairs of u32, LE

 private:
  std::array<uint32_t, 4> pool_{};
};

class Pcg64 {
 public:
  explicit Pcg64(const SeedSequence& seq);
  explicit Pcg64(uint64_t seed) : Pcg64(SeedSequence(seed_words(seed))) {}
  uint64_t next_u64();
  // Generator.random(): 53 high bits / 2^53.
  double next_double() { return double(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  unsigned __int128 state_ = 0, inc_ = 0;
};

class Ds4Rng {
 public:
  explicit Ds4Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64();
  float next_f32();  // 24 bits / 2^24
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

}  // namespace ds4::engine
