#pragma once
// Internal to the CUDA GLM 5.x model: the model's private state, shared by model_cuda.cu
// (one-token decode step) and chunk.cu (the multi-row forward of a prefill chunk or a
// speculative verify).
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/graph_step.h"
#include "backend/cuda/memory.h"
#include "formats/tensor_source.h"
#include "models/cuda_candidates.h"
#include "models/glm5/config.h"
#include "models/glm5/cuda/cuda_state.h"
#include "models/glm5/cuda/device_weights.h"
#include "models/glm5/cuda/model_cuda.h"
#include "models/glm5/cuda/step_layout.h"
#include "models/glm5/weights.h"

namespace ds4::glm5 {

namespace dc = ds4::cuda;
using namespace ds4::glm5::cuda;

// Pinned host memory for the step's inputs and logits (fixed addresses for the captured graph).
using Pinned = dc::PinnedHost;

struct Glm5CudaModel::Impl {
  std::unique_ptr<TensorSource> src;
  Config c;
  Weights w;  // host views (the embedding is read from here)
  ModelInfo info;
  CudaModelOptions opt;
  DeviceWeights dw;
  StateLayout lay;
  ScratchLayout sl;
  dc::DeviceBuffer scratch;
  std::unique_ptr<Pinned> in_host, logits_host;
  cudaStream_t stream = nullptr;
  std::unique_ptr<CudaCandidates> cand;  // forward_candidates(): made on first use
  bool top_only = false;                 // the logits step ends in cand->enqueue(), no row copy
  std::vector<std::vector<float>>* tap = nullptr;  // layer_outputs(): streams after each layer
  // The input row of token t: the embedding's, or a synthetic model's generated row.
  void embed(int32_t t, float* out) const;

  float* S(size_t off) const { return reinterpret_cast<float*>(scratch.as<uint8_t>() + off); }
  float *cur = nullptr, *alt = nullptr;  // the streams and the other buffer (swapped by hc_out)
  void hc_in(const DHc& h, const float* norm);
  void hc_out(const DHc& h);
  void kda(const DKda& k, float* conv, float* rec);
  void mla(const DMla& m, const LayerOffsets& o, uint8_t* sb, const int32_t* pos);
  void ffn(const DLayer& L);
  void layer(CudaState& st, int64_t l);
  void enqueue_step(CudaState& st, bool logits);
  void run_step(CudaState& st, bool logits, bool direct);
  // Runs `enqueue` on the stream, or replays it from `exec` (captured on first use); syncs.
  void replay(cudaGraphExec_t& exec, bool direct, const std::function<void()>& enqueue) {
    dc::run_graph_step(stream, exec, !direct && opt.graphs, enqueue);
  }

  // ---- chunk.cu: the multi-row forward (up to cl.rows tokens, each with its own row scratch) ----
  ChunkLayout cl;
  dc::DeviceBuffer chunk;
  int64_t rows = 0;                 // rows of the chunk being enqueued
  size_t cur_off = 0, alt_off = 0;  // the streams' row-scratch offsets (swapped by hc_out_rows)
  float* R(int64_t t, size_t off) const {
    return reinterpret_cast<float*>(chunk.as<uint8_t>() + size_t(t) * cl.row_bytes + off);
  }
  template <class T = float>
  T* C(size_t off) const { return reinterpret_cast<T*>(chunk.as<uint8_t>() + off); }
  int64_t rs() const { return int64_t(cl.row_bytes / 4); }  // floats between rows
  void mgemv(const WeightMatrix& w, size_t x_off, size_t y_off);
  void mproj(const dc::DProj& p, size_t x_off, size_t y_off);
  void hc_in_rows(const DHc& h, const float* norm);
  void hc_out_rows(const DHc& h);
  void kda_rows(const DKda& k, float* conv, float* rec);
  void mla_rows(const DMla& m, const LayerOffsets& o, uint8_t* sb);
  void moe_rows(const DMoe& m);
  void ffn_rows(const DLayer& L);
  void enqueue_chunk(CudaState& st, Logits mode);
  void run_chunk(CudaState& st, int64_t n, Logits mode);

  // profile_chunk(): an event recorded at each section start of a directly launched chunk;
  // the time up to the next event is charged to that section's name.
  struct Marks {
    std::vector<const char*> names;
    std::vector<cudaEvent_t> events;
  };
  Marks* marks = nullptr;
  void mark(const char* name) {
    if (!marks) return;
    cudaEvent_t e;
    DS4_CUDA_CHECK(cudaEventCreate(&e));
    DS4_CUDA_CHECK(cudaEventRecord(e, stream));
    marks->names.push_back(name);
    marks->events.push_back(e);
  }
};

}  // namespace ds4::glm5
