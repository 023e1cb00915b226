// GroupedGemm (grouped_gemm.h): plan (the grouping to the host), then per call gather x rows
// to BF16, per batch of experts dequant_bf16_experts + cuBLAS grouped GEMM, scatter to y.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backend/cuda/check.h"
#include "backend/cuda/dequant.h"
#include "backend/cuda/grouped_gemm.h"
#include "backend/cuda/grouped_mma.h"
#include "backend/cuda/moe_group.h"
#include "core/error.h"

namespace ds4::cuda {
namespace {

constexpr int64_t S = kGemvMaxRows;  // gathered rows per entry (GemvRows' x_idx / y_idx stride)
constexpr int kThreads = 128;

void check_cublas(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuda grouped_gemm: ") + what + " failed: " + cublasGetStatusString(st));
}

// One side (x or y) of the entries' rows: gathered row d = u * S + i of entry u.
struct EntryRows {
  int count, n;  // entries; rows per entry without counts
  const int32_t *live, *counts, *idx;
  int64_t row, stride;  // floats between rows of idx, between entries
};

// Row d's offset in x / y (floats), or -1 when d is no live entry's row (gemv_rows' rules).
__device__ __forceinline__ int64_t entry_row_offset(const EntryRows& m, int64_t d) {
  const int64_t u = d / S;
  const int i = int(d % S);
  const int live = m.live ? *m.live : m.count;
  if (u >= live) return -1;
  const int n = m.counts ? min(m.counts[u], int(S)) : m.n;
  if (i >= n) return -1;
  return u * m.stride + int64_t(m.idx ? m.idx[d] : i) * m.row;
}

// out row d {cols} BF16 = x row of d rounded to nearest (as grouped_mma_bf16 rounds x); block = row.
__global__ void __launch_bounds__(kThreads)
    gather_bf16_kernel(const float* __restrict__ x, EntryRows m, int64_t cols, __nv_bfloat16* __restrict__ out) {
  const int64_t d = blockIdx.x, o = entry_row_offset(m, d);
  if (o < 0) return;
  const float2* src = reinterpret_cast<const float2*>(x + o);
  __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(out + d * cols);
  for (int64_t c = threadIdx.x; c < cols / 2; c += kThreads) {
    const float2 v = src[c];
    dst[c] = __floats2bfloat162_rn(v.x, v.y);
  }
}

// y row of d = in row d {cols}; block = row.
__global__ void __launch_bounds__(kThreads)
    scatter_kernel(const float* __restrict__ in, EntryRows m, int64_t cols, float* __restrict__ y) {
  const int64_t d = blockIdx.x, o = entry_row_offset(m, d);
  if (o < 0) return;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) y[o + c] = in[d * cols + c];
}

// Group j's GEMM operands: its expert's decoded matrix (slot j % per_batch of the weight scratch:
// batches are per_batch consecutive groups), its gathered rows and its output rows.
struct Operands {
  const __nv_bfloat16* a;
  const __nv_bfloat16* b;
  float* c;
};
__host__ __device__ inline Operands operands_of(int64_t j, int64_t row0, int64_t per_batch, int64_t out, int64_t in,
                                                const __nv_bfloat16* w, const __nv_bfloat16* x, float* y) {
  return Operands{w + (j % per_batch) * out * in, x + row0 * in, y + row0 * out};
}

__global__ void operand_ptrs_kernel(const int32_t* __restrict__ row0, int groups, int64_t per_batch, int64_t out,
                                    int64_t in, const __nv_bfloat16* w, const __nv_bfloat16* x, float* y,
                                    const void** a, const void** b, void** c) {
  const int j = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (j >= groups) return;
  const Operands o = operands_of(j, row0[j], per_batch, out, in, w, x, y);
  a[j] = o.a, b[j] = o.b, c[j] = o.c;
}

std::atomic<int> g_mode{-1};
std::atomic<int64_t> g_min_rows{-1};
std::atomic<int64_t> g_batch{-1};

int64_t env_int(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* e = std::getenv(name);
  if (!e) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(e, &end, 10);
  if (end == e || *end != '\0' || v < lo || v > hi)
    throw InputError(std::string(name) + "=" + e + ": expected an integer in " + std::to_string(lo) + ".." +
                     std::to_string(hi));
  return v;
}

}  // namespace

// Default 0 (grouped_mma_bf16): on the H200 (CUDA 13, bench/results/session10-h200-2026-12-04h)
// cublasGemmGroupedBatchedEx answers CUBLAS_STATUS_NOT_SUPPORTED for BF16 operands with FP32
// output (mode 1), and one cublasGemmEx per expert (mode 2) made GLM's 4096-token prefill in
// 2048-row chunks 0.88x the old kernel (1361.8 vs 1548.4 tok/s). Modes 1 / 2 stay selectable
// for the next attempt (a BF16-output grouped call, or a fused dequantize-in-shared-memory GEMM).
int grouped_gemm_mode() {
  int v = g_mode.load(std::memory_order_relaxed);
  if (v < 0) {
    v = int(env_int("DS4_GROUPED_GEMM", 0, 0, 2));
    g_mode.store(v, std::memory_order_relaxed);
  }
  return v;
}

void grouped_gemm_set_mode(int mode) {
  if (mode < 0 || mode > 2) throw InputError("grouped_gemm_set_mode: " + std::to_string(mode) + " (0, 1 or 2)");
  g_mode.store(mode, std::memory_order_relaxed);
}

int64_t grouped_gemm_min_rows() {
  int64_t v = g_min_rows.load(std::memory_order_relaxed);
  if (v < 0) {
    v = env_int("DS4_GROUPED_GEMM_MIN_ROWS", kGroupedGemmMinRowsPerExpert, 1, int64_t(1) << 30);
    g_min_rows.store(v, std::memory_order_relaxed);
  }
  return v;
}

void grouped_gemm_set_min_rows(int64_t rows) {
  if (rows < 1) throw InputError("grouped_gemm_set_min_rows: " + std::to_string(rows) + " (>= 1)");
  g_min_rows.store(rows, std::memory_order_relaxed);
}

int64_t grouped_gemm_batch_experts() {
  int64_t v = g_batch.load(std::memory_order_relaxed);
  if (v < 0) {
    v = env_int("DS4_GROUPED_GEMM_BATCH", 0, 0, 65535);
    g_batch.store(v, std::memory_order_relaxed);
  }
  return v;
}

void grouped_gemm_set_batch_experts(int64_t experts) {
  if (experts < 0) throw InputError("grouped_gemm_set_batch_experts: " + std::to_string(experts) + " (>= 0)");
  g_batch.store(experts, std::memory_order_relaxed);
}

size_t GroupedGemm::device_bytes(int64_t max_entries, int64_t max_out, int64_t max_in, size_t weight_bytes) {
  const size_t rows = size_t(max_entries * S);
  return weight_bytes / 2 * 2 + rows * size_t(max_in) * 2 + rows * size_t(max_out) * 4 +
         size_t(max_entries) * (2 * sizeof(int32_t) + 3 * sizeof(void*));
}

GroupedGemm::GroupedGemm(int64_t max_entries, int64_t max_out, int64_t max_in, size_t weight_bytes,
                         MatmulWorkspace& mm, const std::string& what)
    : max_entries_(max_entries), max_out_(max_out), max_in_(max_in), weight_elems_(weight_bytes / 2), mm_(mm) {
  if (max_entries < 1 || max_entries > 65535 || max_out < 1 || max_in < 1 || max_out * max_in > INT32_MAX ||
      weight_elems_ < size_t(max_out * max_in))
    throw InputError(what + ": grouped GEMM of " + std::to_string(max_entries) + " entries, experts " +
                     std::to_string(max_out) + "x" + std::to_string(max_in) + ", " + std::to_string(weight_bytes) +
                     " weight bytes (1..65535 entries, room for one expert)");
  const size_t rows = size_t(max_entries * S);
  w_ = DeviceBuffer(weight_elems_ * 2, what + " grouped gemm bf16 experts");
  x_ = DeviceBuffer(rows * size_t(max_in) * 2, what + " grouped gemm bf16 rows");
  y_ = DeviceBuffer(rows * size_t(max_out) * 4, what + " grouped gemm out rows");
  dgroups_ = DeviceBuffer(size_t(max_entries) * 2 * sizeof(int32_t), what + " grouped gemm groups");
  dptr_ = DeviceBuffer(size_t(max_entries) * 3 * sizeof(void*), what + " grouped gemm pointers");
  host_ = std::make_unique<PinnedHost>(size_t(1 + 4 * max_entries) * sizeof(int32_t));
  groups_.reserve(size_t(max_entries));
}

GroupedGemm::~GroupedGemm() = default;

bool GroupedGemm::supports(const WeightMatrix& w) const {
  return grouped_mma_supports(w) && w.rows <= max_out_ && w.cols <= max_in_ && size_t(w.rows * w.cols) <= weight_elems_;
}

void GroupedGemm::plan(const GemvRows& r, cudaStream_t s) {
  const int count = r.batch.count;
  if (count < 1 || count > max_entries_ || r.n < 1 || r.n > S || r.idx_stride != S)
    throw InputError("cuda grouped_gemm plan: " + std::to_string(count) + " entries of n " + std::to_string(r.n) +
                     " (1.." + std::to_string(max_entries_) + " entries of 1.." + std::to_string(S) + " rows, idx_stride " + std::to_string(S) + ")");
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  DS4_CUDA_CHECK(cudaStreamIsCapturing(s, &cs));
  if (cs != cudaStreamCaptureStatusNone)
    throw InputError("cuda grouped_gemm plan: the stream is being captured (the plan reads the grouping back)");
  int32_t* h = static_cast<int32_t*>(host_->p);  // {live, ids[max_entries], counts[max_entries], up...}
  int32_t *hids = h + 1, *hcounts = h + 1 + max_entries_, *up = h + 1 + 2 * max_entries_;
  const size_t n4 = size_t(count) * sizeof(int32_t);
  if (r.live) DS4_CUDA_CHECK(cudaMemcpyAsync(h, r.live, sizeof(int32_t), cudaMemcpyDeviceToHost, s));
  if (r.batch.ids) DS4_CUDA_CHECK(cudaMemcpyAsync(hids, r.batch.ids, n4, cudaMemcpyDeviceToHost, s));
  if (r.counts) DS4_CUDA_CHECK(cudaMemcpyAsync(hcounts, r.counts, n4, cudaMemcpyDeviceToHost, s));
  // Also orders this plan's upload below after the previous plan's (its source, `up`, is rewritten).
  DS4_CUDA_CHECK(cudaStreamSynchronize(s));
  const int live = r.live ? std::clamp(h[0], 0, count) : count;
  groups_.clear();
  planned_rows_ = 0;
  for (int u = 0; u < live; ++u) {
    const int32_t e = r.batch.ids ? hids[u] : u;
    const int32_t n = r.counts ? std::min<int32_t>(hcounts[u], int32_t(S)) : r.n;
    if (e < 0) throw Error("cuda grouped_gemm plan: entry " + std::to_string(u) + " has expert " + std::to_string(e));
    if (n <= 0) continue;
    const int32_t row0 = int32_t(u * S);
    // moe_group gives an expert's entries consecutively, all full but the last: one group
    // (contiguous gathered rows); entries that do not continue a group's rows start a new one.
    if (!groups_.empty() && groups_.back().expert == e && groups_.back().row0 + groups_.back().rows == row0)
      groups_.back().rows += n;
    else
      groups_.push_back(Group{e, row0, n});
    planned_rows_ += n;
  }
  const int64_t G = groups();
  if (G == 0) return;
  for (int64_t j = 0; j < G; ++j) up[j] = groups_[size_t(j)].expert, up[max_entries_ + j] = groups_[size_t(j)].row0;
  int32_t* d = dgroups_.as<int32_t>();  // {experts[max_entries], row0[max_entries]}
  DS4_CUDA_CHECK(cudaMemcpyAsync(d, up, size_t(G) * sizeof(int32_t), cudaMemcpyHostToDevice, s));
  DS4_CUDA_CHECK(cudaMemcpyAsync(d + max_entries_, up + max_entries_, size_t(G) * sizeof(int32_t),
                                 cudaMemcpyHostToDevice, s));
}

void GroupedGemm::run(const WeightMatrix& w, const float* x, float* y, const GemvRows& r, cudaStream_t s) {
  if (!supports(w))
    throw InputError("cuda grouped_gemm: " + std::string(dtype_name(w.type)) + " " + std::to_string(w.rows) + "x" +
                     std::to_string(w.cols) + " (a grouped_mma_bf16 format within " + std::to_string(max_out_) + "x" +
                     std::to_string(max_in_) + ")");
  if (r.batch.count < 1 || r.batch.count > max_entries_ || r.n < 1 || r.n > S || r.idx_stride != S || r.x_row % 2 != 0 ||
      r.batch.x_stride % 2 != 0)
    throw InputError("cuda grouped_gemm: " + std::to_string(r.batch.count) + " entries of n " + std::to_string(r.n) +
                     ", idx_stride " + std::to_string(r.idx_stride) + " (takes 16) or an odd x stride");
  const int64_t G = groups();
  if (G == 0) return;
  const int64_t out = w.rows, in = w.cols, cap = grouped_gemm_batch_experts();
  const int64_t per_batch = std::min<int64_t>({G, int64_t(weight_elems_) / (out * in), cap > 0 ? cap : G});
  const unsigned rows = unsigned(r.batch.count * S);
  auto* wb = w_.as<__nv_bfloat16>();
  auto* xb = x_.as<__nv_bfloat16>();
  float* yb = y_.as<float>();
  const EntryRows xm{r.batch.count, r.n, r.live, r.counts, r.x_idx, r.x_row, r.batch.x_stride};
  gather_bf16_kernel<<<rows, kThreads, 0, s>>>(x, xm, in, xb);
  DS4_CUDA_CHECK_LAUNCH();
  const int32_t* dexperts = dgroups_.as<int32_t>();
  const int32_t* drow0 = dexperts + max_entries_;
  const void** pa = static_cast<const void**>(dptr_.get());  // {a, b, c} x max_entries
  const void** pb = pa + max_entries_;
  void** pc = dptr_.as<void*>() + 2 * max_entries_;
  const int mode = grouped_gemm_mode();
  if (mode != 2) {
    operand_ptrs_kernel<<<unsigned((G + kThreads - 1) / kThreads), kThreads, 0, s>>>(drow0, int(G), per_batch, out, in,
                                                                                      wb, xb, yb, pa, pb, pc);
    DS4_CUDA_CHECK_LAUNCH();
  }
  cublasHandle_t h = static_cast<cublasHandle_t>(mm_.handle_);
  check_cublas(cublasSetStream(h, s), "cublasSetStream");
  check_cublas(cublasSetWorkspace(h, mm_.cublas_ws_.get(), mm_.cublas_ws_.bytes()), "cublasSetWorkspace");
  const float one = 1.f, zero = 0.f;
  // Host arrays of one grouped call (every group one GEMM: group_size 1): cuBLAS reads them
  // during the call.
  const size_t nb_max = size_t(per_batch);
  std::vector<cublasOperation_t> ta(nb_max, CUBLAS_OP_T), tb(nb_max, CUBLAS_OP_N);
  std::vector<int> m(nb_max, int(out)), n(nb_max), k(nb_max, int(in)), lda(nb_max, int(in)), ldc(nb_max, int(out)),
      gs(nb_max, 1);
  std::vector<float> alpha(nb_max, 1.f), beta(nb_max, 0.f);
  for (int64_t j0 = 0; j0 < G; j0 += per_batch) {
    const int nb = int(std::min(per_batch, G - j0));
    GemvBatch eb;
    eb.count = nb, eb.ids = dexperts + j0, eb.id_stride = r.batch.id_stride, eb.id_scale_stride = r.batch.id_scale_stride;
    dequant_bf16_experts(w, eb, wb, s);
    // Column-major view (as matmul_rows): expert {out, in} row-major is A^T with lda in, the
    // group's gathered rows {rows, in} are B (ldb in), its output rows {rows, out} C (ldc out).
    if (mode == 2) {
      for (int j = 0; j < nb; ++j) {
        const Group& g = groups_[size_t(j0 + j)];
        const Operands o = operands_of(j0 + j, g.row0, per_batch, out, in, wb, xb, yb);
        check_cublas(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(out), g.rows, int(in), &one, o.a, CUDA_R_16BF,
                                  int(in), o.b, CUDA_R_16BF, int(in), &zero, o.c, CUDA_R_32F, int(out),
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                     "cublasGemmEx");
      }
      continue;
    }
    for (int j = 0; j < nb; ++j) n[size_t(j)] = groups_[size_t(j0 + j)].rows;
    check_cublas(cublasGemmGroupedBatchedEx(h, ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(),
                                            pa + j0, CUDA_R_16BF, lda.data(), pb + j0, CUDA_R_16BF, lda.data(),
                                            beta.data(), pc + j0, CUDA_R_32F, ldc.data(), nb, gs.data(),
                                            CUBLAS_COMPUTE_32F),
                 "cublasGemmGroupedBatchedEx");
  }
  const EntryRows ym{r.batch.count, r.n, r.live, r.counts, r.y_idx, r.y_row, r.batch.y_stride};
  scatter_kernel<<<rows, kThreads, 0, s>>>(yb, ym, out, y);
  DS4_CUDA_CHECK_LAUNCH();
}

std::unique_ptr<GroupedGemm> make_grouped_gemm(int64_t rows, int64_t k, int64_t experts, int64_t max_out,
                                               int64_t max_in, MatmulWorkspace& mm, const std::string& what) {
  if (grouped_gemm_mode() == 0 || experts < 1 || rows * k / experts < grouped_gemm_min_rows()) return nullptr;
  const int64_t entries = moe_group_entries(rows, k, experts, S);
  const size_t wbytes = size_t(std::min(experts, kGroupedGemmBatchExperts) * max_out * max_in) * 2;
  const size_t need = GroupedGemm::device_bytes(entries, max_out, max_in, wbytes);
  const size_t free = device_memory_info().free_bytes;
  if (need + kDefaultHeadroom > free) {
    std::fprintf(stderr,
                 "%s: no grouped GEMM for the routed experts (needs %zu MiB, %zu MiB free beside the headroom); "
                 "prefill keeps grouped_mma_bf16\n",
                 what.c_str(), need >> 20, free > kDefaultHeadroom ? (free - kDefaultHeadroom) >> 20 : size_t(0));
    return nullptr;
  }
  return std::make_unique<GroupedGemm>(entries, max_out, max_in, wbytes, mm, what);
}

}  // namespace ds4::cuda
