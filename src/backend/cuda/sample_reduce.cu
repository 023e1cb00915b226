// Sampling candidates: one block of 1024 threads per row. The top-k is found by an exact
// radix select on an order-preserving 32-bit key of the float (4 histogram passes of 8 bits),
// then the keys above the threshold are gathered and the ties at it taken lowest id first
// (an ordered scan), and the <= 1024 winners are bitonic-sorted on (key, -id). One block is
// plenty: the row is read 5 times from L2 (151k floats = 600 KB), tens of microseconds,
// next to a decode step of milliseconds; several blocks would need a second kernel or
// grid-wide sync inside the captured graph.
#include <climits>
#include <cmath>

#include "backend/cuda/check.h"
#include "backend/cuda/sample_reduce.h"

namespace ds4::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

// Larger float -> larger key; -0 and +0 give the same key (the CPU's '>' has them equal, so
// they tie and order by id). Only finite values are keyed: every finite key is >= 0x00800000,
// so 0 sorts below all of them (sort padding).
__device__ __forceinline__ uint32_t order_key(float v) {
  uint32_t u = __float_as_uint(v);
  if ((u << 1) == 0) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// (v, i) beats (bv, bi) in ds4's argmax: larger value, equal value lower id; i < 0 = none.
__device__ __forceinline__ bool beats(float v, int i, float bv, int bi) {
  return i >= 0 && (bi < 0 || v > bv || (v == bv && i < bi));
}

__global__ void __launch_bounds__(kThreads) sample_reduce_kernel(const float* __restrict__ row, int vocab, int k,
                                                                  int32_t* __restrict__ out) {
  __shared__ unsigned hist[256];
  __shared__ unsigned long long sel[kSampleReduceMaxK];
  __shared__ float w_v[kWarps];
  __shared__ int w_i[kWarps], w_n[kWarps];
  __shared__ uint32_t s_prefix;
  __shared__ int s_need, s_target, s_gt, s_eq_taken;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  // Pass 1: argmax, finite count, histogram of the keys' top byte.
  if (tid < 256) hist[tid] = 0;
  __syncthreads();
  float bv = -INFINITY;
  int bi = -1, nf = 0;
  for (int i = tid; i < vocab; i += kThreads) {
    const float v = row[i];
    if (v > bv) bv = v, bi = i;  // ids rise along the loop: strict '>' keeps the lowest
    if (isfinite(v)) {
      nf++;
      atomicAdd(&hist[order_key(v) >> 24], 1u);
    }
  }
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
    out[0] = i < 0 ? 0 : i;
    out[2] = n;
    out[3] = k;
    s_target = min(k, n);
    s_need = s_target;  // still to take at or below the prefix found so far
    s_prefix = 0;
    s_gt = 0;
    s_eq_taken = 0;
  }
  __syncthreads();
  const int target = s_target;
  if (target == 0) {
    if (tid == 0) out[1] = 0;
    return;
  }

  // Radix select: the key of the target-th largest value, byte by byte from the top.
  for (int shift = 24; shift >= 0; shift -= 8) {
    if (shift < 24) {
      if (tid < 256) hist[tid] = 0;
      __syncthreads();
      const uint32_t want = s_prefix >> (shift + 8);
      for (int i = tid; i < vocab; i += kThreads) {
        const float v = row[i];
        if (!isfinite(v)) continue;
        const uint32_t key = order_key(v);
        if ((key >> (shift + 8)) == want) atomicAdd(&hist[(key >> shift) & 255u], 1u);
      }
      __syncthreads();
    }
    if (tid == 0) {
      int need = s_need;
      for (int b = 255; b >= 0; --b) {
        const int c = int(hist[b]);
        if (c >= need) {
          s_prefix |= uint32_t(b) << shift;
          break;
        }
        need -= c;
      }
      s_need = need;
    }
    __syncthreads();
  }
  const uint32_t thr = s_prefix;
  const int need_eq = s_need;           // values with key == thr to take, lowest ids first
  const int n_gt = target - need_eq;    // values with key > thr: all taken
  auto pack = [](uint32_t key, int i) { return (static_cast<unsigned long long>(key) << 32) | (0xffffffffu - uint32_t(i)); };

  // Everything above the threshold (slots [0, n_gt), any order: sorted below).
  for (int i = tid; i < vocab; i += kThreads) {
    const float v = row[i];
    if (!isfinite(v)) continue;
    const uint32_t key = order_key(v);
    if (key > thr) sel[atomicAdd(&s_gt, 1)] = pack(key, i);
  }
  // The ties at the threshold in id order, block tile by tile, until enough are taken.
  for (int base = 0; base < vocab; base += kThreads) {
    if (s_eq_taken >= need_eq) break;  // uniform: written before the last __syncthreads
    const int i = base + tid;
    bool eq = false;
    if (i < vocab) {
      const float v = row[i];
      eq = isfinite(v) && order_key(v) == thr;
    }
    const unsigned m = __ballot_sync(0xffffffffu, eq);
    if (lane == 0) w_n[warp] = __popc(m);
    __syncthreads();
    int before = s_eq_taken + __popc(m & ((1u << lane) - 1u));
    for (int w = 0; w < warp; ++w) before += w_n[w];
    if (eq && before < need_eq) sel[n_gt + before] = pack(thr, i);
    __syncthreads();
    if (tid == 0) {
      int tile = 0;
      for (int w = 0; w < kWarps; ++w) tile += w_n[w];
      s_eq_taken += tile;
    }
    __syncthreads();
  }

  // Bitonic sort, descending, of the target keys padded with 0 to a power of two.
  int p2 = 1;
  while (p2 < target) p2 <<= 1;
  for (int i = target + tid; i < p2; i += kThreads) sel[i] = 0;
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
    out[4 + r] = id;
    out[4 + k + r] = __float_as_int(row[id]);
  }
  if (tid == 0) out[1] = target;
}

}  // namespace

void sample_reduce_f32(const float* row, int64_t vocab, int k, int32_t* out, cudaStream_t stream) {
  if (k < 1 || k > kSampleReduceMaxK) throw Error("sample_reduce_f32: k = " + std::to_string(k) + " outside [1, 1024]");
  if (vocab < 1 || vocab > INT_MAX) throw Error("sample_reduce_f32: vocab = " + std::to_string(vocab));
  sample_reduce_kernel<<<1, kThreads, 0, stream>>>(row, int(vocab), k, out);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace ds4::cuda
