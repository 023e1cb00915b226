// decode_batch of the CUDA DeepSeek V4 model (continuous batching, issue #24): one token for
// each of N states as one forward over N rows. The rows reuse the chunk's code (chunk.cu) with
// one state per row instead of one state for all rows:
//   - every weight is read once for the N rows: projections, o LoRA, shared expert, HC mixes,
//     HC head and lm_head are gemv_rows over the rows (groups of kGemvMaxRows), the routed
//     experts grouped per expert across the sequences (moe_group) as in a chunk;
//   - what carries state (KV row into the window ring, compressor / indexer lanes, indexer
//     top-k, attention) is one launch per sequence, on its own CudaState buffer and position
//     counter: exactly the decode step's launch, on row i's copy of the step scratch.
// So row i equals forward(*states[i], {tokens[i]}, kLast) bit for bit whatever else is in the
// batch (test_deepseek_v4_batch_cuda): the batch never takes the tensor-core GEMMs (they
// change the summation order with the row count). The forward is captured as a CUDA graph per
// batch composition (the states' serials in row order); the running batch changes only when a
// sequence joins or leaves, so the graphs of the last calls are kept (least recently used out).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>

#include "backend/cuda/graph_step.h"
#include "core/error.h"
#include "models/deepseek_v4/cuda/model_impl.h"

namespace ds4::deepseek_v4 {

namespace {

// Batch graphs kept at least; a call of G forwards keeps 2 G (its own and the previous call's
// compositions). A graph holds its states' addresses, and a freed state's serial never comes
// back, so a stale graph is only host memory until it is the least recently used.
constexpr size_t kMinBatchGraphs = 8;

// The exact path for every product of a batch (MatmulWorkspace::min_rows 0: never the GEMMs),
// restored after it.
class ExactProducts {
 public:
  ExactProducts(dc::MatmulWorkspace& a, dc::MatmulWorkspace& b) : a_(a), b_(b), ma_(a.min_rows()), mb_(b.min_rows()) {
    a_.set_min_rows(0);
    b_.set_min_rows(0);
  }
  ~ExactProducts() {
    a_.set_min_rows(ma_);
    b_.set_min_rows(mb_);
  }

 private:
  dc::MatmulWorkspace &a_, &b_;
  int64_t ma_, mb_;
};

}  // namespace

void DeepseekV4CudaModel::Impl::enqueue_batch(std::span<CudaState* const> sts) {
  mark("start");
  rows_in();
  for (int64_t l = 0; l < c.layers; ++l) layer_rows(sts, l);
  head_rows(0, rows);
  for (CudaState* s : sts) dc::enqueue_position_increment(reinterpret_cast<int32_t*>(s->buf.as<uint8_t>() + lay.pos), stream);
}

void DeepseekV4CudaModel::Impl::drop_batch_graphs() {
  for (auto& [key, g] : batch_graph)
    if (g.exec) cudaGraphExecDestroy(g.exec);
  batch_graph.clear();
}

void DeepseekV4CudaModel::Impl::run_batch(std::span<CudaState* const> sts) {
  rows = int64_t(sts.size());
  ExactProducts exact(*mm_main, *mm_side);
  auto enqueue = [&] { enqueue_batch(sts); };
  if (!opt.graphs) {
    cudaGraphExec_t direct = nullptr;
    dc::run_graph_step(stream, direct, false, enqueue);
    collect_profile();
    return;
  }
  std::vector<uint64_t> key;
  for (const CudaState* s : sts) key.push_back(s->serial);
  auto it = batch_graph.find(key);
  if (it == batch_graph.end()) {
    while (batch_graph.size() >= batch_graph_cap) {  // the least recently used out
      auto lru = batch_graph.begin();
      for (auto j = batch_graph.begin(); j != batch_graph.end(); ++j)
        if (j->second.used < lru->second.used) lru = j;
      if (lru->second.exec) cudaGraphExecDestroy(lru->second.exec);
      batch_graph.erase(lru);
    }
    it = batch_graph.emplace(std::move(key), BatchGraph{}).first;
  }
  it->second.used = batch_calls;
  dc::run_graph_step(stream, it->second.exec, true, enqueue);
  collect_profile();
}

void DeepseekV4CudaModel::decode_batch(std::span<ModelState* const> states, std::span<const int32_t> tokens,
                                       std::vector<float>& logits) {
  Impl& m = *impl_;
  const Config& c = m.c;
  const size_t n = states.size(), V = size_t(c.vocab);
  if (n != tokens.size())
    throw Error("decode_batch: " + std::to_string(n) + " states for " + std::to_string(tokens.size()) + " tokens");
  // Everything checked before anything runs.
  std::vector<CudaState*> sts;
  std::set<const CudaState*> seen;
  for (size_t i = 0; i < n; ++i) {
    CudaState& st = cuda_state(*states[i]);
    if (!seen.insert(&st).second) throw InputError("deepseek_v4: decode_batch with the same state twice");
    if (tokens[i] < 0 || tokens[i] >= c.vocab)
      throw InputError("deepseek_v4: token id " + std::to_string(tokens[i]) + " outside [0, " +
                       std::to_string(c.vocab) + ")");
    if (st.pos + 1 > m.info.max_context)
      throw InputError("deepseek_v4: context " + std::to_string(st.pos + 1) + " exceeds max_context " +
                       std::to_string(m.info.max_context));
    sts.push_back(&st);
  }
  logits.resize(n * V);
  std::vector<float> row;
  auto alone = [&](size_t i) {  // the single-sequence decode step
    forward(*states[i], tokens.subspan(i, 1), Logits::kLast, row);
    std::copy(row.begin(), row.end(), logits.begin() + long(i * V));
  };
  // Rows that run alone: a draft head's states record their head rows in every forward (mtp.cu,
  // dspark.cu: per state, not batched yet), a state with a pending captured window keeps it
  // for its commit; with the layer observer every step is one token.
  std::vector<size_t> together;
  for (size_t i = 0; i < n; ++i) {
    const CudaState& st = *sts[i];
    if (st.mtp_on || st.dspark_on || st.cap_rows > 0 || m.observer || m.cl.rows < 2) alone(i);
    else together.push_back(i);
  }
  // Batches of up to batch_rows, within the chunk scratch's rows (fixed at load, after memory
  // admission).
  uint8_t* in = static_cast<uint8_t*>(m.in_host->p);
  const float* out = static_cast<const float*>(m.logits_host->p);
  const size_t B = size_t(std::min<int64_t>(m.opt.batch_rows, m.cl.rows));
  ++m.batch_calls;
  m.batch_graph_cap = std::max(kMinBatchGraphs, 2 * ((together.size() + B - 1) / B));
  for (size_t b0 = 0; b0 < together.size(); b0 += B) {
    const size_t b1 = std::min(together.size(), b0 + B);
    if (b1 - b0 == 1) {  // one sequence: the decode step as it runs alone (same speed)
      alone(together[b0]);
      continue;
    }
    std::vector<CudaState*> batch;
    for (size_t k = b0; k < b1; ++k) {
      const size_t i = together[k];
      uint8_t* r = in + (k - b0) * m.sl.in_bytes;  // pinned row: [token id | embedding row]
      std::memcpy(r + m.sl.tok, &tokens[i], sizeof(int32_t));
      dequantize_row(m.w.embed, tokens[i], reinterpret_cast<float*>(r + m.sl.emb));
      batch.push_back(sts[i]);
    }
    m.run_batch(batch);
    for (size_t k = b0; k < b1; ++k) {
      sts[together[k]]->pos += 1;
      std::copy_n(out + (k - b0) * V, V, logits.begin() + long(together[k] * V));
    }
  }
}

}  // namespace ds4::deepseek_v4
