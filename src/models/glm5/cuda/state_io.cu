// CUDA GLM 5.x state <-> the CPU state's named sections: the device caches are copied into a
// host glm5::State (the first `pos` rows of each per-position cache) and saved by its own
// writer; load reads a fresh host State (which checks every section) and uploads it.
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"
#include "models/glm5/cuda/cuda_state.h"
#include "models/glm5/kda.h"
#include "models/glm5/state.h"

namespace ds4::glm5::cuda {
namespace {

// Element counts of one layer's caches at `pos` (0 where the layer has none).
struct Counts {
  size_t conv = 0, rec = 0, latent = 0, idx = 0, pools = 0;
};
Counts counts(const Config& c, int64_t l, int64_t pos) {
  Counts n;
  if (c.layer_types[size_t(l)] == LayerKind::kLinear) {
    const int64_t qkv = c.linear_num_heads * c.linear_head_dim;
    n.conv = size_t((c.linear_conv_kernel_dim - 1) * 3 * qkv);
    n.rec = size_t(c.linear_num_heads * c.linear_head_dim * c.linear_head_dim);
    return n;
  }
  n.latent = size_t(pos * c.kv_lora_rank);
  if (!c.indexer_shared[size_t(l)]) {
    n.idx = size_t(pos * c.index_head_dim);
    n.pools = size_t(pos / c.index_kpool * c.index_head_dim);
  }
  return n;
}

void down(const uint8_t* base, size_t off, std::vector<float>& v, size_t n) {
  v.resize(n);
  if (n) DS4_CUDA_CHECK(cudaMemcpy(v.data(), base + off, n * sizeof(float), cudaMemcpyDeviceToHost));
}

void up(uint8_t* base, size_t off, const std::vector<float>& v, size_t n, const std::string& what) {
  if (v.size() != n)
    throw InputError("glm5 cuda checkpoint: section '" + what + "' holds " + std::to_string(v.size()) +
                     " floats, expected " + std::to_string(n));
  if (n) DS4_CUDA_CHECK(cudaMemcpy(base + off, v.data(), n * sizeof(float), cudaMemcpyHostToDevice));
}

}  // namespace

void CudaState::save(std::vector<StateSection>& out) const {
  const Config& c = *c_;
  const uint8_t* base = buf.as<uint8_t>();
  State h;
  h.pos = pos;
  h.kda.resize(size_t(c.num_hidden_layers));
  h.mla.resize(size_t(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerOffsets& o = lay_->layers[size_t(l)];
    const Counts n = counts(c, l, pos);
    auto& k = h.kda[size_t(l)];
    auto& m = h.mla[size_t(l)];
    down(base, o.conv, k.conv, n.conv);
    down(base, o.rec, k.recurrent, n.rec);
    down(base, o.latent, m.latent, n.latent);
    down(base, o.idx_keys, m.idx_keys, n.idx);
    down(base, o.idx_gates, m.idx_gates, n.idx);
    down(base, o.idx_pools, m.pool_keys, n.pools);
  }
  h.save(out);  // MTP sections empty: the head is CPU-only
}

void CudaState::load(const std::vector<StateSection>& in) {
  const Config& c = *c_;
  State h;  // fresh, shaped like the CPU model's new_state(), so its reader checks sizes
  h.kda.resize(size_t(c.num_hidden_layers));
  h.mla.resize(size_t(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    if (c.layer_types[size_t(l)] == LayerKind::kLinear) kda_init_state(c, h.kda[size_t(l)]);
  h.load(in);
  if (h.pos < 0 || h.pos > lay_->max_ctx)
    throw InputError("glm5 cuda checkpoint: position " + std::to_string(h.pos) + " outside this state's context of " +
                     std::to_string(lay_->max_ctx));
  uint8_t* base = buf.as<uint8_t>();
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerOffsets& o = lay_->layers[size_t(l)];
    const Counts n = counts(c, l, h.pos);
    const std::string p = "layer." + std::to_string(l) + ".";
    const auto& k = h.kda[size_t(l)];
    const auto& m = h.mla[size_t(l)];
    up(base, o.conv, k.conv, n.conv, p + "kda.conv");
    up(base, o.rec, k.recurrent, n.rec, p + "kda.recurrent");
    up(base, o.latent, m.latent, n.latent, p + "mla.latent");
    up(base, o.idx_keys, m.idx_keys, n.idx, p + "mla.idx_keys");
    up(base, o.idx_gates, m.idx_gates, n.idx, p + "mla.idx_gates");
    up(base, o.idx_pools, m.pool_keys, n.pools, p + "mla.pool_keys");
  }
  const int32_t p32 = int32_t(h.pos);
  DS4_CUDA_CHECK(cudaMemcpy(base + lay_->pos, &p32, sizeof p32, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies may return before the DMA lands
  pos = h.pos;
}

}  // namespace ds4::glm5::cuda
