// decode_batch of the CUDA GLM 5.x model (continuous batching, issue #24): one token for each
// of N states as one forward over N rows. The rows reuse the chunk's code (chunk.cu) with one
// state per row instead of one state for all rows:
//   - every weight is read once for the N rows: HC mixes, KDA, MLA and DSA indexer
//     projections, the dense MLP / shared expert and lm_head are gemv_rows over the rows, the
//     routed experts grouped per expert across the sequences (moe_group) as in a chunk;
//   - what carries state (KDA conv state and delta-rule recurrence, the MLA latent append,
//     the indexer's key append and pool selection, the attention, the position counters) is
//     one launch over all the sequences (kernels.h Rows::seq): row i's blocks run exactly the
//     decode step's code on its own CudaState buffer at its own position (cl.positions[i] =
//     that state's counter), on row i's copy of the step scratch (before 2026-12-05, and with
//     CudaModelOptions::seq_launches off, a launch per sequence).
// So row i equals forward(*states[i], {tokens[i]}, kLast) bit for bit whatever else is in the
// batch (test_glm5_batch_cuda): a batch is never a tensor-core chunk (tc stays false: every
// product on the exact path). The forward is captured as a CUDA graph per batch composition
// (backend/cuda/batch_graphs.h); models/cuda_batching.h splits the rows. verify_batch
// (verify_batch.cu) runs the same forward (enqueue_groups) with one row group per verify window.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/batch_graphs.h"
#include "models/cuda_batching.h"
#include "models/glm5/cuda/model_impl.h"

namespace ds4::glm5 {

void Glm5CudaModel::Impl::enqueue_groups(std::span<const RowGroup> groups) {
  cur_off = sl.x, alt_off = sl.x2;
  mark("input copy");
  // pinned row r -> row r's scratch; group g's rows at its state's counter + 0, 1, ..
  DS4_CUDA_CHECK(cudaMemcpy2DAsync(R(0, sl.x), cl.row_bytes, in_host->p, sl.in_bytes, sl.in_bytes, size_t(rows),
                                   cudaMemcpyHostToDevice, stream));
  enqueue_group_positions(groups, false);
  trunk_rows(groups);
  mark("head (norm, lm_head, logits copy)");
  head_all_rows();
  // The MTP head queues the rows of a drafting state (as enqueue_chunk; mtp_push reads *pos).
  for (const RowGroup& g : groups)
    if (g.st->mtp_on) mtp_push(*g.st, R(g.r0, sl.hfin), g.n, rs());
  enqueue_group_positions(groups, true);
}

void Glm5CudaModel::Impl::run_groups(std::span<const RowGroup> groups, std::vector<uint64_t> key) {
  rows = 0;
  for (const RowGroup& g : groups) rows += g.n;
  tc = false;  // every product exact (run_chunk sets tc for a prefill chunk only, and resets it)
  cudaGraphExec_t none = nullptr;
  // The per-op table (set_profiling): direct launches with an event at each section start
  // (mark), the sections added to the table as profile_chunk reads them.
  const bool timed = prof.on;
  cudaGraphExec_t& exec = opt.graphs && !timed ? batch_graphs.slot(std::move(key)) : none;
  Marks sections;
  if (timed) marks = &sections;
  try {
    replay(exec, timed, [&] {
      enqueue_groups(groups);
      mark(nullptr);  // the end of the last section
    });
  } catch (...) {
    marks = nullptr;
    throw;
  }
  marks = nullptr;
  if (!timed) return;
  DS4_CUDA_CHECK(cudaStreamSynchronize(stream));
  sections.each([&](const char* name, double ms) { prof.add(name, ms); });
}

void Glm5CudaModel::Impl::run_batch(std::span<CudaState* const> sts) {
  const std::vector<RowGroup> groups = one_row_groups(sts);
  write_row_shifts<CudaState>(sts, in_host->p, sl.in_bytes, sl.shift);  // Rows::seq (chunk.cu seq_rows)
  batch_shifts = true;
  try {
    std::vector<uint64_t> key = batch_graph_key<CudaState>(groups, false);
    batch_cand.key(key);  // candidates mode: another graph (its head ends in the candidates)
    run_groups(groups, std::move(key));
  } catch (...) {
    batch_shifts = false;
    throw;
  }
  batch_shifts = false;
}

BatchHooks<CudaState> Glm5CudaModel::Impl::batch_hooks() {
  BatchHooks<CudaState> h;
  h.state = &cuda_state;
  h.begin = [this](size_t forwards) { batch_graphs.begin_call(forwards); };
  h.input = [this](CudaState&, int32_t tok, int64_t row) { input_row(tok, row); };
  h.logits = static_cast<const float*>(logits_host->p);
  return h;
}

// decode_batch's hooks: rows that run alone, the batched forward, and the rows per forward.
namespace {
size_t decode_hooks(Glm5CudaModel::Impl& m, BatchHooks<CudaState>& h) {
  h = m.batch_hooks();
  // The MTP head's queue takes every row of its state (pushed by the trunk forward, not
  // batched yet); a pending captured window stays for its commit; layer_outputs() taps single
  // steps.
  h.single = [&m](const CudaState& s) { return s.mtp_on || s.cap_n > 0 || m.tap || m.cl.rows < 2; };
  h.run = [&m](std::span<CudaState* const> sts) { m.run_batch(sts); };
  return size_t(std::min<int64_t>(m.opt.batch_rows, m.cl.rows));
}
}  // namespace

void Glm5CudaModel::decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                                 std::vector<float>& logits) {
  BatchHooks<CudaState> h;
  const size_t most = decode_hooks(*impl_, h);
  decode_batch_rows(*this, "glm5", states, tokens, most, logits, h);
}

void Glm5CudaModel::decode_batch_candidates(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                                            std::span<const CandidateRequest> reqs, std::vector<SampleCandidates>& out,
                                            std::vector<float>& logits, const NeedFullRow& need_full) {
  Impl& m = *impl_;
  BatchHooks<CudaState> h;
  const size_t most = decode_hooks(m, h);
  cuda_decode_batch_candidates(*this, "glm5", states, tokens, reqs, out, logits, need_full, most, std::move(h),
                               m.batch_cand, [&m] { m.batch_graphs.clear(); }, m.R(0, m.sl.logits), size_t(m.rs()),
                               m.stream);
}

}  // namespace ds4::glm5
