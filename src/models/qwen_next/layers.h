#pragma once
// The blocks of one decoder layer, each over n rows at once (prefill chunk, verify window
// or a single decode token). Row-major buffers; shapes in the comments.
#include <cstdint>
#include <span>

#include "models/qwen_next/config.h"
#include "models/qwen_next/state.h"
#include "models/qwen_next/weights.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::qwen_next {

struct Ctx {
  const Config& c;
  ThreadPool* pool;
  const std::vector<float>& inv_freq;  // rope {rot_dim / 2}
};

// GatedResidual read: h {n, hc*d} -> mixed {n, d}, inject {n, hc} (inject may be null
// for the final mixer, which has no block_inject_weight).
void hyper_read(const Ctx& x, const HyperWeights& w, const float* h, int64_t n, float* mixed, float* inject);
// GatedResidual write: h[s] += out * inject[s] for every stream s.
void hyper_write(const Ctx& x, float* h, const float* out, const float* inject, int64_t n);

// Gated DeltaNet: in {n, d} -> out {n, d}; advances the conv and recurrent state.
void gdn_forward(const Ctx& x, const GdnWeights& w, LayerState& s, const float* in, int64_t n, float* out);

// QSA attention at positions pos0..pos0+n-1: in {n, d} -> out {n, d}; appends to the KV
// and indexer caches.
void qsa_forward(const Ctx& x, const QsaWeights& w, LayerState& s, int64_t pos0, const float* in, int64_t n,
                 float* out);

// MoE with sigmoid-gated shared expert: in {n, d} -> out {n, d}.
void moe_forward(const Ctx& x, const MoeWeights& w, const float* in, int64_t n, float* out);

// PLE: h {n, hc*d} += ple(h, tokens); advances the token context and conv history.
void ple_forward(const Ctx& x, const PleWeights& w, LayerState& s, const int32_t* tokens, float* h, int64_t n);

// Several sequences in one pass (batched decode): sequence i owns the next seqs[i].n rows of
// the buffers, its own layer state, positions pos0.. and token ids (PLE). The projections
// run once over all rows (each weight read once); conv windows, recurrent states, caches and
// attention stay per sequence. Every row's result is the one the single-sequence call
// gives it (which is these with one sequence). A captured verify window takes one sequence.
struct SeqRows {
  LayerState* s;
  int64_t pos0;
  int64_t n;
  const int32_t* tokens;  // PLE layers only
};
void gdn_forward_seqs(const Ctx& x, const GdnWeights& w, std::span<const SeqRows> seqs, const float* in, float* out);
void qsa_forward_seqs(const Ctx& x, const QsaWeights& w, std::span<const SeqRows> seqs, const float* in, float* out);
void ple_forward_seqs(const Ctx& x, const PleWeights& w, std::span<const SeqRows> seqs, float* h);
int64_t total_rows(std::span<const SeqRows> seqs);

// Fresh per-layer state for layer l (or the MTP layer with l = -1).
LayerState new_layer_state(const Config& c, int64_t l);

}  // namespace ds4::qwen_next
