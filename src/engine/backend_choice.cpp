#include "engine/backend_choice.h"

#include "core/error.h"

namespace ds4::engine {

BackendChoice choose_backend(const std::string& requested, const BackendFacts& f) {
  if (requested == "cpu" || requested == "cuda") return {requested, "requested (backend: " + requested + ")"};
  if (requested != "auto") throw InputError("backend: '" + requested + "' is not auto, cpu or cuda");
  if (!f.cuda_build) return {"cpu", "auto: this ds4server was built without CUDA"};
  if (f.cuda_devices <= 0) return {"cpu", "auto: no CUDA device visible (cudaGetDeviceCount = 0)"};
  if (!f.family_has_cuda)
    return {"cpu", "auto: the model's family has no CUDA model (CUDA models: " + f.cuda_families + ")"};
  return {"cuda", "auto: " + std::to_string(f.cuda_devices) + " CUDA device(s) visible and the model's family has a CUDA model"};
}

}  // namespace ds4::engine
