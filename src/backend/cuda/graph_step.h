#pragma once
// Capture-or-replay of a fixed-shape step (a decode step, a GLM chunk): the first call for a
// slot captures everything `enqueue` puts on `stream` into a CUDA graph and instantiates it in
// `exec`; later calls only launch `exec`. The models keep the kernels' position on the device,
// so one captured graph replays at every position. Shared by the three CUDA models.
#include <cuda_runtime.h>

#include <functional>

namespace ds4::cuda {

// use_graph false: runs `enqueue` directly (no capture). Either way ends with a stream sync.
// `exec` is the caller's slot (nullptr until the first capture; the caller destroys it).
// An exception from `enqueue` during capture ends the capture, drops the partial graph and
// propagates; `exec` stays null so the next call captures again.
void run_graph_step(cudaStream_t stream, cudaGraphExec_t& exec, bool use_graph,
                    const std::function<void()>& enqueue);

}  // namespace ds4::cuda
