#pragma once
// One token of the gated delta rule for the S column a thread keeps in registers: shared by
// delta_rule_reg_kernel (decode steps, verify windows) and delta_rule_staged_kernel (prefill
// chunks) in delta_rule.cu, which must stay bit for bit equal (a chunk's rows = its tokens'
// single steps). qkd: {q, k, decay} of the token, KD floats each (shared memory).
namespace ds4::cuda::detail {

// The sum of v over the P lanes of a column (consecutive lanes, P a power of two <= 32): a
// butterfly of exact adds; every lane ends with the same bits (each add is commutative, and
// lane p's tree is lane 0's with its operands swapped).
template <int P>
__device__ __forceinline__ float part_sum(float v) {
#pragma unroll
  for (int o = 1; o < P; o <<= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// st = st * decay + k * delta with delta = (v_j - (st * decay) . k) * beta; returns o_j = st . q.
// The column's KD rows are split over P lanes: lane part p keeps rows i = p + P r (r < KD / P)
// in st, sums its share of each dot in row order, and part_sum adds the P shares (P = 1: the
// plain row-order sums). Every lane of a column returns o_j and holds the same delta. Every
// rounding is spelled out (the __f*_rn intrinsics are never contracted or reordered): left to
// the compiler, `a * b + c * d` became a different FMA in the staged prefill kernel than in the
// register kernel (session 24 call 3: the rows no longer equal the single steps).
// All 32 lanes of the warp must call it (the shuffles): lanes of columns past v_dim too.
template <int KD, int P>
__device__ __forceinline__ float delta_rule_column(float (&st)[KD / P], const float* qkd, float vj, float bt, int p) {
  const float* decay = qkd + 2 * KD;
  float mem = 0.f;
#pragma unroll
  for (int r = 0; r < KD / P; ++r) {
    const int i = p + P * r;
    mem = __fmaf_rn(__fmul_rn(st[r], decay[i]), qkd[KD + i], mem);
  }
  mem = part_sum<P>(mem);
  const float delta = __fmul_rn(__fsub_rn(vj, mem), bt);
  float acc = 0.f;
#pragma unroll
  for (int r = 0; r < KD / P; ++r) {
    const int i = p + P * r;
    const float s = __fmaf_rn(qkd[KD + i], delta, __fmul_rn(st[r], decay[i]));
    st[r] = s;
    acc = __fmaf_rn(s, qkd[i], acc);
  }
  return part_sum<P>(acc);
}

// A lane's rows of column j of S {KD, vd} loaded from / written to src / dst (the state, or a
// per-row record).
template <int KD, int P>
__device__ __forceinline__ void load_column(float (&st)[KD / P], const float* src, int64_t vd, int64_t j, int p) {
#pragma unroll
  for (int r = 0; r < KD / P; ++r) st[r] = src[(p + P * r) * vd + j];
}
template <int KD, int P>
__device__ __forceinline__ void store_column(const float (&st)[KD / P], float* dst, int64_t vd, int64_t j, int p) {
#pragma unroll
  for (int r = 0; r < KD / P; ++r) dst[(p + P * r) * vd + j] = st[r];
}

}  // namespace ds4::cuda::detail
