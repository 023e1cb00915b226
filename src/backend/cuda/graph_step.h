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

// A step graph in parts (issue #23, session 37): a replay's host-side launch of a ~800-node graph
// cost 1.3-2.3 ms before its first kernel ran (the in-graph traces). A model's enqueue calls
// graph_step_layer(stream, l) before each layer l; with DS4_GRAPH_SPLIT=N (N > 0 layers per part,
// 0 = one graph: the default until measured) the capture ends there every N layers and a new graph
// begins, so replaying launches the parts in order and the GPU runs part 1 while the host launches
// part 2. Call it only where nothing forked on another stream is outstanding. Without a capture
// in progress on `stream` (direct launches) it does nothing. The extra parts hang off the first
// part's exec: destroy slots with destroy_graph_step (cudaGraphExecDestroy would leak them).
void graph_step_layer(cudaStream_t stream, int64_t layer);
int graph_split_layers();          // DS4_GRAPH_SPLIT (0 when unset)
void graph_split_set(int layers);  // benches / tests: >= 0
void destroy_graph_step(cudaGraphExec_t exec);

// The host time spent inside cudaGraphLaunch by launch_graph_step / run_graph_step since the last
// reset (the benches' DS4_KERNEL_TRACE windows print it beside the in-graph table: a step graph of
// ~800 nodes may cost its launch on the host before its first kernel runs).
struct GraphLaunchStats {
  int64_t launches = 0;
  double host_us = 0, max_us = 0;
};
GraphLaunchStats graph_launch_stats();
void graph_launch_stats_reset();

// The last op of a captured step: the device-side position counter += 1, so the next replay
// of the same graph sees the next position.
void enqueue_position_increment(int32_t* pos, cudaStream_t stream);
// The same by `rows` (a multi-row chunk's last op).
void enqueue_position_increment(int32_t* pos, int32_t rows, cudaStream_t stream);

}  // namespace ds4::cuda
