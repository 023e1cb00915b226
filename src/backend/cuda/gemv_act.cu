// GEMV on quantized activations (gemv_act.h): one kernel template over the integer decoders of
// gemv_act_formats.cuh, for gemv_act / gemv_act_batched (N = 1, PDL) and gemv_act_rows (N input
// rows per launch).
//
// Work split: a thread block owns R consecutive weight rows; thread t takes units t, t + T, ...
// (T = threads per block, which depends only on the row length, so gemv_act and gemv_act_rows
// walk a row identically). A unit is one lane's share of a weight block (Q8_0: the whole
// 32-value block; Q2_K / IQ2_XXS: 1/4 of a 256-value block, or 1/8 under
// gemv_act_set_lanes(8)), so the lanes of a warp read consecutive bytes of a row. Per step a lane loads its unit of the R rows, the activation
// bytes once for all R, sums exactly in integers (dp4a), adds the integers over the block's
// lanes (shuffles), and the block's first lane adds the block's f32 term to its row's partial
// sum. Partial sums are reduced by warp shuffles, then across warps in shared memory, in a
// fixed order: gemv_act_rows' row i equals gemv_act bit for bit.
//
// PDL (gemv_pdl()): gemv_act, gemv_act_batched and gemv_act_rows (unrouted) launch as
// programmatic dependents of the kernel before them (usually quantize_act): they issue their
// first weight loads, then griddepcontrol.wait, and only then read the activations (batched by
// expert ids: wait first, the ids come from a router kernel; gemv_act_rows routed by device
// data -- ids, live, counts, x_idx, y_idx -- launches plainly). The activations are read with plain loads, not __ldg: ptxas may schedule a
// read-only (ld.global.nc) load above the wait (gemv.cu's note); test_gemv_act checks the
// result after a late-writing kernel. (gemv_act_rows launched plainly until 2026-12-04, when at
// n = 1 it cost ~2x one gemv_act on the H200; the bench's rows table shows what PDL changes.)
#include <algorithm>
#include <string>
#include <type_traits>

#include "backend/cuda/check.h"
#include "backend/cuda/gemv_act.h"
#include "backend/cuda/gemv_act_formats.cuh"
#include "backend/cuda/gemv_act_rows_mma.h"
#include "backend/cuda/gemv_device.cuh"
#include "backend/cuda/gemv_tuning.h"
#include "backend/cuda/iq2xxs_grid.h"
#include "backend/cuda/smem_opt_in.h"
#include "core/error.h"

namespace ds4::cuda {

namespace {

using namespace gemv_act_detail;
using gemv_detail::finish_rows;
using gemv_detail::launch_maybe_pdl_smem;
using gemv_detail::pdl_launch_dependents;
using gemv_detail::pdl_wait;
using gemv_detail::rows_entry;
using gemv_detail::rows_indexed;
using gemv_detail::RowsArgs;

constexpr int kThreads = kActThreads;

__device__ const uint64_t d_act_iq2xxs_grid[256] = {DS4_IQ2XXS_GRID_VALUES};

// The activation rows of a launch: base pointers (values, scales, bsums of value 0).
struct XArgs {
  const int8_t* q;
  const float* d;
  const int16_t* bs;
};

template <class F>
__device__ __forceinline__ XRow x_at(const XArgs& x, int64_t values) {
  return XRow{x.q + values, x.d + values / F::kValues, x.bs ? x.bs + values / 16 : nullptr};
}

// This block's entry (blockIdx.y): points `a` at expert ids[b] (b without ids); returns b.
__device__ __forceinline__ int64_t act_entry(Args& a) {
  const int64_t b = blockIdx.y;
  if (b == 0 && !a.ids) return 0;
  a.data += (a.ids ? a.ids[b] : b) * a.id_stride;
  return b;
}

// ActIQ2_XXS4L's lane tables: codebook entry e's selector codes (iq2_grid_codes) at e, sign
// field f's (iq2_sign_codes) at 256 + f; built at compile time from the same functions.
struct LaneTableValues {
  uint32_t v[384];
};
constexpr int kLaneTableWords = 384 * 32;  // 32 lane copies: 48 KiB of dynamic shared memory
constexpr LaneTableValues lane_table_values() {
  constexpr uint64_t grid[256] = {DS4_IQ2XXS_GRID_VALUES};
  LaneTableValues t{};
  for (int e = 0; e < 256; ++e) t.v[e] = iq2_grid_codes(grid[e]);
  for (int f = 0; f < 128; ++f) t.v[256 + f] = iq2_sign_codes(uint32_t(f));
  return t;
}
__device__ const LaneTableValues d_lane_table_values = lane_table_values();
// Spot checks of the compile-time values against entries worked by hand: codebook entry 0 is
// eight 8s (codes 0), entry 1 is 43 then seven 8s (code 2 in nibble 0), entry 2 two 25s then six
// 8s (code 1 in nibbles 0, 1); sign field 0 has no negative weight, field 1 negates weights 0 and
// 7 (its parity bit), field 3 weights 0 and 1.
static_assert(lane_table_values().v[0] == 0u && lane_table_values().v[1] == 2u && lane_table_values().v[2] == 0x11u);
static_assert(lane_table_values().v[256] == 0u && lane_table_values().v[257] == 0x40000004u &&
              lane_table_values().v[259] == 0x44u);
extern __shared__ uint4 gemv_act_dynamic_smem[];

// Which tables a decoder stages: 0 none, 1 the block's one copy (below), 2 the lane tables.
template <class F, class = void>
struct HasLaneTables : std::false_type {};
template <class F>
struct HasLaneTables<F, std::void_t<decltype(F::kLaneTables)>> : std::true_type {};
template <class F, class = void>
struct HasBlockTables : std::false_type {};
template <class F>
struct HasBlockTables<F, std::void_t<decltype(F::kSignTable)>> : std::true_type {};
template <class F>
constexpr int table_kind() {
  return HasLaneTables<F>::value ? 2 : HasBlockTables<F>::value ? 1 : 0;
}

// IQ2_XXS stages its codebook (and, ActIQ2_XXS4T, the sign masks; the byte-permute decoders,
// the codebook's and the sign fields' selector codes) in shared memory (lanes index them at
// random: constant memory would serialize); the other formats need nothing.
template <class F, int K = table_kind<F>()>
struct Smem {
  __device__ Tables stage() { return Tables{nullptr, nullptr}; }
};
// The lane tables (ActIQ2_XXS4L), in the launch's dynamic shared memory: thread i writes lane
// copies 4 (i % 8) .. + 3 of entry i / 8 as one 16-byte store (a warp's stores are 512
// consecutive bytes).
template <class F>
struct Smem<F, 2> {
  __device__ Tables stage() {
    uint4* tab = gemv_act_dynamic_smem;
    for (int i = threadIdx.x; i < kLaneTableWords / 4; i += blockDim.x) {
      const uint32_t v = d_lane_table_values.v[i >> 3];
      tab[i] = make_uint4(v, v, v, v);
    }
    __syncthreads();
    const uint32_t* words = reinterpret_cast<const uint32_t*>(tab) + (threadIdx.x & 31);
    Tables t{nullptr, nullptr};
    t.lane_codes = words;
    t.lane_signs = words + 256 * 32;
    return t;
  }
};
template <class F>
struct Smem<F, 1> {
  uint64_t grid[F::kCodes ? 1 : 256], signs[F::kSignTable ? 128 : 1];
  uint32_t codes[F::kCodes ? 256 : 1], sign_codes[F::kCodes ? 128 : 1];
  __device__ Tables stage() {
    if constexpr (F::kCodes) {
      for (int i = threadIdx.x; i < 256; i += blockDim.x) codes[i] = iq2_grid_codes(d_act_iq2xxs_grid[i]);
      for (int i = threadIdx.x; i < 128; i += blockDim.x) sign_codes[i] = iq2_sign_codes(uint32_t(i));
    } else {
      for (int i = threadIdx.x; i < 256; i += blockDim.x) grid[i] = d_act_iq2xxs_grid[i];
    }
    if constexpr (F::kSignTable)
      for (int i = threadIdx.x; i < 128; i += blockDim.x) signs[i] = iq2_sign_mask(uint32_t(i));
    __syncthreads();
    return Tables{F::kCodes ? nullptr : grid, F::kSignTable ? signs : nullptr, F::kCodes ? codes : nullptr,
                  F::kCodes ? sign_codes : nullptr};
  }
};

// kRows = false: gemv_act / gemv_act_batched (N == 1; PDL waits as described above).
// kRows = true: gemv_act_rows (N input rows, n of them live; gemv_rows' entry semantics).
// The block walks `groups` consecutive groups of R rows (the last block fewer), one step at a
// time: the next step's weights (the next group's first step at a group's end) are issued as
// soon as this step's are decoded, so a block's memory latency overlaps its own math and
// reductions instead of being paid once per tiny block (every real decode shape is 1-2 steps
// per thread: before this a block was load -> wait -> math -> reduce -> exit).
template <class F, int R, int N, bool kRows>
__global__ void __launch_bounds__(kThreads) gemv_act_kernel(Args a, XArgs xa, RowsArgs ra, float* __restrict__ y,
                                                            int groups) {
  int n = 1;
  int64_t xo[N], yo[N];  // per input row: activation value offset, output offset
  // Batched by device ids: wait before reading them (the first weights cannot go out earlier).
  // gemv_act_rows routed by device data launches plainly (launch_kernel), so its reads of live /
  // counts / x_idx / y_idx follow the kernel before; unrouted, rows_entry reads no device memory.
  // (One predicate, a.ids alone: tools/device/pdl_sass_check.py follows exactly this one.)
  const bool waited = a.ids != nullptr;
  // IQ2_XXS's tables are constants, not the predecessor's output: they are staged before the
  // PDL wait (under a programmatic launch that work overlaps the kernel before).
  __shared__ Smem<F> smem;
  Tables tables{nullptr, nullptr};
  pdl_launch_dependents();
  if (waited) {
    if constexpr (!kRows) tables = smem.stage();
    pdl_wait();
  }
  if constexpr (kRows) {
    // whole block, before any other barrier; offsets in activation values
    if (!rows_entry<N>(a, ra, n, xo, yo, [](Args& e) { return act_entry(e); })) return;
    // Routed by device ids: the tables only for a live entry (the lane tables are 48 KiB; these
    // launches are never programmatic, so there is nothing before the wait to overlap).
    if (waited) tables = smem.stage();
  } else {
    const int64_t b = act_entry(a);
    xo[0] = b * a.x_stride;
    yo[0] = b * a.y_stride;
  }
  const int lane = threadIdx.x & 31;
  const int T = int(blockDim.x);
  const int64_t units = a.cols / F::kValues * F::kLanes;
  // Block-uniform steps (the shuffles need whole warps; a trip count the compiler sees is the
  // same in every lane keeps them plain SHFLs, not the collective fallback: 40 % fewer
  // instructions in the IQ2_XXS loop): a lane past the row's end adds nothing. units is a
  // multiple of kLanes, so a block's lanes are all live or none.
  const int64_t steps = (units + T - 1) / T;
  const int64_t group0 = int64_t(blockIdx.x) * groups;
  const int64_t total = min(int64_t(groups), (a.rows + R - 1) / R - group0) * steps;
  // Zero once: a lane past the row's end keeps whatever it holds (zeros, or its last unit), its
  // block's lanes are all past the end too (the shuffles never mix it into a live block), and
  // its terms are never added. Per-step zeroing cost 9 selects per row (Q8_0) in the loop.
  typename F::Raw raw[R] = {};
  auto load_row = [&](int r, int64_t group, int64_t u) {
    raw[r] = F::load(a, a.data + min(group * R + r, a.rows - 1) * a.row_stride, u);
  };
  if (threadIdx.x < units)  // weights only: before the wait
#pragma unroll
    for (int r = 0; r < R; ++r) load_row(r, group0, threadIdx.x);
  if (!waited) {
    tables = smem.stage();  // while the first weights are in flight
    pdl_wait();
  }
  // N == 1 keeps its activation unit in registers: with one step per thread (most shapes) it is
  // loaded once for all the block's groups.
  constexpr bool kHoldX = N == 1;
  typename F::X xheld{};
  float acc[R][N];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < N; ++i) acc[r][i] = 0.f;
  int64_t group = group0, step = 0;
  for (int64_t k = 0; k < total; ++k) {
    const int64_t u = threadIdx.x + step * T;
    const bool live = u < units;
    const bool first = live && (lane % F::kLanes) == 0;
    // One code path for every N (gemv_act is N = 1): decode the R rows' units once, then per
    // input row the R integer dots, the block's lanes added in xor rounds with the R rows'
    // shuffles of a round issued together (independent: no latency chain per row), then the
    // R f32 terms. Integer sums are exact and every f32 op is the same in every instantiation,
    // so N, R, the groups per block and n never change a bit of a row's result.
    // N == 1: the activation load is written before the decode, so its latency can overlap
    // prep's shared-memory lookups whatever ptxas schedules. (Runs 1 and 2 of 2026-12-04 had it
    // after prep; run 2's build, with other register pressure, ran IQ2_XXS's single launches at
    // 9 % of copy against run 1's 16 %, gemv_act_rows n = 1 unchanged: the cause is not measured,
    // and this order is unmeasured.)
    // N > 1 pipelines its activation loads one input ahead: input 0's before the decode (as N == 1
    // does), input i + 1's before input i's dots. A routed entry of a decode batch holds 1-2
    // inputs, and loading each after the decode left one L2 round trip exposed per step (the
    // rows kernel ran IQ2_XXS / Q2_K entries at ~half the speed of N == 1 launches on the H100,
    // bench_cuda_gemv --routed, 2026-12-05). Lanes past the row's end keep zeros, as before.
    typename F::X xnext{};
    if constexpr (kHoldX) {
      if (live && (k == 0 || steps > 1)) xheld = F::load_x(x_at<F>(xa, xo[0]), u);
    } else if (live) {
      xnext = F::load_x(x_at<F>(xa, xo[0]), u);
    }
    typename F::W w[R];
#pragma unroll
    for (int r = 0; r < R; ++r) w[r] = F::prep(raw[r], u, tables);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      if (i >= n) break;
      typename F::X xv;
      if constexpr (kHoldX) {
        xv = xheld;
      } else {
        xv = xnext;
        if (i + 1 < N && i + 1 < n && live) xnext = F::load_x(x_at<F>(xa, xo[i + 1 < N ? i + 1 : i]), u);
      }
      typename F::Sum s[R];
#pragma unroll
      for (int r = 0; r < R; ++r) s[r] = F::dot(w[r], xv);
#pragma unroll
      for (int o = 1; o < F::kLanes; o <<= 1)
#pragma unroll
        for (int r = 0; r < R; ++r) s[r] = F::add(s[r], F::shfl_xor(s[r], o));
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const float t = F::term(w[r], s[r], xv);
        if (first) acc[r][i] += t;
      }
    }
    // The next step's weights (the next group's first step at a group's end): issued after this
    // step's math, so the raw registers are reused rather than live beside the decoded ones
    // (issuing them right after prep took Q8_0 R4 from 64 to 96 registers and R8 to 213, and
    // the one-step shapes ran up to 15 points of copy below session 11's in that build's
    // sweep), and in flight during the group's finish (shuffles, shared memory, barrier).
    const bool group_end = step + 1 == steps;
    const int64_t next_u = group_end ? int64_t(threadIdx.x) : u + T;
    if (k + 1 < total && next_u < units)
#pragma unroll
      for (int r = 0; r < R; ++r) load_row(r, group_end ? group + 1 : group, next_u);
    if (group_end) {
      finish_rows<R, N, kThreads / 32>(acc, group * R, a.rows, n, yo, y);
      if (k + 1 < total) {
        __syncthreads();  // finish_rows' shared partials are read before the next group writes them
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int i = 0; i < N; ++i) acc[r][i] = 0.f;
      }
      ++group;
      step = 0;
    } else {
      ++step;
    }
  }
}

// Threads per block from the row length alone (gemv_act_rows must walk rows as gemv_act does).
int threads_for(int64_t units) { return act_threads_for(units); }

// Launch shape of gemv_act / _batched (N = 1), from the H200 sweeps of 2026-12-04 (bench_cuda_gemv
// --act 10, bench/results/act-speed-h200-2026-12-04/bench_act_1.txt and _2.txt: lanes x rows per
// block R x row groups per block G on every shape; % of copy below, run 1 / run 2 where both
// speak; single shapes move by up to ~10 points between runs, so the batched shapes decide). gemv_act_set_rows_per_block /
// gemv_act_set_groups override them (the bench's sweep). Neither changes a result.
//
// Rows per block: R rows share each activation load and the block's fixed costs (IQ2_XXS's
// table staging, the finish); fewer rows mean more blocks in flight.
//   Q8_0: 4, but 8 for rows of more than 4096 values (wide 2048x7168: 75 vs 69 at R4) and of at
//         most 1024 (32768x1024: 85 at R8 G4 vs 76 at R4 G4);
//   Q2_K: 4 (was 8: R4 is ahead on 6 of 9 shapes, e.g. tall 36 vs 32, gate|up x6 51 vs 48 at G2);
//   IQ2_XXS: 4 (best or within 2 points on the batched expert shapes).
int g_rows_per_block = 0;  // gemv_act_set_rows_per_block; 0 = auto

int act_rows_per_block(DType t, int64_t cols) {
  if (g_rows_per_block) return g_rows_per_block;
  switch (t) {
    case DType::IQ2_XXS: return 4;
    case DType::Q2_K: return 4;
    default: return cols > 4096 || cols <= 1024 ? 8 : 4;
  }
}

// Row groups per block: the block walks G groups of R rows one after another with the next
// group's weights in flight (gemv_act_kernel). That amortizes the block's start, the IQ2_XXS
// table staging and the finish, but leaves fewer blocks; the sweep says it pays only where a
// block's work is small next to those costs:
//   Q8_0: 2 for rows of at most 1024 values (32-thread blocks: 32768x1024 at R8: G1 78 / 84,
//         G2 76 / 87, G4 85 / 68), else 1 (G2+ lost 5-40 points on the 4096-wide shapes);
//   Q2_K: 2 for batched (expert) launches (gate|up x6 51 / 58 vs 49 / 55 at G1, glm down x8
//         45 / 51 vs 40 / 48), else 1;
//   IQ2_XXS: 2 for batched launches (gate|up x6 26 / 31 vs 24 / 29 at G1; down x6 22 / 26 vs
//         20 / 23; G4 was 26 / 15 there), else 1.
// gemv_act_rows over plain rows takes 1 (its blocks already carry n input rows' work) unless set.
// Routed (MoE entries, live / counts from the device): a decode batch's entry holds 1-2 rows, so
// a block's work is small as in the batched singles; the H100 sweep of 2026-12-05
// (bench_cuda_gemv --routed 8, bench/results/session16-h100-2026-12-05/call2_routed.txt, entries of
// S = 4 rows, n = 1..16 tokens) had G4 ahead for IQ2_XXS (n = 16: 27.5 vs 20.6 % of copy at G1)
// and Q2_K (48.9 vs 31.0), G2 for Q8_0 (95.3 vs 85.9; G1 only at n = 1, 88 vs 85).
int g_groups = 0;  // gemv_act_set_groups; 0 = auto

int act_groups_per_block(DType t, int64_t cols, int64_t batch, bool rows_kernel, bool routed) {
  if (g_groups) return g_groups;
  if (rows_kernel && routed) return t == DType::IQ2_XXS || t == DType::Q2_K ? 4 : 2;
  if (rows_kernel) return 1;
  switch (t) {
    case DType::IQ2_XXS: return batch > 1 ? 2 : 1;
    case DType::Q2_K: return batch > 1 ? 2 : 1;
    default: return cols <= 1024 ? 2 : 1;
  }
}

// Row groups per block of a lane-table launch (ActIQ2_XXS4L): each block stages 48 KiB of tables
// (~a row group's worth of L1 work on a 4096-value row), so blocks walk enough groups that the
// launch is ~3 blocks per SM (4 fit by shared memory) instead of one block per 1-2 groups.
int lane_table_groups(int64_t row_groups, unsigned batch) {
  if (g_groups) return g_groups;
  const int64_t target = 3 * int64_t(gemv_detail::sm_count());
  // (at least 2 blocks per entry: a routed launch's batch counts its possible entries, not the
  // live ones, and one 4-warp block walking a whole expert would leave most SMs idle)
  const int64_t per_entry = std::max<int64_t>(2, target / std::max<unsigned>(batch, 1));
  return int(std::max<int64_t>(1, (row_groups + per_entry - 1) / per_entry));
}

// Row groups per block for decoder F: the lane tables' own rule, else the per-format table.
template <class F>
int groups_for(DType t, int64_t row_groups, int64_t cols, unsigned batch, bool rows_kernel, bool routed) {
  if constexpr (table_kind<F>() == 2) return lane_table_groups(row_groups, batch);
  else return act_groups_per_block(t, cols, batch, rows_kernel, routed);
}

template <class F, int R, int N, bool kRows>
void launch_kernel(DType t, const Args& a, const XArgs& xa, const RowsArgs& ra, float* y, cudaStream_t stream,
                   unsigned batch) {
  const bool routed = kRows && (a.ids || rows_indexed(ra));
  const int64_t row_groups = (a.rows + R - 1) / R;
  constexpr bool kLaneTables = table_kind<F>() == 2;
  const int groups = groups_for<F>(t, row_groups, a.cols, batch, kRows, routed);
  const dim3 blocks(unsigned((row_groups + groups - 1) / groups), batch);
  const int threads = threads_for(a.cols / F::kValues * F::kLanes);
  auto* kernel = gemv_act_kernel<F, R, N, kRows>;
  size_t smem = 0;
  if constexpr (kLaneTables) {
    smem = size_t(kLaneTableWords) * 4;
    opt_in_smem_once<gemv_act_kernel<F, R, N, kRows>>(smem);  // above the default 48 KiB with the static part
  }
  launch_maybe_pdl_smem(gemv_pdl() && !routed, kernel, blocks, threads, smem, stream, a, xa, ra, y, groups);
}

template <class F>
void launch_single(DType t, const Args& a, const XArgs& xa, float* y, cudaStream_t stream, unsigned batch) {
  const RowsArgs ra{1, 0, 0, nullptr, nullptr, nullptr, nullptr, kGemvMaxRows};
  switch (act_rows_per_block(t, a.cols)) {
    case 2: return launch_kernel<F, 2, 1, false>(t, a, xa, ra, y, stream, batch);
    case 4: return launch_kernel<F, 4, 1, false>(t, a, xa, ra, y, stream, batch);
    default: return launch_kernel<F, 8, 1, false>(t, a, xa, ra, y, stream, batch);
  }
}

int g_rows_kernel_rows = 0;  // gemv_act_set_rows_kernel_rows; 0 = 2

// gemv_act_rows: N = the smallest of 4, 8, 16 holding n; R keeps the decoded weights of R rows
// (W: 11-18 registers each) and R * N accumulators in registers. Above 4 inputs R is 2 unless the
// bench sets it (4 or 8: each activation load serves more weight rows; bench_cuda_gemv --act's
// rows-per-block table and bench_deepseek_v4_cuda --rows-ab measure it).
template <class F, int N>
void launch_rows_n(DType t, const Args& a, const XArgs& xa, const RowsArgs& ra, float* y, cudaStream_t stream,
                   unsigned batch) {
  switch (g_rows_kernel_rows) {
    case 4: return launch_kernel<F, 4, N, true>(t, a, xa, ra, y, stream, batch);
    case 8: return launch_kernel<F, 8, N, true>(t, a, xa, ra, y, stream, batch);
    default: return launch_kernel<F, 2, N, true>(t, a, xa, ra, y, stream, batch);
  }
}

bool g_q8_split = true;  // gemv_act_set_q8_split
int g_rows_mma = 0;  // gemv_act_set_rows_mma: 0 auto, 1 from 2 rows, -1 never

// The fewest plain Q8_0 input rows the tensor-core kernel takes under auto (H100, bench_cuda_gemv
// --rows-mma, session 19 call 11, DeepSeek's dense shapes, same run: at n = 4 it took 0.84-0.98x
// the dp4a kernel's time on all six, at n = 8 0.52-0.74x, at n = 16 0.37-0.54x; at n = 2 0.97-1.13x).
constexpr int kRowsMmaMin = 4;

template <class F>
void launch_rows(DType t, const Args& a, const XArgs& xa, const RowsArgs& ra, float* y, cudaStream_t stream, unsigned batch) {
  if (ra.n <= 4) return launch_kernel<F, 4, 4, true>(t, a, xa, ra, y, stream, batch);
  if (ra.n <= 8) return launch_rows_n<F, 8>(t, a, xa, ra, y, stream, batch);
  // Q8_0 over 9..16 plain input rows (a decode batch's dense projections): inputs 0..7, then the
  // rest, each through the 8-input kernel. That reads the weight twice, yet the 16-input kernel
  // costs more than two 8-input ones (H100, bench_cuda_gemv --act-mma, DeepSeek's dense shapes:
  // n = 8 at 2.2-2.7x one gemv_act, n = 16 at 5.1-6.8x; bench/results/session18-h100-2026-12-05).
  // The 2-bit formats keep the 16-input kernel (IQ2_XXS n = 16 at 5.2x < 2 x 3.6x). Routed launches
  // (entries by device data) keep it too: their inputs are not consecutive rows. Either way each
  // row is computed as gemv_act computes it: the split never changes a bit.
  if constexpr (std::is_same_v<F, ActQ8_0>) {
    const bool routed = a.ids || rows_indexed(ra);
    if (g_q8_split && !routed) {
      constexpr int kHalf = 8;
      RowsArgs first = ra, rest = ra;
      first.n = kHalf, rest.n = ra.n - kHalf;
      const int64_t v = kHalf * ra.x_row;  // activation values to input row 8 (x_row: whole blocks)
      const XArgs xr{xa.q + v, xa.d + v / F::kValues, xa.bs ? xa.bs + v / 16 : nullptr};
      launch_rows_n<F, kHalf>(t, a, xa, first, y, stream, batch);
      launch_rows_n<F, kHalf>(t, a, xr, rest, y + kHalf * ra.y_row, stream, batch);
      return;
    }
  }
  launch_rows_n<F, 16>(t, a, xa, ra, y, stream, batch);
}

int g_lanes = 0;             // gemv_act_set_lanes; 0 = 4
bool g_iq2_sign_table = false;  // gemv_act_set_iq2_sign_table
bool g_iq2_permute = false;     // gemv_act_set_iq2_permute
bool g_iq2_lane_tables = false;  // gemv_act_set_iq2_lane_tables
bool g_q2k_aligned = false;      // gemv_act_set_q2k_aligned

// The one place that maps a weight type (and the lanes setting) to its decoder: gemv_act,
// gemv_act_batched and gemv_act_rows all go through it, so gemv_act_rows walks rows as gemv_act.
template <class Fn>
void visit_act_format(DType t, Fn&& fn) {
  const bool eight = g_lanes == 8;
  switch (t) {
    case DType::Q8_0: return fn(ActQ8_0{});
    case DType::Q2_K: return eight ? fn(ActQ2_K{}) : g_q2k_aligned ? fn(ActQ2_K4A{}) : fn(ActQ2_K4{});
    case DType::IQ2_XXS:
      if (g_iq2_lane_tables && !eight) return fn(ActIQ2_XXS4L{});
      if (g_iq2_permute) return eight ? fn(ActIQ2_XXSP{}) : fn(ActIQ2_XXS4P{});
      return eight ? fn(ActIQ2_XXS{}) : g_iq2_sign_table ? fn(ActIQ2_XXS4T{}) : fn(ActIQ2_XXS4{});
    default: throw InputError("cuda gemv_act: weight type " + std::string(dtype_name(t)) + " is not supported");
  }
}

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }

// The weight / activation pair, checked; Args for the kernel (batch fields zero).
Args make_args(const char* who, const WeightMatrix& w, const ActQ8View& x) {
  if (!gemv_act_supports(w.type))
    throw InputError(std::string(who) + ": weight type " + std::string(dtype_name(w.type)) +
                     " has no quantized-activation product");
  const ActBlock want = act_block_for(w.type);
  if (x.block != want)
    throw InputError(std::string(who) + ": " + std::string(dtype_name(w.type)) + " weights take " +
                     (want == ActBlock::kQ8_0 ? "Q8_0" : "Q8_K") + " activation blocks");
  const int64_t bv = act_values_per_scale(want);
  if (w.rows <= 0 || w.cols <= 0 || w.cols % bv != 0)
    throw InputError(std::string(who) + ": " + std::string(dtype_name(w.type)) + " weight of " +
                     std::to_string(w.rows) + "x" + std::to_string(w.cols) + ": cols must be a positive multiple of " +
                     std::to_string(bv));
  if (x.n != w.cols)
    throw InputError(std::string(who) + ": activation of " + std::to_string(x.n) + " values for rows of " +
                     std::to_string(w.cols));
  if (!x.q || !x.d || !aligned(x.q, 16) || !aligned(x.d, 4) ||
      (want == ActBlock::kQ8_K && (!x.bsums || !aligned(x.bsums, 8))))  // Q2_K's 4-lane decoder reads 8 bytes
    throw InputError(std::string(who) + ": activation pointers missing or misaligned (q 16 bytes, d 4, bsums 8)");
  return Args{static_cast<const uint8_t*>(w.data), w.row_stride_bytes(), nullptr, nullptr, 0, 0, w.rows, w.cols,
              nullptr, 0, 0, 0, 0};
}

// Entry strides must keep every entry's activation on whole blocks and 16-byte aligned.
void check_stride(const char* who, const char* what, int64_t v, ActBlock block) {
  const int64_t m = std::max<int64_t>(act_values_per_scale(block), 16);
  if (v < 0 || v % m != 0)
    throw InputError(std::string(who) + ": " + what + " " + std::to_string(v) + " is not a multiple of " +
                     std::to_string(m) + " activation values");
}

void set_batch(const char* who, Args& a, const GemvBatch& b, ActBlock block) {
  if (b.count < 1 || b.count > 65535) throw InputError(std::string(who) + ": batch count " + std::to_string(b.count));
  check_stride(who, "x_stride", b.x_stride, block);
  a.ids = b.ids;
  a.id_stride = int64_t(b.id_stride);
  a.x_stride = b.x_stride;
  a.y_stride = b.y_stride;
}

XArgs x_args(const ActQ8View& x) { return XArgs{x.q, x.d, x.bsums}; }

}  // namespace

void gemv_act_set_rows_per_block(int rows) {
  if (rows != 0 && rows != 2 && rows != 4 && rows != 8)
    throw InputError("cuda gemv_act: rows per block " + std::to_string(rows) + " is not 0, 2, 4 or 8");
  g_rows_per_block = rows;
}

void gemv_act_set_groups(int groups) {
  if (groups != 0 && groups != 1 && groups != 2 && groups != 4 && groups != 8 && groups != 16 && groups != 32)
    throw InputError("cuda gemv_act: row groups per block " + std::to_string(groups) +
                     " is not 0, 1, 2, 4, 8, 16 or 32");
  g_groups = groups;
}

void gemv_act_set_rows_kernel_rows(int rows) {
  if (rows != 0 && rows != 2 && rows != 4 && rows != 8)
    throw InputError("cuda gemv_act_rows: rows per block " + std::to_string(rows) + " is not 0, 2, 4 or 8");
  g_rows_kernel_rows = rows;
}

void gemv_act_set_q8_split(bool on) { g_q8_split = on; }

void gemv_act_set_rows_mma(int mode) {
  if (mode < -1 || mode > 1) throw InputError("cuda gemv_act_rows: mma mode " + std::to_string(mode) + " is not -1, 0 or 1");
  g_rows_mma = mode;
}

GemvActConfig gemv_act_config(DType type, int64_t rows, int64_t cols, int64_t batch) {
  GemvActConfig c{};
  visit_act_format(type, [&](auto f) {
    using F = decltype(f);
    c.rows_per_block = act_rows_per_block(type, cols);
    c.iq2_lane_tables = table_kind<F>() == 2;
    c.groups = groups_for<F>(type, (rows + c.rows_per_block - 1) / c.rows_per_block, cols, unsigned(batch), false, false);
    c.iq2_permute = type == DType::IQ2_XXS && g_iq2_permute && !c.iq2_lane_tables;
    c.q2k_aligned = std::is_same_v<F, ActQ2_K4A>;
    c.lanes = F::kLanes;
    c.threads = threads_for(cols / F::kValues * F::kLanes);
  });
  return c;
}

void gemv_act_set_lanes(int lanes) {
  if (lanes != 0 && lanes != 4 && lanes != 8)
    throw InputError("cuda gemv_act: lanes per block " + std::to_string(lanes) + " is not 0, 4 or 8");
  g_lanes = lanes;
}

void gemv_act_set_iq2_sign_table(bool on) { g_iq2_sign_table = on; }

void gemv_act_set_iq2_permute(bool on) { g_iq2_permute = on; }

void gemv_act_set_iq2_lane_tables(bool on) { g_iq2_lane_tables = on; }

void gemv_act_set_q2k_aligned(bool on) { g_q2k_aligned = on; }

bool gemv_act_supports(DType type) { return act_block_for(type) != ActBlock::kNone; }

void gemv_act(const WeightMatrix& w, const ActQ8View& x, float* y, cudaStream_t stream) {
  const Args a = make_args("cuda gemv_act", w, x);
  visit_act_format(w.type, [&](auto f) { launch_single<decltype(f)>(w.type, a, x_args(x), y, stream, 1); });
}

void gemv_act_batched(const WeightMatrix& w, const ActQ8View& x, float* y, const GemvBatch& batch,
                      cudaStream_t stream) {
  Args a = make_args("cuda gemv_act_batched", w, x);
  set_batch("cuda gemv_act_batched", a, batch, x.block);
  visit_act_format(w.type,
                   [&](auto f) { launch_single<decltype(f)>(w.type, a, x_args(x), y, stream, unsigned(batch.count)); });
}

void gemv_act_rows(const WeightMatrix& w, const ActQ8View& x, float* y, const GemvRows& r, cudaStream_t stream) {
  constexpr const char* kWho = "cuda gemv_act_rows";
  Args a = make_args(kWho, w, x);
  check_gemv_rows(kWho, r);
  set_batch(kWho, a, r.batch, x.block);
  check_stride(kWho, "x_row", r.x_row, x.block);
  // Q8_0 over kRowsMmaMin..16 plain rows (a decode batch's dense products, verify windows, small
  // chunks): the tensor-core kernel in gemv_act's order (gemv_act_rows_mma.h), the same bits.
  const bool plain = r.batch.count == 1 && !r.batch.ids && !r.live && !r.counts && !r.x_idx && !r.y_idx;
  const int mma_min = g_rows_mma == 0 ? kRowsMmaMin : g_rows_mma == 1 ? 2 : kGemvMaxRows + 1;
  if (plain && r.n >= mma_min && gemv_act_rows_q8_mma_fits(w))
    return gemv_act_rows_q8_mma(w, x, y, r.n, r.x_row, r.y_row, stream);
  const RowsArgs ra = gemv_detail::rows_args(r);
  visit_act_format(w.type,
                   [&](auto f) { launch_rows<decltype(f)>(w.type, a, x_args(x), ra, y, stream, unsigned(r.batch.count)); });
}

}  // namespace ds4::cuda
