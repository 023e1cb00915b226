// Captured-prefix commit of the CUDA DeepSeek V4 model (CPU: spec_commit.cpp; the semantics
// of models/draft_head.h). verify_capture runs the verify window as one chunk (chunk.cu) that
// also records what a row overwrites and cannot be recomputed cheaply:
//   window ring   nothing: it holds window + kRingSlack rows, so the (at most 15) dropped
//                 rows only overwrite positions no later query attends to, and a dropped
//                 row's own slot is rewritten by the next forward before anything reads it;
//   lanes         compressor / indexer lanes log each overwritten open-window slot and each
//                 replaced Ca half (LaneArgs::undo_*); commit undoes rows n-1 .. keep, newest
//                 first (compressor_undo, one launch for every lane). Entries need nothing:
//                 entry e is only read at positions after its window closes, which rewrites it;
//   HC            per token: nothing carries over;
//   MTP head      its ring as the trunk's; its output rows {n, hc, hidden} are kept, and row
//                 keep - 1 becomes mtp_y;
//   DSpark rings  nothing, as the window ring: position-indexed with kRingSlack spare slots,
//                 so the kept prefix's last `window` positions are all still there (the CPU's
//                 tail of [ring before ; new rows 0..keep-1]), and the row count is
//                 min(pos, window) from the position set below.
// commit_prefix then sets the position (host and device counter) to p0 + keep. The records
// live in the state (CudaState::cap_buf, allocated at its first verify_capture), so several
// states can each hold a pending window at once (sessions speculating side by side, issue #24).
#include <cuda_runtime.h>

#include "core/error.h"
#include "models/capture_rows.h"
#include "models/deepseek_v4/cuda/model_impl.h"

namespace ds4::deepseek_v4 {

void DeepseekV4CudaModel::Impl::lane_undo_args(LaneArgs& a, int lane, const CudaState& st) const {
  const LaneUndo& u = cap.lanes[size_t(lane)];
  uint8_t* b = st.cap_buf.as<uint8_t>();
  a.undo_kv = reinterpret_cast<float*>(b + u.undo_kv);
  a.undo_gate = reinterpret_cast<float*>(b + u.undo_gate);
  if (u.overlap) {
    a.undo_prev_kv = reinterpret_cast<float*>(b + u.undo_prev_kv);
    a.undo_prev_gate = reinterpret_cast<float*>(b + u.undo_prev_gate);
  }
}

bool DeepseekV4CudaModel::verify_capture(ModelState& trial, std::span<const int32_t> tokens, std::vector<float>& logits) {
  Impl& m = *impl_;
  CudaState& st = cuda_state(trial);
  if (!m.dw.has_mtp && !m.dw.has_dspark) return false;
  if (st.cap_rows > 0) throw Error("deepseek_v4: verify_capture over an uncommitted captured window");
  const int64_t n = int64_t(tokens.size());
  // One chunk only (a window of several chunks could be cut back too, but the undo log is
  // sized for one: cap.rows, the load's verify rows, which set_options' chunk_rows may not
  // exceed either); the layer observer forces one-token steps.
  if (n > 1 && (m.opt.chunk_rows < 2 || n > m.opt.chunk_rows || n > m.cap.rows || m.observer)) return false;
  if (!st.cap_buf.get()) st.cap_buf = dc::DeviceBuffer(m.cap.bytes, "deepseek_v4 verify capture (per state)");
  m.capturing = n > 1;  // one row: keep = 1 = n, nothing to cut back
  try {
    forward(trial, tokens, Logits::kAll, logits);
  } catch (...) {
    m.capturing = false;
    throw;
  }
  m.capturing = false;
  st.cap_rows = n;
  return true;
}

void DeepseekV4CudaModel::commit_prefix(ModelState& trial, int64_t keep) {
  Impl& m = *impl_;
  CudaState& st = cuda_state(trial);
  const int64_t n = st.cap_rows;
  check_commit_keep("deepseek_v4", n, keep);
  st.cap_rows = 0;
  if (keep == n) return;  // the state after the window is the state after its last row
  const int64_t p0 = st.pos - n;
  uint8_t* sb = st.buf.as<uint8_t>();
  compressor_undo(m.cap_lanes.as<LaneUndo>(), int64_t(m.cap.lanes.size()), sb, st.cap_buf.as<uint8_t>(), p0, n, keep,
                  m.stream);
  if (st.mtp_on) {
    const size_t W = size_t(m.c.hc * m.c.hidden) * 4;
    DS4_CUDA_CHECK(cudaMemcpyAsync(sb + m.lay.mtp_y, st.cap_buf.as<uint8_t>() + m.cap.mtp_y + size_t(keep - 1) * W, W,
                                   cudaMemcpyDeviceToDevice, m.stream));
  }
  int32_t* word = static_cast<int32_t*>(m.draft_host->p) + kDraftPosWord;
  *word = int32_t(p0 + keep);
  DS4_CUDA_CHECK(cudaMemcpyAsync(sb + m.lay.pos, word, 4, cudaMemcpyHostToDevice, m.stream));
  DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  st.pos = p0 + keep;
}

}  // namespace ds4::deepseek_v4
