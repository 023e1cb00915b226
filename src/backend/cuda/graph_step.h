#pragma once
// Capture-or-replay of a fixed-shape step (a decode step, a GLM chunk): the first call for a
// slot captures everything `enqueue` puts on `stream` into a CUDA graph and instantiates it in
// `exec`; later calls only launch `exec`. The models keep the kernels' position on the device,
// so one captured graph replays at every position. Shared by the three CUDA models.
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

namespace ds4::cuda {

// use_graph false: runs `enqueue` directly (no capture). Either way ends with a stream sync.
// `exec` is the caller's slot (nullptr until the first capture; the caller destroys it).
// An exception from `enqueue` during capture ends the capture, drops the partial graph and
// propagates; `exec` stays null so the next call captures again.
void run_graph_step(cudaStream_t stream, cudaGraphExec_t& exec, bool use_graph,
                    const std::function<void()>& enqueue);
// The same without the stream sync (work queued back to back, one sync on the result: the
// Qwen MTP catch-up rows and draft chain).
void launch_graph_step(cudaStream_t stream, cudaGraphExec_t& exec, bool use_graph,
                       const std::function<void()>& enqueue);

// The host time spent inside cudaGraphLaunch by launch_graph_step / run_graph_step since the last
// reset (the benches' DS4_KERNEL_TRACE windows print it beside the in-graph table). Session 37
// (H100): 2.2-2.5 ms a model step graph while CUPTI traces kernels, which shows in the traces as
// the gap before each step's first kernel; 9-25 us for graphs of 800-1600 nodes without CUPTI
// (bench_cuda_graph_launch), so that gap is the tracer's, not the step's.
struct GraphLaunchStats {
  int64_t launches = 0;
  double host_us = 0, max_us = 0;
};
// Counting starts at the first reset (the tracer's window); until then a launch pays nothing for it.
GraphLaunchStats graph_launch_stats();
void graph_launch_stats_reset();

// The last op of a captured step: the device-side position counter += 1, so the next replay
// of the same graph sees the next position.
void enqueue_position_increment(int32_t* pos, cudaStream_t stream);
// The same by `rows` (a multi-row chunk's last op).
void enqueue_position_increment(int32_t* pos, int32_t rows, cudaStream_t stream);

}  // namespace ds4::cuda
