#pragma once
// bench_glm5_cuda synthetic-full[:TYPE[:EXPERTS[:LAYERS]]] [decode_tokens] [contexts]: the
// full-size GLM 5.x Flash (models/glm5/synthetic_full.h: HF glm5_next config, routed experts
// in TYPE (default q2_k; q4_k needs ~171 GB), the rest Q8_0) generated on the GPU, then
// prefill to each context frontier (default 2048,8192,32768; chunks of 16 rows) and greedy
// decode at batch 1 there, as fractions of the roofline (bench/cuda_synthetic.h).
// Bytes per token: the uploaded weights except the routed experts (hc mixes, attention,
// shared experts, dense MLPs, router, lm_head; the embedding row is made on the host) + the
// routed experts a token reads (decode: k of E per MoE layer; prefill: the expected union of
// 16 rows' top-k under uniform routing, over 16, without the lm_head) + KDA recurrent state read and written
// (f32 {heads, hd, hd} per KDA layer) + the MLA latent rows attention reads (the selection:
// min(pos, index_topk + tail) x kv_lora f32 per DSA layer) + the indexer's pool keys (pos /
// kpool x index_head_dim f32 per full-indexer layer).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "../cuda_synthetic.h"
#include "backend/cuda/memory.h"
#include "models/glm5/config.h"
#include "models/glm5/cuda/model_cuda.h"
#include "models/glm5/synthetic_full.h"

namespace ds4::bench {

inline int glm5_synthetic_full(const glm5::SyntheticFullOptions& so, int n_decode, const std::vector<int64_t>& ctx) {
  using Clock = std::chrono::steady_clock;
  const glm5::Config c = glm5::parse_config(glm5::synthetic_full_config(so), "synthetic-full");
  LoadOptions lo;
  lo.max_context = ctx.back() + n_decode * int64_t(ctx.size()) + 64;
  glm5::CudaModelOptions co;
  co.synthetic_seed = so.seed;
  const auto free0 = cuda::device_memory_info();
  auto t0 = Clock::now();
  std::unique_ptr<glm5::Glm5CudaModel> gp;
  try {  // admission (backend/cuda/memory.h) refuses before anything is generated
    gp = std::make_unique<glm5::Glm5CudaModel>(glm5::synthetic_full_source(so), lo, co);
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n(synthetic-full: routed experts Q4_K need ~171 GB with 288 experts; use q2_k, or fewer experts "
                "such as synthetic-full:q4_k:200)\n", e.what());
    return 2;
  }
  glm5::Glm5CudaModel& g = *gp;
  const double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto free1 = cuda::device_memory_info();
  std::printf("synthetic-full GLM 5.x Flash: %lld layers, %lld experts (top-%lld) in %s, rest %s, vocab %lld, max "
              "context %lld\n", (long long)c.num_hidden_layers, (long long)c.n_routed_experts,
              (long long)c.num_experts_per_tok, std::string(dtype_name(so.experts)).c_str(),
              std::string(dtype_name(so.dense)).c_str(), (long long)c.vocab_size, (long long)lo.max_context);
  std::printf("weights %.2f GiB generated on the GPU, load %.1f s; device memory used by the model %.2f GiB (of %.2f "
              "GiB total)\n", double(g.weight_bytes()) / (1ull << 30), load_s,
              double(free0.free_bytes - free1.free_bytes) / (1ull << 30), double(free0.total_bytes) / (1ull << 30));
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  const auto bw = cuda::measure_bandwidth(size_t(1) << 30, 20, stream);
  cudaStreamDestroy(stream);
  std::printf("device bandwidth (same run): copy %.0f GB/s, memcpy %.0f GB/s, read %.0f GB/s\n", bw.copy_gbps,
              bw.memcpy_gbps, bw.read_gbps);
  int64_t kda = 0, dsa = 0, full_idx = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    if (c.layer_types[size_t(l)] == glm5::LayerKind::kLinear) ++kda;
    else ++dsa, full_idx += c.indexer_shared[size_t(l)] ? 0 : 1;
  }
  // A prefill chunk reads the lm_head only for the last chunk's logits: left out (Q8_0: V x H x 34/32).
  const double lm = double(c.vocab_size) * double(c.hidden_size) * 34.0 / 32.0;
  const double per_tok = double(g.weight_bytes_per_token()), chunk = (per_tok * g.chunk_bytes_ratio(16) - lm) / 16.0;
  const double kda_state = double(kda) * 2.0 * double(c.linear_num_heads * c.linear_head_dim * c.linear_head_dim) * 4.0;
  auto attn = [&](int64_t p) {
    const int64_t sel = std::min<int64_t>(p + 1, c.index_topk + (p + 1) % c.index_kpool);
    return double(dsa) * double(sel * c.kv_lora_rank) * 4.0 +
           double(full_idx) * double((p / c.index_kpool) * c.index_head_dim) * 4.0;
  };
  std::printf("bytes per token: weights %.1f MB (decode), %.1f MB (prefill, 16-row chunks), KDA state %.1f MB, "
              "attention at %lld: %.1f MB\n", per_tok / 1e6, chunk / 1e6, kda_state / 1e6, (long long)ctx.back(),
              attn(ctx.back()) / 1e6);
  TokenBytes tb;
  tb.decode = [&](int64_t p) { return per_tok + kda_state + attn(p); };
  tb.prefill = [&](int64_t p) { return chunk + kda_state + attn(p); };
  context_table(g, ctx, n_decode, tb, bw);
  return 0;
}

}  // namespace ds4::bench
