#pragma once
// Generated weight bytes for speed work on full-size shapes without real checkpoints (issue
// #10's synthetic models): any dtype, deterministic per seed, and always decodable: block
// scales are set to small finite values, so no NaN/Inf enters a forward pass.
#include <cstdint>

#include "core/dtype.h"

namespace ds4 {

// Fills `rows` rows of `cols` elements of type `t` (row_bytes(t, cols) each) at `out`.
// Float types get uniform values in [center - spread, center + spread]; block types get
// random quants with scale fields fixed to a small value; I32 gets values in [0, int_bound).
struct SyntheticFill {
  float center = 0.0f, spread = 0.05f;
  int64_t int_bound = 1;
};
void fill_synthetic(DType t, int64_t rows, int64_t cols, uint64_t seed, const SyntheticFill& how, uint8_t* out);

// A seed from a tensor name (FNV-1a), so every tensor of a file gets its own stream.
uint64_t seed_from_name(const char* name, uint64_t base);

}  // namespace ds4
