#pragma once
// Manifold-constrained hyper-connections (mHC) on the GPU, one token (decode): the same math
// as backend/cpu/hyper_connections.h (DeepSeek V4, GLM 5.x). The residual is n_hc streams
// {n_hc, hidden}. The mix projection is a plain gemv the caller runs on the raw streams,
// mix_raw = fn x, so every weight format works: the unweighted flat rmsnorm the CPU applies
// before fn is a scalar, fn(rmsnorm(x)) = rsqrt(mean(x^2) + eps) (fn x), and the kernels
// apply it (one launch fewer per collapse; the order of rounding differs from the CPU's).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"

namespace ds4::cuda {

struct HcDims {
  int64_t n_hc = 4;    // at most kMaxHc
  int64_t hidden = 0;
  int sinkhorn_iters = 20;
  float hc_eps = 1e-6f;    // Sinkhorn floor and pre offset
  float norm_eps = 1e-6f;  // the flat rmsnorm before fn, and the optional output norm
  // mix_raw holds this many partial products over consecutive column ranges of fn (a long,
  // short matrix split so its gemv spreads over the GPU), summed here in order.
  int64_t mix_splits = 1;
};
inline constexpr int64_t kMaxHc = 16;

// mix_raw {mix_splits, (2+n)*n} = fn x, scale {3}, base {(2+n)*n} (device) -> pre (Sinkhorn split, the
// CPU's op order: sigmoid pre/post, row softmax + eps, column pass, (iters-1) x rows+columns),
// collapsed {hidden} = sum_j pre[j] x[j], then rmsnorm'd with out_norm {hidden} when not null
// (the block's input norm); post {n}, comb {n, n} (comb[j*n+k]: stream j -> k) for hc_post.
void hc_pre_f32(const float* mix_raw, const float* scale, const float* base, const HcDims& d, const float* x,
                const float* out_norm, float* collapsed, float* post, float* comb, cudaStream_t s);

// out[k] = post[k] * block_out + sum_j comb[j, k] residual[j]; out {n, hidden} must not alias residual.
void hc_post_f32(const HcDims& d, const float* block_out, const float* residual, const float* post,
                 const float* comb, float* out, cudaStream_t s);

// The same for `count` tokens in one launch (prefill chunks, verify): token t's mix_raw, x,
// collapsed, post, comb (hc_pre) and block_out, residual, post, comb, out (hc_post) lie
// t * stride floats after token 0's; weights (scale, base, out_norm) are shared.
struct HcRows {
  int64_t count = 1, stride = 0;
};
void hc_pre_f32(const float* mix_raw, const float* scale, const float* base, const HcDims& d, const float* x,
                const float* out_norm, float* collapsed, float* post, float* comb, const HcRows& rows, cudaStream_t s);
void hc_post_f32(const HcDims& d, const float* block_out, const float* residual, const float* post,
                 const float* comb, float* out, const HcRows& rows, cudaStream_t s);

// DeepSeek V4 head collapse: mix_raw {mix_splits, n} = fn x, scale {1}, base {n}: w = sigmoid(mix * scale
// + base) + eps, out {hidden} = sum_j w[j] x[j], then rmsnorm'd with out_norm when not null.
void hc_head_f32(const float* mix_raw, const float* scale, const float* base, const HcDims& d, const float* x,
                 const float* out_norm, float* out, cudaStream_t s);

// x {hidden} copied into every stream of h {n, hidden} (the embedding entering the streams).
void hc_expand_f32(const float* x, const HcDims& d, float* h, cudaStream_t s);
// Both for `rows.count` tokens: token t's buffers (mix_raw, x, out; x and h) lie t * stride
// floats after token 0's.
void hc_head_f32(const float* mix_raw, const float* scale, const float* base, const HcDims& d, const float* x,
                 const float* out_norm, float* out, const HcRows& rows, cudaStream_t s);
void hc_expand_f32(const float* x, const HcDims& d, float* h, const HcRows& rows, cudaStream_t s);

// Fused decode / rows forms (hc_fused.cu, issue #23): the fn product, the flat norm, the split
// and the collapse in one launch, optionally with the hc_post that produces the streams folded
// in. Block (s, t) multiplies column block s of fn by row t's streams and stores the partial
// mix and sum of squares; the last block of row t to arrive (an atomic counter) sums the
// partials in block order and runs the split + collapse. The sums are the same operations in
// the same order for every row count, so a decode step equals the same row of a chunk bit for
// bit; they differ in rounding from gemv + hc_pre_f32 (tests/cuda/test_cuda_hc_fused.cu).
//
// fn {m, splits * cols} stored as `splits` column blocks {m, cols} split_stride bytes apart
// (DeepSeek's DHc layout); m = (2+n)*n for hc_pre, n for the head.
struct HcFn {
  const void* data = nullptr;
  DType type = DType::F32;
  int64_t m = 0, cols = 0, splits = 1;
  size_t split_stride = 0;
};
// The hc_post whose out is the streams this call reads (hc_post_f32's arguments); post and comb
// may be the very buffers this call writes (every block reads them before the last one writes).
// With `experts` set (one row only), block_out is not read but computed as a MoE's combination
// (DeepSeek's moe_combine, the same formula: hc_device.cuh combine_value), block_out[d] =
// sum_j weights[j] experts[j * hidden + d] + shared[d], so that launch folds in as well.
struct HcPostIn {
  const float *block_out = nullptr, *residual = nullptr, *post = nullptr, *comb = nullptr;
  const float *experts = nullptr, *weights = nullptr, *shared = nullptr;
  int64_t k = 0;
};
// partials: per row {splits, m + 1} floats (inside the row's stride); counters: one per row,
// zero before the first call (each call leaves them zero).
struct HcFusedScratch {
  float* partials = nullptr;
  unsigned* counters = nullptr;
  // hc_pre_fused of one row only (optional): the collapsed row is also quantized here as Q8_0
  // blocks (q {hidden} int8, d {hidden / 32}: quantize_act's bytes), so the product that reads
  // it needs no quantize launch (issue #23). Needs hc_fused_quant_supported; else InputError.
  int8_t* q8_0 = nullptr;
  float* q8_0_d = nullptr;
};
// Whether hc_pre_fused can quantize its collapsed row (HcFusedScratch::q8_0): hidden a multiple
// of 128 that the last block's registers hold.
bool hc_fused_quant_supported(const HcDims& d);
// Whether hc_pre_fused / hc_head_fused take this fn (F32, F16, BF16; cols a multiple of 8 and at
// most kHcFusedMaxCols; n * hidden = splits * cols); otherwise use gemv + hc_pre_f32.
inline constexpr int64_t kHcFusedMaxCols = 2048;  // (the many-row form stages 4 rows of them in 32 KB)
// The column blocks a model's upload splits fn into (DeepSeek / GLM upload.cu): at most
// kHcMaxSplits (their scratch holds {kHcMaxSplits, m + 1} partials per row); the most up to
// hc_split_target() that its shape allows. The target is DS4_HC_SPLITS (1, 2, 4, .. 64, read
// once), else kHcSplitsDefault: each block is one SM of the decode step's hc launch.
inline constexpr int64_t kHcMaxSplits = 64;
inline constexpr int64_t kHcSplitsDefault = 16;
int64_t hc_split_target();
// Decode and short row counts (below the two-launch form's 64 rows) as one thread block cluster
// per row where the shape, the buffers and the device allow, and the device holds every row's
// cluster at once (hc_fused.cu cluster_form): the same bits as the single-launch form.
// DS4_HC_CLUSTER (0 or 1; unset = 1) read on first use, or the setter.
bool hc_fused_cluster();
void hc_fused_set_cluster(bool on);
// Whether hc_pre_fused (head false) / hc_head_fused would take the cluster form for these.
bool hc_fused_cluster_form(const HcFn& fn, const HcDims& d, bool head, const float* x, const float* out,
                           const float* out_norm, const HcRows& rows);
bool hc_fused_supported(const HcFn& fn, const HcDims& d, bool head);

// hc_pre_f32's outputs from the streams x {n, hidden}; with `post_in` x is written first
// (x = hc_post_f32(post_in...)) and is then exactly what hc_post_f32 would have written.
void hc_pre_fused(const HcFn& fn, const float* scale, const float* base, const HcDims& d, float* x,
                  const HcPostIn* post_in, const float* out_norm, float* collapsed, float* post, float* comb,
                  const HcFusedScratch& sc, const HcRows& rows, cudaStream_t s);
// hc_head_f32's output, likewise.
void hc_head_fused(const HcFn& fn, const float* scale, const float* base, const HcDims& d, float* x,
                   const HcPostIn* post_in, const float* out_norm, float* out, const HcFusedScratch& sc,
                   const HcRows& rows, cudaStream_t s);

}  // namespace ds4::cuda
