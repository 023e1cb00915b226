// GEMV bandwidth per weight format at realistic decode shapes, as a fraction of the copy
// bandwidth measured in the same run (ds4::cuda::measure_bandwidth).
//
// Work per launch: y[rows] = W[rows x cols] x (batch 1). Bytes counted: the weight's
// bytes (+ MLX scales and biases); x and y are < 0.5% of that and not counted.
// L2 (60 MB on the H200) would hold the smaller matrices, so every case rotates through
// enough copies of its weight to stream >= 1 GiB per pass; one pass is captured as a
// CUDA graph (decode runs as a graph too) and replayed; the median of the replays is
// reported per launch.
//
// Each case runs under the three GEMV kernel generations (cuda::gemv_set_kernel: 1 = the
// kernels of 2026-12-01, 2 = those of 2026-12-04b, 3 = the current default) side by side, and
// kernels 2 and 3 again with PDL off (cuda::gemv_set_pdl(false): plain launches), with k3/k2
// the speed-up. The "xN" shapes are routed-expert launches (gemv_batched over N expert ids):
// DeepSeek V4 Flash x6 (gate|up 4096x4096, down 4096x2048), GLM 5.x Flash x8 (the same
// shapes), Qwen3.8 Flash Next x10 (gate|up 1280x2560, down 2560x640); "qwen hc" is Qwen's
// hyper-connection down+inject (324 x 10240).
// Then gemv_rows (kernel 3): the time of n = 1..8 input rows over one weight (verify windows
// of k+1 rows, decode batches) as a multiple of one gemv of that weight: the bytes floor of n
// rows is ~1.0x (the weight is read once; x and y are < 1% of it).
//
// --act: the GEMV on quantized activations (gemv_act.h: ds4's Q8_0 / Q8_K activations, dp4a)
// against the f32-x GEMV (kernel 3) on the Q8_0, Q2_K and IQ2_XXS shapes above (Q8_0 also on
// DeepSeek's dense decode shapes): us, GB/s and % of the copy bandwidth of both, the launch
// configuration gemv_act chose (gemv_act_config) and the best one of a sweep over lanes per
// weight block (Q2_K / IQ2_XXS: 4, 8; IQ2_XXS also with the byte-permute decoder), rows per
// block (2, 4, 8) and row groups per block (1, 2, 4, 8), printed as a table of % of copy after the main one; the
// quantize_act launch that feeds it (one row of cols values); gemv_act_rows at n = 1, 2, 4, 8, 16 as a multiple of one
// gemv_act of the same weight; and gemv_act_rows at n = 8 and 16 under 2, 4 and 8 weight rows
// per block (gemv_act_set_rows_kernel_rows) on DeepSeek's dense Q8_0 and the expert shapes.
//
// --act-mma: gemv_act_mma (gemv_act_mma.h: 1..16 quantized rows on int8 tensor cores) against
// gemv_act (one row) and gemv_act_rows at n = 1, 2, 4, 8, 16 in the same run, on DeepSeek V4
// Flash's act shapes: us and % of copy (the weight's bytes per launch time), and at n = 1 and 16
// the mma kernel with 1 and 2 eight-row tiles per block (gemv_act_mma_set_tiles).
//
// --rows-mma: Q8_0 gemv_act_rows over n = 2..16 rows on the tensor-core kernel in gemv_act's order
// (gemv_act_rows_mma.h, the default) and on the dp4a rows kernel, beside one gemv_act; at n = 4
// and 16 with 1 and 2 eight-row tiles per block x 2, 4 warps per slot group.
//
// --routed: the routed experts of a decode batch of n = 1..16 tokens as the models run them
// (gemv_act_rows over entries in moe_group's form: each used expert once, up to 16 rows, the
// entry list on the device) on DeepSeek V4 Flash's ds4 q2 shapes (IQ2_XXS gate|up 4096x4096,
// Q2_K down 4096x2048) and Q8_0 gate|up: us and % of copy over the distinct experts' bytes, the
// same at 1 / 2 / 4 row groups per block (gemv_act_set_groups), and the time of n single-token
// launches (gemv_act_batched over each token's 6 experts: n decode steps' experts) beside it.
//
// Usage: bench_cuda_gemv [reps [--no-sweep]]   the tables (--no-sweep: without the threads x rows sweep)
//        bench_cuda_gemv --act [reps]          the quantized-activation tables only (~10 s)
//        bench_cuda_gemv --act-mma [reps]      the tensor-core multi-row table only (~10 s)
//        bench_cuda_gemv --routed [reps]       the routed-experts batch table only
//        bench_cuda_gemv --rows-mma [reps]     Q8_0 gemv_act_rows: tensor cores vs dp4a (~10 s)
//        bench_cuda_gemv --mlx4-tc [reps]      MLX q4 g64: gemv vs gemv_mlx4_tc (BF16 tensor cores, exact
//                                     x parts) on Qwen's decode shapes, us and % of copy; then
//                                     gemv_rows vs gemv_mlx4_tc_rows at n = 2..16 (~20 s)
//        bench_cuda_gemv --profile    one plain launch per case at the square and large
//                                     shapes, for ncu --kernel-name regex:gemv
//        bench_cuda_gemv --rows [reps]   gemv_rows only (f32 x, every format): n = 1, 2, 3, 4, 5, 8,
//                                     16 input rows as multiples of one gemv, on 4096x4096, an
//                                     expert 2048x4096 and Qwen's 1280x2560, at weight rows per
//                                     block R0 (default), R2, R4, R8 (~80 s)
//        bench_cuda_gemv --rows-profile  one plain launch each of gemv and gemv_rows at n = 1, 2, 4 on
//                                     MLX q4 g64 and Q8_0 at 4096x4096 and 16384x8192 (gemv_rows at
//                                     the default weight rows and at R = 8), for ncu
//                                     --kernel-name regex:gemv (where a verify row's time goes)
//        bench_cuda_gemv --act-profile   one launch each of DeepSeek's decode expert products on
//                                     quantized activations (IQ2_XXS gate|up x6, Q2_K down x6,
//                                     Q8_0 4096x4096), for ncu --kernel-name regex:gemv_act
//        ... --lane-tables (anywhere)  IQ2_XXS by the lane-table decoder in every table
//                                     (gemv_act_set_iq2_lane_tables; --act sweeps it anyway)
//        ... --q2k-aligned (anywhere)  Q2_K's aligned quant loads likewise (gemv_act_set_q2k_aligned)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/bandwidth.h"
#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_act.h"
#include "backend/cuda/gemv_act_mma.h"
#include "backend/cuda/gemv_act_rows_mma.h"
#include "backend/cuda/gemv_mlx4_tc.h"
#include "backend/cuda/gemv_tuning.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/moe_group.h"
#include "core/weight.h"

#include "../cuda_fill.cuh"
#include "../cuda_timing.cuh"

using namespace ds4;
using bench::fill_halves;
using bench::fill_random;
using bench::graph_ms;

namespace {

// --lane-tables / --q2k-aligned: the settings every table runs with (the --act sweep restores them)
bool g_lane_tables_flag = false, g_q2k_aligned_flag = false;

void fill(void* p, size_t bytes, uint32_t seed) {
  fill_random<<<1024, 256>>>(static_cast<uint32_t*>(p), bytes / 4, seed);
  DS4_CUDA_CHECK_LAUNCH();
}

struct Format {
  DType type;
  int64_t group;
  DType scale_type;
  const char* label;
  cuda::GemvPath path = cuda::GemvPath::kAuto;
  int rows_per_block = 0;  // 0: the format's default
};

struct Shape {
  int64_t rows, cols;
  const char* what;
  int batch = 0;  // > 0: gemv_batched over this many experts (ids 0.., one copy = all of them)
};

struct Row {
  std::string label, shape;
  double mib, us, gbps;
};

// n_rows > 0: gemv_rows over n_rows input rows (x rows of cols floats, y rows of rows floats).
// xq: the same launches on quantized activations (gemv_act, gemv_act_batched, gemv_act_rows;
// xq rows of cols values), instead of x.
// mma: gemv_act_mma over max(1, n_rows) rows of xq instead.
// mlx4_tc: gemv_mlx4_tc (MLX q4 g64 on BF16 tensor cores) instead of gemv / gemv_batched, and
// gemv_mlx4_tc_rows instead of gemv_rows.
Row bench_one(const Format& f, const Shape& s, int reps, const float* x, float* y, bool profile, int n_rows = 0,
              const cuda::DeviceActQ8* xq = nullptr, bool mma = false, bool mlx4_tc = false) {
  WeightMatrix w;
  w.type = f.type;
  w.rows = s.rows;
  w.cols = s.cols;
  w.group_size = f.group;
  w.scale_type = f.scale_type;
  const size_t data_bytes = size_t(s.rows * w.row_stride_bytes());
  const size_t sb_bytes = f.group ? size_t(s.rows * (s.cols / f.group) * 2) : 0;
  const size_t experts = size_t(std::max(1, s.batch));
  const size_t per_copy = experts * (data_bytes + 2 * sb_bytes);
  // Profiling: one copy (ncu saves and restores what a replayed kernel may touch).
  const size_t copies = profile ? 1 : std::max<size_t>(1, ((static_cast<size_t>(1) << 30) + per_copy - 1) / per_copy);
  cuda::DeviceBuffer data(copies * experts * data_bytes, std::string("bench weights ") + f.label);
  fill(data.get(), data.bytes(), 1234u);
  cuda::DeviceBuffer sc, bi;
  if (sb_bytes) {
    sc = cuda::DeviceBuffer(copies * experts * sb_bytes, "bench scales");
    bi = cuda::DeviceBuffer(copies * experts * sb_bytes, "bench biases");
    // ~0.002 and ~-0.03 in either half format's bit pattern is fine for timing.
    fill_halves<<<1024, 256>>>(sc.as<uint16_t>(), copies * experts * sb_bytes / 2, 0x1800);
    fill_halves<<<1024, 256>>>(bi.as<uint16_t>(), copies * experts * sb_bytes / 2, 0xa400);
    DS4_CUDA_CHECK_LAUNCH();
  }
  cuda::DeviceBuffer ids;
  if (s.batch > 0) {
    std::vector<int32_t> h(experts);
    for (size_t e = 0; e < experts; ++e) h[e] = int32_t(e);
    ids = cuda::DeviceBuffer(sizeof(int32_t) * experts, "bench ids");
    DS4_CUDA_CHECK(cudaMemcpy(ids.get(), h.data(), sizeof(int32_t) * experts, cudaMemcpyHostToDevice));
  }
  auto launch = [&](cudaStream_t st) {
    const cuda::GemvOptions o{f.path, f.rows_per_block};
    if (mlx4_tc && n_rows > 0) {
      cuda::GemvRows r;
      r.n = n_rows, r.x_row = s.cols, r.y_row = s.rows;
      cuda::gemv_mlx4_tc_rows(w, x, y, r, st);
    } else if (mlx4_tc) {
      const cuda::GemvBatch b = s.batch > 0 ? cuda::GemvBatch{s.batch, ids.as<int32_t>(), data_bytes, sb_bytes, 0, s.rows}
                                            : cuda::GemvBatch{};
      cuda::gemv_mlx4_tc(w, x, y, b, st);
    } else if (xq) {
      const ActQ8View xv = xq->row(0);
      if (mma) {
        cuda::gemv_act_mma(w, xv, y, std::max(1, n_rows), s.cols, s.rows, st);
      } else if (n_rows > 0) {
        cuda::GemvRows r;
        r.n = n_rows, r.x_row = s.cols, r.y_row = s.rows;
        cuda::gemv_act_rows(w, xv, y, r, st);
      } else if (s.batch > 0)
        cuda::gemv_act_batched(w, xv, y, cuda::GemvBatch{s.batch, ids.as<int32_t>(), data_bytes, 0, 0, s.rows}, st);
      else
        cuda::gemv_act(w, xv, y, st);
    } else if (n_rows > 0) {
      cuda::GemvRows r;
      r.n = n_rows, r.x_row = s.cols, r.y_row = s.rows;
      cuda::gemv_rows(w, x, y, r, st);
    } else if (s.batch > 0)
      cuda::gemv_batched(w, x, y, cuda::GemvBatch{s.batch, ids.as<int32_t>(), data_bytes, sb_bytes, 0, s.rows}, st, o);
    else
      cuda::gemv(w, x, y, st, o);
  };
  if (profile) {  // one launch: ncu replays it as often as its sections need
    w.data = data.get(), w.scales = sc.get(), w.biases = bi.get();
    launch(nullptr);
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
    return Row{f.label, "", 0, 0, 0};
  }
  auto pass = [&](cudaStream_t st) {
    for (size_t c = 0; c < copies; ++c) {
      w.data = data.as<uint8_t>() + c * experts * data_bytes;
      w.scales = sb_bytes ? sc.as<uint8_t>() + c * experts * sb_bytes : nullptr;
      w.biases = sb_bytes ? bi.as<uint8_t>() + c * experts * sb_bytes : nullptr;
      launch(st);
    }
  };
  const double per_launch_s = graph_ms(pass, reps) * 1e-3 / double(copies);
  Row row;
  row.label = f.label;
  row.shape = std::to_string(s.rows) + "x" + std::to_string(s.cols) + " " + s.what;
  if (s.batch > 0) row.shape += " x" + std::to_string(s.batch);
  row.mib = double(per_copy) / double(1 << 20);
  row.us = per_launch_s * 1e6;
  row.gbps = double(per_copy) / per_launch_s * 1e-9;
  return row;
}

// `rows` rows of x (cols floats each) quantized on the device as w's activations (gemv_act.h).
struct QuantizedX {
  cuda::DeviceBuffer buf;
  cuda::DeviceActQ8 q;
};
QuantizedX quantize_x(DType type, int64_t cols, int64_t rows, const float* x) {
  const ActBlock block = act_block_for(type);
  QuantizedX r{cuda::DeviceBuffer(size_t(rows) * cuda::act_q8_row_bytes(block, cols), "bench xq"), {}};
  r.q = cuda::act_q8_carve(r.buf.get(), block, cols, rows);
  cuda::quantize_act(x, cols, rows, r.q, nullptr);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  return r;
}

// bench_cuda_gemv --act: gemv_act vs the f32-x gemv (kernel 3, PDL on), see the header.
int act_tables(int reps, const cuda::Bandwidth& bw, const float* x, float* y) {
  constexpr int kMaxIn = 16;
  const Format formats[] = {{DType::Q8_0, 0, DType::F16, "Q8_0"},
                            {DType::Q2_K, 0, DType::F16, "Q2_K"},
                            {DType::IQ2_XXS, 0, DType::F16, "IQ2_XXS"}};
  const Shape shapes[] = {{4096, 4096, "square"},          {2048, 7168, "wide"},          {7168, 2048, "tall"},
                          {2048, 4096, "expert up"},       {4096, 2048, "expert down"},   {4096, 4096, "gate|up", 6},
                          {4096, 2048, "down", 6},         {4096, 4096, "glm gate|up", 8}, {4096, 2048, "glm down", 8}};
  // DeepSeek V4 Flash's dense Q8_0 decode projections (rows x cols = out x in)
  const Shape q8_shapes[] = {{1024, 4096, "ds 4096->1024"},
                             {32768, 1024, "ds 1024->32768"},
                             {4096, 8192, "ds 8192->4096"},
                             {1024, 4096, "ds o_a", 8}};
  cuda::gemv_set_kernel(3);
  cuda::gemv_set_pdl(true);
  auto pct = [&](const Row& q) { return 100.0 * q.gbps / bw.copy_gbps; };
  std::printf("gemv_act (quantized activations, dp4a) vs gemv (f32 x, kernel 3); PDL on; quantize = quantize_act "
              "of one row of cols values\n"
              "config: R rows per block, L lanes per weight block, T threads per block, G row groups per block "
              "(default: what gemv_act launches; best: the fastest of the sweep)\n"
              "sweep lines: gemv_act %% of copy per lanes | rows per block R2 R4 R8, each at G1 G2 G4 G8 row groups "
              "per block (Q8_0: one lanes group; Q2_K: L4, L8; IQ2_XXS: L4, L8, then both with byte permutes, "
              "LP, then L4 with the lane tables, LT, at G auto 8 16 32; Q2_K's third: L4 with aligned loads)\n"
              "%-8s %-26s %7s | %-23s | %-14s %-23s | %-14s %-23s | %8s\n",
              "format", "shape", "MiB", "f32 gemv us GB/s %copy", "default", "gemv_act us GB/s %copy", "best",
              "gemv_act us GB/s %copy", "quant us");
  for (const Format& f : formats) {
    std::vector<Shape> list(std::begin(shapes), std::end(shapes));
    if (f.type == DType::Q8_0) list.insert(list.end(), std::begin(q8_shapes), std::end(q8_shapes));
    for (const Shape& s : list) {
      const QuantizedX qx = quantize_x(f.type, s.cols, kMaxIn, x);
      const cuda::DeviceActQ8& xq = qx.q;
      const Row ref = bench_one(f, s, reps, x, y, false);
      const Row act = bench_one(f, s, reps, x, y, false, 0, &xq);
      auto cfg_str = [&] {
        const cuda::GemvActConfig c = cuda::gemv_act_config(f.type, s.rows, s.cols, std::max(1, s.batch));
        char b[32];
        std::snprintf(b, sizeof b, "R%d L%d%s T%d G%d", c.rows_per_block, c.lanes,
                      c.iq2_lane_tables ? "LT" : c.iq2_permute ? "P" : c.q2k_aligned ? "A" : "",
                      c.threads, c.groups);
        return std::string(b);
      };
      const std::string def_cfg = cfg_str();
      // the sweep: lanes (Q2_K / IQ2_XXS: 4, 8) x rows per block x row groups per block
      Row best = act;
      std::string best_cfg = def_cfg;
      char line[512];
      int len = std::snprintf(line, sizeof line, "%-8s %-26s", f.label,
                          (std::to_string(s.rows) + "x" + std::to_string(s.cols) + " " + s.what +
                           (s.batch ? " x" + std::to_string(s.batch) : std::string()))
                              .c_str());
      // variants: lanes 4, 8, then (IQ2_XXS) the same with the byte-permute decoder, then the lane
      // tables (4 lanes; their blocks walk many row groups: auto, 8, 16, 32)
      // (Q2_K: lanes 4, 8, then 4 lanes with the aligned quant loads, A)
      const int variants = f.type == DType::Q8_0 ? 1 : f.type == DType::Q2_K ? 3 : 5;
      for (int v = 0; v < variants; ++v) {
        const int lanes = v % 2 ? 8 : 4;
        cuda::gemv_act_set_lanes(f.type == DType::Q8_0 ? 0 : lanes);
        cuda::gemv_act_set_iq2_permute(v == 2 || v == 3);
        cuda::gemv_act_set_iq2_lane_tables(v == 4);
        cuda::gemv_act_set_q2k_aligned(f.type == DType::Q2_K && v == 2);
        const std::vector<int> group_list = v == 4 ? std::vector<int>{0, 8, 16, 32} : std::vector<int>{1, 2, 4, 8};
        len += std::snprintf(line + len, sizeof line - size_t(len), " |");
        for (int rb : {2, 4, 8})
          for (int g : group_list) {
            cuda::gemv_act_set_rows_per_block(rb);
            cuda::gemv_act_set_groups(g);
            const Row r = bench_one(f, s, reps, x, y, false, 0, &xq);
            len += std::snprintf(line + len, sizeof line - size_t(len), "%s%3.0f", g == group_list[0] ? "  " : " ", pct(r));
            if (r.us < best.us) best = r, best_cfg = cfg_str();
          }
      }
      cuda::gemv_act_set_lanes(0);
      cuda::gemv_act_set_iq2_permute(false);
      cuda::gemv_act_set_iq2_lane_tables(g_lane_tables_flag);
      cuda::gemv_act_set_q2k_aligned(g_q2k_aligned_flag);
      cuda::gemv_act_set_rows_per_block(0);
      cuda::gemv_act_set_groups(0);
      constexpr int kQuantLaunches = 200;
      const double qus = graph_ms([&](cudaStream_t st) {
                           for (int i = 0; i < kQuantLaunches; ++i) cuda::quantize_act(x, s.cols, 1, xq, st);
                         }, reps) * 1e3 / kQuantLaunches;
      std::printf("%-8s %-26s %7.2f | %7.2f %6.0f %6.1f%% | %-14s %7.2f %6.0f %6.1f%% | %-14s %7.2f %6.0f %6.1f%% | "
                  "%8.2f\n",
                  f.label, ref.shape.c_str(), ref.mib, ref.us, ref.gbps, pct(ref), def_cfg.c_str(), act.us, act.gbps,
                  pct(act), best_cfg.c_str(), best.us, best.gbps, pct(best), qus);
      std::printf("  sweep %s\n", line);
      std::fflush(stdout);
    }
  }
  std::printf("\ngemv_act_rows: time of n rows / one gemv_act of the same weight (bytes floor ~1.0x)\n%-8s %-12s %8s",
              "format", "shape", "act us");
  const int ns[] = {1, 2, 4, 8, 16};
  for (int n : ns) std::printf("  n=%-2d      ", n);
  std::printf("\n");
  for (const Format& f : formats) {
    for (const Shape& s : {shapes[0], Shape{2048, 4096, "expert"}, Shape{4096, 2048, "expert"}}) {
      const QuantizedX qx = quantize_x(f.type, s.cols, kMaxIn, x);
      const cuda::DeviceActQ8& xq = qx.q;
      const Row one = bench_one(f, s, reps, x, y, false, 0, &xq);
      std::printf("%-8s %-12s %8.2f", f.label, (std::to_string(s.rows) + "x" + std::to_string(s.cols)).c_str(), one.us);
      for (int n : ns) {
        const Row rn = bench_one(f, s, reps, x, y, false, n, &xq);
        std::printf(" %6.1f %4.2fx", rn.us, rn.us / one.us);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  // Rows per block of gemv_act_rows above 4 inputs (gemv_act_set_rows_kernel_rows): each
  // activation load serves R weight rows; R x N accumulators live in registers. DeepSeek V4
  // Flash's dense Q8_0 decode shapes (a decode batch's projections) and the expert shapes.
  std::printf("\ngemv_act_rows rows per block (R) at n = 8 and 16: us and x one gemv_act (bytes floor ~1.0x), "
              "%% of copy\n%-8s %-16s %8s", "format", "shape", "act us");
  const int rrs[] = {2, 4, 8};
  for (int n : {8, 16})
    for (int rr : rrs) std::printf("  n=%-2d R%d           ", n, rr);
  std::printf("\n");
  const Format q8{DType::Q8_0, 0, DType::F16, "Q8_0"};
  struct RCase {
    Format f;
    Shape s;
  };
  const RCase rcases[] = {{q8, {1024, 4096, "ds 4096->1024"}}, {q8, {32768, 1024, "ds 1024->32768"}},
                          {q8, {4096, 8192, "ds 8192->4096"}}, {q8, {4096, 4096, "square"}},
                          {formats[2], {2048, 4096, "expert up"}}, {formats[1], {4096, 2048, "expert down"}}};
  for (const RCase& c : rcases) {
    const QuantizedX qx = quantize_x(c.f.type, c.s.cols, kMaxIn, x);
    const cuda::DeviceActQ8& xq = qx.q;
    const Row one = bench_one(c.f, c.s, reps, x, y, false, 0, &xq);
    std::printf("%-8s %-16s %8.2f", c.f.label, c.s.what, one.us);
    for (int n : {8, 16})
      for (int rr : rrs) {
        cuda::gemv_act_set_rows_kernel_rows(rr);
        const Row rn = bench_one(c.f, c.s, reps, x, y, false, n, &xq);
        std::printf(" %7.1f %4.2fx %5.1f%%", rn.us, rn.us / one.us, pct(rn));
      }
    cuda::gemv_act_set_rows_kernel_rows(0);
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

// bench_cuda_gemv --act-mma, see the header.
int act_mma_table(int reps, const cuda::Bandwidth& bw, const float* x, float* y) {
  constexpr int kMaxIn = 16;
  struct Case {
    Format f;
    Shape s;
  };
  const Format q8{DType::Q8_0, 0, DType::F16, "Q8_0"}, q2{DType::Q2_K, 0, DType::F16, "Q2_K"},
      iq2{DType::IQ2_XXS, 0, DType::F16, "IQ2_XXS"};
  const Case cases[] = {{q8, {1024, 4096, "ds 4096->1024"}},   {q8, {32768, 1024, "ds 1024->32768"}},
                        {q8, {4096, 8192, "ds 8192->4096"}},   {q8, {4096, 4096, "square"}},
                        {iq2, {2048, 4096, "expert up"}},      {iq2, {4096, 2048, "expert down"}},
                        {q2, {4096, 2048, "expert down"}},     {q2, {2048, 4096, "expert up"}}};
  const int ns[] = {1, 2, 4, 8, 16};
  cuda::gemv_set_pdl(true);
  auto pct = [&](const Row& r) { return 100.0 * r.gbps / bw.copy_gbps; };
  std::printf("gemv_act_mma (int8 mma, n rows) vs gemv_act (1 row) and gemv_act_rows (n rows); PDL on; "
              "us and %% of copy (weight bytes / time)\n%-8s %-22s %-14s", "format", "shape", "gemv_act n=1");
  for (int n : ns) std::printf(" | n=%-2d rows   mma        ", n);
  std::printf(" | mma n=1 T1 T2    | mma n=16 T1 T2\n");
  for (const Case& c : cases) {
    const QuantizedX qx = quantize_x(c.f.type, c.s.cols, kMaxIn, x);
    const cuda::DeviceActQ8& xq = qx.q;
    const Row one = bench_one(c.f, c.s, reps, x, y, false, 0, &xq);
    std::printf("%-8s %-22s %6.2f %5.1f%%", c.f.label, (std::to_string(c.s.rows) + "x" + std::to_string(c.s.cols) + " " +
                                                       c.s.what).c_str(), one.us, pct(one));
    for (int n : ns) {
      const Row rows = bench_one(c.f, c.s, reps, x, y, false, n, &xq);
      const Row mma = bench_one(c.f, c.s, reps, x, y, false, n, &xq, true);
      std::printf(" | %6.1f %6.1f %4.0f%%", rows.us, mma.us, pct(mma));
    }
    for (int n : {1, 16}) {
      std::printf(" |");
      for (int t : {1, 2}) {
        cuda::gemv_act_mma_set_tiles(t);
        std::printf(" %6.1f", bench_one(c.f, c.s, reps, x, y, false, n, &xq, true).us);
      }
      cuda::gemv_act_mma_set_tiles(0);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

// bench_cuda_gemv --rows-mma, see the header.
int rows_mma_table(int reps, const cuda::Bandwidth& bw, const float* x, float* y) {
  constexpr int kMaxIn = 16;
  const Format q8{DType::Q8_0, 0, DType::F16, "Q8_0"};
  const Shape shapes[] = {{1024, 4096, "ds 4096->1024"}, {32768, 1024, "ds 1024->32768"}, {4096, 8192, "ds 8192->4096"},
                          {4096, 4096, "square"},        {2048, 4096, "4096->2048"},     {8192, 4096, "4096->8192"}};
  const int ns[] = {2, 4, 8, 16};
  cuda::gemv_set_pdl(true);
  cuda::gemv_act_set_rows_mma(1);
  auto pct = [&](const Row& r) { return 100.0 * r.gbps / bw.copy_gbps; };
  std::printf("gemv_act_rows on Q8_0: tensor cores in gemv_act's order (gemv_act_set_rows_mma(1)) vs the dp4a rows kernel "
              "(-1), n input rows; us, the mma time as a multiple of one gemv_act and its %% "
              "of copy; PDL on\n%-24s %-14s", "shape", "gemv_act n=1");
  for (int n : ns) std::printf(" | n=%-2d mma   dp4a  x1   %%copy", n);
  std::printf(" | n=4 tiles x warps per slot group: T1S2 T1S4 T2S2 T2S4 | n=16 the same\n");
  for (const Shape& sh : shapes) {
    const QuantizedX qx = quantize_x(q8.type, sh.cols, kMaxIn, x);
    const Row one = bench_one(q8, sh, reps, x, y, false, 0, &qx.q);
    std::printf("%-24s %6.2f %5.1f%%", (std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + " " + sh.what).c_str(),
                one.us, pct(one));
    for (int n : ns) {
      const Row mma = bench_one(q8, sh, reps, x, y, false, n, &qx.q);
      cuda::gemv_act_set_rows_mma(-1);
      const Row dp4a = bench_one(q8, sh, reps, x, y, false, n, &qx.q);
      cuda::gemv_act_set_rows_mma(1);
      std::printf(" | %6.1f %6.1f %4.2f %4.0f%%", mma.us, dp4a.us, mma.us / one.us, pct(mma));
    }
    for (int n : {4, 16}) {
      std::printf(" |");
      for (int t : {1, 2})
        for (int sp : {2, 4}) {
          cuda::gemv_act_rows_q8_mma_set_tiles(t);
          cuda::gemv_act_rows_q8_mma_set_split(sp);
          std::printf(" %6.1f", bench_one(q8, sh, reps, x, y, false, n, &qx.q).us);
        }
    }
    cuda::gemv_act_rows_q8_mma_set_tiles(0);
    cuda::gemv_act_rows_q8_mma_set_split(0);
    std::printf("\n");
    std::fflush(stdout);
  }
  cuda::gemv_act_set_rows_mma(0);
  return 0;
}

// One line of the --routed table: n tokens' experts as entries of at most S rows (moe_group's
// group_stride), 16 routings per pass.
void routed_row(const Format& f, const Shape& shape, bool down, const WeightMatrix& w, size_t eb,
                const cuda::DeviceActQ8& xq, cuda::DeviceBuffer& yb, int n, int S, int reps, const cuda::Bandwidth& bw) {
  constexpr int kExperts = 256, kTopK = 6, kRoutings = 16;  // DeepSeek V4 Flash: top-6 of 256
  uint32_t seed = 7u + 131u * uint32_t(n);  // the same routings for every S at this n
  auto next = [&] { seed = seed * 1664525u + 1013904223u; return seed >> 8; };
  const int64_t entries_max = cuda::moe_group_entries(n, kTopK, kExperts, S);
  // per routing: [experts | counts | live | tok | slot] entries (the batched launch) and the
  // tokens' own ids (the singles)
  const size_t per = size_t(entries_max) * (2 + 2 * size_t(S)) + 1;
  std::vector<int32_t> h(per * kRoutings + size_t(kRoutings) * n * kTopK, 0);
  double distinct = 0;
  for (int p = 0; p < kRoutings; ++p) {
    std::vector<std::vector<int32_t>> by_expert(kExperts);  // pairs t * K + j per expert
    int32_t* own = h.data() + per * kRoutings + size_t(p) * n * kTopK;
    for (int t = 0; t < n; ++t) {
      for (int j = 0; j < kTopK; ++j) {
        int32_t e;
        do e = int32_t(next() % kExperts);
        while (std::find(own + t * kTopK, own + t * kTopK + j, e) != own + t * kTopK + j);
        own[t * kTopK + j] = e;
        by_expert[size_t(e)].push_back(t * kTopK + j);
      }
    }
    int32_t* base = h.data() + per * size_t(p);
    int32_t *ex = base, *cnt = base + entries_max, *live = cnt + entries_max, *tok = live + 1,
            *slot = tok + entries_max * S;
    int u = 0;
    for (int e = 0; e < kExperts; ++e) {
      const std::vector<int32_t>& pairs = by_expert[size_t(e)];
      if (!pairs.empty()) distinct += 1;
      for (size_t i0 = 0; i0 < pairs.size(); i0 += size_t(S), ++u) {  // moe_group's split
        ex[u] = e, cnt[u] = int32_t(std::min(pairs.size() - i0, size_t(S)));
        for (int i = 0; i < cnt[u]; ++i) {
          const int32_t pair = pairs[i0 + size_t(i)];
          tok[u * S + i] = down ? pair : pair / kTopK;
          slot[u * S + i] = pair;
        }
      }
    }
    *live = u;
  }
  distinct /= kRoutings;
  cuda::DeviceBuffer ids(sizeof(int32_t) * h.size(), "bench routing");
  DS4_CUDA_CHECK(cudaMemcpy(ids.get(), h.data(), sizeof(int32_t) * h.size(), cudaMemcpyHostToDevice));
  const int32_t* d = ids.as<int32_t>();
  auto batched = [&](cudaStream_t st) {
    for (int p = 0; p < kRoutings; ++p) {
      const int32_t* base = d + per * size_t(p);
      cuda::GemvRows r;
      r.n = std::min(n, S);  // top-k names an expert once per token
      r.idx_stride = S;
      r.x_row = shape.cols, r.y_row = shape.rows;
      r.batch = cuda::GemvBatch{int(entries_max), base, eb, 0, 0, 0};
      r.counts = base + entries_max, r.live = base + 2 * entries_max;
      r.x_idx = r.live + 1, r.y_idx = r.x_idx + entries_max * S;
      cuda::gemv_act_rows(w, xq.row(0), yb.as<float>(), r, st);
    }
  };
  auto singles = [&](cudaStream_t st) {
    for (int p = 0; p < kRoutings; ++p)
      for (int t = 0; t < n; ++t)
        cuda::gemv_act_batched(w, xq.row(0), yb.as<float>(),
                               cuda::GemvBatch{kTopK, d + per * kRoutings + (size_t(p) * n + t) * kTopK, eb, 0, 0,
                                               shape.rows},
                               st);
  };
  const double bytes = distinct * double(eb);
  auto pct = [&](double ms) { return 100.0 * bytes / (ms * 1e-3 / kRoutings) * 1e-9 / bw.copy_gbps; };
  const double def_ms = graph_ms(batched, reps);
  std::printf("%-8s %-15s %3d %2d %7.1f | %9.2f %5.1f%%           |", f.label,
              (std::to_string(shape.rows) + "x" + std::to_string(shape.cols) + " " + shape.what).c_str(), n, S, distinct,
              def_ms * 1e3 / kRoutings, pct(def_ms));
  for (int g : {1, 2, 4}) {
    cuda::gemv_act_set_groups(g);
    std::printf(" %5.1f", pct(graph_ms(batched, reps)));
  }
  cuda::gemv_act_set_groups(0);
  const double one_ms = graph_ms(singles, reps);
  std::printf("     | %9.2f %6.2fx\n", one_ms * 1e3 / kRoutings, def_ms / one_ms);
  std::fflush(stdout);
}

// bench_cuda_gemv --routed, see the header.
int routed_table(int reps, const cuda::Bandwidth& bw, const float* x) {
  constexpr int kExperts = 256, kTopK = 6;
  constexpr int kMaxPairs = cuda::kGemvMaxRows * kTopK;
  struct Case {
    Format f;
    Shape s;
    bool down;  // inputs per (token, slot) pair (x_idx = slot) rather than per token
  };
  const Case cases[] = {{{DType::IQ2_XXS, 0, DType::F16, "IQ2_XXS"}, {4096, 4096, "gate|up"}, false},
                        {{DType::Q2_K, 0, DType::F16, "Q2_K"}, {4096, 2048, "down"}, true},
                        {{DType::Q8_0, 0, DType::F16, "Q8_0"}, {4096, 4096, "gate|up"}, false}};
  const int ns[] = {1, 2, 4, 8, 16};
  cuda::gemv_set_pdl(true);
  std::printf("routed experts of a decode batch (gemv_act_rows over moe_group-style entries: experts in id order, "
              "up to S rows each, live / counts / x_idx / y_idx on the device) vs n single-token launches "
              "(gemv_act_batched over the token's %d experts, what n decode steps run); 16 random top-%d-of-%d "
              "routings per pass; bytes = the distinct experts' weights\n"
              "%-8s %-15s %3s %2s %7s | %-27s | %-20s | %s\n",
              kTopK, kTopK, kExperts, "format", "shape", "n", "S", "experts", "batched us %copy (default)",
              "G1 G2 G4 %copy", "n singles us  batched/singles");
  for (const Case& c : cases) {
    WeightMatrix w;
    w.type = c.f.type, w.rows = c.s.rows, w.cols = c.s.cols;
    const size_t eb = size_t(w.rows * w.row_stride_bytes());
    cuda::DeviceBuffer data(eb * kExperts, "bench routed experts");
    fill(data.get(), data.bytes(), 4321u);
    w.data = data.get();
    const ActBlock block = act_block_for(c.f.type);
    cuda::DeviceBuffer qbuf(size_t(kMaxPairs) * cuda::act_q8_row_bytes(block, c.s.cols), "bench xq");
    DS4_CUDA_CHECK(cudaMemset(qbuf.get(), 0, qbuf.bytes()));
    const cuda::DeviceActQ8 xq = cuda::act_q8_carve(qbuf.get(), block, c.s.cols, kMaxPairs);
    cuda::quantize_act(x, c.s.cols, std::min<int64_t>(16384 * 8 / c.s.cols, kMaxPairs), xq, nullptr);
    cuda::DeviceBuffer yb(sizeof(float) * size_t(kMaxPairs) * size_t(c.s.rows), "bench routed y");
    for (int n : ns) {
      for (const int S : {int(cuda::kGemvMaxRows), int(cuda::kMoeSmallStride)}) {
        if (S == cuda::kMoeSmallStride && n <= S) continue;  // the same entries as S = 16
        routed_row(c.f, c.s, c.down, w, eb, xq, yb, n, S, reps, bw);
      }
    }
  }
  return 0;
}

}  // namespace

// bench_cuda_gemv --mlx4-tc, see the header.
int mlx4_tc_table(int reps, const cuda::Bandwidth& bw, const float* x, float* y) {
  const Format f{DType::MLX_Q4, 64, DType::BF16, "MLX_Q4_g64"};
  const Shape shapes[] = {{1280, 2560, "qwen gate|up", 10}, {2560, 640, "qwen down", 10}, {16384, 2560, "qwen gdn in"},
                          {2560, 4096, "qwen out"},       {4096, 4096, "square"},        {16384, 8192, "large"}};
  auto pct = [&](const Row& r) { return 100.0 * r.gbps / bw.copy_gbps; };
  std::printf("MLX q4 g64 (bf16 scales): gemv (f32 x on CUDA cores) vs gemv_mlx4_tc (BF16 tensor cores, x in three "
              "exact BF16 parts) with 1, 2 and 4 row tiles per block and by shape (A, the default); PDL on; weight + "
              "scale/bias bytes over time\n"
              "%-26s %8s %7s | %8s %7s %6s | %8s %7s %6s | %8s %7s %6s | %8s %7s %6s\n",
              "shape", "gemv us", "% copy", "tc1 us", "% copy", "x gemv", "tc2 us", "% copy", "x gemv", "tc4 us", "% copy",
              "x gemv", "tcA us", "% copy", "x gemv");
  cuda::gemv_set_pdl(true);
  for (const Shape& s : shapes) {
    const Row g = bench_one(f, s, reps, x, y, false);
    std::printf("%-26s %8.2f %6.1f%%", (std::to_string(s.rows) + "x" + std::to_string(s.cols) + " " + s.what +
                                         (s.batch ? " x" + std::to_string(s.batch) : "")).c_str(), g.us, pct(g));
    for (int tiles : {1, 2, 4, 0}) {
      cuda::gemv_mlx4_tc_set_tiles(tiles);
      const Row t = bench_one(f, s, reps, x, y, false, 0, nullptr, false, true);
      std::printf(" | %8.2f %6.1f%% %5.2fx", t.us, pct(t), g.us / t.us);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  // The rows forms (a chunk's / decode batch's n input rows): gemv_rows (CUDA cores, f32 x) vs
  // gemv_mlx4_tc_rows, as time over one row's gemv (the bytes floor is ~1.0x).
  std::printf("\nrows: n input rows, us and x one-row gemv; gemv_rows vs gemv_mlx4_tc_rows at 1 row tile per block (tc1) "
              "and by shape (tcA, the default)\n%-26s %8s", "shape", "gemv us");
  const int ns[] = {2, 4, 8, 16};
  for (int n : ns) std::printf(" | n=%-2d rows us  x1   tc1 us  x1   tcA us  x1  ", n);
  std::printf("\n");
  for (const Shape& s : {Shape{1280, 2560, "qwen gate|up"}, Shape{16384, 2560, "qwen gdn in"}, Shape{2560, 4096, "qwen out"}}) {
    const Row one = bench_one(f, s, reps, x, y, false);
    std::printf("%-26s %8.2f", (std::to_string(s.rows) + "x" + std::to_string(s.cols) + " " + s.what).c_str(), one.us);
    for (int n : ns) {
      const Row g = bench_one(f, s, reps, x, y, false, n);
      cuda::gemv_mlx4_tc_set_tiles(1);
      const Row t1 = bench_one(f, s, reps, x, y, false, n, nullptr, false, true);
      cuda::gemv_mlx4_tc_set_tiles(0);
      const Row ta = bench_one(f, s, reps, x, y, false, n, nullptr, false, true);
      std::printf(" | %8.2f %5.2f %8.2f %5.2f %8.2f %5.2f", g.us, g.us / one.us, t1.us, t1.us / one.us, ta.us,
                  ta.us / one.us);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    const bool profile = argc > 1 && std::string(argv[1]) == "--profile";
    const bool act = argc > 1 && std::string(argv[1]) == "--act";
    const bool act_mma = argc > 1 && std::string(argv[1]) == "--act-mma";
    const bool routed = argc > 1 && std::string(argv[1]) == "--routed";
    const bool rows_mma = argc > 1 && std::string(argv[1]) == "--rows-mma";
    const bool act_profile = argc > 1 && std::string(argv[1]) == "--act-profile";
    const bool rows_only = argc > 1 && std::string(argv[1]) == "--rows";
    const bool rows_profile = argc > 1 && std::string(argv[1]) == "--rows-profile";
    const bool mlx4_tc = argc > 1 && std::string(argv[1]) == "--mlx4-tc";
    auto count_arg = [&](int i) { return argc > i && argv[i][0] != '-' ? std::max(3, std::atoi(argv[i])) : 20; };
    const int reps = act || act_mma || routed || rows_mma || rows_only || mlx4_tc ? count_arg(2) : !profile ? count_arg(1) : 20;
    const bool sweep = !(argc > 2 && std::string(argv[2]) == "--no-sweep");
    for (int i = 1; i < argc; ++i)
      if (std::string(argv[i]) == "--lane-tables") cuda::gemv_act_set_iq2_lane_tables(g_lane_tables_flag = true);
      else if (std::string(argv[i]) == "--q2k-aligned") cuda::gemv_act_set_q2k_aligned(g_q2k_aligned_flag = true);
    cudaDeviceProp prop{};
    DS4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    const cuda::Bandwidth bw = profile || act_profile || rows_profile ? cuda::Bandwidth{} : cuda::measure_bandwidth(static_cast<size_t>(2) << 30, 20, nullptr);
    std::printf("bandwidth (2 GiB buffers, median of 20): copy kernel %.0f GB/s, cudaMemcpy D2D %.0f GB/s "
                "(read+write), read-only %.0f GB/s\n\n",
                bw.copy_gbps, bw.memcpy_gbps, bw.read_gbps);
    const Format formats[] = {
        {DType::BF16, 0, DType::F16, "BF16"},         {DType::F16, 0, DType::F16, "F16"},
        {DType::Q8_0, 0, DType::F16, "Q8_0/dir", cuda::GemvPath::kDirect},
        {DType::Q8_0, 0, DType::F16, "Q8_0/stg", cuda::GemvPath::kStaged},
        {DType::Q4_K, 0, DType::F16, "Q4_K"},
        {DType::Q2_K, 0, DType::F16, "Q2_K/dir", cuda::GemvPath::kDirect},
        {DType::Q2_K, 0, DType::F16, "Q2_K/stg", cuda::GemvPath::kStaged},
        {DType::IQ2_XXS, 0, DType::F16, "IQ2_XXS/dir", cuda::GemvPath::kDirect},
        {DType::IQ2_XXS, 0, DType::F16, "IQ2_XXS/stg", cuda::GemvPath::kStaged},
        {DType::MLX_Q4, 64, DType::BF16, "MLX_Q4_g64"}, {DType::MLX_Q4, 32, DType::F16, "MLX_Q4_g32"},
        {DType::MLX_Q8, 64, DType::BF16, "MLX_Q8_g64"},
    };
    const Shape shapes[] = {{4096, 4096, "square"},
                            {2048, 7168, "wide"},
                            {7168, 2048, "tall"},
                            {2048, 4096, "expert up"},
                            {4096, 2048, "expert down"},
                            {16384, 8192, "large"},  // kernel-bound: launch gaps amortized
                            {4096, 4096, "gate|up", 6},
                            {4096, 2048, "down", 6},
                            {4096, 4096, "glm gate|up", 8},
                            {4096, 2048, "glm down", 8},
                            {1280, 2560, "qwen gate|up", 10},
                            {2560, 640, "qwen down", 10},
                            {324, 10240, "qwen hc"}};
    constexpr int kMaxN = 8;
    // x: 16 rows of up to 8192 floats (gemv_act_rows' n = 16) or 8 of 16384; y: 16 rows of 32768.
    cuda::DeviceBuffer x(sizeof(float) * 16384 * kMaxN, "bench x"), y(sizeof(float) * 65536 * kMaxN, "bench y");
    fill(x.get(), x.bytes(), 99u);  // random bits as floats: includes NaN; fine for timing
    if (act) return act_tables(reps, bw, x.as<float>(), y.as<float>());
    if (mlx4_tc) return mlx4_tc_table(reps, bw, x.as<float>(), y.as<float>());
    if (rows_only) {  // gemv_rows up to 16 input rows (x holds 16 rows of up to 8192 values)
      std::printf("gemv_rows: time of n rows / one gemv of the same weight (bytes floor ~1.0x)\n%-12s %-12s %-2s %8s",
                  "format", "shape", "R", "gemv us");
      // 2-5: verify windows (k = 1..4: 5 rows take the 8-row form), 8 / 16: decode batches
      const int ns[] = {1, 2, 3, 4, 5, 8, 16};
      for (int n : ns) std::printf("  n=%-2d      ", n);
      std::printf("\n");
      // Each case at every weight-rows setting (gemv_set_rows_weight_rows: R0 the default, R2,
      // and the wide forms R4 / R8; n = 16 always takes R = 2).
      for (const Format& f : formats) {
        if (f.path == cuda::GemvPath::kStaged) continue;
        for (const Shape& sh : {Shape{4096, 4096, "square"}, Shape{2048, 4096, "expert"}, Shape{1280, 2560, "qwen"}}) {
          const Row one = bench_one(f, sh, reps, x.as<float>(), y.as<float>(), false);
          for (int wr : {0, 2, 4, 8}) {
            cuda::gemv_set_rows_weight_rows(wr);
            std::printf("%-12s %-12s R%d %8.2f", f.label,
                        (std::to_string(sh.rows) + "x" + std::to_string(sh.cols)).c_str(), wr, one.us);
            for (int n : ns) {
              const Row rn = bench_one(f, sh, reps, x.as<float>(), y.as<float>(), false, n);
              std::printf(" %6.1f %4.2fx", rn.us, rn.us / one.us);
            }
            std::printf("\n");
            std::fflush(stdout);
          }
          cuda::gemv_set_rows_weight_rows(0);
        }
      }
      return 0;
    }
    if (rows_profile) {  // one plain launch each (ncu replays it as often as its sections need)
      for (const Format& f : {formats[9], formats[2]})
        for (const Shape& sh : {Shape{4096, 4096, "square"}, Shape{16384, 8192, "large"}})
          for (int wr : {0, 8})
            for (int n : {0, 1, 2, 4}) {
              if (wr && !n) continue;
              cuda::gemv_set_rows_weight_rows(wr);
              bench_one(f, sh, 1, x.as<float>(), y.as<float>(), true, n);
              std::printf("profiled %s %lldx%lld %s R%d\n", f.label, (long long)sh.rows, (long long)sh.cols,
                          n ? ("gemv_rows n=" + std::to_string(n)).c_str() : "gemv", wr);
            }
      cuda::gemv_set_rows_weight_rows(0);
      return 0;
    }
    if (act_profile) {  // one plain launch each (ncu replays it as often as its sections need)
      const struct {
        Format f;
        Shape s;
      } cases[] = {{{DType::IQ2_XXS, 0, DType::F16, "IQ2_XXS"}, {4096, 4096, "gate|up", 6}},
                   {{DType::Q2_K, 0, DType::F16, "Q2_K"}, {4096, 2048, "down", 6}},
                   {{DType::Q8_0, 0, DType::F16, "Q8_0"}, {4096, 4096, "square"}}};
      for (const auto& c : cases) {
        const QuantizedX xq = quantize_x(c.f.type, c.s.cols, 1, x.as<float>());
        bench_one(c.f, c.s, 1, x.as<float>(), y.as<float>(), true, 0, &xq.q);
        std::printf("profiled %s %lldx%lld %s x%d\n", c.f.label, (long long)c.s.rows, (long long)c.s.cols, c.s.what,
                    c.s.batch);
      }
      return 0;
    }
    if (act_mma) return act_mma_table(reps, bw, x.as<float>(), y.as<float>());
    if (routed) return routed_table(reps, bw, x.as<float>());
    if (rows_mma) return rows_mma_table(reps, bw, x.as<float>(), y.as<float>());
    std::printf("%-12s %-26s %7s | %-15s | %-15s | %-15s | %-24s | %-15s | %6s\n", "format", "shape", "MiB",
                "k1 GB/s %copy", "k2 GB/s %copy", "k2 no PDL", "k3 (default) us GB/s %copy", "k3 no PDL", "k3/k2");
    auto fits = [](const Format& f, const Shape& s) {  // the K-quants and IQ2_XXS: whole 256-weight blocks
      const bool k_block = f.type == DType::Q4_K || f.type == DType::Q2_K || f.type == DType::IQ2_XXS;
      return !k_block || s.cols % 256 == 0;
    };
    auto stageable = [&](const Format& f, const Shape& s) {
      WeightMatrix probe;
      probe.type = f.type, probe.rows = s.rows, probe.cols = s.cols, probe.data = x.get();  // any 16-aligned pointer
      return f.path != cuda::GemvPath::kStaged || cuda::gemv_can_stage(probe);
    };
    for (const Format& f : formats)
      for (const Shape& s : shapes) {
        if (!fits(f, s)) continue;
        if (!stageable(f, s)) {
          std::printf("%-12s %lldx%lld: row stride not 16-byte aligned, no staged path\n", f.label, (long long)s.rows,
                      (long long)s.cols);
          continue;
        }
        if (profile) {  // ncu: the default kernel only
          if (s.rows != s.cols && s.rows != 16384) continue;
          cuda::gemv_set_kernel(3);
          bench_one(f, s, reps, x.as<float>(), y.as<float>(), true);
          continue;
        }
        struct Col { int kernel; bool pdl; };
        const Col cols[] = {{1, true}, {2, true}, {2, false}, {3, true}, {3, false}};
        Row r[5];
        for (int c = 0; c < 5; ++c) {
          cuda::gemv_set_kernel(cols[c].kernel);
          cuda::gemv_set_pdl(cols[c].pdl);
          r[c] = bench_one(f, s, reps, x.as<float>(), y.as<float>(), false);
        }
        cuda::gemv_set_pdl(true);
        auto pct = [&](const Row& q) { return 100.0 * q.gbps / bw.copy_gbps; };
        std::printf("%-12s %-26s %7.2f | %6.0f %6.1f%% | %6.0f %6.1f%% | %6.0f %6.1f%% | %7.2f %6.0f %7.1f%% | %6.0f %6.1f%% | %5.2fx\n",
                    r[3].label.c_str(), r[3].shape.c_str(), r[3].mib, r[0].gbps, pct(r[0]), r[1].gbps, pct(r[1]),
                    r[2].gbps, pct(r[2]), r[3].us, r[3].gbps, pct(r[3]), r[4].gbps, pct(r[4]), r[3].gbps / r[1].gbps);
      }
    cuda::gemv_set_kernel(3);
    if (profile) return 0;
    // Threads per block x rows per block (kernel 3; gemv_tuning.h): GB/s, the sweep that sets
    // the next defaults. R=0: the default (the format's kRows, fewer when the grid is small).
    const int sweep_t[] = {128, 64, 32}, sweep_r[] = {0, 2, 4, 8};
    if (sweep) {
      std::printf("\nthreads x rows per block, kernel 3 (GB/s)\n%-12s %-26s", "format", "shape");
      for (int t : sweep_t)
        for (int rb : sweep_r) std::printf(" %5s", ("t" + std::to_string(t) + "R" + std::to_string(rb)).c_str());
      std::printf("\n");
    }
    for (const Format& f : formats) {
      if (!sweep) break;
      if (f.path == cuda::GemvPath::kStaged) continue;
      for (int si : {0, 3, 6, 7, 8, 10, 11, 12}) {
        const Shape& s = shapes[si];
        if (!fits(f, s)) continue;
        std::printf("%-12s %-26s", f.label,
                    (std::to_string(s.rows) + "x" + std::to_string(s.cols) + " " + s.what +
                     (s.batch ? " x" + std::to_string(s.batch) : ""))
                        .c_str());
        for (int t : sweep_t)
          for (int rb : sweep_r) {
            cuda::gemv_set_threads(t == 128 ? 0 : t);
            Format g = f;
            g.rows_per_block = rb;
            std::printf(" %5.0f", bench_one(g, s, reps, x.as<float>(), y.as<float>(), false).gbps);
          }
        cuda::gemv_set_threads(0);
        std::printf("\n");
      }
    }
    // gemv_rows: n input rows over one weight, us and the multiple of one gemv (kernel 3, kAuto).
    std::printf("\ngemv_rows, kernel 3: time of n rows / one gemv of the same weight (bytes floor ~1.0x)\n%-12s %-16s %8s",
                "format", "shape", "gemv us");
    for (int n = 1; n <= kMaxN; ++n) std::printf("  n=%d      ", n);
    std::printf("\n");
    for (const Format& f : formats) {
      if (f.path == cuda::GemvPath::kStaged) continue;  // gemv_rows reads directly
      for (const Shape& s : {shapes[0], shapes[5], Shape{2048, 4096, "expert"}}) {
        const Row one = bench_one(f, s, reps, x.as<float>(), y.as<float>(), false);
        std::printf("%-12s %-16s %8.2f", f.label,
                    (std::to_string(s.rows) + "x" + std::to_string(s.cols)).c_str(), one.us);
        for (int n = 1; n <= kMaxN; ++n) {
          const Row rn = bench_one(f, s, reps, x.as<float>(), y.as<float>(), false, n);
          std::printf(" %6.1f %4.2fx", rn.us, rn.us / one.us);
        }
        std::printf("\n");
      }
    }
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 2;
  }
  return 0;
}
