// mla_attend's weighted sum (models/glm5/cuda/mla.cu mla_output: each token's selection in
// fixed spans, one block of a thread block cluster each, the spans' sums added in span order) at
// every span count (mla_output_set_segments 1, 2, 4, 8), on random latent rows and selections
// (ascending positions; counts 1, one span's worth, a span and one, the width, random ones):
//  - every o_lat within 2e-5 of a double-precision sum of the same probabilities (the kernel's
//    scores / softmax left in `scores`; a wrong, missing or doubled row moves an output by
//    ~5e-4 and more at width 2051);
//  - the same sums emulated on the host in the kernel's order (fma per span, spans in order), bit
//    for bit: with 1 span, the one-block kernel of before;
//  - each token launched alone (a decode step) equals its row of the many-row launch bit for bit
//    (decode, chunks and batches must agree);
//  - 9000 rows of a tiny shape: the launch split at 65535 / segments rows (grid.z) loses no row.
// Shapes: GLM 5.x Flash's (64 heads x 512, width 2051), one with heads not a multiple of 8 and
// kv_lora not a multiple of 32 (12 x 80, width 300).
// Usage: test_glm5_mla_output_cuda   (exit 1 when a check fails)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "glm5_mla_inputs.h"
#include "models/glm5/cuda/kernels.h"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;
namespace gc = ds4::glm5::cuda;

namespace {

template <class T>
std::vector<T> host(const T* p, size_t n) {
  std::vector<T> v(n);
  DS4_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

void output_case(const char* name, int64_t heads, int64_t kv_lora, int64_t width, int64_t ctx, int64_t rows, bool alone,
                 std::mt19937_64& rng) {
  std::vector<cuda::DeviceBuffer> bufs;
  // counts: 1, a span of 8 (the 128-row groups of width / 8 rounded up), one more, the width, random
  const int64_t span8 = ((width + 7) / 8 + 127) / 128 * 128;
  const MlaInputs in = mla_inputs(heads, kv_lora, width, ctx, rows, {1, span8, span8 + 1, width}, rng, bufs);
  const gc::MlaShape& sh = in.sh;
  const int64_t rs = in.stride;
  const std::vector<float>& latent = in.latent;
  const std::vector<int32_t>&sel = in.sel, &count = in.count;
  const float *dl = in.d_latent, *dq = in.d_q;
  const int32_t *ds = in.d_sel, *dc = in.d_count;
  float* scores = to_device(std::vector<float>(size_t(rows * rs)), bufs);
  float* o = to_device(std::vector<float>(size_t(rows * rs), NAN), bufs);
  float* o1 = to_device(std::vector<float>(size_t(rs), NAN), bufs);
  const gc::Rows all{rows, rs};
  const int keep = gc::mla_output_segments();
  std::vector<double> want;  // the double sums of the first run's probabilities (the same every run)
  for (int segments : {1, 2, 4, 8}) {
    gc::mla_output_set_segments(segments);
    gc::mla_attend(dq, dl, ds, dc, sh, scores, o, nullptr, all);
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got = host(o, size_t(rows * rs));
    if (want.empty()) {
      const std::vector<float> p = host(scores, size_t(rows * rs));
      want.assign(size_t(rows * heads * kv_lora), 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = 0; t < count[size_t(r * rs)]; ++t) {
          const float* row = latent.data() + int64_t(sel[size_t(r * rs + t)]) * kv_lora;
          for (int64_t h = 0; h < heads; ++h) {
            const double w = p[size_t(r * rs + h * width + t)];
            double* acc = want.data() + (r * heads + h) * kv_lora;
            for (int64_t i = 0; i < kv_lora; ++i) acc[i] += w * double(row[i]);
          }
        }
    }
    double worst = 0;
    bool finite = true;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < heads * kv_lora; ++i) {
        const float y = got[size_t(r * rs + i)];
        finite = finite && std::isfinite(y);
        worst = std::max(worst, std::fabs(double(y) - want[size_t(r * heads * kv_lora + i)]));
      }
    const std::string what =
        std::string(name) + ", " + std::to_string(segments) + " span(s), " + std::to_string(rows) + " rows";
    check(finite && worst < 2e-5,
          what + ": vs a double sum, max |diff| " + std::to_string(worst) + (finite ? "" : ", NOT finite"));
    {  // the kernel's exact order on the host: fma over each span's rows in order (the kernel's
       // acc += w * x is one FFMA: its SASS has no FMUL), then the spans' sums from the first
       // in span order (1 span: the one-block kernel of before, whose sum this is)
      const int64_t span = ((width + segments - 1) / segments + 127) / 128 * 128;
      const std::vector<float> p = host(scores, size_t(rows * rs));
      int64_t exact = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t n = count[size_t(r * rs)];
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t i = 0; i < kv_lora; ++i) {
            float sum = 0.f;
            for (int sg = 0; sg < segments; ++sg) {
              float acc = 0.f;
              for (int64_t t = sg * span; t < std::min(n, (sg + 1) * span); ++t)
                acc = std::fma(p[size_t(r * rs + h * width + t)],
                               latent[size_t(int64_t(sel[size_t(r * rs + t)]) * kv_lora + i)], acc);
              sum = sg == 0 ? acc : sum + acc;
            }
            exact += std::memcmp(&sum, &got[size_t(r * rs + h * kv_lora + i)], 4) == 0;
          }
      }
      check(exact == rows * heads * kv_lora, what + ": the span order emulated on the host, bit for bit in " +
                                                 std::to_string(exact) + " of " +
                                                 std::to_string(rows * heads * kv_lora) + " outputs");
    }
    if (!alone) continue;
    int64_t same = 0;
    for (int64_t r = 0; r < rows; ++r) {  // each token as a decode step (one row, its own pointers)
      gc::mla_attend(dq + r * rs, dl, ds + r * rs, dc + r * rs, sh, scores + r * rs, o1, nullptr, gc::Rows{1, rs});
      DS4_CUDA_CHECK(cudaDeviceSynchronize());
      const std::vector<float> one = host(o1, size_t(heads * kv_lora));
      same += std::memcmp(one.data(), got.data() + r * rs, one.size() * 4) == 0;
    }
    check(same == rows, what + ": one-row launches equal the many-row launch bit for bit in " + std::to_string(same) +
                            " of " + std::to_string(rows) + " rows");
  }
  gc::mla_output_set_segments(keep);
}

}  // namespace

int main() {
  std::mt19937_64 rng(31);
  output_case("GLM 5.x Flash (64 heads x 512)", 64, 512, 2048 + 3, 6000, 10, true, rng);
  output_case("12 heads x 80", 12, 80, 300, 700, 24, true, rng);
  output_case("2 heads x 32, rows past one launch's grid", 2, 32, 6, 40, 9000, false, rng);
  bool threw = false;
  try {
    gc::mla_output_set_segments(3);
  } catch (const InputError&) {
    threw = true;
  }
  check(threw, "mla_output_set_segments(3) is refused");
  std::printf("%s\n", g_fail ? "FAILED" : "ALL PASSED");
  return g_fail ? 1 : 0;
}
