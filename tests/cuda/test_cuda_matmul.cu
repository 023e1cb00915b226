// The tensor-core path of multi-row products (issue #22) against host references, every
// weight format we load:
//   dequant_bf16   every element within BF16 rounding of the CPU decoder's value
//                  (|d - w| <= 2^-8 |w| + 2^-8 * 1e-3 max|w|: the f32 decode may differ from
//                  the CPU's in the last bit before the rounding to BF16);
//   matmul_rows    GEMM path (n >= min_rows; weight tiles smaller than the matrix; a batch of
//                  2 entries) vs a double reference over the f32 decoded weights and f32 x:
//                  NMSE <= 1e-4, max error <= 2e-2 of max |ref| (both operands rounded to BF16:
//                  ~2^-9 relative each; FP32 accumulation);
//                  exact path (n < min_rows, also n > 16: groups of gemv_rows) bit for bit
//                  equal to gemv/direct row by row;
//   moe_group      a chunk of 300 rows x 6 slots over 16 experts: entries of <= 16 rows,
//                  every (token, slot) pair exactly once, each expert's pairs in order.
// Non-zero exit on failure. Runs on the H200 machine (tools/cuda_device_run.sh).
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/dequant.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/moe_group.h"
#include "core/weight.h"
#include "device_weight.h"
#include "host_ref.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

int g_failures = 0;
std::mt19937_64 g_rng(20261204);

void verdict(const std::string& name, bool ok, const std::string& detail) {
  if (!ok) ++g_failures;
  std::printf("%-34s %-44s %s\n", name.c_str(), detail.c_str(), ok ? "PASS" : "FAIL");
}

std::vector<float> randn(size_t n) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g_rng);
  return v;
}

std::string fmt_name(DType t, DType st) {
  std::string n(dtype_name(t));
  if (t == DType::MLX_Q4 || t == DType::MLX_Q8) n += st == DType::BF16 ? "_bf16s" : "_f16s";
  return n;
}

std::vector<float> host_rows(const HostWeight& hw) {  // the CPU decoder's f32 weights {rows, cols}
  const WeightMatrix v = host_view(hw);
  std::vector<float> w(size_t(hw.rows * hw.cols));
  for (int64_t r = 0; r < hw.rows; ++r) dequantize_row(v, r, w.data() + r * hw.cols);
  return w;
}

float bf16_to_float(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

void test_dequant(DType t, int64_t rows, int64_t cols, DType st = DType::F16, int64_t group = 64) {
  const HostWeight hw = random_weight(t, rows, cols, g_rng, group, st);
  const DeviceWeight dw = upload(hw);
  const std::vector<float> ref = host_rows(hw);
  const int64_t r0 = rows / 3, nr = rows - r0;  // a tile that starts inside the matrix
  cuda::DeviceBuffer out(size_t(nr * cols) * 2, "bf16");
  DS4_CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));
  cuda::dequant_bf16(dw.view, r0, nr, out.get(), nullptr);
  std::vector<uint16_t> got(size_t(nr * cols));
  DS4_CUDA_CHECK(cudaMemcpy(got.data(), out.get(), out.bytes(), cudaMemcpyDeviceToHost));
  double max_w = 0;
  for (float v : ref) max_w = std::max(max_w, double(std::fabs(v)));
  double worst = 0;  // error over its bound, max
  for (int64_t i = 0; i < nr * cols; ++i) {
    const double w = ref[size_t(r0 * cols + i)], d = bf16_to_float(got[size_t(i)]);
    const double bound = std::ldexp(std::fabs(w), -8) + std::ldexp(max_w, -8) * 1e-3;
    const double e = std::isfinite(d) ? std::fabs(d - w) / bound : 1e30;
    worst = std::max(worst, e);
  }
  char buf[96];
  std::snprintf(buf, sizeof buf, "%lldx%lld rows %lld.. err/bound %.3f", (long long)rows, (long long)cols,
                (long long)r0, worst);
  verdict("dequant_bf16_" + fmt_name(t, st), worst <= 1.0, buf);
}

// Y rows {n, ys} = W x rows {n, xs} (padded strides, as the models' row scratch), batch of
// `count` entries (weights back to back, x / y advanced per entry).
void test_matmul(DType t, int64_t rows, int64_t cols, int64_t n, int count, int64_t tile_elems, int64_t min_rows,
                 DType st = DType::F16, int64_t group = 64) {
  std::vector<HostWeight> hw;
  for (int e = 0; e < count; ++e) hw.push_back(random_weight(t, rows, cols, g_rng, group, st));
  const size_t wb = hw[0].data.size(), sb = hw[0].scales.size();
  cuda::DeviceBuffer dwd(wb * size_t(count), "w"), dws(std::max<size_t>(sb, 1) * size_t(count), "s"),
      dwb(std::max<size_t>(sb, 1) * size_t(count), "b");
  for (int e = 0; e < count; ++e) {
    DS4_CUDA_CHECK(cudaMemcpy(dwd.as<uint8_t>() + e * wb, hw[size_t(e)].data.data(), wb, cudaMemcpyHostToDevice));
    if (sb) {
      DS4_CUDA_CHECK(cudaMemcpy(dws.as<uint8_t>() + e * sb, hw[size_t(e)].scales.data(), sb, cudaMemcpyHostToDevice));
      DS4_CUDA_CHECK(cudaMemcpy(dwb.as<uint8_t>() + e * sb, hw[size_t(e)].biases.data(), sb, cudaMemcpyHostToDevice));
    }
  }
  WeightMatrix w = host_view(hw[0]);
  w.data = dwd.get();
  w.scales = sb ? dws.get() : nullptr;
  w.biases = sb ? dwb.get() : nullptr;
  const int64_t xs = count * ((cols + 3) / 4 * 4) + 4, ys = count * rows + 3;
  const std::vector<float> x = randn(size_t(n * xs));
  cuda::DeviceBuffer dx(x.size() * 4, "x"), dy(size_t(n * ys) * 4, "y");
  DS4_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemset(dy.get(), 0xff, dy.bytes()));
  cuda::MatmulWorkspace ws(n, cols, tile_elems, min_rows, "test");
  const cuda::MatmulBatch b{count, wb, sb, (cols + 3) / 4 * 4, rows};
  cuda::matmul_rows(w, dx.as<float>(), xs, dy.as<float>(), ys, n, b, ws, nullptr);
  std::vector<float> y(size_t(n * ys));
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  DS4_CUDA_CHECK(cudaMemcpy(y.data(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost));
  const bool gemm = ws.uses_gemm(w, n);
  std::string name = "matmul_rows_" + fmt_name(t, st) + (gemm ? "/gemm" : "/exact");
  char buf[128];
  if (gemm) {
    double num = 0, den = 0, max_abs = 0, max_ref = 0;
    bool finite = true;
    for (int e = 0; e < count; ++e) {
      const std::vector<float> wf = host_rows(hw[size_t(e)]);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows; ++r) {
          double s = 0;
          for (int64_t c = 0; c < cols; ++c) s += double(wf[size_t(r * cols + c)]) * x[size_t(i * xs + e * b.x_stride + c)];
          const double g = y[size_t(i * ys + e * rows + r)];
          if (!std::isfinite(g)) finite = false;
          num += (g - s) * (g - s), den += s * s;
          max_abs = std::max(max_abs, std::fabs(g - s)), max_ref = std::max(max_ref, std::fabs(s));
        }
    }
    const double nmse = num / std::max(den, 1e-300), rel = max_abs / std::max(max_ref, 1e-300);
    std::snprintf(buf, sizeof buf, "%lldx%lld n%lld b%d nmse %.1e rel %.1e", (long long)rows, (long long)cols,
                  (long long)n, count, nmse, rel);
    verdict(name, finite && nmse <= 1e-4 && rel <= 2e-2, buf);
    return;
  }
  // exact path: every row equals gemv/direct bit for bit
  cuda::DeviceBuffer d1(size_t(rows) * 4, "y1");
  std::vector<float> y1(static_cast<size_t>(rows));
  bool same = true;
  for (int e = 0; e < count; ++e) {
    WeightMatrix we = w;
    we.data = dwd.as<uint8_t>() + e * wb;
    if (sb) we.scales = dws.as<uint8_t>() + e * sb, we.biases = dwb.as<uint8_t>() + e * sb;
    for (int64_t i = 0; i < n; ++i) {
      cuda::gemv(we, dx.as<float>() + i * xs + e * b.x_stride, d1.as<float>(), nullptr,
                 cuda::GemvOptions{cuda::GemvPath::kDirect, 0});
      DS4_CUDA_CHECK(cudaMemcpy(y1.data(), d1.get(), d1.bytes(), cudaMemcpyDeviceToHost));
      if (std::memcmp(y1.data(), y.data() + i * ys + e * rows, size_t(rows) * 4) != 0) same = false;
    }
  }
  std::snprintf(buf, sizeof buf, "%lldx%lld n%lld b%d %s", (long long)rows, (long long)cols, (long long)n, count,
                same ? "bitwise = gemv/direct" : "DIFFERS from gemv/direct");
  verdict(name, same, buf);
}

void test_moe_group_split() {
  const int64_t rows = 300, k = 6, E = 16, stride = cuda::kGemvMaxRows;
  std::vector<int32_t> ids(size_t(rows * k));
  for (int64_t t = 0; t < rows; ++t) {  // k distinct experts per row, skewed toward low ids
    std::vector<int32_t> p(E);
    for (int i = 0; i < E; ++i) p[size_t(i)] = i;
    std::shuffle(p.begin(), p.end(), g_rng);
    std::sort(p.begin(), p.begin() + k);
    for (int64_t j = 0; j < k; ++j) ids[size_t(t * k + j)] = p[size_t(j)];
  }
  const int64_t entries = cuda::moe_group_entries(rows, k, E, stride);
  cuda::DeviceBuffer di(ids.size() * 4, "ids"), de(size_t(entries) * 4, "experts"), dl(4, "live"),
      dc(size_t(entries) * 4, "counts"), dt(size_t(entries * stride) * 4, "tok"), ds(size_t(entries * stride) * 4, "slot");
  DS4_CUDA_CHECK(cudaMemcpy(di.get(), ids.data(), di.bytes(), cudaMemcpyHostToDevice));
  const cuda::MoeGroup g{de.as<int32_t>(), dl.as<int32_t>(), dc.as<int32_t>(), dt.as<int32_t>(), ds.as<int32_t>(), stride};
  cuda::moe_group(di.as<int32_t>(), rows, k, E, g, nullptr);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  int32_t live = 0;
  std::vector<int32_t> ex(static_cast<size_t>(entries)), cn(static_cast<size_t>(entries)),
      tk(static_cast<size_t>(entries * stride)), sl(tk.size());
  DS4_CUDA_CHECK(cudaMemcpy(&live, dl.get(), 4, cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(ex.data(), de.get(), de.bytes(), cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(cn.data(), dc.get(), dc.bytes(), cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(tk.data(), dt.get(), dt.bytes(), cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(sl.data(), ds.get(), ds.bytes(), cudaMemcpyDeviceToHost));
  bool ok = live > 0 && live <= entries;
  std::vector<int> seen(size_t(rows * k), 0);
  std::vector<int32_t> last(size_t(E), -1);
  for (int32_t u = 0; ok && u < live; ++u) {
    ok = cn[size_t(u)] >= 1 && cn[size_t(u)] <= stride;
    for (int32_t i = 0; ok && i < cn[size_t(u)]; ++i) {
      const int32_t s = sl[size_t(u * stride + i)], t = tk[size_t(u * stride + i)];
      ok = s >= 0 && s < rows * k && t == s / k && ids[size_t(s)] == ex[size_t(u)] && s > last[size_t(ex[size_t(u)])];
      if (ok) ++seen[size_t(s)], last[size_t(ex[size_t(u)])] = s;
    }
  }
  for (int v : seen) ok = ok && v == 1;
  verdict("moe_group/split", ok, std::to_string(rows) + " rows x " + std::to_string(k) + " over " + std::to_string(E) +
                                     " experts: " + std::to_string(live) + " entries of <= 16");
}

}  // namespace

int main() {
  try {
    const DType st_all[] = {DType::BF16, DType::F16, DType::Q8_0, DType::Q4_K, DType::Q2_K, DType::IQ2_XXS};
    for (DType t : st_all) test_dequant(t, 37, 1024);
    test_dequant(DType::MLX_Q4, 21, 512, DType::F16, 64);
    test_dequant(DType::MLX_Q4, 21, 512, DType::BF16, 32);
    test_dequant(DType::MLX_Q8, 21, 512, DType::BF16, 64);
    test_dequant(DType::F32, 19, 256);
    test_dequant(DType::F32, 19, 48);  // cols not a multiple of 32: the element kernel
    test_dequant(DType::BF16, 19, 40);
    for (DType t : st_all) {
      test_matmul(t, 200, 512, 70, 1, 64 * 512, 64);  // 4 tiles of 64 rows (the last 8)
      test_matmul(t, 48, 256, 33, 2, 1 << 20, 16);    // a batch of 2
      test_matmul(t, 40, 256, 37, 1, 1 << 20, 64);    // exact: 16 + 16 + 5 rows
    }
    test_matmul(DType::MLX_Q4, 96, 512, 80, 1, 1 << 20, 64, DType::BF16, 64);
    test_matmul(DType::MLX_Q8, 96, 512, 80, 2, 1 << 20, 64, DType::F16, 32);
    test_matmul(DType::F32, 24, 1024, 100, 3, 1 << 20, 64);  // the HC mix shape, split in 3
    test_matmul(DType::F32, 24, 48, 66, 1, 1 << 20, 64);     // odd cols
    test_matmul(DType::F32, 24, 48, 20, 1, 1 << 20, 64);     // odd cols, exact
    test_moe_group_split();
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 2;
  }
  std::printf("\n%s: %d failure(s)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
