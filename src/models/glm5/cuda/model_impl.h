#pragma once
// Internal to the CUDA GLM 5.x model: the model's private state, shared by model_cuda.cu
// (one-token decode step) and chunk.cu (the multi-row forward of a prefill chunk or a
// speculative verify).
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/graph_step.h"
#include "backend/cuda/grouped_gemm.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/op_timer.h"
#include "formats/tensor_source.h"
#include "models/cuda_batching.h"
#include "models/cuda_candidates.h"
#include "models/glm5/config.h"
#include "models/glm5/cuda/cuda_state.h"
#include "models/glm5/cuda/device_weights.h"
#include "models/glm5/cuda/kernels.h"
#include "models/glm5/cuda/model_cuda.h"
#include "models/glm5/cuda/step_layout.h"
#include "models/glm5/weights.h"

namespace ds4::glm5 {

namespace dc = ds4::cuda;
using namespace ds4::glm5::cuda;

// Pinned host memory for the step's inputs and logits (fixed addresses for the captured graph).
using Pinned = dc::PinnedHost;
// A state's rows in a multi-row forward (models/cuda_batching.h).
using RowGroup = RowGroupOf<CudaState>;

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
  BatchCandidates batch_cand;             // decode_batch_candidates(): rows' candidates
  bool top_only = false;                 // the logits step ends in cand->enqueue(), no row copy
  std::vector<std::vector<float>>* tap = nullptr;  // layer_outputs(): streams after each layer
  // set_profiling(): the decode step's GPU ms per named op (direct launches + an event after
  // each op; backend/cuda/op_timer.h); run_step launches directly while it is on.
  dc::OpTimer prof;
  void op(const char* name) { prof.mark(stream, name); }
  // The input row of token t: the embedding's, or a synthetic model's generated row.
  void embed(int32_t t, float* out) const;
  // Pinned input row `row` for token t: its input row in every HC stream.
  void input_row(int32_t t, int64_t row) const;

  float* S(size_t off) const { return reinterpret_cast<float*>(scratch.as<uint8_t>() + off); }
  float *cur = nullptr, *alt = nullptr;  // the streams and the other buffer (swapped by hc_out)
  // hc_fused.cu's arrival counters, one per row of the chunk scratch (row 0: the decode step),
  // zeroed at load (each launch leaves them zero).
  dc::DeviceBuffer hc_counts;
  dc::HcFusedScratch hc_scratch(float* partials) const { return dc::HcFusedScratch{partials, hc_counts.as<unsigned>()}; }
  // The decode step's hc_post of a split fn waits here (its arguments, out = alt) to be folded
  // into the next hc_in's fused launch; flush_post runs it alone where no hc_in follows.
  bool post_pending = false;
  dc::HcPostIn pending_post;
  dc::HcDims pending_dims;
  void hc_in(const DHc& h, const float* norm);
  void hc_out(const DHc& h);
  void flush_post();
  // The decode step's independent branches (decode_tuning): the side stream runs the shared
  // expert beside the routed ones, KDA's gate projections beside the conv + l2norm, and MLA's
  // latent append + indexer beside q_b + W_uk; fork/join are events (captured into the graph).
  // One stream while profiling (the op table times one stream) or tapping layers.
  cudaStream_t side_stream = nullptr;
  cudaEvent_t fork_ev = nullptr, join_ev = nullptr;
  bool two_streams() const { return opt.decode_tuning && opt.decode_side_stream && !prof.on && !tap; }
  cudaStream_t side() const { return two_streams() ? side_stream : stream; }
  void fork() {
    if (!two_streams()) return;
    DS4_CUDA_CHECK(cudaEventRecord(fork_ev, stream));
    DS4_CUDA_CHECK(cudaStreamWaitEvent(side_stream, fork_ev, 0));
  }
  void join() {
    if (!two_streams()) return;
    DS4_CUDA_CHECK(cudaEventRecord(join_ev, side_stream));
    DS4_CUDA_CHECK(cudaStreamWaitEvent(stream, join_ev, 0));
  }
  // The decode step's weight gemvs (not the hc mixes): CudaModelOptions::decode_gemv_rows.
  dc::GemvOptions gopt() const { return dc::GemvOptions{dc::GemvPath::kAuto, opt.decode_gemv_rows}; }
  void kda(const DKda& k, float* conv, float* rec);
  void mla(const DMla& m, const LayerOffsets& o, uint8_t* sb, const int32_t* pos);
  void ffn(const DLayer& L);
  void layer(CudaState& st, int64_t l);
  void enqueue_step(CudaState& st, bool logits);
  void run_step(CudaState& st, bool logits, bool direct);
  // Bumped when set_options changes what a captured graph launches; a state's graphs from an
  // older epoch are dropped before its next replay (fresh_graphs: run_step, run_chunk, mtp_draft).
  int64_t graph_epoch = 0;
  void fresh_graphs(CudaState& st) const {
    if (st.graph_epoch == graph_epoch) return;
    st.drop_graphs();
    st.graph_epoch = graph_epoch;
  }
  // Runs `enqueue` on the stream, or replays it from `exec` (captured on first use); syncs.
  void replay(cudaGraphExec_t& exec, bool direct, const std::function<void()>& enqueue) {
    dc::run_graph_step(stream, exec, !direct && opt.graphs, enqueue);
  }

  // ---- chunk.cu: the multi-row forward (up to cl.rows tokens, each with its own row scratch) ----
  ChunkLayout cl;
  dc::DeviceBuffer chunk;
  int64_t verify_rows = 0;          // chunk_rows at load: verify windows and MTP catch-up pieces
  int64_t rows = 0;                 // rows of the chunk being enqueued
  // The chunk being enqueued is a tensor-core prefill chunk (run_chunk sets it; the MTP head
  // and verify windows never): mgemv / mproj take the GEMMs, the experts the grouped MMAs.
  bool tc = false;
  std::unique_ptr<dc::MatmulWorkspace> mm;  // cuBLAS handle + dequantized weight tile (stream)
  std::unique_ptr<dc::GroupedGemm> gg;      // routed experts of large chunks (on mm's handle), or null
  // chunk_gemm.cu (CudaModelOptions::fp32_gemms in a tensor-core chunk): false when the caller
  // takes its usual path (not such a chunk, or an F32-only product of another type).
  dc::DeviceBuffer attn_gather;  // the attention's gathered latent rows, made on first use
  bool fp32_gemm_rows(const WeightMatrix& w, size_t x_off, size_t y_off);
  bool mla_attend_gemm(const float* latent, const MlaShape& msh);
  size_t cur_off = 0, alt_off = 0;  // the streams' row-scratch offsets (swapped by hc_out_rows)
  float* R(int64_t t, size_t off) const {
    return reinterpret_cast<float*>(chunk.as<uint8_t>() + size_t(t) * cl.row_bytes + off);
  }
  template <class T = float>
  T* C(size_t off) const { return reinterpret_cast<T*>(chunk.as<uint8_t>() + off); }
  int64_t rs() const { return int64_t(cl.row_bytes / 4); }  // floats between rows
  // y rows = W x rows: a TF32 GEMM in a tensor-core chunk, else exact (gemv_rows per 16 rows).
  void mgemv(const WeightMatrix& w, size_t x_off, size_t y_off, const dc::MatmulBatch& b = {});
  void mgemv_exact(const WeightMatrix& w, size_t x_off, size_t y_off, const dc::MatmulBatch& b = {});
  void mproj(const dc::DProj& p, size_t x_off, size_t y_off);
  // Output rows [r0, r1) of a stacked projection again on the exact path (after mproj in a
  // tensor-core chunk): the parts that feed discrete choices (router, indexer).
  void mproj_exact(const dc::DProj& p, size_t x_off, size_t y_off, int64_t r0, int64_t r1);
  void hc_in_rows(const DHc& h, const float* norm);
  void hc_out_rows(const DHc& h);
  struct KdaCapPtrs {  // one KDA layer's verify-capture records in CudaState::cap (spec_commit.cu)
    float *conv0 = nullptr, *conv_in = nullptr, *rec = nullptr;  // {K-1, 3qkv}, {rows, 3qkv}, {rows, heads, hd, hd}
  };
  // The layer over the rows of `groups` (RowGroup: a state's consecutive tokens, row r0 + t at
  // cl.positions[r0 + t] = its *pos + t): one group of every row (a chunk or the MTP head's
  // rows), one group of one row per state (decode_batch, batch.cu) or one per verify window
  // (verify_batch, verify_batch.cu). Each stateful kernel launches once per group on its
  // state's buffer, exactly as a chunk of that group's rows launches it. caps: empty, or per
  // group its verify-capture records (rec null: none).
  void kda_rows(const DKda& k, const LayerOffsets& o, std::span<const RowGroup> groups,
                std::span<const KdaCapPtrs> caps);
  void layer_rows(const DLayer& L, const LayerOffsets& o, std::span<const RowGroup> groups,
                  std::span<const KdaCapPtrs> caps);
  void trunk_rows(std::span<const RowGroup> groups);  // every trunk layer (records while capturing)
  void enqueue_positions(const int32_t* pos, int64_t r0, int64_t n);  // cl.positions[r0 + t] = *pos + t, t < n
  void enqueue_advance(int32_t* pos, int64_t n);
  // A decode batch's stateful kernels as one launch over its sequences (Rows::seq): the rows'
  // shifts (bytes from groups[0]'s state buffer to each row's, in each row's input slot sl.shift,
  // which run_batch writes) when the forward is run_batch's with seq_launches on, else none (a
  // launch per group).
  ds4::cuda::SeqShift seq_rows(std::span<const RowGroup> groups) const;
  // Every group's cl.positions rows (advance false) or its counter += n (true): a launch per
  // group, or one for a decode batch's sequences (seq_rows).
  void enqueue_group_positions(std::span<const RowGroup> groups, bool advance);
  bool batch_shifts = false;  // run_batch wrote this forward's shifts
  void mla_rows(const DMla& m, const LayerOffsets& o, std::span<const RowGroup> groups);
  void moe_rows(const DMoe& m);
  void ffn_rows(const DLayer& L);
  void head_all_rows();     // every row's final norm + lm_head, logits to pinned rows 0.. (kAll)
  void head_logits_rows();  // the same from the rows' hfin (made already)
  void enqueue_chunk(CudaState& st, Logits mode);
  void run_chunk(CudaState& st, int64_t n, Logits mode);

  // ---- batch.cu: decode_batch, one token for each of `rows` states as one forward ----
  dc::BatchGraphs batch_graphs;  // a graph per batch composition (decode: the states' serials)
  // One forward over the groups' rows on the exact products: input rows, every layer, every
  // row's logits to the pinned rows, the MTP queue push of the groups whose state drafts,
  // each group's position counter += n; captured as the graph of composition `key`.
  void enqueue_groups(std::span<const RowGroup> groups);
  void run_groups(std::span<const RowGroup> groups, std::vector<uint64_t> key);
  void run_batch(std::span<CudaState* const> sts);
  BatchHooks<CudaState> batch_hooks();  // decode_batch's and verify_batch's (models/cuda_batching.h)
  // ---- verify_batch.cu: every state's verify window as one forward (row groups, records) ----
  void run_verify(std::span<const RowGroup> groups);

  // ---- mtp.cu: the MTP draft head (CPU: mtp.cpp) on the chunk path's row scratch ----
  int64_t qcap = 0;              // queue rows per state (0: the checkpoint has no head)
  // The MTP head's input rows {vocab, hidden} (mtp_table: resolved on first use): the uploaded
  // embedding (DMtp::embed), or `emb`, an f32 table of the host's rows where none was uploaded
  // (synthetic models; a type backend/cuda/embed.h cannot decode).
  WeightMatrix emb_rows;
  dc::DeviceBuffer emb;
  std::unique_ptr<Pinned> mids_host, mout_host;  // head token ids {max(qcap, cl.rows) + kMtpMaxDepth + 1}; argmax words
  std::vector<float> draft_logits;  // {depth, vocab} of the last mtp_draft with a host pick
  void mtp_table();  // resolves emb_rows unless done
  void mtp_enable(CudaState& st);
  // Enqueues the queue push of n trunk rows h (stride floats apart) after they ran (trunk step / chunk).
  void mtp_push(CudaState& st, const float* h, int64_t n, int64_t stride);
  void mtp_before_forward(CudaState& st, int64_t n);  // catches the head up when n rows would overflow the queue
  void mtp_after_forward(CudaState& st, std::span<const int32_t> tokens, int64_t pos0);  // host mirror of the push
  void mtp_catch_up(CudaState& st);  // the head layer over every queued pair (direct launches; syncs)
  // A chunk of more than chunk_rows rows (a prefill chunk) runs its pairs through the head right
  // after it (mtp_chunk_pairs, the queue caught up before it) instead of queueing them.
  bool mtp_direct(int64_t n) const { return n > opt.chunk_rows; }
  void mtp_chunk_pairs(CudaState& st, std::span<const int32_t> tokens, int64_t pos0);  // syncs
  void head_rows(CudaState& st, int64_t n, const int32_t* ids, const float* prev, int64_t prev_stride);
  void head_logits(int32_t* argmax);  // row 0: HC mean (kept in mpre), shared norm, lm_head, argmax (or none)
  void enqueue_head_save(CudaState& st, bool restore);
  void enqueue_draft(CudaState& st, int64_t qlen, int depth);
  void mtp_draft(CudaState& st, int32_t next, int depth, const std::function<int32_t(std::span<const float>)>* pick,
                 std::vector<int32_t>& drafts);

  // ---- spec_commit.cu: captured verify window (CPU: spec_commit.cpp) ----
  static constexpr int64_t kCaptureKey = int64_t(1) << 20;  // chunk_graph key offset of a captured verify
  bool capturing = false;  // enqueue_chunk records into st.cap
  KdaCapPtrs cap_ptrs(CudaState& st, int64_t l) const;
  void cap_reserve(CudaState& st, int64_t rows);

  // profile_chunk(): an event recorded at each section start of a directly launched chunk;
  // the time up to the next event is charged to that section's name.
  struct Marks {
    std::vector<const char*> names;
    std::vector<cudaEvent_t> events;
    Marks() = default;
    Marks(const Marks&) = delete;
    Marks& operator=(const Marks&) = delete;
    ~Marks() {
      for (cudaEvent_t e : events) cudaEventDestroy(e);
    }
    // After the stream reached the last mark: f(section name, ms) for each section in order.
    template <class F>
    void each(F&& f) const {
      for (size_t i = 0; i + 1 < events.size(); ++i) {
        float ms = 0.f;
        DS4_CUDA_CHECK(cudaEventElapsedTime(&ms, events[i], events[i + 1]));
        f(names[i], double(ms));
      }
    }
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
