#pragma once
// Kimi Delta Attention (KDA) layer of GLM 5.x: q/k/v through a short causal depthwise conv
// (carried state) + SiLU, per-channel forget gate, per-head write strength beta, a delta-rule
// recurrent matrix per head, gated RMSNorm on the output. HF Glm5NextTextLinearAttention.
#include <cstdint>
#include <span>

#include "models/glm5/config.h"
#include "models/glm5/state.h"
#include "models/glm5/weights.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::glm5 {

void kda_init_state(const Config& c, KdaState& st);

// x {n, hidden} (already input-normed) -> out {n, hidden}; advances `st` by n tokens.
void kda_forward(const KdaWeights& w, const Config& c, const float* x, int64_t n, KdaState& st, float* out,
                 ThreadPool* pool);

// Several sequences in one pass (batched decode): sequence i owns the next seqs[i].n rows of
// x and out and advances its own state. Projections run once over all rows (each weight
// read once); the conv and the delta rule run per sequence. Every row's result is the
// one kda_forward gives that sequence alone. A captured verify window takes one sequence.
struct KdaSeq {
  KdaState* st;
  int64_t n;
};
void kda_forward_seqs(const KdaWeights& w, const Config& c, const float* x, std::span<const KdaSeq> seqs, float* out,
                      ThreadPool* pool);

}  // namespace ds4::glm5
