// decode_batch of the CUDA Qwen3.8 Flash Next model (continuous batching, issue #24): one token
// for each of N states as one forward over N rows. The rows reuse the chunk's code (chunk.cu)
// with one state per row instead of one state for all rows:
//   - every weight is read once for the N rows: hyper-connections, GDN / QSA / PLE
//     projections, shared expert, mixer and lm_head are gemv_rows over the rows, the routed
//     experts grouped per expert across the sequences (moe_group) as in a chunk;
//   - what carries state (GDN and PLE conv states, the GDN recurrence, the QSA caches, block
//     selection and attention) is one launch per sequence, on its own CudaState buffer, at
//     its own position (cl.positions[i] = that state's counter): exactly the decode step's
//     launch, on row i's copy of the step scratch. The PLE n-gram rows are gathered on the
//     host from each state's own token context (fill_input), as for its decode step.
// So row i equals forward(*states[i], {tokens[i]}, kLast) bit for bit whatever else is in the
// batch (test_qwen_next_batch_cuda): the batch never takes the tensor cores (they change the
// summation order with the row count). The forward is captured as a CUDA graph per batch
// composition (backend/cuda/batch_graphs.h); models/cuda_batching.h splits the rows.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/batch_graphs.h"
#include "backend/cuda/graph_step.h"
#include "models/cuda_batching.h"
#include "models/qwen_next/cuda/model_impl.h"

namespace ds4::qwen_next {

void QwenNextCudaModel::Impl::enqueue_batch(std::span<CudaState* const> sts) {
  mark("start");
  // Input rows {rows, [h {hc*d} | PLE rows]}: pinned row i -> row i's scratch; row i's
  // position is its state's counter.
  DS4_CUDA_CHECK(cudaMemcpy2DAsync(R(0, sl.h), cl.row_bytes, in_host->p, sl.in_bytes, sl.in_bytes, size_t(rows),
                                   cudaMemcpyHostToDevice, stream));
  int32_t* positions = C<int32_t>(cl.positions);
  for (size_t i = 0; i < sts.size(); ++i)
    DS4_CUDA_CHECK(cudaMemcpyAsync(positions + i, sts[i]->buf.as<uint8_t>() + lay.pos, sizeof(int32_t),
                                   cudaMemcpyDeviceToDevice, stream));
  mark("input");
  layers_rows(sts, false);
  head_all_rows();
  mark("head");
  for (CudaState* s : sts)
    dc::enqueue_position_increment(reinterpret_cast<int32_t*>(s->buf.as<uint8_t>() + lay.pos), stream);
}

void QwenNextCudaModel::Impl::run_batch(std::span<CudaState* const> sts) {
  rows = int64_t(sts.size());
  dc::ExactProducts exact(mm.get());  // tensor_cores() false for the batch too (it reads mm's min_rows)
  std::vector<uint64_t> key;
  for (const CudaState* s : sts) key.push_back(s->serial);
  cudaGraphExec_t direct = nullptr;
  cudaGraphExec_t& exec = opt.graphs ? batch_graphs.slot(std::move(key)) : direct;
  dc::run_graph_step(stream, exec, opt.graphs, [&] { enqueue_batch(sts); });
  prof.collect();
}

void QwenNextCudaModel::decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                                     std::vector<float>& logits) {
  Impl& m = *impl_;
  BatchHooks<CudaState> h;
  h.state = &cuda_state;
  // The MTP head's ring takes every row of its state (mtp_room / mtp_push around each step,
  // not batched yet); a pending captured window stays for its commit.
  h.single = [&](const CudaState& s) { return s.mtp_on || !s.cap_tokens.empty() || m.cl.rows < 2; };
  h.begin = [&](size_t forwards) { m.batch_graphs.begin_call(forwards); };
  h.input = [&](CudaState& s, int32_t tok, int64_t row) { m.fill_input(s, tok, row); };
  h.run = [&](std::span<CudaState* const> sts) { m.run_batch(sts); };
  h.logits = static_cast<const float*>(m.logits_host->p);
  decode_batch_rows(*this, "qwen_next", states, tokens, size_t(std::min<int64_t>(m.opt.batch_rows, m.cl.rows)), logits,
                    h);
}

}  // namespace ds4::qwen_next
