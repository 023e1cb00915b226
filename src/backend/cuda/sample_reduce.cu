// Sampling candidates: one block of 1024 threads per row. The top-k is found by an exact
// radix select on an order-preserving 32-bit key of the float (4 histogram passes of 8 bits),
// then the keys above the threshold and the ties at it are gathered and bitonic-sorted on
// (key, -id), so the ties at the cut go lowest id first. One block suffices: each pass reads
// the row (151k floats = 600 KB, from L2 after the lm_head gemv wrote it) with 16-byte loads,
// four in flight per thread; several blocks would need a second kernel or a grid-wide sync
// inside the captured step graph.
#include <climits>
#include <cmath>
#include <cstdint>

#include "backend/cuda/check.h"
#include "backend/cuda/sample_reduce.h"

namespace ds4::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr int kSortCap = 2 * kSampleReduceMaxK;  // gathered keys sorted at once (16 KiB)

// Larger float -> larger key; -0 and +0 give the same key (the CPU's '>' has them equal, so
// they tie and order by id). Only finite values are keyed: every finite key is >= 0x00800000,
// so 0 sorts below all of them (sort padding).
__device__ __forceinline__ uint32_t order_key(float v) {
  uint32_t u = __float_as_uint(v);
  if ((u << 1) == 0) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// (key, id) -> one sortable word: larger key first, then lower id first.
__device__ __forceinline__ unsigned long long pack(uint32_t key, int i) {
  return (static_cast<unsigned long long>(key) << 32) | (0xffffffffu - uint32_t(i));
}

// (v, i) beats (bv, bi) in ds4's argmax: larger value, equal value lower id; i < 0 = none.
__device__ __forceinline__ bool beats(float v, int i, float bv, int bi) {
  return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi));
}

// f(value, id) over the whole row, each thread seeing its ids in increasing order.
template <class F>
__device__ __forceinline__ void scan_row(const float* __restrict__ row, int vocab, F&& f) {
  int done = 0;
  if ((reinterpret_cast<uintptr_t>(row) & 15u) == 0) {
    const float4* r4 = reinterpret_cast<const float4*>(row);
    const int n4 = vocab / 4;
    constexpr int U = 4;
    for (int base = 0; base < n4; base += U * kThreads) {
      float4 v[U];
#pragma unroll
      for (int q = 0; q < U; ++q) {
        const int j = base + q * kThreads + int(threadIdx.x);
        if (j < n4) v[q] = __ldg(r4 + j);
      }
#pragma unroll
      for (int q = 0; q < U; ++q) {
        const int j = base + q * kThreads + int(threadIdx.x);
        if (j < n4) f(v[q].x, 4 * j), f(v[q].y, 4 * j + 1), f(v[q].z, 4 * j + 2), f(v[q].w, 4 * j + 3);
      }
    }
    done = n4 * 4;
  }
  for (int i = done + int(threadIdx.x); i < vocab; i += kThreads) f(row[i], i);
}

// Block b reduces row b: rows at row_stride floats apart, results at sample_reduce_words(k)
// words apart, temperature b (when given).
__global__ void __launch_bounds__(kThreads) sample_reduce_kernel(const float* __restrict__ row, size_t row_stride,
                                                                  int vocab, int k, const double* temperature,
                                                                  int32_t* __restrict__ out) {
  row += size_t(blockIdx.x) * row_stride;
  out += size_t(blockIdx.x) * (kSampleReduceHeader + 2 * size_t(k));
  if (temperature) temperature += blockIdx.x;
  __shared__ unsigned hist[256];
  __shared__ unsigned long long sel[kSortCap];
  __shared__ float w_v[kWarps];
  __shared__ int w_i[kWarps], w_n[kWarps];
  __shared__ double w_d[kWarps];
  __shared__ uint32_t s_prefix;
  __shared__ int s_need, s_target, s_gt, s_eq_total, s_argmax, s_finite;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  // Pass 1: argmax, finite count, histogram of the keys' top byte.
  if (tid < 256) hist[tid] = 0;
  __syncthreads();
  float bv = -INFINITY;
  int bi = -1, nf = 0;
  scan_row(row, vocab, [&](float v, int i) {
    if (v > bv) bv = v, bi = i;  // a thread's ids rise: strict '>' keeps the lowest
    if (isfinite(v)) {
      nf++;
      atomicAdd(&hist[order_key(v) >> 24], 1u);
    }
  });
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    nf += __shfl_xor_sync(0xffffffffu, nf, o);
    if (beats(ov, oi, bv, bi)) bv = ov, bi = oi;
  }
  if (lane == 0) w_v[warp] = bv, w_i[warp] = bi, w_n[warp] = nf;
  __syncthreads();
  if (tid == 0) {
    float v = w_v[0];
    int i = w_i[0], n = w_n[0];
    for (int w = 1; w < kWarps; ++w) {
      n += w_n[w];
      if (beats(w_v[w], w_i[w], v, i)) v = w_v[w], i = w_i[w];
    }
    out[0] = s_argmax = i < 0 ? 0 : i;
    s_finite = n;
    out[1] = min(k, n);
    out[2] = n;
    out[3] = k;
    *reinterpret_cast<double*>(out + 4) = NAN;
    s_target = min(k, n);
    s_need = s_target;  // still to take at or below the prefix found so far
    s_prefix = 0;
    s_gt = 0;
  }
  __syncthreads();
  const int target = s_target;
  if (target == 0) return;

  // MTPLX's normaliser (all-finite rows only; it rejects others): terms as mtplx_distribution.
  const double t = temperature ? *temperature : 0.0;
  if (t > 0 && s_finite == vocab) {
    const double mx = double(row[s_argmax]) / t;  // max of l / T: division keeps the order
    double sum = 0;
    scan_row(row, vocab, [&](float v, int) { sum += exp(double(v) / t - mx); });
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) w_d[warp] = sum;
    __syncthreads();
    if (tid == 0) {
      double total = 0;
      for (int w = 0; w < kWarps; ++w) total += w_d[w];
      *reinterpret_cast<double*>(out + 4) = total;
    }
  }

  // Radix select: the key of the target-th largest value, byte by byte from the top.
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (shift < 24) {
      if (tid < 256) hist[tid] = 0;
      __syncthreads();
      const uint32_t want = s_prefix >> (shift + 8);
      scan_row(row, vocab, [&](float v, int) {
        if (!isfinite(v)) return;
        const uint32_t key = order_key(v);
        if ((key >> (shift + 8)) == want) atomicAdd(&hist[(key >> shift) & 255u], 1u);
      });
      __syncthreads();
    }
    if (tid == 0) {
      int need = s_need;
      for (int b = 255; b >= 0; --b) {
        const int c = int(hist[b]);
        if (c >= need) {
          s_prefix |= uint32_t(b) << shift;
          if (shift == 0) s_eq_total = c;  // values whose key is exactly the threshold
          break;
        }
        need -= c;
      }
      s_need = need;
    }
    __syncthreads();
  }
  const uint32_t thr = s_prefix;
  const int need_eq = s_need;          // ties at the threshold to take, lowest ids first
  const int n_gt = target - need_eq;   // values above it: all taken
  const bool all_ties = n_gt + s_eq_total <= kSortCap;
  int sorted = target;
  if (all_ties) {
    // Gather every key >= thr; the sort puts the lowest-id ties first, the cut keeps target.
    scan_row(row, vocab, [&](float v, int i) {
      if (!isfinite(v)) return;
      const uint32_t key = order_key(v);
      if (key >= thr) sel[atomicAdd(&s_gt, 1)] = pack(key, i);
    });
    sorted = n_gt + s_eq_total;
  } else {
    // Many ties (e.g. a flat row): the ones above into [0, n_gt), then the first need_eq ties
    // in id order, each thread owning one contiguous id range, ranked by a block scan.
    scan_row(row, vocab, [&](float v, int i) {
      if (isfinite(v) && order_key(v) > thr) sel[atomicAdd(&s_gt, 1)] = pack(order_key(v), i);
    });
    const int len = (vocab + kThreads - 1) / kThreads, lo = min(vocab, tid * len), hi = min(vocab, lo + len);
    int cnt = 0;
    for (int i = lo; i < hi; ++i) cnt += isfinite(row[i]) && order_key(row[i]) == thr;
    int incl = cnt;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int x = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += x;
    }
    __syncthreads();  // w_n is free again
    if (lane == 31) w_n[warp] = incl;
    __syncthreads();
    int rank = incl - cnt;
    for (int w = 0; w < warp; ++w) rank += w_n[w];
    for (int i = lo; i < hi && rank < need_eq; ++i)
      if (isfinite(row[i]) && order_key(row[i]) == thr) sel[n_gt + rank++] = pack(thr, i);
  }
  __syncthreads();

  // Bitonic sort, descending, of the gathered keys padded with 0 to a power of two.
  int p2 = 1;
  while (p2 < sorted) p2 <<= 1;
  for (int i = sorted + tid; i < p2; i += kThreads) sel[i] = 0;
  __syncthreads();
  for (int size = 2; size <= p2; size <<= 1) {
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = tid; i < p2; i += kThreads) {
        const int j = i ^ stride;
        if (j > i) {
          const unsigned long long a = sel[i], b = sel[j];
          const bool desc = (i & size) == 0;
          if ((a < b) == desc) sel[i] = b, sel[j] = a;
        }
      }
      __syncthreads();
    }
  }
  for (int r = tid; r < target; r += kThreads) {
    const int id = int(0xffffffffu - uint32_t(sel[r] & 0xffffffffull));
    out[kSampleReduceHeader + r] = id;
    out[kSampleReduceHeader + k + r] = __float_as_int(row[id]);
  }
}

}  // namespace

void sample_reduce_f32(const float* row, int64_t vocab, int k, const double* temperature, int32_t* out,
                       cudaStream_t stream) {
  sample_reduce_f32_rows(row, size_t(vocab), 1, vocab, k, temperature, out, stream);
}

void sample_reduce_f32_rows(const float* rows, size_t row_stride, int64_t n, int64_t vocab, int k,
                            const double* temperatures, int32_t* out, cudaStream_t stream) {
  if (k < 1 || k > kSampleReduceMaxK) throw Error("sample_reduce_f32: k = " + std::to_string(k) + " outside [1, 1024]");
  if (vocab < 1 || vocab > INT_MAX) throw Error("sample_reduce_f32: vocab = " + std::to_string(vocab));
  if (n < 1 || n > INT_MAX) throw Error("sample_reduce_f32_rows: n = " + std::to_string(n));
  if (row_stride < size_t(vocab))
    throw Error("sample_reduce_f32_rows: row stride " + std::to_string(row_stride) + " < vocab " + std::to_string(vocab));
  sample_reduce_kernel<<<unsigned(n), kThreads, 0, stream>>>(rows, row_stride, int(vocab), k, temperatures, out);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
