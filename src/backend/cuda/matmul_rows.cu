// matmul_rows (matmul_rows.h): the tensor-core path (dequantize a tile, cublasGemmEx) and the
// exact path (gemv_rows over groups of rows).
#include <cublas_v2.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/dequant.h"
#include "backend/cuda/env_setting.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/matmul_rows.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

// cuBLAS needs no more for one GEMM of these shapes; set explicitly so that a captured CUDA
// graph never asks cuBLAS to allocate (cublasSetStream resets the workspace to its pool).
constexpr size_t kCublasWorkspace = size_t(32) << 20;

void check_cublas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuda matmul_rows: ") + what + " failed: " + cublasGetStatusString(st));
}

cublasHandle_t handle_of(const MatmulWorkspace& ws) { return static_cast<cublasHandle_t>(ws.handle_); }

std::atomic<int> g_matmul_f16{-1};

// kF16 tile scales kept per workspace (a model's dense matrices are a few thousand tiles; past
// this, tiles are measured at every use).
constexpr int kTileSlots = 1 << 16;

// The device slot that holds the absmax of the tile at `first` (rows x cols), and whether this
// call has to measure it: a kept slot once measured outside a graph capture (a captured
// measurement runs only when the graph does), else the workspace's scratch slot, measured now.
std::pair<unsigned*, bool> tile_scale_slot(MatmulWorkspace& ws, const void* first, int64_t rows, int64_t cols,
                                           cudaStream_t s) {
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  DS4_CUDA_CHECK(cudaStreamIsCapturing(s, &cap));
  unsigned* scratch = ws.scalars_.as<unsigned>() + 1;
  if (cap != cudaStreamCaptureStatusNone) return {scratch, true};
  const auto key = std::make_tuple(first, rows, cols);
  if (const auto it = ws.tile_slots_.find(key); it != ws.tile_slots_.end())
    return {ws.tile_max_.as<unsigned>() + it->second, false};
  if (ws.tile_slots_.size() >= size_t(kTileSlots)) return {scratch, true};
  const int slot = int(ws.tile_slots_.size());
  ws.tile_slots_.emplace(key, slot);
  return {ws.tile_max_.as<unsigned>() + slot, true};
}

}  // namespace

MatmulPrecision model_matmul_precision() {
  return env_setting(g_matmul_f16, "DS4_MATMUL_F16", {0, 1}, "0 or 1", 1) ? MatmulPrecision::kF16
                                                                           : MatmulPrecision::kTf32;
}

MatmulWorkspace::MatmulWorkspace(int64_t max_rows, int64_t max_cols, int64_t tile_elems, int64_t min_rows,
                                 const char* what, MatmulPrecision precision)
    : max_rows_(max_rows), max_cols_(max_cols), tile_elems_(std::max(tile_elems, max_cols)), min_rows_(min_rows),
      precision_(precision) {
  const std::string w = what;
  if (precision == MatmulPrecision::kF32) throw InputError(w + ": kF32 is matmul_rows_f32's, not a workspace's");
  const bool bf16 = precision == MatmulPrecision::kBf16, f16 = precision == MatmulPrecision::kF16;
  if (bf16 || f16) x_ = DeviceBuffer(size_t(max_rows * max_cols) * 2, w + " 16-bit rows");  // TF32 reads x in place
  w_ = DeviceBuffer(size_t(tile_elems_) * (bf16 ? 2 : 4), w + " weight tile");  // (kF16: f32 tiles for matmul_rows_f32)
  if (f16) {
    scalars_ = DeviceBuffer(16, w + " f16 scales");
    DS4_CUDA_CHECK(cudaMemset(scalars_.get(), 0, 16));  // (beta = 0.f)
    tile_max_ = DeviceBuffer(kTileSlots * sizeof(unsigned), w + " f16 tile scales");
  }
  cublas_ws_ = DeviceBuffer(kCublasWorkspace, w + " cublas workspace");
  cublasHandle_t h = nullptr;
  check_cublas(cublasCreate(&h), "cublasCreate");
  handle_ = h;
}

MatmulWorkspace::~MatmulWorkspace() {
  if (handle_) cublasDestroy(handle_of(*this));
}

bool MatmulWorkspace::uses_gemm(const WeightMatrix& w, int64_t n) const {
  return min_rows_ > 0 && n >= min_rows_ && n <= max_rows_ && w.cols <= max_cols_ && gemv_supports(w.type);
}

void matmul_rows_exact(const WeightMatrix& w, const float* x, int64_t x_row, float* y, int64_t y_row, int64_t n,
                       const MatmulBatch& b, cudaStream_t s) {
  GemvRows r;  // groups of up to kGemvMaxRows rows
  r.x_row = x_row, r.y_row = y_row;
  r.cuda_cores = b.cuda_cores;
  int64_t i0 = 0;
  const int64_t full = n / kGemvMaxRows;
  if (b.count == 1 && full > 1 && full <= 65535) {
    // Every full group of rows as one batch entry of a single launch (entry g: the same weight,
    // rows g * 16 ..): the groups' blocks fill the GPU together instead of one launch per 16
    // rows (a 512-row chunk's router: 32 launches of ~500 weight rows each). Each row is the
    // same kernel's arithmetic at other pointers, so the results are the same bits.
    r.n = int(kGemvMaxRows);
    r.batch = GemvBatch{int(full), nullptr, 0, 0, kGemvMaxRows * x_row, kGemvMaxRows * y_row};
    gemv_rows(w, x, y, r, s);
    i0 = full * kGemvMaxRows;
  }
  r.batch = GemvBatch{b.count, nullptr, b.w_stride, b.scale_stride, b.x_stride, b.y_stride};
  for (; i0 < n; i0 += kGemvMaxRows) {
    r.n = int(std::min<int64_t>(kGemvMaxRows, n - i0));
    gemv_rows(w, x + i0 * x_row, y + i0 * y_row, r, s);
  }
}

namespace {

void gemm_rows(const WeightMatrix& w, const float* x, int64_t x_row, float* y, int64_t y_row, int64_t n,
               const MatmulBatch& b, MatmulWorkspace& ws, cudaStream_t s, MatmulPrecision p) {
  if (p == MatmulPrecision::kF16 && w.cols % 32 != 0) p = MatmulPrecision::kTf32;  // (dequant_f16_scaled's rule)
  const bool bf16 = p == MatmulPrecision::kBf16, f16 = p == MatmulPrecision::kF16;
  cublasHandle_t h = handle_of(ws);
  check_cublas(cublasSetStream(h, s), "cublasSetStream");
  check_cublas(cublasSetWorkspace(h, ws.cublas_ws_.get(), ws.cublas_ws_.bytes()), "cublasSetWorkspace");
  // (a kF16 tile is half an f32 tile's bytes: twice the rows)
  const int64_t tile_rows = std::max<int64_t>(1, ws.tile_elems_ * (f16 ? 2 : 1) / w.cols);
  const float one = 1.f, zero = 0.f;
  unsigned* x_max = f16 ? ws.scalars_.as<unsigned>() : nullptr;
  float* alpha = f16 ? ws.scalars_.as<float>() + 2 : nullptr;
  const float* beta = f16 ? alpha + 1 : nullptr;
  for (int e = 0; e < b.count; ++e) {
    WeightMatrix we = w;
    we.data = static_cast<const uint8_t*>(w.data) + size_t(e) * b.w_stride;
    if (w.scales) we.scales = static_cast<const uint8_t*>(w.scales) + size_t(e) * b.scale_stride;
    if (w.biases) we.biases = static_cast<const uint8_t*>(w.biases) + size_t(e) * b.scale_stride;
    const float* xe = x + e * b.x_stride;
    if (bf16) rows_to_bf16(xe, x_row, n, w.cols, ws.x_.get(), s);
    if (f16) rows_to_f16_scaled(xe, x_row, n, w.cols, ws.x_.get(), x_max, s);
    const void* xb = bf16 || f16 ? ws.x_.get() : static_cast<const void*>(xe);
    const int ldb = bf16 || f16 ? int(w.cols) : int(x_row);
    const cudaDataType_t t = bf16 ? CUDA_R_16BF : f16 ? CUDA_R_16F : CUDA_R_32F;
    const cublasComputeType_t ct = bf16 || f16 ? CUBLAS_COMPUTE_32F
                                   : p == MatmulPrecision::kF32 ? CUBLAS_COMPUTE_32F_PEDANTIC
                                                                : CUBLAS_COMPUTE_32F_FAST_TF32;
    float* ye = y + e * b.y_stride;
    for (int64_t r0 = 0; r0 < w.rows; r0 += tile_rows) {
      const int64_t tr = std::min(tile_rows, w.rows - r0);
      if (f16) {
        const auto [w_max, measure] =
            tile_scale_slot(ws, static_cast<const uint8_t*>(we.data) + r0 * w.row_stride_bytes(), tr, w.cols, s);
        dequant_f16_scaled(we, r0, tr, ws.w_.get(), w_max, measure, x_max, alpha, s);
      } else if (bf16) {
        dequant_bf16(we, r0, tr, ws.w_.get(), s);
      } else {
        dequant_f32(we, r0, tr, ws.w_.as<float>(), s);
      }
      // Column-major view: the tile is {cols, tr} (lda cols), X {cols, n} (ldb), Y {tr, n} at
      // ye + r0 (ldc y_row): Y = tile^T X. kF16's alpha / beta are read from the device (the
      // scales exist only there): that pointer mode for this call only, host pointers for every
      // other caller of the handle.
      if (f16) check_cublas(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_DEVICE), "cublasSetPointerMode");
      const cublasStatus_t st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(tr), int(n), int(w.cols),
                                             f16 ? alpha : &one, ws.w_.get(), t, int(w.cols), xb, t, ldb,
                                             f16 ? beta : &zero, ye + r0, CUDA_R_32F, int(y_row), ct,
                                             CUBLAS_GEMM_DEFAULT);
      if (f16) check_cublas(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
      check_cublas(st, "cublasGemmEx");
    }
  }
}

}  // namespace

void matmul_rows(const WeightMatrix& w, const float* x, int64_t x_row, float* y, int64_t y_row, int64_t n,
                 const MatmulBatch& b, MatmulWorkspace& ws, cudaStream_t s) {
  if (n < 1) return;
  if (!ws.uses_gemm(w, n)) return matmul_rows_exact(w, x, x_row, y, y_row, n, b, s);
  gemm_rows(w, x, x_row, y, y_row, n, b, ws, s, ws.precision_);
}

void matmul_rows_f32(const WeightMatrix& w, const float* x, int64_t x_row, float* y, int64_t y_row, int64_t n,
                     const MatmulBatch& b, MatmulWorkspace& ws, cudaStream_t s) {
  if (n < 1) return;
  if (!ws.uses_gemm(w, n)) return matmul_rows_exact(w, x, x_row, y, y_row, n, b, s);
  if (ws.precision_ == MatmulPrecision::kBf16)  // its tile holds BF16 values, half an f32 tile (kF16's holds f32s)
    throw InputError("cuda matmul_rows_f32: needs a TF32 workspace (an f32 weight tile)");
  gemm_rows(w, x, x_row, y, y_row, n, b, ws, s, MatmulPrecision::kF32);
}

}  // namespace ds4::cuda
