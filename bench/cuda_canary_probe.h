#pragma once
// Shared by the CUDA prefill benches (issue #22): the GPU canary (backend/cuda/canary.h, a
// one-warp probe on the highest-priority stream) running while `work` runs, so a bench states
// the probe latencies beside the speed it measures (SPEC: max < 10 ms).
#include <chrono>
#include <functional>

#include "backend/cuda/canary.h"

namespace ds4::bench {

struct ProbedRun {
  double seconds = 0;  // wall time of `work` with the probe running
  CanaryStats canary;
};

inline ProbedRun with_canary(const std::function<void()>& work, double period_s = 0.005) {
  cuda::GpuCanary::Options o;
  o.period_s = period_s;
  cuda::GpuCanary probe(o);
  probe.start();
  const auto t0 = std::chrono::steady_clock::now();
  work();
  ProbedRun r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  probe.stop();
  r.canary = probe.snapshot();
  return r;
}

}  // namespace ds4::bench
