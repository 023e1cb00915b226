#pragma once
// `backend: auto|cpu|cuda` (issue #10): auto = cuda when the build has CUDA, a device is
// visible and the model's family has a CUDA model, else cpu; the choice carries its reason
// (logged at start, shown in /health and the printed config). Pure: the caller gathers the
// facts (apps/ds4server/app_model.cpp), so every branch is tested on a machine without a GPU.
#include <string>

namespace ds4::engine {

struct BackendFacts {
  bool cuda_build = false;     // built with DS4_CUDA
  int cuda_devices = 0;        // cudaGetDeviceCount (0 when none or no driver)
  bool family_has_cuda = false;  // the checkpoint is of a family with a CUDA model
  std::string cuda_families;   // those families, for the reason ("Qwen3.8 Flash Next, GLM 5.x Flash")
};

struct BackendChoice {
  std::string backend;  // "cpu" or "cuda"
  std::string reason;   // one line: why this backend
};

// requested: "auto", "cpu" or "cuda" (explicit choices are returned as they are; their
// errors stay with the loader). Throws ds4::InputError on any other name.
BackendChoice choose_backend(const std::string& requested, const BackendFacts& f);

}  // namespace ds4::engine
