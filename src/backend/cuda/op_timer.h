#pragma once
// Where a decode step or a multi-row forward spends its GPU time (benches' per-op tables,
// issues #22 / #23; off by default): an event after each named op on one stream, the time
// between consecutive events summed per name. Only for direct launches (events inside a
// captured graph are not timed) and one stream (an op on a second stream would be
// misattributed). Events serialize nothing but the host's launch loop: the table is GPU time
// plus launch gaps, for where the time goes; the graph replay's tok/s is the speed.
// The Qwen and DeepSeek CUDA models mark their ops with it.
#include <cuda_runtime.h>

#include <map>
#include <string>
#include <vector>

#include "backend/cuda/check.h"

namespace ds4::cuda {

class OpTimer {
 public:
  OpTimer() = default;
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;
  ~OpTimer() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  bool on = false;
  // Records an event after everything enqueued on `s` so far; the time since the previous
  // mark goes to `name` (the first mark of a forward opens it: name it "start").
  void mark(cudaStream_t s, const char* name) {
    if (!on) return;
    if (n_ == events_.size()) {
      events_.emplace_back();
      DS4_CUDA_CHECK(cudaEventCreate(&events_.back()));
      names_.emplace_back();
    }
    DS4_CUDA_CHECK(cudaEventRecord(events_[n_], s));
    names_[n_++] = name;
  }
  // After the marked work: adds the intervals to ms() and forgets the marks.
  void collect() {
    if (n_ >= 2) {
      DS4_CUDA_CHECK(cudaEventSynchronize(events_[n_ - 1]));
      for (size_t i = 1; i < n_; ++i) {
        float t = 0;
        DS4_CUDA_CHECK(cudaEventElapsedTime(&t, events_[i - 1], events_[i]));
        ms_[names_[i]] += t;
      }
    }
    n_ = 0;
  }
  // Time measured elsewhere (a model's own section events) into the same table.
  void add(const std::string& name, double ms) { ms_[name] += ms; }
  const std::map<std::string, double>& ms() const { return ms_; }
  void reset() { ms_.clear(), n_ = 0; }

 private:
  std::vector<cudaEvent_t> events_;
  std::vector<const char*> names_;
  size_t n_ = 0;
  std::map<std::string, double> ms_;
};

}  // namespace ds4::cuda
