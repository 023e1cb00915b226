// verify_batch of the CUDA Qwen3.8 Flash Next model (continuous batching with speculative
// decoding, issue #24): the verify windows of N states (1..min(capture_rows, chunk_rows)
// tokens each, each state at its own position) as one forward over the stacked rows, each
// weight read once for all of them. The rows run the chunk's code (chunk.cu) with one row
// group per window (SeqGroup): its stateful launches (PLE and GDN conv, GDN recurrence, QSA
// append / pool / select / attend) take the window's rows exactly as that window's own verify
// chunk does, a window of more than one row records its conv histories and recurrent states in
// its state's cap buffer, every product is exact (never the tensor-core GEMMs), and each
// drafting state's MTP ring gets room before the forward and the window's rows after it (as
// forward_chunk does). So window i's rows and records equal verify_capture(*states[i],
// windows[i]) bit for bit (test_qwen_next_verify_batch_cuda). A forward is captured as a CUDA
// graph per composition: the states' serials and their window lengths
// (backend/cuda/batch_graphs.h, shared with decode_batch's graphs).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "models/cuda_batching.h"
#include "models/draft_head.h"
#include "models/qwen_next/cuda/model_impl.h"

namespace ds4::qwen_next {

namespace {
// Between a verify key's serials and its window lengths: no decode_batch key (serials only,
// never this value) equals a verify key in the shared graph cache.
constexpr uint64_t kVerifyKeyMark = ~uint64_t(0);
}  // namespace

void QwenNextCudaModel::Impl::run_verify(std::span<const SeqGroup> groups) {
  std::vector<uint64_t> key;
  for (const SeqGroup& g : groups) key.push_back(g.st->serial);
  key.push_back(kVerifyKeyMark);
  for (const SeqGroup& g : groups) key.push_back(uint64_t(g.n));
  for (const SeqGroup& g : groups)  // a catch-up runs on the step and head scratch, never the rows'
    if (g.st->mtp_on) mtp_room(*g.st, g.st->pos, g.n);
  run_groups(groups, std::move(key));
  for (const SeqGroup& g : groups)
    if (g.st->mtp_on) mtp_push(*g.st, g.st->pos, g.st->cap_tokens, R(g.r0, sl.h), rs());
}

bool QwenNextCudaModel::verify_batch(std::span<ModelState* const> states,
                                     std::span<const std::span<const int32_t>> windows, std::vector<float>& logits) {
  Impl& m = *impl_;
  // verify_capture's own limits (chunk.cu): one recorded chunk per window, and an exact one (a
  // window of gemm_rows rows or more would take the tensor cores alone, never in a batch).
  const int64_t cap_rows = m.capture_limit();
  bool batched = m.cl.rows >= 2;
  for (const auto& w : windows) {
    const int64_t n = int64_t(w.size());
    batched = batched && n <= std::max<int64_t>(cap_rows, 1) && (m.opt.gemm_rows <= 0 || n < m.opt.gemm_rows);
  }
  if (!batched) return Model::verify_batch(states, windows, logits);
  return captured_verify_batch(
      *this, states, windows, logits, "qwen_next: verify_batch",
      [&](ModelState& s) {
        CudaState& st = cuda_state(s);
        if (!st.cap_tokens.empty()) throw Error("qwen_next: verify_batch over an uncommitted captured window");
        if (m.capl.rows == 0) m.capl = capture_layout(m.c, cap_rows);  // chunk_rows, capture_rows fixed at load
        if (st.cap.bytes() == 0)  // sized once: captured graphs hold its address
          st.cap = dc::DeviceBuffer(m.capl.bytes, "qwen_next verify capture records (per state)");
        st.cap_ple_ctx0 = st.ple_ctx;  // the PLE contexts before the window (commit_prefix rebuilds from them)
      },
      [&] {
        // The window's tokens are its pending capture from here (run_verify's MTP push reads
        // them); end() keeps them, abort() drops them.
        for (size_t i = 0; i < states.size(); ++i)
          cuda_state(*states[i]).cap_tokens.assign(windows[i].begin(), windows[i].end());
        verify_batch_rows<CudaState>(
            *this, states, windows, {}, size_t(m.opt.batch_rows), m.cl.rows, logits, m.batch_hooks(),
            [&](std::span<CudaState* const> sts, std::span<const int64_t> lens) {
              std::vector<SeqGroup> groups;
              int64_t r0 = 0;
              for (size_t i = 0; i < sts.size(); ++i) groups.push_back(SeqGroup{sts[i], r0, lens[i], lens[i] > 1}), r0 += lens[i];
              m.run_verify(groups);
            });
        // The last pushes are still in flight, and clone() copies on the legacy stream.
        DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
      },
      [&](ModelState&, std::span<const int32_t>) {},  // cap_tokens / cap_ple_ctx0 set: pending for commit_prefix
      [&](ModelState& s) {
        CudaState& st = cuda_state(s);
        if (!st.cap_ple_ctx0.empty()) st.ple_ctx = st.cap_ple_ctx0;  // inputs may have advanced it
        st.cap_tokens.clear();
        st.cap_ple_ctx0.clear();
      });
}

}  // namespace ds4::qwen_next
