#pragma once
// Scaffolding shared by the CUDA model tests (tests/cuda/test_<family>_cuda.cu): plain
// executables without GoogleTest (the H200 image has none) that print one "ok  " / "FAIL"
// line per check, count the failures and exit 1 when any check failed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/tensor_source.h"

namespace ds4::cuda_test {

inline int g_fail = 0;  // failed checks so far

// Prints the check's line (flushed, so a later crash keeps it) and counts a failure.
inline void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++g_fail;
}

// max |a - b| over n floats; INFINITY when `a` holds a non-finite value.
inline float max_diff(const float* a, const float* b, size_t n) {
  float m = 0;
  for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  if (!std::all_of(a, a + n, [](float x) { return std::isfinite(x); })) m = INFINITY;
  return m;
}

inline int32_t argmax(const float* v, int64_t n) { return int32_t(std::max_element(v, v + n) - v); }

// n ids (mul * i + add) % V: reproducible prompts without a tokenizer.
inline std::vector<int32_t> synthetic_tokens(int64_t n, int64_t mul, int64_t add, int64_t V) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(int32_t((mul * i + add) % V));
  return t;
}

// Whether f() throws a ds4::Error.
template <class F>
bool throws(F f) {
  try {
    f();
  } catch (const Error&) {
    return true;
  }
  return false;
}

// A golden tensor's elements, copied out of the safetensors file.
template <class T>
std::vector<T> golden(const TensorSource& g, const std::string& name) {
  const TensorInfo& t = g.get(name);
  const T* p = static_cast<const T*>(t.data);
  return std::vector<T>(p, p + t.numel());
}

// Command line of the model tests: [root] [--quick]; root defaults to DS4_ROOT (or ".").
struct TestArgs {
#ifdef DS4_ROOT
  std::string root = DS4_ROOT;
#else
  std::string root = ".";
#endif
  bool quick = false;
};

inline TestArgs parse_args(int argc, char** argv) {
  TestArgs a;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--quick") a.quick = true;
    else a.root = argv[i];
  }
  return a;
}

// The final line and the exit code: 1 when any check failed.
inline int summary() {
  std::printf(g_fail ? "FAILED (%d)\n" : "ALL PASSED\n", g_fail);
  return g_fail ? 1 : 0;
}

}  // namespace ds4::cuda_test
