#pragma once
// Synthetic GLM 5.x models for speed work (issue #10): the tensor list bind_weights() binds
// for a config, filled in memory with generated values (seeded by tensor name; norms near 1,
// projections small), so a bench can run real shapes without a checkpoint.
#include <cstdint>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "formats/tensor_source.h"

namespace ds4::glm5 {

// The HF defaults of GLM 5.x Flash (config.h: hidden 4096, KDA 64 x 128, MLA 64 heads,
// kv LoRA 512, indexer 32 x 128, experts of 2048, top-8, hc 4) with fewer layers, experts
// and vocabulary so it fits in memory: layer l is DSA when l % 4 == 3, else KDA; layer 0 has
// the dense MLP, the others MoE.
nlohmann::json synthetic_config(int64_t layers, int64_t experts, int64_t vocab);

// Generated weights shared by every source made from them (one copy in memory).
struct SyntheticWeights;
// Matrices in `type` (F32, F16 or BF16), vectors in F32. Throws InputError for a config
// parse_config() refuses.
std::shared_ptr<const SyntheticWeights> make_synthetic(const nlohmann::json& config, DType type, uint64_t seed = 1);
// A TensorSource view of them (cheap; the weights stay alive while a source does).
std::unique_ptr<TensorSource> synthetic_source(std::shared_ptr<const SyntheticWeights> w);

}  // namespace ds4::glm5
