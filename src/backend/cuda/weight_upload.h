#pragma once
// Weight upload shared by the CUDA models: one pass sizes everything (base == nullptr),
// admission checks the total, a second pass copies into one device buffer. Every piece
// starts 256-byte aligned. WeightMatrix views keep their host shapes with data (and MLX
// scales/biases) pointing into the device buffer.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "core/weight.h"

namespace ds4::cuda {

// Projections of one input stacked into one matrix (rows concatenated in device memory),
// so the decode step reads them with one gemv launch; outputs land back to back. When the
// parts differ in type or width (a mixed-precision GGUF), they stay separate (`parts`).
struct DProj {
  WeightMatrix fused;               // rows > 0: the stacked matrix
  std::vector<WeightMatrix> parts;  // otherwise one gemv each, outputs consecutive
  int64_t rows = 0;                 // total output rows
};

// Experts packed at a fixed stride so one batched gemv picks them by id on the device.
struct DExperts {
  WeightMatrix first;  // expert 0
  size_t stride = 0, scale_stride = 0;
};

// Fill mode (synthetic models, synthetic_fill.h): with `fill`, mat/proj/experts never read
// the host matrices (their data pointers may be null) and call fill(device view) on the
// space they reserve instead; vec/add still copy their host values.
using MatrixFill = std::function<void(const WeightMatrix&)>;

class Uploader {
 public:
  explicit Uploader(uint8_t* base, MatrixFill* fill = nullptr) : base_(base), fill_(fill) {}
  const void* add(const void* host, size_t bytes) { return add_run({{host, bytes}}); }
  // Pieces copied back to back (no padding between them), the run itself aligned.
  const void* add_run(const std::vector<std::pair<const void*, size_t>>& pieces);
  // A float vector with `offset` added to every element (norm weights stored as 1 + w).
  const float* vec(const std::vector<float>& v, float offset = 0.f);
  WeightMatrix mat(const WeightMatrix& m);
  // Projections of one input: stacked when `fuse` and they share type, width and quantization.
  DProj proj(const std::vector<const WeightMatrix*>& ms, bool fuse);
  // All experts' data, then all scales, then all biases: each at one fixed stride.
  DExperts experts(const std::vector<WeightMatrix>& es);
  size_t used() const { return used_; }

  static size_t data_bytes(const WeightMatrix& m);
  static size_t scale_bytes(const WeightMatrix& m);

 private:
  // Reserves m's data (and MLX scales/biases) as mat() lays them out; fills when copying.
  WeightMatrix reserve(const WeightMatrix& m, int64_t rows);
  uint8_t* base_;
  MatrixFill* fill_;
  size_t used_ = 0;
};

// y = [W_0; W_1; ...] x: one launch when stacked, else one per part into consecutive rows.
struct GemvOptions;
void gemv_proj(const DProj& p, const float* x, float* y, cudaStream_t stream);
void gemv_proj(const DProj& p, const float* x, float* y, cudaStream_t stream, const GemvOptions& opt);
// The same over r.n input rows (gemv_rows, no batch): row i's outputs at y + i * r.y_row.
struct GemvRows;
void gemv_proj_rows(const DProj& p, const float* x, float* y, const GemvRows& r, cudaStream_t stream);

}  // namespace ds4::cuda
