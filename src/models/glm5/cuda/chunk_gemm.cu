// FP32 cuBLAS products of a tensor-core prefill chunk (chunk.cu, CudaModelOptions::fp32_gemms;
// compiled, not yet run on a GPU): the two parts of the chunk that the H200 profile of
// bench/results/cuda-glm5-prefill-h200-2026-12-04b found running as per-row decode kernels,
//   - the HC mixes (24 x hc*hidden F32, 15% of a 512-row chunk through 32 exact gemv_rows of
//     16 rows each): one SGEMM over all rows;
//   - the MLA attention (51%: every selected latent row dotted with all 64 heads' queries per
//     row): each token's selected latent rows gathered (mla_gather), then scores = G q^T and
//     o_lat = P G as two strided-batched SGEMMs over the tokens, the softmax between them.
// FP32 in and out with FP32 accumulation (CUBLAS_COMPUTE_32F, no TF32): only the summation
// order differs from the decode kernels, and neither product feeds a discrete choice.
#include <cublas_v2.h>

#include <algorithm>
#include <string>

#include "core/error.h"
#include "models/glm5/cuda/kernels.h"
#include "models/glm5/cuda/model_impl.h"

namespace ds4::glm5 {

namespace {

void check_cublas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("glm5 cuda chunk: ") + what + " failed: " + cublasGetStatusString(st));
}

// The matmul workspace's handle on the chunk's stream, with its fixed workspace.
cublasHandle_t chunk_handle(dc::MatmulWorkspace& mm, cudaStream_t s) {
  auto h = static_cast<cublasHandle_t>(mm.handle_);
  check_cublas(cublasSetStream(h, s), "cublasSetStream");
  check_cublas(cublasSetWorkspace(h, mm.cublas_ws_.get(), mm.cublas_ws_.bytes()), "cublasSetWorkspace");
  return h;
}

// Bytes of gathered latent rows one attention pass may hold (tokens are taken in groups).
constexpr size_t kGatherBytes = size_t(256) << 20;

}  // namespace

bool Glm5CudaModel::Impl::fp32_gemm_rows(const WeightMatrix& w, size_t x_off, size_t y_off) {
  if (!tc || !opt.fp32_gemms || w.type != DType::F32 || !mm) return false;
  // Row-major Y {rows, w.rows} = X {rows, cols} W^T; column-major: Y^T = W^T(op T of the
  // cols x w.rows view) X^T.
  const float one = 1.f, zero = 0.f;
  check_cublas(cublasGemmEx(chunk_handle(*mm, stream), CUBLAS_OP_T, CUBLAS_OP_N, int(w.rows), int(rows), int(w.cols),
                            &one, w.data, CUDA_R_32F, int(w.cols), R(0, x_off), CUDA_R_32F, int(rs()), &zero,
                            R(0, y_off), CUDA_R_32F, int(rs()), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx (F32)");
  return true;
}

bool Glm5CudaModel::Impl::mla_attend_gemm(const float* latent, const MlaShape& msh) {
  if (!tc || !opt.fp32_gemms || !mm) return false;
  const int64_t W = msh.width, L = msh.kv_lora, NH = msh.heads;
  const size_t per_token = size_t(W * L) * sizeof(float);
  const int64_t group = std::max<int64_t>(1, std::min<int64_t>(rows, int64_t(kGatherBytes / per_token)));
  if (attn_gather.bytes() < size_t(group) * per_token)  // first use (admission in DeviceBuffer)
    attn_gather = dc::DeviceBuffer(size_t(group) * per_token, "glm5 chunk attention gather");
  float* g = attn_gather.as<float>();
  cublasHandle_t h = chunk_handle(*mm, stream);
  const float zero = 0.f, one = 1.f;
  for (int64_t t0 = 0; t0 < rows; t0 += group) {
    const int64_t n = std::min(group, rows - t0);
    const Rows part{n, rs()};
    int32_t* sel_idx = reinterpret_cast<int32_t*>(R(t0, sl.sel_idx));
    int32_t* sel_count = reinterpret_cast<int32_t*>(R(t0, sl.sel_count));
    mla_gather(latent, sel_idx, sel_count, msh, g, stream, part);
    // scores_t {NH, W} (column-major W x NH) = G_t {W, L} q_t^T, times the scale.
    check_cublas(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(W), int(NH), int(L), &msh.scale, g,
                                            CUDA_R_32F, int(L), W * L, R(t0, sl.qlat), CUDA_R_32F, int(L), rs(), &zero,
                                            R(t0, sl.att_scores), CUDA_R_32F, int(W), rs(), int(n), CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx (scores)");
    mla_softmax(sel_count, msh, R(t0, sl.att_scores), stream, part);
    // o_lat_t {NH, L} (column-major L x NH) = G_t^T P_t^T: rows past the count have P = 0, G = 0.
    check_cublas(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, int(L), int(NH), int(W), &one, g, CUDA_R_32F,
                                            int(L), W * L, R(t0, sl.att_scores), CUDA_R_32F, int(W), rs(), &zero,
                                            R(t0, sl.olat), CUDA_R_32F, int(L), rs(), int(n), CUBLAS_COMPUTE_32F,
                                            CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx (output)");
  }
  return true;
}

}  // namespace ds4::glm5
