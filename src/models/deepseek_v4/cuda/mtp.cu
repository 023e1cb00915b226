// ds4's MTP draft head on the GPU (CPU: mtp.cpp; the head's math is the CPU's, its layer is
// the trunk's layer code run at index c.layers):
//   record  after every trunk forward of a head-enabled state (decode step or chunk, before
//           the position counter moves): row t = h_proj(rmsnorm(x_t[s], hnorm)) +
//           e_proj(rmsnorm(embed t, enorm)) per HC stream s, from the trunk's final HC state
//           and the embedding row already in the row's scratch, through the head's layer
//           (its window ring in the state); y of the last row -> the state's mtp_y.
//   draft   the greedy chain, one graph per state and depth: row 0's logits from mtp_y (only
//           when asked: the loop never reads them), then per draft k the head row of (y of
//           row k-1, token k-1) at position pos + k - 1, its logits, their argmax on the
//           device (sample_reduce) and that token's embedding row looked up on the device;
//           the depth ids come back in one copy. The head's ring and the position counter
//           are saved before the chain and put back after it, so the state is unchanged.
// Every head row uses the same gemv_rows / Rows kernels in the step and in a chunk of up to 16
// rows, so such a chunk's head rows equal as many decode steps' bit for bit (as the trunk's
// do); a tensor-core prefill chunk records its head rows with the chunk's GEMMs, within the
// trunk's tolerance (tests/cuda/test_deepseek_v4_mtp_cuda.cu item 9).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>

#include "backend/cuda/embed.h"
#include "backend/cuda/graph_step.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/sample_reduce.h"
#include "core/error.h"
#include "models/deepseek_v4/cuda/model_impl.h"

namespace ds4::deepseek_v4 {
namespace cuda {
namespace {

__global__ void streams_add_kernel(float* x, const float* __restrict__ e, int64_t hc, int64_t dim, int64_t stride) {
  const int64_t t = blockIdx.y, i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= hc * dim) return;
  x[t * stride + i] += e[t * stride + i % dim];
}

}  // namespace

void streams_add(float* x, const float* e, int64_t hc, int64_t dim, cudaStream_t s, const Rows& rows) {
  const int64_t n = hc * dim;
  streams_add_kernel<<<dim3(unsigned((n + 255) / 256), unsigned(rows.count)), 256, 0, s>>>(x, e, hc, dim, rows.stride);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace cuda

// xa {hc, H} of row t = h_proj(hnorm(prev_t[s])) + e_proj(enorm(emb_t)). prev may be xa itself:
// it is normed into xb before xa is written. The h_proj of every stream is one batched product
// (entry s = stream s, the same matrix). mrows: gemv_rows / gemv_act_rows (exact, the same in a
// step and a chunk) up to 16 rows, a TF32 GEMM in a tensor-core prefill chunk (the head's rows
// then follow the trunk's precision: within tolerance, not bit for bit).
void DeepseekV4CudaModel::Impl::mtp_in(bool in_chunk, int64_t n, const float* prev, const float* emb) {
  const DMtp& m = dw.mtp;
  const int64_t H = c.hidden, hc = c.hc;
  uint8_t* base = in_chunk ? chunk.as<uint8_t>() : scratch.as<uint8_t>();
  const int64_t stride = in_chunk ? rs() : 0;
  auto at = [&](size_t off) { return reinterpret_cast<float*>(base + off); };
  for (int64_t j = 0; j < hc; ++j)  // hn {hc, H} per row
    dc::rmsnorm_strided_f32(prev + j * H, stride, m.hnorm, at(sl.xb) + j * H, stride, n, H, c.rms_eps, stream);
  dc::rmsnorm_strided_f32(emb, stride, m.enorm, at(sl.me), stride, n, H, c.rms_eps, stream);
  ActIn xe = act_in(at(sl.me), stride, n, H, kActCol, in_chunk), xs = act_in(at(sl.xb), stride, n, hc * H, kActStreams, in_chunk);
  mrows(m.e_proj, xe, at(sl.mep), stride, dc::MatmulBatch{}, stream);
  mrows(m.h_proj, xs, at(sl.xa), stride, dc::MatmulBatch{int(hc), 0, 0, H, H}, stream);
  streams_add(at(sl.xa), at(sl.mep), hc, H, stream, Rows{n, stride});
  mark("mtp_in");
}

// CPU head_logits: hc_head_mtp, the head's norm (folded into hc_head_f32), lm_head.
void DeepseekV4CudaModel::Impl::mtp_logits(const float* y, float* logits) {
  const DHc& h = dw.mtp.head_hc;
  hc_mix(h, y);
  dc::HcDims d = hcd;
  d.mix_splits = h.splits;
  dc::hc_head_f32(S(sl.mix), h.scale, h.base, d, y, dw.mtp.norm, S(sl.hout), stream);
  ActIn xh = in_step(S(sl.hout), c.hidden, kActCol);
  mv(dw.lm_head, xh, logits, stream);
  mark("mtp_logits");
}

void DeepseekV4CudaModel::Impl::mtp_record_step(CudaState& st) {
  mtp_in(false, 1, S(sl.xa), S(sl.emb));
  layer_step(st, c.layers);
  DS4_CUDA_CHECK(cudaMemcpyAsync(st.buf.as<uint8_t>() + lay.mtp_y, S(sl.xa), size_t(c.hc * c.hidden) * 4,
                                 cudaMemcpyDeviceToDevice, stream));
}

// The head over every row (its products once for all rows), each group's last row as its mtp_y.
void DeepseekV4CudaModel::Impl::mtp_record_rows(std::span<const RowGroup> groups) {
  const size_t W = size_t(c.hc * c.hidden) * 4;
  mtp_in(true, rows, R(0, sl.xa), R(0, sl.emb));
  layer_rows(groups, c.layers);
  for (const RowGroup& g : groups) {
    DS4_CUDA_CHECK(cudaMemcpyAsync(g.st->buf.as<uint8_t>() + lay.mtp_y, R(g.r0 + g.n - 1, sl.xa), W,
                                   cudaMemcpyDeviceToDevice, stream));
    if (capturing && g.n > 1)  // every row's y: commit_prefix(keep) takes row keep - 1's
      DS4_CUDA_CHECK(cudaMemcpy2DAsync(g.st->cap_buf.as<uint8_t>() + cap.mtp_y, W, R(g.r0, sl.xa), cl.row_bytes, W,
                                       size_t(g.n), cudaMemcpyDeviceToDevice, stream));
  }
}

// The chain writes the head's ring at positions pos.. and moves the counter; both come back
// in draft_end (the trunk's caches are never touched).
void DeepseekV4CudaModel::Impl::draft_begin(CudaState& st) {
  uint8_t* sb = st.buf.as<uint8_t>();
  const size_t ring = size_t(lay.ring_rows * c.head_dim) * 4;
  DS4_CUDA_CHECK(cudaMemcpyAsync(draft.as<uint8_t>() + dl.ring, sb + lay.layers[size_t(c.layers)].window, ring,
                                 cudaMemcpyDeviceToDevice, stream));
  DS4_CUDA_CHECK(cudaMemcpyAsync(draft.as<uint8_t>() + dl.pos, sb + lay.pos, 4, cudaMemcpyDeviceToDevice, stream));
}

void DeepseekV4CudaModel::Impl::draft_end(CudaState& st) {
  uint8_t* sb = st.buf.as<uint8_t>();
  const size_t ring = size_t(lay.ring_rows * c.head_dim) * 4;
  DS4_CUDA_CHECK(cudaMemcpyAsync(sb + lay.layers[size_t(c.layers)].window, draft.as<uint8_t>() + dl.ring, ring,
                                 cudaMemcpyDeviceToDevice, stream));
  DS4_CUDA_CHECK(cudaMemcpyAsync(sb + lay.pos, draft.as<uint8_t>() + dl.pos, 4, cudaMemcpyDeviceToDevice, stream));
}

// Chain row k >= 1 (CPU mtp_draft's loop body): token k-1 from slot k-1, the previous y from
// the state (k = 1) or xa (the previous row's output), logits into row k, counter + 1.
void DeepseekV4CudaModel::Impl::draft_row(CudaState& st, int64_t k) {
  uint8_t* sb = st.buf.as<uint8_t>();
  dc::embed_rows_f32(dw.embed, slot(k - 1), 0, 1, S(sl.emb), 0, stream);
  const float* prev = k == 1 ? reinterpret_cast<const float*>(sb + lay.mtp_y) : S(sl.xa);
  mtp_in(false, 1, prev, S(sl.emb));
  layer_step(st, c.layers);  // at *pos = the state's position + k - 1
  mtp_logits(S(sl.xa), draft_logits_row(k));
  dc::enqueue_position_increment(reinterpret_cast<int32_t*>(sb + lay.pos), stream);
}

void DeepseekV4CudaModel::Impl::enqueue_draft(CudaState& st, int64_t depth) {
  mark("start");
  DS4_CUDA_CHECK(cudaMemcpyAsync(slot(0), draft_host->p, 4, cudaMemcpyHostToDevice, stream));  // next_token
  draft_begin(st);
  if (draft_row0) mtp_logits(reinterpret_cast<const float*>(st.buf.as<uint8_t>() + lay.mtp_y), draft_logits_row(0));
  for (int64_t k = 1; k <= depth; ++k) {
    draft_row(st, k);
    dc::sample_reduce_f32(draft_logits_row(k), c.vocab, 1, nullptr, slot(k), stream);  // word 0: argmax
    mark("mtp_argmax");
  }
  draft_end(st);
  DS4_CUDA_CHECK(cudaMemcpyAsync(draft_host->p, slot(0), size_t((depth + 1) * kDraftSlotWords) * 4,
                                 cudaMemcpyDeviceToHost, stream));
}

void DeepseekV4CudaModel::Impl::check_draft(const CudaState& st, int32_t next_token, int depth) const {
  if (!st.mtp_on || st.pos == 0) throw InputError("deepseek_v4: MTP drafting needs the head enabled and a prefill");
  if (next_token < 0 || next_token >= c.vocab)
    throw InputError("deepseek_v4: draft token id " + std::to_string(next_token) + " outside [0, " +
                     std::to_string(c.vocab) + ")");
  if (depth < 0) throw InputError("deepseek_v4: negative draft depth " + std::to_string(depth));
  if (depth > kMaxDraftDepth)
    throw InputError("deepseek_v4 cuda: draft depth " + std::to_string(depth) + " exceeds " +
                     std::to_string(kMaxDraftDepth));
}

void DeepseekV4CudaModel::Impl::run_draft(CudaState& st, int32_t next_token, int depth, std::vector<int32_t>& drafts) {
  int32_t* io = static_cast<int32_t*>(draft_host->p);
  io[0] = next_token;
  fresh_graphs(st);
  const int64_t key = int64_t(depth) * 2 + (draft_row0 ? 1 : 0);
  dc::run_graph_step(stream, st.draft_graph[key], opt.graphs, [&] { enqueue_draft(st, depth); });
  collect_profile();
  drafts.resize(size_t(depth));
  for (int k = 1; k <= depth; ++k) drafts[size_t(k - 1)] = io[k * kDraftSlotWords];
}

// The DraftHead entry points serve both heads: DSpark (dspark.cu) when the checkpoint has it on
// the GPU, else ds4's MTP head.
DraftHead* DeepseekV4CudaModel::draft_head() { return impl_->dw.has_mtp || impl_->dw.has_dspark ? this : nullptr; }

void DeepseekV4CudaModel::enable_draft(ModelState& state) const {
  CudaState& st = cuda_state(state);
  const DeviceWeights& dw = impl_->dw;
  if (!dw.has_mtp && !dw.has_dspark)
    throw InputError("deepseek_v4 cuda: no draft head on the GPU for this checkpoint (mtp.0.* tensors, or DSpark's "
                     "mtp.0.main_proj.weight, with an embedding type the device lookup has)");
  if (st.pos != 0) throw InputError("deepseek_v4: enable the draft head before the first forward");
  st.mtp_on = dw.has_mtp;
  st.dspark_on = dw.has_dspark;
  st.drop_graphs();  // graphs captured so far lack the head's rows
}

void DeepseekV4CudaModel::draft(ModelState& state, int32_t next_token, int depth, std::vector<int32_t>& drafts) {
  draft_gated(state, next_token, depth, 0.0, drafts);
}

void DeepseekV4CudaModel::draft_gated(ModelState& state, int32_t next_token, int depth, double min_confidence,
                                      std::vector<int32_t>& drafts) {
  Impl& m = *impl_;
  CudaState& st = cuda_state(state);
  if (m.dw.has_dspark) {  // CPU model.cpp draft(): one K5 pass, min(depth, 5) futures, the gate's cut
    if (depth < 0) throw InputError("deepseek_v4: negative draft depth " + std::to_string(depth));
    m.check_dspark(st, next_token);
    std::vector<int32_t> all;
    std::vector<float> conf;
    m.run_dspark(st, next_token, all, conf);
    const size_t keep = std::min<size_t>(size_t(depth), all.size());
    size_t k = 0;
    while (k < keep && conf[k] >= min_confidence) ++k;
    drafts.assign(all.begin(), all.begin() + std::ptrdiff_t(k));
    return;
  }
  m.check_draft(st, next_token, depth);
  drafts.clear();
  if (depth == 0) return;
  m.draft_row0 = false;
  m.run_draft(st, next_token, depth, drafts);
}

void DeepseekV4CudaModel::draft_logits(ModelState& state, int32_t next_token, int depth, std::vector<float>& logits,
                                       std::vector<int32_t>& drafts) {
  Impl& m = *impl_;
  if (!m.dw.has_mtp) throw InputError("deepseek_v4 cuda: no MTP head on the GPU for this checkpoint");
  CudaState& st = cuda_state(state);
  m.check_draft(st, next_token, depth);
  m.draft_row0 = true;
  try {
    m.run_draft(st, next_token, depth, drafts);
  } catch (...) {
    m.draft_row0 = false;
    throw;
  }
  m.draft_row0 = false;
  logits.resize(size_t(depth + 1) * size_t(m.c.vocab));
  DS4_CUDA_CHECK(cudaMemcpyAsync(logits.data(), m.draft_logits_row(0), logits.size() * 4, cudaMemcpyDeviceToHost,
                                 m.stream));
  DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
}

// One row at a time: row k's logits to the host, the pick, its id back into slot k (direct
// launches: the pick is host code between the rows).
bool DeepseekV4CudaModel::draft_picked(ModelState& state, int32_t next_token, int depth, const Pick& pick,
                                       std::vector<int32_t>& drafts) {
  Impl& m = *impl_;
  if (m.dw.has_dspark) return false;  // DSpark drafts its block in one pass: a greedy proposal (as the CPU)
  CudaState& st = cuda_state(state);
  m.check_draft(st, next_token, depth);
  drafts.clear();
  const int64_t V = m.c.vocab;
  int32_t* io = static_cast<int32_t*>(m.draft_host->p);
  io[0] = next_token;
  DS4_CUDA_CHECK(cudaMemcpyAsync(m.slot(0), io, 4, cudaMemcpyHostToDevice, m.stream));
  m.draft_begin(st);
  try {
    for (int k = 1; k <= depth; ++k) {
      m.draft_row(st, k);
      DS4_CUDA_CHECK(cudaMemcpyAsync(m.logits_host->p, m.draft_logits_row(k), size_t(V) * 4, cudaMemcpyDeviceToHost,
                                     m.stream));
      DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
      const int32_t t = pick(std::span<const float>(static_cast<const float*>(m.logits_host->p), size_t(V)));
      if (t < 0 || t >= V) throw InputError("deepseek_v4: picked draft id " + std::to_string(t) + " outside the vocabulary");
      drafts.push_back(t);
      io[k * kDraftSlotWords] = t;
      DS4_CUDA_CHECK(cudaMemcpyAsync(m.slot(k), io + k * kDraftSlotWords, 4, cudaMemcpyHostToDevice, m.stream));
    }
  } catch (...) {
    m.draft_end(st);
    cudaStreamSynchronize(m.stream);
    throw;
  }
  m.draft_end(st);
  DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  m.collect_profile();
  return true;
}

void DeepseekV4CudaModel::last_picked_logits(int depth, std::vector<float>& logits) const {
  const Impl& m = *impl_;
  if (!m.dw.has_mtp || depth < 1 || depth > kMaxDraftDepth) throw InputError("deepseek_v4 cuda: no picked draft rows");
  logits.resize(size_t(depth) * size_t(m.c.vocab));
  DS4_CUDA_CHECK(cudaMemcpyAsync(logits.data(), m.draft_logits_row(1), logits.size() * 4, cudaMemcpyDeviceToHost,
                                 m.stream));
  DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
}

}  // namespace ds4::deepseek_v4
