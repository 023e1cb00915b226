#pragma once
// Where PLE n-gram rows come from. The real table is ~51B parameters (320M rows x 160), so
// MTPLX ships it as an SSD sidecar (ngram-table.safetensors) and gathers rows on demand.
// Two sources with identical results:
//   - memory:  a WeightMatrix view (mmap'd checkpoint; the OS page cache does the rest);
//   - sidecar: rows read with pread() by a pool of parallel readers into a bounded LRU of
//              hot rows (budget in bytes, LoadOptions::ple_cache_bytes).
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "core/weight.h"

namespace ds4::qwen_next {

struct PleTableStats {
  int64_t hits = 0, misses = 0, evictions = 0, bytes_read = 0;
};

class PleTable {
 public:
  virtual ~PleTable() = default;
  virtual int64_t rows() const = 0;
  virtual int64_t cols() const = 0;
  // out {n, cols}: row ids[i] of the table. Thread-safe.
  virtual void gather(const int64_t* ids, int64_t n, float* out) = 0;
  virtual PleTableStats stats() const { return {}; }
};

std::unique_ptr<PleTable> memory_table(const WeightMatrix& w);

// The table stored as row shards in order (HF save_pretrained writes
// `ngram_embedding.shard_<i>.weight`, split_ngram_parts of them): read in place, no copy.
std::unique_ptr<PleTable> sharded_table(std::vector<WeightMatrix> shards);

// `file`: a safetensors file; `tensor`: the table's name in it ({rows, cols}, F32/F16/BF16).
std::unique_ptr<PleTable> sidecar_table(const std::string& file, const std::string& tensor, size_t cache_bytes,
                                        int readers);

}  // namespace ds4::qwen_next
