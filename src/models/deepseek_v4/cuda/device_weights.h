#pragma once
// Internal to the CUDA DeepSeek V4 model: the weights the decode step reads, as device
// copies in one buffer. WeightMatrix views keep their host shapes and types with data
// pointing into that buffer; small vectors (norms, biases, sinks, HC base/scale, compressor
// position bias, hash table) are f32 / i32 device arrays.
#include <cstdint>
#include <vector>

#include "backend/cuda/hyper_connections.h"
#include "backend/cuda/memory.h"
#include "core/weight.h"
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/weights.h"

namespace ds4::deepseek_v4::cuda {

// Projections of one input with outputs back to back: consecutive parts of the same type
// and width are stacked into one matrix (rows concatenated in device memory) and read by one
// gemv; gemv rows do not depend on their neighbours, so stacked and separate give identical
// bits. `runs` in output order; rows = total output rows.
struct DProj {
  std::vector<WeightMatrix> runs;
  int64_t rows = 0;
};
// fn {mix, n_hc * hidden} is long and short (24 x 16384 in Flash): its gemv alone would keep a
// handful of SMs busy. It is stored as `splits` column blocks {mix, cols / splits} back to
// back (split_stride bytes apart) and read by one batched gemv into {splits, mix} partials,
// which hc_pre_f32 / hc_head_f32 sum (HcDims::mix_splits).
struct DHc {
  WeightMatrix fn;  // one column block: {mix, n_hc * hidden / splits}
  int64_t splits = 1;
  size_t split_stride = 0;
  const float *base = nullptr, *scale = nullptr;
};
inline constexpr int64_t kMaxHcSplits = ds4::cuda::kHcMaxSplits;  // DHc::splits at most
struct DCompressor {  // its kv / gate projections {width, hidden} are part of DLayer::attn_in
  const float *ape = nullptr, *norm = nullptr;  // {ratio, width}, {dim}
  int64_t dim = 0, width = 0;
  bool indexer = false;
};
// Experts packed at a fixed byte stride so gemv_batched picks them by device-side ids.
struct DExperts {
  WeightMatrix first;  // expert 0
  size_t stride = 0;
};
struct DLayer {
  DHc attn_hc, ffn_hc;
  // Everything that reads the normed attention input: [q_a {q_lora} | kv {hd} | comp kv, gate
  // {width} each | index kv, gate {index width} each | index_proj {index_heads}].
  DProj attn_in;
  // Everything that reads the normed MoE input: [sh_gate {F} | sh_up {F} | router {E}].
  DProj moe_in;
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  WeightMatrix q_b, o_a, o_b;
  const float *q_a_norm = nullptr, *kv_norm = nullptr, *sinks = nullptr;
  int64_t ratio = 0;            // 0: sliding window only
  bool has_indexer = false;     // CSA: the comp lane overlaps and the indexer picks entries
  DCompressor comp, index;
  WeightMatrix index_q_b;
  const float* router_bias = nullptr;  // null: none
  const int32_t* tid2eid = nullptr;    // {vocab, experts_used}; null: top-k routed layer
  DExperts gate_up, down;  // gate_up: per expert gate rows then up rows {2F, hidden}
  WeightMatrix sh_down;
};
// ds4's MTP draft head (weights.h MtpWeights); its decoder block is DeviceWeights::layers
// [c.layers], uploaded by the trunk's per-layer code.
struct DMtp {
  WeightMatrix e_proj, h_proj;  // {hidden, hidden}
  const float *enorm = nullptr, *hnorm = nullptr, *norm = nullptr;  // {hidden}
  DHc head_hc;
};
// MTPLX's DSpark drafter (weights.h DsparkWeights); its three stages are DeviceWeights::layers
// [c.layers .. c.layers + 2] (sliding, top-k routed), uploaded by the trunk's per-layer code.
// The record step needs each stage's kv projection of main_q alone: the three are stacked
// again as ring_kv (one gemv gives every stage's ring row; a small duplicate of attn_in's
// kv part, {3 * head_dim, hidden}).
struct DDspark {
  WeightMatrix main_proj;              // {hidden, taps * hidden}
  const float *main_norm = nullptr, *norm = nullptr;  // {hidden}
  DProj ring_kv;                       // [stage 0 kv | stage 1 kv | stage 2 kv] {3 * head_dim}
  DHc head_hc;
  WeightMatrix markov_w1, markov_w2;   // {vocab, rank}: embedding rows (embed.h types) / linear
  const float* conf_proj = nullptr;    // {hidden + rank}
  int64_t rank = 0;
};
struct DeviceWeights {
  ds4::cuda::DeviceBuffer buffer;
  std::vector<DLayer> layers;  // the trunk's, then the MTP block's (has_mtp) or DSpark's stages
  bool has_mtp = false, has_dspark = false;
  DMtp mtp;
  DDspark dspark;
  // A draft head looks its own tokens' embedding rows up on the device, so the embedding is
  // uploaded with a head only: {vocab, hidden}, the trunk's (F32 / F16 / BF16 / Q8_0: embed.h).
  WeightMatrix embed;
  DHc head_hc;
  const float* norm = nullptr;
  WeightMatrix lm_head;
  const float *inv_main = nullptr, *inv_comp = nullptr;  // {rope_dim / 2}
};

// Uploads everything the decode step reads (not the embedding: its row is dequantized on
// the host from the mmap per token). One sizing pass, admission (throws ds4::Error naming
// the bytes when they do not fit), then each tensor is copied from the mapped file straight
// to the device, so the file is never held in host RAM as a whole.
struct UploadOptions {
  bool fuse = true;     // false keeps every projection separate (the unfused reference in the tests)
  bool mtp = false;     // the MTP head (w.mtp bound; `c` with_mtp_layer: layer c.layers exists)
  bool dspark = false;  // DSpark (w.dspark bound; `c` with_dspark_layers); not with mtp
};
DeviceWeights upload_weights(const Config& c, const Weights& w, const std::vector<float>& inv_main,
                             const std::vector<float>& inv_comp, const UploadOptions& o);

// Bytes of weights one decode token reads: dense parts of every layer, experts_used routed
// experts per layer, the HC head and lm_head (the roofline's numerator).
struct DecodeBytes {
  size_t dense = 0, experts = 0, head = 0;
};
DecodeBytes decode_bytes_per_token(const Config& c, const Weights& w);

}  // namespace ds4::deepseek_v4::cuda
