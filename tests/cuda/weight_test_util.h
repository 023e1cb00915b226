#pragma once
// Host helpers of the weight-product tests (test_cuda_matmul, test_cuda_grouped_gemm): a
// format's printed name, the CPU decoder's f32 weights, normal random inputs.
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/weight.h"
#include "host_ref.h"

namespace ds4::cuda_test {

inline std::string fmt_name(DType t, DType st) {
  std::string n(dtype_name(t));
  if (t == DType::MLX_Q4 || t == DType::MLX_Q8) n += st == DType::BF16 ? "_bf16s" : "_f16s";
  return n;
}

inline std::vector<float> host_rows(const HostWeight& hw) {  // {rows, cols}
  const WeightMatrix v = host_view(hw);
  std::vector<float> w(size_t(hw.rows * hw.cols));
  for (int64_t r = 0; r < hw.rows; ++r) dequantize_row(v, r, w.data() + r * hw.cols);
  return w;
}

inline std::vector<float> randn(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace ds4::cuda_test
