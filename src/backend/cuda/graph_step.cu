// Capture-or-replay of a fixed-shape step; see graph_step.h.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

#include "backend/cuda/check.h"
#include "backend/cuda/graph_step.h"

namespace ds4::cuda {

namespace {
std::atomic<bool> g_stats_on{false};  // off until a reset: no clock or lock on the decode path
std::mutex g_stats_mu;
GraphLaunchStats g_stats;
}  // namespace

GraphLaunchStats graph_launch_stats() {
  const std::lock_guard<std::mutex> lock(g_stats_mu);
  return g_stats;
}

void graph_launch_stats_reset() {
  const std::lock_guard<std::mutex> lock(g_stats_mu);
  g_stats = GraphLaunchStats{};
  g_stats_on.store(true, std::memory_order_relaxed);
}

void launch_graph_step(cudaStream_t stream, cudaGraphExec_t& exec, bool use_graph,
                       const std::function<void()>& enqueue) {
  if (!use_graph) {
    enqueue();
    return;
  }
  if (!exec) {
    cudaGraph_t g = nullptr;
    // Thread-local mode: another thread's CUDA calls (the canary, a second state) are not
    // forbidden during the capture.
    DS4_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue();
    } catch (...) {
      cudaStreamEndCapture(stream, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    DS4_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
    const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    DS4_CUDA_CHECK(e);
  }
  if (!g_stats_on.load(std::memory_order_relaxed)) {
    DS4_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  DS4_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  const std::lock_guard<std::mutex> lock(g_stats_mu);
  ++g_stats.launches, g_stats.host_us += us, g_stats.max_us = std::max(g_stats.max_us, us);
}

void run_graph_step(cudaStream_t stream, cudaGraphExec_t& exec, bool use_graph,
                    const std::function<void()>& enqueue) {
  launch_graph_step(stream, exec, use_graph, enqueue);
  DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
}

namespace {
__global__ void increment_kernel(int32_t* p, int32_t by) { *p += by; }
}  // namespace

void enqueue_position_increment(int32_t* pos, cudaStream_t stream) { enqueue_position_increment(pos, 1, stream); }

void enqueue_position_increment(int32_t* pos, int32_t rows, cudaStream_t stream) {
  increment_kernel<<<1, 1, 0, stream>>>(pos, rows);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
