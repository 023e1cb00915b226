// Weight upload for the CUDA DeepSeek V4 model: one pass sizes everything, admission checks
// it, a second pass copies each tensor from its mmap'd bytes into one device buffer
// (256-byte aligned pieces). Nothing is staged in host RAM beyond the page cache.
#include <cuda_runtime.h>

#include <vector>

#include "backend/cuda/check.h"
#include "models/deepseek_v4/cuda/device_weights.h"

namespace ds4::deepseek_v4::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
size_t data_bytes(const WeightMatrix& m) { return size_t(m.rows * m.row_stride_bytes()); }

// Sizing pass (base == nullptr): only counts. Copy pass: copies and returns device pointers.
class Uploader {
 public:
  explicit Uploader(uint8_t* base) : base_(base) {}
  const void* add(const void* host, size_t bytes) {
    const size_t off = used_;
    if (base_ && bytes) DS4_CUDA_CHECK(cudaMemcpy(base_ + off, host, bytes, cudaMemcpyHostToDevice));
    used_ = align_up(off + bytes);
    return base_ ? base_ + off : nullptr;
  }
  const float* vec(const std::vector<float>& v) {
    return static_cast<const float*>(add(v.data(), v.size() * sizeof(float)));
  }
  WeightMatrix mat(const WeightMatrix& m) {
    if (m.scales) throw InputError("deepseek_v4 cuda: MLX affine weights are not supported");
    WeightMatrix d = m;
    d.data = add(m.data, data_bytes(m));
    return d;
  }
  DExperts experts(const std::vector<WeightMatrix>& es) {
    DExperts d;
    d.first = es[0];
    d.stride = align_up(data_bytes(es[0]));
    for (size_t e = 0; e < es.size(); ++e) {
      if (es[e].type != es[0].type || es[e].rows != es[0].rows || es[e].cols != es[0].cols)
        throw InputError("deepseek_v4 cuda: experts of one layer differ in type or shape");
      const void* p = add(es[e].data, data_bytes(es[0]));
      if (e == 0) d.first.data = p;
    }
    return d;
  }
  DHc hc(const HcBlock& h) { return DHc{mat(h.fn), vec(h.base), vec(h.scale)}; }
  DCompressor comp(const CompressorWeights& c) {
    return DCompressor{mat(c.kv), mat(c.gate), vec(c.ape), vec(c.norm), c.dim, c.width, c.indexer};
  }
  size_t used() const { return used_; }

 private:
  uint8_t* base_;
  size_t used_ = 0;
};

DLayer layer(Uploader& u, const Config& c, const LayerWeights& w, int64_t l) {
  DLayer d;
  d.attn_hc = u.hc(w.attn_hc);
  d.ffn_hc = u.hc(w.ffn_hc);
  d.attn_norm = u.vec(w.attn_norm);
  d.ffn_norm = u.vec(w.ffn_norm);
  d.q_a = u.mat(w.q_a);
  d.q_b = u.mat(w.q_b);
  d.kv = u.mat(w.kv);
  d.o_a = u.mat(w.o_a);
  d.o_b = u.mat(w.o_b);
  d.q_a_norm = u.vec(w.q_a_norm);
  d.kv_norm = u.vec(w.kv_norm);
  d.sinks = u.vec(w.sinks);
  d.ratio = c.ratio(l);
  d.has_indexer = w.has_indexer;
  if (d.ratio > 0) d.comp = u.comp(w.comp);
  if (w.has_indexer) {
    d.index = u.comp(w.index);
    d.index_q_b = u.mat(w.index_q_b);
    d.index_proj = u.mat(w.index_proj);
  }
  d.router = u.mat(w.router);
  if (!w.router_bias.empty()) d.router_bias = u.vec(w.router_bias);
  if (c.hash_moe[size_t(l)])
    d.tid2eid = static_cast<const int32_t*>(u.add(w.tid2eid.data(), w.tid2eid.size() * sizeof(int32_t)));
  d.gate = u.experts(w.exp_gate);
  d.up = u.experts(w.exp_up);
  d.down = u.experts(w.exp_down);
  d.sh_gate = u.mat(w.sh_gate);
  d.sh_up = u.mat(w.sh_up);
  d.sh_down = u.mat(w.sh_down);
  return d;
}

void bind_all(Uploader& u, const Config& c, const Weights& w, const std::vector<float>& inv_main,
              const std::vector<float>& inv_comp, DeviceWeights& d) {
  d.layers.clear();
  for (int64_t l = 0; l < c.layers; ++l) d.layers.push_back(layer(u, c, w.layers[size_t(l)], l));
  d.head_hc = u.hc(w.head_hc);
  d.norm = u.vec(w.norm);
  d.lm_head = u.mat(w.lm_head);
  d.inv_main = u.vec(inv_main);
  d.inv_comp = u.vec(inv_comp);
}

size_t mbytes(const WeightMatrix& m) { return data_bytes(m); }

}  // namespace

DeviceWeights upload_weights(const Config& c, const Weights& w, const std::vector<float>& inv_main,
                             const std::vector<float>& inv_comp) {
  DeviceWeights d;
  Uploader sizing(nullptr);
  bind_all(sizing, c, w, inv_main, inv_comp, d);
  d.buffer = ds4::cuda::DeviceBuffer(sizing.used(), "deepseek_v4 weights");  // admission inside
  Uploader copy(d.buffer.as<uint8_t>());
  bind_all(copy, c, w, inv_main, inv_comp, d);
  // Pageable copies may return before the DMA lands; the step's non-blocking stream would
  // not wait for them.
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

size_t decode_bytes_per_token(const Config& c, const Weights& w) {
  size_t b = mbytes(w.head_hc.fn) + mbytes(w.lm_head);
  for (int64_t l = 0; l < c.layers; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    b += mbytes(L.attn_hc.fn) + mbytes(L.ffn_hc.fn) + mbytes(L.q_a) + mbytes(L.q_b) + mbytes(L.kv) +
         mbytes(L.o_a) + mbytes(L.o_b) + mbytes(L.router) + mbytes(L.sh_gate) + mbytes(L.sh_up) + mbytes(L.sh_down);
    if (c.ratio(l) > 0) b += mbytes(L.comp.kv) + mbytes(L.comp.gate);
    if (L.has_indexer)
      b += mbytes(L.index.kv) + mbytes(L.index.gate) + mbytes(L.index_q_b) + mbytes(L.index_proj);
    b += size_t(c.experts_used) * (mbytes(L.exp_gate[0]) + mbytes(L.exp_up[0]) + mbytes(L.exp_down[0]));
  }
  return b;
}

}  // namespace ds4::deepseek_v4::cuda
