#pragma once
// Weight upload shared by the CUDA models: one pass sizes everything (base == nullptr),
// admission checks the total, a second pass copies into one device buffer through pinned
// staging (staged_upload.h: one place for every model's host-to-device copy, with the
// progress report). Every piece starts 256-byte aligned. WeightMatrix views keep their host
// shapes with data (and MLX scales/biases) pointing into the device buffer.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/memory.h"
#include "backend/cuda/staged_upload.h"
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
  // Sizing pass: base == nullptr (only counts). Copy pass: base and the staged upload every
  // piece goes through (upload_two_pass below sets both up).
  explicit Uploader(uint8_t* base, MatrixFill* fill = nullptr, StagedUpload* sink = nullptr);
  // Host bytes may be freed once these return (they are staged by then). host == nullptr
  // leaves the device bytes as they are (space the caller fills itself).
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
  bool copying() const { return base_ != nullptr; }
  // Bytes placed (copied, or reserved for a fill), padding excluded: the copy pass's total.
  uint64_t payload() const { return payload_; }

  static size_t data_bytes(const WeightMatrix& m);
  static size_t scale_bytes(const WeightMatrix& m);

 private:
  // Reserves m's data (and MLX scales/biases) as mat() lays them out; fills when copying.
  WeightMatrix reserve(const WeightMatrix& m, int64_t rows);
  uint8_t* base_;
  MatrixFill* fill_;
  StagedUpload* sink_;
  size_t used_ = 0;
  uint64_t payload_ = 0;
};

// The two passes of every CUDA model's upload: bind(sizing uploader); admission and one
// device buffer named `what` (DeviceBuffer); bind(copy uploader) through pinned staging with
// a progress report on stderr (core/progress.h: a bar on a terminal, lines every 10%
// otherwise); returns once every copy and fill has landed. `bind` must place the same pieces
// in both passes (checked).
DeviceBuffer upload_two_pass(const std::string& what, MatrixFill* fill, const std::function<void(Uploader&)>& bind,
                             const StagingOptions& opt = {});

// y = [W_0; W_1; ...] x: one launch when stacked, else one per part into consecutive rows.
struct GemvOptions;
void gemv_proj(const DProj& p, const float* x, float* y, cudaStream_t stream);
void gemv_proj(const DProj& p, const float* x, float* y, cudaStream_t stream, const GemvOptions& opt);
// The same over r.n input rows (gemv_rows, no batch): row i's outputs at y + i * r.y_row.
struct GemvRows;
void gemv_proj_rows(const DProj& p, const float* x, float* y, const GemvRows& r, cudaStream_t stream);

}  // namespace ds4::cuda
