// DS4_CUDA_TENSOR_CORES, the serving binary's switch between tensor-core and exact prefill
// chunks of the CUDA models (models/cuda_tensor_cores_env.h): header-only, so tested here
// without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.h"
#include "models/cuda_tensor_cores_env.h"

namespace {

class TensorCoresEnv : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("DS4_CUDA_TENSOR_CORES"); }
};

TEST_F(TensorCoresEnv, UnsetMeansTensorCores) {
  unsetenv("DS4_CUDA_TENSOR_CORES");
  EXPECT_TRUE(ds4::cuda_tensor_cores_from_env());
}

TEST_F(TensorCoresEnv, ZeroAndOneChooseThePath) {
  setenv("DS4_CUDA_TENSOR_CORES", "0", 1);
  EXPECT_FALSE(ds4::cuda_tensor_cores_from_env());
  setenv("DS4_CUDA_TENSOR_CORES", "1", 1);
  EXPECT_TRUE(ds4::cuda_tensor_cores_from_env());
}

TEST_F(TensorCoresEnv, OtherValuesAreRefusedNamingTheVariable) {
  for (const char* bad : {"", "yes", "2", "0 ", "true"}) {
    setenv("DS4_CUDA_TENSOR_CORES", bad, 1);
    try {
      ds4::cuda_tensor_cores_from_env();
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ds4::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("DS4_CUDA_TENSOR_CORES"), std::string::npos);
    }
  }
}

}  // namespace
