#pragma once
// Multi-row products Y = X W^T on tensor cores for prefill chunks of any model: a tile of
// weight rows is dequantized once (dequant.h) and multiplied with all input rows by cuBLAS
// (cublasGemmEx, FP32 accumulate and out). Each weight is read once per call whatever the
// row count. Precisions (MatmulPrecision; the models take model_matmul_precision()):
//   kTf32: the tile dequantized to f32, x read in place as f32, TF32
//     tensor cores (10-bit mantissa: ~2^-11 relative per operand);
//   kBf16: tile and x rounded to BF16 (~2^-9 relative per operand), half the tile bytes;
//   kF16 (the models' default): tile and x each scaled by a power of two into FP16's range and rounded to FP16
//     (dequant.h dequant_f16_scaled / rows_to_f16_scaled; alpha undoes the scales): TF32's
//     11 significant bits for every value within 2^-14 of its operand's largest, at the BF16
//     tensor-core rate, half the tile bytes (weights of cols not a multiple of 32 take kTf32);
//   kF32 (matmul_rows_f32 only): FP32 operands and products (cuBLAS pedantic FP32, no
//     tensor cores), the f32 tile as TF32's: FP32 rounding in another summation order than
//     gemv's, for the products whose results feed discrete choices in a tensor-core chunk.
// Fewer than `min_rows` rows keep the exact path: gemv_rows in groups of kGemvMaxRows, each
// row equal to the decode step's gemv bit for bit (matmul_rows_exact always takes it).
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "backend/cuda/memory.h"
#include "core/weight.h"

namespace ds4::cuda {

// The cuBLAS handle and the BF16 scratch of one stream (not shared between streams: a
// second stream needs its own). Sized at load (admission): `max_rows` input rows of up to
// `max_cols` columns, weight tiles of `tile_elems` BF16 values (a tile is as many whole rows
// as fit, so a matrix of any size goes through it in pieces).
enum class MatmulPrecision : uint8_t { kTf32, kBf16, kF32, kF16 };

// The models' precision for their tensor-core chunk products: kF16, or kTf32 with
// DS4_MATMUL_F16=0 (read once; InputError for other values). kF16 is TF32's error at BF16's
// rate: 2K prefill on an H100 (session 24 call 3, same process build) Qwen 3314 -> 3412 tok/s,
// GLM 1928 -> 1970, DeepSeek 4474 -> 4442 (8K: 4184 -> 4240).
MatmulPrecision model_matmul_precision();

class MatmulWorkspace {
 public:
  MatmulWorkspace(int64_t max_rows, int64_t max_cols, int64_t tile_elems, int64_t min_rows, const char* what,
                  MatmulPrecision precision = MatmulPrecision::kTf32);
  ~MatmulWorkspace();
  MatmulWorkspace(const MatmulWorkspace&) = delete;
  MatmulWorkspace& operator=(const MatmulWorkspace&) = delete;
  int64_t min_rows() const { return min_rows_; }
  int64_t max_rows() const { return max_rows_; }
  void set_min_rows(int64_t v) { min_rows_ = v; }  // 0 = never the GEMM path
  // Whether matmul_rows takes the tensor-core path for this weight and row count.
  bool uses_gemm(const WeightMatrix& w, int64_t n) const;

  void* handle_ = nullptr;  // cublasHandle_t (kept out of this header)
  DeviceBuffer x_, w_, cublas_ws_;
  DeviceBuffer scalars_;  // kF16: x max bits, a tile's max bits (uncached), alpha, beta (0): device-pointer alpha
  // kF16: each weight tile's absmax, measured at its first use outside a graph capture and kept
  // (weights never change under a workspace): slot of (first row's bytes, rows, cols) in tile_max_.
  std::map<std::tuple<const void*, int64_t, int64_t>, int> tile_slots_;
  DeviceBuffer tile_max_;
  int64_t max_rows_, max_cols_, tile_elems_, min_rows_;
  MatmulPrecision precision_;
};

// Entry b of a batch: weight data (and MLX scales / biases) advanced by b * w_stride
// (b * scale_stride) bytes, x by b * x_stride floats, y by b * y_stride floats.
struct MatmulBatch {
  int count = 1;
  size_t w_stride = 0, scale_stride = 0;
  int64_t x_stride = 0, y_stride = 0;
  bool cuda_cores = false;  // the exact path's gemv_rows as GemvRows::cuda_cores (gemv.h)
};

// Row i < n: y + i * y_row = W (x + i * x_row) (floats; x 16-byte aligned, x_row a multiple
// of 4 on the exact path), for every batch entry. Throws ds4::InputError for n above the
// workspace's max_rows or cols above its max_cols on the GEMM path, and gemv's errors.
void matmul_rows(const WeightMatrix& w, const float* x, int64_t x_row, float* y, int64_t y_row, int64_t n,
                 const MatmulBatch& b, MatmulWorkspace& ws, cudaStream_t s);
// matmul_rows in FP32 (MatmulPrecision::kF32) whatever the workspace's precision, on the same
// row-count rule (uses_gemm; else the exact path).
void matmul_rows_f32(const WeightMatrix& w, const float* x, int64_t x_row, float* y, int64_t y_row, int64_t n,
                     const MatmulBatch& b, MatmulWorkspace& ws, cudaStream_t s);
// The exact path for any n (products whose results feed discrete choices, e.g. the HC mixes
// and MoE router logits of a tensor-core chunk, stay as the decode step computes them).
void matmul_rows_exact(const WeightMatrix& w, const float* x, int64_t x_row, float* y, int64_t y_row, int64_t n,
                       const MatmulBatch& b, cudaStream_t s);

}  // namespace ds4::cuda
