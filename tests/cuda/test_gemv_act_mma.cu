// gemv_act_mma (backend/cuda/gemv_act_mma.h: y = W x for 1..16 quantized rows on int8 tensor
// cores) against the host:
//   order   every output == the kernel's f32 order emulated on the host from dot_act's block
//           terms (memcmp): warp w of W sums the blocks of its stages w, w + W, ... (S blocks
//           each, gemv_act_mma_split) left to right from 0, then the W sums in warp order. This
//           pins the integers (exact) and every f32 operation;
//   cpu     == ds4::dot_act per row within the summation-order bound 2 (nb - 1) 2^-24 sum|term|
//           (the same block terms, another order of the sum over blocks);
//   n       row i of a launch of n rows == row i of the 16-row launch (memcmp), n = 1..16, and
//           == the same input as row 15 - i of a launch with the rows reversed (other
//           companions): a row never depends on n or on the other rows;
//   bad     InputError for n 0 / 17, the wrong activation block, x_row < cols.
// Shapes: DeepSeek V4 Flash's act products (Q8_0 4096->1024 q_a / o_a's group, 1024->32768,
// 8192->4096; experts IQ2_XXS 2048x4096, Q2_K 4096x2048) and odd ones: rows not a multiple of
// 8 / 16, a last stage with fewer blocks, rows of an odd number of 34 / 66-byte blocks (the
// synchronous copy path), K of one block.
// Usage: test_gemv_act_mma (exit 1 when a check fails; ~10 s on the H200, most of it the CPU
// reference)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_act.h"
#include "backend/cuda/gemv_act_mma.h"
#include "backend/cuda/memory.h"
#include "core/act_quant.h"
#include "core/error.h"
#include "act_block_term.h"
#include "device_weight.h"
#include "host_ref.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

constexpr int kIn = cuda::kGemvActMmaMaxRows;

template <class T>
std::vector<T> download(const T* p, size_t n, cudaStream_t s) {
  std::vector<T> v(n);
  DS4_CUDA_CHECK(cudaStreamSynchronize(s));
  DS4_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

// kIn activation rows of n values (a zero block and a large-value column mixed in).
std::vector<float> activations(int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(size_t(kIn * n));
  for (int64_t r = 0; r < kIn; ++r)
    for (int64_t i = 0; i < n; ++i) x[size_t(r * n + i)] = nd(rng) * (i % 97 == 5 ? 30.f : 1.f);
  if (n >= 512)
    for (int64_t i = 256; i < 512; ++i) x[size_t(3 * n + i)] = 0.f;  // row 3: a zero block
  return x;
}

// CPU-quantized rows uploaded in act_q8_carve's layout (rows of n values back to back).
struct DeviceRows {
  cuda::DeviceBuffer buf;
  cuda::DeviceActQ8 q;
};
DeviceRows upload_rows(const ActQ8Rows& h) {
  DeviceRows d;
  d.buf = cuda::DeviceBuffer(size_t(h.rows) * cuda::act_q8_row_bytes(h.block, h.n), "test mma xq");
  d.q = cuda::act_q8_carve(d.buf.get(), h.block, h.n, h.rows);
  DS4_CUDA_CHECK(cudaMemcpy(d.q.q, h.q.data(), h.q.size(), cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(d.q.d, h.d.data(), h.d.size() * 4, cudaMemcpyHostToDevice));
  if (!h.bsums.empty()) DS4_CUDA_CHECK(cudaMemcpy(d.q.bsums, h.bsums.data(), h.bsums.size() * 2, cudaMemcpyHostToDevice));
  return d;
}

// The kernel's order (gemv_act_mma.h) over the block terms.
float mma_order_sum(const std::vector<float>& terms, const cuda::GemvActMmaSplit& sp) {
  const int64_t nb = int64_t(terms.size()), stages = (nb + sp.stage_blocks - 1) / sp.stage_blocks;
  float total = 0.f;
  for (int w = 0; w < sp.warps; ++w) {
    float acc = 0.f;
    for (int64_t s = w; s < stages; s += sp.warps)
      for (int64_t b = s * sp.stage_blocks; b < std::min(nb, (s + 1) * sp.stage_blocks); ++b) acc += terms[size_t(b)];
    total = w == 0 ? acc : total + acc;
  }
  return total;
}

struct Shape {
  DType type;
  int64_t rows, cols;
  const char* what;
};

void check_shape(const Shape& sh, std::mt19937_64& rng, cudaStream_t s) {
  const ActBlock block = act_block_for(sh.type);
  const std::string what = std::string(dtype_name(sh.type)) + " " + std::to_string(sh.rows) + "x" +
                           std::to_string(sh.cols) + " " + sh.what;
  const HostWeight hw = random_weight(sh.type, sh.rows, sh.cols, rng);
  DeviceWeight dw = upload(hw);
  const int64_t n = sh.cols, M = sh.rows;
  const std::vector<float> x = activations(n, rng);
  const ActQ8Rows xq = quantize_act_rows(block, x.data(), n, kIn);
  std::vector<float> xr(x.size());  // the rows reversed
  for (int r = 0; r < kIn; ++r) std::memcpy(&xr[size_t(r * n)], &x[size_t((kIn - 1 - r) * n)], size_t(n) * 4);
  const ActQ8Rows xqr = quantize_act_rows(block, xr.data(), n, kIn);
  const DeviceRows d = upload_rows(xq), dr = upload_rows(xqr);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const int64_t y_row = M + 3;  // a y stride other than rows
  cuda::DeviceBuffer y(size_t(kIn * y_row) * 4, "test mma y");
  auto run = [&](const DeviceRows& in, int nr) {
    DS4_CUDA_CHECK(cudaMemsetAsync(y.get(), 0xff, y.bytes(), s));  // NaN: rows not written show
    cuda::gemv_act_mma(dw.view, in.q.row(0), y.as<float>(), nr, n, y_row, s);
    return download(y.as<float>(), size_t(kIn * y_row), s);
  };
  const std::vector<float> full = run(d, kIn);

  // order (memcmp) and cpu (bound) on every output of the 16-row launch
  const WeightMatrix hv = host_view(hw);
  const cuda::GemvActMmaSplit sp = cuda::gemv_act_mma_split(sh.type, M, n);
  const int64_t nb = n / act_values_per_scale(block);
  std::vector<float> terms(static_cast<size_t>(nb));
  int64_t exact = 0, bad = 0;
  double worst = 0;
  for (int i = 0; i < kIn; ++i) {
    const ActQ8View xv = xq.row(i);
    for (int64_t r = 0; r < M; ++r) {
      double mag = 0;
      for (int64_t b = 0; b < nb; ++b) {
        terms[size_t(b)] = act_block_term(hv, r, xv, b);
        mag += std::fabs(double(terms[size_t(b)]));
      }
      const float got = full[size_t(i * y_row + r)], emulated = mma_order_sum(terms, sp);
      exact += std::memcmp(&got, &emulated, 4) == 0;
      const double diff = std::fabs(double(got) - double(dot_act(hv, r, xv)));
      const double bound = 2.0 * double(std::max<int64_t>(nb - 1, 0)) * std::ldexp(1.0, -24) * mag;
      if (!(diff <= bound)) ++bad;
      if (mag > 0) worst = std::max(worst, diff / mag);
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, " (max |gpu - cpu| / sum|term| %.2e)", worst);
  check(exact == kIn * M, what + ": == the kernel's order on the host (W " + std::to_string(sp.warps) + ", S " +
                              std::to_string(sp.stage_blocks) + ", memcmp) on " + std::to_string(exact) + " of " +
                              std::to_string(kIn * M));
  check(bad == 0, what + ": == dot_act within 2 (nb - 1) 2^-24 sum|term|, " + std::to_string(bad) + " outside" + buf);

  // n = 1..16 and other companions: the same bits; rows >= n untouched
  int same = 0, total = 0, untouched = 0, untouched_total = 0;
  for (int nr = 1; nr <= kIn; ++nr) {
    const std::vector<float> got = run(d, nr);
    for (int i = 0; i < kIn; ++i) {
      const bool eq = std::memcmp(&got[size_t(i * y_row)], &full[size_t(i * y_row)], size_t(M) * 4) == 0;
      if (i < nr) same += eq, ++total;
      else untouched += std::isnan(got[size_t(i * y_row)]) && std::isnan(got[size_t(i * y_row + M - 1)]), ++untouched_total;
    }
  }
  const std::vector<float> rev = run(dr, kIn);
  int rev_same = 0;
  for (int i = 0; i < kIn; ++i)
    rev_same += std::memcmp(&rev[size_t(i * y_row)], &full[size_t((kIn - 1 - i) * y_row)], size_t(M) * 4) == 0;
  check(same == total && untouched == untouched_total,
        what + ": row i for n = 1..16 == the 16-row launch (memcmp) " + std::to_string(same) + " of " +
            std::to_string(total) + ", rows >= n untouched " + std::to_string(untouched) + " of " +
            std::to_string(untouched_total));
  check(rev_same == kIn, what + ": rows reversed (other companions): row 15 - i == row i (memcmp) " +
                             std::to_string(rev_same) + " of 16");
  // tiles per block (1, 2) never change a bit
  cuda::gemv_act_mma_set_tiles(M >= 16 ? 2 : 1);
  const std::vector<float> t2 = run(d, kIn);
  cuda::gemv_act_mma_set_tiles(1);
  const std::vector<float> t1 = run(d, kIn);
  cuda::gemv_act_mma_set_tiles(0);
  check(std::memcmp(t1.data(), full.data(), t1.size() * 4) == 0 && std::memcmp(t2.data(), full.data(), t2.size() * 4) == 0,
        what + ": 1 and 2 tiles per block == the default (memcmp)");
}

template <class Fn>
bool throws_input(Fn&& f) {
  try {
    f();
  } catch (const InputError&) {
    return true;
  }
  return false;
}

void check_bad_input(std::mt19937_64& rng, cudaStream_t s) {
  const HostWeight hw = random_weight(DType::Q8_0, 16, 256, rng);
  DeviceWeight dw = upload(hw);
  const std::vector<float> x = activations(256, rng);
  const DeviceRows d = upload_rows(quantize_act_rows(ActBlock::kQ8_0, x.data(), 256, kIn));
  const DeviceRows k = upload_rows(quantize_act_rows(ActBlock::kQ8_K, x.data(), 256, kIn));
  cuda::DeviceBuffer y(size_t(kIn * 16) * 4, "test mma y");
  float* yp = y.as<float>();
  check(throws_input([&] { cuda::gemv_act_mma(dw.view, d.q.row(0), yp, 0, 256, 16, s); }), "bad input: n 0 throws");
  check(throws_input([&] { cuda::gemv_act_mma(dw.view, d.q.row(0), yp, 17, 256, 16, s); }), "bad input: n 17 throws");
  check(throws_input([&] { cuda::gemv_act_mma(dw.view, k.q.row(0), yp, 1, 256, 16, s); }),
        "bad input: Q8_K activations for Q8_0 weights throw");
  check(throws_input([&] { cuda::gemv_act_mma(dw.view, d.q.row(0), yp, 2, 224, 16, s); }), "bad input: x_row < cols throws");
  check(throws_input([&] { cuda::gemv_act_mma(dw.view, d.q.row(0), yp, 2, 256, 8, s); }), "bad input: y_row < rows throws");
  // one row: y_row is never used, 0 is fine (the MTP head's step passes it; request 2's FATAL)
  cuda::gemv_act_mma(dw.view, d.q.row(0), yp, 1, 256, 0, s);
  cuda::DeviceBuffer y2(size_t(16) * 4, "test mma y2");
  cuda::gemv_act_mma(dw.view, d.q.row(0), y2.as<float>(), 1, 256, 16, s);
  check(download(yp, 16, s) == download(y2.as<float>(), 16, s), "one row with y_row 0 == with y_row 16");
}

}  // namespace

int main() {
  cudaStream_t s;
  DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::mt19937_64 rng(20261204);
  const Shape shapes[] = {
      {DType::Q8_0, 1024, 4096, "ds 4096->1024 (q_a, o_a group)"},
      {DType::Q8_0, 4096, 8192, "ds 8192->4096"},
      {DType::Q8_0, 32768, 1024, "ds 1024->32768"},
      {DType::IQ2_XXS, 2048, 4096, "ds expert gate|up"},
      {DType::IQ2_XXS, 4096, 2048, "expert down shape"},
      {DType::Q2_K, 4096, 2048, "ds expert down"},
      {DType::Q2_K, 2048, 4096, "expert gate|up shape"},
      {DType::Q8_0, 37, 96, "odd rows, 3 blocks (2-byte copy)"},
      {DType::Q8_0, 13, 320, "odd rows, last stage of 2 blocks"},
      {DType::Q8_0, 11, 32, "one block"},
      {DType::Q2_K, 21, 768, "odd rows, 3 blocks"},
      {DType::Q2_K, 9, 256, "one block"},
      {DType::IQ2_XXS, 19, 256, "one block (2-byte copy)"},
      {DType::IQ2_XXS, 27, 1536, "6 blocks"},
      {DType::IQ2_XXS, 45, 768, "3 blocks (2-byte copy)"},
      {DType::Q8_0, 4100, 4096, "rows 4100 (2 tiles, a partial tile)"},
  };
  for (const Shape& sh : shapes) check_shape(sh, rng, s);
  check_bad_input(rng, s);
  DS4_CUDA_CHECK(cudaStreamDestroy(s));
  return summary();
}
