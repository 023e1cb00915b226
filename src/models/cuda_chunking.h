#pragma once
// For the CUDA models' forward(): a span of tokens run as chunks of up to `rows` rows (each
// model's chunk path), the logits the caller asked for gathered from the chunks' results.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "models/model.h"

namespace ds4 {

// For t0 = 0, rows, 2*rows, ...: chunk(t0, T, cm) runs tokens [t0, t0 + T) (T <= rows) with
// the chunk's logits mode cm (kAll for every chunk of a kAll forward; kLast for the last
// chunk of a kLast one; else kNone), leaving its logits in `src` (the model's pinned host
// rows, {T, vocab} for kAll, {vocab} for kLast). They are copied out right after: kAll rows
// to logits[t0 * vocab ..] (sized n * vocab by the caller), kLast's row as the whole result.
template <class Chunk>
void forward_in_chunks(int64_t n, int64_t rows, Logits mode, int64_t vocab, const float* src,
                       std::vector<float>& logits, Chunk&& chunk) {
  for (int64_t t0 = 0; t0 < n; t0 += rows) {
    const int64_t T = std::min(rows, n - t0);
    const bool last = t0 + T == n;
    const Logits cm = mode == Logits::kAll ? Logits::kAll : mode == Logits::kLast && last ? Logits::kLast : Logits::kNone;
    chunk(t0, T, cm);
    if (cm == Logits::kAll) std::copy_n(src, T * vocab, logits.data() + t0 * vocab);
    else if (cm == Logits::kLast) logits.assign(src, src + vocab);
  }
}

// The rows of a CUDA model's chunk scratch: `want` (its prefill chunk size), halved, never below
// `base` (the verify / decode-batch rows), while bytes_of(rows) + fixed_bytes exceeds free_bytes;
// `base` when want <= base. The models pass the device memory free after their weights and what
// else must fit beside the scratch (one state, the GEMMs' weight tiles, admission's headroom).
template <class BytesOf>
int64_t rows_that_fit(int64_t base, int64_t want, size_t free_bytes, size_t fixed_bytes, BytesOf&& bytes_of) {
  int64_t rows = want > base ? want : base;
  while (rows > base && size_t(bytes_of(rows)) + fixed_bytes > free_bytes) rows /= 2;
  return rows > base ? rows : base;
}

}  // namespace ds4
