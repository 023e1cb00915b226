#pragma once
// MLA attention of GLM 5.x DSA layers (HF Glm5NextTextAttention): q through a LoRA with
// RMSNorm, keys/values from one cached compressed latent per position (kv LoRA + RMSNorm),
// no RoPE. Computed in the absorbed form: the per-head key/value up-projections fold into
// the query and output, so attention runs over the latent cache directly.
#include <cstdint>

#include "models/glm5/config.h"
#include "models/glm5/indexer.h"
#include "models/glm5/state.h"
#include "models/glm5/weights.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::glm5 {

// x {n, hidden} (input-normed) at positions pos0.. -> out {n, hidden}. Full-indexer layers
// fill `sel`; shared layers read the `sel` left by the previous full layer.
void mla_forward(const MlaWeights& w, const Config& c, const float* x, int64_t n, int64_t pos0, MlaState& st,
                 Selection& sel, float* out, ThreadPool* pool);

}  // namespace ds4::glm5
