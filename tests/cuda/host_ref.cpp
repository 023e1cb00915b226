#include "host_ref.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "backend/cuda/iq2xxs_grid.h"
#include "core/half.h"

namespace ds4::cuda_test {

float f16_to_float(uint16_t h) { return ds4::f16_to_f32(h); }
uint16_t float_to_f16(float f) { return ds4::f32_to_f16(f); }

namespace {

uint16_t rd16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t rd32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
void wr16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

float scale_value(DType t, uint16_t bits) { return t == DType::BF16 ? bf16_to_f32(bits) : f16_to_f32(bits); }

// Q4_K's 6-bit scale and min of sub-block j from the 12 packed bytes.
void q4k_scale_min(const uint8_t* s, int j, int& sc, int& mn) {
  if (j < 4) {
    sc = s[j] & 63;
    mn = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

}  // namespace

void dequantize_row_ref(const HostWeight& w, int64_t r, float* out) {
  const int64_t rb = row_bytes(w.type, w.cols);
  const uint8_t* row = w.data.data() + r * rb;
  switch (w.type) {
    case DType::F16:
    case DType::BF16:
      for (int64_t e = 0; e < w.cols; ++e) out[e] = scale_value(w.type, rd16(row + 2 * e));
      return;
    case DType::Q8_0:
      for (int64_t e = 0; e < w.cols; ++e) {
        const uint8_t* b = row + (e / 32) * 34;
        out[e] = f16_to_f32(rd16(b)) * float(int8_t(b[2 + e % 32]));
      }
      return;
    case DType::Q4_K:
      for (int64_t e = 0; e < w.cols; ++e) {
        const uint8_t* b = row + (e / 256) * 144;
        const int i = int(e % 256), j = i / 32;
        int sc, mn;
        q4k_scale_min(b + 4, j, sc, mn);
        const int q = (b[16 + (i / 64) * 32 + i % 32] >> (4 * ((i % 64) / 32))) & 0xf;
        out[e] = f16_to_f32(rd16(b)) * float(sc) * float(q) - f16_to_f32(rd16(b + 2)) * float(mn);
      }
      return;
    case DType::Q2_K:
      for (int64_t e = 0; e < w.cols; ++e) {
        const uint8_t* b = row + (e / 256) * 84;
        const int i = int(e % 256), g = i / 16;
        const int q = (b[16 + (i / 128) * 32 + i % 32] >> (2 * ((i % 128) / 32))) & 3;
        out[e] = f16_to_f32(rd16(b + 80)) * float(b[g] & 0xf) * float(q) - f16_to_f32(rd16(b + 82)) * float(b[g] >> 4);
      }
      return;
    case DType::IQ2_XXS:
      for (int64_t e = 0; e < w.cols; ++e) {
        const uint8_t* b = row + (e / 256) * 66;
        const int i = int(e % 256), ib = i / 32, l = (i % 32) / 8, k = i % 8;
        const uint32_t aux0 = rd32(b + 2 + 8 * ib), aux1 = rd32(b + 6 + 8 * ib);
        const float db = f16_to_f32(rd16(b)) * (0.5f + float(aux1 >> 28)) * 0.25f;
        const uint8_t mag = uint8_t(cuda::kIq2xxsGrid[(aux0 >> (8 * l)) & 0xff] >> (8 * k));
        const uint8_t signs = cuda::iq2xxs_sign_byte((aux1 >> (7 * l)) & 127);
        out[e] = db * float(mag) * ((signs >> k) & 1 ? -1.f : 1.f);
      }
      return;
    case DType::MLX_Q4:
    case DType::MLX_Q8: {
      const int bits = w.type == DType::MLX_Q4 ? 4 : 8, per = 32 / bits;
      const int64_t groups = w.cols / w.group_size;
      for (int64_t e = 0; e < w.cols; ++e) {
        const uint32_t word = rd32(row + 4 * (e / per));
        const uint32_t q = (word >> (bits * (e % per))) & ((1u << bits) - 1);
        const int64_t g = r * groups + e / w.group_size;
        out[e] = scale_value(w.scale_type, rd16(&w.scales[2 * g])) * float(q) +
                 scale_value(w.scale_type, rd16(&w.biases[2 * g]));
      }
      return;
    }
    default:
      throw std::runtime_error("dequantize_row_ref: unsupported type " + std::string(dtype_name(w.type)));
  }
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

}  // namespace ds4::cuda_test
