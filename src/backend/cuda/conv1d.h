#pragma once
// Depthwise causal 1-D convolution over time, one new row (decode step), with carried
// state: the GPU form of backend/cpu/conv1d.h (same weight and state layouts).
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/seq_shift.h"

namespace ds4::cuda {

// x = concat(state, x_new) along time; y[c] = act(sum_j w[c*kernel + j] * x[j*dilation][c]);
// state {(kernel-1)*dilation, channels} (oldest first) then drops its oldest row and takes
// x_new. act = silu when `silu`, else identity. Device pointers; y must not alias x_new.
void conv1d_step_f32(const float* x_new, const float* w, float* state, int64_t channels, int64_t kernel,
                     int64_t dilation, bool silu, float* y, cudaStream_t stream);

// conv1d_step_f32 over `count` consecutive new rows in one launch (a prefill chunk or a
// speculative verify): row t reads x_new + t * x_stride, writes y + t * y_stride (floats),
// and the state advances row by row inside the kernel (one thread per channel), so every
// row equals the single step's arithmetic.
// seq (a decode batch): the rows are one token of each of `count` sequences instead, row t on
// the state seq.at[t] bytes from `state` (seq_shift.h); each row is its own sequence's single
// step, all in one launch (grid.y = row).
struct Conv1dRows {
  int64_t count = 1, x_stride = 0, y_stride = 0;
  SeqShift seq;
};
void conv1d_rows_f32(const float* x_new, const float* w, float* state, int64_t channels, int64_t kernel,
                     int64_t dilation, bool silu, float* y, const Conv1dRows& rows, cudaStream_t stream);

}  // namespace ds4::cuda
