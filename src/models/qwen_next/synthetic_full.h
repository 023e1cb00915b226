#pragma once
// Synthetic Qwen3.8 Flash Next at full size (issue #10, speed work). Shapes from SPEC.md §1
// (the audit's Flash Next: 48 layers = 36 GDN (48 value heads x 128, 16 key heads, conv 4) +
// 12 QSA (every 4th; 24 heads, 2 KV heads, dim 256, indexer 4 heads x 128, rope 64 = partial
// 0.25, ratio 4, budget 2048 = top-512 blocks x 4), hidden 2560, hc 4, MoE 512 experts of 640,
// top-10 + a shared expert, PLE 3-grams 16 heads x 160 on the first layer, vocab 248320);
// where the SPEC is silent, HF qwen4_exp's defaults (hc_lowrank 320, ngram_vocab_size_base
// 20M, seed 1234) and shared_expert_intermediate_size = moe_intermediate_size (HF's default
// pairing, 512/512). Every linear layer MLX affine q4, group 64, BF16 scales and biases.
// The source is shapes only: the CUDA model (CudaModelOptions::synthetic_seed) generates
// every matrix on the GPU, makes embedding rows per token and replaces the PLE table (320M
// rows x 160, ~51B parameters) by rows generated per lookup, so nothing big is in host RAM.
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "formats/tensor_source.h"

namespace ds4::qwen_next {

struct SyntheticFullOptions {
  int64_t layers = 0;     // 0: 48 (must keep the GDN/QSA pattern: multiples of 4 stay faithful)
  int64_t n_experts = 0;  // 0: 512
  uint64_t seed = 1;
  int64_t vocab = 0;        // 0: 248320
  int64_t ngram_base = 0;   // 0: 20M (HF); a small value shrinks the PLE table (CPU checks)
  // Fill every tensor on the host with the GPU's block generator (backend/cuda/
  // synthetic_fill_blocks.h) so the CPU model can run it: for small variants only.
  bool materialize = false;
  // Also the MTP draft head (mtp.*: fc, norms, one full-attention layer, mixer; bind_weights'
  // names), for prefill / drafting benches with the head on (bench_qwen_next_cuda --mtp).
  bool mtp = false;
};

nlohmann::json synthetic_full_config(const SyntheticFullOptions& o);
std::unique_ptr<TensorSource> synthetic_full_source(const SyntheticFullOptions& o);
// "synthetic-full[:EXPERTS[:LAYERS]]"; false when `spec` does not start with "synthetic-full".
bool parse_synthetic_full(const std::string& spec, SyntheticFullOptions& o);

}  // namespace ds4::qwen_next
