// The integrated MTP draft head of GLM 5.x on the GPU (CPU reference: mtp.cpp, which this
// follows step for step):
//   row(h, t) = eh_proj([enorm(embed t) | hnorm h])   expanded to the hc streams
//   y         = the head's own decoder layer over its history rows (positions 0, 1, ...)
//   pre       = HC mean of y; logits = lm_head(rms_norm(pre, shared_head.norm))
// History row i pairs the trunk's normed output at position i with token i+1. The trunk
// forward pushes its normed output rows into the state's queue on the device (mtp_push,
// called by enqueue_step / enqueue_chunk); the next tokens of the queued pairs stay on the
// host. A draft first runs the head layer over the queued pairs (catch-up), then `depth`
// chain steps row -> layer -> logits -> argmax, each feeding the next, in one CUDA graph per
// (queued rows, depth); only the argmax words come back. The chain's own rows leave no trace:
// the head's position counter (its DSA caches are position-indexed, so rows past it are dead)
// and a KDA head's conv/recurrent state are saved before and restored after it.
// The head layer runs through the chunk path's layer code (chunk.cu layer_rows) on the row
// scratch, rows = queued pairs (<= chunk rows) or 1; the step and the chunk give each row the
// same arithmetic, so grouping the history differently from the CPU changes nothing.
// Catching up early (mtp_before_forward: the queue would overflow) is the same for that
// reason: the head consumes the same rows in the same order; only committed rows are queued
// when it happens (a verify window pushes its rows after it).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/embed.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/sample_reduce.h"
#include "core/error.h"
#include "models/glm5/cuda/kernels.h"
#include "models/glm5/cuda/model_impl.h"

namespace ds4::glm5 {
namespace {

// x row t {hc, hidden} = y row t {hidden} in every stream (the trunk's embedding expansion).
__global__ void expand_streams_kernel(const float* __restrict__ y, int64_t hc, int64_t hidden, float* __restrict__ x,
                                      int64_t stride) {
  const int64_t t = blockIdx.y, d = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= hidden) return;
  const float v = y[t * stride + d];
  for (int64_t s = 0; s < hc; ++s) x[t * stride + s * hidden + d] = v;
}

// mtp_record of mtp.cpp on the device, for n rows h (stride floats apart) the trunk just ran
// at positions *pos ..: when *pos > 0 the previous last row now knows its next token and is
// queued first; rows 0..n-2 follow; row n-1 becomes the last row. One block: every thread
// reads *qlen before thread 0 moves it, and each element of `last` is read (queued) and
// rewritten by the same thread.
__global__ void mtp_push_kernel(const float* __restrict__ h, int64_t n, int64_t stride, int64_t hidden,
                                const int32_t* __restrict__ pos, float* __restrict__ last, float* __restrict__ queue,
                                int32_t* qlen) {
  const int64_t q0 = *qlen, had = *pos > 0 ? 1 : 0;
  for (int64_t d = threadIdx.x; d < hidden; d += blockDim.x) {
    if (had) queue[q0 * hidden + d] = last[d];
    for (int64_t t = 0; t + 1 < n; ++t) queue[(q0 + had + t) * hidden + d] = h[t * stride + d];
    last[d] = h[(n - 1) * stride + d];
  }
  __syncthreads();
  if (threadIdx.x == 0) *qlen = int32_t(q0 + had + n - 1);
}

}  // namespace

void Glm5CudaModel::Impl::mtp_push(CudaState& st, const float* h, int64_t n, int64_t stride) {
  uint8_t* sb = st.buf.as<uint8_t>();
  mtp_push_kernel<<<1, 1024, 0, stream>>>(h, n, stride, c.hidden_size, reinterpret_cast<const int32_t*>(sb + lay.pos),
                                          reinterpret_cast<float*>(sb + lay.mtp.last),
                                          reinterpret_cast<float*>(sb + lay.mtp.queue),
                                          reinterpret_cast<int32_t*>(sb + lay.mtp.qlen));
  DS4_CUDA_CHECK_LAUNCH();
}

// The head's input rows: the trunk's embedding (or synthetic rows), as f32 on the device; made
// on first use: enable_draft, or the first catch-up / draft of a state loaded with the head on.
// The head's input rows, resolved on first use (enable_draft, or the first catch-up / draft of
// a state loaded with the head on): the trunk's embedding uploaded with the head's weights, or
// (a synthetic model's generated rows, a type embed_rows cannot decode) an f32 table.
void Glm5CudaModel::Impl::mtp_table() {
  if (emb_rows.data) return;
  if (dw.mtp->embed.data) {
    emb_rows = dw.mtp->embed;
    return;
  }
  const int64_t V = c.vocab_size, H = c.hidden_size;
  std::vector<float> rows(size_t(V * H));
  for (int64_t t = 0; t < V; ++t) embed(int32_t(t), rows.data() + t * H);
  emb = dc::DeviceBuffer(rows.size() * sizeof(float), "glm5 MTP embedding rows");
  DS4_CUDA_CHECK(cudaMemcpy(emb.get(), rows.data(), rows.size() * sizeof(float), cudaMemcpyHostToDevice));
  // A pageable copy may return before its DMA lands; the head reads the table on the
  // non-blocking stream, which does not wait for the legacy one.
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  emb_rows = WeightMatrix{DType::F32, V, H, emb.get()};
}

void Glm5CudaModel::Impl::mtp_enable(CudaState& st) {
  if (!dw.mtp)
    throw InputError("glm5: this checkpoint has no MTP layer (layers." + std::to_string(c.num_hidden_layers) +
                     ".eh_proj.weight)");
  if (st.pos != 0) throw InputError("glm5: enable the MTP head before the first forward");
  mtp_table();
  uint8_t* sb = st.buf.as<uint8_t>();  // an empty head: position 0, nothing queued
  DS4_CUDA_CHECK(cudaMemsetAsync(sb + lay.mtp.pos, 0, sizeof(int32_t), stream));
  DS4_CUDA_CHECK(cudaMemsetAsync(sb + lay.mtp.qlen, 0, sizeof(int32_t), stream));
  if (dw.mtp->layer.kda) {  // kda_init_state: zero conv window and recurrent matrix
    const int64_t qkv = c.linear_num_heads * c.linear_head_dim;
    DS4_CUDA_CHECK(cudaMemsetAsync(sb + lay.mtp.layer.conv, 0,
                                   size_t((c.linear_conv_kernel_dim - 1) * 3 * qkv) * sizeof(float), stream));
    DS4_CUDA_CHECK(cudaMemsetAsync(sb + lay.mtp.layer.rec, 0,
                                   size_t(c.linear_num_heads * c.linear_head_dim * c.linear_head_dim) * sizeof(float),
                                   stream));
  }
  DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
  st.mtp_on = true;
  st.mtp_pos = 0;
  st.pending_next.clear();
  st.drop_graphs();  // graphs captured before (none at position 0 normally) lack the push
}

void Glm5CudaModel::Impl::mtp_before_forward(CudaState& st, int64_t n) {
  if (st.mtp_on && int64_t(st.pending_next.size()) + n > qcap) mtp_catch_up(st);
}

void Glm5CudaModel::Impl::mtp_after_forward(CudaState& st, std::span<const int32_t> tokens, int64_t pos0) {
  if (!st.mtp_on || tokens.empty()) return;
  if (pos0 > 0) st.pending_next.push_back(tokens[0]);
  st.pending_next.insert(st.pending_next.end(), tokens.begin() + 1, tokens.end());
}

// head_rows of mtp.cpp + head_layer: n rows from token ids (device) and trunk rows prev
// (prev_stride floats apart) through the head layer at its positions; the streams are left
// in R(t, cur_off).
void Glm5CudaModel::Impl::head_rows(CudaState& st, int64_t n, const int32_t* ids, const float* prev,
                                    int64_t prev_stride) {
  const DMtp& h = *dw.mtp;
  const int64_t H = c.hidden_size;
  const float eps = c.rms_norm_eps;
  uint8_t* sb = st.buf.as<uint8_t>();
  int32_t* hpos = reinterpret_cast<int32_t*>(sb + lay.mtp.pos);
  rows = n;
  cur_off = sl.x, alt_off = sl.x2;
  dc::embed_rows_f32(emb_rows, ids, 1, n, R(0, sl.memb), rs(), stream);  // {rows, hidden}
  // mcat {rows, [enorm(embed) | hnorm(prev)]}
  dc::rmsnorm_strided_f32(R(0, sl.memb), rs(), h.enorm, R(0, sl.mcat), rs(), n, H, eps, stream);
  dc::rmsnorm_strided_f32(prev, prev_stride, h.hnorm, R(0, sl.mcat) + H, rs(), n, H, eps, stream);
  mgemv(h.eh_proj, sl.mcat, sl.y);  // {rows, hidden}
  const dim3 grid(unsigned((H + 255) / 256), unsigned(n));
  expand_streams_kernel<<<grid, 256, 0, stream>>>(R(0, sl.y), c.hc_mult, H, R(0, cur_off), rs());
  DS4_CUDA_CHECK_LAUNCH();
  enqueue_positions(hpos, 0, n);
  const RowGroup all{&st, 0, n};
  layer_rows(h.layer, lay.mtp.layer, {&all, 1}, {});
  enqueue_advance(hpos, n);
}

// Row 0's draft logits: pre = HC mean (mpre, the next chain step's prev), normed with
// shared_head.norm, lm_head; argmax words (sample_reduce, k = 1) when `argmax`.
void Glm5CudaModel::Impl::head_logits(int32_t* argmax) {
  const int64_t H = c.hidden_size;
  hc_mean(R(0, cur_off), c.hc_mult, H, R(0, sl.mpre), stream);
  dc::rmsnorm_f32(R(0, sl.mpre), dw.mtp->shared_norm, R(0, sl.hfin), 1, H, c.rms_norm_eps, stream);
  dc::gemv(dw.lm_head, R(0, sl.hfin), R(0, sl.logits), stream);
  if (argmax) dc::sample_reduce_f32(R(0, sl.logits), c.vocab_size, 1, nullptr, argmax, stream);
}

// The chain's rows must not stay: save (restore = false) or restore the head's position
// counter and, for a KDA head, its conv window and recurrent matrix.
void Glm5CudaModel::Impl::enqueue_head_save(CudaState& st, bool restore) {
  uint8_t* sb = st.buf.as<uint8_t>();
  auto copy = [&](void* live, void* saved, size_t bytes) {
    DS4_CUDA_CHECK(cudaMemcpyAsync(restore ? live : saved, restore ? saved : live, bytes, cudaMemcpyDeviceToDevice,
                                   stream));
  };
  copy(sb + lay.mtp.pos, C(cl.mpos_save), sizeof(int32_t));
  if (dw.mtp->layer.kda) {
    const int64_t qkv = c.linear_num_heads * c.linear_head_dim;
    const size_t conv = size_t((c.linear_conv_kernel_dim - 1) * 3 * qkv);
    const size_t rec = size_t(c.linear_num_heads * c.linear_head_dim * c.linear_head_dim);
    copy(sb + lay.mtp.layer.conv, C(cl.mkda_save), conv * sizeof(float));
    copy(sb + lay.mtp.layer.rec, C(cl.mkda_save) + conv, rec * sizeof(float));
  }
}

// One greedy draft: catch-up over the qlen queued pairs (ids mids[0..qlen), trunk rows from
// the queue), then `depth` chain steps; step 0 reads (last trunk row, mids[qlen] = the
// target's next token), step k the previous step's pre and argmax. Captured per (qlen, depth).
void Glm5CudaModel::Impl::enqueue_draft(CudaState& st, int64_t qlen, int depth) {
  const int64_t H = c.hidden_size;
  uint8_t* sb = st.buf.as<uint8_t>();
  int32_t* mids = C<int32_t>(cl.mids);
  int32_t* out = C<int32_t>(cl.mout);
  DS4_CUDA_CHECK(cudaMemcpyAsync(mids, mids_host->p, size_t(qlen + 1) * sizeof(int32_t), cudaMemcpyHostToDevice,
                                 stream));
  if (qlen > 0) {
    head_rows(st, qlen, mids, reinterpret_cast<const float*>(sb + lay.mtp.queue), H);
    DS4_CUDA_CHECK(cudaMemsetAsync(sb + lay.mtp.qlen, 0, sizeof(int32_t), stream));
  }
  enqueue_head_save(st, false);
  for (int k = 0; k < depth; ++k) {
    const int32_t* ids = k == 0 ? mids + qlen : out + (k - 1) * 8;  // argmax = word 0 of a result
    const float* prev = k == 0 ? reinterpret_cast<const float*>(sb + lay.mtp.last) : R(0, sl.mpre);
    head_rows(st, 1, ids, prev, H);
    head_logits(out + k * 8);
  }
  enqueue_head_save(st, true);
  DS4_CUDA_CHECK(cudaMemcpyAsync(mout_host->p, out, size_t(depth) * 8 * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                 stream));
}

// catch_up of mtp.cpp: every queued pair through the head layer, in pieces of up to the
// chunk's rows (each piece's ids from its own part of mids_host: no copy overwrites another
// copy's source before it ran).
void Glm5CudaModel::Impl::mtp_catch_up(CudaState& st) {
  const int64_t P = int64_t(st.pending_next.size()), H = c.hidden_size;
  if (P == 0) return;
  mtp_table();
  uint8_t* sb = st.buf.as<uint8_t>();
  int32_t* ids_h = static_cast<int32_t*>(mids_host->p);
  int32_t* mids = C<int32_t>(cl.mids);
  std::copy(st.pending_next.begin(), st.pending_next.end(), ids_h);
  for (int64_t off = 0; off < P; off += verify_rows) {
    const int64_t r = std::min(verify_rows, P - off);
    DS4_CUDA_CHECK(cudaMemcpyAsync(mids + off, ids_h + off, size_t(r) * sizeof(int32_t), cudaMemcpyHostToDevice,
                                   stream));
    head_rows(st, r, mids + off, reinterpret_cast<const float*>(sb + lay.mtp.queue) + off * H, H);
  }
  DS4_CUDA_CHECK(cudaMemsetAsync(sb + lay.mtp.qlen, 0, sizeof(int32_t), stream));
  DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
  st.mtp_pos += P;
  st.pending_next.clear();
}

// A prefill chunk's pairs through the head, as one multi-row pass (tensor cores from gemm_rows
// rows, as the trunk's chunk: within the trunk's tolerance; exact without them, each row's
// arithmetic that of a queued row). The queue is empty (caught up before the chunk), so the
// pairs are those mtp_push would queue, in its order: (last, tokens[0]) when pos0 > 0, then
// (hfin row t, tokens[t + 1]) for t < n - 1 from the chunk's rows (enqueue_chunk computed every
// row's hfin; the head's layer never writes it); row n - 1 becomes the last row.
void Glm5CudaModel::Impl::mtp_chunk_pairs(CudaState& st, std::span<const int32_t> tokens, int64_t pos0) {
  const int64_t n = int64_t(tokens.size()), H = c.hidden_size;
  DS4_CHECK(st.pending_next.empty() && n <= cl.rows, "glm5 cuda: a prefill chunk's MTP pairs need an empty queue");
  mtp_table();
  uint8_t* sb = st.buf.as<uint8_t>();
  float* last = reinterpret_cast<float*>(sb + lay.mtp.last);
  int32_t* ids_h = static_cast<int32_t*>(mids_host->p);
  int32_t* mids = C<int32_t>(cl.mids);
  std::copy(tokens.begin(), tokens.end(), ids_h);
  DS4_CUDA_CHECK(cudaMemcpyAsync(mids, ids_h, size_t(n) * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  if (pos0 > 0) head_rows(st, 1, mids, last, H);
  if (n > 1) {
    tc = mm && opt.gemm_rows > 0 && n - 1 >= opt.gemm_rows && mtp_direct(n - 1);  // as run_chunk
    try {
      head_rows(st, n - 1, mids + 1, R(0, sl.hfin), rs());
    } catch (...) {
      tc = false;
      throw;
    }
    tc = false;
  }
  DS4_CUDA_CHECK(cudaMemcpyAsync(last, R(n - 1, sl.hfin), size_t(H) * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  DS4_CUDA_CHECK(cudaStreamSynchronize(stream));  // ids_h is rewritten by the next chunk
  st.mtp_pos += (pos0 > 0 ? 1 : 0) + n - 1;
}

void Glm5CudaModel::Impl::mtp_draft(CudaState& st, int32_t next, int depth,
                                    const std::function<int32_t(std::span<const float>)>* pick,
                                    std::vector<int32_t>& drafts) {
  if (!st.mtp_on || st.pos == 0) throw InputError("glm5: MTP drafting needs the head enabled before a prefill");
  if (next < 0 || next >= c.vocab_size)
    throw InputError("glm5: draft token id " + std::to_string(next) + " outside vocab_size " +
                     std::to_string(c.vocab_size));
  if (depth < 0 || depth > kMtpMaxDepth)
    throw InputError("glm5 cuda: draft depth " + std::to_string(depth) + " is not in 0.." +
                     std::to_string(kMtpMaxDepth));
  if (st.cap_n > 0) throw Error("glm5: draft over an uncommitted captured verify window");
  drafts.clear();
  mtp_table();  // before a chain graph captures its address
  const int64_t V = c.vocab_size, H = c.hidden_size;
  if (!pick && depth > 0) {
    if (int64_t(st.pending_next.size()) > verify_rows) mtp_catch_up(st);  // a long prefill: pieces first
    const int64_t qlen = int64_t(st.pending_next.size());
    int32_t* ids_h = static_cast<int32_t*>(mids_host->p);
    std::copy(st.pending_next.begin(), st.pending_next.end(), ids_h);
    ids_h[qlen] = next;
    fresh_graphs(st);
    replay(st.mtp_graph[qlen * 64 + depth], false, [&] { enqueue_draft(st, qlen, depth); });
    st.mtp_pos += qlen;
    st.pending_next.clear();
    const int32_t* words = static_cast<const int32_t*>(mout_host->p);
    for (int k = 0; k < depth; ++k) drafts.push_back(words[k * 8]);
    return;
  }
  // A host pick per step (or depth 0): direct launches, the logits row of each step copied back.
  mtp_catch_up(st);
  if (depth == 0) return;
  uint8_t* sb = st.buf.as<uint8_t>();
  int32_t* ids_h = static_cast<int32_t*>(mids_host->p) + qcap;  // past the catch-up's part
  int32_t* mids = C<int32_t>(cl.mids) + qcap;
  draft_logits.assign(size_t(depth) * size_t(V), 0.0f);
  enqueue_head_save(st, false);
  int32_t tok = next;
  for (int k = 0; k < depth; ++k) {
    ids_h[k] = tok;
    DS4_CUDA_CHECK(cudaMemcpyAsync(mids + k, ids_h + k, sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    head_rows(st, 1, mids + k, k == 0 ? reinterpret_cast<const float*>(sb + lay.mtp.last) : R(0, sl.mpre), H);
    head_logits(nullptr);
    DS4_CUDA_CHECK(cudaMemcpyAsync(logits_host->p, R(0, sl.logits), size_t(V) * sizeof(float), cudaMemcpyDeviceToHost,
                                   stream));
    DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
    float* row = draft_logits.data() + size_t(k) * size_t(V);
    std::copy_n(static_cast<const float*>(logits_host->p), V, row);
    try {
      tok = (*pick)(std::span<const float>(row, size_t(V)));
    } catch (...) {  // a throwing pick leaves no trace either (the head's rows are put back)
      enqueue_head_save(st, true);
      cudaStreamSynchronize(stream);
      throw;
    }
    if (tok < 0 || tok >= V) {
      enqueue_head_save(st, true);
      DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
      throw Error("glm5 cuda: draft pick returned token " + std::to_string(tok));
    }
    drafts.push_back(tok);
  }
  enqueue_head_save(st, true);
  DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace ds4::glm5

namespace ds4::glm5 {
DraftHead* Glm5CudaModel::draft_head() { return impl_->dw.mtp ? this : nullptr; }
void Glm5CudaModel::enable_draft(ModelState& state) const { impl_->mtp_enable(cuda::cuda_state(state)); }
void Glm5CudaModel::draft(ModelState& state, int32_t next_token, int depth, std::vector<int32_t>& drafts) {
  impl_->mtp_draft(cuda::cuda_state(state), next_token, depth, nullptr, drafts);
}
bool Glm5CudaModel::draft_picked(ModelState& state, int32_t next_token, int depth, const Pick& pick,
                                 std::vector<int32_t>& drafts) {
  impl_->mtp_draft(cuda::cuda_state(state), next_token, depth, &pick, drafts);
  return true;
}
const std::vector<float>& Glm5CudaModel::last_draft_logits() const { return impl_->draft_logits; }

}  // namespace ds4::glm5
