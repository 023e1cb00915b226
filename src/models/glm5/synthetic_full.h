#pragma once
// Synthetic GLM 5.x Flash at full size (issue #10, speed work): the real config (HF
// `glm5_next` defaults = GLM-5.3-Flash: 45 layers, hidden 4096, 288 experts of 2048, top-8,
// vocab 154880; configuration_glm5_next.py in transformers 5.17) with weights in a quantized
// layout: routed experts in `experts` (Q4_K: 4.5 bits, ~171 GB, more than an H200 holds;
// Q2_K: ~100 GB, fits), every other matrix in `dense` (Q8_0, what ds4 uses for the non-expert
// tensors), hyper-connection mixes F32.
// The source is shapes only by default: matrices have no host data (the CUDA model generates
// them on the GPU, Glm5CudaModel with CudaModelOptions::synthetic_seed); vectors and the MLA
// kv_b_proj (which bind_weights turns into f32 on the host anyway) are generated on the
// host. `materialize` fills the matrices on the host too with the same block generator
// (backend/cuda/synthetic_fill_blocks.h): for CPU checks of small variants.
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "formats/tensor_source.h"

namespace ds4::glm5 {

struct SyntheticFullOptions {
  DType experts = DType::Q2_K;
  DType dense = DType::Q8_0;
  int64_t n_experts = 0;  // routed experts kept (0: the config's 288); top-k stays 8
  int64_t layers = 0;     // 0: the config's 45
  int64_t vocab = 0;      // 0: the config's 154880
  uint64_t seed = 1;
  bool materialize = false;
};

nlohmann::json synthetic_full_config(const SyntheticFullOptions& o);
std::unique_ptr<TensorSource> synthetic_full_source(const SyntheticFullOptions& o);
// Parses "synthetic-full[:EXPERT_TYPE[:EXPERTS[:LAYERS]]]" (EXPERT_TYPE q2_k | q4_k | q8_0);
// false when `spec` does not start with "synthetic-full". Throws InputError on a bad field.
bool parse_synthetic_full(const std::string& spec, SyntheticFullOptions& o);

}  // namespace ds4::glm5
