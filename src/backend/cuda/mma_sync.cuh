#pragma once
// The warp-level tensor-core and async-copy primitives that hand-written MMA kernels share
// (models/deepseek_v4/cuda attention_tc.cu, indexer_tc.cu; backend gemv_act_mma.cu,
// gemv_act_rows_mma.cu): one definition of each asm wrapper. Fragment layouts are PTX's for mma.sync.m16n8k8 (TF32): lane = 4 g + t, A holds
// (g, t) (g + 8, t) (g, t + 4) (g + 8, t + 4), B (k = t, n = g) (t + 4, g), C (g, 2t) (g, 2t + 1)
// (g + 8, 2t) (g + 8, 2t + 1).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace ds4::cuda::mma {

// FP32 -> TF32 bits, rounded to nearest (ties away), as the tensor cores then read them.
__device__ __forceinline__ uint32_t tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// x = hi + lo with hi = tf32(x), lo = tf32(x - hi): "3xTF32" products hi*hi + hi*lo + lo*hi
// keep ~22 bits of each operand (FP32-level products on tensor cores).
__device__ __forceinline__ void tf32_split(float x, uint32_t& hi, uint32_t& lo) {
  hi = tf32(x);
  lo = tf32(x - __uint_as_float(hi));
}

// c += a b, m16n8k8, TF32 operands, FP32 accumulate.
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c += a b, m16n8k16, FP16 operands, FP32 accumulate. Fragments: A (g, 2t..2t+1) (g + 8, 2t..)
// (g, 2t + 8..) (g + 8, 2t + 8..), B (k = 2t..2t+1, n = g) (k = 2t + 8.., g), C as m16n8k8's; a
// register holds two halves, the lower k (or column) in its low 16 bits.
__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c += a b, m16n8k16, BF16 operands, FP32 accumulate; fragments as mma_f16's.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as the halves of one fragment register (lo: the lower k), rounded to nearest even.
__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// The m16n8k16 A fragment of a 16 x 16 block of halves in shared memory: lane l passes the
// address of row (l % 16), column 8 (l / 16) of the block (rows 16-byte aligned).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row_addr) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(row_addr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// The A fragment of the 8 columns from k0 of a 16-row matrix in shared memory that holds TF32
// values already (row r at A + r * lda).
__device__ __forceinline__ void a_frag_tf32(const float* A, int64_t lda, int64_t k0, int g, int t, uint32_t (&a)[4]) {
  a[0] = __float_as_uint(A[g * lda + k0 + t]);
  a[1] = __float_as_uint(A[(g + 8) * lda + k0 + t]);
  a[2] = __float_as_uint(A[g * lda + k0 + t + 4]);
  a[3] = __float_as_uint(A[(g + 8) * lda + k0 + t + 4]);
}

// A flash-attention step's output update on a warp's share of O {16, 8 nts} (the W warps take
// the 8-column tiles w, w + W, ...; NT of them at most): O = O * corr + P V, corr {16} per row,
// P {16, K} the tile's weights (TF32 values, row stride p_ld), V {K rows, row stride v_ld} f32.
template <int NT, int W, int K>
__device__ __forceinline__ void flash_pv(float (&o)[NT][4], const float* P, int64_t p_ld, const float* V, int64_t v_ld,
                                         const float* corr, int warp, int nts, int g, int t) {
  const float c0 = corr[g], c1 = corr[g + 8];
#pragma unroll
  for (int i = 0; i < NT; ++i) {
    const int nt = warp + W * i;
    if (nt >= nts) break;
    o[i][0] *= c0, o[i][1] *= c0, o[i][2] *= c1, o[i][3] *= c1;
#pragma unroll
    for (int k0 = 0; k0 < K; k0 += 8) {
      uint32_t a[4];
      a_frag_tf32(P, p_ld, k0, g, t, a);
      mma_tf32(o[i], a, tf32(V[int64_t(k0 + t) * v_ld + 8 * nt + g]), tf32(V[int64_t(k0 + t + 4) * v_ld + 8 * nt + g]));
    }
  }
}

// c += a b, m16n8k32, int8 operands (s8 x s8), int32 accumulate: exact. Fragments as the TF32
// form with k doubled: A (g, 4t..4t+3) (g + 8, 4t..) (g, 16 + 4t..) (g + 8, 16 + 4t..), four
// int8 per register; B (k = 4t.., n = g) (k = 16 + 4t.., g).
__device__ __forceinline__ void mma_s8_k32(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// c += a b, m16n8k16, int8 operands, int32 accumulate.
__device__ __forceinline__ void mma_s8_k16(int (&c)[4], uint32_t a0, uint32_t a1, uint32_t b0) {
  asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

// A C fragment of 16 rows x 8 columns to y (row r at y + r * y_row): lane (g, t)'s values
// (g, 2t) (g, 2t + 1) (g + 8, 2t) (g + 8, 2t + 1) at columns col0 + 2t (+ 1); rows >= n and
// columns >= cols skipped (the GEMV kernels' input rows x weight rows).
__device__ __forceinline__ void store_c_rows(const float (&v)[4], int g, int t, int64_t col0, int n, int64_t cols,
                                             float* y, int64_t y_row) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = g + (i < 2 ? 0 : 8);
    const int64_t c = col0 + 2 * t + (i & 1);
    if (r < n && c < cols) y[r * y_row + c] = v[i];
  }
}

// Shared-memory reads of quantized blocks staged as they lie in global memory (Q8_0 / IQ2_XXS
// blocks are 34 / 66 bytes long, so half of them start 2 bytes off a word).
__device__ __forceinline__ uint32_t lds_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
__device__ __forceinline__ uint32_t lds_u32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }
// 8 bytes at a 2-byte aligned shared address: two word loads, or three and two byte permutes.
__device__ __forceinline__ uint2 lds_u64_2(const uint8_t* p) {
  if ((reinterpret_cast<uintptr_t>(p) & 2) == 0) return make_uint2(lds_u32(p), lds_u32(p + 4));
  const uint32_t a = lds_u32(p - 2), b = lds_u32(p + 2), c = lds_u32(p + 6);
  return make_uint2(__byte_perm(a, b, 0x5432), __byte_perm(b, c, 0x5432));
}

// kBytes (4, 8 or 16) global -> shared, asynchronously, through L1 (.ca).
template <int kBytes>
__device__ __forceinline__ void cp_async_ca(void* smem, const void* gmem) {
  const unsigned s = unsigned(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(s), "l"(gmem), "n"(kBytes) : "memory");
}

// 16 bytes global -> shared, bypassing L1; !valid writes zeros (padding rows must hold no NaN).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const uint32_t d = uint32_t(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Wait until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// A double-buffered tile loop's step j of `tiles`: request tile j + 1 (load(j + 1) commits its
// group), then wait until tile j has landed (this thread's copies: a barrier must follow).
template <class Load>
__device__ __forceinline__ void cp_next_tile(int j, int tiles, Load&& load) {
  if (j + 1 < tiles) {
    load(j + 1);
    cp_wait<1>();
  } else {
    cp_wait<0>();
  }
}

// f(row, col, value) for every element of a warp's m16n8 FP32 accumulator tiles o[i] (i < kNt:
// the warp's n-tiles nt = warp + warps * i < nts, columns 8 nt ..): rows g, g + 8 and columns
// 2 t, 2 t + 1 of each (the fragment layout). The attention kernels store their O tiles through it.
template <int kNt, class F>
__device__ __forceinline__ void for_each_acc(const float (&o)[kNt][4], int warp, int warps, int nts, int g, int t,
                                             F&& f) {
#pragma unroll
  for (int i = 0; i < kNt; ++i) {
    const int nt = warp + warps * i;
    if (nt >= nts) break;
#pragma unroll
    for (int k = 0; k < 4; ++k) f(g + (k < 2 ? 0 : 8), 8 * nt + 2 * t + (k & 1), o[i][k]);
  }
}

}  // namespace ds4::cuda::mma
