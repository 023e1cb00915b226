#pragma once
// Weight binding: HF tensor names -> views (WeightMatrix, zero-copy) and small f32 vectors
// (norm weights, conv kernels, GDN decay parameters: copied once, they are tiny).
// Norm convention: every Qwen4ExpTextRMSNorm is stored zero-centered and applied as
// (1 + w); the GDN gated norm is one-centered (applied as w).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/weight.h"
#include "formats/tensor_source.h"
#include "models/model.h"
#include "models/qwen_next/config.h"
#include "models/qwen_next/ple_table.h"

namespace ds4::qwen_next {

using Vec = std::vector<float>;

struct HyperWeights {            // GatedResidual
  Vec norm;                      // {hc*d} zero-centered, grouped per d
  WeightMatrix down, up;         // {rank, hc*d}, {hc*d, rank}
  WeightMatrix inject;           // {hc, hc*d}; rows == 0 for the final mixer
};

struct GdnWeights {
  WeightMatrix qkv, z, b, a, out;  // {conv_dim,d} {vdim,d} {vh,d} {vh,d} {d,vdim}
  Vec conv;                        // {conv_dim, K}
  Vec a_log, dt_bias;              // {vh}
  Vec norm;                        // {v_dim} one-centered
};

struct QsaWeights {
  WeightMatrix q, k, v, o;         // q: {heads*2*hd, d} = per head [query | gate]
  Vec q_norm, k_norm;              // {hd}
  WeightMatrix idx_qk;             // {(idx_heads+1)*idx_dim, d}
  Vec idx_q_norm, idx_k_norm;      // {idx_dim}
};

struct MoeWeights {
  WeightMatrix router;             // {E, d}
  std::vector<WeightMatrix> gate_up, down;  // per expert {2I, d}, {d, I}
  WeightMatrix sh_gate, sh_up, sh_down, sh_gate_scalar;  // shared expert + {1, d} gate
};

struct PleWeights {
  std::shared_ptr<PleTable> table;  // {rows, ple_dim / ngram_heads}: memory or SSD sidecar
  WeightMatrix key, value;         // {hc*d, ple_dim}, {d, ple_dim}
  Vec norm_key, norm_query, norm_conv;  // {hc*d} zero-centered, grouped per d
  Vec conv;                        // {hc*d, K}
  // Hash constants derived from the config (HF recomputes them; not in checkpoints).
  std::vector<int64_t> multipliers;     // {ngram}
  std::vector<int64_t> head_vocab, head_offset;  // {ngram_heads}
};

struct LayerWeights {
  HyperWeights attn_hc, mlp_hc;
  std::unique_ptr<GdnWeights> gdn;
  std::unique_ptr<QsaWeights> qsa;
  std::unique_ptr<PleWeights> ple;
  MoeWeights moe;
};

struct MtpWeights {                // MTPLX Qwen4ExpMTP (see tools/reference/qwen_next/mtp_ref.py)
  Vec norm_emb, norm_hidden;       // {d}, {hc*d} zero-centered; norm_hidden is full width
  WeightMatrix fc_emb, fc_hidden;  // {d, d}
  LayerWeights layer;              // one QSA decoder layer
  HyperWeights mixer;
};

struct Weights {
  WeightMatrix embed, lm_head;     // {vocab, d}
  std::vector<LayerWeights> layers;
  HyperWeights mixer;              // final hyper_connection_mixer (no inject)
  std::unique_ptr<MtpWeights> mtp;  // absent when the checkpoint has no mtp.* tensors
};

// PLE tables come from "<model dir>/ngram-table.safetensors" when that sidecar exists
// (read on demand, LRU of opt.ple_cache_bytes, opt.ple_readers readers), else from `src`.
Weights bind_weights(const TensorSource& src, const Config& c, const LoadOptions& opt = {});

}  // namespace ds4::qwen_next
