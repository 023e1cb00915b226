#pragma once
// Internal to the CUDA Qwen model (.cu files only): the state (device caches and host-side
// history) and the model's implementation, shared by model_cuda.cu (trunk) and mtp.cu (the
// MTP draft head).
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "models/cuda_candidates.h"
#include "models/qwen_next/config.h"
#include "models/qwen_next/cuda/device_weights.h"
#include "models/qwen_next/cuda/model_cuda.h"
#include "models/qwen_next/cuda/step_layout.h"
#include "models/qwen_next/weights.h"

namespace ds4::qwen_next {

class CudaState : public ModelState {
 public:
  CudaState(const cuda::StateLayout& lay, const Config& c) : buf(lay.bytes, "qwen_next state (context caches)") {
    DS4_CUDA_CHECK(cudaMemset(buf.get(), 0, lay.bytes));
    // The step runs on a non-blocking stream, which does not wait for the legacy stream.
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
    for (int64_t p = 0; p < lay.ple_layers; ++p) ple_ctx.emplace_back(size_t(c.ngram - 1), c.eos);
  }
  ~CudaState() override {
    for (auto& g : graph)
      if (g) cudaGraphExecDestroy(g);
    for (auto& g : mtp_graph)
      if (g) cudaGraphExecDestroy(g);
  }
  std::unique_ptr<ModelState> clone() const override {
    auto s = std::unique_ptr<CudaState>(new CudaState(*this));
    return s;
  }
  int64_t position() const override { return pos; }
  size_t bytes() const override { return buf.bytes() + mtp.bytes(); }

  ds4::cuda::DeviceBuffer buf;                 // every layer's caches + the position counter
  std::vector<std::vector<int32_t>> ple_ctx;   // per PLE layer {ngram-1}: previous tokens
  int64_t pos = 0;
  cudaGraphExec_t graph[3] = {nullptr, nullptr, nullptr};  // [none, logits row, candidates]

  // MTP draft head (mtp.cu; cuda::MtpLayout): empty until enable_draft. Host copies of what
  // the device counters hold: mtp_pos = rows the head consumed (== the device counter).
  bool mtp_on = false;
  int64_t mtp_pos = 0;
  ds4::cuda::DeviceBuffer mtp;
  // [catch-up row, greedy draft chain of depth 1 .. kMtpMaxDepth]; captured per state (the
  // kernels take this state's cache pointers), never copied by clone().
  cudaGraphExec_t mtp_graph[cuda::kMtpMaxDepth + 1] = {};

 private:
  CudaState(const CudaState& o)
      : buf(o.buf.bytes(), "qwen_next state clone"), ple_ctx(o.ple_ctx), pos(o.pos), mtp_on(o.mtp_on),
        mtp_pos(o.mtp_pos) {
    DS4_CUDA_CHECK(cudaMemcpy(buf.get(), o.buf.get(), o.buf.bytes(), cudaMemcpyDeviceToDevice));
    if (o.mtp.bytes()) {
      mtp = ds4::cuda::DeviceBuffer(o.mtp.bytes(), "qwen_next MTP state clone");
      DS4_CUDA_CHECK(cudaMemcpy(mtp.get(), o.mtp.get(), o.mtp.bytes(), cudaMemcpyDeviceToDevice));
    }
    DS4_CUDA_CHECK(cudaDeviceSynchronize());  // device-to-device copies return early
  }
};

struct QwenNextCudaModel::Impl {
  std::unique_ptr<TensorSource> src;
  Config c;
  Weights w;  // host views (embedding and PLE tables are read from here)
  ModelInfo info;
  CudaModelOptions opt;
  cuda::DeviceWeights dw;
  cuda::StateLayout lay;
  cuda::ScratchLayout sl;
  ds4::cuda::DeviceBuffer scratch;
  std::unique_ptr<ds4::cuda::PinnedHost> in_host, logits_host;
  cudaStream_t stream = nullptr;
  std::unique_ptr<CudaCandidates> cand;  // forward_candidates(): made on first use
  bool top_only = false;                 // the logits step ends in cand->enqueue(), no row copy
  // MTP head (mtp.cu): layout of a state's head part, the chain's scratch, its pinned
  // host side (step tokens in, argmax records and one logits row out).
  cuda::MtpLayout ml;
  cuda::MtpScratch ms;
  ds4::cuda::DeviceBuffer mtp_scratch;
  std::unique_ptr<ds4::cuda::PinnedHost> mtp_tok_host, mtp_picks_host, mtp_row_host;

  float* S(size_t off) const { return reinterpret_cast<float*>(scratch.as<uint8_t>() + off); }
  void proj(const ds4::cuda::DProj& p, const float* x, float* y);
  void hyper_read(const cuda::DHyper& h, const float* x, float* mixed, float* inject);
  // One decoder layer on h = S(sl.h) at the device position *pos, its caches at `o` in the
  // buffer `sb` sized for max_ctx rows (the trunk's layers and the MTP head's share it).
  void layer(const cuda::DLayer& L, const cuda::LayerOffsets& o, uint8_t* sb, const int32_t* pos, int64_t max_ctx);
  void layer(CudaState& st, int64_t l);
  void enqueue_step(CudaState& st, bool logits);
  void run_step(CudaState& st, bool logits);

  // ---- mtp.cu ----
  bool has_mtp() const { return dw.mtp.has_value(); }
  void mtp_init();  // after upload: layouts, scratch, pinned buffers
  void mtp_enable(CudaState& st) const;
  // forward(): before the trunk step at position p, consume pending pairs when slot p would
  // overwrite one (a catch-up: it uses S(sl.h) and the head's scratch, so `h` of a push must
  // not live there while one can run); after the step, push its final row h {hc*d} and token.
  // A chunked forward does room + push per row, in position order, after its chunk.
  void mtp_room(CudaState& st, int64_t p);
  void mtp_push(CudaState& st, int64_t p, int32_t token, const float* h);
  // Every pending pair through the head's layer (CPU mtp_catch_up): rows mtp_pos .. upto-1.
  void mtp_catch_up(CudaState& st, int64_t upto);
  void mtp_enqueue_catch_up_row(CudaState& st);
  // Draft step k of a chain: prepare(row, *tok) -> the head's layer at draft_pos -> mixer ->
  // lm_head -> logits row k -> its argmax record; the layer output becomes the next row.
  void mtp_enqueue_draft_step(CudaState& st, int k, const int32_t* tok, bool last);
  void mtp_enqueue_chain_start(CudaState& st);
  void mtp_enqueue_chain(CudaState& st, int depth);
  // MTPLX _prepare_inputs_eager on the device: S(sl.h) = fc_hidden(norm_hidden(row)) per
  // stream + fc_emb(norm_emb(embed(*tok))) in every stream.
  void mtp_prepare(const float* row, const int32_t* tok);
  void mtp_draft(CudaState& st, int32_t next, int depth, const DraftHead::Pick& pick, std::vector<float>* logits,
                 std::vector<int32_t>& drafts);
  // commit_prefix of a verify window (qwenchunk): see QwenNextCudaModel::mtp_keep_through.
  void mtp_keep_through(CudaState& st, int64_t pos_after);
  uint8_t* M(const CudaState& st, size_t off) const { return st.mtp.as<uint8_t>() + off; }
  float* MS(size_t off) const { return reinterpret_cast<float*>(mtp_scratch.as<uint8_t>() + off); }
};

}  // namespace ds4::qwen_next
