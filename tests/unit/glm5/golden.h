#pragma once
// Access to tests/data/glm5/golden.safetensors (see tests/data/glm5/README.md).
#include <cstring>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "formats/safetensors.h"

namespace ds4::glm5_test {

inline std::string data_dir() { return std::string(DS4_TEST_DATA) + "/glm5"; }
inline std::string model_dir() { return data_dir() + "/model"; }

class Golden {
 public:
  Golden() : f_(read_safetensors(MappedFile::open(data_dir() + "/golden.safetensors"))) {}
  const TensorInfo* find(const std::string& name) const {
    for (const auto& t : f_.tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
  template <class T>
  std::vector<T> get(const std::string& name) const {
    const TensorInfo* t = find(name);
    if (!t) throw std::runtime_error("golden: missing " + name);
    std::vector<T> v(size_t(t->numel()));
    if (t->bytes != v.size() * sizeof(T)) throw std::runtime_error("golden: bad size for " + name);
    std::memcpy(v.data(), t->data, t->bytes);
    return v;
  }
  const SafetensorsFile& file() const { return f_; }

 private:
  SafetensorsFile f_;
};

}  // namespace ds4::glm5_test
