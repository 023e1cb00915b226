#include "core/paged_rows.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"

namespace ds4 {
namespace {
std::atomic<size_t> g_live_block_bytes{0};
}  // namespace

PagedRows::Block::Block(size_t n) : data(new float[n]), floats(n) {
  g_live_block_bytes.fetch_add(n * sizeof(float), std::memory_order_relaxed);
}

PagedRows::Block::~Block() { g_live_block_bytes.fetch_sub(floats * sizeof(float), std::memory_order_relaxed); }

size_t PagedRows::live_block_bytes() { return g_live_block_bytes.load(std::memory_order_relaxed); }

PagedRows::PagedRows(int64_t width, int64_t block_rows) : width_(width), block_rows_(block_rows) {
  DS4_CHECK(width >= 0 && block_rows > 0, "paged rows: width " + std::to_string(width) + ", block_rows " +
                                              std::to_string(block_rows));
}

bool PagedRows::copy_blocks() {
  static const bool on = [] {
    const char* v = std::getenv("DS4_PAGED_COPY");
    return v && std::string(v) == "1";
  }();
  return on;
}

PagedRows::PagedRows(const PagedRows& other)
    : width_(other.width_), block_rows_(other.block_rows_), rows_(other.rows_), blocks_(other.blocks_) {
  if (!copy_blocks()) return;
  for (auto& b : blocks_) {  // the contiguous caches' behaviour: every row copied
    auto own = std::make_shared<Block>(b->floats);
    std::memcpy(own->data.get(), b->data.get(), b->floats * sizeof(float));
    b = std::move(own);
  }
}

PagedRows& PagedRows::operator=(const PagedRows& other) {
  if (this != &other) *this = PagedRows(other);
  return *this;
}

size_t PagedRows::proportional_bytes() const {
  size_t b = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    // the rows of block i this copy holds (the last block may be partly filled)
    const int64_t rows = std::min(block_rows_, rows_ - int64_t(i) * block_rows_);
    const size_t holders = size_t(std::max<long>(1, blocks_[i].use_count()));
    b += size_t(rows * width_) * sizeof(float) / holders;
  }
  return b;
}

size_t PagedRows::shared_block_count() const {
  return size_t(std::count_if(blocks_.begin(), blocks_.end(), [](const auto& b) { return b.use_count() > 1; }));
}

float* PagedRows::writable_tail() {
  std::shared_ptr<Block>& tail = blocks_.back();
  // use_count() > 1: another copy (a cached prefix, a snapshot) still reads this block. Only
  // the rows below rows_ are ours to keep; the writer gets a private copy of them. A count
  // that drops concurrently to 1 only costs a needless copy; it cannot rise, since a new
  // holder can only come from copying this object, which its owner does not do while writing.
  if (tail.use_count() > 1) {
    auto own = std::make_shared<Block>(tail->floats);
    const int64_t used = rows_ - int64_t(blocks_.size() - 1) * block_rows_;
    std::memcpy(own->data.get(), tail->data.get(), size_t(used * width_) * sizeof(float));
    tail = std::move(own);
  }
  return tail->data.get();
}

void PagedRows::append(const float* src, int64_t n) {
  DS4_CHECK(n >= 0 && (n == 0 || width_ > 0), "paged rows: append of " + std::to_string(n) +
                                                  " rows to a cache of width " + std::to_string(width_));
  while (n > 0) {
    const int64_t in_tail = rows_ % block_rows_;
    float* dst = nullptr;
    if (in_tail == 0) {  // every block is full (or none): a fresh one
      blocks_.push_back(std::make_shared<Block>(size_t(block_rows_ * width_)));
      dst = blocks_.back()->data.get();
    } else {
      dst = writable_tail() + in_tail * width_;
    }
    const int64_t take = std::min(n, block_rows_ - in_tail);
    std::memcpy(dst, src, size_t(take * width_) * sizeof(float));
    src += take * width_;
    rows_ += take;
    n -= take;
  }
}

void PagedRows::truncate(int64_t n) {
  DS4_CHECK(n >= 0 && n <= rows_, "paged rows: truncate to " + std::to_string(n) + " of " + std::to_string(rows_) +
                                      " rows");
  rows_ = n;
  // Whole blocks past the last kept row go; a kept partial block stays shared until written.
  blocks_.resize(size_t((n + block_rows_ - 1) / block_rows_));
}

void PagedRows::assign(const float* src, int64_t n) {
  blocks_.clear();
  rows_ = 0;
  append(src, n);
}

std::vector<float> PagedRows::flatten(int64_t r0, int64_t r1) const {
  DS4_CHECK(0 <= r0 && r0 <= r1 && r1 <= rows_, "paged rows: flatten [" + std::to_string(r0) + ", " +
                                                    std::to_string(r1) + ") of " + std::to_string(rows_) + " rows");
  std::vector<float> out(size_t((r1 - r0) * width_));
  for_each_run(r0, r1, [&](int64_t first, int64_t count, const float* rows) {
    std::memcpy(out.data() + (first - r0) * width_, rows, size_t(count * width_) * sizeof(float));
  });
  return out;
}

}  // namespace ds4
