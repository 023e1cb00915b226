// Synthetic PLE table (see synthetic.h).
#include "models/qwen_next/cuda/synthetic.h"

#include "backend/cuda/synthetic_fill.h"

namespace ds4::qwen_next::cuda {
namespace {

class SyntheticPleTable final : public PleTable {
 public:
  SyntheticPleTable(int64_t rows, int64_t cols, uint64_t seed) : rows_(rows), cols_(cols), seed_(seed) {}
  int64_t rows() const override { return rows_; }
  int64_t cols() const override { return cols_; }
  // Values in +-0.05: the scale of a trained embedding row (std 0.02 init).
  void gather(const int64_t* ids, int64_t n, float* out) override {
    for (int64_t i = 0; i < n; ++i) ds4::cuda::synthetic_row(seed_, ids[i], cols_, 0.05f, out + i * cols_);
  }

 private:
  int64_t rows_, cols_;
  uint64_t seed_;
};

}  // namespace

std::unique_ptr<PleTable> synthetic_ple_table(int64_t rows, int64_t cols, uint64_t seed) {
  return std::make_unique<SyntheticPleTable>(rows, cols, seed);
}

}  // namespace ds4::qwen_next::cuda
