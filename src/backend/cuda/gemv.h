#pragma once
// Matrix-vector product y = W x on the GPU for every weight format we load. At batch 1
// (decode) this is the op that reads the model's bytes, so it is written to stream the
// weights once at close to copy bandwidth; x stays in f32.
#include <cuda_runtime.h>

#include "core/weight.h"

namespace ds4::cuda {

// y[rows] = W[rows x cols] x[cols], f32 accumulation. `w.data` (and for MLX `w.scales`,
// `w.biases`), `x` and `y` are device pointers; `x` 16-byte aligned.
// Formats: F32, BF16, F16, Q8_0, Q4_K, Q2_K, IQ2_XXS (ggml block layouts), MLX_Q4 / MLX_Q8
// (affine, group a multiple of 32, F16 or BF16 scales and biases).
// F32/F16/BF16 take any cols (a plain per-row kernel when not a multiple of 32).
// Throws ds4::InputError for another type, cols not a multiple of 32 (of 256 for the
// K-quants and IQ2_XXS), or a bad MLX group.
void gemv(const WeightMatrix& w, const float* x, float* y, cudaStream_t stream);

// How the block formats whose blocks are not 16-byte aligned (Q8_0, Q2_K, IQ2_XXS) are read.
//   kDirect: each thread loads its unit's bytes with 2- or 4-byte loads.
//   kStaged: each warp first copies a span of whole blocks into shared memory with
//            coalesced 16-byte loads, then decodes from there (needs a 16-byte aligned
//            row stride and data pointer; see gemv_can_stage).
//   kAuto:   staged where it can, else direct. Other formats ignore the choice.
enum class GemvPath : uint8_t { kAuto, kDirect, kStaged };

struct GemvOptions {
  GemvPath path = GemvPath::kAuto;
  // Rows per thread block (x is loaded once per 32 weights and reused for each of them):
  // 0 = the format's default (8; the decoded formats drop to 4 when the grid would have
  // fewer than 264 blocks); 1, 2, 4 or 8 to tune. Never changes a result.
  int rows_per_block = 0;
  // gemv's CUDA-core kernels even under DS4_MLX4_TC (gemv_mlx4_tc.h): products whose decode form
  // lives in a fused kernel that repeats gemv's arithmetic (Qwen's hyper-connection read), so the
  // decode step, its unfused form and the chunk's rows (GemvRows::cuda_cores) stay equal.
  bool cuda_cores = false;
};
void gemv(const WeightMatrix& w, const float* x, float* y, cudaStream_t stream, const GemvOptions& opt);
bool gemv_can_stage(const WeightMatrix& w);

// Several products of the same shape in one launch (MoE experts): entry b computes
// y + b*y_stride = W_e (x + b*x_stride) with e = ids[b] (device memory, read by the kernel
// so the choice can come from a router kernel and the launch can sit in a CUDA graph) or
// e = b without ids. W_e is `w` with data (and MLX scales/biases) advanced by e strides.
struct GemvBatch {
  int count = 1;
  const int32_t* ids = nullptr;  // device {count}, or null
  size_t id_stride = 0;          // bytes from one expert's weights to the next
  size_t id_scale_stride = 0;    // MLX: bytes from one expert's scales (and biases) to the next
  int64_t x_stride = 0;          // floats; a multiple of 4 (x stays 16-byte aligned)
  int64_t y_stride = 0;          // floats
};
void gemv_batched(const WeightMatrix& w, const float* x, float* y, const GemvBatch& b, cudaStream_t stream,
                  const GemvOptions& opt = {});

// Several input rows against one weight matrix (prefill chunks, speculative verify): each
// weight is read once and dotted with up to kGemvMaxRows input rows, so T rows cost about
// one gemv's memory traffic instead of T. Row i: y_i = W x_i with x_i = x + i * x_row,
// y_i = y + i * y_row (floats; x_row a multiple of 4). Every row equals gemv() with
// GemvPath::kDirect bit for bit (same per-thread unit order and reductions; the staged path
// of Q8_0/Q2_K/IQ2_XXS sums in another order, so against kAuto it agrees to rounding).
// With `batch` (count > 1 or ids) the launch is grouped as gemv_batched: entry b reads
// expert ids[b] and offsets x, y by b * batch.x_stride / y_stride; then:
//   live   device scalar: entries b >= *live do nothing (a router decides how many are used)
//   counts device {batch.count}: entry b has counts[b] rows (<= n and <= idx_stride), else n
//   x_idx, y_idx  device {batch.count, idx_stride}: entry b's row i reads x row x_idx[..]
//          and writes y row y_idx[..] (MoE: the tokens routed to one expert), else row i.
//   idx_stride  x_idx / y_idx entries' stride: moe_group's group_stride (kGemvMaxRows, or
//          kMoeSmallStride for a decode batch's entries; n <= idx_stride). The tensor-core
//          grouped paths take kGemvMaxRows only.
inline constexpr int kGemvMaxRows = 16;
struct GemvRows {
  int n = 1;  // 1..kGemvMaxRows
  int64_t x_row = 0, y_row = 0;
  GemvBatch batch;
  const int32_t* live = nullptr;
  const int32_t* counts = nullptr;
  const int32_t* x_idx = nullptr;
  const int32_t* y_idx = nullptr;
  int idx_stride = kGemvMaxRows;
  bool cuda_cores = false;  // GemvOptions::cuda_cores for the rows form
};
// GemvRows' checks shared by gemv_rows and gemv_act_rows (n, idx_stride); `who` names the caller.
void check_gemv_rows(const char* who, const GemvRows& r);
void gemv_rows(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, cudaStream_t stream);

// Kernel generation used by gemv, gemv_batched and gemv_rows (the plain per-row kernel is the
// same in all):
//   3 (default): kernel 2, except Q2_K read coalesced (each lane loads 8 quant bytes of one
//     block in all four 2-bit planes: 5 loads per 32 weights instead of 10, every loaded byte
//     used; x read in the matching order) and IQ2_XXS decoded the kernel-1 way.
//   2: exact float decode through the mantissa instead of int->float conversions,
//     first loads issued before the IQ2_XXS codebook is staged, next unit's loads before this
//     unit's math where they fit; kAuto reads Q8_0/Q2_K/IQ2_XXS directly.
//   1: the kernels measured on 2026-12-01 (kAuto stages where it can).
// Select with the environment variable DS4_GEMV_KERNEL=1|2|3 (read on first use) or
// gemv_set_kernel. Results of the generations agree to rounding (not bit for bit); gemv_rows
// equals gemv/kDirect bit for bit under each. Not thread safe against launches in flight on
// other threads.
int gemv_kernel();
void gemv_set_kernel(int version);  // 1, 2 or 3; throws InputError otherwise
// The arithmetic gemv, gemv_batched and gemv_rows decode `w` with under the current kernel
// generation: 1 = the format's dot, 2 = its dot2 where it has one (gemv_detail::dot_v). Kernels
// that must equal the GEMV bit for bit (qwen_next/cuda/hyper_fused.cu) take it from here.
// Throws InputError for a type gemv does not take.
int gemv_dot_generation(const WeightMatrix& w);

// gemv and gemv_batched (the direct kernel) launch as programmatic dependents of the kernel
// before them (sm_90 PDL): their blocks start while that kernel finishes and stream their
// first weights before waiting for it (griddepcontrol.wait), which hides a launch and a
// memory latency per gemv of a decode step. Results are unchanged (the same arithmetic).
// On by default; DS4_GEMV_PDL=0 (read on first use) or gemv_set_pdl(false) turns it off.
bool gemv_pdl();
void gemv_set_pdl(bool on);

// The models' small kernels (norms, routers, gates, attention and recurrent steps, the Qwen family's
// and the shared conv1d / delta-rule / top-k ones) as programmatic dependents too, each opening with
// gemv_detail::pdl_begin(trigger) (trigger its dependents, then wait, before it reads or writes anything),
// so a decode step's chain of small launches overlaps each launch with the kernel before it and the
// next gemv streams its first weights while they run. Exact (the same arithmetic); only with
// gemv_pdl() and for grids of at most two blocks an SM (gemv_device.cuh launch_small: the decode
// steps' launches, not a prefill chunk's). DS4_SMALL_PDL (0 or 1; unset = 1: H100 decode +4.2 %
// Qwen, +0.9 % DeepSeek, +0.4 % GLM, session 33) or small_kernel_pdl_set; off, the small kernels
// neither launch as dependents nor trigger theirs (the launches before session 32).
bool small_kernel_pdl();
void small_kernel_pdl_set(bool on);

// Whether gemv() takes this type (so callers can report unsupported weights up front).
bool gemv_supports(DType type);

}  // namespace ds4::cuda
