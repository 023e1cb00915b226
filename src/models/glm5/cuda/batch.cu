// decode_batch of the CUDA GLM 5.x model (continuous batching, issue #24): one token for each
// of N states as one forward over N rows. The rows reuse the chunk's code (chunk.cu) with one
// state per row instead of one state for all rows:
//   - every weight is read once for the N rows: HC mixes, KDA, MLA and DSA indexer
//     projections, the dense MLP / shared expert and lm_head are gemv_rows over the rows, the
//     routed experts grouped per expert across the sequences (moe_group) as in a chunk;
//   - what carries state (KDA conv state and delta-rule recurrence, the MLA latent append,
//     the indexer's key append and pool selection, the attention) is one launch per sequence,
//     on its own CudaState buffer, at its own position (cl.positions[i] = that state's
//     counter): exactly the decode step's launch, on row i's copy of the step scratch.
// So row i equals forward(*states[i], {tokens[i]}, kLast) bit for bit whatever else is in the
// batch (test_glm5_batch_cuda): a batch is never a tensor-core chunk (tc stays false: every
// product on the exact path). The forward is captured as a CUDA graph per batch composition
// (backend/cuda/batch_graphs.h); models/cuda_batching.h splits the rows.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/batch_graphs.h"
#include "models/cuda_batching.h"
#include "models/glm5/cuda/model_impl.h"

namespace ds4::glm5 {

void Glm5CudaModel::Impl::enqueue_batch(std::span<CudaState* const> sts) {
  cur_off = sl.x, alt_off = sl.x2;
  mark("input copy");
  // pinned row i -> row i's scratch; row i's position is its state's counter
  DS4_CUDA_CHECK(cudaMemcpy2DAsync(R(0, sl.x), cl.row_bytes, in_host->p, sl.in_bytes, sl.in_bytes, size_t(rows),
                                   cudaMemcpyHostToDevice, stream));
  int32_t* positions = C<int32_t>(cl.positions);
  std::vector<uint8_t*> sbs;
  for (size_t i = 0; i < sts.size(); ++i) {
    sbs.push_back(sts[i]->buf.as<uint8_t>());
    DS4_CUDA_CHECK(cudaMemcpyAsync(positions + i, sbs.back() + lay.pos, sizeof(int32_t), cudaMemcpyDeviceToDevice,
                                   stream));
  }
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) layer_rows(dw.layers[size_t(l)], lay.layers[size_t(l)], sbs, nullptr);
  mark("head (norm, lm_head, logits copy)");
  head_all_rows();
  for (uint8_t* sb : sbs) enqueue_advance(reinterpret_cast<int32_t*>(sb + lay.pos), 1);
}

void Glm5CudaModel::Impl::run_batch(std::span<CudaState* const> sts) {
  rows = int64_t(sts.size());
  tc = false;  // every product exact (run_chunk sets tc for a prefill chunk only, and resets it)
  std::vector<uint64_t> key;
  for (const CudaState* s : sts) key.push_back(s->serial);
  cudaGraphExec_t none = nullptr;
  cudaGraphExec_t& exec = opt.graphs ? batch_graphs.slot(std::move(key)) : none;
  replay(exec, false, [&] { enqueue_batch(sts); });
}

void Glm5CudaModel::decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                                 std::vector<float>& logits) {
  Impl& m = *impl_;
  BatchHooks<CudaState> h;
  h.state = &cuda_state;
  // The MTP head's queue takes every row of its state (pushed by the trunk forward, not
  // batched yet); a pending captured window stays for its commit; layer_outputs() taps single
  // steps.
  h.single = [&](const CudaState& s) { return s.mtp_on || s.cap_n > 0 || m.tap || m.cl.rows < 2; };
  h.begin = [&](size_t forwards) { m.batch_graphs.begin_call(forwards); };
  h.input = [&](CudaState&, int32_t tok, int64_t row) { m.input_row(tok, row); };
  h.run = [&](std::span<CudaState* const> sts) { m.run_batch(sts); };
  h.logits = static_cast<const float*>(m.logits_host->p);
  decode_batch_rows(*this, "glm5", states, tokens, size_t(std::min<int64_t>(m.opt.batch_rows, m.cl.rows)), logits, h);
}

}  // namespace ds4::glm5
