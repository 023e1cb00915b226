// The routed experts of one prefill chunk at the full-size shapes of the three families, three
// ways in the same run, as achieved TFLOP/s against a dense BF16 cuBLAS GEMM (the physical limit
// this product can approach):
//   old   grouped_mma_bf16 after moe_group with the kernel a chunk picks (1 entry per block at
//         <= 16 rows per expert on average, else up to kGroupedMmaMaxEntries entries of one
//         expert per block sharing a decoded tile);
//   new   GroupedGemm (grouped_gemm.h): x rows gathered to BF16, experts decoded to BF16 in
//         batches of kGroupedGemmBatchExperts, cublasGemmGroupedBatchedEx per batch, scattered
//         back (mode 1), and the same with one cublasGemmEx per expert (mode 2); its plan (the
//         grouping read back: one stream sync per MoE layer, shared by both projections) timed
//         apart, on the host clock;
//   check max |new - old| / max |old| over the chunk's outputs (both round the same BF16
//         operands; only the FP32 summation order differs: expect ~1e-6, flag > 1e-3).
// Per case: E experts of a weight format at a stride (random bytes with finite scales), a chunk
// of T tokens each routed to K distinct uniformly drawn experts. Work counted: 2 * T * K * rows
// * cols (the useful multiply-adds).
//
//   planes grouped_mma_int8_planes (two Q8_K planes per token) in the int8 table, Q2_K / IQ2_XXS.
//   int8  grouped_mma_int8 on the chunk's rows quantized by quantize_act (the formats with an
//         activation block: DeepSeek's and GLM's), its own table.
// Usage: bench_cuda_grouped_mma [reps=20] [max tokens=4096] [sweep: also the GroupedGemm batch sweep]
//   DS4_BENCH_CASE=text: only the cases whose family column contains it; DS4_BENCH_TOKENS=N: only chunks
//   of N tokens (both for ncu runs over one kernel shape)
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/bandwidth.h"
#include "backend/cuda/check.h"
#include "backend/cuda/dequant.h"
#include "backend/cuda/grouped_gemm.h"
#include "backend/cuda/gemv_act.h"
#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/grouped_mma_int8.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/moe_group.h"
#include "core/weight.h"

#include "../cuda_fill.cuh"
#include "../cuda_timing.cuh"

using namespace ds4;
using bench::fill_halves;
using bench::fill_random;
using bench::time_ms;

namespace {

__global__ void fill_floats(float* p, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = float(int(i % 17) - 8) * 0.01f;
}

// The f16 scale fields (byte offsets off0, off1 < 0: none) of every block of every expert made
// finite and small: random bits hold NaN / Inf patterns, and the self-check compares values.
__global__ void tame_f16_fields(uint8_t* data, size_t stride, int64_t experts, int64_t blocks, int block_bytes, int off0,
                                int off1) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < experts * blocks;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint8_t* p = data + (i / blocks) * stride + (i % blocks) * block_bytes;
    for (int off : {off0, off1})
      if (off >= 0) {
        uint16_t* h = reinterpret_cast<uint16_t*>(p + off);
        *h = uint16_t((*h & 0x83ffu) | 0x1c00u);  // exponent 7: |d| in [2^-8, 2^-7)
      }
  }
}

struct Case {
  const char* what;
  DType type;
  int64_t experts, k, rows, cols, group;  // group: MLX group size (0: none)
};

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

// Lines of the batch-size sweep (printed after the main table).
std::string g_sweep;
// grouped_mma_bf16 as GB/s of the expert weights the chunk reads, against the copy bandwidth
// (cuda::measure_bandwidth: read + written bytes / time) measured in the same run.
std::string g_bytes_table;
// grouped_mma_int8 (formats with an activation block) against grouped_mma_bf16 as a chunk picks it.
std::string g_int8_table;
double g_copy_gbps = 1;

// sweep: also the new path with at most 1, 2, 4, 8, 16 experts per weight batch (L2 residency
// of the decoded experts vs GEMM tiles in flight), into g_sweep.
void bench_case(const Case& c, int64_t tokens, int reps, double peak, cudaStream_t s, bool sweep = false) {
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
  if (c.type == DType::Q2_K)
    tame_f16_fields<<<1024, 256>>>(data.as<uint8_t>(), stride, c.experts, c.rows * c.cols / 256, 84, 80, 82);
  if (c.type == DType::IQ2_XXS)
    tame_f16_fields<<<1024, 256>>>(data.as<uint8_t>(), stride, c.experts, c.rows * c.cols / 256, 66, 0, -1);
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
  // x {tokens, cols} -> y {pairs, rows}, as gate|up reads the chunk's rows
  cuda::DeviceBuffer dx(size_t(tokens * c.cols) * 4, "x"), dy(size_t(pairs * c.rows) * 4, "y"),
      dy_old(dy.bytes(), "y old");
  fill_floats<<<1024, 256>>>(dx.as<float>(), size_t(tokens * c.cols));
  DS4_CUDA_CHECK_LAUNCH();
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  cuda::GemvRows r;
  r.n = int(std::min<int64_t>(tokens, S));
  r.batch = cuda::GemvBatch{int(entries), g.experts, stride, sb, 0, 0};
  r.live = g.live, r.counts = g.counts;
  r.x_row = c.cols, r.x_idx = g.tok, r.y_row = c.rows, r.y_idx = g.slot;
  const double flop = 2.0 * double(pairs) * double(c.rows) * double(c.cols);
  auto tflops = [&](double ms) { return flop / (ms * 1e-3) / 1e12; };
  const int64_t rows_per_expert = pairs / c.experts;
  // weight bytes the chunk must read: every expert used once (data, and MLX scales + biases)
  std::vector<char> used(size_t(c.experts), 0);
  for (int32_t e : ids) used[size_t(e)] = 1;
  const double wbytes_read = double(std::count(used.begin(), used.end(), 1)) * double(data_bytes + 2 * sb);
  const int keep = cuda::grouped_mma_entries_per_block();
  double g_ms[3];  // forced 1, 2, kGroupedMmaMaxEntries entries per block
  const int gs[3] = {1, 2, cuda::kGroupedMmaMaxEntries};
  for (int i = 0; i < 3; ++i) {
    cuda::grouped_mma_set_entries_per_block(gs[i]);
    g_ms[i] = time_ms([&] { cuda::grouped_mma_bf16(w, dx.as<float>(), dy_old.as<float>(), r, s, rows_per_expert); },
                      reps, s);
  }
  cuda::grouped_mma_set_entries_per_block(0);  // the kernel a chunk picks
  const bool keep_ring = cuda::grouped_mma_x_ring();
  cuda::grouped_mma_set_x_ring(true);
  const double ring_ms =
      time_ms([&] { cuda::grouped_mma_bf16(w, dx.as<float>(), dy_old.as<float>(), r, s, rows_per_expert); }, reps, s);
  cuda::grouped_mma_set_x_ring(keep_ring);
  // BF16 x rows (grouped_mma_bf16_x16): the conversion once per chunk and matrix input, timed apart
  cuda::DeviceBuffer dx16(size_t(tokens * c.cols) * 2, "x bf16");
  const double x16_conv_ms =
      time_ms([&] { cuda::rows_to_bf16(dx.as<float>(), c.cols, tokens, c.cols, dx16.get(), s); }, reps, s);
  const double x16_ms =
      time_ms([&] { cuda::grouped_mma_bf16_x16(w, dx16.get(), dy_old.as<float>(), r, s, rows_per_expert); }, reps, s);
  // the same compiled for one block per SM at 4 entries (grouped_mma_set_occupancy(1), the default
  // before session 27 call 2; G < 4: the same kernel)
  const int keep_occ = cuda::grouped_mma_occupancy();
  cuda::grouped_mma_set_occupancy(1);
  const double x16_occ1_ms =
      time_ms([&] { cuda::grouped_mma_bf16_x16(w, dx16.get(), dy_old.as<float>(), r, s, rows_per_expert); }, reps, s);
  cuda::grouped_mma_set_occupancy(keep_occ);
  const double old_ms =
      time_ms([&] { cuda::grouped_mma_bf16(w, dx.as<float>(), dy_old.as<float>(), r, s, rows_per_expert); }, reps, s);
  cuda::grouped_mma_set_entries_per_block(keep);
  auto gbps = [&](double ms) { return wbytes_read / (ms * 1e-3) / 1e9; };
  if (c.type == DType::IQ2_XXS || c.type == DType::Q2_K || c.type == DType::Q8_0) {
    // the int8 path: the chunk's rows quantized once (timed apart), then the grouped int8 MMA
    const ActBlock blk = act_block_for(c.type);
    cuda::DeviceBuffer qb(size_t(tokens) * cuda::act_q8_row_bytes(blk, c.cols), "bench xq"), dy8(dy.bytes(), "y int8"),
        dys(dy.bytes(), "y int8 staged");
    const cuda::DeviceActQ8 xq = cuda::act_q8_carve(qb.get(), blk, c.cols, tokens);
    const double q_ms = time_ms([&] { cuda::quantize_act(dx.as<float>(), c.cols, tokens, xq, s); }, reps, s);
    auto int8_ms = [&](bool staged, cuda::DeviceBuffer& out) {
      const bool keep_staged = cuda::grouped_mma_int8_staged();
      cuda::grouped_mma_int8_set_staged(staged);
      const double ms =
          time_ms([&] { cuda::grouped_mma_int8(w, xq.row(0), out.as<float>(), r, s, rows_per_expert); }, reps, s);
      cuda::grouped_mma_int8_set_staged(keep_staged);
      return ms;
    };
    const double staged_ms = int8_ms(true, dys), i8_ms = int8_ms(false, dy8);
    DS4_CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<float> a8(size_t(pairs * c.rows)), ab(a8.size()), as(a8.size());
    DS4_CUDA_CHECK(cudaMemcpy(a8.data(), dy8.get(), dy8.bytes(), cudaMemcpyDeviceToHost));
    DS4_CUDA_CHECK(cudaMemcpy(as.data(), dys.get(), dys.bytes(), cudaMemcpyDeviceToHost));
    // the staged kernel's contract: the unstaged kernel's bits (Q8_0 runs the unstaged one either way)
    size_t staged_diff = 0;
    for (size_t i = 0; i < a8.size(); ++i) staged_diff += std::memcmp(&a8[i], &as[i], 4) != 0;
    DS4_CUDA_CHECK(cudaMemcpy(ab.data(), dy_old.get(), dy_old.bytes(), cudaMemcpyDeviceToHost));
    double md = 0, mb = 0;
    for (size_t i = 0; i < a8.size(); ++i) {
      md = std::max(md, double(std::fabs(a8[i] - ab[i])));
      mb = std::max(mb, double(std::fabs(ab[i])));
    }
    if (!std::all_of(a8.begin(), a8.end(), [](float v) { return std::isfinite(v); })) md = INFINITY;
    // two Q8_K planes (grouped_mma_int8_planes: models without ds4's activation quantization):
    // entries of at most 8 tokens (moe_group with a stride of 8), the planes quantized once
    double pl_ms = NAN, pl_q_ms = NAN, pl_err = NAN;
    if (c.type != DType::Q8_0) {
      const int64_t S2 = cuda::kGemvMaxRows / 2, e2 = cuda::moe_group_entries(tokens, c.k, c.experts, S2);
      cuda::DeviceBuffer de2(size_t(e2) * 4, "experts 8"), dc2(size_t(e2) * 4, "counts 8"), dt2(size_t(e2 * S2) * 4, "tok 8"),
          ds2(size_t(e2 * S2) * 4, "slot 8"), qp(size_t(2 * tokens) * cuda::act_q8_row_bytes(blk, c.cols), "planes"),
          dyp(dy.bytes(), "y planes");
      const cuda::MoeGroup g2{de2.as<int32_t>(), dl.as<int32_t>(), dc2.as<int32_t>(), dt2.as<int32_t>(), ds2.as<int32_t>(), S2};
      cuda::moe_group(di.as<int32_t>(), tokens, c.k, c.experts, g2, s);
      const cuda::DeviceActQ8 xp = cuda::act_q8_carve(qp.get(), blk, c.cols, 2 * tokens);
      pl_q_ms = time_ms([&] { cuda::quantize_act_planes(dx.as<float>(), c.cols, tokens, xp, s); }, reps, s);
      cuda::GemvRows r2 = r;
      r2.n = int(std::min<int64_t>(tokens, S2)), r2.idx_stride = int(S2);
      r2.batch = cuda::GemvBatch{int(e2), g2.experts, stride, sb, 0, 0};
      r2.counts = g2.counts, r2.x_idx = g2.tok, r2.y_idx = g2.slot, r2.x_row = 2 * c.cols;
      pl_ms = time_ms([&] { cuda::grouped_mma_int8_planes(w, xp.row(0), dyp.as<float>(), r2, s, rows_per_expert); }, reps, s);
      DS4_CUDA_CHECK(cudaStreamSynchronize(s));
      std::vector<float> ap(a8.size());
      DS4_CUDA_CHECK(cudaMemcpy(ap.data(), dyp.get(), dyp.bytes(), cudaMemcpyDeviceToHost));
      double mp = 0;
      for (size_t i = 0; i < ap.size(); ++i) mp = std::max(mp, double(std::fabs(ap[i] - ab[i])));
      if (!std::all_of(ap.begin(), ap.end(), [](float v) { return std::isfinite(v); })) mp = INFINITY;
      pl_err = mp / std::max(mb, 1e-30);
    }
    char line[640];
    std::snprintf(line, sizeof line,
                  "| %s | %s %lldx%lld | %lld x %lld = %lld | %lld | %.0f | %.3f (%.0f / %.1f%%) | %.3f (%.0f / %.1f%%) | "
                  "%.3f (%.0f / %.1f%%) | %zu | %.3f | %.2fx | %.2fx | %.1e | %.3f (%.0f / %.1f%%) | %.3f | %.2fx | %.1e |\n",
                  c.what, std::string(dtype_name(c.type)).c_str(), (long long)c.rows, (long long)c.cols,
                  (long long)tokens, (long long)c.k, (long long)pairs, (long long)rows_per_expert, wbytes_read / 1e6,
                  old_ms, gbps(old_ms), 100.0 * gbps(old_ms) / g_copy_gbps, i8_ms, gbps(i8_ms),
                  100.0 * gbps(i8_ms) / g_copy_gbps, staged_ms, gbps(staged_ms), 100.0 * gbps(staged_ms) / g_copy_gbps,
                  staged_diff, q_ms, old_ms / i8_ms, i8_ms / staged_ms, md / std::max(mb, 1e-30), pl_ms, gbps(pl_ms),
                  100.0 * gbps(pl_ms) / g_copy_gbps, pl_q_ms, old_ms / pl_ms, pl_err);
    g_int8_table += line;
  }
  {
    char line[512];
    std::snprintf(line, sizeof line,
                  "| %s | %s %lldx%lld | %lld x %lld = %lld | %lld | %.0f | %.3f (%.0f / %.1f%%) | %.3f (%.0f / %.1f%%) | "
                  "%.3f (%.0f / %.1f%%) | %.3f (%.0f / %.1f%%) | %.3f (%.0f / %.1f%%) | %.3f (%.0f / %.1f%%) + %.3f | "
                  "%.3f (%.0f / %.1f%%) |\n",
                  c.what, std::string(dtype_name(c.type)).c_str(), (long long)c.rows, (long long)c.cols,
                  (long long)tokens, (long long)c.k, (long long)pairs, (long long)rows_per_expert, wbytes_read / 1e6,
                  old_ms, gbps(old_ms), 100.0 * gbps(old_ms) / g_copy_gbps, g_ms[0], gbps(g_ms[0]),
                  100.0 * gbps(g_ms[0]) / g_copy_gbps, g_ms[1], gbps(g_ms[1]), 100.0 * gbps(g_ms[1]) / g_copy_gbps,
                  g_ms[2], gbps(g_ms[2]), 100.0 * gbps(g_ms[2]) / g_copy_gbps, ring_ms, gbps(ring_ms),
                  100.0 * gbps(ring_ms) / g_copy_gbps, x16_ms, gbps(x16_ms), 100.0 * gbps(x16_ms) / g_copy_gbps,
                  x16_conv_ms, x16_occ1_ms, gbps(x16_occ1_ms), 100.0 * gbps(x16_occ1_ms) / g_copy_gbps);
    g_bytes_table += line;
  }
  // the new path (its own scratch, as a model's load sizes it)
  cuda::MatmulWorkspace mm(1, 128, 128, 1, "bench grouped gemm handle", cuda::MatmulPrecision::kBf16);
  const size_t wbytes = size_t(std::min(c.experts, cuda::kGroupedGemmBatchExperts) * c.rows * c.cols) * 2;
  cuda::GroupedGemm gg(entries, c.rows, c.cols, wbytes, mm, "bench");
  std::vector<double> plan_ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    gg.plan(r, s);
    plan_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(plan_ms.begin(), plan_ms.end());
  const int mode = cuda::grouped_gemm_mode();
  double new_ms[2];
  // Mode 1 (the grouped call) is timed only where cuBLAS supports it (NaN otherwise: CUDA 13
  // answers NOT_SUPPORTED for BF16 in / FP32 out); mode 2 is the checked path.
  for (int m = 1; m <= 2; ++m) {
    cuda::grouped_gemm_set_mode(m);
    try {
      new_ms[m - 1] = time_ms([&] { gg.run(w, dx.as<float>(), dy.as<float>(), r, s); }, reps, s);
    } catch (const std::exception&) {
      if (m == 2) throw;
      new_ms[0] = std::nan("");
    }
  }
  cuda::grouped_gemm_set_mode(2);
  if (sweep) {
    const int64_t keep_batch = cuda::grouped_gemm_batch_experts();
    char line[160];
    for (int64_t b : {1, 2, 4, 8, 16}) {
      cuda::grouped_gemm_set_batch_experts(b);
      const double ms = time_ms([&] { gg.run(w, dx.as<float>(), dy.as<float>(), r, s); }, reps, s);
      std::snprintf(line, sizeof line, "| %s | %lld | %lld | %.3f (%.1f) |\n", c.what, (long long)tokens, (long long)b,
                    ms, tflops(ms));
      g_sweep += line;
    }
    cuda::grouped_gemm_set_batch_experts(keep_batch);
  }
  gg.run(w, dx.as<float>(), dy.as<float>(), r, s);  // the checked output: mode 2's
  cuda::grouped_gemm_set_mode(mode);
  DS4_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<float> yn(size_t(pairs * c.rows)), yo(yn.size());
  DS4_CUDA_CHECK(cudaMemcpy(yn.data(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(yo.data(), dy_old.get(), dy_old.bytes(), cudaMemcpyDeviceToHost));
  double max_diff = 0, max_old = 0;
  int64_t bad = 0;  // non-finite in either
  for (size_t i = 0; i < yn.size(); ++i) {
    if (!std::isfinite(yn[i]) || !std::isfinite(yo[i])) {
      ++bad;
      continue;
    }
    max_diff = std::max(max_diff, double(std::fabs(yn[i] - yo[i])));
    max_old = std::max(max_old, double(std::fabs(yo[i])));
  }
  const double err = max_diff / std::max(max_old, 1e-30);
  std::printf("| %s | %s %lldx%lld | %lld | %lld x %lld = %lld | %lld | %lld | %.3f | %.3f (%.1f / %.1f%%) | "
              "%.3f (%.1f / %.1f%%) | %.3f (%.1f) | %.3f | %.2fx | %.1e%s |\n",
              c.what, std::string(dtype_name(c.type)).c_str(), (long long)c.rows, (long long)c.cols,
              (long long)c.experts, (long long)tokens, (long long)c.k, (long long)pairs, (long long)rows_per_expert,
              (long long)gg.groups(), group_ms, old_ms, tflops(old_ms), 100.0 * tflops(old_ms) / peak, new_ms[0],
              tflops(new_ms[0]), 100.0 * tflops(new_ms[0]) / peak, new_ms[1], tflops(new_ms[1]),
              plan_ms[plan_ms.size() / 2], old_ms / new_ms[0], err,
              bad ? (" " + std::to_string(bad) + " NON-FINITE").c_str() : (err > 1e-3 ? " CHECK FAILED" : ""));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int reps = argc > 1 ? std::max(3, std::atoi(argv[1])) : 20;
    const int64_t max_tokens = argc > 2 ? std::atoll(argv[2]) : 4096;
    const bool sweep = argc > 3 && std::string(argv[3]) == "sweep";
    cudaStream_t s;
    DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaDeviceProp p{};
    DS4_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    g_copy_gbps = cuda::measure_bandwidth(size_t(1) << 30, 10, s).copy_gbps;
    const double peak = dense_bf16_tflops(8192, 8192, 8192, reps, s);
    const double peak_small = dense_bf16_tflops(4096, 512, 4096, reps, s);
    std::printf("%s: dense BF16 cuBLAS GEMM (FP32 accumulate) 8192^3: %.1f TFLOP/s (the reference below); "
                "4096x512x4096: %.1f TFLOP/s\n",
                p.name, peak, peak_small);
    std::printf("routed experts of one chunk (moe_group ms apart): old = grouped_mma_bf16 as a chunk picks it, new = "
                "GroupedGemm (gather, dequant to BF16 in batches of %lld experts, cuBLAS grouped GEMM, scatter) without "
                "its plan (a stream sync per MoE layer, host clock), loop = new with one cublasGemmEx per expert; "
                "TFLOP/s = 2 * pairs * rows * cols / time; %% of the dense reference; check = max |new - old| / max |old|\n",
                (long long)cuda::kGroupedGemmBatchExperts);
    std::printf("| family | weight | E | chunk x top-k = pairs | rows/expert | experts used | moe_group ms | old ms "
                "(TFLOP/s / %%) | new ms (TFLOP/s / %%) | loop ms (TFLOP/s) | plan ms | new vs old | check |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    const Case cases[] = {
        {"DeepSeek V4 Flash gate|up", DType::IQ2_XXS, 256, 6, 4096, 4096, 0},
        {"DeepSeek V4 Flash down", DType::Q2_K, 256, 6, 4096, 2048, 0},
        {"GLM 5.x Flash gate|up", DType::Q2_K, 288, 8, 4096, 4096, 0},
        {"GLM 5.x Flash down", DType::Q2_K, 288, 8, 4096, 2048, 0},
        {"Qwen3.8 Flash Next gate|up", DType::MLX_Q4, 512, 10, 1280, 2560, 64},
        {"Qwen3.8 Flash Next down", DType::MLX_Q4, 512, 10, 2560, 640, 64},
        {"BF16 experts, DeepSeek gate|up shape", DType::BF16, 256, 6, 4096, 4096, 0},
    };
    const char* only_case = std::getenv("DS4_BENCH_CASE");
    const char* only_tokens = std::getenv("DS4_BENCH_TOKENS");
    for (int64_t tokens : {512, 1024, 2048, 4096})
      if (tokens <= max_tokens && (!only_tokens || tokens == std::atoll(only_tokens)))
        for (const Case& c : cases)
          if (!only_case || std::string(c.what).find(only_case) != std::string::npos)
            bench_case(c, tokens, reps, peak, s, sweep && tokens == 2048 && c.rows == 4096 && c.cols == 4096);
    std::printf("\ngrouped_mma_bf16 in GB/s of the expert weights read (each used expert once) and %% of the copy "
                "bandwidth %.0f GB/s (read + written / time); auto = the kernel a chunk picks, G = entries of one "
                "expert per block, forced; x ring = grouped_mma_set_x_ring(true); BF16 x = grouped_mma_bf16_x16 on rows "
                "rounded once by rows_to_bf16 (+ that conversion's ms), at G = 4 compiled for two blocks per SM (the default); "
                "occ 1 = the same compiled for one (grouped_mma_set_occupancy(1); G < 4 unchanged)\n"
                "| family | weight | chunk x top-k = pairs | rows/expert | weights MB | auto ms (GB/s / %%) | "
                "G=1 ms (GB/s / %%) | G=2 | G=4 | auto with the x ring | auto with BF16 x (+ convert ms) | BF16 x, occ 1 |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|\n%s",
                g_copy_gbps, g_bytes_table.c_str());
    std::printf("\ngrouped_mma_int8 (quantized rows, int8 mma.sync m16n8k32) vs grouped_mma_bf16 as a chunk picks it, "
                "GB/s of the expert weights read and %% of the copy bandwidth %.0f GB/s; quantize = quantize_act of the "
                "chunk's rows (once per chunk and matrix input); staged = grouped_mma_int8_set_staged(true) (Q2_K / IQ2_XXS weights through "
                "shared memory by 16-byte copies; Q8_0 with cols %% 256 == 0 too), its outputs that differ from the unstaged "
                "kernel's (memcmp; must be 0); err = max |int8 - bf16| / max |bf16|; planes = grouped_mma_int8_planes on two "
                "Q8_K planes per token (entries of <= 8 tokens; Q2_K / IQ2_XXS; the GLM path), planes q = quantize_act_planes, "
                "planes err = max |planes - bf16| / max |bf16| (mostly BF16's own rounding: the planes keep ~15 bits)\n"
                "| family | weight | chunk x top-k = pairs | rows/expert | weights MB | bf16 ms (GB/s / %%) | "
                "int8 ms (GB/s / %%) | int8 staged ms (GB/s / %%) | staged != int8 | quantize ms | int8 vs bf16 | staged vs int8 | err | "
                "planes ms (GB/s / %%) | planes q ms | planes vs bf16 | planes err |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n%s",
                g_copy_gbps, g_int8_table.c_str());
    std::printf("\nnew path by experts per weight batch (default: %lld, or as many as the scratch holds)\n"
                "| case | tokens | experts per batch | new ms (TFLOP/s) |\n|---|---|---|---|\n%s",
                (long long)cuda::kGroupedGemmBatchExperts, g_sweep.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FATAL: %s\n", e.what());
    return 1;
  }
}
