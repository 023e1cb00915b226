// Capture-or-replay of a fixed-shape step; see graph_step.h.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/env_setting.h"
#include "backend/cuda/graph_step.h"
#include "core/error.h"

namespace ds4::cuda {

namespace {
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
}

namespace {
std::atomic<int> g_split{-1};
// The later parts of a split step graph, by its first part's exec.
std::mutex g_parts_mu;
std::unordered_map<cudaGraphExec_t, std::vector<cudaGraphExec_t>> g_parts;
// The capture in progress on this thread (launch_graph_step): its stream and the parts ended so far.
struct Capture {
  cudaStream_t stream = nullptr;
  std::vector<cudaGraph_t> done;
};
thread_local Capture* t_capture = nullptr;

void destroy_graphs(std::vector<cudaGraph_t>& gs) {
  for (cudaGraph_t g : gs)
    if (g) cudaGraphDestroy(g);
  gs.clear();
}
}  // namespace

int graph_split_layers() {
  return env_setting(g_split, "DS4_GRAPH_SPLIT", {0, 1, 2, 3, 4, 6, 8, 12, 16}, "0, 1, 2, 3, 4, 6, 8, 12 or 16", 0);
}
void graph_split_set(int layers) {
  if (layers < 0) throw InputError("graph_split_set: " + std::to_string(layers) + " layers per part");
  g_split.store(layers);
}

void graph_step_layer(cudaStream_t stream, int64_t layer) {
  Capture* c = t_capture;
  const int every = graph_split_layers();
  if (!c || c->stream != stream || every <= 0 || layer <= 0 || layer % every != 0) return;
  cudaGraph_t g = nullptr;
  DS4_CUDA_CHECK(cudaStreamEndCapture(stream, &g));
  c->done.push_back(g);
  DS4_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
}

void destroy_graph_step(cudaGraphExec_t exec) {
  if (!exec) return;
  std::vector<cudaGraphExec_t> rest;
  {
    const std::lock_guard<std::mutex> lock(g_parts_mu);
    if (auto it = g_parts.find(exec); it != g_parts.end()) rest = std::move(it->second), g_parts.erase(it);
  }
  for (cudaGraphExec_t e : rest) cudaGraphExecDestroy(e);
  cudaGraphExecDestroy(exec);
}

void launch_graph_step(cudaStream_t stream, cudaGraphExec_t& exec, bool use_graph,
                       const std::function<void()>& enqueue) {
  if (!use_graph) {
    enqueue();
    return;
  }
  if (!exec) {
    Capture cap{stream, {}};
    cudaGraph_t g = nullptr;
    // Thread-local mode: another thread's CUDA calls (the canary, a second state) are not
    // forbidden during the capture.
    DS4_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    t_capture = &cap;
    try {
      enqueue();
    } catch (...) {
      t_capture = nullptr;
      cudaStreamEndCapture(stream, &g);
      if (g) cudaGraphDestroy(g);
      destroy_graphs(cap.done);
      throw;
    }
    t_capture = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream, &g);
    cap.done.push_back(g);
    if (end != cudaSuccess) destroy_graphs(cap.done);
    DS4_CUDA_CHECK(end);
    std::vector<cudaGraphExec_t> execs(cap.done.size(), nullptr);
    cudaError_t e = cudaSuccess;
    for (size_t i = 0; i < cap.done.size() && e == cudaSuccess; ++i)
      e = cudaGraphInstantiate(&execs[i], cap.done[i], 0);
    destroy_graphs(cap.done);
    if (e != cudaSuccess)
      for (cudaGraphExec_t x : execs)
        if (x) cudaGraphExecDestroy(x);
    DS4_CUDA_CHECK(e);
    exec = execs.front();
    if (execs.size() > 1) {
      const std::lock_guard<std::mutex> lock(g_parts_mu);
      g_parts[exec] = std::vector<cudaGraphExec_t>(execs.begin() + 1, execs.end());
    }
  }
  std::vector<cudaGraphExec_t> rest;
  {
    const std::lock_guard<std::mutex> lock(g_parts_mu);
    if (auto it = g_parts.find(exec); it != g_parts.end()) rest = it->second;
  }
  const auto t0 = std::chrono::steady_clock::now();
  DS4_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  for (cudaGraphExec_t e : rest) DS4_CUDA_CHECK(cudaGraphLaunch(e, stream));
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
