#pragma once
// BPE merges over token ids: merge table (pair -> rank, merged id) and the merge loop.
#include <cstdint>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace ds4::tok {

// Open-addressing hash map (id_a, id_b) -> {rank, merged id}. Built once at load; lookups
// are the hot path of encode, so no std::unordered_map (node chasing) here.
class MergeTable {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    TokenId merged = 0;
  };
  static constexpr uint64_t kEmpty = ~0ull;

  void reserve(size_t n);
  // Keeps the first (lowest-rank) entry when a pair repeats, like HF.
  void insert(TokenId a, TokenId b, int32_t rank, TokenId merged);
  const Entry* find(TokenId a, TokenId b) const {
    uint64_t key = pack(a, b);
    size_t i = hash(key) & mask_;
    while (true) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }
  size_t size() const { return count_; }

 private:
  static uint64_t pack(TokenId a, TokenId b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
  }
  std::vector<Entry> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

// Applies merges to `word` (initial symbol ids, one per byte-level character) in rank order,
// leftmost first among equal ranks (what HF's BPE::merge_word does), and appends the
// resulting ids to out.
void bpe_merge(const MergeTable& merges, std::vector<TokenId>& word, std::vector<TokenId>& out);

}  // namespace ds4::tok
