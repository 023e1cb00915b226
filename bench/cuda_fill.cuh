#pragma once
// Device fills for the CUDA kernel benches (timing only: the values need be finite where they
// are scales, nothing else): random 32-bit words, and half-precision bit patterns near `bits`.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace ds4::bench {

__global__ void fill_random(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9e3779b1u ^ seed;
    h ^= h >> 15, h *= 0x2c1b3c6du, h ^= h >> 12, h *= 0x297a2d39u, h ^= h >> 15;
    p[i] = h;
  }
}

// Scales/biases as finite halves (random bits would include NaN/Inf patterns).
__global__ void fill_halves(uint16_t* p, size_t n, uint16_t bits) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint16_t(bits + (i & 0xff));
}

}  // namespace ds4::bench
