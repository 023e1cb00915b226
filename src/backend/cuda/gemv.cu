// GEMV kernels: two templates over the format decoders in gemv_formats.cuh.
//
// Work split (both kernels): a thread block owns R consecutive rows (F::kRows unless tuned); per 32-weight
// unit a thread first issues the loads of all kRows rows (so they are in flight together),
// then loads the unit's 32 x values once (L1-resident, 16-byte loads) and reuses them for
// every row. Partial sums are reduced by warp shuffles, then across warps in shared memory.
//
// gemv_direct_kernel: threads stride over units and read their unit's bytes from global
//   memory. Right when a unit is whole 16-byte loads (BF16/F16, Q4_K, MLX).
// gemv_staged_kernel: for 34/66/84-byte blocks a thread's 2/4-byte loads are spread over
//   many sectors per warp instruction; instead each warp copies a span of whole blocks of
//   its kRows rows into shared memory with coalesced 16-byte loads, then decodes there.
//   Only on request (GemvPath::kStaged) under kernel 2; kernel 1 also took it for kAuto.
// Three kernel generations (gemv_set_kernel, DS4_GEMV_KERNEL): 2 decodes with the formats'
// dot2 (no int->float conversions), reads Q8_0 with 4-byte loads and issues IQ2_XXS loads
// ahead; 3 (default) is 2 with Q2_K read coalesced (Q2_KC) and IQ2_XXS through kernel 1's
// dot (visit_format); 1 is the 2026-12-01 code, kept as the fallback and for side-by-side
// benches. The staged kernel decodes with the generation's dot too (dot2 under 2 and 3).
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/env_setting.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/gemv_formats.cuh"
#include "backend/cuda/gemv_mlx4_tc.h"
#include "backend/cuda/gemv_tuning.h"
#include "backend/cuda/iq2xxs_grid.h"
#include "core/error.h"

namespace ds4::cuda {

namespace {
int g_kernel = 0;  // 0: not yet read from DS4_GEMV_KERNEL
}

namespace {
int g_pdl = -1;  // -1: not yet read from DS4_GEMV_PDL
}

bool gemv_pdl() {
  if (g_pdl < 0) {
    const char* e = std::getenv("DS4_GEMV_PDL");
    g_pdl = e && std::string(e) == "0" ? 0 : 1;
  }
  return g_pdl == 1;
}

void gemv_set_pdl(bool on) { g_pdl = on ? 1 : 0; }

namespace {
std::atomic<int> g_small_pdl{-1};
}

bool small_kernel_pdl() { return gemv_pdl() && env_setting(g_small_pdl, "DS4_SMALL_PDL", {0, 1}, "0 or 1", 1) == 1; }
void small_kernel_pdl_set(bool on) { g_small_pdl.store(on ? 1 : 0, std::memory_order_relaxed); }

int gemv_kernel() {
  if (g_kernel == 0) {
    const char* e = std::getenv("DS4_GEMV_KERNEL");
    const std::string v = e ? e : "";
    g_kernel = v == "1" ? 1 : v == "2" ? 2 : 3;
  }
  return g_kernel;
}

void gemv_set_kernel(int version) {
  if (version < 1 || version > 3) throw InputError("cuda gemv: kernel " + std::to_string(version) + " is not 1, 2 or 3");
  g_kernel = version;
}

namespace {

using namespace gemv_detail;

constexpr int kMaxThreads = 128;

__device__ const uint64_t d_iq2xxs_grid[256] = {DS4_IQ2XXS_GRID_VALUES};

// A format whose units are not 32 consecutive weights (Q2_KC) says where each float4 of x is.
template <class F, class = void>
struct HasXMap : std::false_type {};
template <class F>
struct HasXMap<F, std::void_t<decltype(&F::x_float4)>> : std::true_type {};

// Formats without a map keep the pointer form of kernel 2 (one base, constant offsets).
template <class F>
__device__ __forceinline__ void load_x(const float* __restrict__ x, int64_t unit, float (&xv)[kUnit]) {
  const float4* xp = reinterpret_cast<const float4*>(HasXMap<F>::value ? x : x + unit * kUnit);
#pragma unroll
  for (int i = 0; i < kUnit / 4; ++i) {
    float4 f;
    if constexpr (HasXMap<F>::value) f = __ldg(xp + F::x_float4(unit, i));
    else f = __ldg(xp + i);
    xv[4 * i] = f.x, xv[4 * i + 1] = f.y, xv[4 * i + 2] = f.z, xv[4 * i + 3] = f.w;
  }
}

// Batched launches: this block's entry (blockIdx.y) picks its expert, x and y.
// Returns the entry index; the caller offsets x and y by it.
__device__ __forceinline__ int64_t batch_entry(Args& a) {
  const int64_t b = blockIdx.y;
  if (b == 0 && !a.ids) return 0;
  const int64_t e = a.ids ? a.ids[b] : b;
  a.data += e * a.id_stride;
  if (a.scales) a.scales = static_cast<const uint8_t*>(a.scales) + e * a.id_scale_stride;
  if (a.biases) a.biases = static_cast<const uint8_t*>(a.biases) + e * a.id_scale_stride;
  return b;
}

// Only IQ2_XXS reads the codebook. Lanes index it at random, so each block stages it in
// shared memory (constant memory would serialize the divergent addresses).
template <class F>
struct Codebook {
  uint64_t* unused;
  __device__ void stage() {}
  __device__ const void* get() const { return nullptr; }
};
template <>
struct Codebook<IQ2_XXS> {
  uint64_t* grid;
  __device__ void stage() {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) grid[i] = d_iq2xxs_grid[i];
    __syncthreads();
  }
  __device__ const void* get() const { return grid; }
};

// Sums acc[r] over the block and writes y[row0 + r] for rows that exist.
template <int R>
__device__ void block_finish(const float (&acc)[R], int64_t row0, int64_t rows, float* __restrict__ y) {
  __shared__ float part[R][kMaxThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float s = warp_sum(acc[r]);
    if (lane == 0) part[r][warp] = s;
  }
  __syncthreads();
  if (threadIdx.x < R && row0 + threadIdx.x < rows) {
    float s = 0.f;
    for (int w = 0; w < int(blockDim.x / 32); ++w) s += part[threadIdx.x][w];
    y[row0 + threadIdx.x] = s;
  }
}

// Kernel generation (gemv_set_kernel): 1 = the kernels of 2026-12-01, 2 = dot2 decoders (dot_v,
// gemv_formats.cuh) and loads issued ahead (see direct_loop).
template <class F, class = void>
struct HasLoad2 : std::false_type {};
template <class F>
struct HasLoad2<F, std::void_t<decltype(&F::load_global2)>> : std::true_type {};

template <int V, class F>
__device__ __forceinline__ typename F::Raw load_v(const Args& a, const uint8_t* row_bytes, int64_t row, int64_t u) {
  if constexpr (V == 2 && HasLoad2<F>::value) return F::load_global2(row_bytes, u);
  else return F::template load<FromGlobal>(a, row_bytes, row, u);
}

// The block prologue and unit loop shared by gemv_direct_kernel and gemv_rows_kernel, so a
// row of gemv_rows is the direct gemv bit for bit: thread t takes units t, t + blockDim.x, ...
// of this block's R rows (row0.., the tail re-reads the last row), loads the R rows' bytes of
// the unit and calls body(raw, u). Kernel 2 issues the first unit's loads before staging the
// IQ2_XXS codebook (one memory latency less per block: the batched expert launches are one or
// two units per thread) and, where R raw units fit in 32 registers, the next unit's loads
// before this unit's math; both only with kAhead (gemv, not gemv_rows: with N input rows the
// compiler keeps the decoded weights for all of them, and the early loads made IQ2_XXS spill).
// Elsewhere the loop is kernel 1's (loads inside the loop let the compiler interleave them
// with the math: fewer live registers; ptxas numbers in bench/cuda_gemv/NOTES.md).
// wait() runs in every thread before the first x load (and the codebook stage): under kernel
// 2 with kAhead, after the first unit's weight loads are issued, so a gemv launched as a
// programmatic dependent (gemv_pdl) streams its weights while the kernel before it finishes.
// The units and their order are the same in every form (gemv_rows still equals gemv).
// kFirstEarly (gemv, and gemv_rows as a programmatic dependent): the first unit's loads before wait()
// (also without kAhead's prefetch: gemv_rows).
template <class F, int R, int V, bool kAhead, bool kFirstEarly, class Wait, class Body>
__device__ __forceinline__ void direct_loop(const Args& a, int64_t row0, Codebook<F>& book, Wait&& wait,
                                            Body&& body) {
  const uint8_t* rows_p[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows_p[r] = a.data + min(row0 + r, a.rows - 1) * a.row_stride;
  auto load_all = [&](typename F::Raw (&raw)[R], int64_t u) {
#pragma unroll
    for (int r = 0; r < R; ++r) raw[r] = load_v<V, F>(a, rows_p[r], min(row0 + r, a.rows - 1), u);
  };
  const int64_t units = a.cols / kUnit;
  constexpr bool kPrefetch = V == 2 && kAhead && sizeof(typename F::Raw) * R <= 128;
  constexpr bool kEarly = V == 2 && kFirstEarly;
  if constexpr (!kPrefetch && !kEarly) {
    wait();
    book.stage();
    for (int64_t u = threadIdx.x; u < units; u += blockDim.x) {
      typename F::Raw raw[R];
      load_all(raw, u);
      body(raw, u);
    }
  } else {
    int64_t u = threadIdx.x;
    typename F::Raw cur[R];
    if (u < units) load_all(cur, u);
    wait();
    book.stage();
    for (; u < units; u += blockDim.x) {
      const int64_t next = u + blockDim.x;
      if constexpr (kPrefetch) {
        typename F::Raw nxt[R];
        if (next < units) load_all(nxt, next);
        body(cur, u);
        if (next < units) {
#pragma unroll
          for (int r = 0; r < R; ++r) cur[r] = nxt[r];
        }
      } else {
        body(cur, u);
        if (next < units) load_all(cur, next);
      }
    }
  }
}

// Programmatic dependent launch: pdl_launch_dependents / pdl_wait (gemv_device.cuh).
// Launched as a programmatic dependent (gemv_pdl): everything before pdl_wait reads only
// weights (immutable) and launch arguments; the expert ids come from the kernel before
// (a router), so batched launches with ids wait first. The source order is not enough: x is
// read through __ldg (ld.global.nc), which ptxas may schedule above a griddepcontrol.wait (it
// did in the reverted PDL Qwen hc_up_combine, whose wait sat in its unit loop). Here the wait
// stays outside the loop; tools/device/pdl_sass_check.py checks the SASS of every
// instantiation (2026-12-04, CUDA 13.0, sm_90a: no x or ids load before the wait) and
// test_gemv_pdl checks it on the device. Re-run both after changing this kernel.
// The prologue of the one-row direct kernel (gemv_direct_kernel): triggers the
// dependents, waits first where the expert ids come from the kernel before, moves a, x and y to
// this block's batch entry. Returns whether it waited (else the caller waits before reading x).
__device__ __forceinline__ bool one_row_prologue(Args& a, const float* __restrict__& x, float* __restrict__& y) {
  pdl_launch_dependents();
  const bool waited = a.ids != nullptr;
  if (waited) pdl_wait();
  const int64_t b = batch_entry(a);
  x += b * a.x_stride;
  y += b * a.y_stride;
  return waited;
}

template <class F, int R, int V>
__global__ void __launch_bounds__(kMaxThreads) gemv_direct_kernel(Args a, const float* __restrict__ x,
                                                                 float* __restrict__ y) {
  const bool waited = one_row_prologue(a, x, y);
  __shared__ uint64_t grid_smem[std::is_same_v<F, IQ2_XXS> ? 256 : 1];
  Codebook<F> book{grid_smem};
  const int64_t row0 = int64_t(blockIdx.x) * R;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  auto wait = [&] {
    if (!waited) pdl_wait();
  };
  direct_loop<F, R, V, true, true>(a, row0, book, wait, [&](const typename F::Raw (&raw)[R], int64_t u) {
    float xv[kUnit];
    load_x<F>(x, u, xv);
    x_for_dot<V, F>(xv);
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] += dot_v<V, F>(raw[r], u, xv, book.get());
  });
  block_finish<R>(acc, row0, a.rows, y);
}

template <class F, int R, int V>
__global__ void __launch_bounds__(kMaxThreads) gemv_staged_kernel(Args a, const float* __restrict__ x,
                                                                 float* __restrict__ y) {
  constexpr int kSpanBytes = F::kSpanBlocks * F::kBlockBytes;
  constexpr int kSpanVecs = kSpanBytes / 16;
  constexpr int kVecsPerLane = (kSpanVecs + 31) / 32;
  constexpr int kSpanUnits = F::kSpanBlocks * F::kUnitsPerBlock;
  static_assert(kSpanBytes % 16 == 0, "a span must be whole 16-byte vectors");
  {
    const int64_t b = batch_entry(a);
    x += b * a.x_stride;
    y += b * a.y_stride;
  }
  __shared__ uint4 stage[kMaxThreads / 32][R][kSpanVecs];  // {warps, rows, span bytes / 16}
  __shared__ uint64_t grid_smem[std::is_same_v<F, IQ2_XXS> ? 256 : 1];
  Codebook<F> book{grid_smem};
  book.stage();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int64_t row0 = int64_t(blockIdx.x) * R;
  const uint8_t* rows_p[R];
#pragma unroll
  for (int r = 0; r < R; ++r) rows_p[r] = a.data + min(row0 + r, a.rows - 1) * a.row_stride;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  const int64_t units = a.cols / kUnit;
  const int64_t spans = (units + kSpanUnits - 1) / kSpanUnits;
  for (int64_t sp = warp; sp < spans; sp += warps) {
    const int64_t u0 = sp * kSpanUnits;
    const int n_units = int(min(int64_t(kSpanUnits), units - u0));
    // The last span may be partial; it still ends on a 16-byte boundary (row stride % 16 == 0).
    const int n_vecs = n_units / F::kUnitsPerBlock * F::kBlockBytes / 16;
    uint4 tmp[R][kVecsPerLane];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int k = 0; k < kVecsPerLane; ++k)
        if (lane + 32 * k < n_vecs) tmp[r][k] = FromGlobal::u4(rows_p[r] + sp * kSpanBytes + 16 * (lane + 32 * k));
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int k = 0; k < kVecsPerLane; ++k)
        if (lane + 32 * k < n_vecs) stage[warp][r][lane + 32 * k] = tmp[r][k];
    __syncwarp();
    for (int j = lane; j < n_units; j += 32) {  // j: unit inside the span (spans start on blocks)
      float xv[kUnit];
      load_x<F>(x, u0 + j, xv);
      x_for_dot<V, F>(xv);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const auto raw = F::template load<FromShared>(a, reinterpret_cast<const uint8_t*>(stage[warp][r]), 0, j);
        acc[r] += dot_v<V, F>(raw, j, xv, book.get());
      }
    }
    __syncwarp();  // the next span overwrites this warp's stage
  }
  block_finish<R>(acc, row0, a.rows, y);
}

// Plain-float rows whose length is not a multiple of 32 (small projections: low-rank
// hyper-connection, narrow experts): one warp per row, lanes stride over the columns.
template <int kType>  // 0 F32, 1 F16, 2 BF16
__global__ void __launch_bounds__(kMaxThreads) gemv_small_kernel(Args a, const float* __restrict__ x,
                                                                float* __restrict__ y) {
  {
    const int64_t b = batch_entry(a);
    x += b * a.x_stride;
    y += b * a.y_stride;
  }
  const int64_t row = int64_t(blockIdx.x) * (kMaxThreads / 32) + threadIdx.x / 32;
  if (row >= a.rows) return;
  const uint8_t* p = a.data + row * a.row_stride;
  float s = 0.f;
  for (int64_t c = threadIdx.x % 32; c < a.cols; c += 32) {
    float w;
    if constexpr (kType == 0) w = __ldg(reinterpret_cast<const float*>(p) + c);
    else {
      const uint16_t h = __ldg(reinterpret_cast<const unsigned short*>(p) + c);
      w = kType == 1 ? f16_bits(h) : bf16_bits(h);
    }
    s = fmaf(w, x[c], s);
  }
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) y[row] = s;
}

// ---- Multi-row (gemv_rows): a block owns R weight rows and N input rows (n live) ----

// v's 32-bit words made to depend on `after` (each OR'd with its bits AND `zero`, which is 0 at
// run time but unknown to the compiler and ptxas): what is computed from v afterwards waits for
// `after` and is computed again, not hoisted or reused from before. The same words, the same bits.
template <class T>
__device__ __forceinline__ void after_value(T& v, float after, uint32_t zero) {
  static_assert(sizeof(T) % 4 == 0 && std::is_trivially_copyable_v<T>);
  uint32_t w[sizeof(T) / 4];
  memcpy(w, &v, sizeof(T));
  const uint32_t dep = __float_as_uint(after) & zero;
#pragma unroll
  for (int k = 0; k < int(sizeof(T) / 4); ++k) w[k] |= dep;
  memcpy(&v, w, sizeof(T));
}
// RowsArgs and rows_entry: gemv_device.cuh (shared with gemv_act_rows).

// The direct kernel's loop with an inner loop over input rows: per (weight row, input row)
// the same per-thread unit order and the same reductions as gemv_direct_kernel. kExpand: the R
// units decoded once (expand) and dotted with every input row (dot_e), else each input row
// through dot_v (the same bits: dot_v is expand + dot_e). kWide (R 4, 8: each x unit loaded,
// scaled and summed once for more weight rows): decode per input row, in order (after_value),
// so R weight rows fit in registers.
// PDL as gemv_direct_kernel (launch_rows_n: unrouted launches of one entry are programmatic
// dependents): the dependents triggered at the start, the first unit's weights loaded before the
// wait, x after it; with expert ids the wait comes first (rows_entry reads them; such launches are
// plain, and so are those routed by live / counts / x_idx / y_idx: rows_entry reads those too).
template <class F, int R, int N, int V, bool kExpand, bool kWide>
__global__ void __launch_bounds__(kMaxThreads)
    gemv_rows_kernel(Args a, RowsArgs ra, const float* __restrict__ x, float* __restrict__ y) {
  pdl_launch_dependents();
  // (One predicate, a.ids alone: tools/device/pdl_sass_check.py follows exactly this one.)
  const bool waited = a.ids != nullptr;
  if (waited) pdl_wait();
  int n;
  int64_t xo[N], yo[N];
  if (!rows_entry<N>(a, ra, n, xo, yo, [](Args& e) { return batch_entry(e); })) return;  // whole block: before any barrier
  __shared__ uint64_t grid_smem[std::is_same_v<F, IQ2_XXS> ? 256 : 1];
  Codebook<F> book{grid_smem};
  const int64_t row0 = int64_t(blockIdx.x) * R;
  float acc[R][N];  // {weight rows, input rows}
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < N; ++i) acc[r][i] = 0.f;
  auto wait = [&] {
    if (!waited) pdl_wait();
  };
  // (raw not const: the wide forms OR a run-time zero into its words, after_value)
  direct_loop<F, R, V, false, true>(a, row0, book, wait, [&](typename F::Raw(&raw)[R], int64_t u) {
    auto each_input = [&](auto&& dot_row) {  // dot_row(r, xv): weight row r's unit dot x row
#pragma unroll
      for (int i = 0; i < N; ++i) {
        if (i >= n) break;
        float xv[kUnit];
        const float* xi = x + xo[i];
        // The wide forms: input row i's x loaded only after row i - 1's last product, so one
        // row's 32 floats are live at a time (else ptxas loads every row's ahead).
        if constexpr (kWide)
          if (i > 0) xi += __float_as_uint(acc[R - 1][i - 1]) & ra.zero;
        load_x<F>(xi, u, xv);
        x_for_dot<V, F>(xv);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          // The wide forms decode weight row r's unit only after an earlier row's product, so
          // few units' decoded fields are live at a time (else ptxas decodes all R ahead, or
          // keeps them for the next input row: R x 32 registers, spilling at R = 8).
          if constexpr (kWide) {
            // two weight rows' decode and chains in flight: row r waits for row r - 2's product
            if (r >= 2 || i > 0) after_value(raw[r], r >= 2 ? acc[r - 2][i] : acc[R - 2 + r][i - 1], ra.zero);
          }
          acc[r][i] += dot_row(r, xv);
        }
      }
    };
    if constexpr (kExpand) {
      // Decode once, dot many: the R units expanded to the floats dot_v multiplies, then each
      // input row's FMAs (dot_v is expand + dot_e: the same bits as decoding per row).
      typename F::E e[R];
#pragma unroll
      for (int r = 0; r < R; ++r) e[r] = F::expand(raw[r], u, book.get());
      each_input([&](int r, const float (&xv)[kUnit]) { return F::dot_e(e[r], xv); });
    } else {
      each_input([&](int r, const float (&xv)[kUnit]) { return dot_v<V, F>(raw[r], u, xv, book.get()); });
    }
  });
  finish_rows<R, N, kMaxThreads / 32>(acc, row0, a.rows, n, yo, y);
}

// gemv_small_kernel over input rows: one warp per weight row, each weight read once.
template <int kType, int N>
__global__ void __launch_bounds__(kMaxThreads) gemv_rows_small_kernel(Args a, RowsArgs ra, const float* __restrict__ x,
                                                                     float* __restrict__ y) {
  int n;
  int64_t xo[N], yo[N];
  if (!rows_entry<N>(a, ra, n, xo, yo, [](Args& e) { return batch_entry(e); })) return;
  const int64_t row = int64_t(blockIdx.x) * (kMaxThreads / 32) + threadIdx.x / 32;
  if (row >= a.rows) return;
  const uint8_t* p = a.data + row * a.row_stride;
  float s[N];
#pragma unroll
  for (int i = 0; i < N; ++i) s[i] = 0.f;
  for (int64_t c = threadIdx.x % 32; c < a.cols; c += 32) {
    float w;
    if constexpr (kType == 0) w = __ldg(reinterpret_cast<const float*>(p) + c);
    else {
      const uint16_t h = __ldg(reinterpret_cast<const unsigned short*>(p) + c);
      w = kType == 1 ? f16_bits(h) : bf16_bits(h);
    }
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (i < n) s[i] = fmaf(w, x[xo[i] + c], s[i]);
  }
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const float t = warp_sum(s[i]);
    if (i < n && threadIdx.x % 32 == 0) y[yo[i] + row] = t;
  }
}

// The direct gemv kernel, as a programmatic dependent of the kernel before it when gemv_pdl().
void launch_direct(void (*k)(Args, const float*, float*), dim3 blocks, int threads, cudaStream_t stream,
                   const Args& a, const float* x, float* y) {
  launch_maybe_pdl(gemv_pdl(), k, blocks, threads, stream, a, x, y);
}

int g_threads = 0;  // gemv_set_threads: 0 = kMaxThreads

int threads_for(int64_t work_items) {  // narrow rows get fewer threads rather than idle ones
  const int cap = g_threads ? g_threads : kMaxThreads;
  return int(std::min<int64_t>(cap, (work_items + 31) / 32 * 32));
}

// Rows per block when the caller leaves it to us: the format's kRows, halved down to
// kMinAutoRows while the grid has fewer than ~2 blocks per SM (132 on the H200). H200 sweep
// (bench/results/gemv-h200-2026-12-04g): 2048x4096 at R=4 vs 8: Q8_0 +30%, Q2_K +50%, MLX q4
// +29%, Q4_K +6%, but BF16/F16 -7..10% and IQ2_XXS -12%; 324x10240 at R=4 vs 8: Q2_K +52%,
// MLX q4 +22%, BF16 -20%; R=1 and 2 lost there. So only the decoded formats shrink, and not
// below 4. Rows per block change no result (each row is one block's threads over the same
// units in the same order), so gemv_rows still equals gemv.
template <class F>
constexpr int kMinAutoRows =
    std::is_same_v<F, F32> || std::is_same_v<F, Half16<true>> || std::is_same_v<F, Half16<false>> ||
            std::is_same_v<F, IQ2_XXS>
        ? F::kRows
        : 4;

template <class F>
int auto_rows(int64_t rows, unsigned batch) {
  constexpr int64_t kMinBlocks = 264;
  int r = F::kRows;
  while (r > kMinAutoRows<F> && (rows + r - 1) / r * int64_t(batch) < kMinBlocks) r /= 2;
  return r;
}

template <class F, int R, int V>
void launch_rows(const Args& a, const float* x, float* y, cudaStream_t stream, bool staged, unsigned batch) {
  const dim3 blocks(unsigned((a.rows + R - 1) / R), batch);
  const int64_t units = a.cols / kUnit;
  if constexpr (F::kSpanBlocks > 0) {
    if (staged) {
      constexpr int64_t span_units = F::kSpanBlocks * F::kUnitsPerBlock;
      gemv_staged_kernel<F, R, V><<<blocks, threads_for((units + span_units - 1) / span_units * 32), 0, stream>>>(a, x, y);
      DS4_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  launch_direct(gemv_direct_kernel<F, R, V>, blocks, threads_for(units), stream, a, x, y);
}

template <class F, int V>
void launch(const Args& a, const float* x, float* y, cudaStream_t stream, bool staged, int rows_per_block,
            unsigned batch) {
  switch (rows_per_block ? rows_per_block : auto_rows<F>(a.rows, batch)) {
    case 1: return launch_rows<F, 1, V>(a, x, y, stream, staged, batch);
    case 2: return launch_rows<F, 2, V>(a, x, y, stream, staged, batch);
    case 4: return launch_rows<F, 4, V>(a, x, y, stream, staged, batch);
    case 8: return launch_rows<F, 8, V>(a, x, y, stream, staged, batch);
    default: throw InputError("cuda gemv: rows_per_block " + std::to_string(rows_per_block) + " is not 0, 1, 2, 4 or 8");
  }
}

int log2_exact(int64_t v) {
  int s = 0;
  while ((int64_t(1) << s) < v) ++s;
  return (int64_t(1) << s) == v ? s : -1;
}

void check_shape(const WeightMatrix& w, int64_t multiple) {
  if (w.rows <= 0 || w.cols <= 0 || w.cols % multiple != 0)
    throw InputError("cuda gemv: " + std::string(dtype_name(w.type)) + " weight of " + std::to_string(w.rows) + "x" +
                     std::to_string(w.cols) + ": cols must be a positive multiple of " + std::to_string(multiple));
}

bool is_plain(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// Plain-float rows of any length take the small kernel when not a multiple of 32.
bool use_small(const WeightMatrix& w) { return is_plain(w.type) && w.cols % kUnit != 0; }

Args make_args(const WeightMatrix& w) {
  const bool k_block = w.type == DType::Q4_K || w.type == DType::Q2_K || w.type == DType::IQ2_XXS;
  check_shape(w, use_small(w) ? 1 : k_block ? 256 : kUnit);
  Args a{static_cast<const uint8_t*>(w.data), w.row_stride_bytes(), w.scales, w.biases, 0, 0, w.rows, w.cols,
         nullptr, 0, 0, 0, 0};
  if (w.type == DType::MLX_Q4 || w.type == DType::MLX_Q8) {
    a.group_shift = log2_exact(w.group_size);
    if (a.group_shift < 5 || w.cols % w.group_size != 0)
      throw InputError("cuda gemv: MLX group size " + std::to_string(w.group_size) +
                       " must be a power of two >= 32 dividing cols " + std::to_string(w.cols));
    if (w.scale_type != DType::F16 && w.scale_type != DType::BF16)
      throw InputError("cuda gemv: MLX scale type " + std::string(dtype_name(w.scale_type)) + " is not F16/BF16");
    if (!w.scales || !w.biases) throw InputError("cuda gemv: MLX weight without scales/biases");
    a.groups_per_row = w.cols / w.group_size;
  }
  return a;
}

}  // namespace

bool gemv_supports(DType t) {
  switch (t) {
    case DType::F32: case DType::BF16: case DType::F16: case DType::Q8_0: case DType::Q4_K: case DType::Q2_K:
    case DType::IQ2_XXS: case DType::MLX_Q4: case DType::MLX_Q8:
      return true;
    default:
      return false;
  }
}

bool gemv_can_stage(const WeightMatrix& w) {
  const bool fmt = w.type == DType::Q8_0 || w.type == DType::Q2_K || w.type == DType::IQ2_XXS;
  return fmt && w.row_stride_bytes() % 16 == 0 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

void gemv(const WeightMatrix& w, const float* x, float* y, cudaStream_t stream) {
  gemv(w, x, y, stream, GemvOptions{});
}

namespace {

// A weight's decoder (format struct) and arithmetic generation (V: 1 = dot, 2 = dot2).
template <class Fmt, int Gen>
struct Pick {
  using F = Fmt;
  static constexpr int V = Gen;
};

template <class F, class Fn>
void with_gen(int v, Fn& fn) {
  if (v == 1) fn(Pick<F, 1>{});
  else fn(Pick<F, 2>{});
}

// The one place that maps a weight and the kernel generation (gemv_kernel) to its decoder:
// gemv, gemv_batched and gemv_rows all go through it, so a row of gemv_rows is decoded and
// summed exactly as gemv's. Kernel 3 is kernel 2 with Q2_K read coalesced (Q2_KC: other
// units, so another summation order than kernel 2) and IQ2_XXS decoded the kernel-1 way (dot:
// faster than dot2 on every H200 expert shape, cuda-decode-h200-2026-12-04b). `staged` keeps
// Q2_K's units (the staged spans are whole blocks of them).
template <class Fn>
void visit_format(const WeightMatrix& w, bool staged, Fn&& fn) {
  const int k = gemv_kernel(), v = k == 1 ? 1 : 2;
  const bool bf16s = w.scale_type == DType::BF16;
  switch (w.type) {
    case DType::F32: return with_gen<F32>(v, fn);
    case DType::BF16: return with_gen<Half16<true>>(v, fn);
    case DType::F16: return with_gen<Half16<false>>(v, fn);
    case DType::Q8_0: return with_gen<Q8_0>(v, fn);
    case DType::Q4_K: return with_gen<Q4_K>(v, fn);
    case DType::Q2_K:
      if (k == 3 && !staged) return fn(Pick<Q2_KC, 2>{});
      return with_gen<Q2_K>(v, fn);
    case DType::IQ2_XXS: return with_gen<IQ2_XXS>(k == 3 ? 1 : v, fn);
    case DType::MLX_Q4: return bf16s ? with_gen<MlxAffine<4, true>>(v, fn) : with_gen<MlxAffine<4, false>>(v, fn);
    case DType::MLX_Q8: return bf16s ? with_gen<MlxAffine<8, true>>(v, fn) : with_gen<MlxAffine<8, false>>(v, fn);
    default: throw InputError("cuda gemv: weight type " + std::string(dtype_name(w.type)) + " is not supported");
  }
}

void dispatch(const WeightMatrix& w, Args a, const float* x, float* y, cudaStream_t stream, const GemvOptions& opt,
              unsigned batch) {
  const GemvPath path = opt.path;
  const int rb = opt.rows_per_block;
  const bool can_stage = gemv_can_stage(w);
  if (path == GemvPath::kStaged && !can_stage && (w.type == DType::Q8_0 || w.type == DType::Q2_K || w.type == DType::IQ2_XXS))
    throw InputError("cuda gemv: staged path needs a 16-byte aligned " + std::string(dtype_name(w.type)) +
                     " row stride (" + std::to_string(a.row_stride) + " bytes) and data pointer");
  // kAuto stages under kernel 1 only: on the H200 (bench/results/cuda-h200-2026-12-01) the
  // staged path was slower than the direct one on every shape.
  const bool staged = can_stage && (path == GemvPath::kStaged || (path == GemvPath::kAuto && gemv_kernel() == 1));
  if (use_small(w)) {
    const dim3 blocks(unsigned((a.rows + kMaxThreads / 32 - 1) / (kMaxThreads / 32)), batch);
    if (w.type == DType::F32) gemv_small_kernel<0><<<blocks, kMaxThreads, 0, stream>>>(a, x, y);
    else if (w.type == DType::F16) gemv_small_kernel<1><<<blocks, kMaxThreads, 0, stream>>>(a, x, y);
    else gemv_small_kernel<2><<<blocks, kMaxThreads, 0, stream>>>(a, x, y);
    DS4_CUDA_CHECK_LAUNCH();
    return;
  }
  visit_format(w, staged, [&](auto pick) {
    using P = decltype(pick);
    launch<typename P::F, P::V>(a, x, y, stream, staged, rb, batch);
  });
}

void check_type(const WeightMatrix& w) {
  if (!gemv_supports(w.type))
    throw InputError("cuda gemv: weight type " + std::string(dtype_name(w.type)) + " is not supported");
}

}  // namespace

namespace {
// DS4_MLX4_TC=1: MLX q4 g64 products on BF16 tensor cores (gemv_mlx4_tc.h) under kAuto and
// kDirect (kDirect asks for gemv_rows' per-row arithmetic, and gemv_rows takes the tc rows form
// then: the Qwen model launches everything kDirect); rows_per_block tunes only the CUDA-core
// kernel. kStaged keeps gemv's kernels.
bool takes_mlx4_tc(const WeightMatrix& w, const GemvOptions& opt) {
  return w.type == DType::MLX_Q4 && opt.path != GemvPath::kStaged && !opt.cuda_cores && gemv_mlx4_tc_on() &&
         gemv_mlx4_tc_supports(w);
}
}  // namespace

void gemv(const WeightMatrix& w, const float* x, float* y, cudaStream_t stream, const GemvOptions& opt) {
  check_type(w);
  if (takes_mlx4_tc(w, opt)) return gemv_mlx4_tc(w, x, y, GemvBatch{}, stream);
  dispatch(w, make_args(w), x, y, stream, opt, 1);
}

void gemv_batched(const WeightMatrix& w, const float* x, float* y, const GemvBatch& b, cudaStream_t stream,
                  const GemvOptions& opt) {
  check_type(w);
  if (b.count < 1 || b.count > 65535) throw InputError("cuda gemv_batched: count " + std::to_string(b.count));
  if (!use_small(w) && b.x_stride % 4 != 0)
    throw InputError("cuda gemv_batched: x_stride " + std::to_string(b.x_stride) + " must keep x 16-byte aligned");
  if (takes_mlx4_tc(w, opt)) return gemv_mlx4_tc(w, x, y, b, stream);
  Args a = make_args(w);
  a.ids = b.ids;
  a.id_stride = int64_t(b.id_stride);
  a.id_scale_stride = int64_t(b.id_scale_stride);
  a.x_stride = b.x_stride;
  a.y_stride = b.y_stride;
  dispatch(w, a, x, y, stream, opt, unsigned(b.count));
}

namespace {

std::atomic<int> g_rows_pdl{-1};  // DS4_GEMV_ROWS_PDL
// Whether a gemv_rows launch is a programmatic dependent (gemv_rows_kernel's PDL note): under
// gemv_pdl() and DS4_GEMV_ROWS_PDL (default 1), for one entry (batch 1: a verify window's or a decode
// batch's projections; not the 16-row groups of a prefill chunk's exact products, whose grids
// would sit waiting on the SMs beside a GEMM) read by no device index (ids, live, counts, x_idx,
// y_idx: rows_entry reads those before the wait). gemv_act_rows' unrouted launches are PDL for the
// same reason: at n = 1 a plain launch cost ~2x its one-row kernel (gemv_act.cu).
bool rows_pdl(const Args& a, const RowsArgs& ra, unsigned batch) {
  const bool routed = a.ids || rows_indexed(ra);
  return !routed && batch == 1 && gemv_pdl() &&
         env_setting(g_rows_pdl, "DS4_GEMV_ROWS_PDL", {0, 1}, "0 or 1", 1) == 1;
}

// N input rows per launch: the smallest of 4, 8, 16 holding n (fewer idle accumulators).
template <class F, int R, int N, int V, bool kWide = false>
void launch_rows_n(const Args& a, const RowsArgs& ra, const float* x, float* y, cudaStream_t stream, unsigned batch) {
  const dim3 blocks(unsigned((a.rows + R - 1) / R), batch);
  constexpr bool kExpand = Expands<F, V>::value && !kWide && R == 2;
  launch_maybe_pdl(rows_pdl(a, ra, batch), gemv_rows_kernel<F, R, N, V, kExpand, kWide>, blocks,
                   threads_for(a.cols / kUnit), stream, a, ra, x, y);
}

std::atomic<int> g_rows_weight_rows{-1};  // gemv_set_rows_weight_rows / DS4_GEMV_ROWS_R

// The default weight rows per block of gemv_rows up to 4 and up to 8 inputs: 4 / 8 the wide form
// (kWide), 0 the earlier form (MLX R = 2 decoded once per unit, others R = 4). From bench_cuda_gemv
// --rows on an H100 (session 35 call 2: n rows / one gemv at 4096x4096, 2048x4096, 1280x2560; the
// form best over n = 1..4, resp. n = 8) and Qwen's verify at 2K (k = 1..3: R8 1.91 / 2.44 / 2.93x a
// decode step, R4 1.99 / 2.55 / 3.10x, the earlier form 2.58 / 3.41 / 4.23x; k = 4, 5 rows: R4
// 3.84x, R8 3.96x). F32 keeps the earlier form (not in the table). Q2_KC (Q2_K under kernel 3, the
// table's "Q2_K/dir"): R 4 from session 36 call C's table (gemv_rows under PDL): n = 1 1.21-1.40x one
// gemv vs 1.60-1.88x, n = 2 1.77-2.03x vs 2.10-2.48x, n = 8 5.85-7.05x vs 6.19-7.29x.
template <class F>
struct IsMlx : std::false_type {};
template <int kBits, bool kBf16Scales>
struct IsMlx<MlxAffine<kBits, kBf16Scales>> : std::true_type {};
template <class F>
struct IsHalf16 : std::false_type {};
template <bool kBf16>
struct IsHalf16<Half16<kBf16>> : std::true_type {};
template <class F>
constexpr int rows_default(int n_max) {  // n_max: 4 or 8
  const bool four = n_max == 4;
  if constexpr (IsMlx<F>::value || std::is_same_v<F, Q8_0>)
    return four ? 8 : 4;
  else if constexpr (IsHalf16<F>::value)
    return four ? 4 : 8;
  else if constexpr (std::is_same_v<F, Q4_K>)
    return four ? 8 : 0;
  else if constexpr (std::is_same_v<F, Q2_K> || std::is_same_v<F, IQ2_XXS>)
    return four ? 4 : 0;
  else if constexpr (std::is_same_v<F, Q2_KC>)
    return 4;
  else
    return 0;
}

std::atomic<int> g_rows_split{-1};  // DS4_GEMV_ROWS_SPLIT
// Whether 9-16 uniform input rows go as two launches of <= 8 (default) instead of one N = 16 block
// (R = 2). On an H100 (session 35 call 2, bench_cuda_gemv --rows) the N = 16 form cost 12-25 one-row
// gemvs at every format and shape, 8 rows at the default 3-7: two launches of 8 are ~1.5-2.3x faster.
bool rows_split() { return env_setting(g_rows_split, "DS4_GEMV_ROWS_SPLIT", {0, 1}, "0 or 1", 1) == 1; }

// Weight rows per block up to 8 inputs: DS4_GEMV_ROWS_R / gemv_set_rows_weight_rows, 0 (the
// default) rows_default's choice; 2: R = 2 (MLX decoded once per unit); 4 / 8: the wide form.
// 9-16 inputs: two launches (8, then the rest: every input row in its own arithmetic either way)
// where each entry has all n rows in order (no live / counts / index arrays), else N = 16 at R = 2
// (a batch's routed experts: entries of 1-2 rows). Never changes a result (gemv_tuning.h).
template <class F, int V>
void launch_multi(const Args& a, const RowsArgs& ra, const float* x, float* y, cudaStream_t stream, unsigned batch) {
  if (ra.n > 8) {
    if (!rows_indexed(ra) && rows_split()) {
      RowsArgs lo = ra, hi = ra;
      lo.n = 8, hi.n = ra.n - 8;
      launch_multi<F, V>(a, lo, x, y, stream, batch);
      return launch_multi<F, V>(a, hi, x + 8 * ra.x_row, y + 8 * ra.y_row, stream, batch);
    }
    return launch_rows_n<F, 2, 16, V>(a, ra, x, y, stream, batch);
  }
  const int set = env_setting(g_rows_weight_rows, "DS4_GEMV_ROWS_R", {0, 2, 4, 8}, "0, 2, 4 or 8");
  auto with_n = [&](auto n_tag) {
    constexpr int N = decltype(n_tag)::value;
    const int r = set ? set : rows_default<F>(N);
    if (r == 8) return launch_rows_n<F, 8, N, V, true>(a, ra, x, y, stream, batch);
    if (r == 4) return launch_rows_n<F, 4, N, V, true>(a, ra, x, y, stream, batch);
    if (r == 2 || Expands<F, V>::value) return launch_rows_n<F, 2, N, V>(a, ra, x, y, stream, batch);
    return launch_rows_n<F, 4, N, V>(a, ra, x, y, stream, batch);
  };
  if (ra.n <= 4) return with_n(std::integral_constant<int, 4>{});
  return with_n(std::integral_constant<int, 8>{});
}

template <int kType>
void launch_multi_small(const Args& a, const RowsArgs& ra, const float* x, float* y, cudaStream_t stream,
                        unsigned batch) {
  const dim3 blocks(unsigned((a.rows + kMaxThreads / 32 - 1) / (kMaxThreads / 32)), batch);
  if (ra.n <= 4) gemv_rows_small_kernel<kType, 4><<<blocks, kMaxThreads, 0, stream>>>(a, ra, x, y);
  else if (ra.n <= 8) gemv_rows_small_kernel<kType, 8><<<blocks, kMaxThreads, 0, stream>>>(a, ra, x, y);
  else gemv_rows_small_kernel<kType, 16><<<blocks, kMaxThreads, 0, stream>>>(a, ra, x, y);
  DS4_CUDA_CHECK_LAUNCH();
}

}  // namespace

void check_gemv_rows(const char* who, const GemvRows& r) {
  if (r.n < 1 || r.n > kGemvMaxRows)
    throw InputError(std::string(who) + ": n " + std::to_string(r.n) + " is not in 1.." + std::to_string(kGemvMaxRows));
  if (r.idx_stride < 1 || r.idx_stride > kGemvMaxRows || ((r.x_idx || r.y_idx) && r.n > r.idx_stride))
    throw InputError(std::string(who) + ": idx_stride " + std::to_string(r.idx_stride) + " is not in " +
                     std::to_string((r.x_idx || r.y_idx) ? r.n : 1) + ".." + std::to_string(kGemvMaxRows));
}

void gemv_rows(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, cudaStream_t stream) {
  check_type(w);
  check_gemv_rows("cuda gemv_rows", r);
  GemvOptions rows_path;
  rows_path.cuda_cores = r.cuda_cores;
  if (takes_mlx4_tc(w, rows_path)) return gemv_mlx4_tc_rows(w, x, y, r, stream);  // decode's path: the same bits
  const GemvBatch& b = r.batch;
  if (b.count < 1 || b.count > 65535) throw InputError("cuda gemv_rows: batch count " + std::to_string(b.count));
  if (!use_small(w) && (b.x_stride % 4 != 0 || r.x_row % 4 != 0))
    throw InputError("cuda gemv_rows: x_row " + std::to_string(r.x_row) + " / x_stride " + std::to_string(b.x_stride) +
                     " must keep x 16-byte aligned");
  Args a = make_args(w);
  a.ids = b.ids;
  a.id_stride = int64_t(b.id_stride);
  a.id_scale_stride = int64_t(b.id_scale_stride);
  a.x_stride = b.x_stride;
  a.y_stride = b.y_stride;
  const RowsArgs ra = gemv_detail::rows_args(r);
  const unsigned batch = unsigned(b.count);
  if (use_small(w)) {
    if (w.type == DType::F32) return launch_multi_small<0>(a, ra, x, y, stream, batch);
    if (w.type == DType::F16) return launch_multi_small<1>(a, ra, x, y, stream, batch);
    return launch_multi_small<2>(a, ra, x, y, stream, batch);
  }
  visit_format(w, false, [&](auto pick) {
    using P = decltype(pick);
    launch_multi<typename P::F, P::V>(a, ra, x, y, stream, batch);
  });
}

int gemv_dot_generation(const WeightMatrix& w) {
  check_type(w);
  int v = 0;
  visit_format(w, false, [&](auto pick) { v = decltype(pick)::V; });
  return v;
}

void gemv_set_rows_weight_rows(int rows) {
  if (rows != 0 && rows != 2 && rows != 4 && rows != 8)
    throw InputError("cuda gemv_rows: weight rows per block " + std::to_string(rows) + " is not 0, 2, 4 or 8");
  g_rows_weight_rows.store(rows, std::memory_order_relaxed);
}

void gemv_set_threads(int threads) {
  if (threads != 0 && threads != 32 && threads != 64 && threads != 128)
    throw InputError("cuda gemv: threads " + std::to_string(threads) + " is not 0, 32, 64 or 128");
  g_threads = threads;
}

int gemv_threads() { return g_threads; }

}  // namespace ds4::cuda
