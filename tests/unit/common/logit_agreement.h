#pragma once
// How closely a reduced-precision run's logits (a tensor-core prefill chunk: TF32 / BF16
// operands) follow a reference's, for criteria that precision passes and a bug breaks
// (issue #22; tests/unit/deepseek_v4/test_tc_emulation.cpp says why each bound is what it is).
// Header-only: the CPU unit tests and the CUDA tests (tests/cuda) share it.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <vector>

namespace ds4_test {

struct LogitAgreement {
  float max = 0, p99 = 0, p50 = 0, mean = 0;  // |got - ref| over every logit of every row
  int rows = 0, flips = 0;                     // rows whose argmax differs
  int decided = 0, decided_flips = 0;          // rows whose reference top-2 margin > `margin`, their flips
  float flipped_margin = 0;                    // the largest reference margin of a flipped row
};

inline LogitAgreement logit_agreement(const float* ref, const float* got, size_t rows, size_t V, float margin) {
  LogitAgreement a;
  a.rows = int(rows);
  std::vector<float> d(rows * V);
  double sum = 0;
  for (size_t i = 0; i < d.size(); ++i) sum += (d[i] = std::fabs(got[i] - ref[i]));
  for (size_t r = 0; r < rows; ++r) {
    const float *x = ref + r * V, *y = got + r * V;
    const size_t ix = size_t(std::max_element(x, x + V) - x), iy = size_t(std::max_element(y, y + V) - y);
    float second = -INFINITY;
    for (size_t j = 0; j < V; ++j)
      if (j != ix) second = std::max(second, x[j]);
    const float m = x[ix] - second;
    const bool decided = m > margin;
    a.decided += decided;
    if (ix != iy) ++a.flips, a.decided_flips += decided, a.flipped_margin = std::max(a.flipped_margin, m);
  }
  if (d.empty()) return a;
  a.mean = float(sum / double(d.size()));
  std::sort(d.begin(), d.end());
  a.max = d.back(), a.p99 = d[size_t(double(d.size() - 1) * 0.99)], a.p50 = d[d.size() / 2];
  return a;
}

inline void print_agreement(const char* what, const LogitAgreement& a) {
  std::printf("%s: %d rows, |diff| max %.3g p99 %.3g p50 %.3g mean %.3g; argmax flips %d (largest reference margin "
              "%.3g), rows with margin over the bound %d (flips there %d)\n",
              what, a.rows, double(a.max), double(a.p99), double(a.p50), double(a.mean), a.flips,
              double(a.flipped_margin), a.decided, a.decided_flips);
}

}  // namespace ds4_test
