// verify_batch of the CUDA GLM 5.x model (continuous batching with speculative decoding, issue
// #24): the verify windows of N states (1..chunk_rows tokens each, each state at its own
// position) as one forward over the stacked rows, each weight read once for all of them. The
// rows run decode_batch's forward (batch.cu enqueue_groups, the chunk code of chunk.cu) with
// one row group per window: its stateful kernels (KDA conv state and delta-rule recurrence,
// MLA latent and indexer appends, pool selection, attention) launch once per window on that
// state's buffer exactly as the window's own verify chunk launches them, a window of 2+ rows
// records its KDA layers in its state's capture buffer (spec_commit.cu), a drafting state's
// rows go to its MTP queue, and every product is exact (a verify chunk never takes the tensor
// cores), so window i's rows and records equal verify_capture(*states[i], windows[i]) bit for
// bit (test_glm5_verify_batch_cuda). A forward is captured as a CUDA graph per composition.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "models/cuda_batching.h"
#include "models/glm5/cuda/model_impl.h"

namespace ds4::glm5 {

void Glm5CudaModel::Impl::run_verify(std::span<const RowGroup> groups) {
  // The graph also holds whether each group pushes MTP rows, and a recording group's records
  // buffer (cap_reserve may replace it) with the layout of its capacity (cap_rows).
  std::vector<uint64_t> key = verify_graph_key<CudaState>(groups, [](const CudaState& s) {
    return VerifyGraphDeps{uint64_t(s.mtp_on), s.cap.get(), uint64_t(s.cap_rows)};
  });
  const ScopedFlag capture(capturing);  // groups of one row record nothing (trunk_rows)
  run_groups(groups, std::move(key));
}

bool Glm5CudaModel::verify_batch(std::span<ModelState* const> states, std::span<const std::span<const int32_t>> windows,
                                 std::vector<float>& logits) {
  Impl& m = *impl_;
  VerifyHooks<CudaState> v;
  v.can_batch = !m.tap;  // layer_outputs() taps single steps
  v.most_window = m.opt.chunk_rows;  // verify_capture's one chunk (its records grow to the window)
  v.most_states = size_t(m.opt.batch_rows), v.most_rows = m.cl.rows;
  // As verify_capture and forward() before a verify chunk: records for the window's rows, the
  // MTP queue caught up when the window would overflow it.
  v.arm = [&](CudaState& st, int64_t rows) {
    if (st.cap_n > 0) throw Error("glm5: verify_batch over an uncommitted captured window");
    if (rows > 1) m.cap_reserve(st, rows);
    m.mtp_before_forward(st, rows);
  };
  v.run = [&](std::span<const RowGroup> groups) { m.run_verify(groups); };
  // verify_capture's bookkeeping after its forward (st.pos is past the window already).
  v.keep = [&](CudaState& st, std::span<const int32_t> w) {
    const int64_t n = int64_t(w.size());
    st.cap_n = n, st.cap_pos0 = st.pos - n;
    m.mtp_after_forward(st, w, st.cap_pos0);
  };
  return cuda_verify_batch(*this, "glm5: verify_batch", states, windows, logits, m.batch_hooks(), v);
}

}  // namespace ds4::glm5
