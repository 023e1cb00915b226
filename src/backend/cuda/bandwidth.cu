// Bandwidth probes. Buffers are filled with non-zero data first: timing on zeros has been
// seen to run faster than on real data on this hardware.
#include <algorithm>
#include <vector>

#include "backend/cuda/bandwidth.h"
#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"

namespace ds4::cuda {
namespace {

__global__ void copy_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

// Reads every 16-byte word once; writes one word per block so the loads cannot be elided.
__global__ void read_kernel(const uint4* __restrict__ src, size_t n, uint32_t* out) {
  uint32_t acc = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldg(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;  // practically never true, but unknown to the compiler
}

__global__ void fill_kernel(uint32_t* p, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint32_t(i) * 2654435761u + 1u;
}

template <class F>
double median_ms(int iters, cudaStream_t stream, F&& body) {
  cudaEvent_t a, b;
  DS4_CUDA_CHECK(cudaEventCreate(&a));
  DS4_CUDA_CHECK(cudaEventCreate(&b));
  body();  // warm-up
  std::vector<float> ms(iters);
  for (int i = 0; i < iters; ++i) {
    DS4_CUDA_CHECK(cudaEventRecord(a, stream));
    body();
    DS4_CUDA_CHECK(cudaEventRecord(b, stream));
    DS4_CUDA_CHECK(cudaEventSynchronize(b));
    DS4_CUDA_CHECK(cudaEventElapsedTime(&ms[i], a, b));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

Bandwidth measure_bandwidth(size_t bytes, int iters, cudaStream_t stream) {
  bytes = bytes / 16 * 16;
  DeviceBuffer src(bytes, "bandwidth probe source"), dst(bytes, "bandwidth probe destination");
  DeviceBuffer sink(sizeof(uint32_t) * 65536, "bandwidth probe sink");
  int sms = 0;
  DS4_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const unsigned blocks = unsigned(sms * 8), threads = 256;  // a persistent grid: a few blocks per SM
  fill_kernel<<<blocks, threads, 0, stream>>>(src.as<uint32_t>(), bytes / 4);
  DS4_CUDA_CHECK_LAUNCH();
  const size_t n16 = bytes / 16;
  Bandwidth r;
  r.bytes = bytes;
  const double copy_ms = median_ms(iters, stream, [&] {
    copy_kernel<<<blocks, threads, 0, stream>>>(src.as<uint4>(), dst.as<uint4>(), n16);
    DS4_CUDA_CHECK_LAUNCH();
  });
  const double memcpy_ms = median_ms(iters, stream, [&] {
    DS4_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream));
  });
  const double read_ms = median_ms(iters, stream, [&] {
    read_kernel<<<blocks, threads, 0, stream>>>(src.as<uint4>(), n16, sink.as<uint32_t>());
    DS4_CUDA_CHECK_LAUNCH();
  });
  r.copy_gbps = 2.0 * double(bytes) / (copy_ms * 1e6);
  r.memcpy_gbps = 2.0 * double(bytes) / (memcpy_ms * 1e6);
  r.read_gbps = double(bytes) / (read_ms * 1e6);
  return r;
}

}  // namespace ds4::cuda
