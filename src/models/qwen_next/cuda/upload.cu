// Weight upload for the CUDA Qwen model: one pass sizes everything, admission checks it,
// a second pass copies into one device buffer (256-byte aligned pieces).
#include <cuda_runtime.h>

#include <functional>

#include "backend/cuda/check.h"
#include "models/qwen_next/cuda/device_weights.h"

namespace ds4::qwen_next::cuda {
namespace {

constexpr size_t kAlign = 256;
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Sizing pass (base == nullptr): only counts. Copy pass: copies and returns device pointers.
class Uploader {
 public:
  explicit Uploader(uint8_t* base) : base_(base) {}
  const void* add(const void* host, size_t bytes) {
    const size_t off = used_;
    used_ = align_up(used_ + bytes);
    if (!base_) return nullptr;
    DS4_CUDA_CHECK(cudaMemcpy(base_ + off, host, bytes, cudaMemcpyHostToDevice));
    return base_ + off;
  }
  const float* vec(const Vec& v, float offset) {
    Vec t(v);
    for (float& x : t) x += offset;
    return static_cast<const float*>(add(t.data(), t.size() * sizeof(float)));
  }
  static size_t data_bytes(const WeightMatrix& m) { return size_t(m.rows * m.row_stride_bytes()); }
  static size_t scale_bytes(const WeightMatrix& m) {
    return m.scales ? size_t(m.rows * (m.cols / m.group_size) * row_bytes(m.scale_type, 1)) : 0;
  }
  WeightMatrix mat(const WeightMatrix& m) {
    WeightMatrix d = m;
    d.data = add(m.data, data_bytes(m));
    if (m.scales) {
      d.scales = add(m.scales, scale_bytes(m));
      d.biases = add(m.biases, scale_bytes(m));
    }
    return d;
  }
  // All experts' data, then all scales, then all biases: each at one fixed stride.
  DExperts experts(const std::vector<WeightMatrix>& es) {
    DExperts d;
    d.first = es[0];
    d.stride = align_up(data_bytes(es[0]));
    d.scale_stride = align_up(scale_bytes(es[0]));
    for (size_t e = 0; e < es.size(); ++e) {
      const void* p = add(es[e].data, data_bytes(es[0]));
      if (e == 0) d.first.data = p;
    }
    if (es[0].scales) {
      for (size_t e = 0; e < es.size(); ++e) {
        const void* p = add(es[e].scales, scale_bytes(es[0]));
        if (e == 0) d.first.scales = p;
      }
      for (size_t e = 0; e < es.size(); ++e) {
        const void* p = add(es[e].biases, scale_bytes(es[0]));
        if (e == 0) d.first.biases = p;
      }
    }
    return d;
  }
  size_t used() const { return used_; }

 private:
  uint8_t* base_;
  size_t used_ = 0;
};

DHyper hyper(Uploader& u, const HyperWeights& h) {
  DHyper d;
  d.norm = u.vec(h.norm, 1.0f);
  d.down = u.mat(h.down);
  d.up = u.mat(h.up);
  if (h.inject.rows > 0) d.inject = u.mat(h.inject);
  return d;
}

DLayer layer(Uploader& u, const Config& c, const LayerWeights& w) {
  DLayer d;
  d.attn_hc = hyper(u, w.attn_hc);
  d.mlp_hc = hyper(u, w.mlp_hc);
  if (w.gdn) {
    const GdnWeights& g = *w.gdn;
    d.gdn = DGdn{u.mat(g.qkv), u.mat(g.z), u.mat(g.b), u.mat(g.a), u.mat(g.out),
                 u.vec(g.conv, 0.f), u.vec(g.a_log, 0.f), u.vec(g.dt_bias, 0.f), u.vec(g.norm, 0.f)};
  }
  if (w.qsa) {
    const QsaWeights& a = *w.qsa;
    d.qsa = DQsa{u.mat(a.q), u.mat(a.k), u.mat(a.v), u.mat(a.o), u.mat(a.idx_qk),
                 u.vec(a.q_norm, 1.f), u.vec(a.k_norm, 1.f), u.vec(a.idx_q_norm, 1.f), u.vec(a.idx_k_norm, 1.f)};
  }
  if (w.ple) {
    const PleWeights& p = *w.ple;
    d.ple = DPle{u.mat(p.key), u.mat(p.value), u.vec(p.norm_key, 1.f), u.vec(p.norm_query, 1.f),
                 u.vec(p.norm_conv, 1.f), u.vec(p.conv, 0.f), -1};
  }
  const MoeWeights& m = w.moe;
  d.moe.router = u.mat(m.router);
  d.moe.sh_gate = u.mat(m.sh_gate);
  d.moe.sh_up = u.mat(m.sh_up);
  d.moe.sh_down = u.mat(m.sh_down);
  d.moe.sh_gate_scalar = u.mat(m.sh_gate_scalar);
  d.moe.gate_up = u.experts(m.gate_up);
  d.moe.down = u.experts(m.down);
  (void)c;
  return d;
}

void bind_all(Uploader& u, const Config& c, const Weights& w, const std::vector<float>& inv_freq,
              DeviceWeights& d) {
  d.layers.clear();
  int64_t ple_index = 0;
  for (const auto& l : w.layers) {
    d.layers.push_back(layer(u, c, l));
    if (d.layers.back().ple) d.layers.back().ple->index = ple_index++;
  }
  d.mixer = hyper(u, w.mixer);
  d.lm_head = u.mat(w.lm_head);
  d.inv_freq = u.vec(inv_freq, 0.f);
}

}  // namespace

DeviceWeights upload_weights(const Config& c, const Weights& w, const std::vector<float>& inv_freq) {
  DeviceWeights d;
  Uploader sizing(nullptr);
  bind_all(sizing, c, w, inv_freq, d);
  d.buffer = ds4::cuda::DeviceBuffer(sizing.used(), "qwen_next weights");  // admission inside
  Uploader copy(d.buffer.as<uint8_t>());
  bind_all(copy, c, w, inv_freq, d);
  // Pageable copies may return before the DMA lands; the step's non-blocking stream would not
  // wait for them.
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

}  // namespace ds4::qwen_next::cuda
