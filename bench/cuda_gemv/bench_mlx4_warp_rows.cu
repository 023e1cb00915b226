// Prototype measurement (issue #23, session 33): MLX q4 g64 (bf16 scales) GEMV with a warp per
// weight row against the library's gemv on Qwen3.8 Flash Next's decode shapes.
//
// Why: the library's gemv_direct_kernel gives each thread R = 8 rows x one 16-byte unit on
// Qwen's 2560-column experts, so a block is one round of loads, then the decode math, then a
// block reduction, and the ~12 resident warps an SM (142 registers) load and compute in step:
// 46.5 % of copy on the x10 gate|up launch, while MLX q8 on the same launch shape reads twice
// the bytes in 1.22x the time (bench/results/session33-2026-12-07/call5). Here a warp owns one
// or two rows, its lanes stride over the row's units (the loads of all of a lane's units issued
// before anything else), x is staged once per block in shared memory (padded: no bank
// conflicts), and the row's sum is a warp reduction: few registers, more resident warps.
//
// Not exact against gemv (another summation order per row): the bench prints the largest
// |y - y_gemv| / max |y_gemv| so a wrong kernel shows, and the times (CUDA graph of one pass
// over >= 1 GiB of weight copies, median of the replays, per launch) of gemv with and without
// PDL and of the prototype (plain launches). If it wins clearly, the library form must move
// gemv, gemv_rows and qwen_next/cuda/hyper_fused.cu to one new per-row order together (they
// equal each other bit for bit): docs/device-runbook.md, session 33.
//
// Usage: bench_mlx4_warp_rows [reps]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../cuda_fill.cuh"
#include "../cuda_timing.cuh"
#include "backend/cuda/bandwidth.h"
#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/gemv_formats.cuh"
#include "backend/cuda/memory.h"
#include "core/weight.h"

using namespace ds4;
using cuda::gemv_detail::Args;
using cuda::gemv_detail::FromGlobal;
using cuda::gemv_detail::kUnit;
using Fmt = cuda::gemv_detail::MlxAffine<4, true>;
using bench::fill_halves;
using bench::fill_random;

namespace {

constexpr int kWarps = 4;  // warps (rows or row pairs) per block

__host__ __device__ constexpr int64_t padded(int64_t e) { return e + 4 * (e >> 5); }  // 4 floats after every 32

// Rows row0 .. row0 + kRows - 1 of this warp; lane l takes units l, l + 32, ... (< 32 * kUnits).
template <int kRows, int kUnits>
__global__ void __launch_bounds__(kWarps * 32)
    warp_rows_kernel(Args a, const float* __restrict__ x, float* __restrict__ y) {
  extern __shared__ float xs[];
  const int64_t b = blockIdx.y;
  const int64_t e = a.ids ? a.ids[b] : b;
  a.data += e * a.id_stride;
  a.scales = static_cast<const uint8_t*>(a.scales) + e * a.id_scale_stride;
  a.biases = static_cast<const uint8_t*>(a.biases) + e * a.id_scale_stride;
  x += b * a.x_stride;
  y += b * a.y_stride;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row0 = (int64_t(blockIdx.x) * kWarps + warp) * kRows, units = a.cols / kUnit;
  Fmt::Raw raw[kRows][kUnits];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t row = min(row0 + r, a.rows - 1);
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
      const int64_t u = lane + 32 * k;
      if (u < units) raw[r][k] = Fmt::load<FromGlobal>(a, a.data + row * a.row_stride, row, u);
    }
  }
  for (int64_t i = 4 * int64_t(threadIdx.x); i < a.cols; i += 4 * blockDim.x)
    *reinterpret_cast<float4*>(xs + padded(i)) = __ldg(reinterpret_cast<const float4*>(x + i));
  __syncthreads();
  float acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0.f;
#pragma unroll
  for (int k = 0; k < kUnits; ++k) {
    const int64_t u = lane + 32 * k;
    if (u >= units) break;
    float xv[kUnit];
    const float4* xp = reinterpret_cast<const float4*>(xs + padded(u * kUnit));
#pragma unroll
    for (int i = 0; i < kUnit / 4; ++i) {
      const float4 f = xp[i];
      xv[4 * i] = f.x, xv[4 * i + 1] = f.y, xv[4 * i + 2] = f.z, xv[4 * i + 3] = f.w;
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[r] += Fmt::dot2(raw[r][k], u, xv, nullptr);
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float s = cuda::gemv_detail::warp_sum(acc[r]);
    if (lane == 0 && row0 + r < a.rows) y[row0 + r] = s;
  }
}

template <int kRows>
void launch_rows(const Args& a, const float* x, float* y, unsigned batch, cudaStream_t st) {
  const int64_t units = a.cols / kUnit;
  const dim3 grid(unsigned((a.rows + kWarps * kRows - 1) / (kWarps * kRows)), batch);
  const size_t smem = size_t(padded(a.cols)) * sizeof(float);
  if (units <= 32)
    warp_rows_kernel<kRows, 1><<<grid, kWarps * 32, smem, st>>>(a, x, y);
  else if (units <= 64)
    warp_rows_kernel<kRows, 2><<<grid, kWarps * 32, smem, st>>>(a, x, y);
  else if (units <= 96)
    warp_rows_kernel<kRows, 3><<<grid, kWarps * 32, smem, st>>>(a, x, y);
  else if (units <= 128)
    warp_rows_kernel<kRows, 4><<<grid, kWarps * 32, smem, st>>>(a, x, y);
  else
    warp_rows_kernel<kRows, 8><<<grid, kWarps * 32, smem, st>>>(a, x, y);
  DS4_CUDA_CHECK_LAUNCH();
}

__global__ void fill_x(float* p, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = float(int((i * 2654435761u) % 2001) - 1000) / 1000.f;
}

struct Shape {
  int64_t rows, cols;
  int batch;  // > 0: routed over this many experts
  const char* what;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    const int reps = argc > 1 ? std::max(3, std::atoi(argv[1])) : 20;
    cudaDeviceProp prop{};
    DS4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    const cuda::Bandwidth bw = cuda::measure_bandwidth(size_t(2) << 30, 20, nullptr);
    std::printf("device: %s, %d SMs; copy kernel %.0f GB/s\n", prop.name, prop.multiProcessorCount, bw.copy_gbps);
    std::printf(
        "MLX q4 g64 bf16 scales: gemv (PDL on / off) vs a warp per row (1 or 2 rows a warp, x staged once "
        "per block); us per launch, %% of copy over weight + scale/bias bytes; max |y - y_gemv| / max |y_gemv|\n");
    std::printf("%-28s %9s %7s %9s %7s | %9s %7s %6s | %9s %7s %6s | %9s\n", "shape", "gemv us", "% copy", "no-PDL",
                "% copy", "w1 us", "% copy", "x gemv", "w2 us", "% copy", "x gemv", "max rel");
    const Shape shapes[] = {
        {1280, 2560, 10, "qwen gate|up x10"}, {2560, 640, 10, "qwen down x10"}, {16384, 2560, 0, "qwen gdn in"},
        {2560, 4096, 0, "qwen out"},          {4096, 4096, 0, "square"},        {16384, 8192, 0, "large"}};
    cuda::DeviceBuffer dx(sizeof(float) * 16 * 8192, "x"), dy(sizeof(float) * 10 * 16384, "y"),
        dy2(sizeof(float) * 10 * 16384, "y2");
    fill_x<<<256, 256>>>(dx.as<float>(), 16 * 8192);
    DS4_CUDA_CHECK_LAUNCH();
    for (const Shape& s : shapes) {
      const int experts = std::max(1, s.batch);
      WeightMatrix w;
      w.type = DType::MLX_Q4;
      w.rows = s.rows;
      w.cols = s.cols;
      w.group_size = 64;
      w.scale_type = DType::BF16;
      const size_t data_bytes = size_t(s.rows * w.row_stride_bytes()), sb_bytes = size_t(s.rows * (s.cols / 64) * 2);
      const size_t per_copy = experts * (data_bytes + 2 * sb_bytes);
      const int copies = int(std::max<size_t>(1, ((size_t(1) << 30) + per_copy - 1) / per_copy));
      cuda::DeviceBuffer data(copies * experts * data_bytes, "weights"), sc(copies * experts * sb_bytes, "scales"),
          bi(copies * experts * sb_bytes, "biases");
      fill_random<<<1024, 256>>>(data.as<uint32_t>(), data.bytes() / 4, 1234u);
      fill_halves<<<1024, 256>>>(sc.as<uint16_t>(), sc.bytes() / 2, 0x3b00);  // bf16 ~0.002..0.004
      fill_halves<<<1024, 256>>>(bi.as<uint16_t>(), bi.bytes() / 2, 0xbb00);  // bf16 ~-0.002..-0.004
      DS4_CUDA_CHECK_LAUNCH();
      std::vector<int32_t> hid(static_cast<size_t>(experts));
      for (int i = 0; i < experts; ++i) hid[size_t(i)] = i;
      cuda::DeviceBuffer ids(sizeof(int32_t) * size_t(experts), "ids");
      DS4_CUDA_CHECK(cudaMemcpy(ids.get(), hid.data(), ids.bytes(), cudaMemcpyHostToDevice));
      auto view = [&](int c) {
        WeightMatrix v = w;
        v.data = data.as<uint8_t>() + size_t(c) * experts * data_bytes;
        v.scales = sc.as<uint8_t>() + size_t(c) * experts * sb_bytes;
        v.biases = bi.as<uint8_t>() + size_t(c) * experts * sb_bytes;
        return v;
      };
      auto library = [&](int c, cudaStream_t st, float* y) {
        const WeightMatrix v = view(c);
        if (s.batch) {
          cuda::gemv_batched(v, dx.as<float>(), y,
                             cuda::GemvBatch{s.batch, ids.as<int32_t>(), data_bytes, sb_bytes, 0, s.rows}, st,
                             cuda::GemvOptions{cuda::GemvPath::kDirect, 0});
        } else {
          cuda::gemv(v, dx.as<float>(), y, st, cuda::GemvOptions{cuda::GemvPath::kDirect, 0});
        }
      };
      auto proto = [&](int rows_per_warp, int c, cudaStream_t st, float* y) {
        const WeightMatrix v = view(c);
        Args a{static_cast<const uint8_t*>(v.data),
               v.row_stride_bytes(),
               v.scales,
               v.biases,
               s.cols / 64,
               6,
               s.rows,
               s.cols,
               s.batch ? ids.as<int32_t>() : nullptr,
               int64_t(data_bytes),
               int64_t(sb_bytes),
               0,
               s.rows};
        if (rows_per_warp == 1)
          launch_rows<1>(a, dx.as<float>(), y, unsigned(experts), st);
        else
          launch_rows<2>(a, dx.as<float>(), y, unsigned(experts), st);
      };
      const size_t n_y = size_t(experts * s.rows);
      // The check: each prototype against gemv on copy 0.
      library(0, nullptr, dy.as<float>());
      std::vector<float> want(n_y), got(n_y);
      DS4_CUDA_CHECK(cudaDeviceSynchronize());
      DS4_CUDA_CHECK(cudaMemcpy(want.data(), dy.get(), n_y * 4, cudaMemcpyDeviceToHost));
      double max_ref = 0, max_diff = 0;
      for (int rpw : {1, 2}) {
        proto(rpw, 0, nullptr, dy2.as<float>());
        DS4_CUDA_CHECK(cudaDeviceSynchronize());
        DS4_CUDA_CHECK(cudaMemcpy(got.data(), dy2.get(), n_y * 4, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < n_y; ++i) {
          max_ref = std::max(max_ref, double(std::fabs(want[i])));
          const double d = std::fabs(double(got[i]) - double(want[i]));
          max_diff = std::isfinite(got[i]) ? std::max(max_diff, d) : 1e30;
        }
      }
      const double bytes = double(experts) * double(data_bytes + 2 * sb_bytes);
      auto pct = [&](double us) { return 100.0 * bytes / (us * 1e-6) / 1e9 / bw.copy_gbps; };
      // us per launch: one graph of a pass over the copies (>= 1 GiB, past L2), median of the replays
      auto time_us = [&](auto&& launch) {
        return 1e3 *
               bench::graph_ms(
                   [&](cudaStream_t st) {
                     for (int c = 0; c < copies; ++c) launch(c, st);
                   },
                   reps) /
               copies;
      };
      cuda::gemv_set_pdl(true);
      const double g_pdl = time_us([&](int c, cudaStream_t st) { library(c, st, dy.as<float>()); });
      cuda::gemv_set_pdl(false);
      const double g_plain = time_us([&](int c, cudaStream_t st) { library(c, st, dy.as<float>()); });
      cuda::gemv_set_pdl(true);
      const double w1 = time_us([&](int c, cudaStream_t st) { proto(1, c, st, dy2.as<float>()); });
      const double w2 = time_us([&](int c, cudaStream_t st) { proto(2, c, st, dy2.as<float>()); });
      const std::string name = std::to_string(s.rows) + "x" + std::to_string(s.cols) + " " + s.what;
      std::printf("%-28s %9.2f %6.1f%% %9.2f %6.1f%% | %9.2f %6.1f%% %5.2fx | %9.2f %6.1f%% %5.2fx | %9.2e\n",
                  name.c_str(), g_pdl, pct(g_pdl), g_plain, pct(g_plain), w1, pct(w1), g_pdl / w1, w2, pct(w2),
                  g_pdl / w2, max_ref > 0 ? max_diff / max_ref : max_diff);
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 1;
  }
  return 0;
}
