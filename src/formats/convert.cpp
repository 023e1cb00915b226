// Streams each tensor row by row: decode the source row to f32 (plain floats, F8, MLX
// affine), encode it in the target type, append it to the GGUF. Memory stays at one row.
#include "formats/convert.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/quant.h"
#include "formats/gguf.h"
#include "formats/tensor_source.h"

namespace ds4 {
namespace {

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

bool is_expert(const std::string& n) {
  return n.find("experts") != std::string::npos || n.find("_exps") != std::string::npos ||
         n.find("switch_mlp") != std::string::npos;
}

// One tensor to write: where its rows come from and what it becomes.
struct Plan {
  std::string name;
  std::vector<int64_t> shape;  // logical (dequantized) shape
  WeightMatrix src;            // all rows flattened: {prod(shape[:-1]), shape[-1]}
  const TensorInfo* raw = nullptr;  // integer tensors: copied byte for byte
  DType out = DType::F16;
};

WeightMatrix flat_matrix(const TensorInfo& t) {
  WeightMatrix w;
  w.type = t.type;
  w.cols = t.shape.empty() ? 1 : t.shape.back();
  w.rows = w.cols == 0 ? 0 : t.numel() / w.cols;
  w.data = t.data;
  return w;
}

// MLX triple -> flattened affine matrix over all leading dims (stacked experts included).
bool mlx_plan(const TensorSource& src, const TensorInfo& t, Plan* p) {
  if (t.type != DType::U32 || !ends_with(t.name, ".weight")) return false;
  std::string prefix = t.name.substr(0, t.name.size() - 7);
  if (!src.find(prefix + ".scales") || !src.find(prefix + ".biases")) return false;
  WeightMatrix m = t.shape.size() == 3 ? mlx_matrix_slice(src, prefix, 0) : mlx_matrix(src, prefix);
  int64_t lead = t.shape.size() == 3 ? t.shape[0] : 1;
  p->shape = t.shape;
  p->shape.back() = m.cols;
  m.rows *= lead;  // slices are contiguous in weight, scales and biases
  p->src = m;
  return true;
}

DType choose(const Plan& p, const ConvertOptions& opt, ConvertReport& rep) {
  bool norm = p.name.find("norm") != std::string::npos;
  if (p.shape.size() <= 1 || norm) {
    ++rep.kept_f32;
    return DType::F32;
  }
  DType want = opt.experts_set && is_expert(p.name) ? opt.quant_experts : opt.quant;
  if (p.shape.back() % block_geometry(want).elements != 0) {
    ++rep.fallback_f16;
    return DType::F16;
  }
  return want;
}

void encode_row(DType t, const float* x, int64_t n, uint8_t* out) {
  switch (t) {
    case DType::F32: std::memcpy(out, x, size_t(n) * 4); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = f32_to_f16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case DType::Q8_0: quantize_q8_0(x, out, n); return;
    case DType::Q4_K: quantize_q4_k(x, out, n); return;
    default: throw Error("convert: cannot encode " + std::string(dtype_name(t)));
  }
}

std::vector<Plan> make_plans(const TensorSource& src, const ConvertOptions& opt, ConvertReport& rep) {
  std::vector<Plan> plans;
  for (const TensorInfo& t : src.tensors()) {
    if (ends_with(t.name, ".scales") || ends_with(t.name, ".biases")) {
      std::string prefix = t.name.substr(0, t.name.size() - 7);
      const TensorInfo* w = src.find(prefix + ".weight");
      if (w && w->type == DType::U32) continue;  // folded into the MLX weight
    }
    Plan p;
    p.name = t.name;
    p.shape = t.shape.empty() ? std::vector<int64_t>{1} : t.shape;
    if (t.shape.size() > 4) throw InputError(t.file + ": tensor '" + t.name + "': more than 4 dims do not fit GGUF");
    if (mlx_plan(src, t, &p)) {
      p.out = choose(p, opt, rep);
    } else if (t.type == DType::I8 || t.type == DType::I32 || t.type == DType::I64) {
      p.raw = &t;
      p.out = t.type;
      ++rep.copied_integer;
    } else if (t.type == DType::F32 || t.type == DType::F16 || t.type == DType::BF16 || t.type == DType::F8_E4M3) {
      p.src = flat_matrix(t);
      p.out = choose(p, opt, rep);
    } else {
      throw InputError(t.file + ": tensor '" + t.name + "': type " + std::string(dtype_name(t.type)) +
                       " cannot be converted (not a float weight nor an MLX triple)");
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

DType parse_convert_type(const std::string& s) {
  std::string u = s;
  for (char& c : u) c = char(std::toupper(static_cast<unsigned char>(c)));
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K})
    if (u == dtype_name(t)) return t;
  throw InputError("--quant: unknown type '" + s + "' (F32, F16, BF16, Q8_0, Q4_K)");
}

ConvertReport convert_to_gguf(const std::string& in, const std::string& out, const ConvertOptions& opt) {
  auto src = open_tensor_source(in);
  if (src->format() != "safetensors") throw InputError(in + ": ds4-convert reads safetensors (HF/MLX), not " + src->format());
  ConvertReport rep;
  std::vector<Plan> plans = make_plans(*src, opt, rep);
  GgufWriter w(out);
  const nlohmann::json& cfg = src->config();
  std::string arch = cfg.value("model_type", std::string("unknown"));
  w.set("general.architecture", GgufValue::string(arch));
  w.set("general.name", GgufValue::string(arch));
  std::string cfg_text = read_text(in + "/config.json");
  if (cfg_text.empty() && !cfg.empty()) cfg_text = cfg.dump();  // single-file input: its sibling config.json
  if (!cfg_text.empty()) w.set("ds4.config_json", GgufValue::string(cfg_text));
  for (const Plan& p : plans) w.add_tensor(p.name, p.out, p.shape);
  std::vector<float> row;
  std::vector<uint8_t> enc;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Plan& p = plans[i];
    if (p.raw) {
      w.write(p.raw->data, p.raw->bytes);
      rep.bytes += p.raw->bytes;
    } else {
      const RowDecodeFn decode = row_decoder(p.src.type, simd_level());
      row.resize(size_t(p.src.cols));
      enc.resize(size_t(row_bytes(p.out, p.src.cols)));
      for (int64_t r = 0; r < p.src.rows; ++r) {
        decode(p.src, r, 0, p.src.cols, row.data());
        encode_row(p.out, row.data(), p.src.cols, enc.data());
        w.write(enc.data(), enc.size());
      }
      rep.bytes += uint64_t(p.src.rows) * enc.size();
    }
    ++rep.tensors;
    if (opt.progress) opt.progress(i + 1, plans.size(), rep.bytes, p.name);
  }
  w.finish();
  return rep;
}

}  // namespace ds4
