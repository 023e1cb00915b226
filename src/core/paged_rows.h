#pragma once
// A per-position cache (KV rows, MLA latents, indexer keys, compressed entries) stored in
// fixed-size blocks of rows that copies share (issue #24, paged memory).
//
// Why blocks: a model state is cloned for the prefix cache, snapshots and speculative trials.
// With one contiguous vector every clone copied the whole history; here a copy takes a
// reference to each block (the block table) and costs O(rows / block_rows) pointers. A block
// is written only while it is its holder's partly filled last block; if another copy still
// references it then, the writer copies it first (copy on write), so a copy never sees the
// other's later rows. Full blocks are never written again: a shared prefix stays shared.
//
// Rows never straddle blocks, so row(r) is one contiguous row and readers (attention,
// indexers) are unchanged apart from taking rows through row(r).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ds4 {

class PagedRows {
 public:
  // 64 positions per block: small enough that a state's last, partly filled block wastes
  // little (at most 63 rows per cache), large enough that a 32K-token cache is 512 pointers.
  static constexpr int64_t kBlockRows = 64;

  PagedRows() = default;
  explicit PagedRows(int64_t width, int64_t block_rows = kBlockRows);
  // A copy shares the blocks, unless copy_blocks() is on (then it copies them, as the
  // contiguous caches of before did: the A side of bench_shared_prefix).
  PagedRows(const PagedRows& other);
  PagedRows& operator=(const PagedRows& other);
  PagedRows(PagedRows&&) noexcept = default;
  PagedRows& operator=(PagedRows&&) noexcept = default;

  // DS4_PAGED_COPY=1 in the environment: copies copy every block (a measurement switch, read
  // once; results are the same bit for bit, only memory differs).
  static bool copy_blocks();

  int64_t width() const { return width_; }
  int64_t rows() const { return rows_; }
  int64_t block_rows() const { return block_rows_; }
  bool empty() const { return rows_ == 0; }

  // Row r, 0 <= r < rows(): width() contiguous floats.
  const float* row(int64_t r) const { return blocks_[size_t(r / block_rows_)]->data.get() + (r % block_rows_) * width_; }

  // Rows [r0, r1) as contiguous runs, one per block they touch: f(first_row, count, rows)
  // with rows the count * width() floats of rows first_row .. first_row + count - 1.
  template <class F>
  void for_each_run(int64_t r0, int64_t r1, F&& f) const {
    for (int64_t r = r0; r < r1;) {
      const int64_t take = r1 - r < block_rows_ - r % block_rows_ ? r1 - r : block_rows_ - r % block_rows_;
      f(r, take, row(r));
      r += take;
    }
  }

  // Appends n rows of width() floats from src (row-major).
  void append(const float* src, int64_t n);
  // Keeps the first n <= rows() rows (speculative rollback, draft trims).
  void truncate(int64_t n);
  // Replaces the contents with n rows from src (checkpoint load).
  void assign(const float* src, int64_t n);
  // Rows [r0, r1) copied out row-major (checkpoint save, device upload).
  std::vector<float> flatten(int64_t r0, int64_t r1) const;
  std::vector<float> flatten() const { return flatten(0, rows_); }

  // The bytes of the rows this copy holds: what a state reports as its own (StateCost
  // counts per position). Blocks shared with other copies are counted by each holder, so a
  // sum over states is an upper bound of the memory they use together.
  size_t bytes() const { return size_t(rows_ * width_) * sizeof(float); }
  // The bytes of the rows this copy holds with each block shared by k copies counted as 1/k
  // of its rows (the proportional share, as Linux's PSS): summed over every copy that holds
  // the blocks, the memory they use together. Admission control counts states this way, so
  // sessions continuing one cached prefix pay for it once (issue #24). A snapshot: another
  // thread's copies may change the shares.
  size_t proportional_bytes() const;
  // Blocks this copy references, and how many of them another copy references too (tests).
  size_t block_count() const { return blocks_.size(); }
  size_t shared_block_count() const;

  // Every PagedRows block alive in the process, in bytes: the memory the caches use with
  // sharing taken into account (/metrics ds4_paged_rows_bytes).
  static size_t live_block_bytes();

 private:
  struct Block {
    explicit Block(size_t floats);
    ~Block();
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    std::unique_ptr<float[]> data;
    size_t floats;
  };
  // The last block, made this copy's own (copied if another copy references it) so that rows
  // can be written into it.
  float* writable_tail();

  int64_t width_ = 0;
  int64_t block_rows_ = kBlockRows;
  int64_t rows_ = 0;
  std::vector<std::shared_ptr<Block>> blocks_;
};

}  // namespace ds4
