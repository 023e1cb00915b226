// ds4-convert IN OUT.gguf [--quant TYPE] [--quant-experts TYPE]
// IN: an HF or MLX safetensors directory (or one .safetensors file). 1-D tensors and norms
// stay F32; other float weights become TYPE (default F16); routed experts become the
// --quant-experts type when given. A progress bar is drawn only when stderr is a terminal.
// ds4-convert --synthetic deepseek_v4_flash|CONFIG.json OUT.gguf [--quant-experts T]
//   [--tokenizer tokenizer.json] [--expert-holes]: a DeepSeek V4 model with the real shapes
// and generated weights in antirez/ds4's layout (issue #10's synthetic full-size models).
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <string>

#include "core/error.h"
#include "formats/convert.h"
#include "models/deepseek_v4/gguf.h"
#include "models/deepseek_v4/synthetic.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: ds4-convert IN OUT.gguf [--quant F32|F16|BF16|Q8_0|Q4_K] [--quant-experts TYPE]\n"
               "  IN: HF/MLX safetensors directory (config.json + *.safetensors) or a .safetensors file\n"
               "usage: ds4-convert --synthetic deepseek_v4_flash|CONFIG.json OUT.gguf [--quant-experts IQ2_XXS|Q2_K|Q4_K|Q8_0]\n"
               "                   [--tokenizer tokenizer.json] [--expert-holes]\n"
               "  a DeepSeek V4 model with the config's real shapes and generated weights, in antirez/ds4's\n"
               "  layout (IQ2_XXS: gate/up IQ2_XXS + down Q2_K as ds4's 2-bit files); --expert-holes leaves\n"
               "  routed experts as zero holes of a sparse file\n");
  return 2;
}

// The synthetic DeepSeek V4 writer behind --synthetic (streamed: one tensor in memory).
int write_synthetic(const std::string& which, const std::string& out, const ds4::deepseek_v4::Ds4ExportOptions& opt) {
  nlohmann::json cfg;
  if (which == "deepseek_v4_flash") {
    cfg = ds4::deepseek_v4::flash_hf_config();
  } else {
    std::ifstream f(which);
    if (!f) throw ds4::InputError("--synthetic: '" + which + "' is neither deepseek_v4_flash nor a readable config.json");
    try {
      cfg = nlohmann::json::parse(f);
    } catch (const nlohmann::json::exception& e) {
      throw ds4::InputError(which + ": malformed JSON: " + e.what());
    }
  }
  const auto src = ds4::deepseek_v4::synthetic_source(cfg);
  const ds4::deepseek_v4::Config c = ds4::deepseek_v4::parse_config(cfg, which);
  ds4::deepseek_v4::export_ds4_gguf(*src, c, out, opt);
  std::printf("wrote %s: synthetic %s, %zu HF tensors, %lld layers\n", out.c_str(), which.c_str(), src->tensors().size(),
              static_cast<long long>(c.layers));
  return 0;
}

void draw_progress(size_t done, size_t total, uint64_t bytes, const std::string& name) {
  const int width = 30;
  int filled = total ? int(done * width / total) : width;
  std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu %.1f MiB %-40.40s", filled, "##############################",
               width - filled, "", done, total, double(bytes) / (1 << 20), name.c_str());
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  std::string in, out, synthetic;
  ds4::ConvertOptions opt;
  ds4::deepseek_v4::Ds4ExportOptions synth;
  bool synthetic_mode = false;  // --quant-experts means the synthetic expert policy then
  for (int i = 1; i < argc; ++i) synthetic_mode = synthetic_mode || std::string(argv[i]) == "--synthetic";
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if (a == "--synthetic" && i + 1 < argc) {
        synthetic = argv[++i];
      } else if (a == "--tokenizer" && i + 1 < argc) {
        synth.tokenizer_json = argv[++i];
      } else if (a == "--expert-holes") {
        synth.synthetic_expert_holes = true;
      } else if (a == "--quant-experts" && i + 1 < argc && synthetic_mode) {
        const std::string t = argv[++i];
        if (t == "IQ2_XXS") synth.expert_type = ds4::DType::IQ2_XXS, synth.expert_down_type = ds4::DType::Q2_K;
        else if (t == "Q2_K") synth.expert_type = synth.expert_down_type = ds4::DType::Q2_K;
        else if (t == "Q4_K") synth.expert_type = synth.expert_down_type = ds4::DType::Q4_K;
        else if (t == "Q8_0") synth.expert_type = synth.expert_down_type = ds4::DType::Q8_0;  // tiny test configs
        else throw ds4::InputError("--quant-experts " + t + ": a synthetic model takes IQ2_XXS, Q2_K, Q4_K or Q8_0");
      } else if ((a == "--quant" || a == "--quant-experts") && i + 1 < argc) {
        ds4::DType t = ds4::parse_convert_type(argv[++i]);
        if (a == "--quant") opt.quant = t;
        else opt.quant_experts = t, opt.experts_set = true;
      } else if (a == "-h" || a == "--help") {
        usage();
        return 0;
      } else if (!a.empty() && a[0] == '-') {
        std::fprintf(stderr, "ds4-convert: unknown option '%s'\n", a.c_str());
        return usage();
      } else if (in.empty()) {
        in = a;
      } else if (out.empty()) {
        out = a;
      } else {
        return usage();
      }
    }
    if (!synthetic.empty()) return in.empty() || !out.empty() ? usage() : write_synthetic(synthetic, in, synth);
    if (in.empty() || out.empty()) return usage();
    if (isatty(STDERR_FILENO)) opt.progress = draw_progress;
    ds4::ConvertReport r = ds4::convert_to_gguf(in, out, opt);
    std::printf("wrote %s: %zu tensors, %.1f MiB (F32 kept: %zu, F16 fallback for row length: %zu, integer copied: %zu)\n",
                out.c_str(), r.tensors, double(r.bytes) / (1 << 20), r.kept_f32, r.fallback_f16, r.copied_integer);
    return 0;
  } catch (const ds4::InputError& e) {
    std::fprintf(stderr, "ds4-convert: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ds4-convert: error: %s\n", e.what());
    return 1;
  }
}
