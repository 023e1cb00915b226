// ds4-convert IN OUT.gguf [--quant TYPE] [--quant-experts TYPE]
// IN: an HF or MLX safetensors directory (or one .safetensors file). 1-D tensors and norms
// stay F32; other float weights become TYPE (default F16); routed experts become the
// --quant-experts type when given. A progress bar is drawn only when stderr is a terminal.
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>

#include "core/error.h"
#include "formats/convert.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: ds4-convert IN OUT.gguf [--quant F32|F16|BF16|Q8_0|Q4_K] [--quant-experts TYPE]\n"
               "  IN: HF/MLX safetensors directory (config.json + *.safetensors) or a .safetensors file\n");
  return 2;
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
  std::string in, out;
  ds4::ConvertOptions opt;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      if ((a == "--quant" || a == "--quant-experts") && i + 1 < argc) {
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
