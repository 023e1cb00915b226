// matvec/matmul for every weight type and SIMD path against a double-precision reference
// over the decoded rows (the decoders themselves are checked bit-exactly in test_quant).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "core/weight.h"

using namespace ds4;

namespace {

struct Owned {
  WeightMatrix w;
  std::vector<uint8_t> data, scales, biases;
};

Owned make(DType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(rows * cols));
  for (float& v : x) v = nd(rng);
  Owned o;
  o.w.type = t;
  o.w.rows = rows;
  o.w.cols = cols;
  if (t == DType::MLX_Q4 || t == DType::MLX_Q8) {
    int bits = t == DType::MLX_Q4 ? 4 : 8;
    o.data.resize(size_t(rows * cols * bits / 8));
    o.scales.resize(size_t(rows * cols / 64 * 2));
    o.biases.resize(o.scales.size());
    for (int64_t r = 0; r < rows; ++r)
      quantize_mlx(x.data() + r * cols, cols, bits, 64, DType::BF16,
                   reinterpret_cast<uint32_t*>(o.data.data()) + r * cols * bits / 32, o.scales.data() + r * cols / 64 * 2,
                   o.biases.data() + r * cols / 64 * 2);
    o.w.scales = o.scales.data();
    o.w.biases = o.biases.data();
    o.w.scale_type = DType::BF16;
    o.w.group_size = 64;
  } else {
    o.data.resize(size_t(rows * row_bytes(t, cols)));
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* dst = o.data.data() + r * row_bytes(t, cols);
      const float* src = x.data() + r * cols;
      if (t == DType::F32) std::memcpy(dst, src, size_t(cols) * 4);
      else if (t == DType::F16 || t == DType::BF16)
        for (int64_t i = 0; i < cols; ++i) {
          uint16_t h = t == DType::F16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
          std::memcpy(dst + 2 * i, &h, 2);
        }
      else if (t == DType::Q8_0) quantize_q8_0(src, dst, cols);
      else if (t == DType::Q4_K) quantize_q4_k(src, dst, cols);
      else  // Q2_K / IQ2_XXS have no quantizer: random bytes with a sane f16 scale
        for (int64_t b = 0; b < cols / 256; ++b) {
          uint8_t* blk = dst + b * block_geometry(t).bytes;
          for (int64_t i = 0; i < block_geometry(t).bytes; ++i) blk[i] = uint8_t(rng());
          uint16_t d = f32_to_f16(0.01f);
          std::memcpy(blk + (t == DType::Q2_K ? 80 : 0), &d, 2);
          if (t == DType::Q2_K) std::memcpy(blk + 82, &d, 2);
        }
    }
  }
  o.w.data = o.data.data();
  return o;
}

}  // namespace

TEST(Matmul, AllTypesAllPathsBatched) {
  std::mt19937 rng(3);
  ThreadPool pool(2);
  const DType types[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K,
                         DType::Q2_K, DType::IQ2_XXS, DType::MLX_Q4, DType::MLX_Q8};
  const SimdLevel saved = simd_level();
  for (DType t : types) {
    const int64_t rows = 37, cols = 512, n = 5;  // 37: tiles and the 4-row kernel both get remainders
    Owned o = make(t, rows, cols, rng);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(size_t(n * cols));
    for (float& v : x) v = nd(rng);
    set_simd_level(SimdLevel::Scalar);
    std::vector<float> wf(size_t(rows * cols));
    for (int64_t r = 0; r < rows; ++r) dequantize_row(o.w, r, wf.data() + r * cols);
    for (int lv = 0; lv <= int(simd_supported()); ++lv) {
      set_simd_level(SimdLevel(lv));
      std::vector<float> y(size_t(n * rows));
      std::vector<float> y1(static_cast<size_t>(rows));
      matmul(o.w, x.data(), n, y.data(), &pool);
      matvec(o.w, x.data() + cols, y1.data());
      for (int64_t tk = 0; tk < n; ++tk)
        for (int64_t r = 0; r < rows; ++r) {
          double ref = 0, mag = 0;
          for (int64_t c = 0; c < cols; ++c) {
            ref += double(wf[size_t(r * cols + c)]) * x[size_t(tk * cols + c)];
            mag += std::fabs(double(wf[size_t(r * cols + c)]) * x[size_t(tk * cols + c)]);
          }
          ASSERT_NEAR(y[size_t(tk * rows + r)], ref, 1e-5 * mag + 1e-6)
              << dtype_name(t) << " " << simd_level_name(SimdLevel(lv)) << " token " << tk << " row " << r;
          if (tk == 1) {
            ASSERT_EQ(y1[size_t(r)], y[size_t(rows + r)]) << "matvec and matmul must agree exactly";
          }
        }
    }
  }
  set_simd_level(saved);
}
