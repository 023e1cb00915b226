// MTPLX's DSpark block drafter on the GPU (CPU: dspark.cpp; the math is the CPU's, its three
// stages are the trunk's layer code run at indices c.layers .. c.layers + 2 with the K5
// attention in place of the trunk's):
//   taps    as a DSpark-enabled state's forward runs, the HC mean of every tap layer's output
//           goes into the row's scratch (sl.taps {taps, hidden}), per token;
//   record  at the end of the same step / chunk (same graph, before the position counter
//           moves): main_q = main_norm(main_proj(taps)), then per stage kv_norm(kv(main_q))
//           rope'd at the token's position into the stage's ring (position-indexed: slot
//           p % ring_rows, ring_rows = window + kRingSlack, as the trunk's window ring; the
//           last min(pos, window) positions are the CPU's ring, oldest first);
//   draft   one K5 pass, one graph per state: the block [primary, noise x 4] at positions
//           pos .. pos + 4 through the stages in the chunk scratch (rows 0..4; each row
//           attends to the ring and all five block rows, no causal mask), hc_head + norm +
//           lm_head per row, then the Markov chain row by row on the device: r's bias =
//           markov_w2(markov_w1[prev_r]) added to its logits, its confidence sigmoid(proj .
//           [hidden_r, markov_w1[prev_r]]), its draft the argmax (sample_reduce), which is
//           prev_{r+1} (prev_0 = primary); the five ids and confidences come back in one copy.
//           Nothing of the state is written (the block's own K/V rows stay in the scratch), so
//           the state is unchanged; the gate and the depth cut are host code (mtp.cu draft()).
// A verify window's ring rows need no record either (spec_commit.cu): the ring's kRingSlack
// spare slots keep every position a kept prefix still reads.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstring>
#include <string>

#include "backend/cuda/embed.h"
#include "backend/cuda/graph_step.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/sample_reduce.h"
#include "core/error.h"
#include "models/deepseek_v4/cuda/model_impl.h"
#include "models/deepseek_v4/cuda/rope_shared.cuh"

namespace ds4::deepseek_v4 {
namespace cuda {
namespace {

using ds4::cuda::detail::block_reduce;
using ds4::cuda::detail::MaxOp;
using ds4::cuda::detail::SumOp;
using ds4::cuda::detail::warp_reduce;

// Summed stream by stream from 0, then divided: the CPU tap's order, so the means are exact.
__global__ void hc_mean_kernel(const float* __restrict__ x, int64_t hc, int64_t dim, float* out, int64_t stride) {
  const int64_t t = blockIdx.y, i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= dim) return;
  const float* xt = x + t * stride;
  float sum = 0.0f;
  for (int64_t j = 0; j < hc; ++j) sum += xt[j * dim + i];
  out[t * stride + i] = sum / float(hc);
}

constexpr int kK5Threads = 128;

// Block (head h, block row t). Keys k < n_ring: the ring's positions pos - n_ring + k (oldest
// first); then the block's own rows. One warp per key for the scores, a thread per feature
// for the output.
__global__ void __launch_bounds__(kK5Threads) k5_attend_kernel(K5Args a, const int32_t* __restrict__ pos) {
  extern __shared__ float sm[];  // key row pointers {window + block}, q {hd}, scores {window + block}, out {hd}
  const int64_t hd = a.hd, h = blockIdx.x, t = blockIdx.y, p0 = *pos, max_keys = a.window + a.block;
  const int64_t n_ring = p0 < a.window ? p0 : a.window, nk = n_ring + a.block;
  const float** rp = reinterpret_cast<const float**>(sm);
  float* q = sm + 2 * max_keys;  // pointers take two floats each
  float* sc = q + hd;
  float* o = sc + max_keys;
  for (int64_t k = threadIdx.x; k < nk; k += blockDim.x)
    rp[k] = k < n_ring ? a.ring + ((p0 - n_ring + k) % a.ring_rows) * hd : a.own + (k - n_ring) * a.stride;
  const float* qh = a.q + t * a.stride + h * hd;
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) q[i] = qh[i];
  __syncthreads();
  const float scale = 1.0f / sqrtf(float(hd));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
  for (int64_t k = warp; k < nk; k += nw) {
    const float* kr = rp[k];
    float d = 0.f;
    for (int64_t i = lane; i < hd; i += 32) d = fmaf(q[i], kr[i], d);
    d = warp_reduce(d, SumOp{});
    if (lane == 0) sc[k] = d * scale;
  }
  __syncthreads();
  const float sink = a.sinks[h];
  float m = sink;
  for (int64_t k = threadIdx.x; k < nk; k += blockDim.x) m = fmaxf(m, sc[k]);
  m = block_reduce(m, MaxOp{}, -FLT_MAX);
  float l = 0.f;
  for (int64_t k = threadIdx.x; k < nk; k += blockDim.x) l += (sc[k] = expf(sc[k] - m));
  l = block_reduce(l, SumOp{}, 0.f);
  __syncthreads();  // every thread's exp'd scores visible
  const float inv = 1.f / (expf(sink - m) + l);
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) {
    float acc = 0.f;
    for (int64_t k = 0; k < nk; ++k) acc = fmaf(sc[k], rp[k][i], acc);
    o[i] = acc * inv;
  }
  __syncthreads();
  rope_shared(o, hd, a.rope_dim, a.inv_freq, -(p0 + t));  // K == V: the output's tail back to position 0
  float* out = a.out + t * a.stride + h * hd;
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) out[i] = o[i];
}

constexpr int kMarkovThreads = 256;

// Blocks 0 .. gridDim.x - 2: logits += bias; the last block: the confidence.
__global__ void markov_row_kernel(MarkovRowArgs a) {
  if (blockIdx.x + 1 < gridDim.x) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < a.vocab) a.logits[i] += a.bias[i];
    return;
  }
  float z = 0.f;
  for (int64_t j = threadIdx.x; j < a.dim; j += blockDim.x) z = fmaf(a.proj[j], a.hidden[j], z);
  for (int64_t j = threadIdx.x; j < a.rank; j += blockDim.x) z = fmaf(a.proj[a.dim + j], a.emb[j], z);
  z = block_reduce(z, SumOp{}, 0.f);
  if (threadIdx.x == 0) *a.conf = 1.0f / (1.0f + expf(-z));
}

}  // namespace

void hc_mean(const float* x, int64_t hc, int64_t dim, float* out, cudaStream_t s, const Rows& rows) {
  hc_mean_kernel<<<dim3(unsigned((dim + 255) / 256), unsigned(rows.count)), 256, 0, s>>>(x, hc, dim, out, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

void k5_attend(const K5Args& a, const int32_t* pos, cudaStream_t s) {
  const int64_t max_keys = a.window + a.block;
  const size_t shm = size_t(2 * max_keys + a.hd + max_keys + a.hd) * 4;
  if (shm > 48 * 1024)
    throw InputError("deepseek_v4 cuda: DSpark K5 attention of head_dim " + std::to_string(a.hd) + ", window " +
                     std::to_string(a.window) + " exceeds shared memory");
  k5_attend_kernel<<<dim3(unsigned(a.heads), unsigned(a.block)), kK5Threads, shm, s>>>(a, pos);
  DS4_CUDA_CHECK_LAUNCH();
}

void markov_row(const MarkovRowArgs& a, cudaStream_t s) {
  const unsigned blocks = unsigned((a.vocab + kMarkovThreads - 1) / kMarkovThreads) + 1;
  markov_row_kernel<<<blocks, kMarkovThreads, 0, s>>>(a);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace cuda

// The rows' xa {hc, hidden} (scratch base `base`, rows `stride` floats apart) after layer l:
// its HC mean into the rows' taps slot k for every tap k that is l.
void DeepseekV4CudaModel::Impl::dspark_tap(int64_t l, float* x, int64_t n, int64_t stride) {
  const int64_t H = c.hidden;
  for (size_t k = 0; k < c.dspark_taps.size(); ++k) {
    if (c.dspark_taps[k] != l) continue;
    // x is the rows' xa; sl.taps lies (sl.taps - sl.xa) bytes after it in every row
    float* out = x + (int64_t(sl.taps) - int64_t(sl.xa)) / 4 + int64_t(k) * H;
    hc_mean(x, c.hc, H, out, stream, Rows{n, stride});
    mark("dspark_tap");
  }
}

void DeepseekV4CudaModel::Impl::dspark_record_step(CudaState& st) {
  const DDspark& d = dw.dspark;
  const int64_t H = c.hidden, hd = c.head_dim;
  uint8_t* sb = st.buf.as<uint8_t>();
  const int32_t* pos = reinterpret_cast<const int32_t*>(sb + lay.pos);
  ActIn xt = in_step(S(sl.taps), int64_t(c.dspark_taps.size()) * H, kActTaps), xm = in_step(S(sl.dmain), H, kActCol);
  mv(d.main_proj, xt, S(sl.dmain), stream);
  dc::rmsnorm_f32(S(sl.dmain), d.main_norm, S(sl.dmain), 1, H, c.rms_eps, stream);
  proj(d.ring_kv, xm, S(sl.dkv));  // every stage's kv row {stages, hd}
  for (int64_t s = 0; s < kDsparkStages; ++s) {  // no ds4 FP8 round trip: the CPU's kv_rows has none
    float* ring = reinterpret_cast<float*>(sb + lay.dspark_ring[size_t(s)]);
    norm_rope(S(sl.dkv) + s * hd, NormRope{1, hd, c.rope_dim, dw.layers[size_t(c.layers + s)].kv_norm, c.rms_eps,
                                           dw.inv_main, ring, lay.ring_rows, false},
              pos, stream);
  }
  mark("dspark_record");
}

// The same over the chunk rows (row t at position *pos + t), with the chunk's products: gemv_rows
// up to 16 rows (the rings equal as many decode steps' bit for bit), TF32 GEMMs in a tensor-core
// prefill chunk (within the trunk's tolerance: test_deepseek_v4_dspark_cuda item 7).
// Row groups: the products once over every row, each group's ring rows at its own positions.
void DeepseekV4CudaModel::Impl::dspark_record_rows(std::span<const RowGroup> groups) {
  const DDspark& d = dw.dspark;
  const int64_t H = c.hidden, hd = c.head_dim;
  ActIn xt = in_rows(sl.taps, int64_t(c.dspark_taps.size()) * H, kActTaps), xm = in_rows(sl.dmain, H, kActCol);
  mgemv(d.main_proj, xt, sl.dmain, stream);
  dc::rmsnorm_strided_f32(R(0, sl.dmain), rs(), d.main_norm, R(0, sl.dmain), rs(), rows, H, c.rms_eps, stream);
  mproj(d.ring_kv, xm, sl.dkv);
  for (const RowGroup& g : groups) {
    uint8_t* sb = g.st->buf.as<uint8_t>();
    const int32_t* pos = reinterpret_cast<const int32_t*>(sb + lay.pos);
    for (int64_t s = 0; s < kDsparkStages; ++s) {
      float* ring = reinterpret_cast<float*>(sb + lay.dspark_ring[size_t(s)]);
      norm_rope(R(g.r0, sl.dkv) + s * hd, NormRope{1, hd, c.rope_dim, dw.layers[size_t(c.layers + s)].kv_norm,
                                                   c.rms_eps, dw.inv_main, ring, lay.ring_rows, false},
                pos, stream, group_rows(g));
    }
  }
  mark("dspark_record");
}

// CPU k5_attention over the block rows in the chunk scratch (normed input in col): q and the
// block's own K/V rows from the stage's attn_in [q_a | kv], rope'd at *pos + t (sliding-layer
// rope), the K5 softmax, the grouped output.
void DeepseekV4CudaModel::Impl::k5_attention_rows(CudaState& st, int64_t stage) {
  const DLayer& L = dw.layers[size_t(c.layers + stage)];
  uint8_t* sb = st.buf.as<uint8_t>();
  const int32_t* pos = reinterpret_cast<const int32_t*>(sb + lay.pos);
  const int64_t hd = c.head_dim;
  const Rows all = all_rows();
  const size_t qr = sl.ain, kv = qr + size_t(c.q_lora) * 4;  // attn_in outputs per row: {q_lora | hd}
  ActIn xin = in_rows(sl.col, c.hidden, kActCol), xqr = in_rows(qr, c.q_lora, kActQr);
  mproj(L.attn_in, xin, sl.ain);
  dc::rmsnorm_strided_f32(R(0, qr), rs(), L.q_a_norm, R(0, qr), rs(), rows, c.q_lora, c.rms_eps, stream);
  mgemv(L.q_b, xqr, sl.q, stream);
  norm_rope(R(0, sl.q), NormRope{c.heads, hd, c.rope_dim, nullptr, c.rms_eps, dw.inv_main}, pos, stream, all);
  norm_rope(R(0, kv), NormRope{1, hd, c.rope_dim, L.kv_norm, c.rms_eps, dw.inv_main}, pos, stream, all);  // no ring
  mark("k5_qkv");
  const K5Args a{R(0, sl.q), R(0, kv), reinterpret_cast<const float*>(sb + lay.dspark_ring[size_t(stage)]),
                 lay.ring_rows, c.window, L.sinks, c.heads, hd, c.rope_dim, dw.inv_main, R(0, sl.heads), rows, rs()};
  k5_attend(a, pos, stream);
  mark("k5_attend");
  out_rows(L);
}

void DeepseekV4CudaModel::Impl::enqueue_dspark(CudaState& st) {
  const DDspark& d = dw.dspark;
  const int64_t B = kDsparkBlock, V = c.vocab, H = c.hidden;
  rows = B;
  mark("start");
  DS4_CUDA_CHECK(cudaMemcpyAsync(slot(0), draft_host->p, 4, cudaMemcpyHostToDevice, stream));  // primary
  // Block rows' embeddings (row 0 the primary, rows 1..4 the noise token). Their token ids are
  // not stored: sl.tok feeds hash routing only, and the stages are top-k routed.
  const int32_t* noise = reinterpret_cast<const int32_t*>(draft.as<uint8_t>() + dl.noise);
  dc::embed_rows_f32(dw.embed, slot(0), 0, 1, R(0, sl.emb), 0, stream);
  dc::embed_rows_f32(dw.embed, noise, 0, B - 1, R(1, sl.emb), rs(), stream);
  dc::hc_expand_f32(R(0, sl.emb), hcd, R(0, sl.xa), dc::HcRows{B, rs()}, stream);  // every stream = the embedding
  mark("embed");
  const RowGroup block{&st, 0, B};
  for (int64_t s = 0; s < kDsparkStages; ++s) layer_rows({&block, 1}, c.layers + s);
  // hc_head + the drafter's norm (folded into hc_head_f32) + lm_head, per row
  dc::GemvRows r;
  r.n = int(B), r.x_row = rs(), r.y_row = rs();
  const DHc& h = d.head_hc;
  r.batch = dc::GemvBatch{int(h.splits), nullptr, h.split_stride, 0, h.fn.cols, h.fn.rows};
  dc::gemv_rows(h.fn, R(0, sl.xa), R(0, sl.mix), r, stream);  // f32 x (chunk.cu hc_pre_rows says why)
  dc::HcDims hd = hcd;
  hd.mix_splits = h.splits;
  dc::hc_head_f32(R(0, sl.mix), h.scale, h.base, hd, R(0, sl.xa), d.norm, R(0, sl.hout), dc::HcRows{B, rs()}, stream);
  r.batch = dc::GemvBatch{};
  ActIn xh = in_rows(sl.hout, H, kActCol);
  if (auto q = act_for(xh, dw.lm_head, stream)) act_rows(dw.lm_head, *q, R(0, sl.logits), rs(), B, dc::MatmulBatch{}, stream);
  else dc::gemv_rows(dw.lm_head, R(0, sl.hout), R(0, sl.logits), r, stream);
  mark("dspark_head");
  // _run_greedy_future_tokens_k5: row r's predecessor is in slot r (primary, then draft r-1)
  float* mk = reinterpret_cast<float*>(draft.as<uint8_t>() + dl.mk);
  float* bias = reinterpret_cast<float*>(draft.as<uint8_t>() + dl.mbias);
  float* conf = reinterpret_cast<float*>(slot(0) + kDraftConfWord);
  for (int64_t k = 0; k < B; ++k) {
    dc::embed_rows_f32(d.markov_w1, slot(k), 0, 1, mk, 0, stream);
    ActIn xmk = in_step(mk, d.rank, kActMarkov);
    mv(d.markov_w2, xmk, bias, stream);
    markov_row(MarkovRowArgs{R(k, sl.logits), bias, V, d.conf_proj, R(k, sl.hout), H, mk, d.rank, conf + k}, stream);
    dc::sample_reduce_f32(R(k, sl.logits), V, 1, nullptr, slot(k + 1), stream);  // word 0: argmax
  }
  mark("dspark_markov");
  DS4_CUDA_CHECK(cudaMemcpyAsync(draft_host->p, slot(0), size_t(kDraftConfWord + B) * 4, cudaMemcpyDeviceToHost,
                                 stream));
}

// CPU dspark_draft's errors.
void DeepseekV4CudaModel::Impl::check_dspark(const CudaState& st, int32_t primary) const {
  if (!st.dspark_on || st.pos == 0)
    throw InputError("deepseek_v4: DSpark drafting needs the drafter enabled and at least one consumed token");
  if (primary < 0 || primary >= c.vocab)
    throw InputError("deepseek_v4: draft token id " + std::to_string(primary) + " outside [0, " +
                     std::to_string(c.vocab) + ")");
}

void DeepseekV4CudaModel::Impl::run_dspark(CudaState& st, int32_t primary, std::vector<int32_t>& drafts,
                                           std::vector<float>& conf) {
  int32_t* io = static_cast<int32_t*>(draft_host->p);
  io[0] = primary;
  fresh_graphs(st);
  dc::run_graph_step(stream, st.draft_graph[kDsparkGraphKey], opt.graphs, [&] { enqueue_dspark(st); });
  collect_profile();
  drafts.resize(size_t(kDsparkBlock));
  conf.resize(size_t(kDsparkBlock));
  for (int64_t k = 0; k < kDsparkBlock; ++k) {
    drafts[size_t(k)] = io[(k + 1) * kDraftSlotWords];
    std::memcpy(&conf[size_t(k)], io + kDraftConfWord + k, 4);
  }
}

void DeepseekV4CudaModel::dspark_draft_details(ModelState& state, int32_t primary, std::vector<float>& logits,
                                               std::vector<int32_t>& drafts, std::vector<float>& confidence) {
  Impl& m = *impl_;
  if (!m.dw.has_dspark) throw InputError("deepseek_v4 cuda: no DSpark drafter on the GPU for this checkpoint");
  CudaState& st = cuda_state(state);
  m.check_dspark(st, primary);
  m.run_dspark(st, primary, drafts, confidence);
  const size_t row = size_t(m.c.vocab) * sizeof(float);
  logits.resize(size_t(kDsparkBlock) * size_t(m.c.vocab));
  DS4_CUDA_CHECK(cudaMemcpy2DAsync(logits.data(), row, m.R(0, m.sl.logits), m.cl.row_bytes, row, size_t(kDsparkBlock),
                                   cudaMemcpyDeviceToHost, m.stream));
  DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
}

}  // namespace ds4::deepseek_v4
