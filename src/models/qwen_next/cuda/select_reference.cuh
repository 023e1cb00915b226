#pragma once
// The QSA block-scores kernel the decode step used before issue #23's staging (one thread per
// pooled block, its serial dot over its own key row in global memory): the reference that
// test_qwen_decode_kernels_cuda compares qsa_select_scores with bit for bit, and that
// bench_qwen_decode_kernels times beside it. One row (pos_p[0]); launch ceil(nb / 128) x 128.
#include "models/qwen_next/cuda/kernels.h"

namespace ds4::qwen_next::cuda {

__global__ inline void select_scores_reference_kernel(const float* iqk, QsaCache c, QsaShape sh, const int32_t* pos_p,
                                                      float* scores) {
  const int64_t p = pos_p[0], D = sh.idx_dim, R = sh.idx_ratio, nb = (p + 1) / R;
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= nb) return;
  const float inv = rsqrtf(float(D));
  const float* kb = c.idx_pooled + b * D;
  float acc = 0.f;
  for (int64_t h = 0; h < sh.idx_heads; ++h) {
    float dot = 0.f;
    for (int64_t i = 0; i < D; ++i) dot += iqk[h * D + i] * kb[i];
    acc += fmaxf(dot, 0.f);
  }
  scores[b] = acc * inv;
}

}  // namespace ds4::qwen_next::cuda
