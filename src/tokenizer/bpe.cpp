#include "tokenizer/bpe.h"

#include <queue>

namespace ds4::tok {

void MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, Entry{});
  mask_ = cap - 1;
  count_ = 0;
}

void MergeTable::insert(TokenId a, TokenId b, int32_t rank, TokenId merged) {
  if (slots_.empty() || (count_ + 1) * 2 > slots_.size()) {
    std::vector<Entry> old;
    old.swap(slots_);
    reserve(std::max<size_t>(count_ + 1, old.size()));
    for (const auto& e : old)
      if (e.key != kEmpty) insert(static_cast<TokenId>(e.key >> 32), static_cast<TokenId>(e.key), e.rank, e.merged);
  }
  uint64_t key = pack(a, b);
  size_t i = hash(key) & mask_;
  while (slots_[i].key != kEmpty) {
    if (slots_[i].key == key) return;
    i = (i + 1) & mask_;
  }
  slots_[i] = Entry{key, rank, merged};
  ++count_;
}

namespace {

// Short words (the common case: one pre-token is a few characters) are merged by repeated
// scans; it beats a heap below a few dozen symbols.
void merge_short(const MergeTable& m, std::vector<TokenId>& w) {
  while (w.size() > 1) {
    int32_t best_rank = INT32_MAX;
    size_t best = 0;
    TokenId best_id = 0;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      const auto* e = m.find(w[i], w[i + 1]);
      if (e && e->rank < best_rank) {
        best_rank = e->rank;
        best = i;
        best_id = e->merged;
      }
    }
    if (best_rank == INT32_MAX) return;
    w[best] = best_id;
    w.erase(w.begin() + static_cast<long>(best) + 1);
  }
}

// Long words (whitespace / digit runs, long identifiers): linked list + min-heap of
// candidate pairs keyed by (rank, position); stale heap entries are skipped on pop.
void merge_long(const MergeTable& m, std::vector<TokenId>& w) {
  size_t n = w.size();
  std::vector<int> prev(n), next(n);
  std::vector<char> alive(n, 1);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int>(i + 1) : -1;
  }
  struct Cand {
    int32_t rank;
    int pos;
    TokenId left, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    if (const auto* e = m.find(w[i], w[next[i]])) heap.push({e->rank, i, w[i], w[next[i]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int>(i));
  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    int i = c.pos;
    if (!alive[i] || next[i] < 0 || w[i] != c.left || w[next[i]] != c.right) continue;
    int j = next[i];
    w[i] = m.find(c.left, c.right)->merged;
    alive[j] = 0;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  size_t k = 0;
  for (int i = 0; i >= 0; i = next[i]) w[k++] = w[i];
  w.resize(k);
}

}  // namespace

void bpe_merge(const MergeTable& merges, std::vector<TokenId>& word, std::vector<TokenId>& out) {
  if (word.size() <= 48)
    merge_short(merges, word);
  else
    merge_long(merges, word);
  out.insert(out.end(), word.begin(), word.end());
}

}  // namespace ds4::tok
