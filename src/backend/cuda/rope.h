#pragma once
// Rotary position embedding on the GPU, partial rotary included.
#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::cuda {

// Which dimensions form a rotated pair (both conventions occur in the three families).
enum class RopeStyle : uint8_t {
  kNeox,         // (i, i + rot_dim/2): HF "rotate_half"
  kInterleaved,  // (2i, 2i + 1): GPT-J / complex-multiply form
};

struct RopeParams {
  int64_t tokens = 0;
  int64_t heads = 0;
  int64_t head_dim = 0;
  int64_t rot_dim = 0;               // leading dims of each head that rotate (even, <= head_dim)
  float theta = 10000.f;             // base: frequency i = theta^(-2i / rot_dim)
  const int32_t* positions = nullptr;  // device {tokens}
  RopeStyle style = RopeStyle::kNeox;
};

// x {tokens, heads, head_dim} rotated in place; dims >= rot_dim are left as they are.
// Throws ds4::InputError for an odd or too large rot_dim.
void rope_f32(float* x, const RopeParams& p, cudaStream_t stream);

}  // namespace ds4::cuda
