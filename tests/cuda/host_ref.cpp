#include "host_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "core/half.h"

namespace ds4::cuda_test {

namespace {

void wr16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

}  // namespace

WeightMatrix host_view(const HostWeight& h) {
  WeightMatrix w;
  w.type = h.type;
  w.rows = h.rows;
  w.cols = h.cols;
  w.data = h.data.data();
  w.scales = h.scales.empty() ? nullptr : h.scales.data();
  w.biases = h.biases.empty() ? nullptr : h.biases.data();
  w.scale_type = h.scale_type;
  w.group_size = h.group_size;
  return w;
}

HostWeight random_weight(DType type, int64_t rows, int64_t cols, std::mt19937_64& rng, int64_t group_size,
                         DType scale_type) {
  HostWeight w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  const int64_t rb = row_bytes(type, cols);
  w.data.resize(size_t(rows * rb));
  for (auto& b : w.data) b = uint8_t(rng());
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  std::normal_distribution<float> n(0.f, 0.05f);
  auto put_f16 = [&](uint8_t* p, float v) { wr16(p, f32_to_f16(v)); };
  const BlockGeometry g = block_geometry(type);
  const int64_t blocks = rows * (cols / g.elements);
  switch (type) {
    case DType::F32:
      for (int64_t e = 0; e < rows * cols; ++e) {
        const float v = n(rng);
        std::memcpy(&w.data[4 * e], &v, 4);
      }
      break;
    case DType::F16:
    case DType::BF16:
      for (int64_t e = 0; e < rows * cols; ++e)
        wr16(&w.data[2 * e], type == DType::BF16 ? f32_to_bf16(n(rng)) : f32_to_f16(n(rng)));
      break;
    case DType::Q8_0:  // |q| <= 127: d ~ 4e-4 gives |w| up to 0.05
      for (int64_t b = 0; b < blocks; ++b) put_f16(&w.data[b * 34], 4e-4f * u(rng));
      break;
    case DType::Q4_K:  // sc, mn < 64, q < 16
      for (int64_t b = 0; b < blocks; ++b) {
        put_f16(&w.data[b * 144], 1e-4f * u(rng));
        put_f16(&w.data[b * 144 + 2], 2e-4f * u(rng));
      }
      break;
    case DType::Q2_K:  // scale, min < 16, q < 4
      for (int64_t b = 0; b < blocks; ++b) {
        put_f16(&w.data[b * 84 + 80], 2e-3f * u(rng));
        put_f16(&w.data[b * 84 + 82], 1e-3f * u(rng));
      }
      break;
    case DType::IQ2_XXS:  // magnitudes up to 43, scale up to 15.5/4
      for (int64_t b = 0; b < blocks; ++b) put_f16(&w.data[b * 66], 2e-4f * u(rng));
      break;
    case DType::MLX_Q4:
    case DType::MLX_Q8: {
      if (group_size <= 0 || cols % group_size != 0) throw std::runtime_error("random_weight: bad MLX group");
      w.group_size = group_size;
      w.scale_type = scale_type;
      const int64_t ng = rows * (cols / group_size);
      w.scales.resize(size_t(2 * ng));
      w.biases.resize(size_t(2 * ng));
      const float qmax = type == DType::MLX_Q4 ? 15.f : 255.f;
      for (int64_t i = 0; i < ng; ++i) {
        const float s = 0.1f / qmax * u(rng), bias = -0.05f * u(rng);
        wr16(&w.scales[2 * i], scale_type == DType::BF16 ? f32_to_bf16(s) : f32_to_f16(s));
        wr16(&w.biases[2 * i], scale_type == DType::BF16 ? f32_to_bf16(bias) : f32_to_f16(bias));
      }
      break;
    }
    default:
      throw std::runtime_error("random_weight: unsupported type " + std::string(dtype_name(type)));
  }
  return w;
}

void topk_select_ref(const float* x, int64_t n, int64_t k, std::vector<uint8_t>& keep, std::vector<int32_t>& list) {
  n = std::max<int64_t>(n, 0);
  const int64_t take = std::clamp<int64_t>(k, 0, n);
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  // A strict weak order: numbers by value (== folds -0 onto +0), every NaN after them.
  auto first = [x](int32_t a, int32_t b) {
    const bool na = std::isnan(x[a]), nb = std::isnan(x[b]);
    if (na != nb) return nb;
    if (!na && x[a] != x[b]) return x[a] > x[b];
    return a < b;
  };
  std::partial_sort(idx.begin(), idx.begin() + take, idx.end(), first);
  keep.assign(size_t(n), 0);
  for (int64_t i = 0; i < take; ++i) keep[size_t(idx[size_t(i)])] = 1;
  list.clear();
  for (int64_t i = 0; i < n; ++i)
    if (keep[size_t(i)]) list.push_back(int32_t(i));
}

void topk_rank_ref(const float* x, int64_t n, int64_t k, std::vector<uint8_t>& keep) {
  keep.assign(size_t(std::max<int64_t>(n, 0)), 0);
  for (int64_t b = 0; b < n; ++b) {
    int64_t rank = 0;
    for (int64_t o = 0; o < n; ++o) rank += x[o] > x[b] || (x[o] == x[b] && o < b);
    keep[size_t(b)] = rank < k;
  }
}

}  // namespace ds4::cuda_test
