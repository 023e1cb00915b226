#include "backend/cpu/topk.h"

#include <algorithm>
#include <numeric>

namespace ds4::cpu {

void topk_f32(const float* x, int64_t n, int64_t k, std::vector<int32_t>& out) {
  k = std::min(k, n);
  out.resize(size_t(n));
  std::iota(out.begin(), out.end(), 0);
  auto better = [x](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  std::partial_sort(out.begin(), out.begin() + k, out.end(), better);
  out.resize(size_t(k));
}

}  // namespace ds4::cpu
