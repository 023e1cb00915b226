// DeepSeek V4's fused producers of act_quant inputs (issue #23; models/deepseek_v4/cuda/kernels.h):
// swiglu_clamp_quant and rmsnorm_quant must write exactly the bytes of the unfused pair they
// replace in the decode step (swiglu_clamp / rmsnorm_f32, then quantize_act), because decode
// steps must equal chunk rows (which keep the pair) bit for bit. Each case memcmps the f32
// output, the int8 values, the scales and (Q8_K) the bsums of both paths, on Flash's shapes:
//  1. the routed experts' swiglu (6 rows of gate|up {2F}, F = 2048) into Q8_K and into Q8_0;
//  2. the shared expert's in place (y = g, one row of F) into Q8_0 and Q8_K;
//  3. q_a's rmsnorm (1024 values: 512 threads) and a 256-value row (128 threads; the tiny test
//     model's), weighted and unweighted, into Q8_0 and Q8_K;
//  4. bad input (a quantized row of the wrong length) throws.
// Random inputs are scaled so the clamp (limit 10) cuts some values and blocks differ in range.
// Plain executable; exits 1 when any check fails.
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_act.h"
#include "backend/cuda/norm.h"
#include "models/deepseek_v4/cuda/kernels.h"
#include "test_common.h"

using namespace ds4;
namespace dc = ds4::cuda;
namespace dk = ds4::deepseek_v4::cuda;
using cuda_test::check;

namespace {

cudaStream_t g_stream = nullptr;  // a blocking stream of main's (launches as the model's, with PDL)

struct Dev {
  void* p = nullptr;
  explicit Dev(size_t bytes) { DS4_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~Dev() { cudaFree(p); }
  template <class T>
  T* as() const { return static_cast<T*>(p); }
};

std::vector<float> random_values(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = dist(rng) * scale * (1.f + float((i / 256) % 7));  // ranges per block
  return v;
}

std::vector<uint8_t> download(const void* p, size_t bytes) {
  std::vector<uint8_t> h(bytes);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  DS4_CUDA_CHECK(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
  return h;
}

// Quantized rows of n values (rows of them) in one buffer.
struct QRows {
  Dev buf;
  dc::DeviceActQ8 q;
  QRows(ActBlock b, int64_t n, int64_t rows) : buf(dc::act_q8_row_bytes(b, n) * size_t(rows)) {
    DS4_CUDA_CHECK(cudaMemset(buf.p, 0xa5, dc::act_q8_row_bytes(b, n) * size_t(rows)));
    q = dc::act_q8_carve(buf.p, b, n, rows);
  }
  size_t bytes() const { return dc::act_q8_row_bytes(q.block, q.n) * size_t(q.rows); }
};

const char* name(ActBlock b) { return b == ActBlock::kQ8_0 ? "Q8_0" : "Q8_K"; }

// swiglu over `rows` rows of gate|up (in_stride floats apart), the unfused pair vs the fused kernel.
void check_swiglu(int64_t rows, int64_t F, int64_t in_stride, bool in_place, ActBlock b, uint32_t seed) {
  // row r's gate at r * in_stride, its up F later (the shared expert: in_stride F, one row)
  const std::vector<float> gu = random_values(size_t(rows * in_stride + F), seed, 3.f);
  Dev in_a(gu.size() * 4), in_b(gu.size() * 4), out_a(size_t(rows * F) * 4), out_b(size_t(rows * F) * 4);
  DS4_CUDA_CHECK(cudaMemcpy(in_a.p, gu.data(), gu.size() * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(in_b.p, gu.data(), gu.size() * 4, cudaMemcpyHostToDevice));
  float* ya = in_place ? in_a.as<float>() : out_a.as<float>();
  float* yb = in_place ? in_b.as<float>() : out_b.as<float>();
  const int64_t y_row = in_place ? in_stride : F;
  QRows qa(b, F, rows), qb(b, F, rows);
  dk::swiglu_clamp(in_a.as<float>(), in_a.as<float>() + F, rows, F, in_stride, 10.f, ya, g_stream, y_row);
  dc::quantize_act(ya, y_row, rows, qa.q, g_stream);
  // (in place: one row, so the fused kernel's packed rows land where the pair's do)
  dk::swiglu_clamp_quant(in_b.as<float>(), in_b.as<float>() + F, rows, F, in_stride, 10.f, yb, qb.q, g_stream);
  const size_t yb_bytes = size_t(rows * y_row) * 4;
  const std::string what = std::to_string(rows) + " x " + std::to_string(F) + (in_place ? " in place" : "") + " -> " +
                           name(b);
  check(download(ya, yb_bytes) == download(yb, yb_bytes), "swiglu_clamp_quant " + what + ": f32 values equal");
  check(download(qa.buf.p, qa.bytes()) == download(qb.buf.p, qb.bytes()),
        "swiglu_clamp_quant " + what + ": quantized bytes (q, d, bsums) equal");
}

void check_norm(int64_t dim, bool weighted, ActBlock b, uint32_t seed) {
  const std::vector<float> x = random_values(size_t(dim), seed, 0.7f), w = random_values(size_t(dim), seed + 1, 1.f);
  Dev xa(size_t(dim) * 4), xb(size_t(dim) * 4), wd(size_t(dim) * 4);
  DS4_CUDA_CHECK(cudaMemcpy(xa.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(xb.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(wd.p, w.data(), w.size() * 4, cudaMemcpyHostToDevice));
  const float* wp = weighted ? wd.as<float>() : nullptr;
  QRows qa(b, dim, 1), qb(b, dim, 1);
  dc::rmsnorm_f32(xa.as<float>(), wp, xa.as<float>(), 1, dim, 1e-6f, g_stream);  // in place, as the model
  dc::quantize_act(xa.as<float>(), dim, 1, qa.q, g_stream);
  dk::rmsnorm_quant(xb.as<float>(), wp, xb.as<float>(), dim, 1e-6f, qb.q, g_stream);
  const std::string what = std::to_string(dim) + (weighted ? " weighted" : "") + " -> " + name(b);
  check(download(xa.p, size_t(dim) * 4) == download(xb.p, size_t(dim) * 4), "rmsnorm_quant " + what + ": f32 values equal");
  check(download(qa.buf.p, qa.bytes()) == download(qb.buf.p, qb.bytes()),
        "rmsnorm_quant " + what + ": quantized bytes (q, d, bsums) equal");
}

}  // namespace

int main() {
  try {
    DS4_CUDA_CHECK(cudaStreamCreate(&g_stream));
    uint32_t seed = 7;
    for (ActBlock b : {ActBlock::kQ8_K, ActBlock::kQ8_0}) {
      check_swiglu(6, 2048, 4096, false, b, seed++);  // routed experts: {K, 2F} -> {K, F}
      check_swiglu(1, 2048, 2048, true, b, seed++);   // shared expert: g, u back to back, y = g
      check_swiglu(3, 256, 512, false, b, seed++);    // the tiny test model's expert ff
      for (int64_t dim : {1024, 256})
        for (bool weighted : {true, false}) check_norm(dim, weighted, b, seed++);
    }
    bool threw = false;
    try {
      QRows q(ActBlock::kQ8_0, 512, 1);
      Dev x(1024 * 4);
      dk::rmsnorm_quant(x.as<float>(), nullptr, x.as<float>(), 1024, 1e-6f, q.q, g_stream);
    } catch (const InputError&) {
      threw = true;
    }
    check(threw, "rmsnorm_quant with a quantized row of 512 values for 1024 throws InputError");
  } catch (const std::exception& e) {
    check(false, std::string("exception: ") + e.what());
  }
  return cuda_test::summary();
}
