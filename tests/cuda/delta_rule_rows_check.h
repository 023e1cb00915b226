#pragma once
// test_qwen_next_cuda item 9: backend/cuda delta_rule_rows at the full-size GDN head width
// (k_dim = v_dim = 128: the register kernel with its next-token prefetch; the tiny model's
// 16-wide heads take the generic kernel, so items 1-8 never reach it; past 32 rows the staged
// prefill kernel, 16 tokens per barrier, here 3 full batches and a tail of 2). 50 tokens, 4 value
// heads over 2 key heads, random inputs of the GDN's ranges (q, k unit-norm scale, log decay
// in [-0.5, -0.01], beta in (0, 1)), at value widths 128 (4 lanes per column, 4 column blocks of
// the prefill kernel), 24 (a partial column block; the decode kernel's 4 channels per thread) and
// 192 (a lane per column, 2 column blocks), and at 128 with a decay per key channel (KDA):
//   - one launch of 50 rows equals 50 one-row launches bit for bit (outputs, final state, and
//     the per-row state records against the states after each single step);
//   - outputs within 1e-4 of max |o| of a double-precision host recurrence (the kernel sums
//     in float, in the same order as the CPU model's delta_rule_head).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/delta_rule.h"
#include "backend/cuda/memory.h"
#include "test_common.h"

namespace ds4::cuda_test {

inline void delta_rule_rows_case(int64_t vd, bool per_channel) {
  constexpr int64_t kh = 2, vh = 4, kd = 128, T = 50;
  const int64_t width = 2 * kh * kd + vh * vd, state = vh * kd * vd, gates = per_channel ? vh * kd : vh;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const size_t n_qkv = size_t(T * width), n_gate = size_t(T * gates), n_state = size_t(state);
  std::vector<float> qkv(n_qkv), g(n_gate), s0(n_state);
  for (auto& x : qkv) x = u(rng) * 0.15f;  // |q|, |k| ~ 1 over 128 channels
  for (auto& x : g) x = -0.01f - 0.49f * (u(rng) * 0.5f + 0.5f);
  std::vector<float> beta(size_t(T * vh));
  for (auto& x : beta) x = u(rng) * 0.5f + 0.5f;
  for (auto& x : s0) x = u(rng) * 0.1f;
  const cuda::DeltaRuleShape sh{kh, vh, kd, vd, per_channel};
  cuda::DeviceBuffer dq(qkv.size() * 4, "test qkv"), dS(s0.size() * 4, "test S"), dS1(s0.size() * 4, "test S steps"),
      dRec(size_t(T * state) * 4, "test records");
  DS4_CUDA_CHECK(cudaMemcpy(dq.get(), qkv.data(), qkv.size() * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(dS.get(), s0.data(), s0.size() * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(dS1.get(), s0.data(), s0.size() * 4, cudaMemcpyHostToDevice));
  // Row t's qkv, g, beta and o all lie t * stride floats after row 0's (DeltaRuleRows), so g
  // and beta sit in {T, width} arrays too.
  std::vector<float> gw(n_qkv, 0.f), bw(n_qkv, 0.f);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < vh; ++h) bw[size_t(t * width + h)] = beta[size_t(t * vh + h)];
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < gates; ++c) gw[size_t(t * width + c)] = g[size_t(t * gates + c)];
  cuda::DeviceBuffer dgw(gw.size() * 4, "test g rows"), dbw(bw.size() * 4, "test beta rows"),
      dOw(n_qkv * 4, "test o rows"), dOs(n_qkv * 4, "test o step rows");
  DS4_CUDA_CHECK(cudaMemcpy(dgw.get(), gw.data(), gw.size() * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(dbw.get(), bw.data(), bw.size() * 4, cudaMemcpyHostToDevice));
  cuda::DeltaRuleRows rows{T, width};
  rows.states = dRec.as<float>();
  rows.state_stride = state;
  cuda::delta_rule_rows(dq.as<float>(), dgw.as<float>(), dbw.as<float>(), dS.as<float>(), dOw.as<float>(), sh, rows,
                        nullptr);
  const size_t n_rec = size_t(T) * n_state;
  std::vector<float> rec(n_rec), step_states(n_rec);
  for (int64_t t = 0; t < T; ++t) {  // as many one-row launches
    cuda::delta_rule_rows(dq.as<float>() + t * width, dgw.as<float>() + t * width, dbw.as<float>() + t * width,
                          dS1.as<float>(), dOs.as<float>() + t * width, sh, cuda::DeltaRuleRows{1, width}, nullptr);
    DS4_CUDA_CHECK(cudaMemcpy(step_states.data() + t * state, dS1.get(), size_t(state) * 4, cudaMemcpyDeviceToHost));
  }
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> o(n_qkv), o1(n_qkv), sA(n_state), sB(n_state);
  DS4_CUDA_CHECK(cudaMemcpy(o.data(), dOw.get(), o.size() * 4, cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(o1.data(), dOs.get(), o1.size() * 4, cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(sA.data(), dS.get(), sA.size() * 4, cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(sB.data(), dS1.get(), sB.size() * 4, cudaMemcpyDeviceToHost));
  DS4_CUDA_CHECK(cudaMemcpy(rec.data(), dRec.get(), rec.size() * 4, cudaMemcpyDeviceToHost));
  bool same = sA == sB && rec == step_states;
  for (int64_t t = 0; t < T; ++t)
    same = same && std::equal(o.begin() + t * width, o.begin() + t * width + vh * vd, o1.begin() + t * width);
  char name[80];
  std::snprintf(name, sizeof name, "delta_rule_rows, 128 x %lld heads%s", (long long)vd, per_channel ? ", decay per channel" : "");
  check(same, std::string(name) + ": 50 rows in one launch = 50 one-row launches bit for bit (o, state, per-row state records)");
  // double-precision host recurrence
  std::vector<double> S(s0.begin(), s0.end());
  double err = 0, omax = 0;
  for (int64_t t = 0; t < T; ++t) {
    const float* x = qkv.data() + t * width;
    for (int64_t h = 0; h < vh; ++h) {
      const float* q = x + (h / (vh / kh)) * kd;
      const float* k = x + kh * kd + (h / (vh / kh)) * kd;
      const float* v = x + 2 * kh * kd + h * vd;
      const double bt = beta[size_t(t * vh + h)];
      auto dec = [&](int64_t i) { return std::exp(double(g[size_t(t * gates + (per_channel ? h * kd + i : h))])); };
      double* Sh = S.data() + h * kd * vd;
      for (int64_t j = 0; j < vd; ++j) {
        double mem = 0;
        for (int64_t i = 0; i < kd; ++i) mem += Sh[i * vd + j] * dec(i) * k[i];
        const double delta = (v[j] - mem) * bt;
        double acc = 0;
        for (int64_t i = 0; i < kd; ++i) {
          Sh[i * vd + j] = Sh[i * vd + j] * dec(i) + k[i] * delta;
          acc += Sh[i * vd + j] * q[i];
        }
        err = std::max(err, std::fabs(acc - double(o[size_t(t * width + h * vd + j)])));
        omax = std::max(omax, std::fabs(acc));
      }
    }
  }
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s vs double host recurrence: max |diff| %.3g of max |o| %.3g (tol 1e-4 relative)", name,
                err, omax);
  check(err <= 1e-4 * omax, buf);
}

inline void delta_rule_rows_check() {
  delta_rule_rows_case(128, false);
  delta_rule_rows_case(24, false);
  delta_rule_rows_case(192, false);
  delta_rule_rows_case(128, true);
}

}  // namespace ds4::cuda_test
