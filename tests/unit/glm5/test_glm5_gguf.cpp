// GGUF loading (ds4-convert output of the tiny model) and lower precision: F32 GGUF gives the
// safetensors logits; F16 / BF16 / Q8_0 stay within a stated NMSE of them and keep a greedy
// prefix of p64 (all weights of 2+ dims quantized, as ds4-convert --quant T writes them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include "core/dtype.h"
#include "formats/convert.h"
#include "golden.h"
#include "models/model.h"

namespace ds4::glm5_test {
namespace {

namespace fs = std::filesystem;

double nmse(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += double(a[i] - ref[i]) * (a[i] - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return num / den;
}

struct RunResult {
  std::vector<float> prefill;
  std::vector<int32_t> greedy;
  std::string family;
};

RunResult run_model(const std::string& path, const std::vector<int32_t>& prompt, int steps) {
  LoadOptions o;
  o.threads = 2;
  auto m = load_model(path, o);
  auto st = m->new_state();
  RunResult r;
  r.family = m->info().family;
  auto logits = m->prefill(*st, prompt);
  r.prefill = logits;
  for (int i = 0; i < steps; ++i) {
    r.greedy.push_back(int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    logits = m->decode(*st, r.greedy.back());
  }
  return r;
}

std::string convert(DType t) {
  fs::path out = fs::temp_directory_path() / ("glm5_" + std::string(dtype_name(t)) + "_" + std::to_string(::getpid()) + ".gguf");
  ConvertOptions opt;
  opt.quant = t;
  convert_to_gguf(model_dir(), out.string(), opt);
  return out.string();
}

TEST(Glm5Gguf, LoadsConvertedModelAndStaysWithinPrecisionBounds) {
  Golden g;
  const auto prompt = g.get<int32_t>("p64.tokens");
  const auto greedy = g.get<int32_t>("p64.greedy");
  const RunResult ref = run_model(model_dir(), prompt, 8);
  struct Case {
    DType type;
    double max_nmse;
    int greedy_prefix;
  };
  // Measured NMSE (tiny model, p64 prefill): F32 0, F16 5.8e-7, BF16 5.0e-4, Q8_0 3.8e-4.
  const Case cases[] = {{DType::F32, 1e-12, 8}, {DType::F16, 1e-5, 8}, {DType::BF16, 1e-3, 4}, {DType::Q8_0, 1e-3, 4}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.type)));
    const std::string path = convert(c.type);
    const RunResult r = run_model(path, prompt, 8);
    fs::remove(path);
    EXPECT_EQ(r.family, "glm5");
    const double e = nmse(r.prefill, ref.prefill);
    std::printf("[glm5] GGUF %s: prefill logits NMSE vs f32 safetensors = %.3g\n", std::string(dtype_name(c.type)).c_str(), e);
    EXPECT_LE(e, c.max_nmse);
    for (int i = 0; i < c.greedy_prefix; ++i) EXPECT_EQ(r.greedy[size_t(i)], greedy[size_t(i)]) << "token " << i;
  }
}

}  // namespace
}  // namespace ds4::glm5_test
