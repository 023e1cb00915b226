#pragma once
// The CUDA benches' profiled prefill chunk inside cudaProfilerStart / cudaProfilerStop, so that
// `ncu --profile-from-start off` (or nsys --capture-range=cudaProfilerApi) sees only that chunk's
// kernels: a per-kernel survey of a prefill without profiling the weight upload or synthetic
// generation before it (session 26 call 4: ncu over the whole process spent its time there).
// Without a profiler attached both calls do nothing.
#include <cuda_profiler_api.h>

namespace ds4::bench {

struct ProfilerRange {
  ProfilerRange() { cudaProfilerStart(); }
  ~ProfilerRange() { cudaProfilerStop(); }
  ProfilerRange(const ProfilerRange&) = delete;
  ProfilerRange& operator=(const ProfilerRange&) = delete;
};

}  // namespace ds4::bench
