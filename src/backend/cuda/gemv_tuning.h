#pragma once
// Tuning knobs of the GEMV kernels for benches (bench_cuda_gemv sweeps them); the engine
// never sets them. Not thread safe against launches in flight on other threads.
namespace ds4::cuda {

// Threads per block of the direct and multi-row GEMV kernels: 0 = the default (128, fewer for
// narrow rows), else 32, 64 or 128. Each thread then takes every threads-th unit of its rows,
// so this changes the summation order of gemv and gemv_rows alike (they stay bit-identical to
// each other; results move by rounding). Throws InputError for another value.
void gemv_set_threads(int threads);
int gemv_threads();

}  // namespace ds4::cuda
