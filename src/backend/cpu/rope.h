#pragma once
// Rotary position embedding on the first `rot_dim` features of each head (partial rotary:
// the rest pass through). Two pairings:
//   kHalf        - pairs (i, i + rot_dim/2): HF rotate_half / NeoX (Qwen, GLM)
//   kInterleaved - pairs (2i, 2i + 1): GPT-J / ggml "normal" mode
#include <cstdint>
#include <vector>

namespace ds4::cpu {

enum class RopeStyle { kHalf, kInterleaved };

// inv_freq[i] = theta^(-2i / rot_dim), i < rot_dim / 2 (HF default rope, computed in f32
// exactly like HF: arange(0, rot_dim, 2) / rot_dim as float, then pow).
std::vector<float> rope_inv_freq(int64_t rot_dim, double theta);

// x {heads, head_dim} at one position, in place. cos/sin of angle = pos * inv_freq[i]
// are computed in f32 (HF computes freqs in f32 and takes cos/sin of those), times `scale`
// (YaRN attention factor; 1 otherwise).
void rope_f32(float* x, int64_t heads, int64_t head_dim, int64_t rot_dim, int64_t pos,
              const float* inv_freq, RopeStyle style, float scale = 1.0f);

}  // namespace ds4::cpu
