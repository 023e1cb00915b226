// TensorInfo -> WeightMatrix views (zero-copy), including MLX affine triples.
#include <string>

#include "core/error.h"
#include "formats/tensor_source.h"

namespace ds4 {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "{";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "}";
}

[[noreturn]] void fail(const TensorInfo& t, const std::string& problem) {
  throw InputError(t.file + ": tensor '" + t.name + "': " + problem);
}

bool is_weight_type(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::F8_E4M3:
    case DType::Q8_0: case DType::Q4_K: case DType::Q2_K: case DType::IQ2_XXS:
      return true;
    default:
      return false;
  }
}

WeightMatrix make(const TensorInfo& t, const uint8_t* data, int64_t rows, int64_t cols) {
  if (!is_weight_type(t.type)) fail(t, "type " + std::string(dtype_name(t.type)) + " is not a weight type");
  if (cols % block_geometry(t.type).elements != 0)
    fail(t, "row length " + std::to_string(cols) + " is not whole " + std::string(dtype_name(t.type)) + " blocks");
  WeightMatrix w;
  w.type = t.type;
  w.rows = rows;
  w.cols = cols;
  w.data = data;
  return w;
}

struct MlxParams {
  int bits;
  int64_t group;
};

// Bits and group size: from config "quantization" (per-layer entry first), else inferred
// from the shapes: packed_cols * 32 = groups * group * bits. MLX's defaults break ties.
MlxParams mlx_params(const TensorSource& src, std::string_view prefix, int64_t packed, int64_t groups,
                     const TensorInfo& w) {
  const nlohmann::json& cfg = src.config();
  for (const char* key : {"quantization", "quantization_config"}) {
    auto q = cfg.find(key);
    if (q == cfg.end() || !q->is_object()) continue;
    const nlohmann::json* e = &*q;
    auto layer = q->find(std::string(prefix));
    if (layer != q->end() && layer->is_object()) e = &*layer;
    if (e->contains("bits") && e->contains("group_size") && (*e)["bits"].is_number_integer() &&
        (*e)["group_size"].is_number_integer())
      return {(*e)["bits"].get<int>(), (*e)["group_size"].get<int64_t>()};
  }
  if (groups <= 0) fail(w, "MLX scales have no groups");
  for (MlxParams p : {MlxParams{4, 64}, MlxParams{8, 64}, MlxParams{4, 32}, MlxParams{8, 32}})
    if (packed * 32 == groups * p.group * p.bits) return p;
  fail(w, "cannot infer MLX bits/group from packed cols " + std::to_string(packed) + " and " + std::to_string(groups) + " groups");
}

WeightMatrix mlx_view(const TensorSource& src, std::string_view prefix, int64_t index) {
  std::string p(prefix);
  const TensorInfo& w = src.get(p + ".weight");
  const TensorInfo& s = src.get(p + ".scales");
  const TensorInfo& b = src.get(p + ".biases");
  size_t nd = index < 0 ? 2 : 3;
  if (w.type != DType::U32) fail(w, "MLX packed weight must be U32, is " + std::string(dtype_name(w.type)));
  if (w.shape.size() != nd || s.shape.size() != nd) fail(w, "MLX weight/scales must be " + std::to_string(nd) + "-D, are " + shape_str(w.shape) + " / " + shape_str(s.shape));
  if (s.shape != b.shape || s.type != b.type) fail(b, "biases " + shape_str(b.shape) + " do not match scales " + shape_str(s.shape));
  if (s.type != DType::F16 && s.type != DType::BF16 && s.type != DType::F32) fail(s, "MLX scales must be F16/BF16/F32");
  int64_t rows = w.shape[nd - 2], packed = w.shape[nd - 1], groups = s.shape[nd - 1];
  if (s.shape[nd - 2] != rows || (nd == 3 && s.shape[0] != w.shape[0])) fail(s, "scales " + shape_str(s.shape) + " do not match weight " + shape_str(w.shape));
  MlxParams mp = mlx_params(src, prefix, packed, groups, w);
  if ((mp.bits != 4 && mp.bits != 8) || (mp.group != 32 && mp.group != 64))
    fail(w, "MLX bits " + std::to_string(mp.bits) + " group " + std::to_string(mp.group) + " not supported (4/8 bits, group 32/64)");
  int64_t cols = packed * 32 / mp.bits;
  if (cols != groups * mp.group) fail(w, "packed cols " + std::to_string(packed) + " do not match " + std::to_string(groups) + " groups of " + std::to_string(mp.group));
  int64_t slice = 0;
  if (nd == 3) {
    if (index >= w.shape[0]) fail(w, "slice " + std::to_string(index) + " out of range 0.." + std::to_string(w.shape[0] - 1));
    slice = index;
  }
  size_t ssize = size_t(block_geometry(s.type).bytes);
  WeightMatrix m;
  m.type = mp.bits == 4 ? DType::MLX_Q4 : DType::MLX_Q8;
  m.rows = rows;
  m.cols = cols;
  m.data = static_cast<const uint8_t*>(w.data) + size_t(slice * rows * packed * 4);
  m.scales = static_cast<const uint8_t*>(s.data) + size_t(slice * rows * groups) * ssize;
  m.biases = static_cast<const uint8_t*>(b.data) + size_t(slice * rows * groups) * ssize;
  m.scale_type = s.type;
  m.group_size = mp.group;
  return m;
}

}  // namespace

WeightMatrix as_matrix(const TensorInfo& t) {
  if (t.shape.size() != 2) fail(t, "expected a 2-D matrix, shape is " + shape_str(t.shape));
  return make(t, static_cast<const uint8_t*>(t.data), t.shape[0], t.shape[1]);
}

WeightMatrix as_matrix_slice(const TensorInfo& t, int64_t index) {
  if (t.shape.size() != 3) fail(t, "expected a stacked 3-D tensor, shape is " + shape_str(t.shape));
  if (index < 0 || index >= t.shape[0]) fail(t, "slice " + std::to_string(index) + " out of range 0.." + std::to_string(t.shape[0] - 1));
  WeightMatrix w = make(t, static_cast<const uint8_t*>(t.data), t.shape[1], t.shape[2]);
  w.data = static_cast<const uint8_t*>(t.data) + size_t(index) * size_t(w.rows * w.row_stride_bytes());
  return w;
}

WeightMatrix mlx_matrix(const TensorSource& src, std::string_view prefix) { return mlx_view(src, prefix, -1); }

WeightMatrix mlx_matrix_slice(const TensorSource& src, std::string_view prefix, int64_t index) {
  if (index < 0) throw InputError(src.path() + ": " + std::string(prefix) + ": negative slice index");
  return mlx_view(src, prefix, index);
}

}  // namespace ds4
