#pragma once
// Random weight bytes for the host decoder tests (test_gemv_decode, test_grouped_mma_frag): every
// byte random, then about half of the 16-bit fields made small and finite (the f16 / bf16 scales
// stay in range), and the index of a unit below `units` to decode from them. One place, so both
// tests draw the same sequence from their generators as before.
#include <cstdint>
#include <random>

inline int64_t random_unit_bytes(std::mt19937& rng, uint8_t (&buf)[4096], int units) {
  for (auto& b : buf) b = uint8_t(rng());
  for (int i = 0; i < 4096; i += 2)
    if (rng() % 2) buf[i + 1] &= 0x3b;
  return int64_t(rng() % uint32_t(units));
}
