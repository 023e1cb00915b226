// Correctness of every CUDA kernel against a host reference computed in this program:
// random inputs (fresh per case), outputs poisoned with NaN before each run, reference in
// double from weights decoded by the CPU backend (core dequantize_row). Prints one table
// row per case (NMSE = sum (y-ref)^2 / sum ref^2, max abs error, max error relative to
// max |ref|) and exits non-zero if any
// case misses its stated tolerance. Runs on the H200 machine (tools/cuda_device_run.sh).
// Usage: test_cuda_ops [--small]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/activation.h"
#include "backend/cuda/check.h"
#include "backend/cuda/conv1d.h"
#include "backend/cuda/embed.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_tuning.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/moe_group.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/rope.h"
#include "backend/cuda/softmax.h"
#include "backend/cuda/staged_upload.h"
#include "backend/cuda/topk_select.h"
#include "core/error.h"
#include "core/weight.h"
#include "device_weight.h"
#include "host_ref.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

int g_failures = 0;
std::mt19937_64 g_rng(20261130);

std::vector<float> randn(size_t n, float sd = 1.f) {
  std::normal_distribution<float> d(0.f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g_rng);
  return v;
}

// Device copy of a host vector, and back.
cuda::DeviceBuffer to_device(const std::vector<float>& v, const char* what) {
  cuda::DeviceBuffer b(v.size() * sizeof(float), what);
  DS4_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), b.bytes(), cudaMemcpyHostToDevice));
  return b;
}
std::vector<float> to_host(const cuda::DeviceBuffer& b, size_t n) {
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> v(n);
  DS4_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}
void poison(cuda::DeviceBuffer& b) { DS4_CUDA_CHECK(cudaMemset(b.get(), 0xff, b.bytes())); }  // all-ones = NaN

void report(const std::string& op, const std::string& shape, const std::vector<float>& y,
            const std::vector<double>& ref, double tol_nmse, double tol_rel) {
  double num = 0, den = 0, max_abs = 0, max_ref = 0;
  bool finite = true;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(y[i])) finite = false;
    const double e = double(y[i]) - ref[i];
    num += e * e;
    den += ref[i] * ref[i];
    max_abs = std::max(max_abs, std::fabs(e));
    max_ref = std::max(max_ref, std::fabs(ref[i]));
  }
  const double nmse = den > 0 ? num / den : num;
  const double rel = max_ref > 0 ? max_abs / max_ref : max_abs;
  const bool ok = finite && nmse <= tol_nmse && rel <= tol_rel;
  if (!ok) ++g_failures;
  std::printf("%-22s %-18s %10.2e %10.2e %10.2e %9.0e %9.0e  %s\n", op.c_str(), shape.c_str(), nmse, max_abs, rel,
              tol_nmse, tol_rel, ok ? "PASS" : (finite ? "FAIL" : "FAIL(nan)"));
}

std::string shape2(int64_t a, int64_t b) { return std::to_string(a) + "x" + std::to_string(b); }

// f32 accumulation over up to ~7k terms in a different order than the double reference.
constexpr double kGemvNmse = 1e-9, kGemvRel = 1e-4;

// y = W x through one read path and rows-per-block choice, against `ref`.
void test_gemv_run(const DeviceWeight& dw, const std::vector<float>& x, const std::vector<double>& ref,
                   const cuda::GemvOptions& opt, const std::string& name) {
  const int64_t rows = dw.view.rows;
  cuda::DeviceBuffer dx = to_device(x, "x"), dy(static_cast<size_t>(rows) * sizeof(float), "y");
  poison(dy);
  cuda::gemv(dw.view, dx.as<float>(), dy.as<float>(), nullptr, opt);
  const std::vector<float> y = to_host(dy, static_cast<size_t>(rows));
  report(name, shape2(rows, dw.view.cols), y, ref, kGemvNmse, kGemvRel);
}

// One random weight, checked through every read path gemv has for its format; with
// `sweep_rows`, also with every rows-per-block choice (1, 2, 4, 8: the tail paths).
void test_gemv(DType t, int64_t rows, int64_t cols, int64_t group = 64, DType st = DType::F16, bool sweep_rows = false) {
  const HostWeight hw = random_weight(t, rows, cols, g_rng, group, st);
  const DeviceWeight dw = upload(hw);
  const std::vector<float> x = randn(static_cast<size_t>(cols));
  // Reference: the CPU backend's decoder (core), then a double dot.
  const WeightMatrix view = host_view(hw);
  std::vector<double> ref(static_cast<size_t>(rows));
  std::vector<float> wrow(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(view, r, wrow.data());
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += double(wrow[c]) * double(x[c]);
    ref[r] = s;
  }
  std::string name = "gemv_" + std::string(dtype_name(t));
  if (t == DType::MLX_Q4 || t == DType::MLX_Q8) name += "_g" + std::to_string(group) + (st == DType::BF16 ? "_bf16" : "_f16");
  std::vector<std::pair<cuda::GemvPath, std::string>> paths = {{cuda::GemvPath::kAuto, ""}};
  if (cuda::gemv_can_stage(dw.view)) paths = {{cuda::GemvPath::kDirect, "/direct"}, {cuda::GemvPath::kStaged, "/staged"}};
  for (const auto& [path, path_name] : paths) {
    if (!sweep_rows) {
      test_gemv_run(dw, x, ref, cuda::GemvOptions{path, 0}, name + path_name);
      continue;
    }
    for (int rb : {1, 2, 4, 8})
      test_gemv_run(dw, x, ref, cuda::GemvOptions{path, rb}, name + path_name + "/R" + std::to_string(rb));
  }
}

// gemv_batched: `count` entries pick experts by device ids out of E packed at a 256-byte
// aligned stride, each with its own x and y (the MoE expert launch).
void test_gemv_batched(DType t, int64_t E, int64_t rows, int64_t cols) {
  const std::vector<int32_t> ids = {int32_t(E - 1), 0, int32_t(E / 2)};
  const int64_t count = int64_t(ids.size());
  const size_t rb = size_t(row_bytes(t, cols)), stride = (rows * rb + 255) / 256 * 256;
  std::vector<HostWeight> hw;
  cuda::DeviceBuffer dw(stride * size_t(E), "experts");
  for (int64_t e = 0; e < E; ++e) {
    hw.push_back(random_weight(t, rows, cols, g_rng));
    DS4_CUDA_CHECK(cudaMemcpy(dw.as<uint8_t>() + e * stride, hw.back().data.data(), rows * rb, cudaMemcpyHostToDevice));
  }
  const int64_t xs = (cols + 3) / 4 * 4;
  const std::vector<float> x = randn(size_t(count * xs));
  std::vector<double> ref(size_t(count * rows));
  std::vector<float> wrow(static_cast<size_t>(cols));
  for (int64_t b = 0; b < count; ++b) {
    const WeightMatrix view = host_view(hw[size_t(ids[size_t(b)])]);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(view, r, wrow.data());
      double s = 0;
      for (int64_t c = 0; c < cols; ++c) s += double(wrow[c]) * double(x[size_t(b * xs + c)]);
      ref[size_t(b * rows + r)] = s;
    }
  }
  WeightMatrix w = host_view(hw[0]);
  w.data = dw.get();
  cuda::DeviceBuffer dx = to_device(x, "x"), dy(size_t(count * rows) * sizeof(float), "y");
  cuda::DeviceBuffer did(ids.size() * sizeof(int32_t), "ids");
  DS4_CUDA_CHECK(cudaMemcpy(did.get(), ids.data(), did.bytes(), cudaMemcpyHostToDevice));
  poison(dy);
  cuda::gemv_batched(w, dx.as<float>(), dy.as<float>(), cuda::GemvBatch{int(count), did.as<int32_t>(), stride, 0, xs, rows},
                     nullptr);
  report("gemv_batched_" + std::string(dtype_name(t)), shape2(rows, cols) + "x3", to_host(dy, size_t(count * rows)), ref,
         kGemvNmse, kGemvRel);
}

// gemv_rows against the single-row gemv on the direct path, row by row: bit-identical (same
// per-thread unit order and reductions). Each comparison reports its difference against
// kRowsRel of the row's largest |y| (how far off a failing form is); the per-kernel count of
// bitwise comparisons must be all of them (main). Input and output rows at padded strides (the
// model's row-scratch layout).
constexpr double kRowsRel = 1e-5;
int g_rows_bitwise = 0, g_rows_checked = 0;

void rows_compare(const std::string& name, const std::vector<float>& got, const std::vector<float>& want) {
  double max_abs = 0, max_ref = 0;
  bool finite = true, same = true;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) finite = false;
    if (std::memcmp(&got[i], &want[i], 4) != 0) same = false;
    max_abs = std::max(max_abs, std::fabs(double(got[i]) - double(want[i])));
    max_ref = std::max(max_ref, std::fabs(double(want[i])));
  }
  const double rel = max_ref > 0 ? max_abs / max_ref : max_abs;
  const bool ok = finite && rel <= kRowsRel;
  ++g_rows_checked;
  g_rows_bitwise += same;
  if (!ok) ++g_failures;
  std::printf("%-22s %-18s %10s %10.2e %10.2e %9s %9.0e  %s%s\n", name.c_str(), "vs gemv/direct", "-", max_abs, rel, "-",
              kRowsRel, ok ? "PASS" : (finite ? "FAIL" : "FAIL(nan)"), same ? " (bitwise)" : "");
}

void test_gemv_rows(DType t, int64_t rows, int64_t cols, int n, DType st = DType::F16) {
  const HostWeight hw = random_weight(t, rows, cols, g_rng, 64, st);
  const DeviceWeight dw = upload(hw);
  const int64_t xs = (cols + 3) / 4 * 4 + 8, ys = rows + 5;
  const std::vector<float> x = randn(size_t(n * xs));
  cuda::DeviceBuffer dx = to_device(x, "x"), dy(size_t(n * ys) * 4, "y"), d1(size_t(rows) * 4, "y1");
  poison(dy);
  cuda::GemvRows r;
  r.n = n, r.x_row = xs, r.y_row = ys;
  cuda::gemv_rows(dw.view, dx.as<float>(), dy.as<float>(), r, nullptr);
  const std::vector<float> all = to_host(dy, size_t(n * ys));
  std::vector<float> got, want;
  for (int i = 0; i < n; ++i) {
    cuda::gemv(dw.view, dx.as<float>() + i * xs, d1.as<float>(), nullptr, cuda::GemvOptions{cuda::GemvPath::kDirect, 0});
    const std::vector<float> y1 = to_host(d1, size_t(rows));
    want.insert(want.end(), y1.begin(), y1.end());
    got.insert(got.end(), all.begin() + i * ys, all.begin() + i * ys + rows);
  }
  rows_compare("gemv_rows_" + std::string(dtype_name(t)) + "/n" + std::to_string(n), got, want);
}

// The MoE form: E experts at a fixed stride, 5 entries of which 4 are live (the 5th must not
// write), per-entry row counts and gathered x / scattered y rows, vs gemv per (expert, row);
// the index lists S apart (GemvRows::idx_stride: 16, or moe_group's small-pass 4; live counts <= 4).
void test_gemv_rows_grouped(DType t, int64_t E, int64_t rows, int64_t cols, int S = cuda::kGemvMaxRows) {
  const size_t rb = size_t(row_bytes(t, cols)), stride = (rows * rb + 255) / 256 * 256;
  std::vector<HostWeight> hw;
  cuda::DeviceBuffer dw(stride * size_t(E), "experts");
  for (int64_t e = 0; e < E; ++e) {
    hw.push_back(random_weight(t, rows, cols, g_rng));
    DS4_CUDA_CHECK(cudaMemcpy(dw.as<uint8_t>() + e * stride, hw.back().data.data(), rows * rb, cudaMemcpyHostToDevice));
  }
  const int tokens = 6, K = 2;  // 12 (token, slot) pairs over 4 live experts
  const std::vector<int32_t> experts = {int32_t(E - 1), 0, int32_t(E / 2), 1, 2}, counts = {3, 4, 2, 3, 5};
  const int32_t live = 4;
  std::vector<int32_t> xi(size_t(5 * S), 0), yi(xi.size(), 0);
  int slot = 0;
  for (int b = 0; b < live; ++b)
    for (int i = 0; i < counts[size_t(b)]; ++i, ++slot) {
      xi[size_t(b * S + i)] = (slot * 5) % tokens;
      yi[size_t(b * S + i)] = slot;
    }
  const int64_t xs = (cols + 3) / 4 * 4, slots = tokens * K;
  const std::vector<float> x = randn(size_t(tokens * xs));
  auto dev = [](const std::vector<int32_t>& v) {
    cuda::DeviceBuffer b(v.size() * 4, "ints");
    DS4_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), b.bytes(), cudaMemcpyHostToDevice));
    return b;
  };
  cuda::DeviceBuffer dx = to_device(x, "x"), dy(size_t(slots * rows) * 4, "y"), d1(size_t(rows) * 4, "y1");
  cuda::DeviceBuffer de = dev(experts), dc = dev(counts), dl = dev({live}), dxi = dev(xi), dyi = dev(yi);
  poison(dy);
  WeightMatrix w = host_view(hw[0]);
  w.data = dw.get();
  cuda::GemvRows r;
  r.n = S, r.x_row = xs, r.y_row = rows, r.idx_stride = S;
  r.batch = cuda::GemvBatch{5, de.as<int32_t>(), stride, 0, 0, 0};
  r.live = dl.as<int32_t>(), r.counts = dc.as<int32_t>(), r.x_idx = dxi.as<int32_t>(), r.y_idx = dyi.as<int32_t>();
  cuda::gemv_rows(w, dx.as<float>(), dy.as<float>(), r, nullptr);
  const std::vector<float> all = to_host(dy, size_t(slots * rows));
  std::vector<float> got, want;
  for (int b = 0; b < live; ++b)
    for (int i = 0; i < counts[size_t(b)]; ++i) {
      WeightMatrix we = w;
      we.data = dw.as<uint8_t>() + size_t(experts[size_t(b)]) * stride;
      const int32_t xr = xi[size_t(b * S + i)], yr = yi[size_t(b * S + i)];
      cuda::gemv(we, dx.as<float>() + xr * xs, d1.as<float>(), nullptr, cuda::GemvOptions{cuda::GemvPath::kDirect, 0});
      const std::vector<float> y1 = to_host(d1, size_t(rows));
      want.insert(want.end(), y1.begin(), y1.end());
      got.insert(got.end(), all.begin() + yr * rows, all.begin() + yr * rows + rows);
    }
  rows_compare("gemv_rows_grouped_" + std::string(dtype_name(t)) + "/S" + std::to_string(S), got, want);
}

// MLX q4 / q8 under kernels 2 and 3: the weights' fields read as subnormal floats on x scaled by
// 2^80 (gemv_formats.cuh MlxAffine), gemv decoding per row, gemv_rows decoding each unit once
// (expand) for its n input rows: the two kernels must give the same bits, and match the double
// reference.
// x spans 2^-40 .. 2^40 (random powers of two on Gaussian values, a column of zeros) so the
// scaling's stated range is exercised, not only values near 1.
void test_gemv_mlx_scaled_x(DType t, int64_t rows, int64_t cols, int64_t group, DType st) {
  const HostWeight hw = random_weight(t, rows, cols, g_rng, group, st);
  const DeviceWeight dw = upload(hw);
  const int n = 3;
  const int64_t xs = cols + 8;
  std::vector<float> x = randn(size_t(n * xs));
  std::uniform_int_distribution<int> exp_pick(-40, 40);
  for (int i = 0; i < n; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      float& v = x[size_t(i * xs + c)];
      v = c == 5 ? 0.f : std::ldexp(v, i == 0 ? 0 : exp_pick(g_rng));
    }
  cuda::DeviceBuffer dx = to_device(x, "x"), dy(size_t(n * rows) * 4, "y"), d1(size_t(rows) * 4, "y1");
  poison(dy);
  cuda::GemvRows r;
  r.n = n, r.x_row = xs, r.y_row = rows;
  r.cuda_cores = true;  // both kernels on CUDA cores whatever DS4_MLX4_TC says
  cuda::GemvOptions opt{cuda::GemvPath::kDirect, 0};
  opt.cuda_cores = true;
  cuda::gemv_rows(dw.view, dx.as<float>(), dy.as<float>(), r, nullptr);
  const std::vector<float> all = to_host(dy, size_t(n * rows));
  // The double reference of every x row, each weight row dequantized once.
  std::vector<std::vector<double>> ref(size_t(n), std::vector<double>(static_cast<size_t>(rows)));
  std::vector<float> wrow(static_cast<size_t>(cols));
  const WeightMatrix view = host_view(hw);
  for (int64_t row = 0; row < rows; ++row) {
    dequantize_row(view, row, wrow.data());
    for (int i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t c = 0; c < cols; ++c) s += double(wrow[size_t(c)]) * double(x[size_t(i * xs + c)]);
      ref[size_t(i)][size_t(row)] = s;
    }
  }
  for (int i = 0; i < n; ++i) {
    cuda::gemv(dw.view, dx.as<float>() + i * xs, d1.as<float>(), nullptr, opt);
    const std::vector<float> one = to_host(d1, size_t(rows));
    const bool same = std::memcmp(one.data(), all.data() + size_t(i) * size_t(rows), size_t(rows) * 4) == 0;
    if (!same) ++g_failures;
    std::printf("%-22s %-18s %s\n", ("gemv_scaled_x_" + std::string(dtype_name(t)) + "/x" + std::to_string(i)).c_str(),
                shape2(rows, cols).c_str(), same ? "PASS (gemv == gemv_rows bitwise)" : "FAIL gemv != gemv_rows");
    report("gemv_scaled_x_ref_" + std::string(dtype_name(t)), shape2(rows, cols), one, ref[size_t(i)], kGemvNmse,
           kGemvRel);
  }
}

// embed_rows_f32: rows picked by device ids equal core dequantize_row bit for bit; an id
// outside [0, rows) gives NaN; a type without a device lookup throws InputError.
void test_embed_rows(DType t, int64_t rows, int64_t cols, int64_t group = 64, DType st = DType::F16) {
  const HostWeight hw = random_weight(t, rows, cols, g_rng, group, st);
  const DeviceWeight dw = upload(hw);
  const std::vector<int32_t> ids = {3, 0, int32_t(rows - 1), 7, -1, int32_t(rows)};
  const int64_t n = int64_t(ids.size());
  cuda::DeviceBuffer d_ids(ids.size() * 4, "embed ids"), out(size_t(n * cols) * 4, "embed rows");
  DS4_CUDA_CHECK(cudaMemcpy(d_ids.get(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  poison(out);
  cuda::embed_rows_f32(dw.view, d_ids.as<int32_t>(), 1, n, out.as<float>(), cols, nullptr);
  const std::vector<float> got = to_host(out, size_t(n * cols));
  const WeightMatrix view = host_view(hw);
  std::vector<float> want(static_cast<size_t>(cols));
  bool ok = true;
  for (int64_t i = 0; i < n; ++i) {
    const float* g = got.data() + i * cols;
    if (ids[size_t(i)] < 0 || ids[size_t(i)] >= rows) {
      for (int64_t c = 0; c < cols; ++c) ok = ok && std::isnan(g[c]);
      continue;
    }
    dequantize_row(view, ids[size_t(i)], want.data());
    ok = ok && std::memcmp(g, want.data(), size_t(cols) * 4) == 0;
  }
  if (!ok) ++g_failures;
  std::string name = "embed_rows_" + std::string(dtype_name(t));
  if (t == DType::MLX_Q4 || t == DType::MLX_Q8) name += "_g" + std::to_string(group) + (st == DType::BF16 ? "_bf16" : "_f16");
  std::printf("%-22s %-18s %10s %10s %10s %9s %9s  %s\n", name.c_str(),
              (std::to_string(rows) + "x" + std::to_string(cols)).c_str(), "-", "-", "-", "-", "bitwise",
              ok ? "PASS" : "FAIL");
}

void test_rmsnorm(int64_t rows, int64_t dim) {
  const float eps = 1e-6f;
  const std::vector<float> x = randn(static_cast<size_t>(rows * dim), 2.f), w = randn(static_cast<size_t>(dim));
  cuda::DeviceBuffer dx = to_device(x, "x"), dw = to_device(w, "w"), dy(x.size() * 4, "y");
  poison(dy);
  cuda::rmsnorm_f32(dx.as<float>(), dw.as<float>(), dy.as<float>(), rows, dim, eps, nullptr);
  const std::vector<float> y = to_host(dy, x.size());
  std::vector<double> ref(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / double(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) ref[r * dim + i] = x[r * dim + i] * inv * w[i];
  }
  report("rmsnorm_f32", shape2(rows, dim), y, ref, 1e-11, 1e-5);
}

void test_softmax(int64_t rows, int64_t cols, float scale, bool masked_row) {
  std::vector<float> x = randn(static_cast<size_t>(rows * cols), 3.f);
  for (int64_t i = 0; i < rows * cols; i += 7) x[i] = -INFINITY;  // masked entries
  if (masked_row)
    for (int64_t i = 0; i < cols; ++i) x[i] = -INFINITY;  // row 0 fully masked: expect zeros
  cuda::DeviceBuffer dx = to_device(x, "x"), dy(x.size() * 4, "y");
  poison(dy);
  cuda::softmax_f32(dx.as<float>(), dy.as<float>(), rows, cols, scale, nullptr);
  const std::vector<float> y = to_host(dy, x.size());
  std::vector<double> ref(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < cols; ++i) m = std::max(m, double(scale) * x[r * cols + i]);
    if (m == -INFINITY) continue;
    for (int64_t i = 0; i < cols; ++i) s += std::exp(double(scale) * x[r * cols + i] - m);
    for (int64_t i = 0; i < cols; ++i) ref[r * cols + i] = std::exp(double(scale) * x[r * cols + i] - m) / s;
  }
  // f32 sums of up to 64k exponentials: ~1e-6 relative by design.
  report(masked_row ? "softmax_f32(masked)" : "softmax_f32", shape2(rows, cols), y, ref, 1e-10, 1e-4);
}

void test_rope(cuda::RopeStyle style, int64_t tokens, int64_t heads, int64_t head_dim, int64_t rot_dim) {
  const float theta = 10000.f;
  const std::vector<float> x = randn(static_cast<size_t>(tokens * heads * head_dim));
  std::vector<int32_t> pos(static_cast<size_t>(tokens));
  for (auto& p : pos) p = int32_t(g_rng() % 4096);
  cuda::DeviceBuffer dx = to_device(x, "x"), dpos(pos.size() * 4, "positions");
  DS4_CUDA_CHECK(cudaMemcpy(dpos.get(), pos.data(), pos.size() * 4, cudaMemcpyHostToDevice));
  cuda::RopeParams p{tokens, heads, head_dim, rot_dim, theta, dpos.as<int32_t>(), style};
  cuda::rope_f32(dx.as<float>(), p, nullptr);
  const std::vector<float> y = to_host(dx, x.size());
  std::vector<double> ref(x.begin(), x.end());
  const int64_t half = rot_dim / 2;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double ang = double(pos[t]) * std::pow(double(theta), -double(i) / double(half));
        const int64_t base = (t * heads + h) * head_dim;
        const int64_t a = base + (style == cuda::RopeStyle::kNeox ? i : 2 * i);
        const int64_t b = base + (style == cuda::RopeStyle::kNeox ? i + half : 2 * i + 1);
        ref[a] = x[a] * std::cos(ang) - x[b] * std::sin(ang);
        ref[b] = x[a] * std::sin(ang) + x[b] * std::cos(ang);
      }
  // The angle is f32, as in the reference implementations: position (< 4096) times a
  // frequency with ~1e-7 relative error gives up to ~5e-4 rad, hence the loose bound.
  report(style == cuda::RopeStyle::kNeox ? "rope_f32_neox" : "rope_f32_interleaved",
         std::to_string(tokens) + "x" + std::to_string(heads) + "x" + std::to_string(head_dim) + "/" +
             std::to_string(rot_dim),
         y, ref, 1e-6, 5e-3);
}

void test_activations(int64_t n) {
  const std::vector<float> g = randn(static_cast<size_t>(n), 4.f), u = randn(static_cast<size_t>(n));
  cuda::DeviceBuffer dg = to_device(g, "gate"), du = to_device(u, "up"), dy(static_cast<size_t>(n) * 4, "y");
  poison(dy);
  cuda::silu_f32(dg.as<float>(), dy.as<float>(), n, nullptr);
  std::vector<float> y = to_host(dy, size_t(n));
  std::vector<double> ref(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ref[i] = g[i] / (1.0 + std::exp(-double(g[i])));
  report("silu_f32", std::to_string(n), y, ref, 1e-12, 1e-6);
  poison(dy);
  cuda::swiglu_f32(dg.as<float>(), du.as<float>(), dy.as<float>(), n, nullptr);
  y = to_host(dy, size_t(n));
  for (int64_t i = 0; i < n; ++i) ref[i] = g[i] / (1.0 + std::exp(-double(g[i]))) * u[i];
  report("swiglu_f32", std::to_string(n), y, ref, 1e-12, 1e-6);
}

// Bad input must be a clear error, not a crash or garbage.
// StagedUpload on the device: random pieces at 256-aligned offsets (empty, tiny, larger than a
// slot) through 3 small pinned slots, then the pageable fallback; every byte read back.
void test_staged_upload(bool pageable) {
  std::vector<size_t> sizes{0, 1, 4096, 4097, 3 * 4096 + 5, 40000};
  for (int i = 0; i < 300; ++i) sizes.push_back(size_t(g_rng() % 700));
  std::vector<std::pair<size_t, std::vector<uint8_t>>> ps;
  size_t at = 0;
  uint64_t total = 0;
  for (size_t n : sizes) {
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = uint8_t(g_rng());
    ps.push_back({at, std::move(b)});
    total += n;
    at = (at + n + 255) / 256 * 256;
  }
  cuda::DeviceBuffer dev(at + 256, "staged upload test");
  DS4_CUDA_CHECK(cudaMemset(dev.get(), 0xEE, dev.bytes()));
  cuda::StagingOptions o;
  o.slots = 3;
  o.slot_bytes = 4096;
  o.force_pageable = pageable;
  o.progress = "off";
  cuda::StagedUpload st(dev.as<uint8_t>(), total, "staged upload test", o);
  for (const auto& [dst, b] : ps) st.put(dst, b.data(), b.size());
  const cuda::UploadStats stats = st.finish();
  std::vector<uint8_t> back(dev.bytes());
  DS4_CUDA_CHECK(cudaMemcpy(back.data(), dev.get(), back.size(), cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (const auto& [dst, b] : ps) wrong += std::memcmp(back.data() + dst, b.data(), b.size()) != 0;
  const bool ok = wrong == 0 && stats.pageable == pageable && stats.bytes == total;
  if (!ok) ++g_failures;
  std::printf("%-22s %-18s %zu pieces, %llu copies, %zu wrong  %s\n", "staged_upload", pageable ? "pageable" : "pinned",
              ps.size(), (unsigned long long)stats.copies, wrong, ok ? "ok" : "FAIL");
}

// ---- topk_select_f32 ----
// Score rows for the top-k tests: kinds that stress the boundary (few distinct values: wide
// ties at the k-th key), the comparisons (-0 / +0, +-inf, subnormals) and NaN.
enum class TopkFill { kRandn, kFew, kEqual, kSpecial, kNan };
std::vector<float> topk_row(TopkFill f, int64_t n) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float special[] = {-inf, -0.f, 0.f, inf, 1.f, -1.f, 1e-45f, -1e-45f, 0.5f};
  std::uniform_int_distribution<int> few(-2, 2), pick(0, 8), coin(0, 3);
  std::vector<float> x = randn(size_t(n));
  for (auto& v : x) {
    if (f == TopkFill::kFew) v = float(few(g_rng));
    if (f == TopkFill::kEqual) v = 0.25f;
    if (f == TopkFill::kSpecial) v = special[pick(g_rng)];
    if (f == TopkFill::kNan && coin(g_rng) == 0) v = coin(g_rng) ? nan : -nan;
  }
  return x;
}

// The positions that give row r its n (TopkCount's formula, inverted): ratio * n - 1 plus an
// offset inside the ratio window, so the device's division is exercised too.
std::vector<int32_t> topk_positions(const std::vector<std::vector<float>>& rows, int64_t ratio) {
  std::vector<int32_t> pos;
  for (size_t r = 0; r < rows.size(); ++r) pos.push_back(int32_t(int64_t(rows[r].size()) * ratio - 1 + int64_t(r) % ratio));
  return pos;
}

// One launch over `rows` (each its own n), keep and/or list, against topk_select_ref byte for
// byte: keep[0, n), the list and count; keep bytes past n and list slots past the count are
// never written; scores past n are +inf (kept if ever read). NaN-free rows of n <= 4096 are
// also checked against the rank kernels' O(n^2) definition (topk_rank_ref).
void test_topk_select(const std::string& name, int64_t k, const std::vector<std::vector<float>>& rows,
                      const cuda::TopkCount& form_in, const std::vector<int32_t>& pos, bool want_keep, bool want_list) {
  const int64_t R = int64_t(rows.size());
  int64_t maxn = 1;
  for (const auto& x : rows) maxn = std::max<int64_t>(maxn, int64_t(x.size()));
  const int64_t ss = maxn + 3, ks = 4 * ss, ls = std::max(maxn, k) + 5;  // odd score stride: unaligned rows
  std::vector<float> sc(size_t(R * ss), std::numeric_limits<float>::infinity());
  for (int64_t r = 0; r < R; ++r) std::copy(rows[r].begin(), rows[r].end(), sc.begin() + r * ss);
  cuda::DeviceBuffer d_sc = to_device(sc, "topk scores"), d_pos(pos.size() * 4, "topk pos"),
                     d_keep(size_t(R * ks), "topk keep"), d_list(size_t(R * ls) * 4, "topk list"),
                     d_count(size_t(R) * 4, "topk count");
  DS4_CUDA_CHECK(cudaMemcpy(d_pos.get(), pos.data(), pos.size() * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemset(d_keep.get(), 0xab, d_keep.bytes()));
  DS4_CUDA_CHECK(cudaMemset(d_list.get(), 0xff, d_list.bytes()));
  DS4_CUDA_CHECK(cudaMemset(d_count.get(), 0xff, d_count.bytes()));
  cuda::TopkSelectArgs a;
  a.scores = d_sc.as<float>(), a.score_stride = ss, a.k = k, a.n = form_in, a.rows = R;
  a.n.pos = d_pos.as<int32_t>();
  if (want_keep) a.keep = d_keep.as<uint8_t>(), a.keep_stride = ks;
  if (want_list) a.list = d_list.as<int32_t>(), a.count = d_count.as<int32_t>(), a.list_stride = ls, a.count_stride = 1;
  cuda::topk_select_f32(a, nullptr);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint8_t> keep(d_keep.bytes());
  std::vector<int32_t> list(static_cast<size_t>(R * ls)), count(static_cast<size_t>(R));
  DS4_CUDA_CHECK(cudaMemcpy(keep.data(), d_keep.get(), keep.size(), cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(list.data(), d_list.get(), list.size() * 4, cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(count.data(), d_count.get(), count.size() * 4, cudaMemcpyDeviceToHost));
  int bad_rows = 0, rank_checked = 0;
  std::string first_bad;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t n = int64_t(rows[r].size());
    const int64_t dev_n = (int64_t(pos[size_t(r * form_in.pos_stride)]) + r * form_in.row_step + 1) / form_in.ratio;
    std::vector<uint8_t> rk;
    std::vector<int32_t> rl;
    topk_select_ref(rows[r].data(), n, k, rk, rl);
    bool ok = dev_n == n;  // the test's own positions
    if (want_keep) {
      const uint8_t* g = keep.data() + r * ks;
      ok = ok && std::equal(rk.begin(), rk.end(), g);
      for (int64_t i = n; i < ks; ++i) ok = ok && g[i] == 0xab;
      const bool nan_free = std::none_of(rows[r].begin(), rows[r].end(), [](float v) { return std::isnan(v); });
      if (nan_free && n <= 4096) {
        std::vector<uint8_t> rank;
        topk_rank_ref(rows[r].data(), n, k, rank);
        ok = ok && rank == rk;
        ++rank_checked;
      }
    }
    if (want_list) {
      const int32_t* g = list.data() + r * ls;
      ok = ok && count[size_t(r)] == int32_t(rl.size()) && std::equal(rl.begin(), rl.end(), g);
      for (int64_t i = int64_t(rl.size()); i < ls; ++i) ok = ok && g[i] == -1;
    }
    if (!ok && bad_rows++ == 0) first_bad = "row " + std::to_string(r) + " n " + std::to_string(n);
  }
  if (bad_rows) ++g_failures;
  std::printf("%-22s %-18s %d rows, k %lld, %s%s, %d vs rank def; %d bad%s  %s\n", ("topk_select " + name).c_str(),
              ("max n " + std::to_string(maxn)).c_str(), int(R), (long long)k, want_keep ? "keep" : "",
              want_list ? (want_keep ? "+list" : "list") : "", rank_checked, bad_rows,
              bad_rows ? (" (first: " + first_bad + ")").c_str() : "", bad_rows ? "FAIL" : "PASS");
}

void test_topk_select_all(bool small) {
  using F = TopkFill;
  const int64_t big = small ? 4096 : 65536, mid = small ? 4096 : 32768;
  auto rows_of = [](std::initializer_list<std::pair<F, int64_t>> spec) {
    std::vector<std::vector<float>> rows;
    for (const auto& [f, n] : spec) rows.push_back(topk_row(f, n));
    return rows;
  };
  const cuda::TopkCount per_row{nullptr, 1, 0, 1}, per_row4{nullptr, 1, 0, 4};
  // Qwen / GLM form (a position per row): n < k, n = k, n = k + 1, n = 1, ties, +-0/inf, NaN.
  const auto a = rows_of({{F::kRandn, 1}, {F::kRandn, 100}, {F::kFew, 511}, {F::kFew, 512}, {F::kFew, 513},
                          {F::kRandn, 1000}, {F::kFew, 1024}, {F::kEqual, 2048}, {F::kSpecial, 4096},
                          {F::kFew, 8192}, {F::kRandn, big}, {F::kFew, big}, {F::kEqual, big}, {F::kNan, 600},
                          {F::kNan, 3000}, {F::kSpecial, 513}});
  const auto pa = topk_positions(a, 1);
  test_topk_select("k512", 512, a, per_row, pa, true, true);
  test_topk_select("k512 keep only", 512, a, per_row, pa, true, false);
  test_topk_select("k512 list only", 512, a, per_row, pa, false, true);
  const auto b = rows_of({{F::kRandn, 1}, {F::kEqual, 2}, {F::kSpecial, 3}, {F::kFew, 1000}, {F::kEqual, big},
                          {F::kSpecial, 50}, {F::kNan, 77}, {F::kRandn, big}});
  test_topk_select("k1", 1, b, per_row, topk_positions(b, 1), true, true);
  // Ratio 4 (positions inside the block window), k 2048.
  const auto c = rows_of({{F::kFew, 2047}, {F::kFew, 2048}, {F::kFew, 2049}, {F::kRandn, mid}, {F::kFew, mid},
                          {F::kSpecial, 20000}, {F::kEqual, 2049}, {F::kNan, 5000}});
  test_topk_select("k2048 ratio4", 2048, c, per_row4, topk_positions(c, 4), true, true);
  // DeepSeek V4 form: one base position, row r at p0 + r, ratio 4, k 8 (the tiny config's).
  {
    const int64_t p0 = 25, R = 17, ratio = 4;
    std::vector<std::vector<float>> d;
    for (int64_t r = 0; r < R; ++r) d.push_back(topk_row(r % 2 ? F::kFew : F::kRandn, (p0 + r + 1) / ratio));
    test_topk_select("k8 deepseek form", 8, d, cuda::TopkCount{nullptr, 0, 1, ratio}, {int32_t(p0)}, true, true);
  }
  // k = 0 keeps nothing (count 0), n = 0 rows write nothing.
  test_topk_select("k0", 0, rows_of({{F::kRandn, 5}, {F::kRandn, 0}}), per_row, {4, -1}, true, true);
}

void test_errors() {
  auto expect_throw = [](const char* what, auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      std::printf("%-22s %-18s threw: %s  PASS\n", "error", what, e.what());
      return;
    }
    ++g_failures;
    std::printf("%-22s %-18s did not throw  FAIL\n", "error", what);
  };
  WeightMatrix w;
  w.type = DType::Q4_K;
  w.rows = 4;
  w.cols = 100;
  expect_throw("gemv bad cols", [&] { cuda::gemv(w, nullptr, nullptr, nullptr); });
  w.type = DType::F8_E4M3;
  w.cols = 256;
  expect_throw("gemv F8_E4M3", [&] { cuda::gemv(w, nullptr, nullptr, nullptr); });
  expect_throw("admission 1 PiB", [] { cuda::admit_allocation(static_cast<size_t>(1) << 50, "a 1 PiB test tensor"); });
  w.type = DType::IQ2_XXS;
  w.cols = 7168;  // 28 blocks of 66 bytes: a row stride that is not 16-byte aligned
  expect_throw("gemv staged unaligned", [&] { cuda::gemv(w, nullptr, nullptr, nullptr, cuda::GemvOptions{cuda::GemvPath::kStaged, 0}); });
  cuda::RopeParams p{1, 1, 64, 65, 1e4f, nullptr, cuda::RopeStyle::kNeox};
  w.type = DType::BF16;
  expect_throw("gemv rows_per_block 3", [&] { cuda::gemv(w, nullptr, nullptr, nullptr, cuda::GemvOptions{cuda::GemvPath::kAuto, 3}); });
  expect_throw("rope odd rot_dim", [&] { cuda::rope_f32(nullptr, p, nullptr); });
}

}  // namespace

// conv1d_rows_f32 over a chunk of `count` rows (rows in parallel, the state rewritten at the
// end) against `count` conv1d_step_f32 calls on a copy of the state: y and the final state
// bit for bit (memcmp), padded row strides, count below and above the state's length.
void test_conv1d_rows(int64_t channels, int kernel, int dil, int64_t count, bool silu) {
  std::mt19937 rng(uint32_t(channels * 131 + kernel * 17 + dil * 7 + count));
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t s = int64_t(kernel - 1) * dil, xs = channels + 5, ys = channels + 3;
  std::vector<float> x(size_t(count * xs)), w(size_t(channels * kernel)), st(size_t(std::max<int64_t>(s, 1) * channels));
  for (float& v : x) v = nd(rng);
  for (float& v : w) v = nd(rng) * 0.5f;
  for (float& v : st) v = nd(rng);
  auto up = [](const std::vector<float>& h) {
    cuda::DeviceBuffer d(h.size() * 4, "conv test");
    DS4_CUDA_CHECK(cudaMemcpy(d.get(), h.data(), h.size() * 4, cudaMemcpyHostToDevice));
    return d;
  };
  cuda::DeviceBuffer dx = up(x), dw = up(w), s1 = up(st), s2 = up(st), y1(size_t(count * ys) * 4, "y1"),
                     y2(size_t(count * ys) * 4, "y2");
  DS4_CUDA_CHECK(cudaMemset(y1.get(), 0, y1.bytes()));
  DS4_CUDA_CHECK(cudaMemset(y2.get(), 0, y2.bytes()));
  cuda::Conv1dRows chunk;
  chunk.count = count, chunk.x_stride = xs, chunk.y_stride = ys;
  cuda::conv1d_rows_f32(dx.as<float>(), dw.as<float>(), s1.as<float>(), channels, kernel, dil, silu, y1.as<float>(),
                        chunk, nullptr);
  for (int64_t t = 0; t < count; ++t)
    cuda::conv1d_step_f32(dx.as<float>() + t * xs, dw.as<float>(), s2.as<float>(), channels, kernel, dil, silu,
                          y2.as<float>() + t * ys, nullptr);
  const auto a = to_host(y1, size_t(count * ys)), b = to_host(y2, size_t(count * ys));
  const auto sa = to_host(s1, st.size()), sb = to_host(s2, st.size());
  const bool ok = std::memcmp(a.data(), b.data(), a.size() * 4) == 0 && std::memcmp(sa.data(), sb.data(), sa.size() * 4) == 0;
  if (!ok) ++g_failures;
  std::printf("%-22s %-18s %s\n", "conv1d_rows", (std::to_string(channels) + "c k" + std::to_string(kernel) + " d" +
                                                   std::to_string(dil) + " n" + std::to_string(count)).c_str(),
              ok ? "PASS (== steps, memcmp)" : "FAIL");
}

int main(int argc, char** argv) {
  const bool small = argc > 1 && std::string(argv[1]) == "--small";
  try {
    cudaDeviceProp prop{};
    DS4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs, L2 %d MiB, cc %d.%d\n\n", prop.name, prop.multiProcessorCount,
                prop.l2CacheSize >> 20, prop.major, prop.minor);
    std::printf("%-22s %-18s %10s %10s %10s %9s %9s  %s\n", "op", "shape", "nmse", "max_abs", "max_rel", "tol_nmse",
                "tol_rel", "result");
    // --small: shapes small enough for compute-sanitizer (tails, one and several staging
    // spans, every format), the same checks.
    const int64_t big_rows = small ? 8 : 1024, wide_rows = small ? 3 : 64;
    const DType blockwise[] = {DType::BF16, DType::F16, DType::Q8_0, DType::Q4_K, DType::Q2_K, DType::IQ2_XXS};
    // Every GEMV check under each kernel generation (cuda::gemv_set_kernel): 3, the default,
    // then 2 and 1 (DS4_GEMV_KERNEL=2 / 1).
    const int default_kernel = cuda::gemv_kernel();
    for (int kernel : {3, 2, 1}) {
      cuda::gemv_set_kernel(kernel);
      g_rows_bitwise = g_rows_checked = 0;
      std::printf("-- GEMV kernel %d\n", kernel);
      for (DType t : blockwise) {
        test_gemv(t, 77, 768, 64, DType::F16, true);  // 77 rows: a tail for every rows-per-block
        test_gemv(t, big_rows, 4096);
        test_gemv(t, wide_rows, 7168);
        test_gemv(t, 40, 1024);  // Q8_0: exactly one staging span
      }
      for (DType t : {DType::MLX_Q4, DType::MLX_Q8}) {
        test_gemv(t, 77, 768, 64, DType::F16, true);
        test_gemv(t, big_rows, 4096, 32, DType::BF16);
        test_gemv(t, wide_rows, 2048, 64, DType::BF16);
      }
      test_gemv(DType::F32, 77, 768, 64, DType::F16, true);
      test_gemv(DType::F32, 33, 48);  // cols not a multiple of 32: the plain per-row kernel
      test_gemv(DType::BF16, 40, 16);
      test_gemv(DType::F16, 9, 200);
      test_gemv_batched(DType::BF16, 8, 96, 192);
      test_gemv_batched(DType::BF16, 8, 192, 48);
      test_gemv_batched(DType::Q8_0, 6, 64, 256);
      test_gemv_batched(DType::Q2_K, 6, 64, 512);  // the routed-expert formats
      test_gemv_batched(DType::IQ2_XXS, 6, 64, 512);
      test_gemv_batched(DType::F32, 5, 24, 32);
      // Multi-row gemv: every format, n = 1..8 (verify windows, decode batches) and across the
      // 4 / 8 / 16 kernels, tails of rows; under the default kernel at every weight-rows setting
      // too (gemv_set_rows_weight_rows: R 2 and the wide forms R 4 / 8 must equal gemv as well).
      for (int wr : kernel == default_kernel ? std::vector<int>{0, 2, 4, 8} : std::vector<int>{0}) {
        cuda::gemv_set_rows_weight_rows(wr);
        std::printf("gemv_rows weight rows setting %d\n", wr);
        for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 13, 16}) {
          for (DType t : blockwise) test_gemv_rows(t, 77, small ? 512 : 2048, n);
          test_gemv_rows(DType::MLX_Q4, 45, 768, n);
          test_gemv_rows(DType::MLX_Q8, 45, 768, n, DType::BF16);
          test_gemv_rows(DType::F32, 33, 768, n);
          test_gemv_rows(DType::F32, 33, 48, n);  // the plain per-row kernel
          test_gemv_rows(DType::BF16, 40, 16, n);
        }
        test_gemv_rows_grouped(DType::BF16, 8, 96, 256);
        test_gemv_rows_grouped(DType::Q8_0, 6, 64, 256);
        test_gemv_rows_grouped(DType::Q4_K, 4, 40, 512);
        test_gemv_rows_grouped(DType::Q2_K, 4, 40, 512);
        test_gemv_rows_grouped(DType::IQ2_XXS, 4, 40, 512);
        test_gemv_rows_grouped(DType::F32, 5, 24, 48);
        test_gemv_rows_grouped(DType::Q8_0, 6, 64, 256, cuda::kMoeSmallStride);
        test_gemv_rows_grouped(DType::IQ2_XXS, 4, 40, 512, cuda::kMoeSmallStride);
        test_gemv_rows_grouped(DType::F32, 5, 24, 48, cuda::kMoeSmallStride);
      }
      cuda::gemv_set_rows_weight_rows(0);
      if (kernel != 1) {  // the subnormal dot2 of kernel generations 2 and 3
        test_gemv_mlx_scaled_x(DType::MLX_Q4, 77, 2560, 64, DType::BF16);
        test_gemv_mlx_scaled_x(DType::MLX_Q4, 45, 640, 32, DType::F16);
        test_gemv_mlx_scaled_x(DType::MLX_Q8, 77, 4096, 64, DType::BF16);
      }
      std::printf("gemv_rows (kernel %d): %d of %d comparisons bit-identical to gemv/direct\n", kernel, g_rows_bitwise,
                  g_rows_checked);
      // Verify windows and decode batches must equal decode steps bit for bit (greedy speculative
      // output equals AR only then): a comparison within kRowsRel but not bitwise fails here.
      if (g_rows_bitwise != g_rows_checked) {
        ++g_failures;
        std::printf("gemv_rows (kernel %d): FAIL, %d comparisons not bit-identical\n", kernel,
                    g_rows_checked - g_rows_bitwise);
      }
    }
    cuda::gemv_set_kernel(default_kernel);
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) test_embed_rows(t, 50, 256);
    test_embed_rows(DType::MLX_Q4, 50, 256, 64, DType::F16);
    test_embed_rows(DType::MLX_Q4, 50, 320, 32, DType::BF16);  // 320: a partial column tile
    test_embed_rows(DType::MLX_Q8, 50, 256, 32, DType::BF16);
    test_embed_rows(DType::MLX_Q8, 50, 256, 64, DType::F16);
    {
      bool threw = false;
      try {
        cuda::embed_rows_f32(WeightMatrix{DType::Q4_K, 1, 256}, nullptr, 1, 1, nullptr, 256, nullptr);
      } catch (const InputError&) {
        threw = true;
      }
      if (!threw) ++g_failures;
      std::printf("%-22s %-18s %s\n", "embed_rows_Q4_K", "unsupported", threw ? "PASS (InputError)" : "FAIL");
    }
    test_conv1d_rows(10240, 4, 1, 512, true);  // Qwen GDN's conv (a prefill chunk)
    test_conv1d_rows(1000, 4, 1, 2, true);      // fewer rows than the state holds
    test_conv1d_rows(300, 4, 3, 37, false);     // dilated (PLE's n-gram conv), a row tail per group
    test_conv1d_rows(70, 4, 3, 5, true);
    test_rmsnorm(7, 4096);
    test_rmsnorm(3, 100);
    test_softmax(5, 1000, 0.125f, false);
    test_softmax(4, small ? 4096 : 65536, 1.f, true);
    test_rope(cuda::RopeStyle::kNeox, 5, 4, 128, 64);
    test_rope(cuda::RopeStyle::kInterleaved, 5, 4, 192, 64);
    test_rope(cuda::RopeStyle::kNeox, 3, 8, 64, 64);
    test_activations(small ? 1003 : 100003);
    test_topk_select_all(small);
    test_staged_upload(false);
    test_staged_upload(true);
    test_errors();
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 2;
  }
  std::printf("\n%s: %d failure(s)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
