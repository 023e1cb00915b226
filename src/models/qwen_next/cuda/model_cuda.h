#pragma once
// Qwen3.8 Flash Next on the CUDA backend (issue #10). Same Model interface and results as
// the CPU model (src/models/qwen_next/model.h) within float32 rounding; weights are uploaded
// once at load (after memory admission), each state's caches live on the GPU, and every
// token is one decode step, replayed from a CUDA graph captured per state. Prefill runs the
// same step token by token (no chunked GPU prefill yet). No MTP draft head on the GPU yet.
#include <memory>
#include <string>

#include "formats/tensor_source.h"
#include "models/model.h"

namespace ds4::qwen_next {

struct CudaModelOptions {
  bool graphs = true;            // replay the decode step from a CUDA graph (false: launch each kernel)
  bool fuse_projections = true;  // stack projections of one input into one gemv (false: one each)
  // Non-zero: a synthetic model (models/qwen_next/synthetic_full.h): every matrix generated
  // on the GPU from this seed, embedding rows and PLE rows made per token on the host.
  uint64_t synthetic_seed = 0;
};

class QwenNextCudaModel : public Model {
 public:
  QwenNextCudaModel(std::unique_ptr<TensorSource> src, const LoadOptions& opt, const CudaModelOptions& copt = {});
  ~QwenNextCudaModel() override;
  const ModelInfo& info() const override;
  std::unique_ptr<ModelState> new_state() const override;
  void forward(ModelState& state, std::span<const int32_t> tokens, Logits mode, std::vector<float>& logits) override;
  // One token: the candidates are picked on the GPU and only they are copied back.
  void forward_candidates(ModelState& state, std::span<const int32_t> tokens, const CandidateRequest& req,
                          SampleCandidates& out, std::vector<float>& logits, const NeedFull& need_full) override;

  size_t weight_bytes() const;  // device bytes of the uploaded weights
  // Bytes of weights one decode token reads: all but the routed experts, plus top_k of
  // experts of them (state and KV reads come on top).
  size_t weight_bytes_per_token() const;
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

std::unique_ptr<Model> load_cuda(const std::string& path, const LoadOptions& opt, const CudaModelOptions& copt = {});

}  // namespace ds4::qwen_next
