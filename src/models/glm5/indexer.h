#pragma once
// DSA indexer of GLM 5.x with k-pool compression (HF Glm5NextTextIndexer).
// Keys are scored per pool of `index_kpool` consecutive positions (a learned softmax-weighted
// average of the pool's indexer keys); a query keeps the best index_topk / index_kpool
// complete pools plus the incomplete tail pool as raw positions. While a query sees no more
// complete pools than that budget every visible position is kept: the dense/sparse switch
// (first sparse position = index_topk + index_kpool - 1 with the tail rule).
#include <cstdint>
#include <span>
#include <vector>

#include "models/glm5/config.h"
#include "models/glm5/state.h"
#include "models/glm5/weights.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::glm5 {

// Per query row: the key positions it attends to, ascending.
struct Selection {
  int64_t width = 0;             // max entries per row = index_topk + index_kpool - 1
  std::vector<int32_t> idx;      // {rows, width}
  std::vector<int32_t> count;    // {rows}
};

// Appends n rows to the indexer cache in `st` and selects keys for queries at positions
// pos0 .. pos0+n-1. x {n, hidden} (input-normed), q_resid {n, q_lora}.
void indexer_select(const IndexerWeights& w, const Config& c, const float* x, const float* q_resid, int64_t n,
                    int64_t pos0, MlaState& st, Selection& sel, ThreadPool* pool);

// Several sequences in one pass (batched decode): sequence i owns the next seqs[i].n rows of
// x and q_resid, its cache and its selection. The projections run once over all rows; the
// cache append, pooling and key choice per sequence.
struct IndexerSeq {
  MlaState* st;
  Selection* sel;
  int64_t pos0;
  int64_t n;
};
void indexer_select_seqs(const IndexerWeights& w, const Config& c, const float* x, const float* q_resid,
                         std::span<const IndexerSeq> seqs, ThreadPool* pool);

}  // namespace ds4::glm5
