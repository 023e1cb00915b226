#pragma once
// One GLM 5.x decoder layer (HF Glm5NextTextDecoderLayer) over n tokens of HC streams:
// attention half (KDA or MLA/DSA) and feed-forward half (dense MLP or MoE), each wrapped in
// its hyper-connection pre/post. Shared by the trunk and the MTP head's own layer.
#include <cstdint>
#include <span>
#include <vector>

#include "models/glm5/config.h"
#include "models/glm5/indexer.h"
#include "models/glm5/state.h"
#include "models/glm5/weights.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::glm5 {

// x {n, hc, hidden} -> x (tmp: scratch of the same size). `kda` is used by KDA layers,
// `mla` by DSA layers (the other may be null); pos: position of the first token in that
// layer's own history. Full-indexer layers fill `sel`, shared ones read it.
void decoder_layer(const LayerWeights& L, const Config& c, KdaState* kda, MlaState* mla, int64_t pos, int64_t n,
                   std::vector<float>& x, std::vector<float>& tmp, Selection& sel, ThreadPool* pool);

// The same layer over several sequences' rows at once (batched decode): x holds sequence
// i's seqs[i].n rows after those of sequences 0..i-1. Everything but the attention mixer is
// row-wise and runs once over all rows; the mixer keeps each sequence's own state.
struct LayerSeq {
  KdaState* kda;
  MlaState* mla;
  Selection* sel;
  int64_t pos;
  int64_t n;
};
void decoder_layer_seqs(const LayerWeights& L, const Config& c, std::span<const LayerSeq> seqs, std::vector<float>& x,
                        std::vector<float>& tmp, ThreadPool* pool);

// Final collapse of the trunk/head streams: unweighted HC mean {n, hidden} (HF
// Glm5NextTextHyperHead), optionally followed by RMSNorm with `norm` (null: no norm).
void hc_mean(const Config& c, const float* x, int64_t n, const float* norm, float* out);

}  // namespace ds4::glm5
