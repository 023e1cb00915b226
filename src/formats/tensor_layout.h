#pragma once
// Tensor data ranges of one file checked as a whole: each reader already bounds a single
// tensor; together they must not overlap (two tensors reading the same bytes means a
// declared type or shape does not match the data that was written, or an offset was altered).
#include <cstdint>
#include <string>
#include <vector>

namespace ds4 {

struct TensorRange {
  std::string name;
  uint64_t begin = 0, end = 0;  // [begin, end) in the file's data section
};

// "" when no two non-empty ranges overlap; else a message naming both tensors and ranges.
// max_gap > 0 also refuses a gap of max_gap bytes or more between consecutive tensors
// (GGUF pads each tensor only up to its alignment: a larger gap means a tensor's declared
// type or shape is smaller than the data written for it).
std::string tensor_layout_error(std::vector<TensorRange> ranges, uint64_t max_gap = 0);

}  // namespace ds4
