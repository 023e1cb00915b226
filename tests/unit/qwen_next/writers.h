#pragma once
// Test-only writers for model copies in other encodings (the product never writes
// safetensors; GGUF writing lives in formats/).
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/half.h"
#include "formats/tensor_source.h"

namespace ds4::qwen_next::test {

struct OutTensor {
  std::string dtype;  // safetensors spelling
  DType type;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline void write_safetensors(const std::filesystem::path& file, const std::map<std::string, OutTensor>& ts) {
  nlohmann::json h = nlohmann::json::object();
  size_t off = 0;
  for (const auto& [name, t] : ts) {
    h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  std::string hs = h.dump();
  hs.append((8 - hs.size() % 8) % 8, ' ');
  std::ofstream f(file, std::ios::binary);
  const uint64_t n = hs.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f.write(hs.data(), std::streamsize(hs.size()));
  for (const auto& [name, t] : ts) f.write(reinterpret_cast<const char*>(t.bytes.data()), std::streamsize(t.bytes.size()));
}

inline std::vector<float> as_f32(const TensorInfo& t) {
  std::vector<float> v(size_t(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * 4);
  return v;
}

inline OutTensor plain(const TensorInfo& t, DType type) {
  OutTensor o{type == DType::BF16 ? "BF16" : "F32", type, t.shape, {}};
  const auto v = as_f32(t);
  if (type == DType::F32) {
    o.bytes.resize(v.size() * 4);
    std::memcpy(o.bytes.data(), v.data(), o.bytes.size());
  } else {
    o.bytes.resize(v.size() * 2);
    auto* p = reinterpret_cast<uint16_t*>(o.bytes.data());
    for (size_t i = 0; i < v.size(); ++i) p[i] = f32_to_bf16(v[i]);
  }
  return o;
}

}  // namespace ds4::qwen_next::test
