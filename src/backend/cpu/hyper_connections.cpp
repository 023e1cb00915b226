#include "backend/cpu/hyper_connections.h"

#include <cmath>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/norm.h"
#include "core/thread_pool.h"

namespace ds4::cpu {

void hc_sinkhorn_f32(float* c, int64_t hc, int iters, float eps) {
  auto cols = [&] {
    for (int64_t j = 0; j < hc; ++j) {
      float s = 0;
      for (int64_t i = 0; i < hc; ++i) s += c[i * hc + j];
      for (int64_t i = 0; i < hc; ++i) c[i * hc + j] /= s + eps;
    }
  };
  auto rows = [&] {
    for (int64_t i = 0; i < hc; ++i) {
      float s = 0;
      for (int64_t j = 0; j < hc; ++j) s += c[i * hc + j];
      for (int64_t j = 0; j < hc; ++j) c[i * hc + j] /= s + eps;
    }
  };
  cols();
  for (int it = 1; it < iters; ++it) {
    rows();
    cols();
  }
}

void hc_pre_f32(const HcWeights& w, const float* x, int64_t n, float* post, float* comb,
                float* collapsed, ThreadPool* pool) {
  const int64_t hc = w.hc, dim = w.dim, flat_n = hc * dim, mixes = (2 + hc) * hc;
  // {n, hc*dim}: unweighted RMSNorm over all streams of a token together.
  std::vector<float> flat(size_t(n * flat_n)), m(size_t(n * mixes));
  for (int64_t t = 0; t < n; ++t)
    rmsnorm_f32(x + t * flat_n, nullptr, 1.0f, flat_n, w.norm_eps, flat.data() + t * flat_n);
  matmul(w.fn, flat.data(), n, m.data(), pool);  // {n, mixes}
  std::vector<float> pre(static_cast<size_t>(hc));
  for (int64_t t = 0; t < n; ++t) {
    const float* mt = m.data() + t * mixes;
    for (int64_t s = 0; s < hc; ++s) {
      pre[s] = sigmoid(mt[s] * w.scale[0] + w.base[s]) + w.eps;
      post[t * hc + s] = 2.0f * sigmoid(mt[hc + s] * w.scale[1] + w.base[hc + s]);
    }
    float* c = comb + t * hc * hc;
    for (int64_t i = 0; i < hc; ++i) {
      for (int64_t j = 0; j < hc; ++j) c[i * hc + j] = mt[2 * hc + i * hc + j] * w.scale[2] + w.base[2 * hc + i * hc + j];
      softmax_f32(c + i * hc, hc);
      for (int64_t j = 0; j < hc; ++j) c[i * hc + j] += w.eps;
    }
    hc_sinkhorn_f32(c, hc, w.sinkhorn_iters, w.eps);
    float* o = collapsed + t * dim;
    for (int64_t e = 0; e < dim; ++e) {
      float acc = 0;
      for (int64_t s = 0; s < hc; ++s) acc += pre[s] * x[t * flat_n + s * dim + e];
      o[e] = acc;
    }
  }
}

void hc_post_f32(const float* x, const float* y, const float* post, const float* comb, int64_t n,
                 int64_t hc, int64_t dim, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    const float* c = comb + t * hc * hc;
    for (int64_t i = 0; i < hc; ++i) {
      float* o = out + (t * hc + i) * dim;
      const float p = post[t * hc + i];
      for (int64_t e = 0; e < dim; ++e) o[e] = p * y[t * dim + e];
      for (int64_t j = 0; j < hc; ++j) {
        const float cji = c[j * hc + i];
        const float* xj = x + (t * hc + j) * dim;
        for (int64_t e = 0; e < dim; ++e) o[e] += cji * xj[e];
      }
    }
  }
}

}  // namespace ds4::cpu
