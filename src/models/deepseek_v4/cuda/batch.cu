// decode_batch of the CUDA DeepSeek V4 model (continuous batching, issue #24): one token for
// each of N states as one forward over N rows. The rows reuse the chunk's code (chunk.cu) with
// one state per row instead of one state for all rows:
//   - every weight is read once for the N rows: projections, o LoRA, shared expert, HC mixes,
//     HC head and lm_head are gemv_rows over the rows (groups of kGemvMaxRows), the routed
//     experts grouped per expert across the sequences (moe_group) as in a chunk;
//   - what carries state (KV row into the window ring, compressor / indexer lanes, indexer
//     top-k, attention, the position counters) is one launch for all the sequences (Rows::shift,
//     kernels.h): row i's blocks run exactly the decode step's code on its own CudaState buffer
//     and position counter, on row i's copy of the step scratch (before 2026-12-05 a launch per
//     sequence: 16 streams paid 16 latency-bound launches per stateful op and layer).
// So row i equals forward(*states[i], {tokens[i]}, kLast) bit for bit whatever else is in the
// batch (test_deepseek_v4_batch_cuda): the batch never takes the tensor-core GEMMs (they
// change the summation order with the row count). The forward is captured as a CUDA graph per
// batch composition (backend/cuda/batch_graphs.h); models/cuda_batching.h splits the rows.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/batch_graphs.h"
#include "backend/cuda/graph_step.h"
#include "core/error.h"
#include "models/cuda_batching.h"
#include "models/deepseek_v4/cuda/model_impl.h"

namespace ds4::deepseek_v4 {

void DeepseekV4CudaModel::Impl::run_groups(std::span<const RowGroup> groups, std::vector<uint64_t> key) {
  rows = 0;
  for (const RowGroup& g : groups) rows += g.n;
  dc::ExactProducts exact(mm_main.get(), mm_side.get());
  auto enqueue = [&] { enqueue_chunk(groups, Logits::kAll); };
  cudaGraphExec_t direct = nullptr;
  dc::run_graph_step(stream, opt.graphs ? batch_graphs.slot(std::move(key)) : direct, opt.graphs, enqueue);
  collect_profile();
}

void DeepseekV4CudaModel::Impl::run_batch(std::span<CudaState* const> sts) {
  const std::vector<RowGroup> groups = one_row_groups(sts);
  write_row_shifts<CudaState>(sts, in_host->p, sl.in_bytes, sl.shift);  // Rows::shift (chunk.cu seq_rows)
  std::vector<uint64_t> key = batch_graph_key<CudaState>(groups, false);
  batch_cand.key(key);  // candidates mode: another graph (its head ends in the candidates)
  run_groups(groups, std::move(key));
}

BatchHooks<CudaState> DeepseekV4CudaModel::Impl::batch_hooks() {
  BatchHooks<CudaState> h;
  h.state = &cuda_state;
  h.begin = [this](size_t forwards) { batch_graphs.begin_call(forwards); };
  h.input = [this](CudaState&, int32_t tok, int64_t row) {  // pinned row: [token id | embedding row]
    uint8_t* r = static_cast<uint8_t*>(in_host->p) + size_t(row) * sl.in_bytes;
    std::memcpy(r + sl.tok, &tok, sizeof(int32_t));
    dequantize_row(w.embed, tok, reinterpret_cast<float*>(r + sl.emb));
  };
  h.logits = static_cast<const float*>(logits_host->p);
  return h;
}

// decode_batch's hooks: rows that run alone, the batched forward, and the rows per forward.
namespace {
size_t decode_hooks(DeepseekV4CudaModel::Impl& m, BatchHooks<CudaState>& h) {
  h = m.batch_hooks();
  // Rows that run alone: a draft head's states record their head rows in every forward
  // (mtp.cu, dspark.cu: per state, not batched yet), a state with a pending captured window
  // keeps it for its commit; with the layer observer every step is one token.
  h.single = [&m](const CudaState& s) {
    return s.mtp_on || s.dspark_on || s.cap_rows > 0 || m.observer || m.cl.rows < 2;
  };
  h.run = [&m](std::span<CudaState* const> sts) { m.run_batch(sts); };
  // Forwards of up to batch_rows, within the chunk scratch's rows (fixed at load, after memory
  // admission).
  return size_t(std::min<int64_t>(m.opt.batch_rows, m.cl.rows));
}
}  // namespace

void DeepseekV4CudaModel::decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                                       std::vector<float>& logits) {
  BatchHooks<CudaState> h;
  const size_t most = decode_hooks(*impl_, h);
  decode_batch_rows(*this, "deepseek_v4", states, tokens, most, logits, h);
}

void DeepseekV4CudaModel::decode_batch_candidates(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                                                  std::span<const CandidateRequest> reqs,
                                                  std::vector<SampleCandidates>& out, std::vector<float>& logits,
                                                  const NeedFullRow& need_full) {
  Impl& m = *impl_;
  BatchHooks<CudaState> h;
  const size_t most = decode_hooks(m, h);
  cuda_decode_batch_candidates(*this, "deepseek_v4", states, tokens, reqs, out, logits, need_full, most, std::move(h),
                               m.batch_cand, [&m] { m.batch_graphs.clear(); }, m.R(0, m.sl.logits), size_t(m.rs()),
                               m.stream);
}

}  // namespace ds4::deepseek_v4
