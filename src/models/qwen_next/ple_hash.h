#pragma once
// PLE n-gram hashing (HF Qwen4ExpTextNGramEmbedding): the per-layer multipliers, the prime
// vocabulary of every hash head, and the row ids of one position's n-grams.
#include <cstdint>

#include "models/qwen_next/config.h"
#include "models/qwen_next/weights.h"

namespace ds4::qwen_next {

// Fills w.multipliers {ngram}, w.head_vocab / w.head_offset {(ngram-1)*heads_per_ngram}.
void ple_hash_constants(const Config& c, int64_t ple_index, PleWeights& w);

// Row ids (into the table) of the n-gram heads for the token at window[ngram-1], where
// window = the ngram tokens ending at it (older first; EOS where history is missing).
// A shifted token counts only when no EOS lies between it and the current token
// (inclusive of itself, exclusive of the current): n-grams never cross a document end.
// ids: {(ngram-1) * heads_per_ngram}.
void ple_ngram_ids(const Config& c, const PleWeights& w, const int32_t* window, int64_t* ids);

}  // namespace ds4::qwen_next
