#pragma once
// Internal to the CUDA GLM 5.x model: a conversation's device state (every layer's caches
// and the position counter in one buffer, step_layout.h) and its captured step graphs.
// save()/load() (state_io.cu) use the CPU state's sections (models/glm5/state_io.cpp), so a
// checkpoint moves between the CPU and the CUDA model.
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "models/glm5/config.h"
#include "models/glm5/cuda/step_layout.h"
#include "models/model.h"

namespace ds4::glm5::cuda {

class CudaState : public ModelState {
 public:
  CudaState(const Config& c, const StateLayout& lay)
      : c_(&c), lay_(&lay), buf(lay.bytes, "glm5 state (context caches)") {
    DS4_CUDA_CHECK(cudaMemset(buf.get(), 0, lay.bytes));
    // The step runs on a non-blocking stream, which does not wait for the legacy stream.
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
  }
  ~CudaState() override {
    for (auto& g : graph)
      if (g) cudaGraphExecDestroy(g);
    for (auto& [key, g] : chunk_graph)
      if (g) cudaGraphExecDestroy(g);
  }
  std::unique_ptr<ModelState> clone() const override { return std::unique_ptr<CudaState>(new CudaState(*this)); }
  int64_t position() const override { return pos; }
  size_t bytes() const override { return buf.bytes(); }
  void save(std::vector<StateSection>& out) const override;
  void load(const std::vector<StateSection>& in) override;

 private:
  const Config* c_;
  const StateLayout* lay_;

 public:
  ds4::cuda::DeviceBuffer buf;  // every layer's caches + the position counter
  int64_t pos = 0;
  cudaGraphExec_t graph[3] = {nullptr, nullptr, nullptr};  // [none, logits row, candidates]
  std::map<int64_t, cudaGraphExec_t> chunk_graph;  // multi-row forwards, by rows * 3 + logits mode

 private:
  CudaState(const CudaState& o) : c_(o.c_), lay_(o.lay_), buf(o.buf.bytes(), "glm5 state clone"), pos(o.pos) {
    DS4_CUDA_CHECK(cudaMemcpy(buf.get(), o.buf.get(), o.buf.bytes(), cudaMemcpyDeviceToDevice));
    DS4_CUDA_CHECK(cudaDeviceSynchronize());  // device-to-device copies return early
  }
};

}  // namespace ds4::glm5::cuda
