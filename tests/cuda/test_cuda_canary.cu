// The real GPU canary (backend/cuda/canary.h) next to other GPU work, on the H200 machine:
//  1. idle device: probes complete, no stall;
//  2. a busy stream running waves of ~1 ms blocks over every SM: the high-priority canary
//     still gets through (no stall), its p50/p95/p99/max are printed;
//  3. a busy kernel holding every thread slot of every SM for 3 s: the canary must flag a
//     stall while it lasts and record a >= 2000 ms sample once it ends.
// Plain executable (the cuda preset has no GoogleTest); exit 1 on failure.
#include <chrono>
#include <cstdio>
#include <thread>

#include "backend/cuda/canary.h"
#include "backend/cuda/check.h"

using namespace ds4;

namespace {

int failures = 0;
void check(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}
void print(const char* name, const CanaryStats& s) {
  std::printf("  %-8s samples %lld  p50 %.3f ms  p95 %.3f ms  p99 %.3f ms  max %.3f ms  stalls %lld\n", name,
              (long long)s.samples, s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms, (long long)s.stalls);
}

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// 1024 threads, <= 32 registers: two blocks fill an SM's 2048 thread slots, so nothing
// else (the canary included) can become resident until a block retires.
__global__ void __launch_bounds__(1024, 2) spin_kernel(unsigned long long ns, unsigned* sink) {
  const unsigned long long end = now_ns() + ns;
  unsigned n = 0;
  while (now_ns() < end) ++n;
  if (n == 0xffffffffu) *sink = n;  // keeps the loop
}

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

}  // namespace

int main() {
  cudaDeviceProp prop{};
  DS4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs, %d threads/SM\n", prop.name, prop.multiProcessorCount,
              prop.maxThreadsPerMultiProcessor);
  check(cuda::visible_device_count() >= 1, "visible_device_count >= 1");
  cudaStream_t busy;
  DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
  unsigned* sink;
  DS4_CUDA_CHECK(cudaMalloc(&sink, sizeof(unsigned)));
  int per_sm = 0;
  DS4_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, spin_kernel, 1024, 0));
  const int fill = per_sm * prop.multiProcessorCount;  // blocks that occupy the whole device
  std::printf("spin_kernel: %d blocks/SM resident (%d threads of %d)\n", per_sm, per_sm * 1024,
              prop.maxThreadsPerMultiProcessor);

  cuda::GpuCanary canary;
  canary.start();

  auto m = canary.mark();
  sleep_s(1.0);
  auto idle = canary.snapshot(m);
  print("idle", idle);
  check(idle.samples >= 3 && idle.stalls == 0, "idle: probes complete, no stall");

  // Waves of 1 ms blocks, 8 device-fills per launch, ~190 launches: ~1.5 s of back-to-back work.
  m = canary.mark();
  for (int i = 0; i < 1500 / 8; ++i) spin_kernel<<<fill * 8, 1024, 0, busy>>>(1000000ull, sink);
  DS4_CUDA_CHECK_LAUNCH();
  DS4_CUDA_CHECK(cudaStreamSynchronize(busy));
  auto sliced = canary.snapshot(m);
  print("sliced", sliced);
  check(sliced.samples >= 3 && sliced.stalls == 0, "busy stream of 1 ms blocks: canary gets through, no stall");

  // One 3 s wave holding every thread slot; a probe launched at most ~0.1 s in is flagged
  // by ~2.1 s.
  m = canary.mark();
  spin_kernel<<<fill, 1024, 0, busy>>>(3000000000ull, sink);
  DS4_CUDA_CHECK_LAUNCH();
  sleep_s(2.6);
  const bool flagged = canary.stalled_since(m);
  DS4_CUDA_CHECK(cudaStreamSynchronize(busy));
  sleep_s(0.3);  // the pending probe completes and is recorded
  auto hog = canary.snapshot(m);
  print("hog", hog);
  check(per_sm * 1024 >= prop.maxThreadsPerMultiProcessor, "spin_kernel fills every thread slot (precondition)");
  check(flagged, "3 s device hog: stall flagged while it lasts");
  check(hog.stalls == 1 && hog.max_ms >= 2000, "stall counted once, its >= 2000 ms latency recorded");

  canary.stop();
  DS4_CUDA_CHECK(cudaFree(sink));
  DS4_CUDA_CHECK(cudaStreamDestroy(busy));
  std::printf("%s (%d failures)\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
