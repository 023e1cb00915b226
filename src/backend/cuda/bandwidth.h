#pragma once
// Device-memory bandwidth probes: the roofline every speed number is a fraction of,
// measured in the same run as the thing it judges.
#include <cuda_runtime.h>

#include <cstddef>

namespace ds4::cuda {

struct Bandwidth {
  double copy_gbps = 0;     // 16-byte copy kernel, (read + written bytes) / time, median
  double memcpy_gbps = 0;   // cudaMemcpyAsync device-to-device, same counting
  double read_gbps = 0;     // read-only streaming kernel (a reduction), read bytes / time
  size_t bytes = 0;         // size of each buffer
};

// Allocates two buffers of `bytes` (admitted first; make it several times the L2), times
// each probe `iters` times after a warm-up with CUDA events, and returns the medians.
Bandwidth measure_bandwidth(size_t bytes, int iters, cudaStream_t stream);

}  // namespace ds4::cuda
