// PagedRows (core/paged_rows.h): rows in fixed-size blocks that copies share, written only
// through copy on write. Checked against a plain row-major vector that goes through the same
// operations, and by the process-wide block bytes.
#include "core/paged_rows.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/error.h"

namespace ds4 {
namespace {

std::vector<float> rows_of(int64_t first, int64_t n, int64_t width) {
  std::vector<float> v(size_t(n * width));
  for (int64_t i = 0; i < n * width; ++i) v[size_t(i)] = float(first * width + i) + 0.25f;
  return v;
}

void expect_same(const PagedRows& p, const std::vector<float>& ref, int64_t width) {
  ASSERT_EQ(p.rows() * width, int64_t(ref.size()));
  EXPECT_EQ(p.flatten(), ref);
  for (int64_t r = 0; r < p.rows(); ++r)
    for (int64_t j = 0; j < width; ++j) ASSERT_EQ(p.row(r)[j], ref[size_t(r * width + j)]) << "row " << r;
}

TEST(PagedRows, AppendsAcrossBlocksAndReadsRowsBack) {
  const int64_t W = 3;
  PagedRows p(W, 4);
  std::vector<float> ref;
  int64_t next = 0;
  for (int64_t n : {1, 2, 5, 0, 4, 7}) {  // fills blocks partly, exactly and across several
    const auto add = rows_of(next, n, W);
    p.append(add.data(), n);
    ref.insert(ref.end(), add.begin(), add.end());
    next += n;
    expect_same(p, ref, W);
  }
  EXPECT_EQ(p.block_count(), size_t((next + 3) / 4));
  EXPECT_EQ(p.bytes(), size_t(next * W) * sizeof(float));
  // Runs: one per block touched, covering exactly [r0, r1).
  std::vector<int64_t> firsts, counts;
  p.for_each_run(3, 13, [&](int64_t first, int64_t count, const float* rows) {
    EXPECT_EQ(rows, p.row(first));
    firsts.push_back(first), counts.push_back(count);
  });
  EXPECT_EQ(firsts, (std::vector<int64_t>{3, 4, 8, 12}));
  EXPECT_EQ(counts, (std::vector<int64_t>{1, 4, 4, 1}));
}

TEST(PagedRows, CopiesShareBlocksAndNeverSeeEachOthersWrites) {
  const int64_t W = 2;
  const size_t before = PagedRows::live_block_bytes();
  PagedRows a(W, 4);
  const auto base = rows_of(0, 10, W);  // 2 full blocks + a partial one of 2 rows
  a.append(base.data(), 10);
  const size_t one_copy = PagedRows::live_block_bytes() - before;
  EXPECT_EQ(one_copy, size_t(3 * 4 * W) * sizeof(float));

  PagedRows b = a;  // the prefix cache's clone: no rows copied
  EXPECT_EQ(PagedRows::live_block_bytes() - before, one_copy);
  EXPECT_EQ(a.shared_block_count(), 3u);

  // b appends into the shared partial block: b gets its own copy of it; the full blocks stay shared.
  const auto tail_b = rows_of(100, 3, W);
  b.append(tail_b.data(), 3);
  EXPECT_EQ(a.shared_block_count(), 2u);
  std::vector<float> ref_b = base;
  ref_b.insert(ref_b.end(), tail_b.begin(), tail_b.end());
  expect_same(a, base, W);
  expect_same(b, ref_b, W);

  // a rolls back into a full block and appends other rows there (speculative rollback):
  // the block is shared with b, so a copies it and b keeps its rows.
  a.truncate(6);
  const auto tail_a = rows_of(200, 5, W);
  a.append(tail_a.data(), 5);
  std::vector<float> ref_a(base.begin(), base.begin() + 6 * W);
  ref_a.insert(ref_a.end(), tail_a.begin(), tail_a.end());
  expect_same(a, ref_a, W);
  expect_same(b, ref_b, W);
  EXPECT_EQ(a.shared_block_count(), 1u);  // only the first block is still common

  // Dropping a copy frees exactly the blocks nobody else holds.
  { PagedRows c = b; }
  const size_t with_both = PagedRows::live_block_bytes();
  b = PagedRows();
  EXPECT_EQ(with_both - PagedRows::live_block_bytes(), size_t(3 * 4 * W) * sizeof(float));  // b's own 3 of 4
  a = PagedRows();
  EXPECT_EQ(PagedRows::live_block_bytes(), before);
}

// Proportional shares (admission control's count): a block held by k copies counts 1/k of
// the rows each copy holds in it, so the copies' shares add up to the rows stored once.
TEST(PagedRows, ProportionalBytesCountSharedBlocksOnce) {
  const int64_t W = 2;
  const size_t row = W * sizeof(float), full = 4 * row;  // bytes of a row, of a full block
  PagedRows a(W, 4);
  const auto base = rows_of(0, 10, W);  // blocks of 4, 4, 2 rows
  a.append(base.data(), 10);
  EXPECT_EQ(a.proportional_bytes(), a.bytes()) << "no other holder: the whole bytes";
  PagedRows b = a, c = a;  // three holders of every block
  EXPECT_EQ(a.proportional_bytes(), 2 * (full / 3) + 2 * row / 3) << "each block's rows over 3, rounded down";
  EXPECT_EQ(b.proportional_bytes(), a.proportional_bytes());
  // c writes into the partial block (its own copy now) and grows by a block of 1 row:
  // blocks 0-1 stay shared by three, block 2 by a and b.
  const auto more = rows_of(50, 3, W);
  c.append(more.data(), 3);
  EXPECT_EQ(c.proportional_bytes(), 2 * (full / 3) + full + row);
  EXPECT_EQ(a.proportional_bytes(), 2 * (full / 3) + 2 * row / 2);
  // b drops out: a holds blocks 0-1 with c and block 2 alone.
  b = PagedRows();
  EXPECT_EQ(a.proportional_bytes(), 2 * (full / 2) + 2 * row);
  EXPECT_EQ(a.proportional_bytes() + c.proportional_bytes(), 15 * row)
      << "two holders: the shares add up to the rows stored once (8 shared + a's 2 + c's 5)";
}

TEST(PagedRows, RandomOperationsMatchAVector) {
  std::mt19937 rng(7);
  const int64_t W = 5;
  std::vector<PagedRows> pages(4, PagedRows(W, 8));
  std::vector<std::vector<float>> refs(4);
  int64_t serial = 0;
  for (int step = 0; step < 600; ++step) {
    const size_t i = rng() % 4;
    switch (rng() % 4) {
      case 0: {  // append
        const int64_t n = rng() % 20;
        const auto add = rows_of(serial, n, W);
        serial += n;
        pages[i].append(add.data(), n);
        refs[i].insert(refs[i].end(), add.begin(), add.end());
        break;
      }
      case 1: {  // truncate
        const int64_t n = pages[i].rows() ? int64_t(rng() % uint32_t(pages[i].rows() + 1)) : 0;
        pages[i].truncate(n);
        refs[i].resize(size_t(n * W));
        break;
      }
      case 2: {  // clone another one over this one
        const size_t j = rng() % 4;
        pages[i] = pages[j];
        refs[i] = refs[j];
        break;
      }
      default: {  // reload from flat rows (checkpoint)
        const std::vector<float> flat = pages[i].flatten();
        pages[i].assign(flat.data(), pages[i].rows());
        break;
      }
    }
    for (size_t k = 0; k < 4; ++k) expect_same(pages[k], refs[k], W);
  }
}

TEST(PagedRows, RefusesOutOfRangeOperations) {
  PagedRows p(4, 8);
  const auto r = rows_of(0, 3, 4);
  p.append(r.data(), 3);
  EXPECT_THROW(p.truncate(4), Error);
  EXPECT_THROW(p.truncate(-1), Error);
  EXPECT_THROW(p.flatten(2, 4), Error);
  PagedRows no_width;
  EXPECT_THROW(no_width.append(r.data(), 1), Error);
  EXPECT_NO_THROW(no_width.append(r.data(), 0));
  EXPECT_THROW(PagedRows(4, 0), Error);
}

}  // namespace
}  // namespace ds4
