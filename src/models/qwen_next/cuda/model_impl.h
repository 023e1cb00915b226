#pragma once
// Internal to the CUDA Qwen3.8 Flash Next model (.cu files only): the model's private state
// and a conversation's device state, shared by model_cuda.cu (the one-token decode step, the
// host side of a token, forward()), chunk.cu (the multi-row forward of a prefill chunk or a
// speculative verify, and the captured-prefix commit) and mtp.cu (the MTP draft head).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "backend/cuda/batch_graphs.h"
#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/graph_step.h"
#include "backend/cuda/grouped_gemm.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/op_timer.h"
#include "core/error.h"
#include "formats/tensor_source.h"
#include "models/cuda_batching.h"
#include "models/cuda_candidates.h"
#include "models/qwen_next/config.h"
#include "models/qwen_next/cuda/device_weights.h"
#include "models/qwen_next/cuda/kernels.h"
#include "models/qwen_next/cuda/model_cuda.h"
#include "models/qwen_next/cuda/step_layout.h"
#include "models/qwen_next/weights.h"

namespace ds4::qwen_next {

namespace dc = ds4::cuda;
using namespace ds4::qwen_next::cuda;

// Pinned host memory for the step's inputs and logits (fixed addresses for the captured graph).
using Pinned = dc::PinnedHost;

// Every gemv of the step, the chunk and the MTP head reads the direct path: gemv_rows (the
// chunk) equals gemv/kDirect bit for bit, and kAuto equals kDirect under the default gemv
// kernel generation only (kernel 1 stages Q8_0/Q2_K/IQ2_XXS), so the step asks for it
// explicitly.
inline dc::GemvOptions gemv_options() {
  dc::GemvOptions o;
  o.path = dc::GemvPath::kDirect;
  return o;
}

class CudaState : public ModelState {
 public:
  // ml: the MTP head's layout, nullptr for a model without a device head.
  CudaState(const StateLayout& lay, const Config& c, const MtpLayout* ml)
      : buf(lay.bytes, "qwen_next state (context caches)"), serial(dc::next_state_serial()), c_(&c), lay_(&lay),
        ml_(ml) {
    DS4_CUDA_CHECK(cudaMemset(buf.get(), 0, lay.bytes));
    // The step runs on a non-blocking stream, which does not wait for the legacy stream.
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
    for (int64_t p = 0; p < lay.ple_layers; ++p) ple_ctx.emplace_back(size_t(c.ngram - 1), c.eos);
  }
  ~CudaState() override { drop_graphs(); }
  // Every captured graph of this state (recaptured on next use).
  void drop_graphs() {
    for (auto& g : graph)
      if (g) cudaGraphExecDestroy(g), g = nullptr;
    for (auto& [key, g] : chunk_graph)
      if (g) cudaGraphExecDestroy(g);
    chunk_graph.clear();
    for (auto& g : mtp_graph)
      if (g) cudaGraphExecDestroy(g), g = nullptr;
  }
  // A clone captures its own graphs (they hold this state's addresses), copies the MTP head's
  // part, and a pending captured verify window with a copy of its records (they apply to the
  // clone's equal buffer).
  std::unique_ptr<ModelState> clone() const override { return std::unique_ptr<CudaState>(new CudaState(*this)); }
  int64_t position() const override { return pos; }
  size_t bytes() const override { return buf.bytes() + mtp.bytes() + cap.bytes(); }
  // The CPU State's named sections (state_io.cu): save copies the device caches into a host
  // qwen_next::State and lets it write them; load reads and checks a fresh host State, then
  // uploads it. Either side's checkpoint loads on the other.
  void save(std::vector<StateSection>& out) const override;
  void load(const std::vector<StateSection>& in) override;

  dc::DeviceBuffer buf;                        // every layer's caches + the position counter
  // Unique per state object (clones included), never reused: keys the model's decode_batch
  // graphs (batch.cu), which hold the batch's buffer addresses.
  const uint64_t serial;
  std::vector<std::vector<int32_t>> ple_ctx;   // per PLE layer {ngram-1}: previous tokens
  int64_t pos = 0;
  cudaGraphExec_t graph[3] = {nullptr, nullptr, nullptr};  // [none, logits row, candidates]
  // Multi-row forwards, by (rows * 3 + logits mode) * 2 + captured (chunk.cu chunk_key).
  std::map<int64_t, cudaGraphExec_t> chunk_graph;
  // Captured verify window (verify_capture): its tokens (empty: none pending), the PLE token
  // contexts before it, and its device records (the model's CaptureLayout), made at this
  // state's first captured window of more than one row and never resized (the captured
  // chunk graphs hold its address). Per state, so several sessions speculate at once.
  std::vector<int32_t> cap_tokens;
  std::vector<std::vector<int32_t>> cap_ple_ctx0;
  dc::DeviceBuffer cap;

  // MTP draft head (mtp.cu; MtpLayout): empty until enable_draft. Host copy of what the
  // device counter holds: mtp_pos = rows the head consumed (== the device counter).
  bool mtp_on = false;
  int64_t mtp_pos = 0;
  dc::DeviceBuffer mtp;
  // [catch-up row, greedy draft chain of depth 1 .. kMtpMaxDepth]; captured per state (the
  // kernels take this state's cache pointers), never copied by clone().
  cudaGraphExec_t mtp_graph[kMtpMaxDepth + 1] = {};

 private:
  const Config* c_;
  const StateLayout* lay_;
  const MtpLayout* ml_;  // nullptr: no device MTP head

  CudaState(const CudaState& o)
      : buf(o.buf.bytes(), "qwen_next state clone"), serial(dc::next_state_serial()), ple_ctx(o.ple_ctx), pos(o.pos),
        cap_tokens(o.cap_tokens), cap_ple_ctx0(o.cap_ple_ctx0), mtp_on(o.mtp_on), mtp_pos(o.mtp_pos), c_(o.c_),
        lay_(o.lay_), ml_(o.ml_) {
    DS4_CUDA_CHECK(cudaMemcpy(buf.get(), o.buf.get(), o.buf.bytes(), cudaMemcpyDeviceToDevice));
    if (!o.cap_tokens.empty() && o.cap.bytes()) {
      cap = dc::DeviceBuffer(o.cap.bytes(), "qwen_next verify capture clone");
      DS4_CUDA_CHECK(cudaMemcpy(cap.get(), o.cap.get(), o.cap.bytes(), cudaMemcpyDeviceToDevice));
    }
    if (o.mtp.bytes()) {
      mtp = dc::DeviceBuffer(o.mtp.bytes(), "qwen_next MTP state clone");
      DS4_CUDA_CHECK(cudaMemcpy(mtp.get(), o.mtp.get(), o.mtp.bytes(), cudaMemcpyDeviceToDevice));
    }
    DS4_CUDA_CHECK(cudaDeviceSynchronize());  // device-to-device copies return early
  }
};

// A state's rows in a multi-row forward: rows [r0, r0 + n) are its consecutive tokens at
// positions *pos .. *pos + n - 1 (a chunk: one group of every row; decode_batch: one row per
// state; verify_batch: each state's verify window). capture: the group records its verify
// window in the state's cap buffer (verify_capture of more than one row).
struct SeqGroup {
  CudaState* st;
  int64_t r0, n;
  bool capture;
};

// The CUDA state behind a ModelState handed to this model.
inline CudaState& cuda_state(ModelState& s) {
  auto* st = dynamic_cast<CudaState*>(&s);
  if (!st) throw InputError("qwen_next cuda: state does not come from this CUDA model");
  return *st;
}

struct QwenNextCudaModel::Impl {
  std::unique_ptr<TensorSource> src;
  Config c;
  Weights w;  // host views (embedding and PLE tables are read from here)
  ModelInfo info;
  CudaModelOptions opt;
  DeviceWeights dw;
  StateLayout lay;
  ScratchLayout sl;
  dc::DeviceBuffer scratch;
  std::unique_ptr<Pinned> in_host, logits_host;  // chunk_rows rows; the one-token step uses row 0
  cudaStream_t stream = nullptr;
  std::unique_ptr<CudaCandidates> cand;  // forward_candidates(): made on first use
  BatchCandidates batch_cand;             // decode_batch_candidates(): rows' candidates
  bool top_only = false;                 // the logits step ends in cand->enqueue(), no row copy
  // set_profiling(true): an event after each named op of direct-launch decode steps and
  // chunks (mark() does nothing while off), summed per name.
  dc::OpTimer prof;
  bool graphs_before_profiling = true;
  void mark(const char* name) { prof.mark(stream, name); }

  float* S(size_t off) const { return reinterpret_cast<float*>(scratch.as<uint8_t>() + off); }
  void gemv(const WeightMatrix& w, const float* x, float* y) const { dc::gemv(w, x, y, stream, gemv_options()); }
  void proj(const DProj& p, const float* x, float* y);
  void hyper_read(const DHyper& h, const float* x, float* mixed, float* inject);
  // One decoder layer on h = S(sl.h) at the device position *pos, its caches at `o` in the
  // buffer `sb` sized for max_ctx rows (the trunk's layers and the MTP head's share it).
  void layer(const DLayer& L, const LayerOffsets& o, uint8_t* sb, const int32_t* pos, int64_t max_ctx);
  void layer(CudaState& st, int64_t l);
  void enqueue_step(CudaState& st, bool logits);
  void run_step(CudaState& st, bool logits);
  // The host side of token `tok` at input row `row` of the pinned buffer: its embedding in
  // every stream and each PLE layer's gathered n-gram rows (advances st.ple_ctx).
  void fill_input(CudaState& st, int32_t tok, int64_t row);
  // Throws InputError for a token outside the vocabulary or a context overflow.
  void check_input(const CudaState& st, std::span<const int32_t> tokens) const;

  // ---- chunk.cu: the multi-row forward (up to cl.rows tokens, each with its own row scratch) ----
  ChunkLayout cl;
  dc::DeviceBuffer chunk;
  int64_t rows = 0;  // rows of the chunk being enqueued
  float* R(int64_t t, size_t off) const {
    return reinterpret_cast<float*>(chunk.as<uint8_t>() + size_t(t) * cl.row_bytes + off);
  }
  template <class T = float>
  T* C(size_t off) const { return reinterpret_cast<T*>(chunk.as<uint8_t>() + off); }
  int64_t rs() const { return int64_t(cl.row_bytes / 4); }  // floats between rows
  Rows all_rows() const { return Rows{rows, rs()}; }
  // Tensor-core products of a prefill chunk (backend/cuda matmul_rows; made at load, its
  // min_rows = CudaModelOptions::gemm_rows) and whether the chunk being enqueued uses them.
  std::unique_ptr<dc::MatmulWorkspace> mm;
  std::unique_ptr<dc::GroupedGemm> gg;  // routed experts of large chunks (on mm's handle), or null
  // mm's min_rows is opt.gemm_rows (set at load and by set_options), 0 inside a decode_batch
  // forward (dc::ExactProducts): a batch never takes the tensor cores.
  bool tensor_cores() const { return mm && mm->min_rows() > 0 && rows >= mm->min_rows(); }
  // cuda_cores: the exact path on gemv's CUDA-core kernels even under DS4_MLX4_TC (the
  // hyper-connection read: its decode form is hyper_fused.cu's, gemv's arithmetic).
  void mgemv(const WeightMatrix& w, size_t x_off, size_t y_off, bool cuda_cores = false);
  void mproj(const DProj& p, size_t x_off, size_t y_off, bool cuda_cores = false);
  // Output rows [r0, r1) of a stacked projection again on the exact path after a tensor-core
  // mproj (the products that pick experts or blocks: a chunk chooses as decode steps would).
  void mproj_exact(const DProj& p, size_t x_off, size_t y_off, int64_t r0, int64_t r1);
  void hyper_read_rows(const DHyper& h, size_t x_off, bool inject);
  // Captured verify: a conv history record [state ; the n rows' conv inputs] (CaptureLayout).
  void record_history(float* hist, const float* state, int64_t state_rows, const float* in_rows, int64_t width,
                      int64_t n);
  // The stateful blocks over the rows, one launch per row group (SeqGroup: a chunk is one group
  // of every row, decode_batch one group per row, verify_batch one per window), each on its
  // state's buffer, looping the group's rows in token order inside the launch exactly as that
  // state's own chunk of those rows would (a one-row group: the decode step's launch on its
  // row's scratch). Row t's position: cl.positions[t]. k: the layer's capture offsets when a
  // group records its verify window (SeqGroup::capture), else null.
  void ple_rows(const DPle& p, std::span<const SeqGroup> groups, size_t conv_off, const CaptureOffsets* k);
  void gdn_rows(const DGdn& g, std::span<const SeqGroup> groups, const LayerOffsets& o, const CaptureOffsets* k);
  void qsa_rows(const DQsa& a, const LayerOffsets& o, std::span<const SeqGroup> groups);
  void moe_rows(const DMoe& m);
  // cl.positions of the groups' rows: group g's row r0 + t at its state's counter + t.
  void positions_in(std::span<const SeqGroup> groups);
  // Every layer over the groups' rows (cl.positions set, input rows in).
  void layers_rows(std::span<const SeqGroup> groups);
  // The mixer + lm_head of every row, their logits to pinned rows 0.. (kAll; decode_batch).
  void head_all_rows();
  void enqueue_chunk(CudaState& st, Logits mode, bool capture);
  void run_chunk(CudaState& st, int64_t n, Logits mode, bool capture);
  // One chunk of tokens (1..cl.rows) at st.pos, the host side included: MTP ring room, input
  // rows, run_chunk, the rows pushed into the MTP ring, st.pos += rows. The logits are in
  // logits_host (kAll: every row; kLast: the last row).
  void forward_chunk(CudaState& st, std::span<const int32_t> tokens, Logits mode, bool capture);

  // ---- captured verify (chunk.cu): the records' layout, the same for every state ----
  CaptureLayout capl;  // set at the first verify_capture (capture_limit() rows)
  // The longest window verify_capture records in one chunk (options fixed at load).
  int64_t capture_limit() const { return std::min<int64_t>(opt.capture_rows, opt.chunk_rows); }
  float* CAP(const CudaState& st, size_t off) const { return reinterpret_cast<float*>(st.cap.as<uint8_t>() + off); }

  // ---- batch.cu: decode_batch, one token for each of `rows` states as one forward ----
  dc::BatchGraphs batch_graphs;  // a graph per batch composition (decode: the states' serials)
  // Input rows in (pinned rows 0.., filled by fill_input), every layer, every row's logits to
  // pinned rows 0.., each group's position counter += its rows.
  void enqueue_groups(std::span<const SeqGroup> groups);
  // enqueue_groups on the exact products as the graph of composition `key` (direct launches
  // without graphs).
  void run_groups(std::span<const SeqGroup> groups, std::vector<uint64_t> key);
  void run_batch(std::span<CudaState* const> sts);
  // decode_batch's and verify_batch's hooks (models/cuda_batching.h): states, input rows, logits.
  BatchHooks<CudaState> batch_hooks();
  // ---- verify_batch.cu: every state's verify window as one forward ----
  void run_verify(std::span<const SeqGroup> groups);

  // ---- mtp.cu: the MTP draft head ----
  // Layout of a state's head part, the chain's scratch, its pinned host side (step tokens in,
  // argmax records and one logits row out).
  MtpLayout ml;
  MtpScratch ms;
  dc::DeviceBuffer mtp_scratch;
  std::unique_ptr<Pinned> mtp_tok_host, mtp_picks_host, mtp_row_host;
  bool has_mtp() const { return dw.mtp.has_value(); }
  void mtp_init();  // after upload: layouts, scratch, pinned buffers
  void mtp_enable(CudaState& st) const;
  // forward(): before the trunk consumes positions p .. p+n-1 (a decode step: n = 1; a chunk:
  // its rows), consume pending pairs when a push would overwrite one (a catch-up: it uses
  // S(sl.h) and the head's scratch, never the chunk scratch, so a chunk's rows stay intact,
  // but the step's own h must be pushed before the next catch-up can run). After the step or
  // chunk, push the consumed rows' final pre-mixer h {hc*d} and tokens, in position order:
  // row t at h + t * h_stride floats goes to slot (p + t) % ring.
  void mtp_room(CudaState& st, int64_t p, int64_t n);
  void mtp_push(CudaState& st, int64_t p, std::span<const int32_t> tokens, const float* h, int64_t h_stride);
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
  // The head's share of commit_prefix: see QwenNextCudaModel::mtp_keep_through.
  void mtp_keep_through(CudaState& st, int64_t pos_after);
  uint8_t* M(const CudaState& st, size_t off) const { return st.mtp.as<uint8_t>() + off; }
  float* MS(size_t off) const { return reinterpret_cast<float*>(mtp_scratch.as<uint8_t>() + off); }
};

}  // namespace ds4::qwen_next
