#pragma once
// Internal to the CUDA DeepSeek V4 model: the model's private state and a conversation's
// device state, shared by model_cuda.cu (the one-token decode step) and chunk.cu (the
// multi-row forward of a prefill chunk or a speculative verify).
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/cuda/batch_graphs.h"
#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/grouped_gemm.h"
#include "backend/cuda/hyper_connections.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/op_timer.h"
#include "backend/cuda/memory.h"
#include "core/error.h"
#include "formats/tensor_source.h"
#include "models/cuda_batching.h"
#include "models/cuda_candidates.h"
#include "models/deepseek_v4/config.h"
#include "models/deepseek_v4/cuda/act_inputs.h"
#include "models/deepseek_v4/cuda/device_weights.h"
#include "models/deepseek_v4/cuda/kernels.h"
#include "models/deepseek_v4/cuda/model_cuda.h"
#include "models/deepseek_v4/cuda/step_layout.h"
#include "models/deepseek_v4/weights.h"

namespace ds4::deepseek_v4 {

namespace dc = ds4::cuda;
using namespace ds4::deepseek_v4::cuda;

// Pinned host memory for the step's inputs and logits (fixed addresses for the captured graph).
using Pinned = dc::PinnedHost;

// GEMV read path per format, from the H200 GEMV bench (bench/results/cuda-h200-2026-12-01):
// the direct path beats the staged one kAuto would pick for ds4's formats (Q8_0 dense 1233 vs
// 1016 GB/s at 4096x4096, IQ2_XXS expert up 348 vs 283, Q2_K expert down 506 vs 398). Rows
// per block are each format's default (Q8_0: 8, from the 2026-12-01d sweep). Every row is
// computed alone either way; gemv_rows (the chunk) reads the direct path's per-thread order,
// so its rows equal these gemvs bit for bit.
inline dc::GemvOptions gemv_options(DType) {
  dc::GemvOptions o;
  o.path = dc::GemvPath::kDirect;
  return o;
}

// CudaModelOptions::act_mma when unset at load: DS4_ACT_MMA=0|1, else products.cu's
// kActMmaDefault (InputError for another value).
bool act_mma_default();
// An unset CudaModelOptions switch at load: the environment variable `name` (0 or 1; InputError
// otherwise), else `unset` (model_cuda.cu).
bool flag_from_env(const char* name, bool unset);

class CudaState : public ModelState {
 public:
  // c and lay are the model's (Impl): they outlive its states.
  CudaState(const Config& c, const StateLayout& lay)
      : buf(lay.bytes, "deepseek_v4 state (context caches)"), serial(dc::next_state_serial()), c_(&c), lay_(&lay) {
    DS4_CUDA_CHECK(cudaMemset(buf.get(), 0, lay.bytes));
    // The step runs on a non-blocking stream, which does not wait for the legacy stream.
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
  }
  ~CudaState() override {
    for (auto& g : graph)
      if (g) cudaGraphExecDestroy(g);
    for (auto& [key, g] : chunk_graph)
      if (g) cudaGraphExecDestroy(g);
    for (auto& [key, g] : draft_graph)
      if (g) cudaGraphExecDestroy(g);
  }
  std::unique_ptr<ModelState> clone() const override { return std::unique_ptr<CudaState>(new CudaState(*this)); }
  // Graphs are recaptured on next use (enable_draft changes what a forward enqueues).
  void drop_graphs() {
    for (auto& g : graph)
      if (g) cudaGraphExecDestroy(g), g = nullptr;
    for (auto* m : {&chunk_graph, &draft_graph}) {
      for (auto& [key, g] : *m)
        if (g) cudaGraphExecDestroy(g);
      m->clear();
    }
  }
  int64_t position() const override { return pos; }
  size_t bytes() const override { return buf.bytes() + cap_buf.bytes(); }
  // The CPU state's named sections (state_io.cu): save goes through a host deepseek_v4::State,
  // load reads one (it checks the sections) and uploads it, refusing what this state cannot hold.
  void save(std::vector<StateSection>& out) const override;
  void load(const std::vector<StateSection>& in) override;

  dc::DeviceBuffer buf;  // every layer's caches + the position counter
  // Unique per state object (clones included), never reused: keys the model's decode_batch
  // graphs, which hold the batch's buffer addresses (a freed state's address may come back).
  const uint64_t serial;
  int64_t pos = 0;
  cudaGraphExec_t graph[3] = {nullptr, nullptr, nullptr};  // [none, logits row, candidates]
  // multi-row forwards, by (rows * 3 + logits mode) * 2 + captured (a verify_capture window)
  std::map<int64_t, cudaGraphExec_t> chunk_graph;
  // greedy MTP chains, by depth * 2 + row 0 wanted; the DSpark K5 pass at kDsparkGraphKey
  std::map<int64_t, cudaGraphExec_t> draft_graph;
  // MTP head (enable_draft, before the first forward): every forward also runs the head's
  // rows (mtp.cu), so the graphs above include them.
  bool mtp_on = false;
  // DSpark (enable_draft, before the first forward): every forward also records the stages'
  // ring rows (dspark.cu), so the graphs above include them.
  bool dspark_on = false;
  // A captured verify window awaiting commit_prefix: its rows; its records (undo logs, head
  // rows: step_layout.h CaptureLayout) in cap_buf, allocated at this state's first
  // verify_capture. Per state, so several sessions can speculate at once.
  int64_t cap_rows = 0;
  dc::DeviceBuffer cap_buf;
  // The model's graph_epoch when this state's graphs were captured (set_options switching
  // act_quant, act_mma, int8_experts, int8_dense or the side stream changes what a forward enqueues:
  // Impl::fresh_graphs drops stale graphs).
  int64_t graph_epoch = 0;

 private:
  const Config* c_;
  const StateLayout* lay_;
  // A clone captures its own graphs (they hold this state's addresses). A pending captured
  // window carries over with a copy of its records (they apply to the clone's equal buffer).
  CudaState(const CudaState& o)
      : buf(o.buf.bytes(), "deepseek_v4 state clone"), serial(dc::next_state_serial()), pos(o.pos), mtp_on(o.mtp_on),
        dspark_on(o.dspark_on), cap_rows(o.cap_rows), graph_epoch(o.graph_epoch), c_(o.c_), lay_(o.lay_) {
    DS4_CUDA_CHECK(cudaMemcpy(buf.get(), o.buf.get(), o.buf.bytes(), cudaMemcpyDeviceToDevice));
    if (o.cap_rows > 0) {
      cap_buf = dc::DeviceBuffer(o.cap_buf.bytes(), "deepseek_v4 verify capture (clone)");
      DS4_CUDA_CHECK(cudaMemcpy(cap_buf.get(), o.cap_buf.get(), o.cap_buf.bytes(), cudaMemcpyDeviceToDevice));
    }
    DS4_CUDA_CHECK(cudaDeviceSynchronize());  // device-to-device copies return early
  }
};

// The CUDA state behind a ModelState handed to this model (mtp.cu, dspark.cu, spec_commit.cu).
inline CudaState& cuda_state(ModelState& s) {
  auto* st = dynamic_cast<CudaState*>(&s);
  if (!st) throw InputError("deepseek_v4 cuda: state does not come from this CUDA model");
  return *st;
}

// A state's rows in a multi-row forward (models/cuda_batching.h).
using RowGroup = RowGroupOf<CudaState>;

struct DeepseekV4CudaModel::Impl {
  std::unique_ptr<TensorSource> src;
  Config c;
  Weights w;  // host views (the embedding is read from here)
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
  cudaStream_t side_stream = nullptr;      // second stream of CudaModelOptions::streams
  cudaEvent_t fork_ev = nullptr, join_ev = nullptr;
  dc::HcDims hcd;
  DeepseekV4CudaModel::DecodeBytes decode_bytes;
  LayerObserver observer;
  std::vector<float> observed;
  dc::OpTimer prof;  // profiling (direct launches): an event after each op, ms per op name

  float* S(size_t off) const { return reinterpret_cast<float*>(scratch.as<uint8_t>() + off); }
  int32_t* SI(size_t off) const { return reinterpret_cast<int32_t*>(scratch.as<uint8_t>() + off); }
  void mark(const char* name);
  void hc_mix(const DHc& h, const float* x);
  // The fused mHC kernels (backend/cuda hc_fused.cu) when fn's layout allows (the decode step
  // and the chunk rows decide alike, so they stay equal bit for bit), else gemv + hc_pre_f32.
  // hc_counts: their arrival counters, one per row, zeroed at load (each call leaves them zero).
  dc::DeviceBuffer hc_counts;
  dc::HcFn hc_fn(const DHc& h) const;
  bool hc_fused(const DHc& h, bool head) const;
  // x: the streams {hc, hidden}; with post_in, the hc_post before this hc_pre is folded in and
  // writes x first (the unfused path runs hc_post_f32 first).
  // col: the collapsed row's product input; when its first product `w` takes Q8_0 the fused
  // kernel also writes col's quantized copy (col->have set).
  void hc_pre(const DHc& h, const float* norm, float* x, const dc::HcPostIn* post_in = nullptr, ActIn* col = nullptr,
              const WeightMatrix* w = nullptr);
  void hc_head(const DHc& h, const float* norm, float* x, float* out);  // decode: HC head + norm

  // ---- products.cu: every weight product, f32 x or (act_quant) quantized x ----
  ActLayout sa;  // the step scratch's act slots (after sl.bytes: not copied into the chunk rows)
  ActLayout ca;  // the chunk scratch's (cl.rows tokens, after its MoE buffers)
  DeepseekV4CudaModel::ActLaunches act_n;  // act products enqueued (tests: the path ran)
  // Bumped when set_options changes what a forward enqueues (c.act_quant, act_mma,
  // int8_experts, int8_dense, two_streams()); the batch graphs are dropped then too.
  int64_t graph_epoch = 0;
  // Drops st's graphs when they were captured under other options (set_options).
  void fresh_graphs(CudaState& st) const;
  // CudaModelOptions::act_mma (resolved at load): an unbatched act product runs gemv_act_mma.
  bool act_mma() const { return opt.act_mma.value_or(false); }
  // An input of `rows` rows of n values (x_row floats apart) with the slot of kind k in the
  // step arena or the chunk arena; no slot (f32 products) with act_quant off, and in a
  // tensor-core chunk (its products keep their operands: chunk.cu) unless int8_dense_chunk().
  ActIn act_in(const float* x, int64_t x_row, int64_t rows, int64_t n, ActKind k, bool chunk_arena) const;
  ActIn in_step(const float* x, int64_t n, ActKind k, int64_t rows = 1) const { return act_in(x, n, rows, n, k, false); }
  ActIn in_rows(size_t x_off, int64_t n, ActKind k) const { return act_in(R(0, x_off), rs(), rows, n, k, true); }
  static ActIn f32_in(const float* x, int64_t x_row, int64_t rows) { return ActIn{x, x_row, rows}; }
  // x's quantized rows for w (quantizing them on s first when the slot holds another block
  // type, or none yet); nullopt when w keeps f32 x (no slot, or a format without act blocks).
  std::optional<dc::DeviceActQ8> act_for(ActIn& x, const WeightMatrix& w, cudaStream_t s);
  // x's quantized rows for w without quantizing (nullopt as act_for): what a fused producer writes.
  std::optional<dc::DeviceActQ8> act_slot(const ActIn& x, const WeightMatrix& w) const;
  // y's f32 rows (y.x, x_row apart) = swiglu_clamp of g, u (c.swiglu_limit), quantized for w in
  // the same launch when y has a slot (then y.have is set: w's product quantizes nothing).
  void swiglu_act(const float* g, const float* u, int64_t rows, int64_t F, int64_t in_stride, ActIn& y,
                  const WeightMatrix& w, cudaStream_t s);
  // y's rows normalized in place (rmsnorm_f32 with weight norm, c.rms_eps), one row quantized
  // for w in the same launch when y has a slot.
  void rmsnorm_act(const float* norm, ActIn& y, const WeightMatrix& w, cudaStream_t s);
  // One row (decode step): gemv / gemv_act; batched (o_a groups, experts: b.x_stride in values
  // = floats); a stacked projection, one launch per run with outputs back to back.
  void mv(const WeightMatrix& m, ActIn& x, float* y, cudaStream_t s);
  void mv_batched(const WeightMatrix& w, ActIn& x, float* y, const dc::GemvBatch& b, cudaStream_t s);
  void proj(const DProj& p, ActIn& x, float* y);
  // x.rows rows to y (y_row floats apart): gemv_act_rows in groups of kGemvMaxRows (each row
  // = the step's gemv_act bit for bit), else matmul_rows (exact below the workspace's
  // min_rows, a tensor-core GEMM from there).
  void mrows(const WeightMatrix& w, ActIn& x, float* y, int64_t y_row, const dc::MatmulBatch& b, cudaStream_t s);
  void act_rows(const WeightMatrix& w, const dc::DeviceActQ8& q, float* y, int64_t y_row, int64_t n,
                const dc::MatmulBatch& b, cudaStream_t s);
  // rows x.rows .. : gemv_act_rows with r's grouping (MoE entries; r.x_row set here).
  void act_entries(const WeightMatrix& w, const dc::DeviceActQ8& q, float* y, dc::GemvRows r, cudaStream_t s);
  // A tensor-core chunk's routed experts with act_quant: x's rows quantized into the chunk
  // slot of kind k (tensor-core chunks use no slot otherwise), then grouped_mma_int8 over r's
  // entries (ds4's integer products: each output = dot_act of its quantized row).
  void int8_entries(const WeightMatrix& w, ActIn x, ActKind k, float* y, dc::GemvRows r, int64_t rows_per_expert);
  bool int8_experts = false;  // CudaModelOptions::int8_experts resolved (at load, by set_options)
  bool int8_dense = false;    // CudaModelOptions::int8_dense resolved (at load, by set_options)
  // This chunk's dense act products as int8 MMAs (grouped_mma_int8_dense): a tensor-core chunk
  // with act_quant and int8_dense; act_in then gives its inputs their chunk slots.
  bool int8_dense_chunk() const { return int8_dense && c.act_quant && tensor_core_chunk(); }
  // The stream of a layer's side branch (the main stream when streams are off); fork makes
  // it wait for the main stream's work so far, join makes the main stream wait for it.
  bool two_streams() const { return opt.streams && !opt.profile; }
  cudaStream_t side() const { return two_streams() ? side_stream : stream; }
  void fork();
  void join();
  LaneArgs lane_args(const DCompressor& d, const LaneOffsets& o, uint8_t* sb, const float* kv, const float* gate,
                     int64_t ratio, bool overlap) const;
  // col: the collapsed row as an input (hc_pre may have quantized it); null: made here.
  void attention(CudaState& st, int64_t l, ActIn* col = nullptr);
  void moe(int64_t l, bool combine = true, ActIn* col = nullptr);  // combine: moe_combine into y (else layer_step folds it)
  void enqueue_step(CudaState& st, bool logits);
  void run_step(CudaState& st, bool logits);
  void collect_profile();

  // ---- chunk.cu: the multi-row forward (up to cl.rows tokens, each with its own row scratch) ----
  ChunkLayout cl;
  dc::DeviceBuffer chunk;
  // The tensor-core path's cuBLAS handle + BF16 scratch, one per stream (the shared expert's
  // GEMM on the side stream runs beside the main stream's).
  std::unique_ptr<dc::MatmulWorkspace> mm_main, mm_side;
  std::unique_ptr<dc::GroupedGemm> gg;  // routed experts of large chunks (stream, on mm_main's handle), or null
  dc::MatmulWorkspace& mm(cudaStream_t s) const { return s == stream ? *mm_main : *mm_side; }
  // This chunk's products on tensor cores (CudaModelOptions::tensor_cores, a prefill chunk).
  bool tensor_core_chunk() const { return mm_main->min_rows() > 0 && rows >= mm_main->min_rows(); }
  int64_t rows = 0;  // rows of the chunk being enqueued
  float* R(int64_t t, size_t off) const {
    return reinterpret_cast<float*>(chunk.as<uint8_t>() + size_t(t) * cl.row_bytes + off);
  }
  template <class T = float>
  T* C(size_t off) const { return reinterpret_cast<T*>(chunk.as<uint8_t>() + off); }
  int64_t rs() const { return int64_t(cl.row_bytes / 4); }  // floats between rows
  Rows all_rows() const { return Rows{rows, rs()}; }
  // (products.cu) the rows' products into the row scratches (y_off), from x's rows
  void mgemv(const WeightMatrix& w, ActIn& x, size_t y_off, cudaStream_t s);
  void mproj(const DProj& p, ActIn& x, size_t y_off);
  void mproj_exact(const DProj& p, size_t x_off, size_t y_off, int64_t r0, int64_t r1);
  // The products a tensor-core chunk keeps exact (HC mixes, router logits, indexer inputs):
  // x.rows rows to y (stride rs()), as FP32 GEMMs there (CudaModelOptions::fp32_gemms), else
  // gemv_rows in groups of 16 (bit-identical to decode steps), or gemv_act_rows (act_quant).
  void mexact(const WeightMatrix& w, ActIn& x, float* y, const dc::MatmulBatch& b);
  void hc_pre_rows(const DHc& h, const float* norm, size_t x_off, const dc::HcPostIn* post_in = nullptr);
  // The stateful kernels of a row group: Rows{n, rs()} at row r0 (one row: the decode step's Rows{}).
  Rows group_rows(const RowGroup& g) const { return g.n > 1 ? Rows{g.n, rs()} : Rows{}; }
  // A decode batch (2+ groups of one row each, not a verify forward, CudaModelOptions::seq_launches): all the rows'
  // stateful kernels as one launch, row t on its own state (Rows::shift from the input rows'
  // shift fields, which run_batch writes). Else Rows{} (launch per group).
  Rows seq_rows(std::span<const RowGroup> groups) const;
  // groups: the states of the rows (RowGroup); chunk.cu attention_rows says how.
  void attention_rows(std::span<const RowGroup> groups, int64_t l);
  void moe_rows(int64_t l);
  void rows_in();                          // pinned input rows -> row scratch, HC expand
  void head_rows(int64_t t0, int64_t n);   // logits of rows t0.. to pinned rows 0..
  // Every layer over the groups' rows, logits, the draft heads' records (every group's state
  // drafts alike: verify_batch's forwards), each group's position counter += n.
  void enqueue_chunk(std::span<const RowGroup> groups, Logits mode);
  void run_chunk(CudaState& st, int64_t n, Logits mode);
  // One decoder layer (CPU decoder_layer) on the HC streams in xa, in place: the trunk's
  // layers and the MTP head's (l = c.layers) run the same code. _rows: over the chunk rows.
  // post_pending: the previous layer left its MoE hc_post (y, xb, post, comb -> xa) to this
  // layer's first hc_pre; defer_post: this layer leaves its own to the next layer the same way.
  void layer_step(CudaState& st, int64_t l, bool post_pending = false, bool defer_post = false);
  void layer_rows(std::span<const RowGroup> groups, int64_t l);

  // ---- batch.cu: decode_batch, one token for each of `rows` states as one forward ----
  dc::BatchGraphs batch_graphs;  // a graph per batch composition (decode: the states' serials)
  // One forward over the groups' rows (kAll logits) on the exact products, as the graph of
  // composition `key` (direct launches without graphs).
  void run_groups(std::span<const RowGroup> groups, std::vector<uint64_t> key);
  void run_batch(std::span<CudaState* const> sts);
  // decode_batch's and verify_batch's hooks (models/cuda_batching.h): states, input rows, logits
  BatchHooks<CudaState> batch_hooks();
  // ---- verify_batch.cu: verify_batch, every state's verify window as one forward ----
  void run_verify(std::span<const RowGroup> groups);

  // ---- mtp.cu: ds4's MTP draft head on the device (dw.has_mtp) ----
  DraftLayout dl;
  dc::DeviceBuffer draft;          // the chain's buffers
  std::unique_ptr<Pinned> draft_host;  // slots {kMaxDraftDepth + 1, kDraftSlotWords} + a position word
  bool draft_row0 = false;         // the chain being enqueued computes logits row 0 (tests, bench)
  // Head input rows into xa of `n` rows (the step scratch, or the chunk rows with in_chunk):
  // prev {hc, hidden} and emb {hidden} per row at the scratch's row stride (CPU head_rows).
  void mtp_in(bool in_chunk, int64_t n, const float* prev, const float* emb);
  void mtp_logits(const float* y, float* logits);  // {hc, hidden} -> {vocab} (CPU head_logits)
  void mtp_record_step(CudaState& st);  // after the trunk of a decode step (CPU mtp_record)
  void mtp_record_rows(std::span<const RowGroup> groups);  // after the trunk of a chunk
  void draft_begin(CudaState& st);      // saves the head's ring and the position
  void draft_end(CudaState& st);        // puts them back
  void draft_row(CudaState& st, int64_t k);  // chain row k >= 1: token in slot k-1 -> logits row k
  void enqueue_draft(CudaState& st, int64_t depth);
  int32_t* slot(int64_t k) const { return reinterpret_cast<int32_t*>(draft.as<uint8_t>() + dl.slots) + k * kDraftSlotWords; }
  float* draft_logits_row(int64_t k) const {
    return reinterpret_cast<float*>(draft.as<uint8_t>() + dl.logits) + k * c.vocab;
  }
  void check_draft(const CudaState& st, int32_t next_token, int depth) const;
  // The greedy chain (graph per state and depth): drafts {depth} from the device slots.
  void run_draft(CudaState& st, int32_t next_token, int depth, std::vector<int32_t>& drafts);

  // ---- spec_commit.cu: the captured verify window (records in the state: CudaState::cap_buf) ----
  CaptureLayout cap;
  dc::DeviceBuffer cap_lanes;  // the LaneUndo table (offsets: the same for every state)
  bool capturing = false;  // the chunk being enqueued records (LaneArgs::undo_*, head rows)
  void lane_undo_args(LaneArgs& a, int lane, const CudaState& st) const;

  // ---- dspark.cu: MTPLX's DSpark block drafter on the device (dw.has_dspark) ----
  // Its K5 pass runs in the chunk scratch (rows 0..4; cl.rows >= kDsparkBlock with DSpark)
  // and the Markov chain in the draft buffers (dl); slot r + 1 = draft r, confidences at
  // kDraftConfWord. The stages are layers c.layers + s: layer_rows runs them, with the K5
  // attention in place of the trunk's.
  static constexpr int64_t kDsparkGraphKey = -1;
  // After layer l: the HC mean of the rows' xa x (n rows, stride floats apart) into their taps
  // slot when l is a tap layer.
  void dspark_tap(int64_t l, float* x, int64_t n, int64_t stride);
  void dspark_record_step(CudaState& st);  // after the trunk of a decode step (CPU dspark_record)
  void dspark_record_rows(std::span<const RowGroup> groups);  // after the trunk of a chunk
  void k5_attention_rows(CudaState& st, int64_t stage);  // CPU k5_attention over the 5 block rows
  void out_rows(const DLayer& L);  // grouped o LoRA + o_b over the rows: heads -> y (chunk.cu)
  void enqueue_dspark(CudaState& st);
  void check_dspark(const CudaState& st, int32_t primary) const;
  // One K5 pass (graph per state): drafts {5} and confidences {5} from the device.
  void run_dspark(CudaState& st, int32_t primary, std::vector<int32_t>& drafts, std::vector<float>& conf);
};

}  // namespace ds4::deepseek_v4
