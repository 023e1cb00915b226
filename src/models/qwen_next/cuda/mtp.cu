// The MTP draft head on the GPU (issue #11; CPU: forward.cpp enable_mtp / mtp_catch_up /
// mtp_draft, golden master MTPLX Qwen4ExpMTP). Its decoder layer runs through the trunk's
// decode-step code (Impl::layer) on the state's head caches at the head's own device
// position, so the head and the trunk share every kernel.
//
// History: forward() pushes each consumed token's final pre-mixer h row and the token into
// the state's ring (step_layout.h MtpLayout), on the device: after each decode step from the
// step scratch, after each chunk (chunk.cu forward_chunk) every row from its row scratch. A pair (row q, token q+1) is
// pending until a catch-up runs it through the head's layer at position q (mtp_pos then
// counts the consumed pairs, as on the CPU): at the start of every draft, and inside
// forward() when the ring is about to overwrite a pending row.
// Drafts: step k runs the layer at mtp_pos + k through a separate device counter
// (draft_pos), writing the head's cache rows past mtp_pos; mtp_pos never moves, so the next
// catch-up overwrites them (QSA reads rows <= its position only, and re-pools a block when
// a row completes it again). The state is thereby unchanged by a draft, as on the CPU
// (which trims its caches back instead).
#include <algorithm>
#include <functional>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/embed.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/graph_step.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/sample_reduce.h"
#include "core/error.h"
#include "models/qwen_next/cuda/kernels.h"
#include "models/qwen_next/cuda/model_impl.h"

namespace ds4::qwen_next {

void QwenNextCudaModel::Impl::mtp_init() {
  ml = mtp_layout(c, info.max_context);
  ms = mtp_scratch_layout(c, int64_t(dc::sample_reduce_words(1)));
  mtp_scratch = dc::DeviceBuffer(ms.bytes, "qwen_next MTP draft scratch");
  DS4_CUDA_CHECK(cudaMemset(mtp_scratch.get(), 0, ms.bytes));
  DS4_CUDA_CHECK(cudaDeviceSynchronize());  // the non-blocking stream does not wait for the memset
  mtp_tok_host = std::make_unique<dc::PinnedHost>(size_t(kMtpMaxDepth) * sizeof(int32_t));
  mtp_picks_host = std::make_unique<dc::PinnedHost>(size_t(kMtpMaxDepth * ms.pick_words) * sizeof(int32_t));
  mtp_row_host = std::make_unique<dc::PinnedHost>(size_t(c.vocab) * sizeof(float));
}

void QwenNextCudaModel::Impl::mtp_enable(CudaState& st) const {
  if (!has_mtp())
    throw InputError("qwen_next cuda: this checkpoint has no MTP head on the GPU (no mtp.* tensors, or an embedding "
                     "type without a device row decode)");
  if (st.pos != 0) throw InputError("qwen_next: enable_mtp must precede the first forward");
  if (st.mtp_on) return;
  st.mtp = dc::DeviceBuffer(ml.bytes, "qwen_next MTP state (head caches, trunk rows)");
  DS4_CUDA_CHECK(cudaMemset(st.mtp.get(), 0, ml.bytes));
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  st.mtp_on = true;
  st.mtp_pos = 0;
}

// A chunk's rows go into the ring in one push, onto distinct slots.
static_assert(kRingPushMax >= dc::kGemvMaxRows && kMtpRing > kRingPushMax, "MTP ring push sizes");

void QwenNextCudaModel::Impl::mtp_room(CudaState& st, int64_t p, int64_t n) {
  // The last of the n pushes (position p+n-1) lands on the slot of row mtp_pos when
  // p+n-1 - mtp_pos == ring: consume the pairs first (rows mtp_pos .. p-2 with tokens up to
  // p-1, all pushed). Afterwards p+n-1 - mtp_pos == n <= kRingPushMax < ring.
  if (p + n - 1 - st.mtp_pos >= ml.ring) mtp_catch_up(st, p - 1);
}

void QwenNextCudaModel::Impl::mtp_push(CudaState& st, int64_t p, std::span<const int32_t> tokens, const float* h,
                                       int64_t h_stride) {
  const int64_t n = int64_t(tokens.size());
  DS4_CHECK(n <= kRingPushMax && p + n - 1 - st.mtp_pos < ml.ring,
            "qwen_next cuda: MTP ring push without room (mtp_room)");
  RingPush r;
  r.first = p, r.count = int32_t(n);
  std::copy(tokens.begin(), tokens.end(), r.token);
  mtp_ring_push(h, h_stride, reinterpret_cast<float*>(M(st, ml.rows)), reinterpret_cast<int32_t*>(M(st, ml.next)),
                c.wide(), ml.ring, r, stream);
}

void QwenNextCudaModel::Impl::mtp_prepare(const float* row, const int32_t* tok) {
  const DMtp& m = *dw.mtp;
  const int64_t hc = c.hc, d = c.hidden, W = c.wide();
  float *normed = MS(ms.normed), *emb = MS(ms.emb), *femb = MS(ms.femb), *h = S(sl.h);
  dc::rmsnorm_f32(row, m.norm_hidden, normed, 1, W, c.rms_eps, stream);  // full width, not per stream
  dc::GemvRows r;  // fc_hidden on each stream {hc, d} -> h {hc, d}
  r.n = int(hc), r.x_row = d, r.y_row = d;
  dc::gemv_rows(m.fc_hidden, normed, h, r, stream);
  dc::embed_rows_f32(dw.embed, tok, 0, 1, emb, 0, stream);
  dc::rmsnorm_f32(emb, m.norm_emb, emb, 1, d, c.rms_eps, stream);
  gemv(m.fc_emb, emb, femb);
  mtp_add_streams(h, femb, hc, d, stream);
}

void QwenNextCudaModel::Impl::mtp_enqueue_catch_up_row(CudaState& st) {
  int32_t* mpos = reinterpret_cast<int32_t*>(M(st, ml.pos));
  int32_t* tok = reinterpret_cast<int32_t*>(MS(ms.catch_tok));
  // Pair mtp_pos: (row mtp_pos, token mtp_pos + 1).
  mtp_ring_read(reinterpret_cast<const float*>(M(st, ml.rows)), reinterpret_cast<const int32_t*>(M(st, ml.next)),
                ml.ring, c.wide(), mpos, 0, MS(ms.row), tok, stream);
  mtp_prepare(MS(ms.row), tok);
  layer(dw.mtp->layer, ml.layer, st.mtp.as<uint8_t>(), mpos, ml.ctx);
  dc::enqueue_position_increment(mpos, stream);
}

void QwenNextCudaModel::Impl::mtp_catch_up(CudaState& st, int64_t upto) {
  const int64_t n = upto - st.mtp_pos;
  DS4_CHECK(n < ml.ring, "qwen_next cuda: MTP catch-up wants more rows than the ring keeps");
  for (int64_t i = 0; i < n; ++i)
    dc::launch_graph_step(stream, st.mtp_graph[0], opt.graphs, [&] { mtp_enqueue_catch_up_row(st); });
  if (n > 0) st.mtp_pos = upto;
}

void QwenNextCudaModel::Impl::mtp_enqueue_draft_step(CudaState& st, int k, const int32_t* tok, bool last) {
  const int64_t V = c.vocab;
  int32_t* dpos = reinterpret_cast<int32_t*>(M(st, ml.draft_pos));
  mtp_prepare(MS(ms.row), tok);  // h = S(sl.h) {hc*d}
  layer(dw.mtp->layer, ml.layer, st.mtp.as<uint8_t>(), dpos, ml.ctx);  // h: the head's pre-mixer output
  dc::enqueue_position_increment(dpos, stream);
  hyper_read(dw.mtp->mixer, S(sl.h), S(sl.mixed), nullptr);
  float* lg = MS(ms.logits) + k * V;
  gemv(dw.lm_head, S(sl.mixed), lg);
  dc::sample_reduce_f32(lg, V, 1, nullptr, reinterpret_cast<int32_t*>(MS(ms.picks)) + k * ms.pick_words, stream);
  // The head recurses on its own pre-mixer output (CPU: row.swap(next) after mtp_prepare).
  if (!last)
    DS4_CUDA_CHECK(cudaMemcpyAsync(MS(ms.row), S(sl.h), size_t(c.wide()) * sizeof(float), cudaMemcpyDeviceToDevice,
                                   stream));
}

// Step 0's input: the trunk's last row (slot pos-1, read through the trunk's device position
// counter) and the host's next token; draft_pos starts at mtp_pos.
void QwenNextCudaModel::Impl::mtp_enqueue_chain_start(CudaState& st) {
  int32_t* tok = reinterpret_cast<int32_t*>(MS(ms.tok));
  DS4_CUDA_CHECK(cudaMemcpyAsync(tok, mtp_tok_host->p, sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  DS4_CUDA_CHECK(cudaMemcpyAsync(M(st, ml.draft_pos), M(st, ml.pos), sizeof(int32_t), cudaMemcpyDeviceToDevice, stream));
  mtp_ring_read(reinterpret_cast<const float*>(M(st, ml.rows)), reinterpret_cast<const int32_t*>(M(st, ml.next)),
                ml.ring, c.wide(), reinterpret_cast<const int32_t*>(st.buf.as<uint8_t>() + lay.pos), -1, MS(ms.row),
                nullptr, stream);
}

void QwenNextCudaModel::Impl::mtp_enqueue_chain(CudaState& st, int depth) {
  mtp_enqueue_chain_start(st);
  const int32_t* picks = reinterpret_cast<const int32_t*>(MS(ms.picks));
  for (int k = 0; k < depth; ++k)  // step k > 0 embeds step k-1's argmax (word 0 of its record)
    mtp_enqueue_draft_step(st, k, k == 0 ? reinterpret_cast<const int32_t*>(MS(ms.tok)) : picks + (k - 1) * ms.pick_words,
                           k + 1 == depth);
  DS4_CUDA_CHECK(cudaMemcpyAsync(mtp_picks_host->p, picks, size_t(depth * ms.pick_words) * sizeof(int32_t),
                                 cudaMemcpyDeviceToHost, stream));
}

void QwenNextCudaModel::Impl::mtp_draft(CudaState& st, int32_t next, int depth, const DraftHead::Pick& pick,
                                        std::vector<float>* logits, std::vector<int32_t>& drafts) {
  if (!st.mtp_on || st.pos == 0) throw InputError("qwen_next: mtp_draft needs enable_mtp() and a prefill");
  if (next < 0 || next >= c.vocab) throw InputError("qwen_next: draft token id out of range");
  if (depth > kMtpMaxDepth)
    throw InputError("qwen_next cuda: draft depth " + std::to_string(depth) + " above the GPU head's maximum " +
                     std::to_string(kMtpMaxDepth));
  const int64_t V = c.vocab;
  mtp_catch_up(st, st.pos - 1);
  drafts.clear();
  if (logits) logits->assign(size_t(std::max(depth, 0)) * size_t(V), 0.f);
  if (depth <= 0) {
    DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
    return;
  }
  int32_t* tok_host = static_cast<int32_t*>(mtp_tok_host->p);
  tok_host[0] = next;
  if (!pick) {  // greedy: the whole chain on the device, one copy of the argmax records back
    dc::launch_graph_step(stream, st.mtp_graph[depth], opt.graphs, [&] { mtp_enqueue_chain(st, depth); });
    DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
    const int32_t* rec = static_cast<const int32_t*>(mtp_picks_host->p);
    for (int k = 0; k < depth; ++k) drafts.push_back(rec[k * ms.pick_words]);
  } else {  // the host picks each step's token from its row: one row copy and sync per step
    int32_t* tok = reinterpret_cast<int32_t*>(MS(ms.tok));
    float* row = static_cast<float*>(mtp_row_host->p);
    mtp_enqueue_chain_start(st);
    for (int k = 0; k < depth; ++k) {
      if (k > 0)
        DS4_CUDA_CHECK(cudaMemcpyAsync(tok + k, tok_host + k, sizeof(int32_t), cudaMemcpyHostToDevice, stream));
      mtp_enqueue_draft_step(st, k, tok + k, k + 1 == depth);
      DS4_CUDA_CHECK(cudaMemcpyAsync(row, MS(ms.logits) + k * V, size_t(V) * sizeof(float), cudaMemcpyDeviceToHost,
                                     stream));
      DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
      const int32_t t = pick(std::span<const float>(row, size_t(V)));
      if (t < 0 || t >= V) throw Error("qwen_next: draft pick returned token " + std::to_string(t));
      drafts.push_back(t);
      if (k + 1 < depth) tok_host[k + 1] = t;
    }
  }
  for (int32_t t : drafts)
    if (t < 0 || t >= V) throw Error("qwen_next cuda: draft argmax " + std::to_string(t) + " out of range");
  if (logits) {
    DS4_CUDA_CHECK(cudaMemcpyAsync(logits->data(), MS(ms.logits), size_t(depth) * size_t(V) * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream));
    DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
}

// commit_prefix (chunk.cu) after it cut the trunk back to position pos_after: the head's
// share of drop_pending_pairs (models/capture_rows.h). The ring keeps rows by position, so
// the pending rows and last_wide follow the position by themselves. A catch-up inside the
// window (forward_chunk's room runs only up to the window's first position - 1, but a draft
// on an uncommitted window would go further) is undone here.
void QwenNextCudaModel::Impl::mtp_keep_through(CudaState& st, int64_t pos_after) {
  // Rows below pos_after are in the ring as the window wrote them, and slot pos_after-1 is
  // last_wide, so only pairs the head consumed beyond the kept rows are undone: a pair q
  // needs token q+1 < pos_after. Its cache rows stay and are overwritten on re-consumption.
  if (!st.mtp_on) return;
  const int64_t keep = std::max<int64_t>(pos_after - 1, 0);
  if (st.mtp_pos <= keep) return;
  dc::enqueue_position_increment(reinterpret_cast<int32_t*>(M(st, ml.pos)), int32_t(keep - st.mtp_pos), stream);
  DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
  st.mtp_pos = keep;
}

// ---- DraftHead ----

DraftHead* QwenNextCudaModel::draft_head() { return impl_->has_mtp() ? this : nullptr; }

void QwenNextCudaModel::enable_draft(ModelState& state) const { impl_->mtp_enable(cuda_state(state)); }

void QwenNextCudaModel::draft(ModelState& state, int32_t next_token, int depth, std::vector<int32_t>& drafts) {
  impl_->mtp_draft(cuda_state(state), next_token, depth, {}, nullptr, drafts);
}

bool QwenNextCudaModel::draft_picked(ModelState& state, int32_t next_token, int depth, const Pick& pick,
                                     std::vector<int32_t>& drafts) {
  impl_->mtp_draft(cuda_state(state), next_token, depth, pick, nullptr, drafts);
  return true;
}

void QwenNextCudaModel::mtp_draft(ModelState& state, int32_t next_token, int depth, std::vector<float>& logits,
                                  std::vector<int32_t>& drafts, const Pick& pick) {
  impl_->mtp_draft(cuda_state(state), next_token, depth, pick, &logits, drafts);
}

}  // namespace ds4::qwen_next
