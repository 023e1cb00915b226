// Kernels of the Qwen decode step (models/qwen_next/cuda) against what they replace:
// - qsa_select_scores (keys staged in shared memory) against the kernel it replaced (each thread
//   reading its key row from global memory; select_reference.cuh): the same fmaf chain per
//   score, so memcmp of the scores, on the full-size indexer (4 heads x 128, ratio 4) at 32K and
//   just past the budget (a partial CTA) and on a small shape.
// - qsa_attend past the budget (the kept blocks listed per CTA, the splits over the selected
//   keys) against the same kernel on a cache holding only the visible keys in order, where
//   every key is visible (the position-range path): the same keys in the same order and the
//   same split boundaries, so memcmp of the outputs; and against a double-precision host
//   reference within 1e-4 (a wrong or missing key moves the output by far more).
// - qsa_attend on tensor cores (many_rows with qsa_attend_set_tc: qsa_tc.cu) over a chunk's rows
//   at consecutive positions (every block kept, and past the budget with each row's own kept
//   blocks): every row within 5e-3 of the double host reference (TF32 operands: ~1e-3 here; a
//   wrong, missing or extra key moves an output by ~1e-1), and the FP32 group kernel
//   (qsa_attend_set_tc(false)) within 1e-4 of it, as a control; the tensor-core form's multi-row
//   blocks (qsa_attend_set_tc_rows: 4 rows per block where all are within the budget) under the
//   same 5e-3, on chunks whose rows are all within the budget, all past it, and crossing it.
// Usage: test_qwen_decode_kernels_cuda   (exit 1 when a check fails)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "models/qwen_next/cuda/kernels.h"
#include "models/qwen_next/cuda/select_reference.cuh"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;
namespace qc = ds4::qwen_next::cuda;

namespace {

template <class T>
T* dev(const std::vector<T>& h, std::vector<cuda::DeviceBuffer>& keep_alive) {
  keep_alive.emplace_back(h.size() * sizeof(T) + 16, "test_qwen_qsa");
  T* p = keep_alive.back().as<T>();
  DS4_CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

template <class T>
std::vector<T> down(const T* p, int64_t n) {
  std::vector<T> v(static_cast<size_t>(n));
  DS4_CUDA_CHECK(cudaMemcpy(v.data(), p, size_t(n) * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

std::vector<float> randn(int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}

qc::QsaShape shape(int64_t heads, int64_t kv, int64_t hd, int64_t ih, int64_t id, int64_t budget, int64_t ratio,
                   int64_t max_ctx) {
  return qc::QsaShape{heads, kv, hd, hd / 4, ih, id, budget, ratio, max_ctx, 1e-6f, nullptr};
}

void scores_case(const char* name, const qc::QsaShape& sh, int64_t p, std::mt19937_64& rng) {
  std::vector<cuda::DeviceBuffer> bufs;
  const int64_t nb = (p + 1) / sh.idx_ratio, D = sh.idx_dim, slots = sh.max_ctx / sh.idx_ratio + 1;
  qc::QsaCache c{};
  c.idx_pooled = dev(randn(slots * D, rng), bufs);
  const float* iqk = dev(randn((sh.idx_heads + 1) * D, rng), bufs);
  const int32_t* pos = dev(std::vector<int32_t>{int32_t(p)}, bufs);
  float* got = dev(std::vector<float>(size_t(slots), -7.f), bufs);
  float* want = dev(std::vector<float>(size_t(slots), -7.f), bufs);
  qc::qsa_select_scores(iqk, c, sh, pos, got, nullptr);
  qc::select_scores_reference_kernel<<<unsigned((nb + 127) / 128), 128>>>(iqk, c, sh, pos, want);
  DS4_CUDA_CHECK_LAUNCH();
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const auto g = down(got, slots), w = down(want, slots);
  check(nb > sh.idx_budget / sh.idx_ratio && std::memcmp(g.data(), w.data(), size_t(slots) * sizeof(float)) == 0,
        std::string(name) + ": qsa_select_scores = the unstaged kernel bit for bit (" + std::to_string(nb) +
            " blocks, max |diff| " + std::to_string(max_diff(g.data(), w.data(), size_t(slots))) + ")");
}

// att {heads, hd} in double: softmax over the keys at `vis` (positions), values, sigmoid gate.
std::vector<float> host_attend(const qc::QsaShape& sh, const std::vector<float>& q, const std::vector<float>& gate,
                               const std::vector<float>& k, const std::vector<float>& v,
                               const std::vector<int64_t>& vis) {
  const int64_t hd = sh.head_dim, KVD = sh.kv_heads * hd, G = sh.heads / sh.kv_heads;
  std::vector<float> out(size_t(sh.heads * hd));
  for (int64_t h = 0; h < sh.heads; ++h) {
    const int64_t kvh = h / G;
    std::vector<double> s(vis.size());
    double m = -1e300;
    for (size_t i = 0; i < vis.size(); ++i) {
      double d = 0;
      for (int64_t e = 0; e < hd; ++e) d += double(q[size_t(h * hd + e)]) * k[size_t(vis[i] * KVD + kvh * hd + e)];
      s[i] = d / std::sqrt(double(hd));
      m = std::max(m, s[i]);
    }
    double l = 0;
    for (auto& x : s) l += (x = std::exp(x - m));
    for (int64_t e = 0; e < hd; ++e) {
      double o = 0;
      for (size_t i = 0; i < vis.size(); ++i) o += s[i] * v[size_t(vis[i] * KVD + kvh * hd + e)];
      const double g = gate[size_t(h * hd + e)];
      out[size_t(h * hd + e)] = float(o / l / (1.0 + std::exp(-g)));
    }
  }
  return out;
}

void attend_case(const char* name, const qc::QsaShape& sh, int64_t p, std::mt19937_64& rng) {
  std::vector<cuda::DeviceBuffer> bufs;
  const int64_t hd = sh.head_dim, KVD = sh.kv_heads * hd, R = sh.idx_ratio, nb = (p + 1) / R;
  const int64_t keep_n = sh.idx_budget / R;
  // keep: exactly keep_n of the nb complete blocks, at random (as topk_select leaves them)
  std::vector<uint8_t> keep(size_t(sh.max_ctx / R + 1), 0);
  std::vector<int64_t> order(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) order[size_t(b)] = b;
  std::shuffle(order.begin(), order.end(), rng);
  for (int64_t i = 0; i < keep_n && i < nb; ++i) keep[size_t(order[size_t(i)])] = 1;
  std::vector<int64_t> vis;  // visible positions, ascending
  for (int64_t j = 0; j <= p; ++j)
    if (j >= nb * R || keep[size_t(j / R)]) vis.push_back(j);
  const auto k = randn(sh.max_ctx * KVD, rng), v = randn(sh.max_ctx * KVD, rng);
  const auto q = randn(sh.heads * hd, rng), gate = randn(sh.heads * hd, rng);
  std::vector<float> kc(size_t(sh.max_ctx * KVD), 0.f), vc(kc.size(), 0.f);  // visible keys only, in order
  for (size_t i = 0; i < vis.size(); ++i) {
    std::memcpy(&kc[i * size_t(KVD)], &k[size_t(vis[i] * KVD)], size_t(KVD) * sizeof(float));
    std::memcpy(&vc[i * size_t(KVD)], &v[size_t(vis[i] * KVD)], size_t(KVD) * sizeof(float));
  }
  const int64_t pc = int64_t(vis.size()) - 1;  // the compact cache's position: every block kept
  const float *dq = dev(q, bufs), *dg = dev(gate, bufs);
  const uint8_t* dkeep = dev(keep, bufs);
  const int32_t* dpos = dev(std::vector<int32_t>{int32_t(p), int32_t(pc)}, bufs);
  float* scratch = dev(std::vector<float>(size_t(qc::qsa_attend_scratch(sh.heads, hd, sh.max_ctx))), bufs);
  float* att = dev(std::vector<float>(size_t(sh.heads * hd)), bufs);
  float* att_c = dev(std::vector<float>(size_t(sh.heads * hd)), bufs);
  const qc::QsaCache c{dev(k, bufs), dev(v, bufs), nullptr, nullptr};
  const qc::QsaCache cc{dev(kc, bufs), dev(vc, bufs), nullptr, nullptr};
  qc::qsa_attend(dq, dg, c, sh, dpos, dkeep, scratch, att, nullptr);
  qc::qsa_attend(dq, dg, cc, sh, dpos + 1, dkeep, scratch, att_c, nullptr);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const auto a = down(att, sh.heads * hd), ac = down(att_c, sh.heads * hd);
  const auto ref = host_attend(sh, q, gate, k, v, vis);
  const bool past = nb > keep_n && (pc + 1) / R <= keep_n;
  check(past && std::memcmp(a.data(), ac.data(), a.size() * sizeof(float)) == 0,
        std::string(name) + ": past the budget (" + std::to_string(vis.size()) + " of " + std::to_string(p + 1) +
            " keys) = every key of the compact cache, bit for bit (max |diff| " +
            std::to_string(max_diff(a.data(), ac.data(), a.size())) + ")");
  const float md = max_diff(a.data(), ref.data(), a.size());
  check(md < 1e-4f, std::string(name) + ": vs the double host reference, max |diff| " + std::to_string(md));
}

// A chunk's rows at positions p0 .. p0 + n - 1 through qsa_attend(many_rows): the tensor-core
// kernel (tc) or the group kernel, each row against host_attend over its own visible keys.
void chunk_case(const char* name, const qc::QsaShape& sh, int64_t p0, int64_t n, std::mt19937_64& rng) {
  std::vector<cuda::DeviceBuffer> bufs;
  const int64_t hd = sh.head_dim, KVD = sh.kv_heads * hd, R = sh.idx_ratio, keep_n = sh.idx_budget / R;
  const int64_t rs = std::max<int64_t>(qc::qsa_attend_scratch(sh.heads, hd, sh.max_ctx), sh.heads * hd);
  const auto k = randn(sh.max_ctx * KVD, rng), v = randn(sh.max_ctx * KVD, rng);
  const auto q = randn(n * rs, rng), gate = randn(n * rs, rng);
  std::vector<uint8_t> keep(size_t(n * rs * 4), 0);
  std::vector<int32_t> pos(static_cast<size_t>(n));
  std::vector<std::vector<int64_t>> vis(static_cast<size_t>(n));
  bool past = false;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t p = p0 + r, nb = (p + 1) / R;
    pos[size_t(r)] = int32_t(p);
    if (nb > keep_n) {  // this row's own kept blocks: keep_n of its nb, at random
      past = true;
      std::vector<int64_t> order(static_cast<size_t>(nb));
      for (int64_t b = 0; b < nb; ++b) order[size_t(b)] = b;
      std::shuffle(order.begin(), order.end(), rng);
      for (int64_t i = 0; i < keep_n; ++i) keep[size_t(r * rs * 4 + order[size_t(i)])] = 1;
    }
    for (int64_t j = 0; j <= p; ++j)
      if (nb <= keep_n || j >= nb * R || keep[size_t(r * rs * 4 + j / R)]) vis[size_t(r)].push_back(j);
  }
  const float *dq = dev(q, bufs), *dg = dev(gate, bufs);
  const uint8_t* dkeep = dev(keep, bufs);
  const int32_t* dpos = dev(pos, bufs);
  float* scratch = dev(std::vector<float>(size_t(n * rs)), bufs);
  float* att = dev(std::vector<float>(size_t(n * rs)), bufs);
  const qc::QsaCache c{dev(k, bufs), dev(v, bufs), nullptr, nullptr};
  float worst[3] = {0.f, 0.f, 0.f};
  std::vector<std::vector<float>> got(3);
  for (int tc = 2; tc >= 0; --tc) {  // 2: tensor cores with the multi-row blocks, 1: without, 0: the group kernel
    qc::qsa_attend_set_tc(tc >= 1);
    qc::qsa_attend_set_tc_rows(tc == 2);
    DS4_CUDA_CHECK(cudaMemset(scratch, 0xff, size_t(n * rs) * sizeof(float)));  // (a partial left unwritten shows)
    qc::qsa_attend(dq, dg, c, sh, dpos, dkeep, scratch, att, nullptr, qc::Rows{n, rs}, true);
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
    got[size_t(tc)] = down(att, n * rs);
  }
  qc::qsa_attend_set_tc(true);
  qc::qsa_attend_set_tc_rows(false);  // (the process default: this test sets both for each run)
  float tc_vs_group = 0.f;
  for (int64_t r = 0; r < n; ++r) {
    const std::vector<float> qr(q.begin() + r * rs, q.begin() + r * rs + sh.heads * hd),
        gr(gate.begin() + r * rs, gate.begin() + r * rs + sh.heads * hd);
    const auto ref = host_attend(sh, qr, gr, k, v, vis[size_t(r)]);
    for (int tc = 0; tc < 3; ++tc)
      worst[tc] = std::max(worst[tc], max_diff(got[size_t(tc)].data() + r * rs, ref.data(), ref.size()));
    tc_vs_group = std::max(tc_vs_group, max_diff(got[1].data() + r * rs, got[0].data() + r * rs, ref.size()));
  }
  const std::string what = std::string(name) + " (" + std::to_string(n) + " rows from position " + std::to_string(p0) +
                           (past ? ", past the budget" : ", every block kept") + ")";
  check(worst[1] < 5e-3f, what + ": tensor cores vs the double host reference, max |diff| " + std::to_string(worst[1]) +
                              " (group kernel vs tensor cores " + std::to_string(tc_vs_group) + ")");
  check(worst[0] < 1e-4f, what + ": the group kernel vs the double host reference, max |diff| " + std::to_string(worst[0]));
  check(worst[2] < 5e-3f, what + ": tensor cores in 4-row blocks vs the double host reference, max |diff| " +
                              std::to_string(worst[2]));
}

}  // namespace

int main() {
  std::mt19937_64 rng(23);
  // full size: 24 heads / 2 KV heads x 256, indexer 4 x 128, ratio 4, budget 2048
  const auto full = shape(24, 2, 256, 4, 128, 2048, 4, 32880);
  scores_case("full size at 32K", full, 32767, rng);
  scores_case("full size just past the budget", full, 2052, rng);
  scores_case("full size, a partial last CTA", full, 9001, rng);
  scores_case("small (2 x 16, budget 16)", shape(4, 2, 32, 2, 16, 16, 4, 400), 301, rng);
  attend_case("full size at 32K (tail of 2)", full, 32769, rng);
  attend_case("full size at 8K", full, 8191, rng);
  attend_case("small (4 heads / 2 KV x 32, budget 16)", shape(4, 2, 32, 2, 16, 16, 4, 400), 301, rng);
  attend_case("small, head dim 64, group 1", shape(2, 2, 64, 2, 16, 32, 4, 600), 523, rng);
  chunk_case("full size, a 2K chunk's last rows", full, 2000, 24, rng);
  chunk_case("full size, a chunk's first rows", full, 0, 20, rng);
  chunk_case("full size past the budget", full, 3000, 10, rng);
  chunk_case("full size crossing the budget (groups of both kinds)", full, 2030, 41, rng);
  chunk_case("full size, 4-row groups straddling a key tile, a short last group", full, 62, 10, rng);
  chunk_case("small (4 heads / 2 KV x 32, budget 16)", shape(4, 2, 32, 2, 16, 16, 4, 400), 250, 40, rng);
  chunk_case("small, every block kept (4-row groups of 2 x 32 heads)", shape(4, 2, 32, 2, 16, 16, 4, 400), 0, 18, rng);
  chunk_case("small, head dim 64, group 1", shape(2, 2, 64, 2, 16, 32, 4, 600), 0, 300, rng);
  std::printf("%s\n", g_fail ? "FAILED" : "ALL PASSED");
  return g_fail ? 1 : 0;
}
