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
  const size_t V = size_t(m.c.vocab);
  // Everything checked before anything runs.
  check_decode_batch("qwen_next", states, tokens, m.c.vocab, m.info.max_context);
  std::vector<CudaState*> sts;
  for (ModelState* s : states) sts.push_back(&cuda_state(*s));
  std::vector<float> row;
  decode_in_forwards(
      states.size(), size_t(std::min<int64_t>(m.opt.batch_rows, m.cl.rows)), m.c.vocab, logits,
      // The MTP head's ring takes every row of its state (mtp_room / mtp_push around each
      // step, not batched yet); a pending captured window stays for its commit.
      [&](size_t i) { return sts[i]->mtp_on || !sts[i]->cap_tokens.empty() || m.cl.rows < 2; },
      [&](size_t i) {  // the single-sequence decode step
        forward(*states[i], tokens.subspan(i, 1), Logits::kLast, row);
        std::copy(row.begin(), row.end(), logits.begin() + long(i * V));
      },
      [&](size_t forwards) { m.batch_graphs.begin_call(forwards); },
      [&](std::span<const size_t> rows) -> const float* {
        std::vector<CudaState*> batch;
        for (size_t k = 0; k < rows.size(); ++k) {
          m.fill_input(*sts[rows[k]], tokens[rows[k]], int64_t(k));
          batch.push_back(sts[rows[k]]);
        }
        m.run_batch(batch);
        for (CudaState* s : batch) s->pos += 1;
        return static_cast<const float*>(m.logits_host->p);
      });
}

}  // namespace ds4::qwen_next
