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

void QwenNextCudaModel::Impl::enqueue_groups(std::span<const SeqGroup> groups) {
  mark("start");
  // Input rows {rows, [h {hc*d} | PLE rows]}: pinned row r -> row r's scratch; group g's
  // rows at its state's counter + 0, 1, ...
  DS4_CUDA_CHECK(cudaMemcpy2DAsync(R(0, sl.h), cl.row_bytes, in_host->p, sl.in_bytes, sl.in_bytes, size_t(rows),
                                   cudaMemcpyHostToDevice, stream));
  positions_in(groups);
  mark("input");
  layers_rows(groups);
  head_all_rows();
  mark("head");
  for (const SeqGroup& g : groups)
    dc::enqueue_position_increment(reinterpret_cast<int32_t*>(g.st->buf.as<uint8_t>() + lay.pos), int32_t(g.n), stream);
}

void QwenNextCudaModel::Impl::run_groups(std::span<const SeqGroup> groups, std::vector<uint64_t> key) {
  rows = 0;
  for (const SeqGroup& g : groups) rows += g.n;
  dc::ExactProducts exact(mm.get());  // tensor_cores() false for the batch too (it reads mm's min_rows)
  cudaGraphExec_t direct = nullptr;
  cudaGraphExec_t& exec = opt.graphs ? batch_graphs.slot(std::move(key)) : direct;
  dc::run_graph_step(stream, exec, opt.graphs, [&] { enqueue_groups(groups); });
  prof.collect();
}

void QwenNextCudaModel::Impl::run_batch(std::span<CudaState* const> sts) {
  std::vector<SeqGroup> groups;  // one row per state
  std::vector<uint64_t> key;
  for (CudaState* s : sts) {
    groups.push_back(SeqGroup{s, int64_t(groups.size()), 1, false});
    key.push_back(s->serial);
  }
  batch_cand.key(key);  // candidates mode: another graph (its head ends in the candidates)
  run_groups(groups, std::move(key));
}

BatchHooks<CudaState> QwenNextCudaModel::Impl::batch_hooks() {
  BatchHooks<CudaState> h;
  h.state = &cuda_state;
  h.begin = [this](size_t forwards) { batch_graphs.begin_call(forwards); };
  h.input = [this](CudaState& s, int32_t tok, int64_t row) { fill_input(s, tok, row); };
  h.logits = static_cast<const float*>(logits_host->p);
  return h;
}

// decode_batch's hooks: rows that run alone, the batched forward, and the rows per forward.
namespace {
size_t decode_hooks(QwenNextCudaModel::Impl& m, BatchHooks<CudaState>& h) {
  h = m.batch_hooks();
  // The MTP head's ring takes every row of its state (mtp_room / mtp_push around each step,
  // not batched yet); a pending captured window stays for its commit.
  h.single = [&m](const CudaState& s) { return s.mtp_on || !s.cap_tokens.empty() || m.cl.rows < 2; };
  h.run = [&m](std::span<CudaState* const> sts) { m.run_batch(sts); };
  return size_t(std::min<int64_t>(m.opt.batch_rows, m.cl.rows));
}
}  // namespace

void QwenNextCudaModel::decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                                     std::vector<float>& logits) {
  BatchHooks<CudaState> h;
  const size_t most = decode_hooks(*impl_, h);
  decode_batch_rows(*this, "qwen_next", states, tokens, most, logits, h);
}

void QwenNextCudaModel::decode_batch_candidates(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                                                std::span<const CandidateRequest> reqs,
                                                std::vector<SampleCandidates>& out, std::vector<float>& logits,
                                                const NeedFullRow& need_full) {
  Impl& m = *impl_;
  BatchHooks<CudaState> h;
  const size_t most = decode_hooks(m, h);
  cuda_decode_batch_candidates(*this, "qwen_next", states, tokens, reqs, out, logits, need_full, most, std::move(h),
                               m.batch_cand, [&m] { m.batch_graphs.clear(); }, m.R(0, m.sl.logits), size_t(m.rs()),
                               m.stream);
}

}  // namespace ds4::qwen_next
