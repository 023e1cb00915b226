// Hyper-connections (HF Qwen4ExpTextGatedResidual; MTPLX GatedResidual, whose fused
// hc_read_v3 kernel computes the same read): hc parallel residual streams; each block
// reads one mixed row from them and writes its output back with a per-stream weight.
#include <cmath>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/norm.h"
#include "models/qwen_next/layers.h"

namespace ds4::qwen_next {

void hyper_read(const Ctx& x, const HyperWeights& w, const float* h, int64_t n, float* mixed, float* inject) {
  const Config& c = x.c;
  const int64_t W = c.wide(), d = c.hidden, r = c.hc_rank;
  std::vector<float> normed(size_t(n * W)), low(size_t(n * r)), mix(size_t(n * W));
  for (int64_t t = 0; t < n; ++t)
    cpu::rmsnorm_grouped_f32(h + t * W, w.norm.data(), 1.0f, W, d, c.rms_eps, normed.data() + t * W);
  matmul(w.down, normed.data(), n, low.data(), x.pool);  // {n, rank}
  const float inv_hc = 1.0f / float(c.hc);
  for (auto& v : low) v = cpu::silu(v * inv_hc);
  matmul(w.up, low.data(), n, mix.data(), x.pool);  // {n, hc*d}
  for (int64_t t = 0; t < n; ++t) {
    float* m = mixed + t * d;
    for (int64_t i = 0; i < d; ++i) {
      float s = 0;
      for (int64_t k = 0; k < c.hc; ++k) s += cpu::sigmoid(mix[size_t(t * W + k * d + i)]) * normed[size_t(t * W + k * d + i)];
      m[i] = s * inv_hc;  // mean over streams
    }
  }
  if (!inject) return;
  matmul(w.inject, normed.data(), n, inject, x.pool);  // {n, hc}
  for (int64_t i = 0; i < n * c.hc; ++i) inject[i] = 2.0f * cpu::sigmoid(inject[i] * inv_hc);
}

void hyper_write(const Ctx& x, float* h, const float* out, const float* inject, int64_t n) {
  const Config& c = x.c;
  const int64_t d = c.hidden;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t k = 0; k < c.hc; ++k) {
      float* hs = h + t * c.wide() + k * d;
      const float g = inject[t * c.hc + k];
      for (int64_t i = 0; i < d; ++i) hs[i] += out[t * d + i] * g;
    }
}

}  // namespace ds4::qwen_next
