// Where a prefill chunk's dense product goes (issue #22): matmul_rows' tensor-core path
// (backend/cuda/matmul_rows.h: a tile of weight rows dequantized to f32, then one TF32 cublasGemmEx
// with every input row) at the three families' real shapes, timed whole and in its two parts:
//   dequant  dequant_f32 of the whole matrix (one tile: the workspace holds it), as GB/s of the
//            f32 written + the weight bytes read against the copy bandwidth of this run;
//   gemm     the cublasGemmEx on the already dequantized tile (TF32), TFLOP/s;
//   whole    matmul_rows, TFLOP/s, and the BF16 form (MatmulPrecision::kBf16: BF16 tile and rows)
//            and the FP16 form (kF16: power-of-two scaled FP16 tile and rows, DS4_MATMUL_F16=1);
// against a dense BF16 cuBLAS GEMM of the same m x n x k (the physical limit of this product);
// then each form's error against matmul_rows_f32 (FP32 products) on the same operands: sqrt of the
// summed squared differences over the summed squares (x: signed values with 1-in-256 outliers x20).
// Usage: bench_cuda_matmul_rows [rows=512] [reps=10]
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda/bandwidth.h"
#include "backend/cuda/check.h"
#include "backend/cuda/dequant.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/memory.h"
#include "core/weight.h"

#include "../cuda_fill.cuh"
#include "../cuda_timing.cuh"

using namespace ds4;
using bench::fill_halves;
using bench::fill_random;
using bench::time_ms;

namespace {

struct Case {
  const char* what;
  DType type;
  int64_t rows, cols, group;  // group: MLX group size (0: none)
};

void check_cublas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cublasGetStatusString(st));
}

// f16 scale fields of Q8_0 blocks (34 bytes, d first) made small and finite (random bits hold NaN).
__global__ void tame_q8_0(uint8_t* data, int64_t blocks) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < blocks; i += int64_t(gridDim.x) * blockDim.x) {
    uint16_t* h = reinterpret_cast<uint16_t*>(data + i * 34);
    *h = uint16_t((*h & 0x83ffu) | 0x1c00u);
  }
}

// x as signed values in [-1, 1) with every 256th times 20 (activation outliers).
__global__ void fill_signed(float* x, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9e3779b1u ^ seed;
    h ^= h >> 15, h *= 0x2c1b3c6du, h ^= h >> 12, h *= 0x297a2d39u, h ^= h >> 15;
    x[i] = (float(h >> 8) * (1.f / 8388608.f) - 1.f) * ((i & 255) == 7 ? 20.f : 1.f);
  }
}

std::vector<float> to_host(const cuda::DeviceBuffer& b) {
  std::vector<float> v(b.bytes() / 4);
  DS4_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost));
  return v;
}

double rel_rms(const std::vector<float>& y, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < y.size(); ++i) num += double(y[i] - ref[i]) * (y[i] - ref[i]), den += double(ref[i]) * ref[i];
  return std::sqrt(num / std::max(den, 1e-300));
}

void run(const Case& c, int64_t n, int reps, double copy_gbps, cudaStream_t s) {
  WeightMatrix w;
  w.type = c.type, w.rows = c.rows, w.cols = c.cols, w.group_size = c.group, w.scale_type = DType::BF16;
  const size_t data_bytes = size_t(c.rows * w.row_stride_bytes());
  const size_t sb = c.group ? size_t(c.rows * (c.cols / c.group) * 2) : 0;
  cuda::DeviceBuffer data(data_bytes, "bench weight"), sc(sb ? sb : 16, "scales"), bi(sb ? sb : 16, "biases");
  fill_random<<<1024, 256>>>(data.as<uint32_t>(), data.bytes() / 4, 91u);
  if (c.type == DType::BF16) fill_halves<<<1024, 256>>>(data.as<uint16_t>(), data.bytes() / 2, 0x3c00);
  if (c.type == DType::Q8_0) tame_q8_0<<<1024, 256>>>(data.as<uint8_t>(), c.rows * c.cols / 32);
  if (sb) {
    fill_halves<<<1024, 256>>>(sc.as<uint16_t>(), sb / 2, 0x3b00);
    fill_halves<<<1024, 256>>>(bi.as<uint16_t>(), sb / 2, 0xbb00);
  }
  DS4_CUDA_CHECK_LAUNCH();
  w.data = data.get(), w.scales = sb ? sc.get() : nullptr, w.biases = sb ? bi.get() : nullptr;
  cuda::DeviceBuffer x(size_t(n * c.cols) * 4, "x"), y(size_t(n * c.rows) * 4, "y");
  fill_halves<<<1024, 256>>>(x.as<uint16_t>(), x.bytes() / 2, 0x3c00);  // (finite floats)
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const int64_t tile = c.rows * c.cols;
  cuda::MatmulWorkspace tf(n, c.cols, tile, 1, "bench tf32"), bf(n, c.cols, tile, 1, "bench bf16",
                                                                    cuda::MatmulPrecision::kBf16),
      hf(n, c.cols, tile, 1, "bench f16", cuda::MatmulPrecision::kF16);
  const double dq_ms = time_ms([&] { cuda::dequant_f32(w, 0, c.rows, tf.w_.as<float>(), s); }, reps, s);
  cublasHandle_t h = static_cast<cublasHandle_t>(tf.handle_);
  check_cublas(cublasSetStream(h, s), "cublasSetStream");
  const float one = 1.f, zero = 0.f;
  const double gemm_ms = time_ms(
      [&] {
        check_cublas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(c.rows), int(n), int(c.cols), &one, tf.w_.get(),
                                  CUDA_R_32F, int(c.cols), x.get(), CUDA_R_32F, int(c.cols), &zero, y.get(), CUDA_R_32F,
                                  int(c.rows), CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx");
      },
      reps, s);
  const cuda::MatmulBatch one_entry;
  const double whole_ms = time_ms(
      [&] { cuda::matmul_rows(w, x.as<float>(), c.cols, y.as<float>(), c.rows, n, one_entry, tf, s); }, reps, s);
  const double bf_ms = time_ms(
      [&] { cuda::matmul_rows(w, x.as<float>(), c.cols, y.as<float>(), c.rows, n, one_entry, bf, s); }, reps, s);
  const double hf_ms = time_ms(
      [&] { cuda::matmul_rows(w, x.as<float>(), c.cols, y.as<float>(), c.rows, n, one_entry, hf, s); }, reps, s);
  // errors on signed x against the FP32 products
  fill_signed<<<1024, 256>>>(x.as<float>(), size_t(n * c.cols), 7u);
  DS4_CUDA_CHECK_LAUNCH();
  auto product = [&](cuda::MatmulWorkspace& ws, bool f32) {
    if (f32) cuda::matmul_rows_f32(w, x.as<float>(), c.cols, y.as<float>(), c.rows, n, one_entry, ws, s);
    else cuda::matmul_rows(w, x.as<float>(), c.cols, y.as<float>(), c.rows, n, one_entry, ws, s);
    DS4_CUDA_CHECK(cudaStreamSynchronize(s));
    return to_host(y);
  };
  const std::vector<float> ref = product(tf, true);
  const double e_tf = rel_rms(product(tf, false), ref), e_bf = rel_rms(product(bf, false), ref),
               e_hf = rel_rms(product(hf, false), ref);
  // the dense BF16 peak of this shape
  cuda::DeviceBuffer a16(size_t(tile) * 2, "a16"), b16(size_t(n * c.cols) * 2, "b16");
  fill_halves<<<1024, 256>>>(a16.as<uint16_t>(), size_t(tile), 0x3c00);
  fill_halves<<<1024, 256>>>(b16.as<uint16_t>(), size_t(n * c.cols), 0x3c00);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const double peak_ms = time_ms(
      [&] {
        check_cublas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(c.rows), int(n), int(c.cols), &one, a16.get(),
                                  CUDA_R_16BF, int(c.cols), b16.get(), CUDA_R_16BF, int(c.cols), &zero, y.get(),
                                  CUDA_R_32F, int(c.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx bf16");
      },
      reps, s);
  const double flop = 2.0 * double(n) * double(c.rows) * double(c.cols);
  auto tfl = [&](double ms) { return flop / (ms * 1e-3) / 1e12; };
  const double dq_gbps = (double(tile) * 4 + double(data_bytes + 2 * sb)) / (dq_ms * 1e-3) / 1e9;
  std::printf("| %s | %s %lldx%lld | %lld | %.3f (%.0f GB/s, %.0f%% of copy) | %.3f (%.0f) | %.3f (%.0f) | %.3f (%.0f) | "
              "%.3f (%.0f) | %.3f (%.0f) | %.1e | %.1e | %.1e |\n",
              c.what, std::string(dtype_name(c.type)).c_str(), (long long)c.rows, (long long)c.cols, (long long)n,
              dq_ms, dq_gbps, 100.0 * dq_gbps / copy_gbps, gemm_ms, tfl(gemm_ms), whole_ms, tfl(whole_ms), bf_ms,
              tfl(bf_ms), hf_ms, tfl(hf_ms), peak_ms, tfl(peak_ms), e_tf, e_bf, e_hf);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int64_t n = argc > 1 ? std::atoll(argv[1]) : 512;
    const int reps = argc > 2 ? std::atoi(argv[2]) : 10;
    cudaStream_t s;
    DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const double copy = cuda::measure_bandwidth(size_t(1) << 30, 10, s).copy_gbps;
    std::printf("matmul_rows (TF32: dequant_f32 of the matrix, then cublasGemmEx) at %lld rows; ms (GB/s or TFLOP/s); "
                "copy bandwidth %.0f GB/s; bf16 / f16 = MatmulPrecision::kBf16 / kF16; peak = dense BF16 cuBLAS of the same "
                "shape; err = relative RMS difference from matmul_rows_f32\n"
                "| product | weight | rows | dequant ms | gemm ms (TFLOP/s) | whole ms | bf16 ms | f16 ms | peak ms | "
                "tf32 err | bf16 err | f16 err |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
                (long long)n, copy);
    const Case cases[] = {
        {"Qwen GDN in-proj", DType::MLX_Q4, 12352, 2560, 64},
        {"Qwen MoE in (shared gate|up, router)", DType::MLX_Q4, 1536, 2560, 64},
        {"DeepSeek o_b", DType::Q8_0, 4096, 8192, 0},
        {"DeepSeek q_b", DType::Q8_0, 32768, 1024, 0},
        {"GLM q_b", DType::Q8_0, 12288, 2048, 0},
        {"BF16 4096x4096", DType::BF16, 4096, 4096, 0},
    };
    for (const Case& c : cases) run(c, n, reps, copy, s);
    return 0;
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 1;
  }
}
