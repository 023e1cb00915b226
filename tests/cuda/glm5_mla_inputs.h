#pragma once
// Random inputs of GLM's MLA attention kernels (models/glm5/cuda/mla.cu, mla_tc.cu) for their
// tests: latent rows, each token's queries and its selection (ascending positions, distinct),
// every token's buffers at row * stride floats, on the device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "models/glm5/cuda/kernels.h"

namespace ds4::cuda_test {

// h copied to a new device buffer kept alive in `keep`.
template <class T>
T* to_device(const std::vector<T>& h, std::vector<cuda::DeviceBuffer>& keep) {
  keep.emplace_back(h.size() * sizeof(T) + 16, "glm5 mla test");
  T* p = keep.back().as<T>();
  DS4_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

struct MlaInputs {
  glm5::cuda::MlaShape sh;
  int64_t rows = 0, stride = 0;  // a token's q_lat / sel_idx / sel_count / scores / o_lat at row * stride
  std::vector<float> latent;     // {ctx, kv_lora}
  std::vector<int32_t> sel, count;
  const float *d_latent = nullptr, *d_q = nullptr;
  const int32_t *d_sel = nullptr, *d_count = nullptr;
};

// Token r < first.size() selects min(first[r], width, ctx) positions, the others a random count
// in 1 .. min(width, ctx); queries and latent rows N(0, 1).
inline MlaInputs mla_inputs(int64_t heads, int64_t kv_lora, int64_t width, int64_t ctx, int64_t rows,
                            std::initializer_list<int64_t> first, std::mt19937_64& rng,
                            std::vector<cuda::DeviceBuffer>& keep) {
  MlaInputs in;
  in.sh = glm5::cuda::MlaShape{heads, kv_lora, width, 1.0f / std::sqrt(float(kv_lora)), 1e-6f};
  in.rows = rows;
  in.stride = std::max(heads * std::max(width, kv_lora), width) + 16;
  std::normal_distribution<float> nd(0.f, 1.f);
  in.latent.resize(size_t(ctx * kv_lora));
  for (float& v : in.latent) v = nd(rng);
  std::vector<float> q(size_t(rows * in.stride), 0.f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < heads * kv_lora; ++i) q[size_t(r * in.stride + i)] = nd(rng);
  in.sel.assign(size_t(rows * in.stride), 0);
  in.count.assign(size_t(rows * in.stride), 0);
  const std::vector<int64_t> fixed(first);
  const int64_t most = std::min(width, ctx);
  std::vector<int32_t> pick(static_cast<size_t>(ctx));
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n =
        r < int64_t(fixed.size()) ? std::min(fixed[size_t(r)], most) : 1 + int64_t(rng() % uint64_t(most));
    for (int64_t i = 0; i < ctx; ++i) pick[size_t(i)] = int32_t(i);
    std::shuffle(pick.begin(), pick.end(), rng);
    std::sort(pick.begin(), pick.begin() + n);
    for (int64_t i = 0; i < n; ++i) in.sel[size_t(r * in.stride + i)] = pick[size_t(i)];
    in.count[size_t(r * in.stride)] = int32_t(n);
  }
  in.d_latent = to_device(in.latent, keep);
  in.d_q = to_device(q, keep);
  in.d_sel = to_device(in.sel, keep);
  in.d_count = to_device(in.count, keep);
  return in;
}

}  // namespace ds4::cuda_test
