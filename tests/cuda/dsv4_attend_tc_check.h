#pragma once
// The tensor-core attend (models/deepseek_v4/cuda/attention_tc.cu) against the exact attend
// (attention.cu, 32-row key chunks) on the same inputs: a chunk of rows at consecutive
// positions, each row with its own query and (CSA) its own selection of a different size,
// so each block's key set, causality and the split-K merge are exercised:
//   - the Flash's CSA shape (64 heads x 512, window 128 + up to 512 selected: 2 key splits),
//     the ring wrapping within the chunk's windows;
//   - the Flash's HCA shape (every closed entry, ratio 128), the chunk crossing an entry
//     boundary (rows before it see one entry fewer);
//   - long key ranges: an HCA layer near position 300K (128 + 2343 keys per row) and 32 heads
//     over 128 + 1536..2048 selected entries (many key splits per row, the MT 2 path);
//   - 6 heads x 64 (a masked head group), ratio 4 from position 0 (the window filling, an
//     entry closing every 4 rows), and the tiny model's 4 heads x 32 over a 16-row window.
// Bound (per case, from the inputs): TF32 rounds each operand to nearest, relative error
// u = 2^-11. A score's error is at most 2u * S, S = max over rows and heads of
// sum_i |q_i k_i| / sqrt(hd); it moves each softmax weight by a factor within e^(+-2 * 2u S),
// and rounding V and P adds at most 2u relative: |out - exact| <= sqrt(2) * max|v| * (2u + 4u S)
// * 1.01 (sqrt(2): the rope tail's rotation mixes two features; 1.01: FP32 sums of both
// kernels). In the small cases a row's weight is >= 1/80, far above that bound, so a wrong key
// set fails; in the Flash cases they check the tiling, the splits and the merge.
// The cases of more than 32 heads run again with FP16 operands (attend_tc_set_f16: m16n8k16, the
// same 10-bit mantissa, nearest even; values past FP16's normal range do not occur here), under
// the same bound; the timings print both.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "backend/cuda/check.h"
#include "dsv4_attend_check.h"
#include "models/deepseek_v4/cuda/kernels.h"
#include "test_common.h"

namespace ds4::cuda_test {

struct AttendTcCase {
  const char* name;
  int64_t heads, hd, rope_dim, window, pos0, rows, ratio, n_entries, max_sel;  // max_sel 0: no selection
  float q_amp;
  bool f16 = false;  // attend_tc_set_f16 for this case
};

inline void attend_tc_case(const AttendTcCase& k) {
  namespace dk = ds4::deepseek_v4::cuda;
  std::mt19937 rng(uint32_t(k.hd * 977 + k.heads * 13 + k.pos0));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto rnd = [&](size_t n, float amp) {
    std::vector<float> v(n);
    for (float& x : v) x = amp * u(rng);
    return v;
  };
  const int64_t H = k.heads, D = k.hd, R = k.rows, ring_rows = k.window + R;
  const int64_t max_rows = k.window + (k.ratio > 0 ? (k.max_sel ? k.max_sel : (k.pos0 + R) / k.ratio) : 0);
  const int64_t chunks = dk::attend_chunks(max_rows);
  // Row t's buffers, `stride` floats apart: q {H, D} | out {H, D} | part | part_ml | sel | nsel
  const int64_t o_out = H * D, o_part = 2 * H * D, o_ml = o_part + chunks * H * D, o_sel = o_ml + chunks * H * 2;
  const int64_t o_nsel = o_sel + std::max<int64_t>(k.max_sel, 1), stride = (o_nsel + 1 + 3) / 4 * 4;
  std::vector<float> rowbuf(size_t(R * stride), 0.f);
  std::vector<std::vector<int32_t>> sels(static_cast<size_t>(R));
  for (int64_t t = 0; t < R; ++t) {
    const auto q = rnd(size_t(H * D), k.q_amp);
    std::copy(q.begin(), q.end(), rowbuf.data() + t * stride);
    if (k.max_sel) {
      const int64_t n = k.max_sel - int64_t(rng() % uint32_t(k.max_sel / 4 + 1));  // differs per row
      int32_t* sel = reinterpret_cast<int32_t*>(rowbuf.data() + t * stride + o_sel);
      for (int64_t i = 0; i < n; ++i) sels[size_t(t)].push_back(sel[i] = int32_t(rng() % uint32_t(k.n_entries)));
      *reinterpret_cast<int32_t*>(rowbuf.data() + t * stride + o_nsel) = int32_t(n);
    }
  }
  const auto ring = rnd(size_t(ring_rows * D), 1.f);
  const auto entries = rnd(size_t(std::max<int64_t>(k.n_entries, 1) * D), 1.f), sinks = rnd(size_t(H), 2.f);
  std::vector<float> inv(size_t(k.rope_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(10000.f, -2.f * float(i) / float(k.rope_dim));
  const int32_t pos = int32_t(k.pos0);

  DeviceUploads up;
  float* rb = static_cast<float*>(up(rowbuf.data(), rowbuf.size() * 4));
  dk::AttendArgs a{};
  a.q = rb;
  a.ring = static_cast<const float*>(up(ring.data(), ring.size() * 4));
  a.window = k.window, a.ring_rows = ring_rows;
  a.entries = k.ratio > 0 ? static_cast<const float*>(up(entries.data(), entries.size() * 4)) : nullptr;
  a.ratio = k.ratio;
  a.sel = k.max_sel ? reinterpret_cast<const int32_t*>(rb + o_sel) : nullptr;
  a.nsel = k.max_sel ? reinterpret_cast<const int32_t*>(rb + o_nsel) : nullptr;
  a.sinks = static_cast<const float*>(up(sinks.data(), sinks.size() * 4));
  a.heads = H, a.hd = D, a.max_rows = max_rows;
  a.part = rb + o_part, a.part_ml = rb + o_ml, a.out = rb + o_out;
  a.rope_dim = k.rope_dim;
  a.inv_freq = static_cast<const float*>(up(inv.data(), inv.size() * 4));
  const int32_t* dpos = static_cast<const int32_t*>(up(&pos, 4));
  const dk::Rows rows{R, stride};
  auto outputs = [&] {
    std::vector<float> all(rowbuf.size()), o(size_t(R * H * D));
    DS4_CUDA_CHECK(cudaMemcpy(all.data(), rb, all.size() * 4, cudaMemcpyDeviceToHost));
    for (int64_t t = 0; t < R; ++t)
      std::copy_n(all.data() + t * stride + o_out, H * D, o.data() + t * H * D);
    return o;
  };
  check(dk::attend_tc_supported(a), std::string("attend_tc takes ") + k.name);
  dk::attend_chunked(a, dpos, nullptr, rows, dk::kAttnChunk);
  const auto exact = outputs();
  DS4_CUDA_CHECK(cudaMemset(rb + o_out, 0, size_t(H * D) * 4));  // row 0's output: a stale value cannot pass
  const bool keep_f16 = dk::attend_tc_f16();
  dk::attend_tc_set_f16(k.f16);
  dk::attend_tc(a, dpos, nullptr, rows);
  dk::attend_tc_set_f16(keep_f16);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const auto got = outputs();

  // S and max|v| over every row's key set (as key_row() orders them)
  double S = 0, vmax = 0;
  for (int64_t t = 0; t < R; ++t) {
    const int64_t p = k.pos0 + t, n_win = std::min(p + 1, k.window);
    std::vector<const float*> keys;
    for (int64_t r = 0; r < n_win; ++r) keys.push_back(ring.data() + ((p - n_win + 1 + r) % ring_rows) * D);
    const int64_t n_comp = k.ratio > 0 ? (k.max_sel ? int64_t(sels[size_t(t)].size()) : (p + 1) / k.ratio) : 0;
    for (int64_t e = 0; e < n_comp; ++e) keys.push_back(entries.data() + (k.max_sel ? sels[size_t(t)][size_t(e)] : e) * D);
    for (const float* kr : keys)
      for (int64_t i = 0; i < D; ++i) vmax = std::max(vmax, double(std::abs(kr[i])));
    const float* q = rowbuf.data() + t * stride;
    for (int64_t h = 0; h < H; ++h)
      for (const float* kr : keys) {
        double s = 0;
        for (int64_t i = 0; i < D; ++i) s += std::abs(double(q[h * D + i]) * kr[i]);
        S = std::max(S, s / std::sqrt(double(D)));
      }
  }
  const double uu = std::ldexp(1.0, -11), bound = std::sqrt(2.0) * vmax * (2 * uu + 4 * uu * S) * 1.01;
  double worst = 0, mag = 0;
  bool finite = true;
  for (size_t i = 0; i < got.size(); ++i) {
    finite = finite && std::isfinite(got[i]);
    worst = std::max(worst, double(std::abs(got[i] - exact[i])));
    mag = std::max(mag, double(std::abs(exact[i])));
  }
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "attend_tc%s %s: %lld rows at %lld.., %lld heads x %lld: max |tc - exact| %.3g <= %.3g (S %.2f; max |out| %.3g)",
                k.f16 ? " (FP16)" : "", k.name, (long long)R, (long long)k.pos0, (long long)H, (long long)D, worst, bound, S, mag);
  check(finite && worst <= bound, buf);
}

// The time of attend_tc and of the exact attend (wide kernel) on one 512-row chunk of the Flash
// at a long position (random inputs, printed only: `info` lines, no assertion). The row buffers
// live on the device only (a row's partials are sized for 32-row chunks: 2.6 MB per row).
inline void attend_tc_timing(const char* name, int64_t pos0, int64_t ratio, int64_t n_entries, int64_t n_sel) {
  namespace dk = ds4::deepseek_v4::cuda;
  const int64_t H = 64, D = 512, R = 512, window = 128, ring_rows = window + R;
  const int64_t max_rows = window + (ratio > 0 ? (n_sel ? n_sel : (pos0 + R) / ratio) : 0);
  const int64_t chunks = dk::attend_chunks(max_rows);
  const int64_t o_out = H * D, o_part = 2 * H * D, o_ml = o_part + chunks * H * D, o_sel = o_ml + chunks * H * 2;
  const int64_t o_nsel = o_sel + std::max<int64_t>(n_sel, 1), stride = (o_nsel + 1 + 3) / 4 * 4;
  std::mt19937 rng(uint32_t(pos0 + ratio));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> head(static_cast<size_t>(R * o_out));  // each row's q, then its selection
  for (float& x : head) x = 0.2f * u(rng);
  std::vector<int32_t> sel(static_cast<size_t>(R * (n_sel + 1)));
  for (int64_t t = 0; t < R; ++t) {
    for (int64_t i = 0; i < n_sel; ++i) sel[size_t(t * (n_sel + 1) + i)] = int32_t(rng() % uint32_t(n_entries));
    sel[size_t(t * (n_sel + 1) + n_sel)] = int32_t(n_sel);
  }
  std::vector<float> ring(static_cast<size_t>(ring_rows * D)), entries(static_cast<size_t>(std::max<int64_t>(n_entries, 1) * D)), sinks(static_cast<size_t>(H));
  for (float& x : ring) x = u(rng);
  for (float& x : entries) x = u(rng);
  for (float& x : sinks) x = 2 * u(rng);
  std::vector<float> inv(32);
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(10000.f, -2.f * float(i) / 64.f);
  const int32_t pos = int32_t(pos0);
  DeviceUploads up;
  float* rb = static_cast<float*>(up(nullptr, size_t(R * stride) * 4));
  DS4_CUDA_CHECK(cudaMemcpy2D(rb, size_t(stride) * 4, head.data(), size_t(o_out) * 4, size_t(o_out) * 4, size_t(R),
                              cudaMemcpyHostToDevice));
  if (n_sel)
    DS4_CUDA_CHECK(cudaMemcpy2D(rb + o_sel, size_t(stride) * 4, sel.data(), size_t(n_sel + 1) * 4, size_t(n_sel + 1) * 4,
                                size_t(R), cudaMemcpyHostToDevice));
  dk::AttendArgs a{};
  a.q = rb;
  a.ring = static_cast<const float*>(up(ring.data(), ring.size() * 4));
  a.window = window, a.ring_rows = ring_rows;
  a.entries = ratio > 0 ? static_cast<const float*>(up(entries.data(), entries.size() * 4)) : nullptr;
  a.ratio = ratio;
  a.sel = n_sel ? reinterpret_cast<const int32_t*>(rb + o_sel) : nullptr;
  a.nsel = n_sel ? reinterpret_cast<const int32_t*>(rb + o_nsel) : nullptr;
  a.sinks = static_cast<const float*>(up(sinks.data(), sinks.size() * 4));
  a.heads = H, a.hd = D, a.max_rows = max_rows;
  a.part = rb + o_part, a.part_ml = rb + o_ml, a.out = rb + o_out;
  a.rope_dim = 64;
  a.inv_freq = static_cast<const float*>(up(inv.data(), inv.size() * 4));
  const int32_t* dpos = static_cast<const int32_t*>(up(&pos, 4));
  const dk::Rows rows{R, stride};
  dk::attend_tc(a, dpos, nullptr, rows);  // warm-up
  const bool keep_f16 = dk::attend_tc_f16();
  dk::attend_tc_set_f16(false);
  const float tc = gpu_ms_per_call([&] { dk::attend_tc(a, dpos, nullptr, rows); });
  dk::attend_tc_set_f16(true);
  dk::attend_tc(a, dpos, nullptr, rows);
  const float tc16 = gpu_ms_per_call([&] { dk::attend_tc(a, dpos, nullptr, rows); });
  dk::attend_tc_set_f16(keep_f16);
  const float ex = gpu_ms_per_call([&] { dk::attend(a, dpos, nullptr, rows); }, 1);
  std::printf("info attend %s: 512 rows at %lld, %lld keys per row: attend_tc %.3f ms (FP16 operands %.3f ms), exact "
              "(wide) attend %.3f ms\n", name, (long long)pos0, (long long)max_rows, tc, tc16, ex);
}

inline void attend_tc_shapes() {
  attend_tc_case({"Flash CSA (window 128 + 384..512 selected, ring wraps)", 64, 512, 64, 128, 5000, 80, 4, 1251, 512, 0.2f});
  attend_tc_case({"Flash HCA (every closed entry, crosses entry 40)", 64, 512, 64, 128, 5080, 80, 128, 41, 0, 0.2f});
  // long key ranges: an HCA layer near 300K (128 + 2343 keys per row) and 1536..2048 selected
  // entries (a wider top-k) with 32 heads per block (the MT 2 path)
  attend_tc_case({"Flash HCA at 300000 (128 + 2343 keys)", 64, 512, 64, 128, 300000, 8, 128, 2344, 0, 0.2f});
  attend_tc_case({"Flash CSA (window 128 + 384..512 selected, ring wraps)", 64, 512, 64, 128, 5000, 80, 4, 1251, 512, 0.2f, true});
  attend_tc_case({"Flash HCA (every closed entry, crosses entry 40)", 64, 512, 64, 128, 5080, 80, 128, 41, 0, 0.2f, true});
  attend_tc_case({"Flash HCA at 300000 (128 + 2343 keys)", 64, 512, 64, 128, 300000, 8, 128, 2344, 0, 0.2f, true});
  attend_tc_case({"40 heads x 128, ratio 4 from position 0 (a masked head group)", 40, 128, 32, 128, 0, 64, 4, 16, 0, 1.f, true});
  attend_tc_case({"32 heads x 512, window 128 + 1536..2048 selected", 32, 512, 64, 128, 40000, 12, 4, 10001, 2048, 0.2f});
  attend_tc_case({"6 heads x 64, ratio 4 from position 0", 6, 64, 16, 128, 0, 64, 4, 16, 0, 1.f});
  attend_tc_case({"tiny 4 heads x 32, window 16 wrapping", 4, 32, 8, 16, 20, 40, 0, 0, 0, 1.f});
  attend_tc_timing("Flash CSA (128 + 512 selected of 8192)", 32768, 4, 8192, 512);
  attend_tc_timing("Flash HCA (128 + 256..260 entries)", 32768, 128, 261, 0);
  attend_tc_timing("Flash sliding (128)", 32768, 0, 0, 0);
}

}  // namespace ds4::cuda_test
