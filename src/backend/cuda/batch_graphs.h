#pragma once
// The CUDA graphs of the CUDA models' decode_batch (continuous batching, issue #24): one per
// batch composition, keyed by the states' serials in row order. A batched forward holds its
// states' buffer addresses, so it replays only for the same states in the same rows; the
// running batch changes only when a sequence joins or leaves, so the graphs of the last calls
// are kept and the least recently used goes first. Shared by the three CUDA models.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <vector>

#include "backend/cuda/matmul_rows.h"

namespace ds4::cuda {

// A state's serial: unique per state object (clones included) and never reused, unlike its
// address (a freed state's buffer may come back at the same address for another state).
inline uint64_t next_state_serial() {
  static std::atomic<uint64_t> n{0};
  return ++n;
}

class BatchGraphs {
 public:
  // Graphs kept at least; a call of F forwards keeps 2 F (its own and the previous call's
  // compositions). A stale graph (a freed state's) is only host and graph memory until it is
  // the least recently used.
  static constexpr size_t kMinKept = 8;

  BatchGraphs() = default;
  BatchGraphs(const BatchGraphs&) = delete;
  BatchGraphs& operator=(const BatchGraphs&) = delete;
  ~BatchGraphs() { clear(); }

  // A decode_batch call that runs `forwards` batched forwards starts.
  void begin_call(size_t forwards) {
    ++calls_;
    cap_ = std::max(kMinKept, 2 * forwards);
  }
  // The graph slot of a composition (nullptr until captured: run_graph_step fills it), marked
  // used by this call; past the cap the least recently used graph is destroyed first.
  cudaGraphExec_t& slot(std::vector<uint64_t> key) {
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
      while (!graphs_.empty() && graphs_.size() >= cap_) {
        auto lru = graphs_.begin();
        for (auto j = graphs_.begin(); j != graphs_.end(); ++j)
          if (j->second.used < lru->second.used) lru = j;
        if (lru->second.exec) cudaGraphExecDestroy(lru->second.exec);
        graphs_.erase(lru);
      }
      it = graphs_.emplace(std::move(key), Entry{}).first;
    }
    it->second.used = calls_;
    return it->second.exec;
  }
  size_t size() const { return graphs_.size(); }
  void clear() {
    for (auto& [key, e] : graphs_)
      if (e.exec) cudaGraphExecDestroy(e.exec);
    graphs_.clear();
  }

 private:
  struct Entry {
    cudaGraphExec_t exec = nullptr;
    uint64_t used = 0;  // the begin_call count of the last call that replayed it
  };
  std::map<std::vector<uint64_t>, Entry> graphs_;
  uint64_t calls_ = 0;
  size_t cap_ = kMinKept;
};

// The exact path for every product of a batched forward (MatmulWorkspace::min_rows 0: never
// the tensor-core GEMMs, which change the summation order with the row count), restored
// after it: row i of a batch then equals its sequence's decode step bit for bit.
class ExactProducts {
 public:
  explicit ExactProducts(MatmulWorkspace* a, MatmulWorkspace* b = nullptr) : ws_{a, b} {
    for (int k = 0; k < 2; ++k)
      if (ws_[k]) was_[k] = ws_[k]->min_rows(), ws_[k]->set_min_rows(0);
  }
  ExactProducts(const ExactProducts&) = delete;
  ExactProducts& operator=(const ExactProducts&) = delete;
  ~ExactProducts() {
    for (int k = 0; k < 2; ++k)
      if (ws_[k]) ws_[k]->set_min_rows(was_[k]);
  }

 private:
  MatmulWorkspace* ws_[2];
  int64_t was_[2] = {0, 0};
};

}  // namespace ds4::cuda
