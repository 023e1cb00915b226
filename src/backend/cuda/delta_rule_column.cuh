#pragma once
// One token of the gated delta rule for the S column a thread keeps in registers: shared by
// delta_rule_reg_kernel (decode steps, verify windows) and delta_rule_staged_kernel (prefill
// chunks) in delta_rule.cu, which must stay bit for bit equal (a chunk's rows = its tokens'
// single steps). The token's q, k and decay sit in shared memory in ColumnLayout's padded form.
namespace ds4::cuda::detail {

// A column's KD rows split over P lanes: lane part p keeps rows [p R, p R + R), R = KD / P, in
// order, so its share of q, k and decay is R consecutive floats, read as float4. In shared memory
// each vector (q, k, decay: kVec floats each, in that order) stores part p's rows at p * kPartStride:
// the 4 padding floats put the P parts' float4 reads of one step on distinct banks (one wavefront
// for a warp of 8 columns x 4 parts), where 4 scalar reads per row of each dot issued 4x the
// shared-memory instructions and bounded the prefill kernel (session 29).
template <int KD, int P>
struct ColumnLayout {
  static_assert(KD % P == 0 && (KD / P) % 4 == 0, "whole float4 rows per lane part");
  static constexpr int R = KD / P;
  static constexpr int kPartStride = R + 4;
  static constexpr int kVec = P * kPartStride;  // floats of one staged vector
  __host__ __device__ static constexpr int at(int i) { return (i / R) * kPartStride + i % R; }
};

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
// Lane part p sums its R rows of each dot in row order, and part_sum adds the P shares (P = 1:
// the plain row-order sums; P > 1: the CPU model's delta_rule_head within rounding). Every lane
// of a column returns o_j and holds the same delta. Every rounding is spelled out (the __f*_rn
// intrinsics are never contracted or reordered): left to the compiler, `a * b + c * d` became a
// different FMA in the staged prefill kernel than in the register kernel (session 24 call 3: the
// rows no longer equal the single steps). For R <= 32, st * decay is rounded once and kept for
// the second dot (the same bits as computing it again, which R = 128 does: 2 x 128 registers
// would spill). qkd: ColumnLayout<KD, P>'s {q, k, decay}, 16-byte aligned.
// All 32 lanes of the warp must call it (the shuffles): lanes of columns past v_dim too.
template <int KD, int P>
__device__ __forceinline__ float delta_rule_column(float (&st)[KD / P], const float* qkd, float vj, float bt, int p) {
  using L = ColumnLayout<KD, P>;
  const float4* q4 = reinterpret_cast<const float4*>(qkd + p * L::kPartStride);
  const float4* k4 = reinterpret_cast<const float4*>(qkd + L::kVec + p * L::kPartStride);
  const float4* d4 = reinterpret_cast<const float4*>(qkd + 2 * L::kVec + p * L::kPartStride);
  constexpr bool kKeep = L::R <= 32;
  float sd[kKeep ? L::R : 1];  // st * decay, rounded (kept from the first dot for R <= 32)
  float mem = 0.f;
#pragma unroll
  for (int r = 0; r < L::R; r += 4) {
    const float4 d = d4[r / 4], k = k4[r / 4];
    const float s0 = __fmul_rn(st[r], d.x), s1 = __fmul_rn(st[r + 1], d.y);
    const float s2 = __fmul_rn(st[r + 2], d.z), s3 = __fmul_rn(st[r + 3], d.w);
    mem = __fmaf_rn(s0, k.x, mem);
    mem = __fmaf_rn(s1, k.y, mem);
    mem = __fmaf_rn(s2, k.z, mem);
    mem = __fmaf_rn(s3, k.w, mem);
    if constexpr (kKeep) sd[r] = s0, sd[r + 1] = s1, sd[r + 2] = s2, sd[r + 3] = s3;
  }
  mem = part_sum<P>(mem);
  const float delta = __fmul_rn(__fsub_rn(vj, mem), bt);
  float acc = 0.f;
#pragma unroll
  for (int r = 0; r < L::R; r += 4) {
    const float4 k = k4[r / 4], q = q4[r / 4];
    float s0, s1, s2, s3;
    if constexpr (kKeep) {
      s0 = sd[r], s1 = sd[r + 1], s2 = sd[r + 2], s3 = sd[r + 3];
    } else {
      const float4 d = d4[r / 4];
      s0 = __fmul_rn(st[r], d.x), s1 = __fmul_rn(st[r + 1], d.y);
      s2 = __fmul_rn(st[r + 2], d.z), s3 = __fmul_rn(st[r + 3], d.w);
    }
    st[r] = __fmaf_rn(k.x, delta, s0), acc = __fmaf_rn(st[r], q.x, acc);
    st[r + 1] = __fmaf_rn(k.y, delta, s1), acc = __fmaf_rn(st[r + 1], q.y, acc);
    st[r + 2] = __fmaf_rn(k.z, delta, s2), acc = __fmaf_rn(st[r + 2], q.z, acc);
    st[r + 3] = __fmaf_rn(k.w, delta, s3), acc = __fmaf_rn(st[r + 3], q.w, acc);
  }
  return part_sum<P>(acc);
}

// A lane's rows of column j of S {KD, vd} loaded from / written to src / dst (the state, or a
// per-row record).
template <int KD, int P>
__device__ __forceinline__ void load_column(float (&st)[KD / P], const float* src, int64_t vd, int64_t j, int p) {
#pragma unroll
  for (int r = 0; r < KD / P; ++r) st[r] = src[(p * (KD / P) + r) * vd + j];
}
template <int KD, int P>
__device__ __forceinline__ void store_column(const float (&st)[KD / P], float* dst, int64_t vd, int64_t j, int p) {
#pragma unroll
  for (int r = 0; r < KD / P; ++r) dst[(p * (KD / P) + r) * vd + j] = st[r];
}

}  // namespace ds4::cuda::detail
