#pragma once
// MLA attention of GLM 5.x DSA layers (HF Glm5NextTextAttention): q through a LoRA with
// RMSNorm, keys/values from one cached compressed latent per position (kv LoRA + RMSNorm),
// no RoPE. Computed in the absorbed form: the per-head key/value up-projections fold into
// the query and output, so attention runs over the latent cache directly.
#include <cstdint>
#include <span>

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

// Several sequences in one pass (batched decode): sequence i owns the next seqs[i].n rows
// of x and out, at its own positions pos0.., with its own cache and selection. The q / kv /
// indexer / output projections run once over all rows; the latent append, the indexer's key
// choice and the attention per sequence. Every row's result is the one mla_forward gives it
// alone.
struct MlaSeq {
  MlaState* st;
  Selection* sel;
  int64_t pos0;
  int64_t n;
};
void mla_forward_seqs(const MlaWeights& w, const Config& c, const float* x, std::span<const MlaSeq> seqs, float* out,
                      ThreadPool* pool);

}  // namespace ds4::glm5
