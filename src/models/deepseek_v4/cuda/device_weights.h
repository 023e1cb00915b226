#pragma once
// Internal to the CUDA DeepSeek V4 model: the weights the decode step reads, as device
// copies in one buffer. WeightMatrix views keep their host shapes and types with data
// pointing into that buffer; small vectors (norms, biases, sinks, HC base/scale, compressor
// position bias, hash table) are f32 / i32 device arrays.
#include <cstdint>
#include <vector>

#include "backend/cuda/memory.h"
#include "core/weight.h"
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/weights.h"

namespace ds4::deepseek_v4::cuda {

struct DHc {
  WeightMatrix fn;  // {mix, n_hc * hidden}
  const float *base = nullptr, *scale = nullptr;
};
struct DCompressor {
  WeightMatrix kv, gate;  // {width, hidden}
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
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  WeightMatrix q_a, q_b, kv, o_a, o_b;
  const float *q_a_norm = nullptr, *kv_norm = nullptr, *sinks = nullptr;
  int64_t ratio = 0;            // 0: sliding window only
  bool has_indexer = false;     // CSA: the comp lane overlaps and the indexer picks entries
  DCompressor comp, index;
  WeightMatrix index_q_b, index_proj;
  WeightMatrix router;
  const float* router_bias = nullptr;  // null: none
  const int32_t* tid2eid = nullptr;    // {vocab, experts_used}; null: top-k routed layer
  DExperts gate, up, down;
  WeightMatrix sh_gate, sh_up, sh_down;
};
struct DeviceWeights {
  ds4::cuda::DeviceBuffer buffer;
  std::vector<DLayer> layers;
  DHc head_hc;
  const float* norm = nullptr;
  WeightMatrix lm_head;
  const float *inv_main = nullptr, *inv_comp = nullptr;  // {rope_dim / 2}
};

// Uploads everything the decode step reads (not the embedding: its row is dequantized on
// the host from the mmap per token). One sizing pass, admission (throws ds4::Error naming
// the bytes when they do not fit), then each tensor is copied from the mapped file straight
// to the device, so the file is never held in host RAM as a whole.
DeviceWeights upload_weights(const Config& c, const Weights& w, const std::vector<float>& inv_main,
                             const std::vector<float>& inv_comp);

// Bytes of weights one decode token reads: dense parts of every layer, experts_used routed
// experts per layer, the HC head and lm_head (the roofline's numerator).
size_t decode_bytes_per_token(const Config& c, const Weights& w);

}  // namespace ds4::deepseek_v4::cuda
