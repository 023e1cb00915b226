#pragma once
// safetensors files: u64 header length, JSON header {name: {dtype, shape, data_offsets},
// "__metadata__": {...}}, then the data section. Every tensor is checked (known dtype,
// shape without overflow, offsets inside the data section, size = numel x element size).
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "formats/tensor_source.h"

namespace ds4 {

struct SafetensorsFile {
  std::shared_ptr<const MappedFile> file;
  nlohmann::json metadata;          // "__metadata__" (string -> string), {} if absent
  std::vector<TensorInfo> tensors;  // in header order
};

// Throws ds4::InputError("<file>: <field>: <problem>").
SafetensorsFile read_safetensors(std::shared_ptr<const MappedFile> file);

// dtype strings as safetensors spells them; false if unknown.
bool dtype_from_safetensors(const std::string& s, DType* out);

}  // namespace ds4
