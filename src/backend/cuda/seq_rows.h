#pragma once
// The per-sequence launches of a multi-row forward (the CUDA models' chunk code). Its rows are
// either one sequence's consecutive tokens (a prefill chunk or a verify window: one state
// buffer, and a stateful kernel takes all rows in one launch, looping them in token order) or
// one token of each of several sequences (decode_batch: one state buffer per row, and a
// stateful kernel runs once per sequence on that row alone, exactly the launch of the
// sequence's own decode step). With one row both readings agree.
#include <cstdint>
#include <span>

namespace ds4::cuda {

// launch(state buffer, first row, row count) for each sequence of the rows: bufs holds one
// buffer (all `rows` rows are its sequence's) or one per row.
template <class Launch>
void for_each_sequence(std::span<uint8_t* const> bufs, int64_t rows, Launch&& launch) {
  if (bufs.size() == 1) {
    launch(bufs[0], int64_t(0), rows);
    return;
  }
  for (size_t i = 0; i < bufs.size(); ++i) launch(bufs[i], int64_t(i), int64_t(1));
}

}  // namespace ds4::cuda
