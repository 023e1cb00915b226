#pragma once
// Shared helpers of the qwen_next tests: the committed tiny model and its golden vectors
// (tests/data/qwen_next/README.md states the tolerances used here).
#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "formats/tensor_source.h"
#include "models/qwen_next/model.h"

namespace ds4::qwen_next::test {

inline std::string model_dir() { return std::string(DS4_TEST_DATA) + "/qwen_next/model"; }
inline const char* kPrompts[] = {"p1", "p7", "p64", "p300"};
constexpr float kLogitTol = 1e-4f;  // README: max |logit diff| per stored row

class Golden {
 public:
  Golden() : src_(open_tensor_source(std::string(DS4_TEST_DATA) + "/qwen_next/golden.safetensors")) {}
  template <class T>
  std::vector<T> get(const std::string& name) const {
    const TensorInfo& t = src_->get(name);
    const T* p = static_cast<const T*>(t.data);
    return std::vector<T>(p, p + t.numel());
  }
  std::vector<float> f32(const std::string& n) const { return get<float>(n); }
  std::vector<int32_t> i32(const std::string& n) const { return get<int32_t>(n); }

 private:
  std::unique_ptr<TensorSource> src_;
};

inline std::unique_ptr<QwenNextModel> load_tiny(int threads = 2) {
  LoadOptions o;
  o.threads = threads;
  return std::make_unique<QwenNextModel>(open_tensor_source(model_dir()), o);
}

inline float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  float m = a.size() == b.size() ? 0.0f : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

inline int32_t argmax(std::span<const float> v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace ds4::qwen_next::test
