// `backend: auto` (engine/backend_choice.h): every branch of the rule with injected facts.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/backend_choice.h"

namespace ds4::engine {
namespace {

BackendFacts gpu_ready() {
  BackendFacts f;
  f.cuda_build = true;
  f.cuda_devices = 1;
  f.family_has_cuda = true;
  f.cuda_families = "Qwen3.8 Flash Next, GLM 5.x Flash";
  return f;
}

TEST(BackendChoice, AutoPicksCudaOnlyWhenEverythingIsThere) {
  auto c = choose_backend("auto", gpu_ready());
  EXPECT_EQ(c.backend, "cuda");
  EXPECT_EQ(c.reason, "auto: 1 CUDA device(s) visible and the model's family has a CUDA model");
}

TEST(BackendChoice, AutoFallsBackToCpuAndSaysWhy) {
  BackendFacts f = gpu_ready();
  f.cuda_build = false;
  EXPECT_EQ(choose_backend("auto", f).backend, "cpu");
  EXPECT_EQ(choose_backend("auto", f).reason, "auto: this ds4server was built without CUDA");
  f = gpu_ready();
  f.cuda_devices = 0;
  EXPECT_EQ(choose_backend("auto", f).backend, "cpu");
  EXPECT_EQ(choose_backend("auto", f).reason, "auto: no CUDA device visible (cudaGetDeviceCount = 0)");
  f = gpu_ready();
  f.family_has_cuda = false;
  EXPECT_EQ(choose_backend("auto", f).backend, "cpu");
  EXPECT_EQ(choose_backend("auto", f).reason,
            "auto: the model's family has no CUDA model (CUDA models: Qwen3.8 Flash Next, GLM 5.x Flash)");
}

TEST(BackendChoice, ExplicitChoicesAreKept) {
  BackendFacts none;  // even without CUDA: the loader gives cuda's error
  EXPECT_EQ(choose_backend("cuda", none).backend, "cuda");
  EXPECT_EQ(choose_backend("cpu", gpu_ready()).backend, "cpu");
  EXPECT_EQ(choose_backend("cpu", gpu_ready()).reason, "requested (backend: cpu)");
}

TEST(BackendChoice, UnknownNameIsAnInputError) {
  try {
    choose_backend("rocm", gpu_ready());
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'rocm'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ds4::engine
