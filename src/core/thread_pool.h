#pragma once
// A fixed pool of worker threads for data-parallel loops. parallel_for splits [0, n) into
// contiguous ranges, one per worker, and blocks until all are done. Work below `min_chunk`
// items per thread runs inline: fork/join costs more than tiny ops.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ds4 {

class ThreadPool {
 public:
  explicit ThreadPool(int threads = 0);  // 0 = hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }
  // fn(begin, end) over disjoint ranges covering [0, n).
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_chunk = 1);

 private:
  void worker_loop(int index);
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t job_n_ = 0;
  int job_parts_ = 0;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

// Runs fn over [0, n) on `pool` if given, else inline.
inline void parallel_for(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int64_t)>& fn,
                         int64_t min_chunk = 1) {
  if (pool) pool->parallel_for(n, fn, min_chunk);
  else if (n > 0) fn(0, n);
}

}  // namespace ds4
