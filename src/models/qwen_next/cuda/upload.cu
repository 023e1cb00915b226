// Weight upload for the CUDA Qwen model: one pass sizes everything, admission checks it,
// a second pass copies into one device buffer (256-byte aligned pieces).
#include <cuda_runtime.h>

#include <utility>
#include <vector>

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
  const void* add(const void* host, size_t bytes) { return add_run({{host, bytes}}); }
  // Pieces copied back to back (no padding between them), the run itself aligned.
  const void* add_run(const std::vector<std::pair<const void*, size_t>>& pieces) {
    const size_t off = used_;
    size_t at = off;
    for (const auto& [host, bytes] : pieces) {
      if (base_) DS4_CUDA_CHECK(cudaMemcpy(base_ + at, host, bytes, cudaMemcpyHostToDevice));
      at += bytes;
    }
    used_ = align_up(at);
    return base_ ? base_ + off : nullptr;
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
  // Projections of one input: stacked when they share type, width and quantization.
  DProj proj(const std::vector<const WeightMatrix*>& ms, bool fuse) {
    DProj d;
    bool same = fuse;
    for (const WeightMatrix* m : ms) {
      d.rows += m->rows;
      same = same && m->type == ms[0]->type && m->cols == ms[0]->cols && m->group_size == ms[0]->group_size &&
             m->scale_type == ms[0]->scale_type && (m->scales != nullptr) == (ms[0]->scales != nullptr);
    }
    if (!same || ms.size() == 1) {
      for (const WeightMatrix* m : ms) d.parts.push_back(mat(*m));
      return d;
    }
    d.fused = *ms[0];
    d.fused.rows = d.rows;
    std::vector<std::pair<const void*, size_t>> data, scales, biases;
    for (const WeightMatrix* m : ms) {
      data.push_back({m->data, data_bytes(*m)});
      if (m->scales) {
        scales.push_back({m->scales, scale_bytes(*m)});
        biases.push_back({m->biases, scale_bytes(*m)});
      }
    }
    d.fused.data = add_run(data);
    if (ms[0]->scales) {
      d.fused.scales = add_run(scales);
      d.fused.biases = add_run(biases);
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

DHyper hyper(Uploader& u, const HyperWeights& h, bool fuse) {
  DHyper d;
  d.norm = u.vec(h.norm, 1.0f);
  d.down_inject = h.inject.rows > 0 ? u.proj({&h.down, &h.inject}, fuse) : u.proj({&h.down}, fuse);
  d.up = u.mat(h.up);
  return d;
}

DLayer layer(Uploader& u, const LayerWeights& w, bool fuse) {
  DLayer d;
  d.attn_hc = hyper(u, w.attn_hc, fuse);
  d.mlp_hc = hyper(u, w.mlp_hc, fuse);
  if (w.gdn) {
    const GdnWeights& g = *w.gdn;
    d.gdn = DGdn{u.proj({&g.qkv, &g.z, &g.b, &g.a}, fuse), u.mat(g.out), u.vec(g.conv, 0.f), u.vec(g.a_log, 0.f),
                 u.vec(g.dt_bias, 0.f), u.vec(g.norm, 0.f)};
  }
  if (w.qsa) {
    const QsaWeights& a = *w.qsa;
    d.qsa = DQsa{u.proj({&a.q, &a.k, &a.v, &a.idx_qk}, fuse), u.mat(a.o), u.vec(a.q_norm, 1.f), u.vec(a.k_norm, 1.f),
                 u.vec(a.idx_q_norm, 1.f), u.vec(a.idx_k_norm, 1.f)};
  }
  if (w.ple) {
    const PleWeights& p = *w.ple;
    d.ple = DPle{u.proj({&p.key, &p.value}, fuse), u.vec(p.norm_key, 1.f), u.vec(p.norm_query, 1.f),
                 u.vec(p.norm_conv, 1.f), u.vec(p.conv, 0.f), -1};
  }
  const MoeWeights& m = w.moe;
  d.moe.in = u.proj({&m.sh_gate, &m.sh_up, &m.router, &m.sh_gate_scalar}, fuse);
  d.moe.sh_down = u.mat(m.sh_down);
  d.moe.gate_up = u.experts(m.gate_up);
  d.moe.down = u.experts(m.down);
  return d;
}

void bind_all(Uploader& u, const Weights& w, const std::vector<float>& inv_freq, bool fuse, DeviceWeights& d) {
  d.layers.clear();
  int64_t ple_index = 0;
  for (const auto& l : w.layers) {
    d.layers.push_back(layer(u, l, fuse));
    if (d.layers.back().ple) d.layers.back().ple->index = ple_index++;
  }
  d.mixer = hyper(u, w.mixer, fuse);
  d.lm_head = u.mat(w.lm_head);
  d.inv_freq = u.vec(inv_freq, 0.f);
}

}  // namespace

DeviceWeights upload_weights(const Config& c, const Weights& w, const std::vector<float>& inv_freq, bool fuse) {
  (void)c;
  DeviceWeights d;
  Uploader sizing(nullptr);
  bind_all(sizing, w, inv_freq, fuse, d);
  d.buffer = ds4::cuda::DeviceBuffer(sizing.used(), "qwen_next weights");  // admission inside
  Uploader copy(d.buffer.as<uint8_t>());
  bind_all(copy, w, inv_freq, fuse, d);
  // Pageable copies may return before the DMA lands; the step's non-blocking stream would not
  // wait for them.
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

}  // namespace ds4::qwen_next::cuda
