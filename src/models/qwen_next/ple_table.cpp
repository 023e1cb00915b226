#include "models/qwen_next/ple_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/error.h"
#include "formats/safetensors.h"

namespace ds4::qwen_next {
namespace {

class MemoryTable : public PleTable {
 public:
  explicit MemoryTable(const WeightMatrix& w) : w_(w) {}
  int64_t rows() const override { return w_.rows; }
  int64_t cols() const override { return w_.cols; }
  void gather(const int64_t* ids, int64_t n, float* out) override {
    for (int64_t i = 0; i < n; ++i) dequantize_row(w_, ids[i], out + i * w_.cols);
  }

 private:
  WeightMatrix w_;
};

class ShardedTable : public PleTable {
 public:
  explicit ShardedTable(std::vector<WeightMatrix> shards) : shards_(std::move(shards)) {
    int64_t r = 0;
    for (const WeightMatrix& w : shards_) {
      if (w.cols != shards_[0].cols) throw InputError("PLE table shards differ in width");
      ends_.push_back(r += w.rows);
    }
  }
  int64_t rows() const override { return ends_.empty() ? 0 : ends_.back(); }
  int64_t cols() const override { return shards_.empty() ? 0 : shards_[0].cols; }
  void gather(const int64_t* ids, int64_t n, float* out) override {
    for (int64_t i = 0; i < n; ++i) {
      const size_t s = size_t(std::upper_bound(ends_.begin(), ends_.end(), ids[i]) - ends_.begin());
      if (ids[i] < 0 || s >= shards_.size()) throw Error("PLE n-gram row " + std::to_string(ids[i]) + " out of range");
      const int64_t first = s == 0 ? 0 : ends_[s - 1];
      dequantize_row(shards_[s], ids[i] - first, out + i * cols());
    }
  }

 private:
  std::vector<WeightMatrix> shards_;
  std::vector<int64_t> ends_;  // cumulative row counts
};

class SidecarTable : public PleTable {
 public:
  SidecarTable(const std::string& file, const std::string& tensor, size_t cache_bytes, int readers)
      : path_(file), pool_(std::max(1, readers)) {
    // The header (and a mapping that is never touched for data) tells type, shape and offset.
    SafetensorsFile st = read_safetensors(MappedFile::open(file));
    auto it = std::find_if(st.tensors.begin(), st.tensors.end(), [&](const TensorInfo& t) { return t.name == tensor; });
    if (it == st.tensors.end()) throw InputError(file + ": PLE sidecar has no tensor " + tensor);
    if (it->shape.size() != 2) throw InputError(file + ": " + tensor + ": PLE table must be 2-D");
    if (it->type != DType::F32 && it->type != DType::F16 && it->type != DType::BF16)
      throw InputError(file + ": " + tensor + ": PLE table must be F32/F16/BF16");
    view_.type = it->type;
    view_.rows = it->shape[0];
    view_.cols = it->shape[1];
    row_bytes_ = size_t(view_.row_stride_bytes());
    offset_ = size_t(static_cast<const uint8_t*>(it->data) - st.file->data());
    capacity_ = std::max<size_t>(1, cache_bytes / (size_t(view_.cols) * sizeof(float)));
    fd_ = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw InputError(file + ": cannot open PLE sidecar: " + std::strerror(errno));
  }
  ~SidecarTable() override {
    if (fd_ >= 0) ::close(fd_);
  }
  int64_t rows() const override { return view_.rows; }
  int64_t cols() const override { return view_.cols; }
  PleTableStats stats() const override {
    std::lock_guard<std::mutex> l(mu_);
    return stats_;
  }

  void gather(const int64_t* ids, int64_t n, float* out) override {
    const int64_t C = view_.cols;
    std::vector<int64_t> miss;  // distinct rows to read
    {
      std::lock_guard<std::mutex> l(mu_);
      for (int64_t i = 0; i < n; ++i) {
        auto it = map_.find(ids[i]);
        if (it == map_.end()) {
          if (std::find(miss.begin(), miss.end(), ids[i]) == miss.end()) miss.push_back(ids[i]);
          continue;
        }
        lru_.splice(lru_.begin(), lru_, it->second);  // most recently used first
        std::copy_n(it->second->second.data(), C, out + i * C);
        ++stats_.hits;
      }
    }
    if (miss.empty()) return;
    // Misses: one pread per row, spread over the reader threads (SSD queue depth).
    std::vector<std::vector<float>> got(miss.size(), std::vector<float>(size_t(C)));
    std::atomic<int64_t> failed{-1};  // workers must not throw: report after the join
    pool_.parallel_for(int64_t(miss.size()), [&](int64_t b, int64_t e) {
      std::vector<uint8_t> raw(row_bytes_);
      for (int64_t k = b; k < e; ++k)
        if (!read_row(miss[size_t(k)], raw.data(), got[size_t(k)].data())) failed = miss[size_t(k)];
    });
    if (failed >= 0) throw Error(path_ + ": PLE sidecar read failed at row " + std::to_string(failed.load()));
    std::lock_guard<std::mutex> l(mu_);
    for (size_t k = 0; k < miss.size(); ++k) {
      int64_t uses = 0;
      for (int64_t i = 0; i < n; ++i)
        if (ids[i] == miss[k]) std::copy_n(got[k].data(), C, out + i * C), ++uses;
      ++stats_.misses;
      stats_.hits += uses - 1;  // repeats within one call are served by the same read
      stats_.bytes_read += int64_t(row_bytes_);
      if (map_.count(miss[k])) continue;  // another caller inserted it meanwhile
      lru_.emplace_front(miss[k], std::move(got[k]));
      map_[miss[k]] = lru_.begin();
      if (lru_.size() > capacity_) {
        map_.erase(lru_.back().first);
        lru_.pop_back();
        ++stats_.evictions;
      }
    }
  }

 private:
  bool read_row(int64_t r, uint8_t* raw, float* out) const {
    if (r < 0 || r >= view_.rows) return false;
    size_t done = 0;
    while (done < row_bytes_) {
      const ssize_t k = ::pread(fd_, raw + done, row_bytes_ - done, off_t(offset_ + size_t(r) * row_bytes_ + done));
      if (k <= 0) return false;
      done += size_t(k);
    }
    WeightMatrix one = view_;
    one.rows = 1;
    one.data = raw;
    dequantize_row(one, 0, out);
    return true;
  }

  std::string path_;
  WeightMatrix view_;
  size_t row_bytes_ = 0, offset_ = 0, capacity_ = 0;
  int fd_ = -1;
  ThreadPool pool_;
  mutable std::mutex mu_;
  std::list<std::pair<int64_t, std::vector<float>>> lru_;
  std::unordered_map<int64_t, std::list<std::pair<int64_t, std::vector<float>>>::iterator> map_;
  PleTableStats stats_;
};

}  // namespace

std::unique_ptr<PleTable> sharded_table(std::vector<WeightMatrix> shards) {
  if (shards.empty()) throw InputError("PLE table: no shards");
  return std::make_unique<ShardedTable>(std::move(shards));
}

std::unique_ptr<PleTable> memory_table(const WeightMatrix& w) { return std::make_unique<MemoryTable>(w); }

std::unique_ptr<PleTable> sidecar_table(const std::string& file, const std::string& tensor, size_t cache_bytes,
                                        int readers) {
  return std::make_unique<SidecarTable>(file, tensor, cache_bytes, readers);
}

}  // namespace ds4::qwen_next
