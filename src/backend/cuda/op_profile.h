#pragma once
// GPU time per named op of a decode step (issue #23's per-op tables): with direct launches,
// mark(stream, name) after each op records an event; collect() waits for the last one and adds
// the time between consecutive marks to the later mark's name. Events serialize nothing but
// the host's launch loop, so the table is the GPU time of the ops plus launch gaps; use it
// for where the time goes, and the graph replay's tok/s for the speed.
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

#include "backend/cuda/check.h"

namespace ds4::cuda {

class OpProfile {
 public:
  OpProfile() = default;
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;
  ~OpProfile() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  // `name` must outlive collect() (string literals).
  void mark(cudaStream_t s, const char* name) {
    if (n_ == events_.size()) {
      events_.emplace_back();
      DS4_CUDA_CHECK(cudaEventCreate(&events_.back()));
      names_.push_back(nullptr);
    }
    DS4_CUDA_CHECK(cudaEventRecord(events_[n_], s));
    names_[n_++] = name;
  }
  void collect() {
    if (n_ >= 2) {
      DS4_CUDA_CHECK(cudaEventSynchronize(events_[n_ - 1]));
      for (size_t i = 1; i < n_; ++i) {
        float ms = 0;
        DS4_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i - 1], events_[i]));
        ms_[names_[i]] += ms;
      }
    }
    n_ = 0;
  }
  const std::map<std::string, double>& ms() const { return ms_; }
  void reset() { ms_.clear(), n_ = 0; }

 private:
  std::vector<cudaEvent_t> events_;
  std::vector<const char*> names_;
  size_t n_ = 0;
  std::map<std::string, double> ms_;
};

}  // namespace ds4::cuda
