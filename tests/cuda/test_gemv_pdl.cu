// gemv, gemv_batched and gemv_rows launched as programmatic dependents (gemv_pdl, sm_90 PDL) read their
// input only after griddepcontrol.wait. The kernel before them lets them start at once
// (griddepcontrol.launch_dependents first), spins for kSpinNs, then writes x and the expert
// ids; every output must equal (memcmp) the same gemv launched plainly after that kernel.
// A load of x or of the ids issued before the wait -- written so, or moved above it by ptxas,
// which may schedule a read-only (ld.global.nc, __ldg) load above a griddepcontrol.wait (it
// did in the Qwen kernels' PDL attempt, whose wait sat conditionally inside the loop:
// bench/results/qwen-decode-h200-2026-12-04g) -- reads the stale input and fails. Every format,
// gemv kernels 1, 2 and 3. Each case first checks that the stale input gives another output,
// so a pass means the written input was read.
// Usage: test_gemv_pdl   (exit 1 when a check fails; well under a second on the H200)
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/memory.h"
#include "device_weight.h"
#include "host_ref.h"
#include "late_writer.cuh"
#include "test_common.h"

using namespace ds4;
using namespace ds4::cuda_test;

namespace {

constexpr unsigned long long kSpinNs = 50'000;  // far longer than a gemv block's first weight loads

std::vector<float> download(const float* p, size_t n) {
  std::vector<float> v(n);
  DS4_CUDA_CHECK(cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Case {
  DType type, scale_type;
};

// One weight of E * R rows seen as E experts of R rows (gemv_batched), or as one matrix.
void run_case(const Case& cs, int kernel, std::mt19937_64& rng, cudaStream_t s) {
  constexpr int64_t E = 4, R = 64, cols = 2048, count = 3;
  const HostWeight hw = random_weight(cs.type, E * R, cols, rng, 64, cs.scale_type);
  const DeviceWeight dw = upload(hw);
  WeightMatrix w = dw.view;
  const size_t id_stride = size_t(R) * size_t(w.row_stride_bytes());
  const size_t id_scale_stride = hw.scales.empty() ? 0 : hw.scales.size() / size_t(E);
  std::normal_distribution<float> nd(0.f, 1.f);
  const int64_t xn = count * cols;
  std::vector<float> x_new(static_cast<size_t>(xn)), x_stale(static_cast<size_t>(xn));
  for (auto& v : x_new) v = nd(rng);
  for (auto& v : x_stale) v = nd(rng);
  const std::vector<int32_t> ids_new = {3, 0, 2}, ids_stale = {1, 2, 0};
  cuda::DeviceBuffer src(size_t(xn) * 4, "x written late"), x(size_t(xn) * 4, "x"),
      ids_src(size_t(count) * 4, "ids written late"), ids(size_t(count) * 4, "ids"),
      y(size_t(count * E * R) * 4, "y");
  DS4_CUDA_CHECK(cudaMemcpy(src.get(), x_new.data(), size_t(xn) * 4, cudaMemcpyHostToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(ids_src.get(), ids_new.data(), size_t(count) * 4, cudaMemcpyHostToDevice));
  cuda::gemv_set_kernel(kernel);
  const std::string name = std::string(dtype_name(cs.type)) + " gemv kernel " + std::to_string(kernel);

  // form 0: gemv over all E * R rows; form 1: gemv_batched, `count` entries by device ids;
  // form 2: gemv_rows over all E * R rows for the `count` input rows (one entry: a PDL launch).
  for (int form = 0; form < 3; ++form) {
    const size_t ny = form == 0 ? size_t(E * R) : form == 1 ? size_t(count * R) : size_t(count * E * R);
    auto reset = [&] {  // the stale input, and y poisoned
      DS4_CUDA_CHECK(cudaMemcpy(x.get(), x_stale.data(), size_t(xn) * 4, cudaMemcpyHostToDevice));
      DS4_CUDA_CHECK(cudaMemcpy(ids.get(), ids_stale.data(), size_t(count) * 4, cudaMemcpyHostToDevice));
      DS4_CUDA_CHECK(cudaMemset(y.get(), 0xff, size_t(count * E * R) * 4));
    };
    cuda::GemvOptions direct;  // the PDL kernel (kAuto may stage under kernel 1: a plain launch)
    direct.path = cuda::GemvPath::kDirect;
    auto product = [&] {
      if (form == 0) {
        cuda::gemv(w, x.as<float>(), y.as<float>(), s, direct);
      } else if (form == 2) {
        cuda::GemvRows r;
        r.n = int(count), r.x_row = cols, r.y_row = E * R;
        cuda::gemv_rows(w, x.as<float>(), y.as<float>(), r, s);
      } else {
        WeightMatrix e = w;
        e.rows = R;
        cuda::gemv_batched(e, x.as<float>(), y.as<float>(),
                           cuda::GemvBatch{int(count), ids.as<int32_t>(), id_stride, id_scale_stride, cols, R}, s,
                           direct);
      }
    };
    auto run = [&](bool pdl, bool write) {
      reset();
      cuda::gemv_set_pdl(pdl);
      if (write) {
        late_writer<<<1, 256, 0, s>>>(src.as<float>(), x.as<float>(), xn, ids_src.as<int32_t>(), ids.as<int32_t>(),
                                      int(count), kSpinNs);
        DS4_CUDA_CHECK_LAUNCH();
      }
      product();
      DS4_CUDA_CHECK(cudaStreamSynchronize(s));
      return download(y.as<float>(), ny);
    };
    const auto stale = run(false, false), ref = run(false, true), got = run(true, true);
    const std::string what =
        name + (form == 0 ? ", gemv" : form == 1 ? ", gemv_batched by device ids" : ", gemv_rows of 3 input rows");
    check(!same(stale, ref), what + ": the stale input gives another output (the check can fail)");
    check(same(got, ref), what + ": PDL launch after a late writer = plain launch (memcmp)");
  }
}

}  // namespace

int main() {
  std::mt19937_64 rng(4242);
  cudaStream_t s;
  DS4_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const int default_kernel = cuda::gemv_kernel();
  const bool default_pdl = cuda::gemv_pdl();
  const Case cases[] = {
      {DType::F32, DType::F16},    {DType::BF16, DType::F16},  {DType::F16, DType::F16},
      {DType::Q8_0, DType::F16},   {DType::Q4_K, DType::F16},  {DType::Q2_K, DType::F16},
      {DType::IQ2_XXS, DType::F16}, {DType::MLX_Q4, DType::BF16}, {DType::MLX_Q8, DType::F16},
  };
  for (int kernel : {1, 2, 3})
    for (const Case& cs : cases) run_case(cs, kernel, rng, s);
  cuda::gemv_set_kernel(default_kernel);
  cuda::gemv_set_pdl(default_pdl);
  DS4_CUDA_CHECK(cudaStreamDestroy(s));
  return summary();
}
