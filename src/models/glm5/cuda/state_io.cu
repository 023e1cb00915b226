// CUDA GLM 5.x state <-> the CPU state's named sections: the device caches are copied into a
// host glm5::State (the first `pos` rows of each per-position cache) and saved by its own
// writer; load reads a fresh host State (which checks every section) and uploads it.
#include <cuda_runtime.h>

#include <string>

#include "backend/cuda/paged_rows_io.h"
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

// A paged host cache (core/paged_rows.h) from / to its device rows: n floats, whole rows.
void down(const uint8_t* base, size_t off, PagedRows& v, size_t n) {
  ::ds4::cuda::paged_rows_from_device(base + off, v, n, "glm5 cuda cache");
}

void up(uint8_t* base, size_t off, const PagedRows& v, size_t n, const std::string& what) {
  up(base, off, v.flatten(), n, what);
}

// The MTP head layer's caches at its position (its kind: a KDA head has a conv slot; offset
// 0 is the trunk's position counter, never a cache).
Counts head_counts(const Config& c, const MtpOffsets& mo, int64_t mpos) {
  Counts n;
  if (mo.layer.conv) {
    const int64_t qkv = c.linear_num_heads * c.linear_head_dim;
    n.conv = size_t((c.linear_conv_kernel_dim - 1) * 3 * qkv);
    n.rec = size_t(c.linear_num_heads * c.linear_head_dim * c.linear_head_dim);
    return n;
  }
  n.latent = size_t(mpos * c.kv_lora_rank);
  n.idx = size_t(mpos * c.index_head_dim);
  n.pools = size_t(mpos / c.index_kpool * c.index_head_dim);
  return n;
}

}  // namespace

void CudaState::save(std::vector<StateSection>& out) const {
  const Config& c = *c_;
  const uint8_t* base = buf.as<uint8_t>();
  State h = make_state(c);
  h.pos = pos;
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
  if (mtp_on) {  // the MTP head's history (CPU State's mtp_* fields, mtp.cu's layout)
    const MtpOffsets& mo = lay_->mtp;
    const Counts n = head_counts(c, mo, mtp_pos);
    h.mtp_on = true;
    h.mtp_pos = mtp_pos;
    down(base, mo.layer.conv, h.mtp_kda.conv, n.conv);
    down(base, mo.layer.rec, h.mtp_kda.recurrent, n.rec);
    down(base, mo.layer.latent, h.mtp_mla.latent, n.latent);
    down(base, mo.layer.idx_keys, h.mtp_mla.idx_keys, n.idx);
    down(base, mo.layer.idx_gates, h.mtp_mla.idx_gates, n.idx);
    down(base, mo.layer.idx_pools, h.mtp_mla.pool_keys, n.pools);
    down(base, mo.last, h.last_hidden, pos > 0 ? size_t(c.hidden_size) : 0);
    down(base, mo.queue, h.pending_hidden, pending_next.size() * size_t(c.hidden_size));
    h.pending_next = pending_next;
  }
  h.save(out);
}

void CudaState::load(const std::vector<StateSection>& in) {
  const Config& c = *c_;
  State h = make_state(c);  // fresh, shaped like the CPU model's new_state(), so its reader checks sizes
  h.load(in);
  if (h.pos < 0 || h.pos > lay_->max_ctx)
    throw InputError("glm5 cuda checkpoint: position " + std::to_string(h.pos) + " outside this state's context of " +
                     std::to_string(lay_->max_ctx));
  if (h.mtp_on) {  // refused before anything is written (the state stays as it was)
    if (!lay_->has_mtp) throw InputError("glm5 cuda checkpoint: MTP head sections, but this model has no MTP layer");
    if (h.mtp_pos < 0 || h.mtp_pos > lay_->max_ctx)
      throw InputError("glm5 cuda checkpoint: mtp.pos " + std::to_string(h.mtp_pos) + " outside the context");
    // The device queue holds qcap rows; a CPU state saved right after a long prefill queues
    // more (the CPU head catches up only when it drafts).
    const int64_t P = int64_t(h.pending_next.size());
    if (P > lay_->mtp.qcap)
      throw InputError("glm5 cuda checkpoint: " + std::to_string(P) + " queued MTP rows > the device queue's " +
                       std::to_string(lay_->mtp.qcap) + " (draft once on the CPU before saving)");
  }
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
  if (h.mtp_on) {
    const MtpOffsets& mo = lay_->mtp;
    const int64_t H = c.hidden_size, P = int64_t(h.pending_next.size());
    const Counts n = head_counts(c, mo, h.mtp_pos);
    up(base, mo.layer.conv, h.mtp_kda.conv, n.conv, "mtp.kda.conv");
    up(base, mo.layer.rec, h.mtp_kda.recurrent, n.rec, "mtp.kda.recurrent");
    up(base, mo.layer.latent, h.mtp_mla.latent, n.latent, "mtp.mla.latent");
    up(base, mo.layer.idx_keys, h.mtp_mla.idx_keys, n.idx, "mtp.mla.idx_keys");
    up(base, mo.layer.idx_gates, h.mtp_mla.idx_gates, n.idx, "mtp.mla.idx_gates");
    up(base, mo.layer.idx_pools, h.mtp_mla.pool_keys, n.pools, "mtp.mla.pool_keys");
    up(base, mo.last, h.last_hidden, h.pos > 0 ? size_t(H) : 0, "mtp.last_hidden");
    up(base, mo.queue, h.pending_hidden, size_t(P * H), "mtp.pending_hidden");
    const int32_t counters[2] = {int32_t(h.mtp_pos), int32_t(P)};
    DS4_CUDA_CHECK(cudaMemcpy(base + mo.pos, &counters[0], sizeof(int32_t), cudaMemcpyHostToDevice));
    DS4_CUDA_CHECK(cudaMemcpy(base + mo.qlen, &counters[1], sizeof(int32_t), cudaMemcpyHostToDevice));
  }
  const int32_t p32 = int32_t(h.pos);
  DS4_CUDA_CHECK(cudaMemcpy(base + lay_->pos, &p32, sizeof p32, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies may return before the DMA lands
  pos = h.pos;
  mtp_on = h.mtp_on;
  mtp_pos = h.mtp_pos;
  pending_next = h.pending_next;
  cap_n = 0;
  drop_graphs();  // whether the step pushes into the MTP queue may have changed
}

}  // namespace ds4::glm5::cuda
