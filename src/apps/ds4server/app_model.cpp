#include "apps/ds4server/app_model.h"

#include <cstdio>
#include <thread>

#include "core/error.h"
#include "engine/tok_codec.h"
#include "models/model.h"
#include "models/qwen_next/model.h"
#include "models/deepseek_v4/model.h"
#ifdef DS4_CUDA
#include "backend/cuda/canary.h"
#include "models/glm5/model.h"
#include "models/glm5/cuda/model_cuda.h"
#include "models/deepseek_v4/cuda/model_cuda.h"
#include "models/qwen_next/cuda/model_cuda.h"
#endif

namespace ds4::cli {

#ifdef DS4_CUDA
namespace {
// Families with a CUDA model: one line each (probe of the checkpoint, CUDA loader).
struct CudaFamily {
  const char* name;
  bool (*probe)(const std::string&);
  std::unique_ptr<Model> (*load)(const std::string&, const LoadOptions&);
};
const CudaFamily kCudaFamilies[] = {
    {"Qwen3.8 Flash Next", qwen_next::probe, [](const std::string& p, const LoadOptions& o) { return qwen_next::load_cuda(p, o, qwen_next::cuda_options_from_env()); }},
    {"GLM 5.x Flash", glm5::probe, [](const std::string& p, const LoadOptions& o) { return glm5::load_cuda(p, o, glm5::cuda_options_from_env()); }},
    {"DeepSeek V4 Flash", deepseek_v4::probe,
     [](const std::string& p, const LoadOptions& o) { return deepseek_v4::load_cuda(p, o, deepseek_v4::cuda_options_from_env()); }},
};
std::string cuda_family_names() {
  std::string names;
  for (const CudaFamily& f : kCudaFamilies) names += names.empty() ? f.name : std::string(", ") + f.name;
  return names;
}
}  // namespace
#endif

engine::BackendChoice resolve_backend(const std::string& path, const std::string& requested) {
  engine::BackendFacts f;
#ifdef DS4_CUDA
  f.cuda_build = true;
  if (requested == "auto") {  // explicit choices need no device query or probe
    f.cuda_devices = cuda::visible_device_count();
    f.cuda_families = cuda_family_names();
    for (const CudaFamily& fam : kCudaFamilies) f.family_has_cuda = f.family_has_cuda || fam.probe(path);
  }
#endif
  return engine::choose_backend(requested, f);
}

server::Loaded load_for_settings(const engine::Settings& s) {
  LoadOptions o;
  // power scales the thread count (SPEC §4); 0 threads = all cores.
  int threads = s.threads > 0 ? s.threads : int(std::thread::hardware_concurrency());
  o.threads = std::max(1, threads * s.power / 100);
  o.max_context = s.context_size;
  server::Loaded l;
  l.backend = resolve_backend(s.model, s.backend);
  l.model = load_model_on(s.model, o, l.backend.backend);
  auto codec = engine::TokCodec::open(s.model, l.model->info().family);
  // A tokenizer of another model loads fine, then every prompt with an id past the model's
  // vocabulary fails as a server error: refuse the pair at start instead.
  if (codec->vocab_size() > l.model->info().vocab_size)
    throw InputError("tokenizer.json beside " + s.model + " has token ids up to " +
                     std::to_string(codec->vocab_size() - 1) + ", but the model's vocabulary has " +
                     std::to_string(l.model->info().vocab_size) +
                     " entries: the tokenizer does not belong to this model");
  l.codec = std::move(codec);
#ifdef DS4_CUDA
  // The engine owns one canary per CUDA model (SPEC §6); it starts it with the runtime.
  if (l.backend.backend == "cuda") l.canary = std::make_shared<cuda::GpuCanary>();
#endif
  return l;
}

std::unique_ptr<Model> load_model_on(const std::string& path, const LoadOptions& o, const std::string& backend) {
  if (backend == "auto") {
    const engine::BackendChoice c = resolve_backend(path, backend);
    std::fprintf(stderr, "backend: %s (%s)\n", c.backend.c_str(), c.reason.c_str());
    return load_model_on(path, o, c.backend);
  }
  if (backend == "cpu") return load_model(path, o);
  if (backend != "cuda") throw InputError("--backend: '" + backend + "' is not auto, cpu or cuda");
#ifdef DS4_CUDA
  for (const CudaFamily& f : kCudaFamilies)
    if (f.probe(path)) return f.load(path, o);
  throw InputError("--backend cuda: " + path + " is not a model of a family with a CUDA backend (" + cuda_family_names() + ")");
#else
  throw InputError("--backend cuda: this ds4server was built without CUDA (configure with -DDS4_CUDA=ON)");
#endif
}

}  // namespace ds4::cli
