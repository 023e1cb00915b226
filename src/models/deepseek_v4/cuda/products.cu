// Every weight product of the CUDA DeepSeek V4 model, in one place: the decode step's gemv /
// gemv_batched, the rows' matmul_rows / gemv_rows, and with Config::act_quant their integer
// twins on quantized inputs (backend/cuda/gemv_act.h; act_inputs.h says which products and
// where the quantized copies live). With act_quant off every call here is the one the model
// made before it existed (same kernels, same options, same bits). With it on, a decode step's
// gemv_act and a chunk row's gemv_act_rows give the same bits (gemv_act.h), and an input is
// quantized by the same kernel for one row or many, so chunks, verify windows and
// decode_batch rows still equal decode steps bit for bit.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backend/cuda/gemv_act_mma.h"
#include "backend/cuda/grouped_mma_int8.h"
#include "backend/cuda/matmul_rows.h"
#include "backend/cuda/norm.h"
#include "core/error.h"
#include "models/deepseek_v4/cuda/model_impl.h"

namespace ds4::deepseek_v4 {

void DeepseekV4CudaModel::Impl::fresh_graphs(CudaState& st) const {
  if (st.graph_epoch == graph_epoch) return;
  st.drop_graphs();
  st.graph_epoch = graph_epoch;
}

ActIn DeepseekV4CudaModel::Impl::act_in(const float* x, int64_t x_row, int64_t n_rows, int64_t n, ActKind k,
                                        bool chunk_arena) const {
  ActIn in{x, x_row, n_rows, n};
  if (!c.act_quant || (chunk_arena && tensor_core_chunk() && !int8_dense_chunk())) return in;
  const ActLayout& a = chunk_arena ? ca : sa;
  in.slot = (chunk_arena ? chunk.as<uint8_t>() : scratch.as<uint8_t>()) + a.slot[k];
  in.capacity = a.capacity[k];
  return in;
}

std::optional<dc::DeviceActQ8> DeepseekV4CudaModel::Impl::act_slot(const ActIn& x, const WeightMatrix& w) const {
  if (!x.slot) return std::nullopt;
  const ActBlock b = act_block_for(w.type);
  if (b == ActBlock::kNone) return std::nullopt;
  if (x.rows * x.n > x.capacity)
    throw Error("deepseek_v4 cuda: act_quant input of " + std::to_string(x.rows) + " x " + std::to_string(x.n) +
                " values exceeds its slot of " + std::to_string(x.capacity));
  return act_slot_rows(x.slot, x.capacity, x.rows, x.n, b);
}

std::optional<dc::DeviceActQ8> DeepseekV4CudaModel::Impl::act_for(ActIn& x, const WeightMatrix& w, cudaStream_t s) {
  const std::optional<dc::DeviceActQ8> q = act_slot(x, w);
  if (!q) return std::nullopt;
  if (x.have != q->block) {  // (one row: its stride is any, e.g. 0 in mtp_in's step; quantize_act wants >= n)
    dc::quantize_act(x.x, x.rows == 1 ? std::max(x.x_row, x.n) : x.x_row, x.rows, *q, s);
    x.have = q->block;
  }
  (q->block == ActBlock::kQ8_0 ? act_n.q8_0 : act_n.q8_k) += 1;
  return q;
}

// The decode step's producers of a product input (issue #23): with a slot for w's block they
// write the quantized copy in the same launch (the bytes the unfused kernel + quantize_act
// write), so w's product finds it made; else the plain kernel.
void DeepseekV4CudaModel::Impl::swiglu_act(const float* g, const float* u, int64_t rows, int64_t F, int64_t in_stride,
                                           ActIn& y, const WeightMatrix& w, cudaStream_t s) {
  float* out = const_cast<float*>(y.x);
  if (const auto q = act_slot(y, w); q && y.x_row == F) {
    swiglu_clamp_quant(g, u, rows, F, in_stride, c.swiglu_limit, out, *q, s);
    y.have = q->block;
  } else {
    swiglu_clamp(g, u, rows, F, in_stride, c.swiglu_limit, out, s, y.x_row);
  }
}

void DeepseekV4CudaModel::Impl::rmsnorm_act(const float* norm, ActIn& y, const WeightMatrix& w, cudaStream_t s) {
  float* out = const_cast<float*>(y.x);
  if (const auto q = act_slot(y, w); q && y.rows == 1 && y.n <= kNormQuantMax) {
    rmsnorm_quant(out, norm, out, y.n, c.rms_eps, *q, s);
    y.have = q->block;
  } else {
    dc::rmsnorm_strided_f32(out, y.x_row, norm, out, y.x_row, y.rows, y.n, c.rms_eps, s);
  }
}

namespace {

// Row `r` of q as the view a product of w reads (n = w.cols; batched entries and rows step
// from there by their strides in values).
ActQ8View view_for(const dc::DeviceActQ8& q, const WeightMatrix& w, int64_t r = 0) {
  ActQ8View v = q.row(r);
  v.n = w.cols;
  return v;
}

}  // namespace

// ---- CudaModelOptions::act_mma: the unbatched act products on int8 tensor cores ----
// The kernel for 1..16 rows (gemv_act_mma.h) replaces gemv_act in mv / unbatched mv_batched and
// gemv_act_rows in unbatched act_rows, so a decode step and a chunk / batch row of the same
// weight always run the same kernel (row i of a launch never depends on n: steps = rows bit
// for bit). Batched products (o_a's groups, routed experts) keep gemv_act on both sides.
namespace {
// Off: one row on gemv_act_mma is 2.5-3.6x gemv_act on the Q8_0 shapes (bench_cuda_gemv --act-mma,
// H200 2026-12-04, bench/cuda_gemv/NOTES.md), and a decode step must use the rows' kernel. The
// switch is unrun on the model (no model test has passed with it on yet).
constexpr bool kActMmaDefault = false;
}  // namespace

bool act_mma_default() { return flag_from_env("DS4_ACT_MMA", kActMmaDefault); }

// y rows r (y + r * y_row) = w x rows r, r < n, x rows q.n values apart: launches of <= 16 rows.
static void mma_rows(const WeightMatrix& w, const dc::DeviceActQ8& q, float* y, int64_t y_row, int64_t n,
                     cudaStream_t s) {
  for (int64_t r0 = 0; r0 < n; r0 += dc::kGemvActMmaMaxRows)
    dc::gemv_act_mma(w, view_for(q, w, r0), y + r0 * y_row,
                     int(std::min<int64_t>(dc::kGemvActMmaMaxRows, n - r0)), q.n, y_row, s);
}

void DeepseekV4CudaModel::Impl::mv(const WeightMatrix& m, ActIn& x, float* y, cudaStream_t s) {
  if (auto q = act_for(x, m, s)) {
    if (act_mma()) mma_rows(m, *q, y, m.rows, 1, s);
    else dc::gemv_act(m, view_for(*q, m), y, s);
  } else {
    dc::gemv(m, x.x, y, s, gemv_options(m.type));
  }
}

void DeepseekV4CudaModel::Impl::mv_batched(const WeightMatrix& w, ActIn& x, float* y, const dc::GemvBatch& b,
                                           cudaStream_t s) {
  if (auto q = act_for(x, w, s)) {
    if (act_mma() && b.count == 1 && !b.ids) mma_rows(w, *q, y, w.rows, 1, s);  // act_rows' count-1 twin
    else dc::gemv_act_batched(w, view_for(*q, w), y, b, s);
  } else {
    dc::gemv_batched(w, x.x, y, b, s, gemv_options(w.type));
  }
}

// y = [W_0; W_1; ...] x: one launch per stacked run, outputs back to back.
void DeepseekV4CudaModel::Impl::proj(const DProj& p, ActIn& x, float* y) {
  for (const WeightMatrix& m : p.runs) {
    mv(m, x, y, stream);
    y += m.rows;
  }
}

void DeepseekV4CudaModel::Impl::act_rows(const WeightMatrix& w, const dc::DeviceActQ8& q, float* y, int64_t y_row,
                                         int64_t n, const dc::MatmulBatch& b, cudaStream_t s) {
  if (int8_dense_chunk() && dc::grouped_mma_int8_supports(w)) {  // (else the exact rows below: same values to rounding)
    dc::grouped_mma_int8_dense(w, view_for(q, w), q.n, y, y_row, n,
                               dc::DenseGroups{b.count, b.w_stride, b.x_stride, b.y_stride}, s);
    ++act_n.int8_dense;
    return;
  }
  if (act_mma() && b.count == 1) return mma_rows(w, q, y, y_row, n, s);
  for (int64_t r0 = 0; r0 < n; r0 += dc::kGemvMaxRows) {
    dc::GemvRows r;
    r.n = int(std::min<int64_t>(dc::kGemvMaxRows, n - r0));
    r.x_row = q.n, r.y_row = y_row;
    r.batch = dc::GemvBatch{b.count, nullptr, b.w_stride, b.scale_stride, b.x_stride, b.y_stride};
    dc::gemv_act_rows(w, view_for(q, w, r0), y + r0 * y_row, r, s);
  }
}

void DeepseekV4CudaModel::Impl::act_entries(const WeightMatrix& w, const dc::DeviceActQ8& q, float* y, dc::GemvRows r,
                                            cudaStream_t s) {
  r.x_row = q.n;
  dc::gemv_act_rows(w, view_for(q, w), y, r, s);
}

void DeepseekV4CudaModel::Impl::int8_entries(const WeightMatrix& w, ActIn x, ActKind k, float* y, dc::GemvRows r,
                                             int64_t rows_per_expert) {
  x.slot = chunk.as<uint8_t>() + ca.slot[k];
  x.capacity = ca.capacity[k];
  x.have = ActBlock::kNone;
  const std::optional<dc::DeviceActQ8> q = act_for(x, w, stream);
  if (!q) throw Error("deepseek_v4 cuda: int8 experts on a " + std::string(dtype_name(w.type)) + " weight");
  r.x_row = q->n;
  dc::grouped_mma_int8(w, view_for(*q, w), y, r, stream, rows_per_expert);
}

void DeepseekV4CudaModel::Impl::mrows(const WeightMatrix& w, ActIn& x, float* y, int64_t y_row,
                                      const dc::MatmulBatch& b, cudaStream_t s) {
  if (auto q = act_for(x, w, s)) act_rows(w, *q, y, y_row, x.rows, b, s);
  else dc::matmul_rows(w, x.x, x.x_row, y, y_row, x.rows, b, mm(s), s);
}

// y rows {rows, ...} = W x rows, y in the row scratches (stride rs() floats): exact below
// tensor_core_rows rows (gemv_rows, or gemv_act_rows with act_quant), a TF32 tensor-core
// GEMM from there (backend/cuda matmul_rows).
void DeepseekV4CudaModel::Impl::mgemv(const WeightMatrix& w, ActIn& x, size_t y_off, cudaStream_t s) {
  mrows(w, x, R(0, y_off), rs(), dc::MatmulBatch{}, s);
}

// proj() over the rows: one product per stacked run, outputs back to back in each row.
void DeepseekV4CudaModel::Impl::mproj(const DProj& p, ActIn& x, size_t y_off) {
  for (const WeightMatrix& m : p.runs) {
    mgemv(m, x, y_off, stream);
    y_off += size_t(m.rows) * sizeof(float);
  }
}

// FP32 operands: FP32 GEMMs in a tensor-core chunk (fp32_gemms), else the exact path.
void DeepseekV4CudaModel::Impl::mexact(const WeightMatrix& w, ActIn& x, float* y, const dc::MatmulBatch& b) {
  if (auto q = act_for(x, w, stream)) act_rows(w, *q, y, rs(), x.rows, b, stream);
  else if (opt.fp32_gemms && tensor_core_chunk()) dc::matmul_rows_f32(w, x.x, x.x_row, y, rs(), x.rows, b, *mm_main, stream);
  else dc::matmul_rows_exact(w, x.x, x.x_row, y, rs(), x.rows, b, stream);
}

}  // namespace ds4::deepseek_v4
