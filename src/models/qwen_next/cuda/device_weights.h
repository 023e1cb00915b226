#pragma once
// Internal to the CUDA Qwen model: the weights as device copies. WeightMatrix views keep
// their host shapes with data (and MLX scales/biases) pointing into one device buffer;
// norm vectors hold (offset + w) so every kernel multiplies by the stored value.
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/cuda/memory.h"
#include "backend/cuda/weight_upload.h"
#include "core/weight.h"
#include "models/qwen_next/config.h"
#include "models/qwen_next/weights.h"

namespace ds4::qwen_next::cuda {

using ds4::cuda::DProj;  // backend/cuda/weight_upload.h
struct DHyper {
  const float* norm = nullptr;  // {hc*d}
  DProj down_inject;            // [down {rank} | inject {hc}] (inject absent for mixers)
  WeightMatrix up;
};
struct DGdn {
  DProj in;  // [qkv {conv_dim} | z {v_dim*vh} | b {vh} | a {vh}]
  WeightMatrix out;
  const float *conv = nullptr, *a_log = nullptr, *dt_bias = nullptr, *norm = nullptr;
};
struct DQsa {
  DProj in;  // [q {heads*2*hd} | k {kv*hd} | v {kv*hd} | idx_qk {(idx_heads+1)*idx_dim}]
  WeightMatrix o;
  const float *q_norm = nullptr, *k_norm = nullptr, *idx_q_norm = nullptr, *idx_k_norm = nullptr;
};
using ds4::cuda::DExperts;
struct DMoe {
  DProj in;  // [sh_gate {S} | sh_up {S} | router {E} | sh_gate_scalar {1}]
  WeightMatrix sh_down;
  DExperts gate_up, down;
};
struct DPle {
  DProj in;  // [key {hc*d} | value {d}]
  const float *norm_key = nullptr, *norm_query = nullptr, *norm_conv = nullptr, *conv = nullptr;
  int64_t index = -1;  // among PLE layers: which slice of the step's gathered rows
};
struct DLayer {
  DHyper attn_hc, mlp_hc;
  std::optional<DGdn> gdn;
  std::optional<DQsa> qsa;
  std::optional<DPle> ple;
  DMoe moe;
};
// MTPLX Qwen4ExpMTP (CPU: weights.h MtpWeights, forward.cpp mtp_prepare / mtp_draft).
struct DMtp {
  const float *norm_emb = nullptr, *norm_hidden = nullptr;  // {d}, {hc*d} full width (1 + w)
  WeightMatrix fc_emb, fc_hidden;                           // {d, d}
  DLayer layer;                                             // one QSA decoder layer, no PLE
  DHyper mixer;
};
struct DeviceWeights {
  ds4::cuda::DeviceBuffer buffer;
  std::vector<DLayer> layers;
  DHyper mixer;
  WeightMatrix lm_head;
  const float* inv_freq = nullptr;  // {rot_dim / 2}
  // The draft head, with a device copy of the embedding (its steps embed tokens chosen on the
  // GPU); absent without mtp.* tensors, for synthetic models, or when the embedding's type has
  // no device row decode (backend/cuda/embed.h).
  std::optional<DMtp> mtp;
  WeightMatrix embed;       // {vocab, d}; only with mtp
  size_t trunk_bytes = 0;   // bytes of everything the trunk's decode step reads (not the head)
};

// Uploads everything the decode step reads (not the embedding or the PLE tables: those
// are gathered on the host per token) and, with `with_mtp` and w.mtp, the draft head and
// the embedding it needs. Admission first: throws ds4::Error naming the bytes
// when the weights do not fit in free device memory.
// fuse = false keeps every projection separate (the unfused reference in the tests).
// fill (synthetic models): matrices are generated on the device, never read from `w`.
DeviceWeights upload_weights(const Config& c, const Weights& w, const std::vector<float>& inv_freq, bool fuse,
                             ds4::cuda::MatrixFill* fill = nullptr, bool with_mtp = false);

}  // namespace ds4::qwen_next::cuda
