#include "apps/ds4server/app_model.h"

#include <thread>

#include "core/error.h"
#include "engine/tok_codec.h"
#include "models/model.h"
#include "models/qwen_next/model.h"
#include "models/deepseek_v4/model.h"
#ifdef DS4_CUDA
#include "models/deepseek_v4/cuda/model_cuda.h"
#include "models/qwen_next/cuda/model_cuda.h"
#endif

namespace ds4::cli {

server::Loaded load_for_settings(const engine::Settings& s) {
  LoadOptions o;
  // power scales the thread count (SPEC §4); 0 threads = all cores.
  int threads = s.threads > 0 ? s.threads : int(std::thread::hardware_concurrency());
  o.threads = std::max(1, threads * s.power / 100);
  o.max_context = s.context_size;
  server::Loaded l;
  l.model = load_model_on(s.model, o, s.backend);
  l.codec = engine::TokCodec::open(s.model, l.model->info().family);
  return l;
}

std::unique_ptr<Model> load_model_on(const std::string& path, const LoadOptions& o, const std::string& backend) {
  if (backend == "cpu") return load_model(path, o);
  if (backend != "cuda") throw InputError("--backend: '" + backend + "' is not cpu or cuda");
#ifdef DS4_CUDA
  if (qwen_next::probe(path)) return qwen_next::load_cuda(path, o);
  if (deepseek_v4::probe(path)) return deepseek_v4::load_cuda(path, o);
  throw InputError("--backend cuda: " + path +
                   " is not a Qwen3.8 Flash Next or DeepSeek V4 model (the families on CUDA so far)");
#else
  throw InputError("--backend cuda: this ds4server was built without CUDA (configure with -DDS4_CUDA=ON)");
#endif
}

}  // namespace ds4::cli
