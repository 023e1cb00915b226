#pragma once
// Test/bench helper: a HostWeight copied to the GPU, viewed as a WeightMatrix whose
// pointers are device pointers (what ds4::cuda::gemv takes).
#include <cuda_runtime.h>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "core/weight.h"
#include "host_ref.h"

namespace ds4::cuda_test {

struct DeviceWeight {
  cuda::DeviceBuffer data, scales, biases;
  WeightMatrix view;
};

inline DeviceWeight upload(const HostWeight& h) {
  DeviceWeight d;
  d.data = cuda::DeviceBuffer(h.data.size(), "test weight");
  DS4_CUDA_CHECK(cudaMemcpy(d.data.get(), h.data.data(), h.data.size(), cudaMemcpyHostToDevice));
  if (!h.scales.empty()) {
    d.scales = cuda::DeviceBuffer(h.scales.size(), "test weight scales");
    d.biases = cuda::DeviceBuffer(h.biases.size(), "test weight biases");
    DS4_CUDA_CHECK(cudaMemcpy(d.scales.get(), h.scales.data(), h.scales.size(), cudaMemcpyHostToDevice));
    DS4_CUDA_CHECK(cudaMemcpy(d.biases.get(), h.biases.data(), h.biases.size(), cudaMemcpyHostToDevice));
  }
  d.view.type = h.type;
  d.view.rows = h.rows;
  d.view.cols = h.cols;
  d.view.data = d.data.get();
  d.view.scales = d.scales.get();
  d.view.biases = d.biases.get();
  d.view.scale_type = h.scale_type;
  d.view.group_size = h.group_size;
  return d;
}

}  // namespace ds4::cuda_test
