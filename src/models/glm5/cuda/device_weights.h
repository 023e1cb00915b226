#pragma once
// Internal to the CUDA GLM 5.x model: the weights as device copies (backend/cuda
// weight_upload.h). Projections of one input are stacked (DProj) so each runs as one gemv;
// MLA's per-head absorption matrices are f32 {heads, rows, cols} read by a batched gemv.
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/cuda/hyper_connections.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/weight_upload.h"
#include "core/weight.h"
#include "models/glm5/config.h"
#include "models/glm5/cuda/step_layout.h"
#include "models/glm5/weights.h"

namespace ds4::glm5::cuda {

using ds4::cuda::DExperts;
using ds4::cuda::DProj;

// The mixes' fn {(2+hc)*hc, hc*hidden}: with splits > 1 (F32 / F16 / BF16, issue #23) stored
// as `splits` column blocks {m, hc*hidden / splits} split_stride bytes apart, fn describing
// one block, for backend/cuda hc_fused.cu (the product, the flat norm, Sinkhorn and the
// collapse in one launch, the hc_post before it folded in); else row-major for gemv +
// hc_pre_f32. Decode steps and the chunk's rows take the same kernel (bit for bit).
struct DHc {
  WeightMatrix fn;
  int64_t splits = 1;
  size_t split_stride = 0;
  const float *base = nullptr, *scale = nullptr;
  ds4::cuda::HcDims dims;
};
inline ds4::cuda::HcFn hc_fn(const DHc& h) {
  return ds4::cuda::HcFn{h.fn.data, h.fn.type, h.fn.rows, h.fn.cols, h.splits, h.split_stride};
}
struct DKda {
  DProj in;  // [q {qkv} | k {qkv} | v {qkv} | f_a {hd} | g_a {hd} | b {heads}]
  WeightMatrix f_b, g_b, o;
  const float *conv = nullptr, *dt_bias = nullptr, *a_log = nullptr, *o_norm = nullptr;
  // Bytes from f_b's data to g_b's when they can be one batched gemv's two entries (same type
  // and shape, no separate scales; uploaded one after the other), else 0.
  size_t fg_stride = 0;
};
struct DIndexer {
  WeightMatrix wq_b;
  const float *k_norm_w = nullptr, *k_norm_b = nullptr, *ape = nullptr;
};
struct DMla {
  DProj in;  // [q_a {q_lora} | kv_a {kv_lora} | indexer: wk {dim} | compress_gate {dim} | weights_proj {heads}]
  WeightMatrix q_b, o;
  WeightMatrix uk_t;  // head 0 of {heads, kv_lora, nope} f32: W_uk^T per head (absorbed query)
  WeightMatrix uv;    // head 0 of {heads, v, kv_lora} f32
  size_t uk_stride = 0, uv_stride = 0;  // bytes per head
  const float *q_a_norm = nullptr, *kv_a_norm = nullptr;
  bool has_indexer = false;
  DIndexer idx;
};
struct DMlp {
  DProj gate_up;  // [gate {inter} | up {inter}]
  WeightMatrix down;
};
struct DMoe {
  DProj in;  // [shared gate {S} | shared up {S} | router {E}]
  WeightMatrix sh_down;
  const float* bias = nullptr;  // e_score_correction_bias {E}
  DExperts gate_up, down;
};
struct DLayer {
  LayerKind kind = LayerKind::kLinear;
  bool sparse = false;
  DHc attn_hc, ffn_hc;
  const float *input_norm = nullptr, *post_norm = nullptr;
  std::optional<DKda> kda;
  std::optional<DMla> mla;
  DMlp mlp;
  DMoe moe;
};
// The integrated MTP head (weights.h MtpWeights; CPU: mtp.cpp): its own decoder layer runs
// through the trunk's layer code; the logits use the trunk's lm_head.
struct DMtp {
  WeightMatrix eh_proj;  // {hidden, 2*hidden} over [enorm(embed t) | hnorm(h)]
  const float *enorm = nullptr, *hnorm = nullptr, *shared_norm = nullptr;
  DLayer layer;
  // The trunk's embedding {vocab, hidden} on the device (the head's input rows, looked up by
  // device ids: backend/cuda/embed.h); data null when upload_weights was not asked for it.
  WeightMatrix embed;
};
struct DeviceWeights {
  ds4::cuda::DeviceBuffer buffer;
  std::vector<DLayer> layers;
  const float* norm = nullptr;
  WeightMatrix lm_head;
  size_t routed_bytes = 0;  // all routed experts' bytes (a token reads k / E of them)
  std::optional<DMtp> mtp;  // when the checkpoint has the MTP layer
  size_t mtp_bytes = 0;     // its bytes (a trunk token reads none of them)
};

// Uploads everything the decode step reads (not the embedding: its row is dequantized on
// the host per token). Admission first: throws ds4::Error naming the bytes when the weights
// do not fit in free device memory. fuse = false keeps every projection separate.
// fill (synthetic models): matrices are generated on the device, never read from `w`.
// mtp_embed: with the MTP layer, also the embedding (DMtp::embed; counted in mtp_bytes).
DeviceWeights upload_weights(const Config& c, const Weights& w, bool fuse, ds4::cuda::MatrixFill* fill = nullptr,
                             bool mtp_embed = false);
// Throws ds4::InputError when a layer's split fn does not fit hc_fused.cu after all (checked at load).
void check_hc_fused(const DeviceWeights& d);

}  // namespace ds4::glm5::cuda
