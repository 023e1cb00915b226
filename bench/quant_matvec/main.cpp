// bench_quant_matvec [--mib N] [--threads T] [--reps R] [--batch B]
// Per weight format: y = W x over a matrix of ~N MiB of weight bytes (bigger than the last
// level cache), best of R runs, as weight GB/s and as a fraction of this machine's memory
// bandwidth measured in the same run: STREAM-style copy (counted read + write, as STREAM
// does) and a read-only sum (what a memory-bound matvec can at best reach). With
// --batch B > 1 it also times matmul over B input rows (prefill shape).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "core/weight.h"

using namespace ds4;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

void fill_random(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    p[i] = uint8_t(s);
  }
}

// Valid-looking blocks: random payload with small positive f16 scales (no inf/NaN/denormals).
void fix_scales(DType t, uint8_t* p, int64_t rows, int64_t cols) {
  const uint16_t d = f32_to_f16(0.01f);
  if (t == DType::F32) {
    float* f = reinterpret_cast<float*>(p);
    for (int64_t i = 0; i < rows * cols; ++i) f[i] = float(int(p[4 * i] & 15) - 8) * 0.1f;
    return;
  }
  if (t == DType::F16 || t == DType::BF16) {
    uint16_t v = t == DType::F16 ? d : f32_to_bf16(0.01f);
    for (int64_t i = 0; i < rows * cols; ++i) std::memcpy(p + 2 * i, &v, 2);
    return;
  }
  BlockGeometry g = block_geometry(t);
  int64_t blocks = rows * cols / g.elements;
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = p + b * g.bytes;
    if (t == DType::Q2_K) std::memcpy(blk + 80, &d, 2), std::memcpy(blk + 82, &d, 2);
    else if (t == DType::Q4_K) std::memcpy(blk, &d, 2), std::memcpy(blk + 2, &d, 2);
    else std::memcpy(blk, &d, 2);  // Q8_0, IQ2_XXS
  }
}

struct Bandwidth {
  double copy_gbs, read_gbs;
};

Bandwidth measure_bandwidth(ThreadPool& pool, size_t bytes, int reps) {
  size_t n = bytes / sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  std::vector<double> partial(size_t(pool.size()) * 8, 0);
  double best_copy = 1e30, best_read = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    pool.parallel_for(int64_t(n), [&](int64_t s, int64_t e) { std::memcpy(&b[size_t(s)], &a[size_t(s)], size_t(e - s) * 4); });
    auto t1 = Clock::now();
    pool.parallel_for(int64_t(pool.size()), [&](int64_t s, int64_t e) {
      for (int64_t part = s; part < e; ++part) {
        size_t lo = n * size_t(part) / size_t(pool.size()), hi = n * size_t(part + 1) / size_t(pool.size());
        float acc[16] = {};
        for (size_t i = lo; i + 16 <= hi; i += 16)
          for (int k = 0; k < 16; ++k) acc[k] += a[i + size_t(k)];
        double sum = 0;
        for (float v : acc) sum += v;
        partial[size_t(part) * 8] = sum;
      }
    });
    auto t2 = Clock::now();
    best_copy = std::min(best_copy, seconds(t0, t1));
    best_read = std::min(best_read, seconds(t1, t2));
  }
  if (partial[0] < 0) std::printf("impossible\n");
  return {2.0 * double(bytes) / best_copy / 1e9, double(bytes) / best_read / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  int64_t mib = 512;
  int threads = 0, reps = 5, batch = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--mib") mib = std::atoll(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else if (a == "--batch") batch = std::atoi(argv[i + 1]);
  }
  ThreadPool pool(threads);
  std::printf("# bench_quant_matvec: %lld MiB of weights per format, %d threads, best of %d, simd %s\n",
              (long long)mib, pool.size(), reps, simd_level_name(simd_level()));
  Bandwidth bw = measure_bandwidth(pool, size_t(mib) << 20, reps);
  std::printf("# memory: STREAM copy %.1f GB/s (read+write), read-only sum %.1f GB/s\n\n", bw.copy_gbs, bw.read_gbs);
  std::printf("| format | bits/weight | matvec ms | weight GB/s | / copy | / read | batch %d: ms | batch weights GB/s |\n", batch);
  std::printf("|---|---|---|---|---|---|---|---|\n");
  const int64_t cols = 4096;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_K, DType::Q2_K, DType::IQ2_XXS,
                  DType::MLX_Q4, DType::MLX_Q8}) {
    bool mlx = t == DType::MLX_Q4 || t == DType::MLX_Q8;
    double row_b = double(row_bytes(t, cols)) + (mlx ? 2.0 * 2 * cols / 64 : 0);  // + bf16 scales, biases
    int64_t rows = int64_t(double(mib << 20) / row_b);
    std::vector<uint8_t> data(size_t(rows * row_bytes(t, cols))), sb;
    fill_random(data.data(), data.size(), uint64_t(t) + 1);
    WeightMatrix w;
    w.type = t, w.rows = rows, w.cols = cols, w.data = data.data();
    if (mlx) {
      sb.resize(size_t(rows * cols / 64 * 2 * 2));
      for (size_t i = 0; i < sb.size(); i += 2) {
        uint16_t v = f32_to_bf16(0.01f);
        std::memcpy(&sb[i], &v, 2);
      }
      w.scales = sb.data(), w.biases = sb.data() + sb.size() / 2, w.scale_type = DType::BF16, w.group_size = 64;
    } else {
      fix_scales(t, data.data(), rows, cols);
    }
    std::vector<float> x(size_t(cols * batch), 0.5f), y(size_t(rows * batch));
    double best = 1e30, best_b = 1e30;
    for (int r = 0; r < reps; ++r) {
      auto t0 = Clock::now();
      matvec(w, x.data(), y.data(), &pool);
      auto t1 = Clock::now();
      best = std::min(best, seconds(t0, t1));
    }
    for (int r = 0; r < std::max(1, reps / 2); ++r) {
      auto t0 = Clock::now();
      matmul(w, x.data(), batch, y.data(), &pool);
      best_b = std::min(best_b, seconds(t0, Clock::now()));
    }
    double bytes = row_b * double(rows), gbs = bytes / best / 1e9;
    std::printf("| %s | %.2f | %.2f | %.1f | %.2f | %.2f | %.2f | %.1f |\n", dtype_name(t).data(), row_b * 8 / double(cols),
                best * 1e3, gbs, gbs / bw.copy_gbs, gbs / bw.read_gbs, best_b * 1e3, bytes / best_b / 1e9);
  }
  return 0;
}
