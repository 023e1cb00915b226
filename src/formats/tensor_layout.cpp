#include "formats/tensor_layout.h"

#include <algorithm>

namespace ds4 {

std::string tensor_layout_error(std::vector<TensorRange> ranges, uint64_t max_gap) {
  std::vector<TensorRange> kept;  // empty tensors own no bytes
  kept.reserve(ranges.size());
  for (TensorRange& r : ranges)
    if (r.end > r.begin) kept.push_back(std::move(r));
  ranges.swap(kept);
  std::sort(ranges.begin(), ranges.end(), [](const TensorRange& a, const TensorRange& b) { return a.begin < b.begin; });
  auto span = [](const TensorRange& r) {
    std::string s(1, '[');  // (appends: GCC 12 warns falsely on "[" + std::string)
    s.append(std::to_string(r.begin)).append(", ").append(std::to_string(r.end)).append(")");
    return s;
  };
  for (size_t i = 1; i < ranges.size(); ++i) {
    const TensorRange &a = ranges[i - 1], &b = ranges[i];
    if (b.begin < a.end)
      return "tensor '" + b.name + "' data " + span(b) + " overlaps tensor '" + a.name + "' data " + span(a) +
             " (a declared type, shape or offset does not match the data)";
    if (max_gap > 0 && b.begin - a.end >= max_gap)
      return "tensor '" + a.name + "' data " + span(a) + " is followed by " + std::to_string(b.begin - a.end) +
             " unused bytes before tensor '" + b.name + "' (more than the alignment padding: its declared type or "
             "shape is smaller than the data written for it)";
  }
  return "";
}

}  // namespace ds4
