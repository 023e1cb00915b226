// paged_rows_io.h: one device -> host copy into a flat buffer, then the rows into their pages.
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/paged_rows_io.h"
#include "core/error.h"

namespace ds4::cuda {

void paged_rows_from_device(const void* src, PagedRows& v, size_t n, const char* who) {
  const size_t w = size_t(v.width());
  DS4_CHECK(w > 0 ? n % w == 0 : n == 0, std::string(who) + ": " + std::to_string(n) + " floats are not whole rows of " +
                                              std::to_string(w));
  std::vector<float> flat(n);
  if (n) DS4_CUDA_CHECK(cudaMemcpy(flat.data(), src, n * sizeof(float), cudaMemcpyDeviceToHost));
  v.assign(flat.data(), w > 0 ? int64_t(n / w) : 0);
}

}  // namespace ds4::cuda
