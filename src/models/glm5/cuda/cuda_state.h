#pragma once
// Internal to the CUDA GLM 5.x model: a conversation's device state (every layer's caches
// and the position counter in one buffer, step_layout.h) and its captured step graphs.
// save()/load() (state_io.cu) use the CPU state's sections (models/glm5/state_io.cpp), so a
// checkpoint moves between the CPU and the CUDA model.
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <vector>

#include "backend/cuda/batch_graphs.h"
#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "core/error.h"
#include "models/glm5/config.h"
#include "models/glm5/cuda/step_layout.h"
#include "models/model.h"

namespace ds4::glm5::cuda {

class CudaState : public ModelState {
 public:
  CudaState(const Config& c, const StateLayout& lay)
      : c_(&c), lay_(&lay), buf(lay.bytes, "glm5 state (context caches)"), serial(ds4::cuda::next_state_serial()) {
    DS4_CUDA_CHECK(cudaMemset(buf.get(), 0, lay.bytes));
    // The step runs on a non-blocking stream, which does not wait for the legacy stream.
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
  }
  ~CudaState() override { drop_graphs(); }
  // Forgets every captured graph (they hold this state's addresses and the forward's shape).
  void drop_graphs() {
    for (auto& g : graph)
      if (g) cudaGraphExecDestroy(g), g = nullptr;
    for (auto* m : {&chunk_graph, &mtp_graph})
      for (auto& [key, g] : *m)
        if (g) cudaGraphExecDestroy(g);
    chunk_graph.clear();
    mtp_graph.clear();
  }
  std::unique_ptr<ModelState> clone() const override { return std::unique_ptr<CudaState>(new CudaState(*this)); }
  int64_t position() const override { return pos; }
  size_t bytes() const override { return buf.bytes() + cap.bytes(); }
  void save(std::vector<StateSection>& out) const override;
  void load(const std::vector<StateSection>& in) override;

 private:
  const Config* c_;
  const StateLayout* lay_;

 public:
  ds4::cuda::DeviceBuffer buf;  // every layer's caches + the position counter
  // Unique per state object (clones included), never reused: keys the model's decode_batch
  // graphs (batch.cu), which hold the batch's buffer addresses.
  const uint64_t serial;
  int64_t pos = 0;
  cudaGraphExec_t graph[3] = {nullptr, nullptr, nullptr};  // [none, logits row, candidates]
  std::map<int64_t, cudaGraphExec_t> chunk_graph;  // multi-row forwards, by rows * 3 + logits mode (+ capture)

  // MTP draft head (mtp.cu; CPU: State's mtp_* fields). The head layer's caches, its
  // position, the trunk's last row and the queued trunk rows live in `buf` (lay.mtp); the
  // queued pairs' next tokens stay here (the host knows them, and ships them with a draft).
  bool mtp_on = false;
  int64_t mtp_pos = 0;                  // host mirror of the head layer's position counter
  std::vector<int32_t> pending_next;    // {qlen}: next token of each queued pair
  std::map<int64_t, cudaGraphExec_t> mtp_graph;  // draft chains, by queued rows and depth

  // Captured verify window (spec_commit.cu; CPU: KdaCapture): per KDA layer its conv state
  // before the window, its conv input rows and its recurrent state after every row.
  ds4::cuda::DeviceBuffer cap;  // capacity cap_rows rows, grown on demand
  int64_t cap_rows = 0;
  int64_t cap_n = 0, cap_pos0 = 0;  // rows of the pending window (0: none) and its first position
  // The model's graph_epoch when the graphs above were captured (Impl::fresh_graphs).
  int64_t graph_epoch = 0;

 private:
  CudaState(const CudaState& o)
      : c_(o.c_), lay_(o.lay_), buf(o.buf.bytes(), "glm5 state clone"), serial(ds4::cuda::next_state_serial()),
        pos(o.pos), mtp_on(o.mtp_on),
        mtp_pos(o.mtp_pos), pending_next(o.pending_next), cap_n(o.cap_n), cap_pos0(o.cap_pos0),
        graph_epoch(o.graph_epoch) {
    DS4_CUDA_CHECK(cudaMemcpy(buf.get(), o.buf.get(), o.buf.bytes(), cudaMemcpyDeviceToDevice));
    if (o.cap_n > 0) {  // a pending window's records travel with the clone (as the CPU state's do)
      cap = ds4::cuda::DeviceBuffer(o.cap.bytes(), "glm5 verify capture clone");
      cap_rows = o.cap_rows;
      DS4_CUDA_CHECK(cudaMemcpy(cap.get(), o.cap.get(), o.cap.bytes(), cudaMemcpyDeviceToDevice));
    }
    DS4_CUDA_CHECK(cudaDeviceSynchronize());  // device-to-device copies return early
  }
};

// The CUDA state behind a ModelState handed to this model.
inline CudaState& cuda_state(ModelState& s) {
  auto* st = dynamic_cast<CudaState*>(&s);
  if (!st) throw InputError("glm5 cuda: state does not come from this CUDA model");
  return *st;
}

}  // namespace ds4::glm5::cuda
