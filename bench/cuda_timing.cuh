#pragma once
// Event timing for the CUDA kernel benches: the median of `reps` runs of f on stream s after one
// warm-up run (the first use of a path: cuBLAS heuristics, attribute writes, cold caches);
// graph_ms: the same for one CUDA graph that `capture(stream)` records (launch gaps out of the
// figure), on a stream of its own.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/check.h"

namespace ds4::bench {

template <class F>
double time_ms(F&& f, int reps, cudaStream_t s) {
  if (reps < 1) reps = 1;
  cudaEvent_t a, b;
  DS4_CUDA_CHECK(cudaEventCreate(&a));
  DS4_CUDA_CHECK(cudaEventCreate(&b));
  f();
  std::vector<float> ms(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    DS4_CUDA_CHECK(cudaEventRecord(a, s));
    f();
    DS4_CUDA_CHECK(cudaEventRecord(b, s));
    DS4_CUDA_CHECK(cudaEventSynchronize(b));
    DS4_CUDA_CHECK(cudaEventElapsedTime(ms.data() + r, a, b));
  }
  DS4_CUDA_CHECK(cudaEventDestroy(a));
  DS4_CUDA_CHECK(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <class Capture>
double graph_ms(Capture&& capture, int reps) {
  cudaStream_t st;
  DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  DS4_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  capture(st);
  DS4_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
  DS4_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double ms = time_ms([&] { DS4_CUDA_CHECK(cudaGraphLaunch(exec, st)); }, reps, st);
  DS4_CUDA_CHECK(cudaGraphExecDestroy(exec));
  DS4_CUDA_CHECK(cudaGraphDestroy(graph));
  DS4_CUDA_CHECK(cudaStreamDestroy(st));
  return ms;
}

}  // namespace ds4::bench
