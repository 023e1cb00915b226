#pragma once
// Integer GEMV on quantized activations (core/act_quant.h): y = W x for Q8_0, Q2_K and
// IQ2_XXS weights with x quantized on the device the way antirez/ds4 does (Q8_0 blocks for
// Q8_0 weights, Q8_K for the K-quant / IQ2 formats). Every block's dot is an exact integer
// sum (dp4a); the f32 work is one scale per block and the sum over blocks. This is ds4's
// decode numerics and removes the per-weight float decode that makes the f32-x GEMV issue
// bound (bench/cuda_gemv/NOTES.md: Q2_K 24 %, IQ2_XXS 17 % of copy bandwidth).
// Results: each y equals ds4::dot_act (CPU, core/act_quant.h) to f32 rounding of the block sum
// order; gemv_act_rows' row i equals gemv_act on row i bit for bit.
#include <cuda_runtime.h>

#include "backend/cuda/gemv.h"
#include "core/act_quant.h"

namespace ds4::cuda {

// Device buffers of `rows` quantized activation rows of n values each (row i: q + i * n,
// d + i * n / block, bsums + i * n / 16). q 16-byte aligned, n a multiple of the block.
struct DeviceActQ8 {
  int8_t* q = nullptr;
  float* d = nullptr;
  int16_t* bsums = nullptr;  // Q8_K only
  int64_t n = 0;
  int64_t rows = 0;
  ActBlock block = ActBlock::kNone;
  ActQ8View row(int64_t i) const;  // device pointers of row i
};
// Bytes one row of n values needs (q + d + bsums, each part rounded up to 16 bytes), so
// callers can carve the buffers out of a scratch arena. Throws InputError for kNone or n not
// a positive multiple of the block.
size_t act_q8_row_bytes(ActBlock block, int64_t n);
// `rows` rows of n values laid out in rows * act_q8_row_bytes(block, n) bytes at `base`
// (device, 16-byte aligned): all q, then all d, then all bsums, each part 16-byte aligned.
DeviceActQ8 act_q8_carve(void* base, ActBlock block, int64_t n, int64_t rows);

// Quantizes `rows` rows of x (row i at x + i * x_row floats) into out (out.n, out.block set by
// the caller; out.rows >= rows). One launch; same values as ds4::quantize_act_q8_0 / _k (byte
// for byte on finite x). x 16-byte aligned, x_row >= out.n and a multiple of 4; rows <= 65535.
// Launched as a programmatic dependent when gemv_pdl() (waits before reading x).
void quantize_act(const float* x, int64_t x_row, int64_t rows, const DeviceActQ8& out, cudaStream_t stream);
// ds4::quantize_act_q8_k_planes of `rows` rows (out.block Q8_K, out.rows >= 2 rows): row 2 i the
// high plane (quantize_act's Q8_K bytes), 2 i + 1 the low plane, byte for byte the host's.
void quantize_act_planes(const float* x, int64_t x_row, int64_t rows, const DeviceActQ8& out, cudaStream_t stream);

// Whether gemv_act takes this weight type (act_block_for(type) != kNone).
bool gemv_act_supports(DType type);

// y[rows] = W x. x.block must equal act_block_for(w.type), x.n == w.cols (a multiple of the
// block), x.q 16-byte aligned; throws InputError otherwise. Launched as a programmatic
// dependent when gemv_pdl() (weights stream before the wait; x and ids are read after it).
void gemv_act(const WeightMatrix& w, const ActQ8View& x, float* y, cudaStream_t stream);

// gemv_batched's contract (MoE experts: entry b uses expert ids[b]); batch.x_stride counts
// activation VALUES (a multiple of the block and of 16), so entry b reads q + b * x_stride,
// d + b * x_stride / block, bsums + b * x_stride / 16; y_stride in floats.
void gemv_act_batched(const WeightMatrix& w, const ActQ8View& x, float* y, const GemvBatch& batch,
                      cudaStream_t stream);

// gemv_rows' contract on quantized rows: input row i is q + i * r.x_row values (x_row a
// multiple of the block and of 16), the rest (batch, live, counts, x_idx, y_idx) as gemv_rows.
// Row i equals gemv_act (gemv_act_batched for the entry) on that row bit for bit. Launched as a
// programmatic dependent when gemv_pdl() and not routed by device data (batch ids, live, counts,
// x_idx, y_idx all null); routed launches are plain.
void gemv_act_rows(const WeightMatrix& w, const ActQ8View& x, float* y, const GemvRows& r, cudaStream_t stream);

}  // namespace ds4::cuda
