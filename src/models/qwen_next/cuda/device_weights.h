#pragma once
// Internal to the CUDA Qwen model: the weights as device copies. WeightMatrix views keep
// their host shapes with data (and MLX scales/biases) pointing into one device buffer;
// norm vectors hold (offset + w) so every kernel multiplies by the stored value.
#include <cstdint>
#include <optional>
#include <vector>

#include "backend/cuda/memory.h"
#include "core/weight.h"
#include "models/qwen_next/config.h"
#include "models/qwen_next/weights.h"

namespace ds4::qwen_next::cuda {

struct DHyper {
  const float* norm = nullptr;  // {hc*d}
  WeightMatrix down, up, inject;
};
struct DGdn {
  WeightMatrix qkv, z, b, a, out;
  const float *conv = nullptr, *a_log = nullptr, *dt_bias = nullptr, *norm = nullptr;
};
struct DQsa {
  WeightMatrix q, k, v, o, idx_qk;
  const float *q_norm = nullptr, *k_norm = nullptr, *idx_q_norm = nullptr, *idx_k_norm = nullptr;
};
// Experts are packed at a fixed stride so one batched gemv picks them by id on the device.
struct DExperts {
  WeightMatrix first;        // expert 0
  size_t stride = 0, scale_stride = 0;
};
struct DMoe {
  WeightMatrix router, sh_gate, sh_up, sh_down, sh_gate_scalar;
  DExperts gate_up, down;
};
struct DPle {
  WeightMatrix key, value;
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
struct DeviceWeights {
  ds4::cuda::DeviceBuffer buffer;
  std::vector<DLayer> layers;
  DHyper mixer;
  WeightMatrix lm_head;
  const float* inv_freq = nullptr;  // {rot_dim / 2}
};

// Uploads everything the decode step reads (not the embedding or the PLE tables: those
// are gathered on the host per token). Admission first: throws ds4::Error naming the bytes
// when the weights do not fit in free device memory.
DeviceWeights upload_weights(const Config& c, const Weights& w, const std::vector<float>& inv_freq);

}  // namespace ds4::qwen_next::cuda
