#pragma once
// Indices of the k largest values, f32. Ties keep the lower index first; the result is
// ordered by descending value.
#include <cstdint>
#include <vector>

namespace ds4::cpu {

void topk_f32(const float* x, int64_t n, int64_t k, std::vector<int32_t>& out);

}  // namespace ds4::cpu
