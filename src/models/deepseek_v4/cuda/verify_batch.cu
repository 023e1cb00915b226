// verify_batch of the CUDA DeepSeek V4 model (continuous batching with speculative decoding,
// issue #24): the verify windows of N states (1..chunk_rows tokens each, each state at its own
// position) as one forward over the stacked rows, each weight read once for all of them. The
// rows run the chunk's code (chunk.cu) with one row group per state: its stateful kernels (KV
// ring, compressor / indexer lanes with their undo logs in the state's cap_buf, indexer top-k,
// attention, the MTP head's layer and the DSpark rings) launch once per window exactly as that
// window's own verify chunk launches them, and every product is exact (never the tensor-core
// GEMMs), so window i's rows and records equal verify_capture(*states[i], windows[i]) bit for
// bit (test_deepseek_v4_verify_batch_cuda). A forward is captured as a CUDA graph per
// composition: the states' serials, their window lengths, draft-head flags and records buffers
// (models/cuda_batching.h verify_graph_key; backend/cuda/batch_graphs.h).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "models/cuda_batching.h"
#include "models/deepseek_v4/cuda/model_impl.h"
#include "models/draft_head.h"

namespace ds4::deepseek_v4 {

void DeepseekV4CudaModel::Impl::run_verify(std::span<const RowGroup> groups) {
  // The graph also holds the draft heads the groups record (enqueue_chunk: the MTP head's layer
  // and rows, DSpark's taps and rings; restore or enable_draft flips them on the same serial),
  // and a recording group's records buffer (the undo logs and head rows go to cap_buf), as GLM's.
  std::vector<uint64_t> key = verify_graph_key<CudaState>(groups, [](const CudaState& s) {
    return VerifyGraphDeps{uint64_t(s.mtp_on) | uint64_t(s.dspark_on) << 1, s.cap_buf.get(), uint64_t(s.cap_buf.bytes())};
  });
  const ScopedFlag capture(capturing);  // windows of one row record nothing (attention_rows, mtp_record_rows)
  run_groups(groups, std::move(key));
}

bool DeepseekV4CudaModel::verify_batch(std::span<ModelState* const> states,
                                       std::span<const std::span<const int32_t>> windows, std::vector<float>& logits) {
  Impl& m = *impl_;
  VerifyHooks<CudaState> v;
  v.can_batch = !m.observer && m.cl.rows >= 2;  // verify_capture's limits (spec_commit.cu): no layer observer
  // One chunk per window, within the capture records (cap.rows: the load's verify rows).
  v.most_window = std::min<int64_t>(m.opt.chunk_rows, m.cap.rows);
  v.most_states = size_t(m.opt.batch_rows), v.most_rows = m.cl.rows;
  v.arm = [&](CudaState& st, int64_t) {
    if (st.cap_rows > 0) throw Error("deepseek_v4: verify_batch over an uncommitted captured window");
    if (!st.cap_buf.get()) st.cap_buf = dc::DeviceBuffer(m.cap.bytes, "deepseek_v4 verify capture (per state)");
  };
  // The head a state records (MTP, DSpark, none) is fixed per forward (enqueue_chunk).
  v.kind = [](const CudaState& s) { return s.mtp_on ? 1 : s.dspark_on ? 2 : 0; };
  v.run = [&](std::span<const RowGroup> groups) { m.run_verify(groups); };
  v.keep = [](CudaState& st, std::span<const int32_t> w) { st.cap_rows = int64_t(w.size()); };
  return cuda_verify_batch(*this, "deepseek_v4: verify_batch", states, windows, logits, m.batch_hooks(), v);
}

}  // namespace ds4::deepseek_v4
