// The GEMV on quantized activations (backend/cuda/gemv_act.h) against ds4's CPU code
// (core/act_quant.h):
//   quantize_act        == ds4::quantize_act_q8_0 / _q8_k byte for byte (q, d, bsums), including
//                          zero blocks, +-max ties (Q8_K takes the first) and rows with a stride;
//   gemv_act            == the kernel's f32 order emulated on the host from dot_act's block terms
//                          (memcmp; kernel_order_sum), and
//                       == ds4::dot_act per row within the summation-order bound: the block
//                          terms are the same f32 values (exact integer sums, ds4's f32 order),
//                          only the order of the sum over the nb blocks differs, so
//                          |gpu - cpu| <= 2 (nb - 1) 2^-24 sum_b |term_b| (each order's error is at
//                          most (nb - 1) u sum |term|); term_b is dot_act on block b alone.
//                          The largest |gpu - cpu| / sum|term| seen is printed (expect ~1e-7);
//   gemv_act_batched    entry b == gemv_act on expert ids[b] (memcmp), ids on the device;
//                          Q2_K / IQ2_XXS under both lane splits (gemv_act_set_lanes 4, 8),
//                          IQ2_XXS also with the staged sign table and the byte-permute
//                          decoder (same bits required);
//   gemv_act_rows       row i == gemv_act on that row (memcmp), n = 1..16, and with batch ids,
//                          live, counts, x_idx and y_idx (entries past *live untouched); Q8_0 plain
//                          rows on the tensor-core kernel (gemv_act_rows_mma.h: 1 to 4 steps per
//                          slot, 1 / 2 / 3 / 4 slot groups of 2 / 4 warps, 1 warp with 2-byte staging, 1 and 2 tiles; by
//                          default from 4 rows, forced from 2) and on the dp4a kernel;
//   PDL                 quantize_act + gemv_act / _batched / _rows launched as programmatic dependents
//                          after a kernel that writes x and the ids late == plain launches;
//   bad input           InputError (wrong activation block, cols not a multiple, n mismatch,
//                          unsupported type, misaligned q, bad n / strides / rows per block).
// Shapes: DeepSeek's (IQ2_XXS 2048x4096 gate|up, Q2_K 4096x2048 down, Q8_0 4096 / 7168 wide
// / tall), GLM's Q2_K expert shape, and odd ones (cols 256 / 32 / 96, rows 37, 13, 11: not a
// multiple of the rows per block).
// Usage: test_gemv_act   (exit 1 when a check fails; a few seconds on the H200, most of it the
// CPU reference)
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_act.h"
#include "backend/cuda/gemv_act_rows_mma.h"
#include "backend/cuda/gemv_tuning.h"
#include "backend/cuda/memory.h"
#include "core/act_quant.h"
#include "act_block_term.h"
#include "device_weight.h"
#include "host_ref.h"
#include "late_writer.cuh"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

constexpr unsigned long long kSpinNs = 50'000;  // far longer than a block's first weight loads

// Every launch here goes to a cudaStreamNonBlocking stream, which the legacy default stream
// (plain cudaMemcpy) neither waits for nor is waited for by: download synchronizes the test
// stream first, uploads finish (device synchronize) before anything is launched, and poison
// fills in stream order. (Until 2026-12-04 download did not, and every memcmp after an
// unsynchronized launch compared whatever the buffer held: the "gemv_act_rows / batched !=
// gemv_act" failures of the first device run.)
cudaStream_t g_stream = nullptr;

template <class T>
std::vector<T> download(const T* p, size_t n) {
  std::vector<T> v(n);
  DS4_CUDA_CHECK(cudaStreamSynchronize(g_stream));
  DS4_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// Fills a device buffer with 0xff bytes (NaN floats) in stream order, before the next launch.
void poison(cuda::DeviceBuffer& b) {
  DS4_CUDA_CHECK(cudaMemsetAsync(b.get(), 0xff, b.bytes(), g_stream));
}

template <class T>
void upload_to(void* dst, const std::vector<T>& v) {
  DS4_CUDA_CHECK(cudaStreamSynchronize(g_stream));  // no launch may still read dst
  DS4_CUDA_CHECK(cudaMemcpy(dst, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaDeviceSynchronize());  // a pageable copy may return before its DMA ends
}

// device_weight.h's upload, finished before the test stream's launches read it.
DeviceWeight upload_now(const HostWeight& hw) {
  DeviceWeight d = upload(hw);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  return d;
}

template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Activation rows (stride x_row >= n): normal values with a few blocks made special: all zero,
// a negative and a positive value of the same largest magnitude (Q8_K takes the first), values
// on exact .5 steps of the Q8_0 scale, and a wide dynamic range.
std::vector<float> activations(int64_t rows, int64_t n, int64_t x_row, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(size_t(rows * x_row), 0.f);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + r * x_row;
    for (int64_t i = 0; i < n; ++i) row[i] = nd(rng) * (i % 97 == 5 ? 30.f : 1.f);
    for (int64_t i = n; i < x_row; ++i) row[i] = 1e30f;  // past n: must not be read
    if (n >= 512) {
      for (int64_t i = 256; i < 512; ++i) row[i] = 0.f;  // a zero block (both block sizes)
    }
    if (n >= 768) {  // ties: -7 first, +7 later, everything else smaller
      for (int64_t i = 512; i < 768; ++i) row[i] = std::fmod(row[i], 6.f);
      row[512 + 3] = -7.f;
      row[512 + 200] = 7.f;
    }
    if (n >= 1024) {  // x * (1 / d) lands on .5: lrintf's ties-to-even decides
      for (int64_t i = 768; i < 800; ++i) row[i] = (i == 768 ? 127.f : float(int(i % 9) - 4) + 0.5f);
    }
  }
  return x;
}

ActQ8Rows cpu_quantize(ActBlock block, const std::vector<float>& x, int64_t rows, int64_t n, int64_t x_row) {
  std::vector<float> packed(size_t(rows * n));
  for (int64_t r = 0; r < rows; ++r) std::memcpy(&packed[size_t(r * n)], &x[size_t(r * x_row)], size_t(n) * 4);
  return quantize_act_rows(block, packed.data(), n, rows);
}

// Quantized activations on the device (carved from one buffer) plus the f32 rows they came from.
struct DeviceAct {
  cuda::DeviceBuffer buf, xf;
  cuda::DeviceActQ8 q;
};

DeviceAct quantize_on_device(ActBlock block, const std::vector<float>& x, int64_t rows, int64_t n, int64_t x_row,
                             cudaStream_t s) {
  DeviceAct d;
  d.buf = cuda::DeviceBuffer(size_t(rows) * cuda::act_q8_row_bytes(block, n), "test act q8");
  d.xf = cuda::DeviceBuffer(x.size() * 4, "test act f32");
  upload_to(d.xf.get(), x);
  d.q = cuda::act_q8_carve(d.buf.get(), block, n, rows);
  cuda::quantize_act(d.xf.as<float>(), x_row, rows, d.q, s);
  DS4_CUDA_CHECK(cudaStreamSynchronize(s));
  return d;
}

void check_quantize(ActBlock block, int64_t n, std::mt19937_64& rng, cudaStream_t s) {
  const int64_t rows = 3, x_row = n + 12;
  const std::vector<float> x = activations(rows, n, x_row, rng);
  const ActQ8Rows ref = cpu_quantize(block, x, rows, n, x_row);
  const DeviceAct d = quantize_on_device(block, x, rows, n, x_row, s);
  const std::string what = std::string(block == ActBlock::kQ8_0 ? "Q8_0" : "Q8_K") + " quantize_act n=" +
                           std::to_string(n) + " rows=3 x_row=n+12";
  check(same(download(d.q.q, ref.q.size()), ref.q), what + ": q == CPU byte for byte");
  check(same(download(d.q.d, ref.d.size()), ref.d), what + ": d == CPU (memcmp)");
  if (block == ActBlock::kQ8_K) check(same(download(d.q.bsums, ref.bsums.size()), ref.bsums), what + ": bsums == CPU");
}

// The kernel's f32 order on the host, from the per-block terms: thread t of a block of
// cfg.threads adds the terms of the blocks whose first unit is one of its units t, t + threads,
// ... (a weight block = cfg.lanes units), the warps sum by xor shuffles 16, 8, 4, 2, 1, then the
// warps' sums are added in order to 0 (gemv_device.cuh finish_rows). gemv_act must equal it
// bit for bit: this pins the whole f32 path (no contraction, the right split), not just a bound.
float kernel_order_sum(const std::vector<float>& terms, const cuda::GemvActConfig& cfg) {
  const int64_t units = int64_t(terms.size()) * cfg.lanes;
  std::vector<float> acc(size_t(cfg.threads), 0.f);
  for (int64_t u = 0; u < units; u += cfg.lanes) acc[size_t(u % cfg.threads)] += terms[size_t(u / cfg.lanes)];
  float total = 0.f;
  for (int w = 0; w < cfg.threads / 32; ++w) {
    float v[32];
    for (int l = 0; l < 32; ++l) v[l] = acc[size_t(32 * w + l)];
    for (int o = 16; o > 0; o >>= 1) {
      float nv[32];
      for (int l = 0; l < 32; ++l) nv[l] = v[l] + v[l ^ o];
      std::memcpy(v, nv, sizeof v);
    }
    total += v[0];
  }
  return total;
}

// gemv_act on every row of w against dot_act within the order bound and against the kernel's
// order emulated on the host (memcmp); returns the GPU output.
std::vector<float> check_gemv(const std::string& what, const HostWeight& hw, const WeightMatrix& dw,
                              const ActQ8Rows& xq_host, const DeviceAct& xd, cudaStream_t s) {
  const WeightMatrix hv = host_view(hw);
  cuda::DeviceBuffer y(size_t(hw.rows) * 4, "test y");
  cuda::gemv_act(dw, xd.q.row(0), y.as<float>(), s);
  DS4_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<float> got = download(y.as<float>(), size_t(hw.rows));
  const ActQ8View x = xq_host.row(0);
  const int64_t nb = hw.cols / act_values_per_scale(x.block);
  const cuda::GemvActConfig cfg = cuda::gemv_act_config(hw.type, hw.rows, hw.cols);
  int bad = 0, exact = 0;
  double worst = 0;
  std::vector<float> terms(static_cast<size_t>(nb));
  for (int64_t r = 0; r < hw.rows; ++r) {
    const float ref = dot_act(hv, r, x);
    double mag = 0;
    for (int64_t b = 0; b < nb; ++b) {
      terms[size_t(b)] = act_block_term(hv, r, x, b);
      mag += std::fabs(double(terms[size_t(b)]));
    }
    const float emulated = kernel_order_sum(terms, cfg);
    exact += std::memcmp(&emulated, &got[size_t(r)], 4) == 0;
    const double diff = std::fabs(double(got[size_t(r)]) - double(ref));
    const double bound = 2.0 * double(std::max<int64_t>(nb - 1, 0)) * std::ldexp(1.0, -24) * mag;
    if (!(diff <= bound)) ++bad;
    if (mag > 0) worst = std::max(worst, diff / mag);
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, " (max |gpu - cpu| / sum|term| %.2e)", worst);
  check(bad == 0, what + ": gemv_act == dot_act within 2 (nb - 1) 2^-24 sum|term| on " + std::to_string(hw.rows) +
                      " rows, " + std::to_string(bad) + " outside" + buf);
  check(exact == hw.rows, what + ": gemv_act == the kernel's order on the host (lanes " + std::to_string(cfg.lanes) +
                              ", threads " + std::to_string(cfg.threads) + ", memcmp) on " + std::to_string(exact) +
                              " of " + std::to_string(hw.rows) + " rows");
  return got;
}

struct Shape {
  DType type;
  int64_t rows, cols;
  const char* what;
};

// lanes: gemv_act_set_lanes for Q2_K / IQ2_XXS (0 = the default 4 lanes per block, 8).
void check_shape(const Shape& sh, int lanes, std::mt19937_64& rng, cudaStream_t s) {
  const ActBlock block = act_block_for(sh.type);
  cuda::gemv_act_set_lanes(lanes);
  const std::string what = std::string(dtype_name(sh.type)) + " " + std::to_string(sh.rows) + "x" +
                           std::to_string(sh.cols) + " " + sh.what +
                           (sh.type == DType::Q8_0 ? "" : lanes == 8 ? " (8 lanes)" : " (4 lanes)");
  const HostWeight hw = random_weight(sh.type, sh.rows, sh.cols, rng);
  const DeviceWeight dw = upload_now(hw);
  constexpr int64_t kIn = 16;  // input rows for gemv_act_rows
  const int64_t n = sh.cols;
  const std::vector<float> x = activations(kIn, n, n, rng);
  const ActQ8Rows xq = cpu_quantize(block, x, kIn, n, n);
  const DeviceAct xd = quantize_on_device(block, x, kIn, n, n, s);
  const std::vector<float> y0 = check_gemv(what, hw, dw.view, xq, xd, s);

  // gemv_act on each input row (reference for gemv_act_rows), every rows-per-block choice equal.
  std::vector<std::vector<float>> single(kIn);
  cuda::DeviceBuffer y(size_t(kIn * sh.rows) * 4, "test y rows");
  bool rb_same = true;
  for (int64_t i = 0; i < kIn; ++i) {
    cuda::gemv_act(dw.view, xd.q.row(i), y.as<float>(), s);
    single[size_t(i)] = download(y.as<float>(), size_t(sh.rows));
    if (i == 0) {
      for (int rb : {2, 4, 8})
        for (int g : {1, 2, 4, 8}) {
          cuda::gemv_act_set_rows_per_block(rb);
          cuda::gemv_act_set_groups(g);
          poison(y);
          cuda::gemv_act(dw.view, xd.q.row(0), y.as<float>(), s);
          rb_same = rb_same && same(download(y.as<float>(), size_t(sh.rows)), single[0]);
        }
      cuda::gemv_act_set_rows_per_block(0);
      cuda::gemv_act_set_groups(0);
    }
  }
  check(same(single[0], y0) && rb_same,
        what + ": gemv_act is deterministic and equal at 2, 4 and 8 rows per block x 1, 2, 4, 8 row groups per block");
  int rows_same = 0, rows_total = 0;
  // Q8_0: the tensor-core kernel (default; gemv_act_rows_mma.h) at auto, 1 and 2 tiles per block,
  // then the dp4a rows kernel (gemv_act_set_rows_mma(-1)), which the other formats always take:
  // the default row groups per block, and 4 (blocks that walk several groups); the default rows
  // per block over more than 4 inputs, and 4 and 8 (gemv_act_set_rows_kernel_rows); Q8_0's two
  // 8-input launches for n > 8 (default) and one 16-input launch (gemv_act_set_q8_split(false))
  struct Setting {
    int groups, rows;
    bool split;
    int mma, tiles, warps;  // gemv_act_set_rows_mma, gemv_act_rows_q8_mma_set_tiles / _set_split
  };
  for (const Setting st :
       {Setting{0, 0, true, 0, 0, 0}, Setting{0, 0, true, 1, 0, 0}, Setting{0, 0, true, 1, 1, 2},
        Setting{0, 0, true, 1, 2, 2}, Setting{0, 0, true, 1, 1, 4}, Setting{0, 0, true, 1, 2, 4}, Setting{0, 0, true, -1, 0, 0}, Setting{4, 0, true, -1, 0, 0},
        Setting{0, 4, true, -1, 0, 0}, Setting{0, 8, true, -1, 0, 0}, Setting{0, 0, false, -1, 0, 0},
        Setting{4, 8, false, -1, 0, 0}}) {
    if (sh.type != DType::Q8_0 && st.mma >= 0 && (st.mma || st.tiles)) continue;  // the first setting's launches
    cuda::gemv_act_rows_q8_mma_set_split(st.warps);
    cuda::gemv_act_set_groups(st.groups);
    cuda::gemv_act_set_rows_kernel_rows(st.rows);
    cuda::gemv_act_set_q8_split(st.split);
    cuda::gemv_act_set_rows_mma(st.mma);
    cuda::gemv_act_rows_q8_mma_set_tiles(st.tiles);
    for (int nr = 1; nr <= int(kIn); ++nr) {
      poison(y);
      cuda::GemvRows r;
      r.n = nr, r.x_row = n, r.y_row = sh.rows;
      cuda::gemv_act_rows(dw.view, xd.q.row(0), y.as<float>(), r, s);
      const std::vector<float> got = download(y.as<float>(), size_t(kIn * sh.rows));
      for (int i = 0; i < nr; ++i, ++rows_total)
        rows_same += std::memcmp(&got[size_t(i * sh.rows)], single[size_t(i)].data(), size_t(sh.rows) * 4) == 0;
    }
  }
  cuda::gemv_act_set_groups(0);
  cuda::gemv_act_set_rows_kernel_rows(0);
  cuda::gemv_act_set_q8_split(true);
  cuda::gemv_act_set_rows_mma(0);
  cuda::gemv_act_rows_q8_mma_set_tiles(0);
  cuda::gemv_act_rows_q8_mma_set_split(0);
  check(rows_same == rows_total, what + ": gemv_act_rows row i == gemv_act (memcmp), n = 1..16, Q8_0 on tensor cores "
                                        "(auto / 1 / 2 tiles x 2 / 4 warps per slot group) and on the dp4a kernel: default and 4 row "
                                        "groups per block, 2 / 4 / 8 rows per block, Q8_0 split in 8-input launches "
                                        "or not: " + std::to_string(rows_same) + " of " + std::to_string(rows_total));
  // IQ2_XXS: the staged sign table (4 lanes), the byte-permute decoder (both splits) and the lane
  // tables (4 lanes: aligned loads, one conflict-free lookup per table) give the same signed
  // integers: the same bits
  // (Q2_K: the aligned quant loads, 4 lanes)
  using Setter = void (*)(bool);
  const Setter setters[] = {cuda::gemv_act_set_iq2_sign_table, cuda::gemv_act_set_iq2_permute,
                            cuda::gemv_act_set_iq2_lane_tables, cuda::gemv_act_set_q2k_aligned};
  const char* hows[] = {"sign table (gemv_act_set_iq2_sign_table)", "byte permutes (gemv_act_set_iq2_permute)",
                        "lane tables (gemv_act_set_iq2_lane_tables)", "aligned loads (gemv_act_set_q2k_aligned)"};
  for (int variant = 0; variant < 4; ++variant) {
    if ((variant < 3) != (sh.type == DType::IQ2_XXS) || (variant == 3 && sh.type != DType::Q2_K)) continue;
    if (variant != 1 && lanes == 8) continue;
    const char* how = hows[variant];
    setters[variant](true);
    poison(y);  // (y holds single[0] from the rows checks above)
    cuda::gemv_act(dw.view, xd.q.row(0), y.as<float>(), s);
    const bool one = same(download(y.as<float>(), size_t(sh.rows)), single[0]);
    cuda::GemvRows r;
    r.n = 5, r.x_row = n, r.y_row = sh.rows;
    poison(y);
    cuda::gemv_act_rows(dw.view, xd.q.row(0), y.as<float>(), r, s);
    const std::vector<float> got = download(y.as<float>(), size_t(5 * sh.rows));
    int rows_ok = 0;
    for (int i = 0; i < 5; ++i)
      rows_ok += std::memcmp(&got[size_t(i * sh.rows)], single[size_t(i)].data(), size_t(sh.rows) * 4) == 0;
    setters[variant](false);
    check(one && rows_ok == 5, what + ": " + how + " gemv_act and gemv_act_rows n=5 == computed signs (memcmp), rows " +
                                   std::to_string(rows_ok) + " of 5");
  }
  cuda::gemv_act_set_lanes(0);
}

// E experts stacked in one weight; batched and multi-row launches routed by device ids.
void check_batched(DType type, int64_t rows, int64_t cols, std::mt19937_64& rng, cudaStream_t s) {
  constexpr int64_t E = 4, count = 5;
  const ActBlock block = act_block_for(type);
  const std::string what = std::string(dtype_name(type)) + " experts " + std::to_string(E) + "x" +
                           std::to_string(rows) + "x" + std::to_string(cols);
  const HostWeight hw = random_weight(type, E * rows, cols, rng);
  const DeviceWeight dw = upload_now(hw);
  WeightMatrix ew = dw.view;
  ew.rows = rows;
  const size_t id_stride = size_t(rows) * size_t(ew.row_stride_bytes());
  auto expert = [&](int64_t e) {
    WeightMatrix w = ew;
    w.data = static_cast<const uint8_t*>(dw.view.data) + size_t(e) * id_stride;
    return w;
  };
  // Activations: count entries x kGemvMaxRows rows each (entry b at b * x_stride values).
  const int64_t per_entry = cuda::kGemvMaxRows, in_rows = count * per_entry;
  const std::vector<float> x = activations(in_rows, cols, cols, rng);
  const DeviceAct xd = quantize_on_device(block, x, in_rows, cols, cols, s);
  const std::vector<int32_t> ids = {3, 0, 2, 3, 1};
  cuda::DeviceBuffer d_ids(ids.size() * 4, "test ids");
  upload_to(d_ids.get(), ids);
  cuda::DeviceBuffer y(size_t(count * per_entry * rows) * 4, "test y"), y1(size_t(rows) * 4, "test y1");
  auto single = [&](int64_t e, int64_t in_row) {
    cuda::gemv_act(expert(e), xd.q.row(in_row), y1.as<float>(), s);
    return download(y1.as<float>(), size_t(rows));
  };

  // gemv_act_batched: entry b reads input row b * per_entry, writes y + b * rows.
  cuda::gemv_act_batched(ew, xd.q.row(0), y.as<float>(),
                         cuda::GemvBatch{int(count), d_ids.as<int32_t>(), id_stride, 0, per_entry * cols, rows}, s);
  const std::vector<float> got = download(y.as<float>(), size_t(count * rows));
  int ok = 0;
  for (int64_t b = 0; b < count; ++b)
    ok += std::memcmp(&got[size_t(b * rows)], single(ids[size_t(b)], b * per_entry).data(), size_t(rows) * 4) == 0;
  check(ok == count, what + ": gemv_act_batched entry b == gemv_act on expert ids[b] (memcmp), " + std::to_string(ok) +
                         " of " + std::to_string(count));

  // gemv_act_rows routed: live = 4 of 5 entries, counts, x_idx / y_idx permutations.
  const int32_t live = 4;
  std::vector<int32_t> counts = {1, 16, 7, 3, 9}, x_idx(size_t(count * per_entry)), y_idx(size_t(count * per_entry));
  for (int64_t b = 0; b < count; ++b)
    for (int64_t i = 0; i < per_entry; ++i) {
      x_idx[size_t(b * per_entry + i)] = int32_t((i * 5 + b) % per_entry);
      y_idx[size_t(b * per_entry + i)] = int32_t((per_entry - 1 - i + b) % per_entry);
    }
  cuda::DeviceBuffer d_live(4, "live"), d_counts(counts.size() * 4, "counts"), d_x(x_idx.size() * 4, "x_idx"),
      d_y(y_idx.size() * 4, "y_idx");
  upload_to(d_live.get(), std::vector<int32_t>{live});
  upload_to(d_counts.get(), counts);
  upload_to(d_x.get(), x_idx);
  upload_to(d_y.get(), y_idx);
  // Each kernel width (N = 4, 8, 16; counts above n are capped at n), and entries 4 indices apart
  // (idx_stride 4: moe_group's small-pass stride; the same index lists read 4 apart, each entry's
  // 4 x / y rows still distinct).
  const std::pair<int, int> widths[] = {{4, 16}, {8, 16}, {16, 16}, {4, 4}};
  for (const auto& [n, stride] : widths) {
    poison(y);
    cuda::GemvRows r;
    r.n = n, r.x_row = cols, r.y_row = rows, r.idx_stride = stride;
    r.batch = cuda::GemvBatch{int(count), d_ids.as<int32_t>(), id_stride, 0, per_entry * cols, per_entry * rows};
    r.live = d_live.as<int32_t>(), r.counts = d_counts.as<int32_t>(), r.x_idx = d_x.as<int32_t>(),
    r.y_idx = d_y.as<int32_t>();
    cuda::gemv_act_rows(ew, xd.q.row(0), y.as<float>(), r, s);
    const std::vector<float> all = download(y.as<float>(), size_t(count * per_entry * rows));
    int good = 0, total = 0, untouched = 0, slots = 0;
    std::vector<uint8_t> written(size_t(count * per_entry), 0);
    for (int64_t b = 0; b < live; ++b)
      for (int64_t i = 0; i < std::min<int64_t>(counts[size_t(b)], n); ++i, ++total) {
        const int64_t xi = x_idx[size_t(b * stride + i)], yi = y_idx[size_t(b * stride + i)];
        written[size_t(b * per_entry + yi)] = 1;
        good += std::memcmp(&all[size_t((b * per_entry + yi) * rows)], single(ids[size_t(b)], b * per_entry + xi).data(),
                            size_t(rows) * 4) == 0;
      }
    for (size_t k = 0; k < written.size(); ++k) {
      if (written[k]) continue;
      ++slots;
      const float* p = &all[k * size_t(rows)];
      uint32_t bits0;
      std::memcpy(&bits0, p, 4);
      bool poison = bits0 == 0xffffffffu;
      for (int64_t j = 1; j < rows && poison; ++j) poison = std::memcmp(p + j, p, 4) == 0;
      untouched += poison;
    }
    check(good == total && untouched == slots,
          what + ": gemv_act_rows n=" + std::to_string(n) + " idx_stride " + std::to_string(stride) +
              " with ids / live / counts / x_idx / y_idx: " +
              std::to_string(good) + " of " + std::to_string(total) + " rows == gemv_act (memcmp), " +
              std::to_string(untouched) + " of " + std::to_string(slots) + " other rows untouched");
  }
}

// late_writer -> quantize_act -> gemv_act (form 0) / gemv_act_batched by device ids (form 1) /
// gemv_act_rows (form 2) / gemv_act_rows routed by device ids (form 3): with PDL the same output
// as plain launches, and the stale input gives another one.
void check_pdl(DType type, std::mt19937_64& rng, cudaStream_t s) {
  constexpr int64_t E = 4, R = 64, cols = 2048, count = 3;
  const ActBlock block = act_block_for(type);
  const HostWeight hw = random_weight(type, E * R, cols, rng);
  const DeviceWeight dw = upload_now(hw);
  const size_t id_stride = size_t(R) * size_t(dw.view.row_stride_bytes());
  const int64_t xn = count * cols;
  const std::vector<float> x_new = activations(count, cols, cols, rng), x_stale = activations(count, cols, cols, rng);
  const std::vector<int32_t> ids_new = {3, 0, 2}, ids_stale = {1, 2, 0};
  cuda::DeviceBuffer src(size_t(xn) * 4, "x written late"), x(size_t(xn) * 4, "x"), ids_src(count * 4, "ids late"),
      ids(count * 4, "ids"), y(size_t(count * E * R) * 4, "y"), qbuf(size_t(count) * cuda::act_q8_row_bytes(block, cols), "xq");
  const cuda::DeviceActQ8 xq = cuda::act_q8_carve(qbuf.get(), block, cols, count);
  upload_to(src.get(), x_new);
  upload_to(ids_src.get(), ids_new);
  const bool default_pdl = cuda::gemv_pdl();
  // forms: gemv_act; gemv_act_batched by device ids; gemv_act_rows over count input rows;
  // gemv_act_rows routed by device ids (one row per entry)
  for (int form = 0; form < 4; ++form) {
    const size_t ny = form == 0 ? size_t(E * R) : form == 2 ? size_t(count * E * R) : size_t(count * R);
    auto run = [&](bool pdl, bool write) {
      upload_to(x.get(), x_stale);
      upload_to(ids.get(), ids_stale);
      DS4_CUDA_CHECK(cudaMemsetAsync(qbuf.get(), 0, qbuf.bytes(), s));
      poison(y);
      cuda::gemv_set_pdl(pdl);
      if (write) {
        late_writer<<<1, 256, 0, s>>>(src.as<float>(), x.as<float>(), xn, ids_src.as<int32_t>(), ids.as<int32_t>(),
                                      int(count), kSpinNs);
        DS4_CUDA_CHECK_LAUNCH();
      }
      cuda::quantize_act(x.as<float>(), cols, count, xq, s);
      WeightMatrix e = dw.view;
      e.rows = R;
      const cuda::GemvBatch routed{int(count), ids.as<int32_t>(), id_stride, 0, cols, R};
      if (form == 0) {
        cuda::gemv_act(dw.view, xq.row(0), y.as<float>(), s);
      } else if (form == 1) {
        cuda::gemv_act_batched(e, xq.row(0), y.as<float>(), routed, s);
      } else {
        cuda::GemvRows r;
        r.n = form == 2 ? int(count) : 1;
        r.x_row = cols;
        r.y_row = form == 2 ? E * R : R;
        if (form == 3) r.batch = routed;
        cuda::gemv_act_rows(form == 2 ? dw.view : e, xq.row(0), y.as<float>(), r, s);
      }
      DS4_CUDA_CHECK(cudaStreamSynchronize(s));
      return download(y.as<float>(), ny);
    };
    const auto stale = run(false, false), ref = run(false, true), got = run(true, true);
    const char* forms[] = {" gemv_act", " gemv_act_batched by device ids", " gemv_act_rows n=3",
                           " gemv_act_rows by device ids"};
    const std::string what = std::string(dtype_name(type)) + forms[form];
    check(!same(stale, ref), what + ": the stale input gives another output (the PDL check can fail)");
    check(same(got, ref), what + ": quantize_act + product as PDL launches after a late writer == plain (memcmp)");
  }
  cuda::gemv_set_pdl(default_pdl);
}

void check_bad_input(std::mt19937_64& rng, cudaStream_t s) {
  const HostWeight q8 = random_weight(DType::Q8_0, 8, 256, rng), q2 = random_weight(DType::Q2_K, 8, 256, rng);
  const DeviceWeight d8 = upload_now(q8), d2 = upload_now(q2);
  const std::vector<float> x = activations(2, 256, 256, rng);
  const DeviceAct a0 = quantize_on_device(ActBlock::kQ8_0, x, 2, 256, 256, s);
  const DeviceAct ak = quantize_on_device(ActBlock::kQ8_K, x, 2, 256, 256, s);
  cuda::DeviceBuffer y(64 * 4, "y");
  float* yp = y.as<float>();
  check(throws([&] { cuda::gemv_act(d8.view, ak.q.row(0), yp, s); }), "bad input: Q8_0 weight with Q8_K blocks throws");
  check(throws([&] { cuda::gemv_act(d2.view, a0.q.row(0), yp, s); }), "bad input: Q2_K weight with Q8_0 blocks throws");
  WeightMatrix narrow = d2.view;
  narrow.cols = 128;
  ActQ8View xk = ak.q.row(0);
  xk.n = 128;
  check(throws([&] { cuda::gemv_act(narrow, xk, yp, s); }), "bad input: Q2_K cols 128 (not a multiple of 256) throws");
  ActQ8View short_x = a0.q.row(0);
  short_x.n = 224;
  check(throws([&] { cuda::gemv_act(d8.view, short_x, yp, s); }), "bad input: x.n != cols throws");
  WeightMatrix bf = d8.view;
  bf.type = DType::BF16;
  check(throws([&] { cuda::gemv_act(bf, a0.q.row(0), yp, s); }) && !cuda::gemv_act_supports(DType::BF16) &&
            cuda::gemv_act_supports(DType::IQ2_XXS),
        "bad input: BF16 weight throws (gemv_act_supports says so)");
  ActQ8View odd = a0.q.row(0);
  odd.q += 1;
  check(throws([&] { cuda::gemv_act(d8.view, odd, yp, s); }), "bad input: q not 16-byte aligned throws");
  ActQ8View no_bsums = ak.q.row(0);
  no_bsums.bsums = nullptr;
  check(throws([&] { cuda::gemv_act(d2.view, no_bsums, yp, s); }), "bad input: Q8_K without bsums throws");
  cuda::GemvRows r;
  r.n = 17, r.x_row = 256, r.y_row = 8;
  check(throws([&] { cuda::gemv_act_rows(d8.view, a0.q.row(0), yp, r, s); }), "bad input: gemv_act_rows n=17 throws");
  r.n = 2, r.x_row = 100;
  check(throws([&] { cuda::gemv_act_rows(d8.view, a0.q.row(0), yp, r, s); }), "bad input: x_row 100 throws");
  // the tensor-core rows kernel and its knobs (the knobs keep their values when they throw)
  check(throws([&] { cuda::gemv_act_rows_q8_mma(d2.view, ak.q.row(0), yp, 2, 256, 8, s); }) &&
            !cuda::gemv_act_rows_q8_mma_fits(d2.view) && cuda::gemv_act_rows_q8_mma_fits(d8.view),
        "bad input: gemv_act_rows_q8_mma on a Q2_K weight throws (fits says so)");
  WeightMatrix wide = d8.view;
  wide.cols = 32768;  // 1024 blocks: 8 steps per slot, past the staged 4
  check(!cuda::gemv_act_rows_q8_mma_fits(wide) &&
            throws([&] { cuda::gemv_act_rows_q8_mma(wide, a0.q.row(0), yp, 2, 32768, 8, s); }),
        "bad input: gemv_act_rows_q8_mma past 16384 values per row throws");
  for (int n : {0, 17})
    check(throws([&] { cuda::gemv_act_rows_q8_mma(d8.view, a0.q.row(0), yp, n, 256, 8, s); }),
          "bad input: gemv_act_rows_q8_mma n=" + std::to_string(n) + " throws");
  check(throws([] { cuda::gemv_act_set_rows_mma(2); }) && throws([] { cuda::gemv_act_set_rows_mma(-2); }) &&
            throws([] { cuda::gemv_act_rows_q8_mma_set_split(3); }) &&
            throws([] { cuda::gemv_act_rows_q8_mma_set_split(1); }) &&
            throws([] { cuda::gemv_act_rows_q8_mma_set_tiles(3); }),
        "bad input: gemv_act_set_rows_mma 2 / -2, split 3 / 1, tiles 3 throw");
  check(throws([&] {
          cuda::gemv_act_batched(d2.view, ak.q.row(0), yp, cuda::GemvBatch{2, nullptr, 0, 0, 128, 8}, s);
        }),
        "bad input: Q8_K x_stride 128 (not a whole block) throws");
  check(throws([&] { cuda::gemv_act_batched(d8.view, a0.q.row(0), yp, cuda::GemvBatch{0, nullptr, 0, 0, 0, 0}, s); }),
        "bad input: batch count 0 throws");
  cuda::DeviceActQ8 bad = a0.q;
  bad.n = 48;
  check(throws([&] { cuda::quantize_act(a0.xf.as<float>(), 256, 1, bad, s); }),
        "bad input: quantize_act n=48 (not a multiple of 32) throws");
  check(throws([&] { cuda::quantize_act(a0.xf.as<float>(), 256, 3, a0.q, s); }),
        "bad input: quantize_act more rows than the buffer throws");
  check(throws([&] { cuda::act_q8_row_bytes(ActBlock::kQ8_K, 128); }) &&
            throws([&] { cuda::act_q8_row_bytes(ActBlock::kNone, 256); }),
        "bad input: act_q8_row_bytes of a partial block / kNone throws");
  check(throws([] { cuda::gemv_act_set_rows_per_block(3); }) && throws([] { cuda::gemv_act_set_lanes(2); }) &&
            throws([] { cuda::gemv_act_set_groups(3); }) && throws([] { cuda::gemv_act_set_rows_kernel_rows(1); }),
        "bad input: rows per block 3 / lanes per block 2 / row groups per block 3 / rows-kernel rows 1 throw");
  check(throws([&] { (void)a0.q.row(2); }), "bad input: DeviceActQ8::row past rows throws");
}

}  // namespace

int main() {
  std::mt19937_64 rng(2312);
  cudaStream_t s;
  DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  g_stream = s;
  for (int64_t n : {256, 1024, 4096, 7168}) check_quantize(ActBlock::kQ8_K, n, rng, s);
  for (int64_t n : {32, 96, 1056, 4096, 7168}) check_quantize(ActBlock::kQ8_0, n, rng, s);
  const Shape shapes[] = {
      {DType::IQ2_XXS, 2048, 4096, "DeepSeek expert gate|up"},
      {DType::IQ2_XXS, 11, 7168, "odd rows, wide"},
      {DType::IQ2_XXS, 37, 256, "odd rows, one block"},
      {DType::Q2_K, 4096, 2048, "DeepSeek / GLM expert down"},
      {DType::Q2_K, 13, 4096, "odd rows"},
      {DType::Q2_K, 37, 256, "odd rows, one block"},
      {DType::Q2_K, 300, 7168, "wide"},
      {DType::Q8_0, 1024, 4096, "square (rows cut)"},
      {DType::Q8_0, 4096, 2048, "tall (2 tiles per block at n > 8)"},
      {DType::Q8_0, 300, 8192, "2 steps per slot"},
      {DType::Q8_0, 45, 12288, "3 steps per slot, odd rows"},
      {DType::Q8_0, 24, 16384, "4 steps per slot"},
      {DType::Q8_0, 29, 2112, "66 blocks: 2-byte copies, 3 warps, a 2-block span"},
      {DType::Q8_0, 21, 1632, "51 blocks: 2-byte copies, 2 warps"},
      {DType::Q8_0, 8, 32768, "past the tensor-core kernel (dp4a)"},
      {DType::Q8_0, 512, 7168, "wide"},
      {DType::Q8_0, 7168, 512, "tall"},
      {DType::Q8_0, 37, 96, "odd rows, 3 blocks"},
      {DType::Q8_0, 13, 32, "odd rows, one block"},
  };
  for (const Shape& sh : shapes)
    for (int lanes : {0, 8}) {
      if (lanes == 8 && sh.type == DType::Q8_0) continue;  // one lane per block, no other split
      check_shape(sh, lanes, rng, s);
    }
  for (int g : {0, 2}) {  // also with blocks that walk 2 row groups (expert rows 96 / 40 / 24: tails)
    std::printf("-- row groups per block: %s\n", g ? "2" : "default");
    cuda::gemv_act_set_groups(g);
    check_batched(DType::IQ2_XXS, 96, 4096, rng, s);
    check_batched(DType::Q2_K, 40, 2048, rng, s);
    check_batched(DType::Q8_0, 24, 1024, rng, s);
    for (DType t : {DType::Q8_0, DType::Q2_K, DType::IQ2_XXS}) check_pdl(t, rng, s);
  }
  cuda::gemv_act_set_groups(0);
  std::printf("-- IQ2_XXS byte permutes (gemv_act_set_iq2_permute)\n");
  cuda::gemv_act_set_iq2_permute(true);
  check_batched(DType::IQ2_XXS, 96, 4096, rng, s);
  check_pdl(DType::IQ2_XXS, rng, s);
  cuda::gemv_act_set_iq2_permute(false);
  // (against gemv_act under the same setting; the shapes' variant items above hold it to the
  // default decoder) auto: on 132 SMs one row group per block at these sizes; 4: blocks walking
  // 4 groups, the last block of an expert fewer
  for (int g : {0, 4}) {
    std::printf("-- IQ2_XXS lane tables (gemv_act_set_iq2_lane_tables), row groups %s\n", g ? "4" : "auto");
    cuda::gemv_act_set_iq2_lane_tables(true);
    cuda::gemv_act_set_groups(g);
    check_batched(DType::IQ2_XXS, 96, 4096, rng, s);
    check_batched(DType::IQ2_XXS, 40, 2816, rng, s);
    check_pdl(DType::IQ2_XXS, rng, s);
  }
  cuda::gemv_act_set_groups(0);
  cuda::gemv_act_set_iq2_lane_tables(false);
  std::printf("-- Q2_K aligned loads (gemv_act_set_q2k_aligned)\n");
  cuda::gemv_act_set_q2k_aligned(true);
  check_batched(DType::Q2_K, 40, 2048, rng, s);
  check_batched(DType::Q2_K, 24, 2816, rng, s);
  check_pdl(DType::Q2_K, rng, s);
  cuda::gemv_act_set_q2k_aligned(false);
  check_bad_input(rng, s);
  DS4_CUDA_CHECK(cudaStreamDestroy(s));
  return summary();
}
