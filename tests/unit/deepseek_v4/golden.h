#pragma once
// Golden vectors of the tiny DeepSeek V4 model (tests/data/deepseek_v4/README.md).
#include <cstdint>
#include <string>
#include <vector>

#include "formats/safetensors.h"

namespace ds4_test {

inline const std::string kModelDir = std::string(DS4_TEST_DATA) + "/deepseek_v4/model";
inline const std::string kGolden = std::string(DS4_TEST_DATA) + "/deepseek_v4/golden.safetensors";
inline constexpr int kPrompts[] = {1, 7, 64, 300};
inline constexpr float kLogitTol = 1e-3f;  // README: HF cached vs no-cache differ by 3e-5

struct Golden {
  ds4::SafetensorsFile f = ds4::read_safetensors(ds4::MappedFile::open(kGolden));
  const ds4::TensorInfo& get(const std::string& name) const {
    for (const auto& t : f.tensors)
      if (t.name == name) return t;
    throw std::runtime_error("golden tensor missing: " + name);
  }
  std::vector<float> f32(const std::string& name) const {
    const auto& t = get(name);
    const float* p = static_cast<const float*>(t.data);
    return {p, p + t.numel()};
  }
  std::vector<int32_t> i32(const std::string& name) const {
    const auto& t = get(name);
    const int32_t* p = static_cast<const int32_t*>(t.data);
    return {p, p + t.numel()};
  }
};

inline float max_abs_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

inline int32_t argmax(const float* x, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return int32_t(best);
}

}  // namespace ds4_test
