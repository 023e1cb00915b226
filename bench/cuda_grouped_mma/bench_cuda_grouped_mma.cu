// The routed experts of one prefill chunk on tensor cores (grouped_mma_bf16 after moe_group), at
// the full-size shapes of the three families, as achieved TFLOP/s against a dense BF16 cuBLAS
// GEMM measured in the same run (the physical limit this product can approach).
//
// Per case: E experts of a weight format at a stride (random bytes: timing only), a chunk of T
// tokens each routed to K distinct uniformly drawn experts, moe_group over the ids, then
// grouped_mma_bf16 over the entries with 1 entry per block (each entry decodes its expert
// tile again: the kernel a chunk with <= 16 rows per expert on average takes) and with up to
// kGroupedMmaMaxEntries entries of one expert per block (one decoded tile shared: the kernel
// of chunks with more). Work counted: 2 * T * K * rows * cols (the useful multiply-adds).
// Also: moe_group's own time, and BF16 experts at the DeepSeek gate|up shape (their "decode"
// is a copy: the gap to the quantized formats is the decode's cost).
//
// Usage: bench_cuda_grouped_mma [reps=20]
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/moe_group.h"
#include "core/weight.h"

#include "../cuda_fill.cuh"

using namespace ds4;
using bench::fill_halves;
using bench::fill_random;

namespace {

__global__ void fill_floats(float* p, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = float(int(i % 17) - 8) * 0.01f;
}

struct Case {
  const char* what;
  DType type;
  int64_t experts, k, rows, cols, group;  // group: MLX group size (0: none)
};

double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median ms of `reps` runs of f on stream s (one warm-up).
template <class F>
double time_ms(F&& f, int reps, cudaStream_t s) {
  cudaEvent_t a, b;
  DS4_CUDA_CHECK(cudaEventCreate(&a));
  DS4_CUDA_CHECK(cudaEventCreate(&b));
  f();
  std::vector<float> ms(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    DS4_CUDA_CHECK(cudaEventRecord(a, s));
    f();
    DS4_CUDA_CHECK(cudaEventRecord(b, s));
    DS4_CUDA_CHECK(cudaEventSynchronize(b));
    DS4_CUDA_CHECK(cudaEventElapsedTime(ms.data() + r, a, b));
  }
  DS4_CUDA_CHECK(cudaEventDestroy(a));
  DS4_CUDA_CHECK(cudaEventDestroy(b));
  return median(ms);
}

// Dense BF16 GEMM (FP32 accumulate) m x n x k on cuBLAS: the peak this machine gives a product
// of this kind, in TFLOP/s.
double dense_bf16_tflops(int m, int n, int k, int reps, cudaStream_t s) {
  cuda::DeviceBuffer a(size_t(m) * k * 2, "dense a"), b(size_t(n) * k * 2, "dense b"), c(size_t(m) * n * 4, "dense c");
  fill_halves<<<1024, 256>>>(a.as<uint16_t>(), size_t(m) * k, 0x3c00);
  fill_halves<<<1024, 256>>>(b.as<uint16_t>(), size_t(n) * k, 0x3c00);
  DS4_CUDA_CHECK_LAUNCH();
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate");
  cublasSetStream(h, s);
  const float one = 1.f, zero = 0.f;
  auto run = [&] {
    if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, a.get(), CUDA_R_16BF, k, b.get(), CUDA_R_16BF, k, &zero,
                     c.get(), CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error("cublasGemmEx");
  };
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const double ms = time_ms(run, reps, s);
  cublasDestroy(h);
  return 2.0 * m * n * k / (ms * 1e-3) / 1e12;
}

void bench_case(const Case& c, int64_t tokens, int reps, double peak, cudaStream_t s) {
  WeightMatrix w;
  w.type = c.type, w.rows = c.rows, w.cols = c.cols;
  w.group_size = c.group;
  w.scale_type = DType::BF16;
  const size_t data_bytes = size_t(c.rows * w.row_stride_bytes()), stride = (data_bytes + 255) / 256 * 256;
  const size_t sb = c.group ? size_t(c.rows * (c.cols / c.group) * 2) : 0;
  cuda::DeviceBuffer data(stride * size_t(c.experts), "bench experts"), sc, bi;
  fill_random<<<1024, 256>>>(data.as<uint32_t>(), data.bytes() / 4, 77u);
  if (c.type == DType::BF16) fill_halves<<<1024, 256>>>(data.as<uint16_t>(), data.bytes() / 2, 0x3c00);
  if (sb) {
    sc = cuda::DeviceBuffer(sb * size_t(c.experts), "bench scales");
    bi = cuda::DeviceBuffer(sb * size_t(c.experts), "bench biases");
    fill_halves<<<1024, 256>>>(sc.as<uint16_t>(), sc.bytes() / 2, 0x3b00);
    fill_halves<<<1024, 256>>>(bi.as<uint16_t>(), bi.bytes() / 2, 0xbb00);
  }
  DS4_CUDA_CHECK_LAUNCH();
  w.data = data.get(), w.scales = sb ? sc.get() : nullptr, w.biases = sb ? bi.get() : nullptr;
  // routing: K distinct experts per token, uniform
  std::mt19937 rng(uint32_t(tokens * 31 + c.experts));
  std::vector<int32_t> ids(size_t(tokens * c.k)), perm(size_t(c.experts));
  std::iota(perm.begin(), perm.end(), 0);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < c.k; ++j) std::swap(perm[size_t(j)], perm[size_t(j + int64_t(rng() % uint32_t(c.experts - j)))]);
    for (int64_t j = 0; j < c.k; ++j) ids[size_t(t * c.k + j)] = perm[size_t(j)];
  }
  const int64_t S = cuda::kGemvMaxRows, pairs = tokens * c.k, entries = cuda::moe_group_entries(tokens, c.k, c.experts, S);
  cuda::DeviceBuffer di(ids.size() * 4, "ids"), de(size_t(entries) * 4, "experts"), dl(4, "live"),
      dc(size_t(entries) * 4, "counts"), dt(size_t(entries * S) * 4, "tok"), ds(size_t(entries * S) * 4, "slot");
  DS4_CUDA_CHECK(cudaMemcpy(di.get(), ids.data(), di.bytes(), cudaMemcpyHostToDevice));
  const cuda::MoeGroup g{de.as<int32_t>(), dl.as<int32_t>(), dc.as<int32_t>(), dt.as<int32_t>(), ds.as<int32_t>(), S};
  // s does not wait for the default stream: the fills and the ids' copy must be done first
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const double group_ms = time_ms([&] { cuda::moe_group(di.as<int32_t>(), tokens, c.k, c.experts, g, s); }, reps, s);
  int32_t live = 0;
  DS4_CUDA_CHECK(cudaMemcpy(&live, dl.get(), 4, cudaMemcpyDeviceToHost));
  // x {tokens, cols} -> y {pairs, rows}, as gate|up reads the chunk's rows
  cuda::DeviceBuffer dx(size_t(tokens * c.cols) * 4, "x"), dy(size_t(pairs * c.rows) * 4, "y");
  fill_floats<<<1024, 256>>>(dx.as<float>(), size_t(tokens * c.cols));
  DS4_CUDA_CHECK_LAUNCH();
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  cuda::GemvRows r;
  r.n = int(std::min<int64_t>(tokens, S));
  r.batch = cuda::GemvBatch{int(entries), g.experts, stride, sb, 0, 0};
  r.live = g.live, r.counts = g.counts;
  r.x_row = c.cols, r.x_idx = g.tok, r.y_row = c.rows, r.y_idx = g.slot;
  const double flop = 2.0 * double(pairs) * double(c.rows) * double(c.cols);
  double ms[2];
  const int keep = cuda::grouped_mma_entries_per_block();
  for (int v = 0; v < 2; ++v) {
    cuda::grouped_mma_set_entries_per_block(v == 0 ? 1 : cuda::kGroupedMmaMaxEntries);
    ms[v] = time_ms([&] { cuda::grouped_mma_bf16(w, dx.as<float>(), dy.as<float>(), r, s); }, reps, s);
  }
  cuda::grouped_mma_set_entries_per_block(keep);
  const double used = std::min<double>(double(c.experts), double(live));
  const double weights_decoded_1 = double(live) * double(c.rows * c.cols);  // one block per entry
  std::printf("| %s | %s %lldx%lld | %lld | %lld x %lld = %lld | %d | %.3f | %.3f (%.1f / %.1f%%) | %.3f (%.1f / %.1f%%) | "
              "%.2fx | %.2f |\n",
              c.what, std::string(dtype_name(c.type)).c_str(), (long long)c.rows, (long long)c.cols, (long long)c.experts, (long long)tokens,
              (long long)c.k, (long long)pairs, live, group_ms, ms[0], flop / (ms[0] * 1e-3) / 1e12,
              100.0 * flop / (ms[0] * 1e-3) / 1e12 / peak, ms[1], flop / (ms[1] * 1e-3) / 1e12,
              100.0 * flop / (ms[1] * 1e-3) / 1e12 / peak, ms[0] / ms[1], weights_decoded_1 / (ms[0] * 1e-3) / 1e12);
  (void)used;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int reps = argc > 1 ? std::max(3, std::atoi(argv[1])) : 20;
    cudaStream_t s;
    DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaDeviceProp p{};
    DS4_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    const double peak = dense_bf16_tflops(8192, 8192, 8192, reps, s);
    const double peak_small = dense_bf16_tflops(4096, 512, 4096, reps, s);
    std::printf("%s: dense BF16 cuBLAS GEMM (FP32 accumulate) 8192^3: %.1f TFLOP/s (the reference below); "
                "4096x512x4096: %.1f TFLOP/s\n",
                p.name, peak, peak_small);
    std::printf("routed experts of one chunk: moe_group, then grouped_mma_bf16 with 1 entry (<= 16 rows) per block "
                "and with up to %d entries of one expert per block; TFLOP/s = 2 * pairs * rows * cols / time; "
                "%% of the dense reference\n",
                cuda::kGroupedMmaMaxEntries);
    std::printf("| family | weight | E | chunk x top-k = pairs | entries | moe_group ms | 1 entry/block ms (TFLOP/s / %%) "
                "| shared tiles ms (TFLOP/s / %%) | speed-up | T weights decoded/s (1 entry/block) |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    const Case cases[] = {
        {"DeepSeek V4 Flash gate|up", DType::IQ2_XXS, 256, 6, 4096, 4096, 0},
        {"DeepSeek V4 Flash down", DType::Q2_K, 256, 6, 4096, 2048, 0},
        {"GLM 5.x Flash gate|up", DType::Q2_K, 288, 8, 4096, 4096, 0},
        {"GLM 5.x Flash down", DType::Q2_K, 288, 8, 4096, 2048, 0},
        {"Qwen3.8 Flash Next gate|up", DType::MLX_Q4, 512, 10, 1280, 2560, 64},
        {"Qwen3.8 Flash Next down", DType::MLX_Q4, 512, 10, 2560, 640, 64},
        {"BF16 experts, DeepSeek gate|up shape", DType::BF16, 256, 6, 4096, 4096, 0},
    };
    for (int64_t tokens : {512, 1024, 2048})
      for (const Case& c : cases) bench_case(c, tokens, reps, peak, s);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FATAL: %s\n", e.what());
    return 1;
  }
}
