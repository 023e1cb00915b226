#pragma once
// The split-K attend kernel (models/deepseek_v4/cuda/attention.cu) against a double-precision
// host reference at shapes the tiny model does not reach, with both kernels (32-row key chunks:
// decode and exact chunks; 64-row ones: wide prefill chunks): the Flash's 64 heads x 512 dims over a
// 128-row window + 512 selected entries (20 chunks of 32 rows, the value pass in 2 row
// groups), an HCA layer (every closed entry, no selection), and a small head (hd 64, 6 heads:
// head groups of 2, 16 row groups) over a window that is still filling. Bound: 2e-5 absolute
// on outputs of magnitude <= 1 (float sums over <= 640 rows; the reference is double).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "models/deepseek_v4/cuda/kernels.h"
#include "test_common.h"

namespace ds4::cuda_test {

// Device copies of host arrays (null: uninitialized), freed together.
struct DeviceUploads {
  std::vector<void*> owned;
  DeviceUploads() = default;
  DeviceUploads(const DeviceUploads&) = delete;
  DeviceUploads& operator=(const DeviceUploads&) = delete;
  ~DeviceUploads() {
    for (void* d : owned) cudaFree(d);
  }
  void* operator()(const void* h, size_t bytes) {
    void* d = nullptr;
    DS4_CUDA_CHECK(cudaMalloc(&d, std::max<size_t>(bytes, 4)));
    owned.push_back(d);
    if (h) DS4_CUDA_CHECK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
  }
};

// Milliseconds per call of f() on the default stream, the mean of `reps` back-to-back calls
// (events; printed as `info`, never asserted).
template <class F>
float gpu_ms_per_call(F&& f, int reps = 3) {
  cudaEvent_t e0, e1;
  DS4_CUDA_CHECK(cudaEventCreate(&e0));
  DS4_CUDA_CHECK(cudaEventCreate(&e1));
  DS4_CUDA_CHECK(cudaEventRecord(e0));
  for (int i = 0; i < reps; ++i) f();
  DS4_CUDA_CHECK(cudaEventRecord(e1));
  DS4_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  DS4_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  DS4_CUDA_CHECK(cudaEventDestroy(e0));
  DS4_CUDA_CHECK(cudaEventDestroy(e1));
  return ms / float(reps);
}

struct AttendCase {
  const char* name;
  int64_t heads, hd, rope_dim, window, pos, ratio, n_entries, n_sel;  // n_sel 0: no selection (HCA)
  int64_t max_rows;
};

inline void attend_case(const AttendCase& k, int64_t chunk) {
  namespace dk = ds4::deepseek_v4::cuda;
  std::mt19937 rng(uint32_t(k.hd * 131 + k.heads));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto rnd = [&](size_t n, float amp) {
    std::vector<float> v(n);
    for (float& x : v) x = amp * u(rng);
    return v;
  };
  const int64_t H = k.heads, D = k.hd, ring_rows = k.window + 16;
  const auto q = rnd(size_t(H * D), 0.2f), ring = rnd(size_t(ring_rows * D), 1.f);
  const auto entries = rnd(size_t(std::max<int64_t>(k.n_entries, 1) * D), 1.f), sinks = rnd(size_t(H), 2.f);
  std::vector<float> inv(size_t(k.rope_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = std::pow(10000.f, -2.f * float(i) / float(k.rope_dim));
  std::vector<int32_t> sel;
  for (int64_t i = 0; i < k.n_sel; ++i) sel.push_back(int32_t((i * 7919 + 3) % k.n_entries));
  const int32_t nsel = int32_t(k.n_sel), pos = int32_t(k.pos);
  const int64_t chunks = dk::attend_chunks(k.max_rows);

  DeviceUploads up;
  dk::AttendArgs a{};
  a.q = static_cast<const float*>(up(q.data(), q.size() * 4));
  a.ring = static_cast<const float*>(up(ring.data(), ring.size() * 4));
  a.window = k.window, a.ring_rows = ring_rows;
  a.entries = k.ratio > 0 ? static_cast<const float*>(up(entries.data(), entries.size() * 4)) : nullptr;
  a.ratio = k.ratio;
  a.sel = k.n_sel ? static_cast<const int32_t*>(up(sel.data(), sel.size() * 4)) : nullptr;
  a.nsel = k.n_sel ? static_cast<const int32_t*>(up(&nsel, 4)) : nullptr;
  a.sinks = static_cast<const float*>(up(sinks.data(), sinks.size() * 4));
  a.heads = H, a.hd = D, a.max_rows = k.max_rows;
  a.part = static_cast<float*>(up(nullptr, size_t(chunks * H * D) * 4));
  a.part_ml = static_cast<float*>(up(nullptr, size_t(chunks * H * 2) * 4));
  a.out = static_cast<float*>(up(nullptr, size_t(H * D) * 4));
  a.rope_dim = k.rope_dim;
  a.inv_freq = static_cast<const float*>(up(inv.data(), inv.size() * 4));
  const int32_t* dpos = static_cast<const int32_t*>(up(&pos, 4));
  dk::attend_chunked(a, dpos, nullptr, dk::Rows{}, chunk);
  std::vector<float> got(size_t(H * D));
  DS4_CUDA_CHECK(cudaMemcpy(got.data(), a.out, got.size() * 4, cudaMemcpyDeviceToHost));

  // Host reference: the rows as key_row() orders them (window oldest first, then entries).
  const int64_t p = k.pos, n_win = std::min(p + 1, k.window);
  std::vector<const float*> rows;
  for (int64_t r = 0; r < n_win; ++r) rows.push_back(ring.data() + ((p - n_win + 1 + r) % ring_rows) * D);
  const int64_t n_comp = k.ratio > 0 ? (k.n_sel ? k.n_sel : (p + 1) / k.ratio) : 0;
  for (int64_t e = 0; e < n_comp; ++e) rows.push_back(entries.data() + (k.n_sel ? sel[size_t(e)] : e) * D);
  double worst = 0;
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> s(rows.size()), o(size_t(D), 0.0);
    double m = sinks[size_t(h)];
    for (size_t r = 0; r < rows.size(); ++r) {
      double d = 0;
      for (int64_t i = 0; i < D; ++i) d += double(q[size_t(h * D + i)]) * rows[r][i];
      s[r] = d / std::sqrt(double(D));
      m = std::max(m, s[r]);
    }
    double den = std::exp(sinks[size_t(h)] - m);
    for (size_t r = 0; r < rows.size(); ++r) {
      const double w = std::exp(s[r] - m);
      den += w;
      for (int64_t i = 0; i < D; ++i) o[size_t(i)] += w * rows[r][i];
    }
    for (double& x : o) x /= den;
    double* t = o.data() + (D - k.rope_dim);
    for (int64_t i = 0; i < k.rope_dim / 2; ++i) {  // rotate back by -pos (interleaved pairs)
      const float ang = float(-p) * inv[size_t(i)];
      const double c = std::cos(double(ang)), sn = std::sin(double(ang)), x0 = t[2 * i], x1 = t[2 * i + 1];
      t[2 * i] = x0 * c - x1 * sn, t[2 * i + 1] = x1 * c + x0 * sn;
    }
    for (int64_t i = 0; i < D; ++i) worst = std::max(worst, std::abs(o[size_t(i)] - double(got[size_t(h * D + i)])));
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "attend %s, %lld-row chunks: %zu rows, %lld heads x %lld: max |gpu - host| %.3g <= 2e-5",
                k.name, (long long)chunk, rows.size(), (long long)H, (long long)D, worst);
  check(worst <= 2e-5, buf);
}

inline void attend_shapes() {
  namespace dk = ds4::deepseek_v4::cuda;
  for (int64_t chunk : {dk::kAttnChunk, dk::kAttnChunkWide}) {
    attend_case({"Flash CSA (window 128 + 512 selected)", 64, 512, 64, 128, 5000, 4, 1251, 512, 640}, chunk);
    attend_case({"Flash HCA (window 128 + every closed entry)", 64, 512, 64, 128, 5000, 128, 40, 0, 640}, chunk);
    attend_case({"hd 64, 6 heads, window filling", 6, 64, 16, 128, 40, 0, 0, 0, 200}, chunk);
  }
}

}  // namespace ds4::cuda_test
