#pragma once
// The CUDA benches' profiled prefill chunk inside cudaProfilerStart / cudaProfilerStop, so that
// `ncu --profile-from-start off` (or nsys --capture-range=cudaProfilerApi) sees only that chunk's
// kernels: a per-kernel survey of a prefill without profiling the weight upload or synthetic
// generation before it (session 26 call 4: ncu over the whole process spent its time there).
// Without a profiler attached both calls do nothing.
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "cuda_common.h"
#include "cuda_kernel_trace.h"
#include "models/model.h"

namespace ds4::bench {

struct ProfilerRange {
  ProfilerRange() { cudaProfilerStart(); }
  ~ProfilerRange() { cudaProfilerStop(); }
  ProfilerRange(const ProfilerRange&) = delete;
  ProfilerRange& operator=(const ProfilerRange&) = delete;
};

// The benches' --ncu-decode: one decode step of a clone of `at` (whose last logits are `l`) inside
// the range, after one step that captures the clone's CUDA graph, so that `ncu --profile-from-start
// off --graph-profiling node` times each kernel of one decode step alone (the per-kernel table of
// issue #23). The benches take no other profiler range with it. With DS4_KERNEL_TRACE=N
// (cuda_kernel_trace.h) the range holds N steps, and their in-graph kernel table follows.
inline void ncu_decode_step(Model& m, const ModelState& at, const std::vector<float>& l) {
  const auto argmax = argmax_row;
  auto s = at.clone();
  auto next = m.decode(*s, argmax(l));
  const int steps = KernelTrace::get() ? kernel_trace_steps() : 1;
  {
    const ProfilerRange range;
    const TraceWindow trace("a decode step at position " + std::to_string(at.position() + 1) + " (graph)", steps);
    for (int i = 0; i < steps; ++i) next = m.decode(*s, argmax(next));
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::printf("%d decode step(s) from position %lld in the profiler range (--ncu-decode)\n", steps,
              (long long)at.position() + 1);
}

// The benches' --ncu-verify: one forward(rows, kAll) of a clone of `at` (a speculative verify
// window) inside the range, after the same forward on another clone that captures its graphs, so
// that ncu times each kernel of one verify forward alone (issue #22's verify within 1.1x of its
// bytes floor).
inline void ncu_forward_rows(Model& m, const ModelState& at, std::span<const int32_t> rows) {
  std::vector<float> l;
  m.forward(*at.clone(), rows, Logits::kAll, l);
  auto s = at.clone();
  {
    const ProfilerRange range;
    const TraceWindow trace("a forward of " + std::to_string(rows.size()) + " rows (verify window)", 1);
    m.forward(*s, rows, Logits::kAll, l);
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
  }
  std::printf("one forward of %zu rows at position %lld in the profiler range (--ncu-verify)\n", rows.size(),
              (long long)at.position());
}

}  // namespace ds4::bench
