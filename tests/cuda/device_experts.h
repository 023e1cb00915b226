#pragma once
// Test helper: E random experts of one format uploaded back to back at a 256-byte aligned
// stride (as the models' expert tensors), viewed as expert 0 with the strides GemvBatch takes.
#include <cuda_runtime.h>

#include <algorithm>
#include <random>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "core/weight.h"
#include "host_ref.h"

namespace ds4::cuda_test {

struct DeviceExperts {
  std::vector<HostWeight> host;
  cuda::DeviceBuffer data, scales, biases;
  size_t stride = 0, scale_stride = 0;  // bytes between experts' data, between their scales / biases
  WeightMatrix view;                    // expert 0, device pointers
};

inline DeviceExperts upload_experts(DType t, int64_t E, int64_t rows, int64_t cols, std::mt19937_64& rng,
                                    int64_t group = 64, DType st = DType::F16) {
  DeviceExperts d;
  for (int64_t e = 0; e < E; ++e) d.host.push_back(random_weight(t, rows, cols, rng, group, st));
  const size_t rb = d.host[0].data.size(), sb = d.host[0].scales.size();
  d.stride = (rb + 255) / 256 * 256, d.scale_stride = sb;
  d.data = cuda::DeviceBuffer(d.stride * size_t(E), "test experts");
  d.scales = cuda::DeviceBuffer(std::max<size_t>(sb, 1) * size_t(E), "test expert scales");
  d.biases = cuda::DeviceBuffer(std::max<size_t>(sb, 1) * size_t(E), "test expert biases");
  for (int64_t e = 0; e < E; ++e) {
    const HostWeight& h = d.host[size_t(e)];
    DS4_CUDA_CHECK(cudaMemcpy(d.data.as<uint8_t>() + e * d.stride, h.data.data(), rb, cudaMemcpyHostToDevice));
    if (sb) {
      DS4_CUDA_CHECK(cudaMemcpy(d.scales.as<uint8_t>() + e * sb, h.scales.data(), sb, cudaMemcpyHostToDevice));
      DS4_CUDA_CHECK(cudaMemcpy(d.biases.as<uint8_t>() + e * sb, h.biases.data(), sb, cudaMemcpyHostToDevice));
    }
  }
  d.view = host_view(d.host[0]);
  d.view.data = d.data.get();
  d.view.scales = sb ? d.scales.get() : nullptr;
  d.view.biases = sb ? d.biases.get() : nullptr;
  return d;
}

}  // namespace ds4::cuda_test
