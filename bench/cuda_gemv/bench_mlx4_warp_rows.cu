// Prototype measurement (issue #23, session 33): MLX q4 g64 (bf16 scales) GEMV forms against the
// library's gemv on Qwen3.8 Flash Next's decode shapes.
//
// Why: gemv_direct_kernel gives each thread R = 8 rows x one 16-byte unit on Qwen's 2560-column
// experts: 46.5 % of copy on the x10 gate|up launch, while MLX q8 on the same launch shape reads
// twice the bytes in 1.22x the time (bench/results/session33-2026-12-07/call5).
// - w1 / w2 (form 1): a warp per 1 / 2 rows, lanes over the row's units with all loads issued
//   first, x staged once per block in padded shared memory, a warp reduction. Measured (H100,
//   session 33 call 6): 0.52-0.85x of gemv; its x staging per 4 or 8 rows reads more bytes from L2
//   than the weights are. Kept for the comparison. Another summation order (the max relative
//   deviation from gemv's y is printed).
// - bN sS (form 2): gemv's own split (thread t: unit t of every row; shapes with one unit a thread
//   only) over N rows a block, streamed S rows at a time with the next step's loads issued before
//   this step's math, x loaded once into registers for all N rows (x bytes per weight 4 / N, against
//   4 / 8 in gemv: as many as q4's 0.56 weight bytes), each row's warp sum stored at once, the warps
//   summed in order at the end: gemv's bits (printed 'same' when y is memcmp-equal). Measured
//   (H100, session 33 call 7): gemv's bits on every shape, but 0.71x / 0.68x / 0.33x of gemv (N, S
//   = 32, 2 / 32, 4 / 64, 4) on the x10 gate|up, 0.29-0.48x on the single 4096-column launches: a
//   quarter as many x bytes does not pay for fewer blocks and fewer rows' loads in flight.
//   gemv's own schedule in this form (8 rows in one step) is the library's gemv_one_unit_kernel,
//   column 1u; b16s16
//   holds 16 rows' loads in flight a thread (x bytes 4 / 16 a weight), b16s8 16 rows in two steps
//   (unrun: written after call 7).
// Times: a CUDA graph of one pass over >= 1 GiB of weight copies, median of the replays, per
// launch; gemv with and without PDL, the forms as plain launches. Neither form beats gemv; the
// bench stays as the baseline a next form is measured against (and form 2's bit-equality shows
// how a gemv form can change its schedule without leaving gemv_rows / hyper_fused.cu's bits).
//
// Usage: bench_mlx4_warp_rows [reps]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../cuda_fill.cuh"
#include "../cuda_timing.cuh"
#include "backend/cuda/bandwidth.h"
#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/gemv_formats.cuh"
#include "backend/cuda/gemv_tuning.h"
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

// This block's batch entry (blockIdx.y): its expert's weights, scales and biases, its x and y.
__device__ __forceinline__ void enter_entry(Args& a, const float* __restrict__& x, float* __restrict__& y) {
  const int64_t b = blockIdx.y;
  const int64_t e = a.ids ? a.ids[b] : b;
  a.data += e * a.id_stride;
  a.scales = static_cast<const uint8_t*>(a.scales) + e * a.id_scale_stride;
  a.biases = static_cast<const uint8_t*>(a.biases) + e * a.id_scale_stride;
  x += b * a.x_stride;
  y += b * a.y_stride;
}

// Rows row0 .. row0 + kRows - 1 of this warp; lane l takes units l, l + 32, ... (< 32 * kUnits).
template <int kRows, int kUnits>
__global__ void __launch_bounds__(kWarps * 32)
    warp_rows_kernel(Args a, const float* __restrict__ x, float* __restrict__ y) {
  extern __shared__ float xs[];
  enter_entry(a, x, y);
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

// Form 2 (after form 1 measured 0.52-0.85x of gemv, session 33 call 6: its x staging per 4 or 8 rows
// read more bytes from L2 than the weights; the library's 8 rows a block already read as many x
// bytes (f32, 4 / 8 per weight) as q4 weight bytes (0.56 per weight), against half for MLX q8, the
// likely cause of q4's lower % of copy). gemv_direct_kernel's own split (thread t: unit t of every
// row, threads_for(units) threads; only shapes with one unit a thread), but kRows rows a block
// streamed kStep at a time with the next step's weight loads issued before this step's math, x
// loaded once into registers for all kRows rows (x bytes per weight 4 / kRows), each row's warp sum
// stored at once and the warps summed in order at the end: each row is gemv's sum bit for bit.
template <int kRows, int kStep>
__global__ void __launch_bounds__(128) block_rows_kernel(Args a, const float* __restrict__ x, float* __restrict__ y) {
  static_assert(kRows % kStep == 0, "whole steps");
  __shared__ float part[kRows][4];  // {rows, warps}
  enter_entry(a, x, y);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row0 = int64_t(blockIdx.x) * kRows, u = threadIdx.x;
  const bool live = u < a.cols / kUnit;
  Fmt::Raw cur[kStep], nxt[kStep];
  auto load_step = [&](Fmt::Raw (&raw)[kStep], int step) {
#pragma unroll
    for (int j = 0; j < kStep; ++j) {
      const int64_t row = min(row0 + step * kStep + j, a.rows - 1);
      raw[j] = Fmt::load<FromGlobal>(a, a.data + row * a.row_stride, row, u);
    }
  };
  if (live) load_step(cur, 0);
  float xv[kUnit];
  if (live) {
    const float4* xp = reinterpret_cast<const float4*>(x + u * kUnit);
#pragma unroll
    for (int i = 0; i < kUnit / 4; ++i) {
      const float4 f = __ldg(xp + i);
      xv[4 * i] = f.x, xv[4 * i + 1] = f.y, xv[4 * i + 2] = f.z, xv[4 * i + 3] = f.w;
    }
  }
#pragma unroll
  for (int step = 0; step < kRows / kStep; ++step) {
    if (live && step + 1 < kRows / kStep) load_step(nxt, step + 1);
#pragma unroll
    for (int j = 0; j < kStep; ++j) {
      float acc = 0.f;
      if (live) acc += Fmt::dot2(cur[j], u, xv, nullptr);
      acc = cuda::gemv_detail::warp_sum(acc);
      if (lane == 0) part[step * kStep + j][warp] = acc;
    }
    if (step + 1 < kRows / kStep) {
#pragma unroll
      for (int j = 0; j < kStep; ++j) cur[j] = nxt[j];
    }
  }
  __syncthreads();
  for (int r = threadIdx.x; r < kRows; r += blockDim.x) {
    if (row0 + r >= a.rows) break;
    float sum = 0.f;
    for (int w = 0; w < int(blockDim.x / 32); ++w) sum += part[r][w];
    y[row0 + r] = sum;
  }
}

template <int kRows, int kStep>
void launch_block_rows(const Args& a, const float* x, float* y, unsigned batch, cudaStream_t st) {
  const int64_t units = a.cols / kUnit;
  const int threads = int(std::min<int64_t>(128, (units + 31) / 32 * 32));  // gemv.cu threads_for
  const dim3 grid(unsigned((a.rows + kRows - 1) / kRows), batch);
  block_rows_kernel<kRows, kStep><<<grid, threads, 0, st>>>(a, x, y);
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
    // The prototype forms: name, launcher (Args, x, y, batch, stream), whether it takes the shape.
    struct Form {
      const char* name;
      void (*launch)(const Args&, const float*, float*, unsigned, cudaStream_t);
      bool one_unit_a_thread;  // block rows: gemv's split holds one unit a thread (units <= 128)
    };
    const Form forms[] = {{"w1", launch_rows<1>, false},
                          {"w2", launch_rows<2>, false},
                          {"b32s2", launch_block_rows<32, 2>, true},
                          {"b32s4", launch_block_rows<32, 4>, true},
                          {"b64s4", launch_block_rows<64, 4>, true},
                          {"b16s16", launch_block_rows<16, 16>, true},
                          {"b16s8", launch_block_rows<16, 8>, true}};
    std::printf("1u: gemv with gemv_set_one_unit(true) (gemv_one_unit_kernel where a thread has one unit a row)\n");
    std::printf("forms: w1 / w2 a warp per 1 / 2 rows, x staged per block (not gemv's order: max rel dev); bN sS "
                "gemv's split, N rows a block streamed S at a time, x in registers (gemv's bits: 'same')\n");
    std::printf("%-28s %8s %6s %8s %6s | %8s %6s %6s %4s", "shape", "gemv us", "%copy", "no-PDL", "%copy", "1u us",
                "%copy", "x gemv", "bits");
    for (const Form& f : forms) std::printf(" | %5s us %6s x gemv  dev/same", f.name, "%copy");
    std::printf("\n");
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
      fill_halves<<<1024, 256>>>(sc.as<uint16_t>(), sc.bytes() / 2, 0x3b00);  // bf16 ~0.002..0.008
      fill_halves<<<1024, 256>>>(bi.as<uint16_t>(), bi.bytes() / 2, 0xbb00);  // bf16 ~-0.002..-0.008
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
      auto proto = [&](const Form& f, int c, cudaStream_t st, float* y) {
        const WeightMatrix v = view(c);
        const Args a{static_cast<const uint8_t*>(v.data), v.row_stride_bytes(), v.scales, v.biases, s.cols / 64, 6,
                     s.rows, s.cols, s.batch ? ids.as<int32_t>() : nullptr, int64_t(data_bytes), int64_t(sb_bytes), 0,
                     s.rows};
        f.launch(a, dx.as<float>(), y, unsigned(experts), st);
      };
      const size_t n_y = size_t(experts * s.rows);
      std::vector<float> want(n_y), got(n_y);
      library(0, nullptr, dy.as<float>());
      DS4_CUDA_CHECK(cudaDeviceSynchronize());
      DS4_CUDA_CHECK(cudaMemcpy(want.data(), dy.get(), n_y * 4, cudaMemcpyDeviceToHost));
      const double bytes = double(experts) * double(data_bytes + 2 * sb_bytes);
      auto pct = [&](double us) { return 100.0 * bytes / (us * 1e-6) / 1e9 / bw.copy_gbps; };
      // us per launch: one graph of a pass over the copies (>= 1 GiB, past L2), median of the replays
      auto time_us = [&](auto&& launch) {
        return 1e3 * bench::graph_ms([&](cudaStream_t st) { for (int c = 0; c < copies; ++c) launch(c, st); }, reps) /
               copies;
      };
      cuda::gemv_set_pdl(true);
      const double g_pdl = time_us([&](int c, cudaStream_t st) { library(c, st, dy.as<float>()); });
      cuda::gemv_set_pdl(false);
      const double g_plain = time_us([&](int c, cudaStream_t st) { library(c, st, dy.as<float>()); });
      cuda::gemv_set_pdl(true);
      cuda::gemv_set_one_unit(true);  // the library's one-unit-a-thread kernel (gemv_set_one_unit), PDL on
      const double g_one = time_us([&](int c, cudaStream_t st) { library(c, st, dy2.as<float>()); });
      cuda::gemv_set_one_unit(false);
      const bool one_same = [&] {
        cuda::gemv_set_one_unit(true);
        library(0, nullptr, dy2.as<float>());
        cuda::gemv_set_one_unit(false);
        DS4_CUDA_CHECK(cudaDeviceSynchronize());
        DS4_CUDA_CHECK(cudaMemcpy(got.data(), dy2.get(), n_y * 4, cudaMemcpyDeviceToHost));
        return std::memcmp(got.data(), want.data(), n_y * 4) == 0;
      }();
      const std::string name = std::to_string(s.rows) + "x" + std::to_string(s.cols) + " " + s.what;
      std::printf("%-28s %8.2f %5.1f%% %8.2f %5.1f%% | %8.2f %5.1f%% %5.2fx %4s", name.c_str(), g_pdl, pct(g_pdl),
                  g_plain, pct(g_plain), g_one, pct(g_one), g_pdl / g_one, one_same ? "same" : "DIFF");
      for (const Form& f : forms) {
        if (f.one_unit_a_thread && s.cols / kUnit > 128) {
          std::printf(" | %8s %6s %6s %9s", "-", "-", "-", "-");
          continue;
        }
        DS4_CUDA_CHECK(cudaMemset(dy2.get(), 0xff, n_y * 4));
        proto(f, 0, nullptr, dy2.as<float>());
        DS4_CUDA_CHECK(cudaDeviceSynchronize());
        DS4_CUDA_CHECK(cudaMemcpy(got.data(), dy2.get(), n_y * 4, cudaMemcpyDeviceToHost));
        double max_ref = 0, max_diff = 0;
        for (size_t i = 0; i < n_y; ++i) {
          max_ref = std::max(max_ref, double(std::fabs(want[i])));
          max_diff = std::isfinite(got[i]) ? std::max(max_diff, std::fabs(double(got[i]) - double(want[i]))) : 1e30;
        }
        const bool same = std::memcmp(got.data(), want.data(), n_y * 4) == 0;
        const double us = time_us([&](int c, cudaStream_t st) { proto(f, c, st, dy2.as<float>()); });
        char dev[32];
        if (same) std::snprintf(dev, sizeof dev, "same");
        else std::snprintf(dev, sizeof dev, "%.2e", max_ref > 0 ? max_diff / max_ref : max_diff);
        std::printf(" | %8.2f %5.1f%% %5.2fx %9s", us, pct(us), g_pdl / us, dev);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::printf("FATAL %s\n", e.what());
    return 1;
  }
  return 0;
}
