#pragma once
// DeepSeek V4 kernels for one decode token, or for the rows of a multi-row chunk (prefill,
// speculative verify; chunk.cu) in one launch. Each mirrors the CPU code named beside it. All
// pointers are device pointers; `pos` is the state's device position counter (read by the
// kernels, so a captured CUDA graph replays at any position); row t of a chunk is at position
// *pos + t. Generic ops (gemv, rmsnorm, mHC) come from src/backend/cuda.
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/gemv_act.h"

namespace ds4::deepseek_v4::cuda {

// The rows of a chunk in one launch: row t's per-token buffers lie t * stride floats after
// row 0's (the chunk's per-row copies of the step scratch); each row computes exactly what
// the one-token call computes at position *pos + t. Default: one token at *pos.
struct Rows {
  int64_t count = 1, stride = 0;
  // One token of each of `count` sequences (decode_batch, batch.cu) instead of one sequence's
  // consecutive tokens: row t's state -- the position counter, window ring, compressor lanes and
  // entries that the kernel's pointers name in row 0's state buffer -- lies shift[t * shift_stride]
  // bytes (int64) from row 0's, and row t sits at its own counter's position, not *pos + t. Each
  // row then computes exactly what its sequence's one-token step computes (its own launch before
  // 2026-12-05), in one launch for all the sequences. null: one sequence.
  const int64_t* shift = nullptr;
  int64_t shift_stride = 0;  // int64 values between rows' shifts
};

// The sliding-window ring holds window + kRingSlack rows (slot p % ring_rows), so a chunk of
// up to kRingSlack + 1 rows can append all its KV rows before any of them attends: row t's
// window (its last `window` positions) is never overwritten by a later row of the chunk.
// 2048 since session 28 (was 1024): room for 2048-row prefill chunks (~2 MB more per layer
// and state at the Flash's 512-wide rows, ~92 MB for 44 rings).
inline constexpr int64_t kRingSlack = 2048;  // >= kMaxPrefillRows - 1 (step_layout.h)

// ---- seq_rows.cu ----
// A decode batch's last op: every sequence's position counter += 1 (pos names row 0's
// counter; rows.shift the others'). Throws InputError without rows.shift.
void seq_positions_increment(int32_t* pos, const Rows& rows, cudaStream_t s);

// ---- attention.cu (attention.cpp) ----
struct NormRope {
  int64_t heads, head_dim, rope_dim;  // the last rope_dim features of each head rotate (pairs 2i, 2i+1)
  const float* weight;                // {head_dim} or null (unweighted)
  float eps;
  const float* inv_freq;              // {rope_dim / 2}
  // The KV row only (heads = 1): ds4's FP8 round trip of the non-rope part (when fp8), then
  // the row into the window ring {ring_rows, head_dim} at slot pos % ring_rows. null: none.
  float* ring = nullptr;
  int64_t ring_rows = 0;
  bool fp8 = false;
};
// x {heads, head_dim} in place: per head rmsnorm, rope on the tail at position *pos (+ row).
void norm_rope(float* x, const NormRope& r, const int32_t* pos, cudaStream_t s, const Rows& rows = {});

struct AttendArgs {
  const float* q;         // {heads, hd}: normed, rope'd
  const float* ring;      // {ring_rows, hd}: position p at slot p % ring_rows
  int64_t window, ring_rows;
  const float* entries;   // {n, hd} compressed entries (null: sliding only)
  int64_t ratio;          // 0: sliding only
  const int32_t* sel;     // CSA: chosen entries (count *nsel); null: every closed entry (HCA)
  const int32_t* nsel;
  const float* sinks;     // {heads}
  int64_t heads, hd, max_rows;
  float* part;            // scratch {attend_chunks(max_rows), heads, hd}: unnormalized partial outputs
  float* part_ml;         // scratch {attend_chunks(max_rows), heads, 2}: each chunk's max and exp-sum
  float* out;             // {heads, hd}
  int64_t rope_dim;
  const float* inv_freq;
};
// Per head: softmax over [window rows, compressed rows, sink] of q.k / sqrt(hd), times the
// rows (K == V); the output's rope tail is rotated back to position 0 (angle -pos). Computed
// over chunks of kAttnChunk key rows, then merged. 32 (issue #23; was 64): more blocks for a
// decode step's few hundred rows, and one score per lane in the chunk's softmax.
inline constexpr int64_t kAttnChunk = 32;
// Chunks of at least kAttnWideRows query rows (tensor-core prefill chunks; never a decode
// step, verify window or exact chunk) run the throughput kernel over kAttnChunkWide-row key
// chunks (attention.cu: attend_wide_kernel).
inline constexpr int64_t kAttnChunkWide = 64;
inline constexpr int64_t kAttnWideRows = 64;
// Partial slots for max_rows (sized for the narrow chunks, so enough for the wide ones).
inline int64_t attend_chunks(int64_t max_rows) { return (max_rows + kAttnChunk - 1) / kAttnChunk; }
// Rows: q, sel, nsel, part, part_ml, out per row (every row's KV rows and entries must be
// stored first; row t sees positions <= *pos + t only).
void attend(const AttendArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows = {});
// attend() with the key chunk given (kAttnChunk or kAttnChunkWide): tests reach both.
void attend_chunked(const AttendArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows, int64_t chunk);
// The merge of attend's split-K partials: key chunks of `chunk` rows (a multiple of kAttnChunk,
// so the partial slots suffice), the sink in the denominator, the rope tail rotated back.
void attend_merge(const AttendArgs& a, int64_t chunk, const int32_t* pos, cudaStream_t s, const Rows& rows);
// The tensor-core form of attend() for wide prefill chunks (attention_tc.cu; tensor-core
// chunks only: TF32 operands, so within tolerance of attend(), not bit for bit). Shapes it
// does not take (attend_tc_supported) run attend().
bool attend_tc_supported(const AttendArgs& a);
void attend_tc(const AttendArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows);
// attend_tc's products for more than 32 heads on FP16 operands (m16n8k16; the same 10-bit
// mantissa as TF32, nearest even; but FP16's range: a q / k value past 65504 would become inf,
// which the Flash's normed, roped q and k rows never reach) instead of TF32: DS4_ATTEND_TC_F16 (0 or 1; unset = 1) is read
// on first use. Not thread safe against launches in flight on other threads.
void attend_tc_set_f16(bool on);
bool attend_tc_f16();

// ---- compressor.cu (compressor.cpp) ----
struct LaneArgs {
  const float *kv, *gate;       // this token's projections {width}
  const float *ape, *norm;      // {ratio, width}, {dim}
  float *pend_kv, *pend_gate, *prev_kv, *prev_gate, *entries;  // the lane's state
  int64_t ratio, dim, width, rope_dim;
  bool overlap;                 // CSA: pool the previous window's Ca half with this window's Cb half
  bool fp8, indexer_sim;        // ds4 storage numerics of the emitted entry
  float eps;
  const float* inv_freq;        // compressed-layer rope
  // Captured verify window (speculative decoding; null: none): an undo log of what each row
  // overwrites, so commit_prefix can cut the lane back to any kept prefix. Row t (of the
  // chunk) saves the open-window slot it is about to store into {W} at undo_kv / undo_gate
  // + t * width, and, when it closes a CSA window, the Ca half it replaces {ratio, dim} at
  // undo_prev_* + t * ratio * dim.
  float *undo_kv = nullptr, *undo_gate = nullptr, *undo_prev_kv = nullptr, *undo_prev_gate = nullptr;
};
// Stores the token at slot pos % ratio; when it closes the window, pools the window into one
// entry (per-feature softmax over the gates), rmsnorm, rope at the window's first position,
// storage round trip, appended at entry (pos + 1) / ratio - 1; keeps Ca for the next window.
// Rows: kv, gate per row; the lane (entries, pending slots, Ca half, undo log) ends bit for
// bit as after rows.count single steps. One row: compressor_walk; more: compressor_chunk.
void compressor_step(const LaneArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows = {});
// One block walks the rows in order, each row's step reading the lane state the previous row
// left (a decode step's one row; the reference the chunk form is tested against).
void compressor_walk(const LaneArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows = {});
// The same in parallel (lane_chunk.cu, issue #22): one block per window the rows close, then
// the state; the same per-entry arithmetic and order of summation as the walk (lane_pool.cuh).
void compressor_chunk(const LaneArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows);

// One compressor lane's undo log (LaneArgs::undo_*) as byte offsets: the lane in a state's
// buffer, its log in the state's capture buffer (CudaState::cap_buf) (step_layout.h CaptureLayout).
struct LaneUndo {
  uint64_t pend_kv, pend_gate, prev_kv, prev_gate;              // state buffer
  uint64_t undo_kv, undo_gate, undo_prev_kv, undo_prev_gate;    // capture buffer
  int64_t ratio, width, dim;
  int32_t overlap;
};
// Captured commit (CPU compressor_commit): every lane of `lanes` (device {n_lanes}) after the
// first `keep` of the `rows` captured rows at positions p0..: the logged slots and Ca halves
// of rows rows-1 down to keep are put back, newest first. Entries need nothing: entry e is
// read only at positions past its window's close, which rewrites it first.
void compressor_undo(const LaneUndo* lanes, int64_t n_lanes, uint8_t* state, const uint8_t* cap, int64_t p0,
                     int64_t rows, int64_t keep, cudaStream_t s);

struct IndexerArgs {
  float* q;                // {nh, d}: rope'd + storage-simulated in place
  const float* w;          // {nh}: head weights (index_proj)
  const float* entries;    // {n, d}: the index lane's entries
  int64_t nh, d, rope_dim, ratio, topk, max_entries;
  bool sim;                // ds4 Hadamard + FP4 round trip of the queries
  const float* inv_freq;
  float* scores;           // scratch {max_entries}
  int32_t* sel;            // {topk} chosen entries, ascending
  int32_t* nsel;           // {1}
};
// Lightning indexer: score every closed entry (sum over heads of relu(q.k) * w / sqrt(d nh)),
// keep the top min(topk, visible) (ties: lower index), as CPU topk_f32.
// Rows: q, w, scores, sel, nsel per row; the entries of every row must be stored first (row t
// reads only the (*pos + t + 1) / ratio entries it sees).
void indexer_select(const IndexerArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows = {});
// Its three steps (indexer_select = queries, scores, topk): the queries roped + storage-
// simulated in place, the FP32 scores of every visible entry, the top-k list.
void indexer_queries(const IndexerArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows = {});
void indexer_scores(const IndexerArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows = {});
void indexer_topk(const IndexerArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows = {});
// The same over a tensor-core prefill chunk (indexer_tc.cu, issue #22): the scores of all the
// chunk's rows as one masked GEMM of (rows x heads) queries against the entries on tensor
// cores with 3xTF32 operands (FP32-level products: the scores pick entries by top-k), so
// within FP32 rounding of indexer_select, not bit for bit. Shapes it does not take
// (indexer_tc_supported: d = 128, heads dividing 128 in m16 tiles) run indexer_select.
bool indexer_tc_supported(const IndexerArgs& a);
void indexer_select_tc(const IndexerArgs& a, const int32_t* pos, cudaStream_t s, const Rows& rows = {});
// The tensor-core scores with each entry tile split into TF32 hi + lo once per block in shared
// memory instead of by every warp (bit for bit the same scores): DS4_INDEXER_TC_PRESPLIT (0 or 1;
// unset = 0, unrun) read on first use, or the setter. Not thread safe against launches in flight.
void indexer_tc_set_presplit(bool on);
bool indexer_tc_presplit();

// ---- mtp.cu (mtp.cpp head_rows) ----
// x {hc, dim} += e {dim} in every stream (the MTP head's embedding half). Rows: x and e per
// row at t * rows.stride.
void streams_add(float* x, const float* e, int64_t hc, int64_t dim, cudaStream_t s, const Rows& rows = {});

// ---- dspark.cu (dspark.cpp) ----
// out {dim} = the mean of the hc streams x {hc, dim} (summed in stream order, then / hc, as the
// CPU's tap). Rows: x and out per row at t * rows.stride.
void hc_mean(const float* x, int64_t hc, int64_t dim, float* out, cudaStream_t s, const Rows& rows = {});

struct K5Args {
  const float* q;        // {heads, hd} per block row: normed, rope'd at *pos + t
  const float* own;      // {hd} per block row: the block's own K/V rows (kv_norm, rope'd)
  const float* ring;     // {ring_rows, hd}: the stage's ring, position p at slot p % ring_rows
  int64_t ring_rows, window;
  const float* sinks;    // {heads}
  int64_t heads, hd, rope_dim;
  const float* inv_freq; // {rope_dim / 2}
  float* out;            // {heads, hd} per block row
  int64_t block, stride; // block rows, floats between rows (q, own, out)
};
// CPU k5_attention: every block row t and head attends, with the sink, to the ring's last
// min(*pos, window) positions (oldest first) and all `block` own rows (no causal mask); K == V,
// the output's rope tail rotated back by -(*pos + t).
void k5_attend(const K5Args& a, const int32_t* pos, cudaStream_t s);

// One row of DSpark's Markov chain: logits += bias (markov_w2 of markov_w1[prev]);
// *conf = sigmoid(proj . [hidden, emb]).
struct MarkovRowArgs {
  float* logits;       // {vocab}: the row's neural logits, in place
  const float* bias;   // {vocab}
  int64_t vocab;
  const float* proj;   // {dim + rank}: the confidence head
  const float* hidden; // {dim}: the row's normed hidden (lm_head input)
  int64_t dim;
  const float* emb;    // {rank}: markov_w1[prev]
  int64_t rank;
  float* conf;         // {1}
};
void markov_row(const MarkovRowArgs& a, cudaStream_t s);

// ---- moe.cu (moe.cpp) ----
struct RouteArgs {
  const float* logits;      // {E}
  const float* bias;        // {E} or null
  const int32_t* tid2eid;   // {vocab, K} for hash-routed layers, else null
  const int32_t* token;     // {1}
  int64_t experts, k;
  int score;                // ScoreFunc as int
  bool norm_topk;
  float routed_scale;
  int32_t* ids;             // {K}
  float* weights;           // {K}
};
// Rows: logits and token per row (rows.stride), ids and weights {rows, K} packed.
void moe_route(const RouteArgs& a, cudaStream_t s, const Rows& rows = {});
// y = silu(min(g, limit)) * clamp(u, -limit, limit) (limit 0: plain swiglu) over {rows, cols};
// g, u with row stride in_stride (experts: rows of gate|up {K, 2F}), y with row stride
// out_stride (0: cols, packed).
void swiglu_clamp(const float* g, const float* u, int64_t rows, int64_t cols, int64_t in_stride, float limit,
                  float* y, cudaStream_t s, int64_t out_stride = 0);
// moe_route of one token (rows: 1) that also quantizes x {q.n} into q row 0 in the same launch
// (the bytes quantize_act writes; x 16-byte aligned): the routed experts' input made beside the
// router (issue #23).
void moe_route_quant(const RouteArgs& a, const float* x, const ::ds4::cuda::DeviceActQ8& q, cudaStream_t s);
// swiglu_clamp (y packed, out_stride cols) whose rows are also quantized into q (q.n == cols,
// q.rows >= rows; Q8_0: cols % 32 == 0, Q8_K: cols % 256 == 0; g, u, y 16-byte aligned, y may
// be g): one launch writing the bytes swiglu_clamp + quantize_act write (issue #23: one launch
// fewer before each down product). Launched as a programmatic dependent when gemv_pdl().
void swiglu_clamp_quant(const float* g, const float* u, int64_t rows, int64_t cols, int64_t in_stride, float limit,
                        float* y, const ::ds4::cuda::DeviceActQ8& q, cudaStream_t s);
// rmsnorm_f32 of one row of dim values (dim <= kNormQuantMax, a multiple of q's block; x, y
// 16-byte aligned, y may be x) that also quantizes it into q row 0: the bytes rmsnorm_f32 +
// quantize_act write, in one launch (the same threads and sums as rmsnorm_f32).
constexpr int64_t kNormQuantMax = 4096;
void rmsnorm_quant(const float* x, const float* w, float* y, int64_t dim, float eps,
                   const ::ds4::cuda::DeviceActQ8& q, cudaStream_t s);
// out {d} = sum_j w[j] y[j] + sh. Rows: row t's y at t * k * d, w at t * k, sh and out at
// t * rows.stride.
void moe_combine(const float* y, const float* w, int64_t k, const float* sh, int64_t d, float* out,
                 cudaStream_t s, const Rows& rows = {});

}  // namespace ds4::deepseek_v4::cuda
