// gemv_mlx4_tc (backend/cuda/gemv_mlx4_tc.h: MLX q4 on BF16 tensor cores, x split into three
// exact BF16 parts) against a double-precision reference of the dequantized rows (core's
// decoders), per row relative to sum |w x|: FP32-level (<= 2e-6; a wrong nibble slot, part,
// scale or bias gives O(1)). gemv's own error on the same rows is printed beside it. Shapes:
// Qwen's expert gate|up (1280 x 2560) and down (2560 x 640) as 10-entry batches by device ids,
// a row tail (40 rows) with 5 groups (uneven over the block's 4 warps) and F16 scales, one group,
// a 4096-column row with x over 10 decades; two launches give the same bits; an unsupported
// weight is refused with InputError. Every case at 1, 2 and 4 row tiles per block. The rows form
// (gemv_mlx4_tc_rows): every row memcmp-equal to the one-row kernel's at 1 tile (run_rows_case),
// with the rows kernel at 1, 4 (capped at 2 for 9-16 rows) and by-shape tiles per block.
// Usage: test_gemv_mlx4_tc   (exit 1 when a check fails)
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_mlx4_tc.h"
#include "backend/cuda/memory.h"
#include "core/error.h"
#include "device_weight.h"
#include "host_ref.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

struct Case {
  const char* name;
  int64_t rows, cols;
  int entries;   // 0: one plain product; else a batch of this many by ids
  DType scale_type;
  bool wide_x;   // x magnitudes over 10 decades
};

std::vector<float> download(const float* p, size_t n) {
  std::vector<float> v(n);
  DS4_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

// max over rows of |y - ref| / sum |w x| for entry e's rows (w rows from expert ids[e]).
double worst_rel(const HostWeight& hw, int64_t rows_per_expert, int32_t expert, const float* x, const float* y) {
  const WeightMatrix hv = host_view(hw);
  std::vector<float> wr(static_cast<size_t>(hw.cols));
  double worst = 0.0;
  for (int64_t r = 0; r < rows_per_expert; ++r) {
    dequantize_row(hv, int64_t(expert) * rows_per_expert + r, wr.data());
    double ref = 0.0, mag = 0.0;
    for (int64_t c = 0; c < hw.cols; ++c) {
      ref += double(wr[size_t(c)]) * double(x[c]);
      mag += std::fabs(double(wr[size_t(c)]) * double(x[c]));
    }
    worst = std::max(worst, std::fabs(double(y[r]) - ref) / std::max(mag, 1e-30));
  }
  return worst;
}

void run_case(const Case& k, std::mt19937_64& rng, cudaStream_t s) {
  const int experts = k.entries ? k.entries + 2 : 1;
  const HostWeight hw = random_weight(DType::MLX_Q4, int64_t(experts) * k.rows, k.cols, rng, 64, k.scale_type);
  const DeviceWeight dw = upload(hw);
  WeightMatrix w = dw.view;
  w.rows = k.rows;  // one expert's rows; the batch steps through the others
  const int count = k.entries ? k.entries : 1;
  std::vector<int32_t> ids(static_cast<size_t>(count));
  for (int b = 0; b < count; ++b) ids[size_t(b)] = int32_t((7 * b + 3) % experts);  // not in order
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> dec(-5.f, 5.f);
  std::vector<float> x(size_t(count * k.cols));
  for (auto& v : x) v = k.wide_x ? nd(rng) * std::pow(10.f, dec(rng)) : nd(rng);
  cuda::DeviceBuffer dx(x.size() * sizeof(float), "test x"), dy(size_t(count * k.rows) * sizeof(float), "test y"),
      dy2(size_t(count * k.rows) * sizeof(float), "test y2"), did(ids.size() * sizeof(int32_t), "test ids");
  DS4_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(did.get(), ids.data(), ids.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  cuda::GemvBatch b;  // (one plain product: count 1, no ids, as gemv)
  b.count = count;
  b.ids = k.entries ? did.as<int32_t>() : nullptr;
  b.id_stride = size_t(k.rows) * size_t(w.row_stride_bytes());
  b.id_scale_stride = hw.scales.size() / size_t(experts);
  b.x_stride = k.cols, b.y_stride = k.rows;
  cuda::gemv_mlx4_tc(w, dx.as<float>(), dy.as<float>(), b, s);
  // gemv's error on the same products, for the printout
  for (int e = 0; e < count; ++e) {
    WeightMatrix we = w;
    we.data = static_cast<const uint8_t*>(w.data) + size_t(ids[size_t(e)]) * (k.entries ? b.id_stride : 0);
    we.scales = static_cast<const uint8_t*>(w.scales) + size_t(ids[size_t(e)]) * (k.entries ? b.id_scale_stride : 0);
    we.biases = static_cast<const uint8_t*>(w.biases) + size_t(ids[size_t(e)]) * (k.entries ? b.id_scale_stride : 0);
    cuda::gemv(we, dx.as<float>() + e * k.cols, dy2.as<float>() + e * k.rows, s);
  }
  DS4_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<float> y = download(dy.as<float>(), size_t(count * k.rows));
  const std::vector<float> yg = download(dy2.as<float>(), size_t(count * k.rows));
  double worst = 0.0, worst_gemv = 0.0;
  for (int e = 0; e < count; ++e) {
    const int32_t ex = k.entries ? ids[size_t(e)] : 0;
    worst = std::max(worst, worst_rel(hw, k.rows, ex, x.data() + e * k.cols, y.data() + e * k.rows));
    worst_gemv = std::max(worst_gemv, worst_rel(hw, k.rows, ex, x.data() + e * k.cols, yg.data() + e * k.rows));
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s (%lld x %lld%s): max |y - ref| / sum|w x| = %.2e (gemv's: %.2e), <= 2e-6", k.name,
                (long long)k.rows, (long long)k.cols, k.entries ? (" x" + std::to_string(k.entries)).c_str() : "", worst,
                worst_gemv);
  check(worst <= 2e-6, buf);
  // a second launch into dy2 (gemv's rows were read above): the same bits
  cuda::gemv_mlx4_tc(w, dx.as<float>(), dy2.as<float>(), b, s);
  DS4_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<float> y2 = download(dy2.as<float>(), size_t(count * k.rows));
  check(std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)) == 0, std::string(k.name) + ": two launches, same bits");
}

// gemv_mlx4_tc_rows: n input rows (plain: rows i at x + i x_row; routed: batch entries by device
// ids with live, counts, x_idx / y_idx), every written row memcmp-equal to gemv_mlx4_tc of that
// row alone (the rows form's contract: decode steps = chunk / batch rows), entries past *live
// leave y untouched; the plain case also within 2e-6 of the double reference.
void run_rows_case(const char* name, int64_t rows, int64_t cols, int n, int entries, std::mt19937_64& rng,
                   cudaStream_t s, int idx_stride = cuda::kGemvMaxRows) {
  const bool routed = entries > 0;
  const int experts = routed ? entries + 2 : 1, count = routed ? entries : 1, live = routed ? entries - 1 : 1;
  const HostWeight hw = random_weight(DType::MLX_Q4, int64_t(experts) * rows, cols, rng, 64, DType::BF16);
  const DeviceWeight dw = upload(hw);
  WeightMatrix w = dw.view;
  w.rows = rows;
  const size_t id_stride = size_t(rows) * size_t(w.row_stride_bytes()), scale_stride = hw.scales.size() / size_t(experts);
  const int64_t x_row = cols + 4, y_row = rows + 5, pool = int64_t(n) * count + 3;
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(size_t(pool * x_row));
  for (auto& v : x) v = nd(rng);
  const size_t nc = static_cast<size_t>(count), ni = nc * cuda::kGemvMaxRows;
  std::vector<int32_t> ids(nc), counts(nc), x_idx(ni), y_idx(ni);
  for (int b = 0; b < count; ++b) {
    ids[size_t(b)] = int32_t((7 * b + 3) % experts);
    counts[size_t(b)] = routed ? 1 + b % n : n;  // every count from 1 up to n (or the entries)
    for (int i = 0; i < idx_stride; ++i) {
      x_idx[size_t(b) * size_t(idx_stride) + size_t(i)] = int32_t((13 * b + 7 * i + 1) % pool);
      y_idx[size_t(b) * size_t(idx_stride) + size_t(i)] = int32_t(b * n + i);
    }
  }
  const int64_t y_rows = int64_t(count) * n;
  cuda::DeviceBuffer dx(x.size() * sizeof(float), "rows x"), dy(size_t(y_rows * y_row) * sizeof(float), "rows y"),
      dref(size_t(rows) * sizeof(float), "rows ref"), dmeta(size_t(count) * (2 + 2 * cuda::kGemvMaxRows) * 4 + 4, "rows meta");
  DS4_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  int32_t* m = dmeta.as<int32_t>();
  int32_t *d_ids = m, *d_counts = m + count, *d_xi = m + 2 * count, *d_yi = d_xi + count * cuda::kGemvMaxRows,
          *d_live = d_yi + count * cuda::kGemvMaxRows;
  DS4_CUDA_CHECK(cudaMemcpy(d_ids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(d_counts, counts.data(), counts.size() * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(d_xi, x_idx.data(), x_idx.size() * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(d_yi, y_idx.data(), y_idx.size() * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(d_live, &live, 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemset(dy.get(), 0xff, size_t(y_rows * y_row) * sizeof(float)));  // NaN poison
  cuda::GemvRows r;
  r.n = n, r.x_row = x_row, r.y_row = y_row;
  if (routed) {
    r.batch.count = count, r.batch.ids = d_ids, r.batch.id_stride = id_stride, r.batch.id_scale_stride = scale_stride;
    r.live = d_live, r.counts = d_counts, r.x_idx = d_xi, r.y_idx = d_yi, r.idx_stride = idx_stride;
  }
  cuda::gemv_mlx4_tc_rows(w, dx.as<float>(), dy.as<float>(), r, s);
  DS4_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::vector<float> y = download(dy.as<float>(), size_t(y_rows * y_row));
  bool same = true, untouched = true;
  double worst = 0.0;
  // The reference: the one-row kernel at 1 tile, so the rows form at any tile setting is also
  // checked against one fixed launch shape (a row's bits depend on neither).
  const int tiles_setting = cuda::gemv_mlx4_tc_tiles();
  cuda::gemv_mlx4_tc_set_tiles(1);
  for (int b = 0; b < count; ++b)
    for (int i = 0; i < n; ++i) {
      const int64_t xr = routed ? x_idx[size_t(b) * size_t(idx_stride) + size_t(i)] : i;
      const int64_t yr = routed ? y_idx[size_t(b) * size_t(idx_stride) + size_t(i)] : i;
      const float* yp = y.data() + yr * y_row;
      for (int64_t k = rows; k < y_row; ++k) untouched = untouched && std::isnan(yp[k]);  // past the last weight row
      if (b >= live || i >= counts[size_t(b)]) {  // not written: still the poison
        for (int64_t k = 0; k < rows; ++k) untouched = untouched && std::isnan(yp[k]);
        continue;
      }
      WeightMatrix we = w;
      const size_t e = routed ? size_t(ids[size_t(b)]) : 0;
      we.data = static_cast<const uint8_t*>(w.data) + e * id_stride;
      we.scales = static_cast<const uint8_t*>(w.scales) + e * scale_stride;
      we.biases = static_cast<const uint8_t*>(w.biases) + e * scale_stride;
      cuda::gemv_mlx4_tc(we, dx.as<float>() + xr * x_row, dref.as<float>(), cuda::GemvBatch{}, s);
      DS4_CUDA_CHECK(cudaStreamSynchronize(s));
      const std::vector<float> ref = download(dref.as<float>(), size_t(rows));
      same = same && std::memcmp(ref.data(), yp, size_t(rows) * sizeof(float)) == 0;
      if (tiles_setting != 1) {  // the one-row kernel at the setting too (decode's launch): the same bits
        cuda::gemv_mlx4_tc_set_tiles(tiles_setting);
        cuda::gemv_mlx4_tc(we, dx.as<float>() + xr * x_row, dref.as<float>(), cuda::GemvBatch{}, s);
        DS4_CUDA_CHECK(cudaStreamSynchronize(s));
        cuda::gemv_mlx4_tc_set_tiles(1);
        const std::vector<float> one = download(dref.as<float>(), size_t(rows));
        same = same && std::memcmp(ref.data(), one.data(), size_t(rows) * sizeof(float)) == 0;
      }
      if (!routed) worst = std::max(worst, worst_rel(hw, rows, 0, x.data() + xr * x_row, yp));
    }
  cuda::gemv_mlx4_tc_set_tiles(tiles_setting);
  char buf[256];
  std::snprintf(buf, sizeof buf, "rows %s (%lld x %lld, n %d%s): every row == the one-row kernel's bits", name,
                (long long)rows, (long long)cols, n, routed ? (", " + std::to_string(entries) + " routed entries").c_str() : "");
  check(same, buf);
  check(untouched, std::string("rows ") + name + ": rows past counts / live and columns past the weight rows untouched");
  if (!routed) {
    std::snprintf(buf, sizeof buf, "rows %s: max |y - ref| / sum|w x| = %.2e <= 2e-6", name, worst);
    check(worst <= 2e-6, buf);
  }
}

}  // namespace

int main() {
  std::mt19937_64 rng(20261206);
  cudaStream_t s;
  DS4_CUDA_CHECK(cudaStreamCreate(&s));
  const Case cases[] = {
      {"qwen expert gate|up", 1280, 2560, 10, DType::BF16, false},
      {"qwen expert down", 2560, 640, 10, DType::BF16, false},
      {"row tail, 5 groups, f16 scales", 40, 320, 0, DType::F16, false},
      {"one group", 24, 64, 0, DType::BF16, false},
      {"x over 10 decades", 512, 4096, 0, DType::BF16, true},
  };
  for (int tiles : {1, 2, 4}) {  // 16, 32 or 64 rows per block: the same values
    cuda::gemv_mlx4_tc_set_tiles(tiles);
    std::printf("row tiles per block: %d\n", tiles);
    for (const Case& k : cases) run_case(k, rng, s);
  }
  // The rows kernel at 1 tile, at 4 (2 for 9-16 rows: its register cap) and by shape (0, the
  // default), against the one-row kernel at 1 tile and at the same setting (run_rows_case).
  for (int tiles : {1, 4, 0}) {
    cuda::gemv_mlx4_tc_set_tiles(tiles);
    std::printf("rows, row tiles setting %d\n", tiles);
    for (int n : {1, 2, 3, 8, 13, 16}) run_rows_case("plain", 40, 640, n, 0, rng, s);  // a row tail, 10 groups
    for (int n : {1, 5, 16}) run_rows_case("routed", 48, 320, n, 6, rng, s);  // 5 groups: uneven over the warps
    run_rows_case("routed, idx_stride 8, row tail", 40, 320, 5, 7, rng, s, 8);  // a decode batch's entry stride
  }
  cuda::gemv_mlx4_tc_set_tiles(2);
  run_rows_case("qwen gate|up, 2 tiles", 1280, 2560, 16, 0, rng, s);
  for (int n : {2, 4, 8}) run_rows_case("plain, 2 tiles", 72, 640, n, 0, rng, s);  // kP 1 / 2 / 4 at 2 tiles
  // By shape where it picks more than one tile: 16 entries of 1280 rows (20 blocks of 64 rows
  // each: 320 >= 1.5 an SM on <= 213 SMs): 4 tiles at n = 4, 2 at n = 16 (the register cap).
  cuda::gemv_mlx4_tc_set_tiles(0);
  for (int n : {4, 16}) run_rows_case("routed, by shape", 1280, 640, n, 16, rng, s);
  cuda::gemv_mlx4_tc_set_tiles(1);
  {  // the switch: gemv (kDirect, as the Qwen model launches) and gemv_rows both on the tc kernels
    std::mt19937_64 r3(3);
    const HostWeight hw = random_weight(DType::MLX_Q4, 40, 640, r3, 64, DType::BF16);
    const DeviceWeight dw = upload(hw);
    std::vector<float> x(size_t(3 * 640));
    std::normal_distribution<float> nd(0.f, 1.f);
    for (auto& v : x) v = nd(r3);
    cuda::DeviceBuffer dx(x.size() * 4, "switch x"), dy(size_t(3 * 40) * 4, "switch y"), d1(size_t(40) * 4, "switch y1");
    DS4_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    cuda::gemv_mlx4_tc_set(true);
    cuda::GemvRows r;
    r.n = 3, r.x_row = 640, r.y_row = 40;
    cuda::gemv_rows(dw.view, dx.as<float>(), dy.as<float>(), r, s);
    cuda::GemvOptions direct;
    direct.path = cuda::GemvPath::kDirect;
    bool same = true;
    for (int i = 0; i < 3; ++i) {
      cuda::gemv(dw.view, dx.as<float>() + i * 640, d1.as<float>(), s, direct);
      DS4_CUDA_CHECK(cudaStreamSynchronize(s));
      const std::vector<float> a = download(dy.as<float>() + i * 40, 40), b1 = download(d1.as<float>(), 40);
      same = same && std::memcmp(a.data(), b1.data(), 40 * sizeof(float)) == 0;
    }
    cuda::gemv_mlx4_tc_set(false);
    check(same, "DS4_MLX4_TC on: gemv_rows rows == gemv (kDirect) bit for bit");
  }
  cuda::gemv_mlx4_tc_set_tiles(0);  // the default again
  {
    std::mt19937_64 r2(1);
    const HostWeight hw = random_weight(DType::MLX_Q4, 16, 256, r2, 32, DType::BF16);
    const DeviceWeight dw = upload(hw);
    bool refused = false;
    try {
      cuda::gemv_mlx4_tc(dw.view, nullptr, nullptr, cuda::GemvBatch{}, s);
    } catch (const InputError&) {
      refused = true;
    }
    check(!cuda::gemv_mlx4_tc_supports(dw.view) && refused, "group 32 is refused (InputError)");
  }
  DS4_CUDA_CHECK(cudaStreamDestroy(s));
  std::printf("%s\n", g_fail ? "FAILED" : "ALL PASSED");
  return g_fail ? 1 : 0;
}
