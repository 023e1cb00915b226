// GroupedGemm (grouped_gemm.h: the routed experts of large prefill chunks as cuBLAS grouped
// GEMMs) against host references, every expert weight format we load:
//   routed   moe_group over a chunk's routing, then plan + run as the models call it (x rows by
//            token for gate|up, or by pair for down), weight batches of 2 experts (several
//            batches) or all; every pair's row vs a double reference over the CPU decoder's f32
//            weights and f32 x: NMSE <= 1e-4, max error <= 2e-2 of max |ref| (both operands
//            rounded to BF16, FP32 sums: grouped_mma_bf16's tolerance); and vs grouped_mma_bf16
//            on the same entries: max difference <= 2e-4 of max |ref| (the same BF16 operands,
//            only the FP32 summation order differs: a path that rounded an operand otherwise
//            would differ by ~2^-9); groups() = the experts with rows, planned_rows() = pairs.
//            Routings: "skewed" (one expert with 40 rows = entries of 16 + 16 + 8, one with a
//            single row, one with none), "uniform" (96 tokens x 3 distinct experts of 8);
//   entries  a hand-made layout: entries of one expert that do not continue each other's rows
//            (separate GEMMs), a dead entry past *live, and *live = 0: rows of no live entry
//            stay untouched (NaN poison); the results as above.
// Mode 2 (one cublasGemmEx per expert) everywhere: mode 1 (cublasGemmGroupedBatchedEx) is
// CUBLAS_STATUS_NOT_SUPPORTED for BF16 in / FP32 out on the H200 with CUDA 13 (grouped_gemm.cu). Non-zero exit on failure. Runs on the H200 machine.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/grouped_gemm.h"
#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/moe_group.h"
#include "core/weight.h"
#include "device_experts.h"
#include "host_ref.h"
#include "weight_test_util.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

int g_failures = 0;
std::mt19937_64 g_rng(20261204);
constexpr int S = cuda::kGemvMaxRows;

std::vector<float> randn_rows(size_t n) { return randn(n, g_rng); }

void verdict(const std::string& name, bool ok, const std::string& detail) {
  if (!ok) ++g_failures;
  std::printf("%-40s %-62s %s\n", name.c_str(), detail.c_str(), ok ? "PASS" : "FAIL");
}

cuda::DeviceBuffer to_device(const std::vector<int32_t>& v) {
  cuda::DeviceBuffer b(std::max<size_t>(v.size(), 1) * 4, "ints");
  if (!v.empty()) DS4_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  return b;
}

std::vector<float> from_device(const cuda::DeviceBuffer& b) {
  std::vector<float> v(b.bytes() / 4);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  DS4_CUDA_CHECK(cudaMemcpy(v.data(), b.get(), b.bytes(), cudaMemcpyDeviceToHost));
  return v;
}

// One expected output row: y row `yr` = W_e x row `xr`.
struct Expect {
  int32_t expert, xr, yr;
};

// Errors of y (and of the grouped_mma_bf16 result ym) against the double reference of `ex` rows;
// every other row of y must still be NaN (poisoned before the run).
struct Errors {
  double nmse = 0, rel = 0, vs_mma = 0;
  bool finite = true, untouched = true;
};
Errors check_rows(const std::vector<HostWeight>& hw, const std::vector<float>& x, int64_t xs,
                  const std::vector<Expect>& ex, const std::vector<float>& y, const std::vector<float>& ym,
                  int64_t out, int64_t in) {
  std::vector<std::vector<float>> wf(hw.size());
  double num = 0, den = 0, max_abs = 0, max_ref = 0, max_mma = 0;
  Errors e;
  std::set<int32_t> written;
  for (const Expect& q : ex) {
    auto& w = wf[size_t(q.expert)];
    if (w.empty()) w = host_rows(hw[size_t(q.expert)]);
    written.insert(q.yr);
    for (int64_t o = 0; o < out; ++o) {
      double s = 0;
      for (int64_t c = 0; c < in; ++c) s += double(w[size_t(o * in + c)]) * x[size_t(q.xr * xs + c)];
      const double g = y[size_t(q.yr * out + o)], gm = ym[size_t(q.yr * out + o)];
      if (!std::isfinite(g)) e.finite = false;
      num += (g - s) * (g - s), den += s * s;
      max_abs = std::max(max_abs, std::fabs(g - s)), max_ref = std::max(max_ref, std::fabs(s));
      max_mma = std::max(max_mma, std::fabs(g - gm));
    }
  }
  for (size_t r = 0; r < y.size() / size_t(out); ++r)
    if (!written.count(int32_t(r)))
      for (int64_t o = 0; o < out; ++o) e.untouched = e.untouched && std::isnan(y[r * size_t(out) + size_t(o)]);
  e.nmse = num / std::max(den, 1e-300);
  e.rel = max_abs / std::max(max_ref, 1e-300);
  e.vs_mma = max_mma / std::max(max_ref, 1e-300);
  return e;
}

bool within(const Errors& e) { return e.finite && e.untouched && e.nmse <= 1e-4 && e.rel <= 2e-2 && e.vs_mma <= 2e-4; }

std::string describe(const Errors& e, const std::string& head) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s nmse %.1e rel %.1e vs mma %.1e%s%s", head.c_str(), e.nmse, e.rel, e.vs_mma,
                e.finite ? "" : " NON-FINITE", e.untouched ? "" : " WROTE A DEAD ROW");
  return buf;
}

// The grouped GEMM and grouped_mma_bf16 over the same entries `r` into y / ym (both poisoned).
void run_both(const WeightMatrix& w, const float* dx, const cuda::GemvRows& r, int64_t entries, int64_t out, int64_t in,
              int64_t batch_experts, int mode, const cuda::DeviceBuffer& dy, const cuda::DeviceBuffer& dym,
              int64_t* groups = nullptr, int64_t* planned = nullptr) {
  DS4_CUDA_CHECK(cudaMemset(dy.get(), 0xff, dy.bytes()));
  DS4_CUDA_CHECK(cudaMemset(dym.get(), 0xff, dym.bytes()));
  cuda::MatmulWorkspace mm(1, 128, 128, 1, "test grouped gemm handle", cuda::MatmulPrecision::kBf16);
  cuda::GroupedGemm gg(entries, out, in, size_t(batch_experts * out * in) * 2, mm, "test");
  const int keep = cuda::grouped_gemm_mode();
  cuda::grouped_gemm_set_mode(mode);
  gg.plan(r, nullptr);
  gg.run(w, dx, dy.as<float>(), r, nullptr);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  cuda::grouped_gemm_set_mode(keep);
  if (groups) *groups = gg.groups();
  if (planned) *planned = gg.planned_rows();
  cuda::grouped_mma_bf16(w, dx, dym.as<float>(), r, nullptr, 0);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
}

struct Routing {
  const char* what;
  int64_t tokens, k;
  std::vector<int32_t> ids;  // {tokens, k}
};

// Expert 0: every token (40 rows: entries 16 + 16 + 8); expert 1: none; expert 2: token 0 only;
// the rest spread over experts 3.. E-1.
Routing skewed(int64_t E) {
  Routing r{"skewed", 40, 2, {}};
  for (int64_t t = 0; t < r.tokens; ++t) {
    r.ids.push_back(0);
    r.ids.push_back(t == 0 ? 2 : int32_t(3 + t % (E - 3)));
  }
  return r;
}

Routing uniform(int64_t E) {
  Routing r{"uniform", 96, 3, {}};
  std::vector<int32_t> p(static_cast<size_t>(E));
  for (int64_t t = 0; t < r.tokens; ++t) {
    std::iota(p.begin(), p.end(), 0);
    std::shuffle(p.begin(), p.end(), g_rng);
    for (int64_t j = 0; j < r.k; ++j) r.ids.push_back(p[size_t(j)]);
  }
  return r;
}

// by_pair: x rows are the pairs' (the down projection: x_idx = slot), else the tokens' (gate|up).
void test_routed(DType t, const Routing& rt, int64_t batch_experts, int mode, bool by_pair,
                 DType st = DType::F16, int64_t group = 64) {
  const int64_t E = 8, out = 80, in = 256, pairs = rt.tokens * rt.k;  // 80: no multiple of a GEMM tile
  const DeviceExperts dex = upload_experts(t, E, out, in, g_rng, group, st);
  const int64_t entries = cuda::moe_group_entries(rt.tokens, rt.k, E, S);
  cuda::DeviceBuffer di = to_device(rt.ids), de(size_t(entries) * 4, "experts"), dl(4, "live"),
      dc(size_t(entries) * 4, "counts"), dt(size_t(entries * S) * 4, "tok"), ds(size_t(entries * S) * 4, "slot");
  const cuda::MoeGroup g{de.as<int32_t>(), dl.as<int32_t>(), dc.as<int32_t>(), dt.as<int32_t>(), ds.as<int32_t>(), S};
  cuda::moe_group(di.as<int32_t>(), rt.tokens, rt.k, E, g, nullptr);
  const int64_t xrows = by_pair ? pairs : rt.tokens, xs = in + 2;  // padded rows, as the models' scratch
  const std::vector<float> x = randn_rows(size_t(xrows * xs));
  cuda::DeviceBuffer dx(x.size() * 4, "x"), dy(size_t(pairs * out) * 4, "y"), dym(dy.bytes(), "y mma");
  DS4_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
  cuda::GemvRows r;
  r.n = int(std::min<int64_t>(rt.tokens, S));
  r.batch = cuda::GemvBatch{int(entries), g.experts, dex.stride, dex.scale_stride, 0, 0};
  r.live = g.live, r.counts = g.counts;
  r.x_row = xs, r.x_idx = by_pair ? g.slot : g.tok, r.y_row = out, r.y_idx = g.slot;
  int64_t groups = 0, planned = 0;
  run_both(dex.view, dx.as<float>(), r, entries, out, in, batch_experts, mode, dy, dym, &groups, &planned);
  std::vector<Expect> ex;
  for (int64_t p = 0; p < pairs; ++p) ex.push_back(Expect{rt.ids[size_t(p)], int32_t(by_pair ? p : p / rt.k), int32_t(p)});
  const Errors e = check_rows(dex.host, x, xs, ex, from_device(dy), from_device(dym), out, in);
  const int64_t used = int64_t(std::set<int32_t>(rt.ids.begin(), rt.ids.end()).size());
  const bool plan_ok = groups == used && planned == pairs;
  char head[96];
  std::snprintf(head, sizeof head, "b%lld %lld groups%s", (long long)batch_experts, (long long)groups,
                plan_ok ? "" : " WRONG PLAN");
  verdict(std::string("grouped_gemm_") + rt.what + (by_pair ? "_down_" : "_gu_") + fmt_name(t, st) + "/m" +
              std::to_string(mode),
          within(e) && plan_ok, describe(e, head));
}

// Entries by hand: expert 3 in three entries (16, then 5, then 7 rows: the third does not continue
// the second's rows, so it is its own GEMM), expert 1 with one row, then a dead entry (expert 5,
// 16 rows) past *live = 4; with live0 *live = 0 (nothing written).
void test_entries(DType t, bool live0) {
  const int64_t E = 6, out = 72, in = 256, tokens = 30, xs = in + 4;
  const DeviceExperts dex = upload_experts(t, E, out, in, g_rng);
  const std::vector<int32_t> experts{3, 3, 3, 1, 5}, counts{16, 5, 7, 1, 16};
  const int32_t live = live0 ? 0 : 4;
  const int64_t slots = 60;
  std::vector<int32_t> xi(experts.size() * S, 0), yi(xi.size(), 0);
  std::vector<Expect> ex;
  int32_t slot = 0;
  for (int32_t u = 0; u < int32_t(experts.size()); ++u)
    for (int32_t i = 0; i < counts[size_t(u)]; ++i, ++slot) {
      xi[size_t(u * S + i)] = (slot * 7) % int32_t(tokens);
      yi[size_t(u * S + i)] = slot;
      if (u < live) ex.push_back(Expect{experts[size_t(u)], xi[size_t(u * S + i)], slot});
    }
  const std::vector<float> x = randn_rows(size_t(tokens * xs));
  cuda::DeviceBuffer dx(x.size() * 4, "x"), dy(size_t(slots * out) * 4, "y"), dym(dy.bytes(), "y mma");
  DS4_CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
  cuda::DeviceBuffer de = to_device(experts), dc = to_device(counts), dl = to_device({live}), dxi = to_device(xi),
                     dyi = to_device(yi);
  cuda::GemvRows r;
  r.n = S, r.x_row = xs, r.y_row = out;
  r.batch = cuda::GemvBatch{int(experts.size()), de.as<int32_t>(), dex.stride, dex.scale_stride, 0, 0};
  r.live = dl.as<int32_t>(), r.counts = dc.as<int32_t>(), r.x_idx = dxi.as<int32_t>(), r.y_idx = dyi.as<int32_t>();
  int64_t groups = 0, planned = 0;
  run_both(dex.view, dx.as<float>(), r, int64_t(experts.size()), out, in, 2, 2, dy, dym, &groups, &planned);  // mode 2 (mode 1 is NOT_SUPPORTED on CUDA 13)
  const Errors e = check_rows(dex.host, x, xs, ex, from_device(dy), from_device(dym), out, in);
  const bool plan_ok = live0 ? groups == 0 && planned == 0 : groups == 3 && planned == 29;
  char head[96];
  std::snprintf(head, sizeof head, "live %d: %lld groups %lld rows%s", live, (long long)groups, (long long)planned,
                plan_ok ? "" : " WRONG PLAN");
  // live 0: no row to compare; only the poison must survive
  const bool ok = plan_ok && (live0 ? e.untouched : within(e));
  verdict(std::string("grouped_gemm_entries_") + (live0 ? "live0_" : "") + fmt_name(t, DType::F16), ok,
          describe(e, head));
}

}  // namespace

int main() {
  try {
    struct Fmt {
      DType t, st;
      int64_t group;
    };
    const Fmt fmts[] = {{DType::BF16, DType::F16, 64},   {DType::F16, DType::F16, 64},   {DType::Q8_0, DType::F16, 64},
                        {DType::Q4_K, DType::F16, 64},   {DType::Q2_K, DType::F16, 64},  {DType::IQ2_XXS, DType::F16, 64},
                        {DType::MLX_Q4, DType::BF16, 64}, {DType::MLX_Q8, DType::F16, 32}, {DType::F32, DType::F16, 64}};
    for (const Fmt& f : fmts) {
      test_routed(f.t, skewed(8), 2, 2, false, f.st, f.group);  // 3 weight batches of <= 2 experts
      test_routed(f.t, uniform(8), 8, 2, true, f.st, f.group);  // one batch, the down projection's rows
    }
    test_entries(DType::Q4_K, false);
    test_entries(DType::Q4_K, true);
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 2;
  }
  std::printf("\n%s: %d failure(s)\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
  return g_failures ? 1 : 0;
}
