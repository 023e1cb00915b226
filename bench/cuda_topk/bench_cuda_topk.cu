// Time per launch of cuda::topk_select_f32 (backend/cuda/topk_select.h) against the three
// per-model selections it replaced, measured in the same run on the same scores:
//   peer_rank_qwen:   qsa_select_kernel's rank loop (one block of 1024 per row, O(n^2));
//   peer_rank_glm:    indexer_keep_kernel (a thread per entry over n/256 blocks, O(n^2) with
//                     the early exit once the rank reaches k);
//   peer_bitwise_dsv4: index_topk_kernel (one block of 1024, a 32-pass bitwise threshold
//                     search over order keys, then the index-ordered list).
// The peers are copies of those kernels' selection parts (scores given, the scoring left
// out), kept only here. Every peer's result is compared with the op's (keep mask or list):
// "same" must read yes on random normal scores. n = 2k .. 64k, k = 512 / 2048, 1 row (decode)
// and 16 rows (a verify / chunk launch: the rows run on different SMs, so per-row time is
// the launch time / 16 only while fewer rows than SMs share it).
// Usage: bench_cuda_topk [iters]   (default 50: each figure the median of as many launches, cuda_timing.cuh)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/memory.h"
#include "backend/cuda/topk_select.h"

#include "../cuda_timing.cuh"

namespace {

using ds4::cuda::DeviceBuffer;

// ---- peers: the old selections (copies; do not use outside this bench) ----
__global__ void peer_rank_qwen_kernel(const float* scores, int64_t n, int64_t k, uint8_t* keep, int64_t stride) {
  scores += blockIdx.x * stride, keep += blockIdx.x * stride;
  for (int64_t b = threadIdx.x; b < n; b += blockDim.x) {
    const float s = scores[b];
    int64_t rank = 0;
    for (int64_t o = 0; o < n; ++o) {
      const float t = scores[o];
      rank += (t > s) || (t == s && o < b);
    }
    keep[b] = rank < k;
  }
}

__global__ void peer_rank_glm_kernel(const float* scores, int64_t n, int64_t k, uint8_t* keep, int64_t stride) {
  scores += blockIdx.y * stride, keep += blockIdx.y * stride;
  const int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= n) return;
  const float s = scores[p];
  int64_t rank = 0;
  for (int64_t o = 0; o < n && rank < k; ++o) rank += scores[o] > s || (scores[o] == s && o < p);
  keep[p] = rank < k;
}

__device__ __forceinline__ uint32_t peer_order_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ int peer_block_exclusive_scan(int* v, int mine) {
  v[threadIdx.x] = mine;
  __syncthreads();
  for (unsigned o = 1; o < blockDim.x; o <<= 1) {
    const int add = threadIdx.x >= o ? v[threadIdx.x - o] : 0;
    __syncthreads();
    v[threadIdx.x] += add;
    __syncthreads();
  }
  const int incl = v[threadIdx.x], total = v[blockDim.x - 1];
  __syncthreads();
  v[threadIdx.x] = incl - mine;
  __syncthreads();
  return total;
}

__global__ void peer_bitwise_dsv4_kernel(const float* scores, int64_t n, int64_t topk, int32_t* sel,
                                         int64_t stride) {
  __shared__ int scan[1024];
  __shared__ int count;
  scores += blockIdx.x * stride, sel += blockIdx.x * stride;
  const int k = int(topk);
  uint32_t T = 0;
  for (int bit = 31; bit >= 0; --bit) {
    const uint32_t cand = T | (1u << bit);
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    int c = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) c += peer_order_key(scores[i]) >= cand;
    atomicAdd(&count, c);
    __syncthreads();
    if (count >= k) T = cand;
    __syncthreads();
  }
  const int64_t chunk = (n + blockDim.x - 1) / blockDim.x;
  const int64_t lo = threadIdx.x * chunk, hi = lo + chunk < n ? lo + chunk : n;
  int greater = 0, ties = 0;
  for (int64_t i = lo; i < hi; ++i) {
    const uint32_t key = peer_order_key(scores[i]);
    greater += key > T;
    ties += key == T;
  }
  peer_block_exclusive_scan(scan, ties);
  const int tie_before = scan[threadIdx.x];
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  atomicAdd(&count, greater);
  __syncthreads();
  const int need = k - count;
  int take_ties = need - tie_before;
  take_ties = take_ties < 0 ? 0 : (take_ties > ties ? ties : take_ties);
  peer_block_exclusive_scan(scan, greater + take_ties);
  int out = scan[threadIdx.x], tie_rank = tie_before;
  for (int64_t i = lo; i < hi; ++i) {
    const uint32_t key = peer_order_key(scores[i]);
    if (key > T) sel[out++] = int32_t(i);
    else if (key == T && tie_rank++ < need) sel[out++] = int32_t(i);
  }
}


template <class T>
std::vector<T> back(const DeviceBuffer& d) {
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> v(d.bytes() / sizeof(T));
  DS4_CUDA_CHECK(cudaMemcpy(v.data(), d.get(), d.bytes(), cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::max(1, std::atoi(argv[1])) : 50;
  try {
    cudaDeviceProp prop{};
    DS4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    std::printf("indexer top-k, us per launch (x = peer / topk_select); random normal scores\n");
    std::printf("| n | k | rows | topk_select | peer_rank_qwen | peer_rank_glm | peer_bitwise_dsv4 | same |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    std::mt19937_64 rng(20261215);
    std::normal_distribution<float> nd(0.f, 1.f);
    for (int64_t n : {2048, 8192, 32768, 65536})
      for (int64_t k : {512, 2048})
        for (int64_t rows : {1, 16}) {
          const int64_t stride = n;
          std::vector<float> sc(size_t(rows * stride));
          for (auto& v : sc) v = nd(rng);
          DeviceBuffer d_sc(sc.size() * 4, "scores"), d_pos(size_t(rows) * 4, "pos"), d_keep(size_t(rows * stride), "keep"),
              d_peer_keep(size_t(rows * stride), "peer keep"), d_list(size_t(rows * stride) * 4, "list"),
              d_peer_list(size_t(rows * stride) * 4, "peer list"), d_count(size_t(rows) * 4, "count");
          DS4_CUDA_CHECK(cudaMemcpy(d_sc.get(), sc.data(), d_sc.bytes(), cudaMemcpyHostToDevice));
          const std::vector<int32_t> pos(size_t(rows), int32_t(n - 1));
          DS4_CUDA_CHECK(cudaMemcpy(d_pos.get(), pos.data(), d_pos.bytes(), cudaMemcpyHostToDevice));
          DS4_CUDA_CHECK(cudaMemset(d_list.get(), 0, d_list.bytes()));
          DS4_CUDA_CHECK(cudaMemset(d_peer_list.get(), 0, d_peer_list.bytes()));
          ds4::cuda::TopkSelectArgs a;
          a.scores = d_sc.as<float>(), a.score_stride = stride, a.k = k, a.rows = rows;
          a.n = ds4::cuda::TopkCount{d_pos.as<int32_t>(), 1, 0, 1};
          a.keep = d_keep.as<uint8_t>(), a.keep_stride = stride;
          a.list = d_list.as<int32_t>(), a.count = d_count.as<int32_t>(), a.list_stride = stride, a.count_stride = 1;
          const float t_op = ds4::bench::time_ms([&] { ds4::cuda::topk_select_f32(a, nullptr); }, iters, nullptr);
          const auto keep = back<uint8_t>(d_keep);
          const auto list = back<int32_t>(d_list);
          bool same = true;
          const float t_qwen = ds4::bench::time_ms([&] {
            peer_rank_qwen_kernel<<<unsigned(rows), 1024>>>(d_sc.as<float>(), n, k, d_peer_keep.as<uint8_t>(), stride);
          }, iters, nullptr);
          same = same && back<uint8_t>(d_peer_keep) == keep;
          DS4_CUDA_CHECK(cudaMemset(d_peer_keep.get(), 0, d_peer_keep.bytes()));
          const float t_glm = ds4::bench::time_ms([&] {
            peer_rank_glm_kernel<<<dim3(unsigned((n + 255) / 256), unsigned(rows)), 256>>>(
                d_sc.as<float>(), n, k, d_peer_keep.as<uint8_t>(), stride);
          }, iters, nullptr);
          same = same && back<uint8_t>(d_peer_keep) == keep;
          const float t_dsv4 = ds4::bench::time_ms([&] {
            peer_bitwise_dsv4_kernel<<<unsigned(rows), 1024>>>(d_sc.as<float>(), n, k, d_peer_list.as<int32_t>(), stride);
          }, iters, nullptr);
          const auto plist = back<int32_t>(d_peer_list);
          for (int64_t r = 0; r < rows && same; ++r)
            same = std::equal(list.begin() + r * stride, list.begin() + r * stride + k, plist.begin() + r * stride);
          DS4_CUDA_CHECK(cudaGetLastError());
          std::printf("| %lld | %lld | %lld | %.1f | %.1f (%.1fx) | %.1f (%.1fx) | %.1f (%.1fx) | %s |\n", (long long)n,
                      (long long)k, (long long)rows, 1e3 * t_op, 1e3 * t_qwen, t_qwen / t_op, 1e3 * t_glm, t_glm / t_op,
                      1e3 * t_dsv4, t_dsv4 / t_op, same ? "yes" : "NO");
          std::fflush(stdout);
        }
  } catch (const std::exception& e) {
    std::printf("FATAL: %s\n", e.what());
    return 2;
  }
  return 0;
}
