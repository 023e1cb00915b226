#pragma once
// Loading a DeepSeek V4 model with ds4's activation quantization set explicitly: the CPU model
// reads DS4_ACT_QUANT at load (deepseek_v4::act_quant_for; unset = on for ds4-layout files).
// Tests that compare products which never quantize activations (tensor-core chunks, block
// decoders against their F32 dequantization) load their reference with "f32"; the CPU / CUDA
// comparisons load both sides with the same setting. Shared by the unit and CUDA tests.
#include <cstdlib>
#include <memory>
#include <string>

#include "models/deepseek_v4/model.h"

namespace ds4_test {

// Sets environment variable `name` to `value` (nullptr: unsets it) for the scope; unset after,
// also when the scope throws. For the load-time switches DS4_ACT_QUANT / DS4_DSV4_NUMERICS.
struct ScopedEnv {
  const char* name;
  ScopedEnv(const char* n, const char* value) : name(n) {
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() { unsetenv(name); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
};

// The CPU model of `path` with DS4_ACT_QUANT=mode ("q8", "f32"; nullptr: unset = the default).
inline std::unique_ptr<ds4::Model> load_dsv4_act(const std::string& path, const char* mode,
                                                 const ds4::LoadOptions& o = {}) {
  const ScopedEnv act("DS4_ACT_QUANT", mode);
  return ds4::deepseek_v4::load(path, o);
}

}  // namespace ds4_test
