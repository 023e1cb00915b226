#pragma once
// One view over a model's tensors and config, whatever the file format: an HF/MLX
// safetensors directory (config.json + *.safetensors, sharded via
// model.safetensors.index.json) or a GGUF file. Tensors are zero-copy views into mmap'd
// files; shapes use torch order (outermost first), also for GGUF (whose ne[] is reversed).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/weight.h"

namespace ds4 {

struct TensorInfo {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> shape;  // torch order, e.g. {out_features, in_features}
  const void* data = nullptr;
  size_t bytes = 0;
  std::string file;            // which file it lives in, for error messages
  int64_t numel() const;
};

class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual const std::vector<TensorInfo>& tensors() const = 0;
  // HF-style config: config.json for a directory; for GGUF the JSON stored under
  // "ds4.config_json" if present, else built from the architecture's metadata keys.
  virtual const nlohmann::json& config() const = 0;
  // GGUF metadata as JSON ({} for safetensors).
  virtual const nlohmann::json& metadata() const = 0;
  virtual const std::string& path() const = 0;
  // "gguf" or "safetensors" (for tools and messages).
  virtual std::string format() const { return "unknown"; }

  const TensorInfo* find(std::string_view name) const;
  // Throws ds4::InputError naming the file and tensor when missing.
  const TensorInfo& get(std::string_view name) const;
  // get() + checks dtype class and shape; names the tensor, the expected and the actual shape.
  const TensorInfo& get(std::string_view name, const std::vector<int64_t>& expected_shape) const;
};

std::unique_ptr<TensorSource> open_tensor_source(const std::string& path);

// 2-D tensor {rows, cols} -> WeightMatrix (any plain or ggml block type).
WeightMatrix as_matrix(const TensorInfo& t);
// Slice `index` of a stacked 3-D tensor {n, rows, cols} (stacked experts).
WeightMatrix as_matrix_slice(const TensorInfo& t, int64_t index);
// MLX affine triple "<prefix>.weight" (U32 packed), "<prefix>.scales", "<prefix>.biases";
// bits and group size inferred from shapes (or taken from config "quantization").
WeightMatrix mlx_matrix(const TensorSource& src, std::string_view prefix);
// Slice `index` of stacked MLX affine experts: weight {n, rows, packed}, scales/biases {n, rows, groups}.
WeightMatrix mlx_matrix_slice(const TensorSource& src, std::string_view prefix, int64_t index);

// The language-model part of an HF config: config["text_config"] when present (multimodal
// checkpoints nest it there), else the config itself.
const nlohmann::json& text_config(const nlohmann::json& config);
// A JSON file's contents; InputError "PATH: cannot open" / "PATH: invalid JSON: ..." otherwise.
nlohmann::json read_json_file(const std::string& path);

}  // namespace ds4
