// bench_qwen_decode_kernels: device time of single Qwen decode-step kernels at the full-size
// shapes (issue #23), each launched 200 times inside one CUDA graph (as the decode step's graph
// runs them: the time includes the kernel-to-kernel gap of a graph), us per launch:
//   qsa_select_scores at 2K + 16 (516 blocks) and 32K (8196 blocks), and main's kernel before it;
//   qsa_attend (split + merge) at 2K + 16 and 32K past the budget (512 kept blocks);
//   gdn_recurrent + gdn_gated_norm (the decode step's two launches).
// Random data; correctness is test_qwen_decode_kernels_cuda's. Usage: bench_qwen_decode_kernels
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "models/qwen_next/cuda/kernels.h"
#include "models/qwen_next/cuda/select_reference.cuh"

#include "../cuda_timing.cuh"

using namespace ds4;
namespace qc = ds4::qwen_next::cuda;

namespace {

std::mt19937_64 rng(7);
std::vector<cuda::DeviceBuffer> bufs;

template <class T>
T* dev(const std::vector<T>& h) {
  bufs.emplace_back(h.size() * sizeof(T) + 16, "bench_qwen_decode_kernels");
  T* p = bufs.back().as<T>();
  DS4_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

std::vector<float> randn(int64_t n, float scale = 1.f) {
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}

// Microseconds per enqueue: one CUDA graph of 200 enqueues, median of 5 replays (cuda_timing.cuh).
double time_us(const std::function<void(cudaStream_t)>& enqueue) {
  constexpr int kReps = 200;
  return 1e3 * ds4::bench::graph_ms([&](cudaStream_t s) { for (int i = 0; i < kReps; ++i) enqueue(s); }, 5) / kReps;
}

}  // namespace

int main() {
  const int64_t max_ctx = 32880, R = 4, budget = 2048;
  const qc::QsaShape sh{24, 2, 256, 64, 4, 128, budget, R, max_ctx, 1e-6f, nullptr};
  const int64_t KVD = sh.kv_heads * sh.head_dim, slots = max_ctx / R + 1;
  qc::QsaCache c{dev(randn(max_ctx * KVD)), dev(randn(max_ctx * KVD)), nullptr, dev(randn(slots * sh.idx_dim))};
  const float* iqk = dev(randn((sh.idx_heads + 1) * sh.idx_dim));
  const float *q = dev(randn(sh.heads * sh.head_dim)), *gate = dev(randn(sh.heads * sh.head_dim));
  float* scores = dev(std::vector<float>(size_t(slots)));
  float* scratch = dev(std::vector<float>(size_t(qc::qsa_attend_scratch(sh.heads, sh.head_dim, max_ctx))));
  float* att = dev(std::vector<float>(size_t(sh.heads * sh.head_dim)));
  std::printf("| kernel | context | us per launch (in a graph) |\n|---|---|---|\n");
  for (const int32_t p : {int32_t(2048 + 16 - 1), int32_t(32768 + 16 - 1)}) {
    const int32_t* pos = dev(std::vector<int32_t>{p});
    const int64_t nb = (p + 1) / R;
    std::vector<uint8_t> keep(size_t(slots), 0);
    std::vector<int64_t> order(static_cast<size_t>(nb));
    for (int64_t b = 0; b < nb; ++b) order[size_t(b)] = b;
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t i = 0; i < budget / R; ++i) keep[size_t(order[size_t(i)])] = 1;
    const uint8_t* dkeep = dev(keep);
    std::printf("| qsa_select_scores (%lld blocks) | %d | %.2f |\n", (long long)nb, p + 1,
                time_us([&](cudaStream_t s) { qc::qsa_select_scores(iqk, c, sh, pos, scores, s); }));
    std::printf("| main's scores kernel (select_reference.cuh) | %d | %.2f |\n", p + 1, time_us([&](cudaStream_t s) {
                  qc::select_scores_reference_kernel<<<unsigned((nb + 127) / 128), 128, 0, s>>>(iqk, c, sh, pos, scores);
                }));
    std::printf("| qsa_attend split + merge (%lld keys) | %d | %.2f |\n", (long long)(budget + (p + 1) % R), p + 1,
                time_us([&](cudaStream_t s) { qc::qsa_attend(q, gate, c, sh, pos, dkeep, scratch, att, s); }));
  }
  const qc::GdnShape g{16, 48, 128, 128, 1e-6f, true};
  const int64_t qkv_n = 2 * g.k_heads * g.k_dim + g.v_heads * g.v_dim;
  const float *qkv = dev(randn(qkv_n, 0.09f)), *z = dev(randn(g.v_heads * g.v_dim)), *w = dev(randn(g.v_dim));
  const float *gg = dev(std::vector<float>(size_t(g.v_heads), -0.1f)), *beta = dev(std::vector<float>(size_t(g.v_heads), 0.5f));
  float* S = dev(randn(g.v_heads * g.k_dim * g.v_dim, 0.05f));
  float* o = dev(std::vector<float>(size_t(g.v_heads * g.v_dim)));
  std::printf("| gdn_recurrent + gdn_gated_norm (2 launches) | - | %.2f |\n", time_us([&](cudaStream_t s) {
                qc::gdn_recurrent(qkv, gg, beta, S, o, g, s);
                qc::gdn_gated_norm(o, z, w, g, s);
              }));
  return 0;
}
