#pragma once
// GLM 5.x feed-forward: a dense clamped-SwiGLU MLP (first layers, and the shared expert) and
// the routed MoE (sigmoid scores + correction bias for choosing, group-limited top-k,
// normalized un-biased scores times routed_scaling_factor as weights).
#include <cstdint>

#include "models/glm5/config.h"
#include "models/glm5/weights.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::glm5 {

// x {n, hidden} -> out {n, hidden}.
void mlp_forward(const MlpWeights& w, float limit, const float* x, int64_t n, float* out, ThreadPool* pool);
void moe_forward(const MoeWeights& w, const Config& c, const float* x, int64_t n, float* out, ThreadPool* pool);

// Routing for one token: experts {k} and weights {k} from router logits {n_routed_experts}.
void route_token(const Config& c, const float* logits, const float* bias, int32_t* experts, float* weights);

}  // namespace ds4::glm5
