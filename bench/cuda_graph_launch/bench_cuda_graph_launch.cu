// What one replay of a captured step graph costs beyond its kernels, against the node count
// (session 37: the in-graph traces showed 1.3-2.3 ms a decode step with no kernel running, most
// of it before the step's first kernel, in graphs of 760-880 nodes). Per graph shape: N kernel
// nodes of a short kernel (kBlocks blocks that each spin ~kSpinNs), optionally behind a 4-byte
// host-to-device copy (as the models' steps open) and optionally as programmatic dependents (PDL);
// then, over kReps replays: the host time of cudaGraphLaunch alone, the wall time of launch + sync,
// and the device time between events recorded around the replay. Prints a markdown table.
// Usage: bench_cuda_graph_launch [reps]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_device.cuh"

namespace {

constexpr int kBlocks = 32;
constexpr long long kSpinNs = 2000;

__global__ void spin_kernel(int* sink, long long ns, bool pdl) {
  if (pdl) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  long long t = t0;
  while (t - t0 < ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  if (threadIdx.x == 0 && t < 0) *sink = int(t);  // never: keeps the loop
}

using Clock = std::chrono::steady_clock;
double us(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

struct Row {
  double launch_us, wall_us, device_us;
};

Row run(int nodes, bool copy, bool pdl, int reps, cudaStream_t s, int* d_sink, int* d_tok, int* h_tok) {
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  DS4_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  if (copy) DS4_CUDA_CHECK(cudaMemcpyAsync(d_tok, h_tok, 4, cudaMemcpyHostToDevice, s));
  for (int i = 0; i < nodes; ++i)
    ds4::cuda::gemv_detail::launch_maybe_pdl_smem(pdl, spin_kernel, dim3(kBlocks), 128, 0, s, d_sink, kSpinNs, pdl);
  DS4_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  DS4_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
  cudaEvent_t e0, e1;
  DS4_CUDA_CHECK(cudaEventCreate(&e0));
  DS4_CUDA_CHECK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) DS4_CUDA_CHECK(cudaGraphLaunch(exec, s));
  DS4_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> launch, wall, dev;
  for (int r = 0; r < reps; ++r) {
    DS4_CUDA_CHECK(cudaEventRecord(e0, s));
    const auto a = Clock::now();
    DS4_CUDA_CHECK(cudaGraphLaunch(exec, s));
    const auto b = Clock::now();
    DS4_CUDA_CHECK(cudaEventRecord(e1, s));
    DS4_CUDA_CHECK(cudaStreamSynchronize(s));
    const auto c = Clock::now();
    float ms = 0;
    DS4_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    launch.push_back(us(a, b)), wall.push_back(us(a, c)), dev.push_back(1e3 * ms);
  }
  for (auto* v : {&launch, &wall, &dev}) std::sort(v->begin(), v->end());
  DS4_CUDA_CHECK(cudaEventDestroy(e0));
  DS4_CUDA_CHECK(cudaEventDestroy(e1));
  DS4_CUDA_CHECK(cudaGraphExecDestroy(exec));
  DS4_CUDA_CHECK(cudaGraphDestroy(g));
  return {launch[launch.size() / 2], wall[wall.size() / 2], dev[dev.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  cudaStream_t s;
  DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int *d_sink, *d_tok, *h_tok;
  DS4_CUDA_CHECK(cudaMalloc(&d_sink, 4));
  DS4_CUDA_CHECK(cudaMalloc(&d_tok, 4));
  DS4_CUDA_CHECK(cudaMallocHost(&h_tok, 4));
  cudaDeviceProp p{};
  DS4_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
  std::printf("%s: graph replays of N nodes of a %d-block kernel spinning %lld ns (median of %d)\n", p.name, kBlocks,
              kSpinNs, reps);
  std::printf(
      "| N | leading H2D copy | PDL | cudaGraphLaunch host us | launch + sync wall us | device us (events) | "
      "device us per node | beyond the spins, us per node |\n|---|---|---|---|---|---|---|---|\n");
  for (int n : {1, 100, 400, 800, 1600})
    for (int copy = 0; copy < 2; ++copy)
      for (int pdl = 0; pdl < 2; ++pdl) {
        const Row r = run(n, copy, pdl, reps, s, d_sink, d_tok, h_tok);
        std::printf("| %d | %s | %s | %.1f | %.1f | %.1f | %.3f | %.3f |\n", n, copy ? "yes" : "no", pdl ? "yes" : "no",
                    r.launch_us, r.wall_us, r.device_us, r.device_us / n, (r.device_us - n * kSpinNs / 1e3) / n);
        std::fflush(stdout);
      }
  return 0;
}
