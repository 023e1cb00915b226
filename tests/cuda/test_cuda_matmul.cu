// The tensor-core path of multi-row products (issue #22) against host references, every
// weight format we load:
//   dequant_bf16   every element within BF16 rounding of the CPU decoder's value
//                  (|d - w| <= 2^-8 |w| + 2^-8 * 1e-3 max|w|: the f32 decode may differ from
//                  the CPU's in the last bit before the rounding to BF16);
//   dequant_f32    every element within 1e-6 of max |w| of the CPU decoder's value;
//   matmul_rows    GEMM path (n >= min_rows; weight tiles smaller than the matrix; a batch of
//                  2 entries) vs a double reference over the f32 decoded weights and f32 x:
//                  BF16: NMSE <= 1e-4, max error <= 2e-2 of max |ref| (both operands rounded to
//                  BF16: ~2^-9 relative each; FP32 accumulation); TF32 (the models' choice):
//                  NMSE <= 1e-5, max error <= 5e-3 of max |ref| (10-bit mantissas);
//                  exact path (n < min_rows, also n > 16: groups of gemv_rows) bit for bit
//                  equal to gemv/direct row by row;
//   grouped_mma    the MoE form of gemv_rows on tensor cores (E experts at a stride, entries
//                  of <= 16 gathered rows, a dead entry past *live): every written row vs a
//                  double reference, the same tolerance as matmul_rows/gemm; rows of no live
//                  entry stay untouched (NaN poison); with runs of entries of one expert
//                  (moe_group's layout of a chunk) also bit for bit equal to one block per
//                  entry (blocks sharing a decoded tile change no summation);
//   rows_to_f16_scaled / rows_to_bf16  the chunk rows' FP16 (times the power of two of their
//                  largest magnitude, *x_max_bits) and BF16 copies bit for bit against the host's
//                  round-to-nearest conversions: aligned rows (the float4 form), odd strides,
//                  misaligned rows, rows wider than one 4096-column slice;
//   moe_group      a chunk of 300 rows x 6 slots over 16 experts: entries of <= 16 rows,
//                  every (token, slot) pair exactly once, each expert's pairs in order,
//                  an expert's entries consecutive and all full but its last.
// Non-zero exit on failure. Runs on the H200 machine (tools/cuda_device_run.sh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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
#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/moe_group.h"
#include "core/weight.h"
#include "device_experts.h"
#include "device_weight.h"
#include "host_ref.h"
#include "weight_test_util.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

int g_failures = 0;
std::mt19937_64 g_rng(20261204);

std::vector<float> randn_rows(size_t n) { return randn(n, g_rng); }

void verdict(const std::string& name, bool ok, const std::string& detail) {
  if (!ok) ++g_failures;
  std::printf("%-34s %-44s %s\n", name.c_str(), detail.c_str(), ok ? "PASS" : "FAIL");
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
  cuda::DeviceBuffer outf(size_t(nr * cols) * 4, "f32");
  cuda::dequant_f32(dw.view, r0, nr, outf.as<float>(), nullptr);
  std::vector<float> gotf(size_t(nr * cols));
  DS4_CUDA_CHECK(cudaMemcpy(gotf.data(), outf.get(), outf.bytes(), cudaMemcpyDeviceToHost));
  double worst_f = 0;
  for (int64_t i = 0; i < nr * cols; ++i) {
    const double d = gotf[size_t(i)], w = ref[size_t(r0 * cols + i)];
    worst_f = std::isfinite(d) ? std::max(worst_f, std::fabs(d - w)) : 1e30;
  }
  std::snprintf(buf, sizeof buf, "%lldx%lld max |err| %.2e of max |w| %.2e", (long long)rows, (long long)cols, worst_f,
                max_w);
  verdict("dequant_f32_" + fmt_name(t, st), worst_f <= 1e-6 * max_w, buf);
}

// Y rows {n, ys} = W x rows {n, xs} (padded strides, as the models' row scratch), batch of
// `count` entries (weights back to back, x / y advanced per entry).
void test_matmul(DType t, int64_t rows, int64_t cols, int64_t n, int count, int64_t tile_elems, int64_t min_rows,
                 DType st = DType::F16, int64_t group = 64, cuda::MatmulPrecision prec = cuda::MatmulPrecision::kBf16,
                 bool f32 = false, float x_scale = 1.f) {  // f32: matmul_rows_f32 (prec kTf32 or kF16); x times x_scale
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
  std::vector<float> x = randn_rows(size_t(n * xs));
  for (float& v : x) v *= x_scale;
  cuda::DeviceBuffer dx(x.size() * 4, "x"), dy(size_t(n * ys) * 4, "y");
  DS4_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemset(dy.get(), 0xff, dy.bytes()));
  cuda::MatmulWorkspace ws(n, cols, tile_elems, min_rows, "test", prec);
  // kF16 holds TF32's 11 significant bits (power-of-two scaled operands): TF32's tolerance
  const bool tf32 = prec == cuda::MatmulPrecision::kTf32 || prec == cuda::MatmulPrecision::kF16;
  const bool f16 = prec == cuda::MatmulPrecision::kF16;
  const cuda::MatmulBatch b{count, wb, sb, (cols + 3) / 4 * 4, rows};
  if (f32) cuda::matmul_rows_f32(w, dx.as<float>(), xs, dy.as<float>(), ys, n, b, ws, nullptr);
  else cuda::matmul_rows(w, dx.as<float>(), xs, dy.as<float>(), ys, n, b, ws, nullptr);
  std::vector<float> y(size_t(n * ys));
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  DS4_CUDA_CHECK(cudaMemcpy(y.data(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost));
  const bool gemm = ws.uses_gemm(w, n);
  std::string name = "matmul_rows_" + fmt_name(t, st) + (gemm ? (f32 ? "/f32" : f16 ? "/f16" : tf32 ? "/tf32" : "/bf16") : "/exact");
  if (x_scale != 1.f) name += "/x" + std::to_string(int(std::log10(x_scale)));
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
    // FP32 (f32): float32 rounding of the sums only; TF32 / BF16: their operand rounding
    const double nmse_tol = f32 ? 1e-11 : tf32 ? 1e-5 : 1e-4, rel_tol = f32 ? 1e-5 : tf32 ? 5e-3 : 2e-2;
    verdict(name, finite && nmse <= nmse_tol && rel <= rel_tol, buf);
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

// runs: entries laid out as moe_group lays out a chunk's experts with more than 16 rows (a run
// of 5 entries of one expert, then 2 of another: blocks share a decoded tile over up to 4 of
// them), checked against the host and, bit for bit, against one block per entry.
// Entry layouts: kSingles (one entry per expert, counts 16, 5, 1, 9, 7), kRuns (moe_group's runs
// of full entries of one expert and a tail), kAllCounts (every count 1..16, in pairs of entries
// of one expert, so the shared kernels also group partial entries).
enum class Layout { kSingles, kRuns, kAllCounts };

void test_grouped_mma(DType t, int64_t E, int64_t rows, int64_t cols, DType st = DType::F16, int64_t group = 64,
                      Layout layout = Layout::kSingles) {
  const DeviceExperts dx_experts = upload_experts(t, E, rows, cols, g_rng, group, st);
  const std::vector<HostWeight>& hw = dx_experts.host;
  const size_t stride = dx_experts.stride, sb = dx_experts.scale_stride;
  const bool runs = layout == Layout::kRuns, all = layout == Layout::kAllCounts;
  const int tokens = all ? 70 : runs ? 50 : 40, K = 2, slots = tokens * K, S = cuda::kGemvMaxRows;
  const int32_t eh = int32_t(E / 2), el = int32_t(E - 1);
  std::vector<int32_t> experts = runs ? std::vector<int32_t>{eh, eh, eh, eh, eh, 0, 0, el, el}
                                      : std::vector<int32_t>{el, 0, eh, 1, 2, 0},
                       counts = runs ? std::vector<int32_t>{16, 16, 16, 16, 3, 16, 9, 5, 16}
                                     : std::vector<int32_t>{16, 5, 16, 1, 9, 7};
  if (all) {  // 136 of the 140 slots, then one dead entry
    experts.clear(), counts.clear();
    for (int32_t c = 1; c <= 16; ++c) experts.push_back(int32_t(((c - 1) / 2) % E)), counts.push_back(c);
    experts.push_back(0), counts.push_back(16);
  }
  const int32_t live = int32_t(experts.size()) - 1;  // the last entry is dead (in the runs layout: a run's tail)
  std::vector<int32_t> xi(experts.size() * S, 0), yi(xi.size(), 0);
  int slot = 0;
  for (int b = 0; b < live; ++b)
    for (int i = 0; i < counts[size_t(b)]; ++i, ++slot) {
      xi[size_t(b * S + i)] = (slot * 7) % tokens;
      yi[size_t(b * S + i)] = slot;
    }
  const int64_t xs = cols + 2;
  const std::vector<float> x = randn_rows(size_t(tokens * xs));
  auto dev = [](const std::vector<int32_t>& v) {
    cuda::DeviceBuffer b(v.size() * 4, "ints");
    DS4_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), b.bytes(), cudaMemcpyHostToDevice));
    return b;
  };
  cuda::DeviceBuffer dx(x.size() * 4, "x"), dy(size_t(slots * rows) * 4, "y");
  DS4_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemset(dy.get(), 0xff, dy.bytes()));
  cuda::DeviceBuffer de = dev(experts), dc = dev(counts), dl = dev({live}), dxi = dev(xi), dyi = dev(yi);
  const WeightMatrix w = dx_experts.view;
  cuda::GemvRows r;
  r.n = S, r.x_row = xs, r.y_row = rows;
  r.batch = cuda::GemvBatch{int(experts.size()), de.as<int32_t>(), stride, sb, 0, 0};
  r.live = dl.as<int32_t>(), r.counts = dc.as<int32_t>(), r.x_idx = dxi.as<int32_t>(), r.y_idx = dyi.as<int32_t>();
  const int shared_entries = cuda::grouped_mma_entries_per_block();
  cuda::grouped_mma_set_entries_per_block(1);  // one block per entry, then shared tiles
  cuda::grouped_mma_bf16(w, dx.as<float>(), dy.as<float>(), r, nullptr);
  std::vector<float> y(size_t(slots * rows)), y1(y.size());
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  DS4_CUDA_CHECK(cudaMemcpy(y1.data(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemset(dy.get(), 0xff, dy.bytes()));
  bool same_blocks = true;
  const bool ring = cuda::grouped_mma_x_ring();
  // shared fragments (G = 2, 4) and the x ring (G = 1, 2, 4): the same bits as one block per entry
  for (int v = 0; v < 5; ++v) {
    DS4_CUDA_CHECK(cudaMemset(dy.get(), 0xff, dy.bytes()));
    cuda::grouped_mma_set_x_ring(v >= 2);
    cuda::grouped_mma_set_entries_per_block(v == 0 || v == 3 ? 2 : v == 2 ? 1 : cuda::kGroupedMmaMaxEntries);
    cuda::grouped_mma_bf16(w, dx.as<float>(), dy.as<float>(), r, nullptr);
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
    DS4_CUDA_CHECK(cudaMemcpy(y.data(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost));
    same_blocks = same_blocks && std::memcmp(y.data(), y1.data(), y.size() * sizeof(float)) == 0;
  }
  // BF16 x rows (grouped_mma_bf16_x16, rows_to_bf16's rounding = the kernel's own): the same bits
  // at G = 1, 2 and 4, and at 4 compiled for two blocks per SM (grouped_mma_set_occupancy: the
  // same code under a register cap; contiguous rows: BF16 row starts must be 16-byte aligned)
  cuda::DeviceBuffer dx16(size_t(tokens * cols) * 2, "x bf16");
  cuda::rows_to_bf16(dx.as<float>(), xs, tokens, cols, dx16.get(), nullptr);
  cuda::GemvRows r16 = r;
  r16.x_row = cols;
  const int occupancy = cuda::grouped_mma_occupancy();
  for (int v = 0; v < 4; ++v) {
    DS4_CUDA_CHECK(cudaMemset(dy.get(), 0xff, dy.bytes()));
    cuda::grouped_mma_set_entries_per_block(v == 0 ? 1 : v == 1 ? 2 : cuda::kGroupedMmaMaxEntries);
    cuda::grouped_mma_set_occupancy(v == 3 ? 2 : 1);
    cuda::grouped_mma_bf16_x16(w, dx16.get(), dy.as<float>(), r16, nullptr);
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
    DS4_CUDA_CHECK(cudaMemcpy(y.data(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost));
    same_blocks = same_blocks && std::memcmp(y.data(), y1.data(), y.size() * sizeof(float)) == 0;
  }
  cuda::grouped_mma_set_x_ring(ring);
  cuda::grouped_mma_set_entries_per_block(shared_entries);
  cuda::grouped_mma_set_occupancy(occupancy);
  double num = 0, den = 0, max_abs = 0, max_ref = 0;
  bool finite = true, untouched = true;
  std::vector<int> written(size_t(slots), 0);
  for (int b = 0; b < live; ++b) {
    const std::vector<float> wf = host_rows(hw[size_t(experts[size_t(b)])]);
    for (int i = 0; i < counts[size_t(b)]; ++i) {
      const int32_t xr = xi[size_t(b * S + i)], yr = yi[size_t(b * S + i)];
      written[size_t(yr)] = 1;
      for (int64_t o = 0; o < rows; ++o) {
        double sref = 0;
        for (int64_t c = 0; c < cols; ++c) sref += double(wf[size_t(o * cols + c)]) * x[size_t(xr * xs + c)];
        const double g = y[size_t(yr * rows + o)];
        if (!std::isfinite(g)) finite = false;
        num += (g - sref) * (g - sref), den += sref * sref;
        max_abs = std::max(max_abs, std::fabs(g - sref)), max_ref = std::max(max_ref, std::fabs(sref));
      }
    }
  }
  for (int s2 = 0; s2 < slots; ++s2)
    if (!written[size_t(s2)])
      for (int64_t o = 0; o < rows; ++o) untouched = untouched && std::isnan(y[size_t(s2 * rows + o)]);
  const double nmse = num / std::max(den, 1e-300), rel = max_abs / std::max(max_ref, 1e-300);
  char buf[128];
  std::snprintf(buf, sizeof buf, "E%lld %lldx%lld nmse %.1e rel %.1e%s%s", (long long)E, (long long)rows,
                (long long)cols, nmse, rel, untouched ? "" : " WROTE A DEAD ROW",
                same_blocks ? ", G 2/4, the x ring and BF16 x = one block per entry bitwise"
                            : ", G 2/4, THE X RING OR BF16 X DIFFER");
  verdict(std::string("grouped_mma_") + (runs ? "runs_" : all ? "counts1to16_" : "") + fmt_name(t, st),
          finite && untouched && same_blocks && nmse <= 1e-4 && rel <= 2e-2, buf);
}

// rows x k pairs over E experts grouped at `stride` rows per entry (kGemvMaxRows: a prefill
// chunk; kMoeSmallStride: a decode batch's small pass).
void test_moe_group_split(int64_t rows, int64_t stride) {
  const int64_t k = 6, E = 16;
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
  // an expert's entries are consecutive, in expert order, all full but the last
  for (int32_t u = 1; ok && u < live; ++u) {
    const bool same = ex[size_t(u)] == ex[size_t(u - 1)];
    ok = same ? cn[size_t(u - 1)] == stride : ex[size_t(u)] > ex[size_t(u - 1)];
  }
  verdict("moe_group/split_" + std::to_string(rows) + "x" + std::to_string(stride), ok,
          std::to_string(rows) + " rows x " + std::to_string(k) + " over " + std::to_string(E) + " experts: " +
              std::to_string(live) + " entries of <= " + std::to_string(stride));
}

// x {n, x_row} at float offset `shift` into its buffer (1: rows not 16-byte aligned), cols used.
void test_row_conversions(int64_t n, int64_t cols, int64_t x_row, int64_t shift, float scale) {
  std::vector<float> x = randn_rows(size_t(n * x_row + shift));
  for (float& v : x) v *= scale;
  cuda::DeviceBuffer dx(x.size() * 4, "x"), dh(size_t(n * cols) * 2, "f16"), db(size_t(n * cols) * 2, "bf16"),
      dm(4, "max");
  DS4_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
  const float* xs = dx.as<float>() + shift;
  cuda::rows_to_f16_scaled(xs, x_row, n, cols, dh.get(), dm.as<unsigned>(), nullptr);
  cuda::rows_to_bf16(xs, x_row, n, cols, db.get(), nullptr);
  std::vector<uint16_t> h(size_t(n * cols)), b(h.size());
  unsigned max_bits = 0;
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  DS4_CUDA_CHECK(cudaMemcpy(h.data(), dh.get(), dh.bytes(), cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(b.data(), db.get(), db.bytes(), cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(&max_bits, dm.get(), 4, cudaMemcpyDeviceToHost));
  float m = 0.f;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, std::fabs(x[size_t(shift + r * x_row + c)]));
  int e = 0;
  std::frexp(m, &e);  // dequant_bf16.cu pow2_to_f16_range: the largest magnitude to [2^14, 2^15)
  const float k = m > 0.f ? std::ldexp(1.f, std::max(-100, std::min(100, 15 - e))) : 1.f;
  int64_t bad_h = 0, bad_b = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float v = x[size_t(shift + r * x_row + c)];
      const __half hv = __float2half_rn(v * k);
      const __nv_bfloat16 bv = __float2bfloat16_rn(v);
      uint16_t hu, bu;
      std::memcpy(&hu, &hv, 2);
      std::memcpy(&bu, &bv, 2);
      bad_h += h[size_t(r * cols + c)] != hu;
      bad_b += b[size_t(r * cols + c)] != bu;
    }
  unsigned want_bits;
  std::memcpy(&want_bits, &m, 4);
  verdict("rows_to_f16 / bf16 " + std::to_string(n) + "x" + std::to_string(cols),
          bad_h == 0 && bad_b == 0 && max_bits == want_bits,
          "stride " + std::to_string(x_row) + " +" + std::to_string(shift) + ": " + std::to_string(bad_h) + " / " +
              std::to_string(bad_b) + " differ, max " + (max_bits == want_bits ? "ok" : "WRONG"));
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
    for (DType t : st_all) {  // the TF32 path (the models' choice)
      test_matmul(t, 200, 512, 70, 1, 64 * 512, 64, DType::F16, 64, cuda::MatmulPrecision::kTf32);
      test_matmul(t, 48, 256, 33, 2, 1 << 20, 16, DType::F16, 64, cuda::MatmulPrecision::kTf32);
    }
    test_matmul(DType::MLX_Q4, 96, 512, 80, 1, 1 << 20, 64, DType::BF16, 64, cuda::MatmulPrecision::kTf32);
    test_matmul(DType::F32, 24, 48, 66, 1, 1 << 20, 64, DType::F16, 64, cuda::MatmulPrecision::kTf32);
    // matmul_rows_f32 (the exact parts of a tensor-core chunk): the HC mix shape split in 3,
    // a quantized router-like matrix in tiles, and below min_rows the exact path
    test_matmul(DType::F32, 24, 1024, 100, 3, 1 << 20, 64, DType::F16, 64, cuda::MatmulPrecision::kTf32, true);
    test_matmul(DType::Q8_0, 200, 512, 70, 1, 64 * 512, 64, DType::F16, 64, cuda::MatmulPrecision::kTf32, true);
    test_matmul(DType::Q8_0, 40, 256, 37, 1, 1 << 20, 64, DType::F16, 64, cuda::MatmulPrecision::kTf32, true);
    for (DType t : st_all) {  // kF16: power-of-two scaled FP16 operands (DS4_MATMUL_F16=1)
      test_matmul(t, 200, 512, 70, 1, 64 * 512, 64, DType::F16, 64, cuda::MatmulPrecision::kF16);  // 2 tiles of 128
      test_matmul(t, 48, 256, 33, 2, 1 << 20, 16, DType::F16, 64, cuda::MatmulPrecision::kF16);
    }
    using P = cuda::MatmulPrecision;
    test_matmul(DType::MLX_Q4, 96, 512, 80, 1, 1 << 20, 64, DType::BF16, 64, P::kF16);
    test_matmul(DType::MLX_Q8, 96, 512, 80, 2, 1 << 20, 64, DType::F16, 32, P::kF16);
    // x far outside FP16's range either way (the scales bring it back), odd cols (kTf32 instead),
    // matmul_rows_f32 on a kF16 workspace (its tile holds f32)
    test_matmul(DType::Q8_0, 200, 512, 70, 1, 64 * 512, 64, DType::F16, 64, P::kF16, false, 1e6f);
    test_matmul(DType::Q8_0, 200, 512, 70, 1, 64 * 512, 64, DType::F16, 64, P::kF16, false, 1e-7f);
    test_matmul(DType::F32, 24, 48, 66, 1, 1 << 20, 64, DType::F16, 64, P::kF16);
    test_matmul(DType::Q8_0, 200, 512, 70, 1, 64 * 512, 64, DType::F16, 64, P::kF16, true);
    test_matmul(DType::MLX_Q4, 96, 512, 80, 1, 1 << 20, 64, DType::BF16, 64);
    test_matmul(DType::MLX_Q8, 96, 512, 80, 2, 1 << 20, 64, DType::F16, 32);
    test_matmul(DType::F32, 24, 1024, 100, 3, 1 << 20, 64);  // the HC mix shape, split in 3
    test_matmul(DType::F32, 24, 48, 66, 1, 1 << 20, 64);     // odd cols
    test_matmul(DType::F32, 24, 48, 20, 1, 1 << 20, 64);     // odd cols, exact
    for (DType t : st_all) test_grouped_mma(t, 4, 200, 512);  // 200 rows: a partial tile of 128
    test_grouped_mma(DType::MLX_Q4, 3, 130, 256, DType::BF16, 64);
    test_grouped_mma(DType::MLX_Q8, 3, 64, 384, DType::F16, 32);
    test_grouped_mma(DType::F32, 3, 24, 128);
    test_grouped_mma(DType::IQ2_XXS, 8, 200, 512, DType::F16, 64, Layout::kRuns);
    test_grouped_mma(DType::Q2_K, 8, 136, 256, DType::F16, 64, Layout::kRuns);
    test_grouped_mma(DType::MLX_Q4, 8, 128, 256, DType::BF16, 64, Layout::kRuns);
    for (DType t : st_all) test_grouped_mma(t, 8, 136, 768, DType::F16, 64, Layout::kAllCounts);
    test_grouped_mma(DType::MLX_Q4, 8, 130, 640, DType::BF16, 64, Layout::kAllCounts);
    test_grouped_mma(DType::MLX_Q8, 8, 64, 256, DType::F16, 32, Layout::kAllCounts);
    test_row_conversions(70, 1024, 1024, 0, 1.f);     // float4 rows
    test_row_conversions(33, 4096, 4100, 0, 1e6f);    // float4 rows at a stride, far above FP16's range
    test_row_conversions(17, 1000, 1003, 0, 1e-7f);   // odd stride: one float at a time
    test_row_conversions(5, 40, 44, 1, 3.f);          // rows off 16-byte alignment
    test_row_conversions(9, 9000, 9000, 0, 1.f);      // float4 rows in 3 column slices, the last partial
    test_row_conversions(3, 10001, 10001, 0, 1.f);    // one float at a time in 3 slices
    test_moe_group_split(300, cuda::kGemvMaxRows);
    test_moe_group_split(16, cuda::kMoeSmallStride);
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 2;
  }
  std::printf("\n%s: %d failure(s)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
