#pragma once
// One token of the gated delta rule for the S column a thread keeps in registers: shared by
// delta_rule_reg_kernel (delta_rule.cu) and the Qwen decode step's fused recurrent + gated norm
// (models/qwen_next/cuda/gdn.cu), which must stay bit for bit equal (the chunk runs the first,
// the decode step the second). qkd: {q, k, decay} of the token, KD floats each (shared memory).
namespace ds4::cuda::detail {

// st = st * decay + k * delta with delta = (v_j - (st * decay) . k) * beta; returns o_j = st . q.
template <int KD>
__device__ __forceinline__ float delta_rule_column(float (&st)[KD], const float* qkd, float vj, float bt) {
  const float* decay = qkd + 2 * KD;
  float mem = 0.f;
#pragma unroll
  for (int i = 0; i < KD; ++i) mem += (st[i] * decay[i]) * qkd[KD + i];
  const float delta = (vj - mem) * bt;
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < KD; ++i) {
    const float s = st[i] * decay[i] + qkd[KD + i] * delta;
    st[i] = s;
    acc += s * qkd[i];
  }
  return acc;
}

}  // namespace ds4::cuda::detail
