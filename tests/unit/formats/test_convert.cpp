// ds4-convert's library: HF + MLX safetensors -> GGUF for every output type, then read
// back, dequantize and compare with the source within the format's error.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "core/quant.h"
#include "formats/convert.h"
#include "formats/tensor_source.h"
#include "test_util.h"

using namespace ds4;
using namespace ds4::test;

namespace {

struct Source {
  std::filesystem::path dir;
  std::vector<float> dense;   // {8, 256}
  std::vector<float> norm;    // {256}
  std::vector<float> mlx;     // {4, 128} as MLX dequantizes it
};

Source make_source(const std::string& name) {
  Source s;
  s.dir = temp_dir(name);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0, 1);
  s.dense.resize(8 * 256);
  s.norm.resize(256);
  std::vector<float> mx(4 * 128);
  for (float& v : s.dense) v = nd(rng);
  for (float& v : s.norm) v = 1 + 0.1f * nd(rng);
  for (float& v : mx) v = 0.05f * nd(rng);
  // MLX 4-bit group 64 with bf16 scales: q {4, 16} U32, scales/biases {4, 2}.
  std::vector<uint32_t> q(4 * 16);
  std::vector<uint16_t> sc(8), bi(8);
  for (int r = 0; r < 4; ++r) quantize_mlx(mx.data() + r * 128, 128, 4, 64, DType::BF16, q.data() + r * 16, sc.data() + r * 2, bi.data() + r * 2);
  WeightMatrix w{DType::MLX_Q4, 4, 128, q.data(), sc.data(), bi.data(), DType::BF16, 64};
  s.mlx.resize(4 * 128);
  for (int r = 0; r < 4; ++r) dequantize_row(w, r, s.mlx.data() + r * 128);
  std::vector<uint8_t> data = as_bytes(s.dense);
  for (auto b : {as_bytes(s.norm), as_bytes(q), as_bytes(sc), as_bytes(bi)}) data.insert(data.end(), b.begin(), b.end());
  std::string h = R"({"dense.weight":{"dtype":"F32","shape":[8,256],"data_offsets":[0,8192]},)"
                  R"("ln.norm.weight":{"dtype":"F32","shape":[256],"data_offsets":[8192,9216]},)"
                  R"("m.weight":{"dtype":"U32","shape":[4,16],"data_offsets":[9216,9472]},)"
                  R"("m.scales":{"dtype":"BF16","shape":[4,2],"data_offsets":[9472,9488]},)"
                  R"("m.biases":{"dtype":"BF16","shape":[4,2],"data_offsets":[9488,9504]}})";
  write_bytes(s.dir / "model.safetensors", safetensors_bytes(h, data));
  std::string cfg = R"({"model_type":"tiny","quantization":{"group_size":64,"bits":4}})";
  write_bytes(s.dir / "config.json", std::vector<uint8_t>(cfg.begin(), cfg.end()));
  return s;
}

double rel_rms(const TensorSource& src, const std::string& name, const std::vector<float>& want) {
  WeightMatrix w = as_matrix(src.get(name));
  std::vector<float> got(size_t(w.rows * w.cols));
  for (int64_t r = 0; r < w.rows; ++r) dequantize_row(w, r, got.data() + r * w.cols);
  EXPECT_EQ(got.size(), want.size()) << name;
  double e = 0, n = 0;
  for (size_t i = 0; i < want.size(); ++i) e += (got[i] - want[i]) * (got[i] - want[i]), n += want[i] * want[i];
  return std::sqrt(e / n);
}

}  // namespace

TEST(Convert, RoundTripEveryType) {
  Source s = make_source("convert");
  struct Case { DType t; double max_err; };
  for (Case c : {Case{DType::F32, 0.0}, Case{DType::F16, 1e-3}, Case{DType::BF16, 8e-3}, Case{DType::Q8_0, 1e-2},
                 Case{DType::Q4_K, 0.12}}) {
    SCOPED_TRACE(dtype_name(c.t));
    std::string out = (s.dir / "out.gguf").string();
    ConvertOptions opt;
    opt.quant = c.t;
    size_t calls = 0;
    opt.progress = [&](size_t done, size_t total, uint64_t, const std::string&) { calls += done <= total; };
    ConvertReport rep = convert_to_gguf(s.dir.string(), out, opt);
    EXPECT_EQ(rep.tensors, 3u);
    EXPECT_EQ(calls, 3u);
    EXPECT_EQ(rep.kept_f32, 1u);
    auto g = open_tensor_source(out);
    EXPECT_EQ(g->config()["model_type"], "tiny");  // config.json text stored under ds4.config_json
    EXPECT_EQ(g->get("dense.weight").type, c.t);
    EXPECT_EQ(g->get("ln.norm.weight").type, DType::F32);
    EXPECT_EQ(g->get("m.weight").shape, (std::vector<int64_t>{4, 128}));
    EXPECT_LE(rel_rms(*g, "dense.weight", s.dense), c.max_err);
    EXPECT_LE(rel_rms(*g, "m.weight", s.mlx), c.max_err);
    EXPECT_EQ(std::memcmp(g->get("ln.norm.weight").data, s.norm.data(), 1024), 0);
  }
  std::filesystem::remove_all(s.dir);
}

TEST(Convert, RejectsBadInput) {
  EXPECT_THROW(parse_convert_type("Q3_K"), InputError);
  EXPECT_EQ(parse_convert_type("q8_0"), DType::Q8_0);
  auto dir = temp_dir("convert_bad");
  EXPECT_THROW(convert_to_gguf(dir.string(), (dir / "o.gguf").string(), {}), InputError);  // no safetensors
  std::filesystem::remove_all(dir);
}
