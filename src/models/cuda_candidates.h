#pragma once
// For the CUDA models (include from .cu files only): the device op's result buffer and its
// pinned host copy (fixed addresses, so a captured step graph can write them), and the
// unpacking into SampleCandidates. One per model: a step's result is read right after it.
#include <algorithm>
#include <cstring>
#include <memory>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/sample_reduce.h"
#include "models/model.h"
#include "models/sample_candidates.h"

namespace ds4 {

class CudaCandidates {
 public:
  // Always the op's maximum k: one captured graph serves every request's k, and 1024
  // candidates are 8 KiB (the row is 600 KB at 151k).
  static constexpr int kK = cuda::kSampleReduceMaxK;
  CudaCandidates()
      : dev_(cuda::sample_reduce_words(kK) * sizeof(int32_t), "sampling candidates"),
        host_(cuda::sample_reduce_words(kK) * sizeof(int32_t)),
        t_dev_(sizeof(double), "sampling temperature"),
        t_host_(sizeof(double)) {
    set_temperature(0);
  }
  // The temperature of the next step's exp_sum (<= 0: none); read by the step's own copy.
  void set_temperature(double t) { *static_cast<double*>(t_host_.p) = t; }

  // After the step's logits {vocab} are in `row` (device): the op, then the small copy back.
  // The temperature goes up inside the step, so a captured graph takes each request's value.
  void enqueue(const float* row, int64_t vocab, cudaStream_t stream) {
    DS4_CUDA_CHECK(cudaMemcpyAsync(t_dev_.get(), t_host_.p, sizeof(double), cudaMemcpyHostToDevice, stream));
    cuda::sample_reduce_f32(row, vocab, kK, t_dev_.as<double>(), dev_.as<int32_t>(), stream);
    DS4_CUDA_CHECK(cudaMemcpyAsync(host_.p, dev_.get(), cuda::sample_reduce_words(kK) * sizeof(int32_t),
                                   cudaMemcpyDeviceToHost, stream));
  }
  // After the stream is synchronised. Hands back all kK (the caller asked for <= kK: the
  // extra ones only let the sampler decide more often, e.g. a wide min-p cut).
  void unpack(int64_t vocab, SampleCandidates& out) const {
    const int32_t* w = static_cast<const int32_t*>(host_.p);
    const size_t n = size_t(w[1]);
    out.argmax = w[0];
    out.finite = w[2];
    out.vocab = vocab;
    std::memcpy(&out.exp_sum, w + 4, sizeof(double));
    const int32_t* ids = w + cuda::kSampleReduceHeader;
    out.ids.assign(ids, ids + n);
    out.logits.resize(n);
    std::memcpy(out.logits.data(), ids + w[3], n * sizeof(float));
  }

 private:
  cuda::DeviceBuffer dev_;
  cuda::PinnedHost host_;
  cuda::DeviceBuffer t_dev_;
  cuda::PinnedHost t_host_;
};

// Model::forward_candidates of a CUDA model: false (nothing run) unless it is one token and
// k fits the op, and the caller then takes the host path. `step` runs forward(kLast) with the
// model's step switched to end in cand.enqueue() instead of the row copy (its own captured
// graph), then the candidates are unpacked; when need_full says so, this step's row, still in
// `d_row` (nothing ran since), is copied back through `pinned` {vocab floats}. `cand` is made
// on first use.
template <class Step>
bool cuda_forward_candidates(std::unique_ptr<CudaCandidates>& cand, const CandidateRequest& req, size_t tokens,
                             bool& top_only, Step&& step, const float* d_row, void* pinned, int64_t vocab,
                             cudaStream_t stream, SampleCandidates& out, std::vector<float>& logits,
                             const Model::NeedFull& need_full) {
  if (tokens != 1 || req.k > CudaCandidates::kK) return false;
  if (!cand) cand = std::make_unique<CudaCandidates>();
  cand->set_temperature(req.exp_sum_temperature);
  top_only = true;
  try {
    step();
  } catch (...) {
    top_only = false;
    throw;
  }
  top_only = false;
  logits.clear();
  cand->unpack(vocab, out);
  if (!need_full(out)) return true;
  DS4_CUDA_CHECK(cudaMemcpyAsync(pinned, d_row, size_t(vocab) * sizeof(float), cudaMemcpyDeviceToHost, stream));
  DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
  const float* src = static_cast<const float*>(pinned);
  logits.assign(src, src + vocab);
  return true;
}

}  // namespace ds4
