// The multi-row forward of the CUDA GLM 5.x model: a chunk of up to cl.rows tokens (prefill
// chunk, speculative verify of k+1 rows) through every layer with each weight matrix read
// once per chunk (backend/cuda matmul_rows: gemv_rows per 16 rows on the exact path; in a
// tensor-core prefill chunk (tc, issue #22) TF32 GEMMs, and the routed experts grouped BF16
// MMAs, with the products that feed discrete choices still exact: see mgemv_exact's callers),
// while the parts that carry state from one token to the next take all rows in one launch and
// keep token order inside it:
//   - KDA: conv1d state and the delta-rule recurrence loop the rows inside their kernels;
//   - MLA: all rows' latents and indexer keys appended first, then one selection and one
//     attention launch, row t at its own position pos + t (it sees the rows before it and
//     nothing the rows after it wrote);
//   - MoE: routing per row, then the (token, expert) pairs grouped per expert (moe_group) so
//     each used expert is read once for all the rows routed to it.
// Row t's arithmetic is the decode step's (the step runs the same kernels with one row), on
// row t's copy of the step scratch (step_layout.h ChunkLayout); row t's position is
// positions[t] = *pos + t on the device, so a chunk of a given size and logits mode is
// captured once per state as a CUDA graph (verify-sized chunks only: a prefill chunk launches
// directly, its capture would stall other threads' launches for a graph replayed a few
// times). profile_chunk (bench --profile) runs the same enqueue with direct launches and an
// event at each mark().
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "backend/cuda/activation.h"
#include "backend/cuda/conv1d.h"
#include "backend/cuda/delta_rule.h"
#include "backend/cuda/routed_experts.h"
#include "backend/cuda/hyper_connections.h"
#include "backend/cuda/moe_group.h"
#include "backend/cuda/moe_group_rows.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/seq_rows.cuh"
#include "backend/cuda/seq_rows.h"
#include "core/error.h"
#include "models/glm5/cuda/kernels.h"
#include "models/glm5/cuda/model_impl.h"

namespace ds4::glm5 {

namespace {

__global__ void chunk_positions_kernel(const int32_t* pos, int32_t* positions, int32_t rows) {  // positions: the group's first
  const int32_t t = int32_t(blockIdx.x * blockDim.x + threadIdx.x);
  if (t < rows) positions[t] = *pos + t;
}
__global__ void advance_kernel(int32_t* pos, int32_t rows) { *pos += rows; }
// A decode batch (Rows::seq): row t at its own sequence's counter; every counter += 1.
__global__ void seq_positions_kernel(const int32_t* pos, ds4::cuda::SeqShift seq, int32_t* positions, int32_t rows) {
  const int32_t t = int32_t(blockIdx.x * blockDim.x + threadIdx.x);
  if (t < rows) positions[t] = *ds4::cuda::detail::shifted(pos, ds4::cuda::detail::seq_shift(seq, t));
}
__global__ void seq_advance_kernel(int32_t* pos, ds4::cuda::SeqShift seq, int32_t rows) {
  const int32_t t = int32_t(blockIdx.x * blockDim.x + threadIdx.x);
  if (t < rows) *ds4::cuda::detail::shifted(pos, ds4::cuda::detail::seq_shift(seq, t)) += 1;
}
// profile_chunk: holds the stream ~ns so the host has enqueued the whole chunk before the GPU
// starts it (direct launches would otherwise leave host-bound gaps inside the sections).
__global__ void hold_kernel(int64_t ns) {
  const long long t0 = clock64();
  while (clock64() - t0 < ns * 2) __nanosleep(1000);  // clock64 ticks at ~2 GHz on the H200
}

}  // namespace

// y rows {rows, ...} = W x rows, both in the row scratches (stride rs() floats; a batch entry
// b reads x + b * x_stride and writes y + b * y_stride floats of each row).
void Glm5CudaModel::Impl::mgemv(const WeightMatrix& w, size_t x_off, size_t y_off, const dc::MatmulBatch& b) {
  if (!tc) return mgemv_exact(w, x_off, y_off, b);
  dc::matmul_rows(w, R(0, x_off), rs(), R(0, y_off), rs(), rows, b, *mm, stream);
}

// In a tensor-core chunk with fp32_gemms: FP32 cuBLAS (matmul_rows_f32: FP32 operands and rounding,
// another summation order) instead of gemv_rows per 16 rows, as DeepSeek's exact products.
void Glm5CudaModel::Impl::mgemv_exact(const WeightMatrix& w, size_t x_off, size_t y_off, const dc::MatmulBatch& b) {
  if (tc && opt.fp32_gemms && mm) return dc::matmul_rows_f32(w, R(0, x_off), rs(), R(0, y_off), rs(), rows, b, *mm, stream);
  dc::matmul_rows_exact(w, R(0, x_off), rs(), R(0, y_off), rs(), rows, b, stream);
}

// Stacked (one matrix) or separate parts with consecutive outputs, as gemv_proj_rows.
void Glm5CudaModel::Impl::mproj(const dc::DProj& p, size_t x_off, size_t y_off) {
  if (p.fused.rows > 0) return mgemv(p.fused, x_off, y_off);
  for (const WeightMatrix& m : p.parts) {
    mgemv(m, x_off, y_off);
    y_off += size_t(m.rows) * sizeof(float);
  }
}

void Glm5CudaModel::Impl::mproj_exact(const dc::DProj& p, size_t x_off, size_t y_off, int64_t r0, int64_t r1) {
  const std::vector<WeightMatrix> one{p.fused};
  int64_t at = 0;
  for (const WeightMatrix& m : p.fused.rows > 0 ? one : p.parts) {
    const int64_t a = std::max(at, r0), b = std::min(at + m.rows, r1);
    if (a < b) {  // rows of every gemv format are whole blocks: a row range is a plain sub-matrix
      WeightMatrix sub = m;
      sub.data = static_cast<const uint8_t*>(m.data) + (a - at) * m.row_stride_bytes();
      if (m.scales) {  // MLX affine: one scale (and bias) per group of each row
        const int64_t srow = row_bytes(m.scale_type, m.cols / m.group_size);
        sub.scales = static_cast<const uint8_t*>(m.scales) + (a - at) * srow;
        if (m.biases) sub.biases = static_cast<const uint8_t*>(m.biases) + (a - at) * srow;
      }
      sub.rows = b - a;
      mgemv_exact(sub, x_off, y_off + size_t(a) * sizeof(float));
    }
    at += m.rows;
  }
}

void Glm5CudaModel::Impl::hc_in_rows(const DHc& h, const float* norm) {
  mark("hyper-connections");
  // hc_fused.cu, one grid row per token: each row is the decode step's launch bit for bit (the
  // decode step takes it for a split fn whatever decode_tuning says: model_cuda.cu hc_in)
  if (h.splits > 1) {
    dc::hc_pre_fused(hc_fn(h), h.scale, h.base, h.dims, R(0, cur_off), nullptr, norm, R(0, sl.in), R(0, sl.post),
                     R(0, sl.comb), hc_scratch(R(0, sl.mix)), dc::HcRows{rows, rs()}, stream);
    return;
  }
  // The mixes go through Sinkhorn's exponentials: exact, or FP32 GEMM (chunk_gemm.cu).
  if (!fp32_gemm_rows(h.fn, cur_off, sl.mix)) mgemv_exact(h.fn, cur_off, sl.mix);
  dc::hc_pre_f32(R(0, sl.mix), h.scale, h.base, h.dims, R(0, cur_off), norm, R(0, sl.in), R(0, sl.post), R(0, sl.comb),
                 dc::HcRows{rows, rs()}, stream);
}

void Glm5CudaModel::Impl::hc_out_rows(const DHc& h) {
  mark("hyper-connections");
  dc::hc_post_f32(h.dims, R(0, sl.y), R(0, cur_off), R(0, sl.post), R(0, sl.comb), R(0, alt_off),
                  dc::HcRows{rows, rs()}, stream);
  std::swap(cur_off, alt_off);
}

void Glm5CudaModel::Impl::enqueue_positions(const int32_t* pos, int64_t r0, int64_t n) {
  chunk_positions_kernel<<<unsigned((n + 127) / 128), 128, 0, stream>>>(pos, C<int32_t>(cl.positions) + r0,
                                                                       int32_t(n));
  DS4_CUDA_CHECK_LAUNCH();
}

void Glm5CudaModel::Impl::enqueue_advance(int32_t* pos, int64_t n) {
  advance_kernel<<<1, 1, 0, stream>>>(pos, int32_t(n));
  DS4_CUDA_CHECK_LAUNCH();
}

ds4::cuda::SeqShift Glm5CudaModel::Impl::seq_rows(std::span<const RowGroup> groups) const {
  if (!batch_shifts || groups.size() < 2 || !opt.seq_launches) return {};
  for (const RowGroup& g : groups)
    if (g.n != 1) return {};
  if (sl.shift % sizeof(int64_t) || cl.row_bytes % sizeof(int64_t))
    throw Error("glm5 cuda: the rows' shift fields are not 8-byte aligned");
  return {reinterpret_cast<const int64_t*>(R(0, sl.shift)), int64_t(cl.row_bytes / sizeof(int64_t))};
}

void Glm5CudaModel::Impl::enqueue_group_positions(std::span<const RowGroup> groups, bool advance) {
  auto pos = [&](const RowGroup& g) { return reinterpret_cast<int32_t*>(g.st->buf.as<uint8_t>() + lay.pos); };
  if (const ds4::cuda::SeqShift seq = seq_rows(groups); seq.at) {
    const unsigned blocks = unsigned((rows + 127) / 128);
    if (advance)
      seq_advance_kernel<<<blocks, 128, 0, stream>>>(pos(groups[0]), seq, int32_t(rows));
    else
      seq_positions_kernel<<<blocks, 128, 0, stream>>>(pos(groups[0]), seq, C<int32_t>(cl.positions), int32_t(rows));
    DS4_CUDA_CHECK_LAUNCH();
    return;
  }
  for (const RowGroup& g : groups) advance ? enqueue_advance(pos(g), g.n) : enqueue_positions(pos(g), g.r0, g.n);
}

// kda() of model_cuda.cu over the rows; conv state and recurrence advance row by row (per
// row group: layer_rows in model_impl.h). caps[g] with records (verify_capture / verify_batch,
// spec_commit.cu): group g also keeps its conv state before its rows, its conv input rows and
// its recurrent state after each row.
void Glm5CudaModel::Impl::kda_rows(const DKda& k, const LayerOffsets& o, std::span<const RowGroup> groups,
                                   std::span<const KdaCapPtrs> caps) {
  const int64_t hd = c.linear_head_dim, nh = c.linear_num_heads, qkv = hd * nh;
  const KdaShape ksh{nh, hd, c.has_lower_bound, c.linear_lower_bound, c.rms_norm_eps};
  const dc::DeltaRuleShape dsh{nh, nh, hd, hd, true};
  mark("kda proj in");
  mproj(k.in, sl.in, sl.kraw);  // {rows, [q | k | v | f_a | g_a | b]}
  mark("kda conv");
  auto cap = [&](size_t g) { return caps.empty() || !caps[g].rec ? nullptr : &caps[g]; };
  // a decode batch: one launch over its sequences, on groups[0]'s state with the rows' shifts
  const ds4::cuda::SeqShift seq = seq_rows(groups);
  const size_t launches = seq.at ? 1 : groups.size();
  for (size_t g = 0; g < launches; ++g) {
    const auto [st, t, n] = groups[g];
    float* conv = reinterpret_cast<float*>(st->buf.as<uint8_t>() + o.conv);
    if (const KdaCapPtrs* cp = cap(g)) {  // conv0 {K-1, 3*qkv} before the rows; conv_in {n, 3*qkv} = the q|k|v part of kraw
      const size_t w = size_t(3 * qkv) * sizeof(float);
      DS4_CUDA_CHECK(cudaMemcpyAsync(cp->conv0, conv, size_t(c.linear_conv_kernel_dim - 1) * w,
                                     cudaMemcpyDeviceToDevice, stream));
      DS4_CUDA_CHECK(cudaMemcpy2DAsync(cp->conv_in, w, R(t, sl.kraw), cl.row_bytes, w, size_t(n),
                                       cudaMemcpyDeviceToDevice, stream));
    }
    // The conv state advances row by row inside one launch (a thread per channel).
    dc::conv1d_rows_f32(R(t, sl.kraw), k.conv, conv, 3 * qkv, c.linear_conv_kernel_dim, 1, true, R(t, sl.kconv),
                        dc::Conv1dRows{seq.at ? rows : n, rs(), rs(), seq}, stream);
  }
  mark("kda f_b g_b gates");
  mgemv(k.f_b, sl.fa, sl.kg);
  mgemv(k.g_b, sl.ga, sl.kgate);
  const Rows all{rows, rs()};  // gates and the output norm do not read the recurrent state
  kda_gates(R(0, sl.kg), R(0, sl.kb), k.a_log, k.dt_bias, ksh, stream, all);
  // One launch each (the recurrence: per sequence); it loops a chunk's rows in order inside the kernel.
  mark("kda recurrence");
  dc::delta_rule_qk_l2norm_rows(R(0, sl.kconv), dsh, dc::DeltaRuleRows{rows, rs()}, stream);
  for (size_t g = 0; g < launches; ++g) {
    const auto [st, t, n] = groups[g];
    dc::DeltaRuleRows drows{seq.at ? rows : n, rs()};
    drows.seq = seq;
    if (const KdaCapPtrs* cp = cap(g)) drows.states = cp->rec, drows.state_stride = nh * hd * hd;  // {n, heads, hd, hd}
    dc::delta_rule_rows(R(t, sl.kconv), R(t, sl.kg), R(t, sl.kb), reinterpret_cast<float*>(st->buf.as<uint8_t>() + o.rec),
                        R(t, sl.ko), dsh, drows, stream);
  }
  mark("kda norm + o");
  kda_gated_norm(R(0, sl.ko), R(0, sl.kgate), k.o_norm, ksh, stream, all);
  mgemv(k.o, sl.ko, sl.y);
}

// mla() of model_cuda.cu over the rows. The projections (q_a, kv_a, indexer, q_b, W_uk) do
// not read the cache, so they run for all rows first; then every row's latent (and indexer
// key) is appended at its position, then one selection launch and one attention launch for
// all rows: row t attends to positions <= pos + t only (its own selection), and the rows
// after it write positions and pools row t never reads, so each row equals its decode step.
// Each row keeps its own selection list (row scratch) for the shared-indexer layers.
// Several states' row groups (decode_batch, verify_batch): the appends, selection and
// attention once per group, on its state's own caches.
void Glm5CudaModel::Impl::mla_rows(const DMla& m, const LayerOffsets& o, std::span<const RowGroup> groups) {
  auto SF = [&](uint8_t* sb, size_t off) { return reinterpret_cast<float*>(sb + off); };
  const int64_t nah = c.num_attention_heads, kvr = c.kv_lora_rank, nope = c.qk_nope_head_dim, vd = c.v_head_dim;
  const MlaShape msh{nah, kvr, c.index_topk + c.index_kpool - 1, 1.0f / std::sqrt(float(nope)), c.rms_norm_eps};
  const IndexerShape ish{c.index_n_heads, c.index_head_dim, c.index_kpool, c.kpool_budget(), lay.max_pools};
  auto sb_of = [](const RowGroup& g) { return g.st->buf.as<uint8_t>(); };
  auto ic = [&](uint8_t* sb) { return IndexerCache{SF(sb, o.idx_keys), SF(sb, o.idx_gates), SF(sb, o.idx_pools)}; };
  const int32_t* positions = C<int32_t>(cl.positions);
  mark("mla proj (q_a kv_a idx q_b uk)");
  mproj(m.in, sl.in, sl.mraw);  // {rows, [q_a | kv_a | idx k | idx gate | idx weights]}
  // The indexer's keys, gates, weights and queries pick pools by top-k: exact in a tensor-core
  // chunk too, so its selection sees what decode steps would compute from the same inputs.
  if (tc && m.has_indexer) mproj_exact(m.in, sl.in, sl.mraw, c.q_lora_rank + kvr, m.in.rows);
  dc::rmsnorm_strided_f32(R(0, sl.mraw), rs(), m.q_a_norm, R(0, sl.qres), rs(), rows, c.q_lora_rank, c.rms_norm_eps,
                          stream);
  if (m.has_indexer) mgemv_exact(m.idx.wq_b, sl.qres, sl.iq);
  mgemv(m.q_b, sl.qres, sl.q);  // {rows, heads, nope}
  // per head (batch entry) and row: q_lat[t][h] = W_uk[h]^T q[t][h]
  mgemv(m.uk_t, sl.q, sl.qlat, dc::MatmulBatch{int(nah), m.uk_stride, 0, nope, kvr});
  auto RI = [&](int64_t t, size_t off) { return reinterpret_cast<int32_t*>(R(t, off)); };
  mark("mla append + select");
  // Each group's launches on its state's caches; a decode batch's as one launch over its
  // sequences (groups[0]'s caches, the rows' shifts: seq_rows).
  const ds4::cuda::SeqShift seq = seq_rows(groups);
  const std::span<const RowGroup> launches = seq.at ? groups.first(1) : groups;
  auto rows_of = [&](const RowGroup& g) { return Rows{seq.at ? rows : g.n, rs(), seq}; };
  for (const RowGroup& g : launches)
    mla_append(R(g.r0, sl.mkv), m.kv_a_norm, SF(sb_of(g), o.latent), positions + g.r0, msh, stream, rows_of(g));
  if (m.has_indexer) {
    for (const RowGroup& g : launches)
      indexer_append(R(g.r0, sl.ik), R(g.r0, sl.igate), m.idx.k_norm_w, m.idx.k_norm_b, m.idx.ape, ic(sb_of(g)), ish,
                     positions + g.r0, stream, rows_of(g));
    for (const RowGroup& g : launches) {
      const int64_t t = g.r0;
      indexer_select(R(t, sl.iq), R(t, sl.iw), ic(sb_of(g)), ish, positions + t, R(t, sl.pool_scores),
                     reinterpret_cast<uint8_t*>(R(t, sl.keep)), RI(t, sl.sel_idx), RI(t, sl.sel_count), stream,
                     rows_of(g));
    }
  }
  mark("mla attend");
  // A tensor-core chunk (one state) takes the tensor-core kernel (mla_tc.cu) or the FP32 GEMM
  // form; a batch never is one.
  if (tc && groups.size() == 1 && !seq.at && mla_attend_tc_on() && mla_attend_tc_supports(msh))
    mla_attend_tc(R(0, sl.qlat), SF(sb_of(groups[0]), o.latent), RI(0, sl.sel_idx), RI(0, sl.sel_count), msh,
                  R(0, sl.olat), stream, Rows{rows, rs(), {}});
  else if (groups.size() > 1 || !mla_attend_gemm(SF(sb_of(groups[0]), o.latent), msh))
    for (const RowGroup& g : launches) {
      const int64_t t = g.r0;
      mla_attend(R(t, sl.qlat), SF(sb_of(g), o.latent), RI(t, sl.sel_idx), RI(t, sl.sel_count), msh,
                 R(t, sl.att_scores), R(t, sl.olat), stream, rows_of(g));
    }
  mark("mla uv + o");
  mgemv(m.uv, sl.olat, sl.ov, dc::MatmulBatch{int(nah), m.uv_stride, 0, kvr, vd});  // o[t][h] = W_uv[h] o_lat[t][h]
  mgemv(m.o, sl.ov, sl.y);
}

// ffn()'s MoE over the rows: route each row, group, each used expert once for its rows.
void Glm5CudaModel::Impl::moe_rows(const DMoe& m) {
  const int64_t H = c.hidden_size, K = c.num_experts_per_tok, I = c.moe_intermediate_size, Sh = m.sh_down.cols;
  const int64_t E = c.n_routed_experts, pairs = rows * K;
  const float lim = c.swiglu_limit;
  int32_t* ids = C<int32_t>(cl.ids);
  float* wts = C(cl.wts);
  mark("moe proj (shared gate/up, router)");
  mproj(m.in, sl.in, sl.gu);  // {rows, [shared gate | shared up | router]}
  if (tc) mproj_exact(m.in, sl.in, sl.gu, 2 * Sh, 2 * Sh + E);  // router logits pick experts: exact
  mark("moe route + group");
  const RouteShape rsh{E, K, c.norm_topk_prob, c.routed_scaling_factor, c.n_group, c.topk_group};
  moe_route(R(0, sl.router), m.bias, rsh, ids, wts, stream, Rows{rows, rs()});  // ids, wts {rows, K}
  // Entries of up to S rows (moe_group_stride: 4 for a small exact pass, else kGroupRows).
  const int64_t S = dc::moe_group_stride(rows, tc && opt.expert_mma);
  const dc::MoeGroup g{C<int32_t>(cl.experts), C<int32_t>(cl.live), C<int32_t>(cl.counts), C<int32_t>(cl.tok),
                   C<int32_t>(cl.slot), S};
  dc::moe_group(ids, rows, K, E, g, stream);
  mark("moe shared down");
  if (Sh > 0) {
    dc::swiglu_clamp_strided_f32(R(0, sl.gu), rs(), rows, Sh, lim, R(0, sl.act), rs(), stream);
    mgemv(m.sh_down, sl.act, sl.sh_out);
  } else {  // n_shared_experts = 0: no shared expert (an empty launch is a CUDA error)
    DS4_CUDA_CHECK(cudaMemset2DAsync(R(0, sl.sh_out), cl.row_bytes, 0, size_t(H) * sizeof(float), size_t(rows), stream));
  }
  mark("moe experts gate_up");
  // Entry u = up to S rows of a used expert (at most moe_group_entries of them, *live decides
  // on the device; a pass of at most S rows has one entry per used expert).
  dc::GemvRows r = dc::moe_group_rows(g, rows, K, E, rows, m.gate_up.stride, m.gate_up.scale_stride);
  r.x_row = rs(), r.x_idx = g.tok, r.y_row = 2 * I, r.y_idx = g.slot;  // egu {rows * K, 2I}
  // In a tensor-core chunk the same entries as BF16 MMAs (each expert still read once per entry),
  // or from grouped_gemm_min_rows pairs per expert as cuBLAS grouped GEMMs.
  const dc::ExpertPath path =
      dc::plan_experts(tc && opt.expert_mma, m.gate_up.first, m.down.first, r, rows * K / E, gg.get(), stream);
  // x16: BF16 copies of x (DS4_GROUPED_MMA_X16, on by default) in a buffer idle during the product: gate_up's
  // rows in ey (pairs x H floats >= rows x H BF16), down's in egu (pairs x 2I floats).
  auto experts = [&](const WeightMatrix& w, const float* x, int64_t x_rows, float* y, void* x16) {
    dc::grouped_experts(w, x, y, r, path, stream, rows * K / E, gg.get(), x16, x_rows);
  };
  experts(m.gate_up.first, R(0, sl.in), rows, C(cl.egu), C(cl.ey));
  mark("moe experts down + combine");
  dc::swiglu_clamp_rows_f32(C(cl.egu), pairs, I, lim, C(cl.eact), stream);
  r.batch.id_stride = m.down.stride, r.batch.id_scale_stride = m.down.scale_stride;
  r.x_row = I, r.x_idx = g.slot, r.y_row = H;  // eact {rows * K, I} -> ey {rows * K, H}
  experts(m.down.first, C(cl.eact), pairs, C(cl.ey), C(cl.egu));
  moe_combine(C(cl.ey), wts, K, R(0, sl.sh_out), H, R(0, sl.y), stream, Rows{rows, rs()});  // ey {rows, K, H}
}

void Glm5CudaModel::Impl::ffn_rows(const DLayer& L) {
  if (L.sparse) return moe_rows(L.moe);
  mark("dense mlp");
  const int64_t inter = L.mlp.down.cols;
  mproj(L.mlp.gate_up, sl.in, sl.gu);
  dc::swiglu_clamp_strided_f32(R(0, sl.gu), rs(), rows, inter, c.swiglu_limit, R(0, sl.act), rs(), stream);
  mgemv(L.mlp.down, sl.act, sl.y);
}

// One decoder layer over the chunk's rows (the trunk's, or the MTP head's own: mtp.cu), on
// the caches at `o` in the groups' state buffers (model_impl.h); positions: cl.positions.
void Glm5CudaModel::Impl::layer_rows(const DLayer& L, const LayerOffsets& o, std::span<const RowGroup> groups,
                                     std::span<const KdaCapPtrs> caps) {
  hc_in_rows(L.attn_hc, L.input_norm);
  if (L.kda) kda_rows(*L.kda, o, groups, caps);
  else mla_rows(*L.mla, o, groups);
  hc_out_rows(L.attn_hc);
  hc_in_rows(L.ffn_hc, L.post_norm);
  ffn_rows(L);
  hc_out_rows(L.ffn_hc);
}

// Every trunk layer over the groups' rows; while capturing, each group of more than one row
// records its KDA layers (a window of one row keeps all of itself: nothing to record).
void Glm5CudaModel::Impl::trunk_rows(std::span<const RowGroup> groups) {
  std::vector<KdaCapPtrs> caps(groups.size());
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    for (size_t g = 0; g < groups.size(); ++g)
      caps[g] = capturing && groups[g].n > 1 ? cap_ptrs(*groups[g].st, l) : KdaCapPtrs{};
    layer_rows(dw.layers[size_t(l)], lay.layers[size_t(l)], groups, caps);
  }
}

// Everything of one chunk of `rows` tokens: input rows in, every layer, logits out (row
// rows-1 to pinned row 0 for kLast; all rows for kAll), position counter += rows.
void Glm5CudaModel::Impl::enqueue_chunk(CudaState& st, Logits mode) {
  uint8_t* sb = st.buf.as<uint8_t>();
  int32_t* pos = reinterpret_cast<int32_t*>(sb + lay.pos);
  const int64_t V = c.vocab_size;
  cur_off = sl.x, alt_off = sl.x2;
  mark("input copy");
  DS4_CUDA_CHECK(cudaMemcpy2DAsync(R(0, sl.x), cl.row_bytes, in_host->p, sl.in_bytes, sl.in_bytes, size_t(rows),
                                   cudaMemcpyHostToDevice, stream));
  enqueue_positions(pos, 0, rows);
  const RowGroup all{&st, 0, rows};
  trunk_rows({&all, 1});
  mark("head (norm, lm_head, logits copy)");
  // The MTP head takes every row's normed output (mtp.cu): then all rows get their hfin. A
  // verify-sized chunk queues them; a prefill chunk's pairs go through the head after the
  // chunk, from these rows (mtp_chunk_pairs: the head's layer never writes sl.hfin).
  if (st.mtp_on) {
    hc_mean_norm(R(0, cur_off), c.hc_mult, c.hidden_size, dw.norm, c.rms_norm_eps, R(0, sl.hfin), stream,
                 Rows{rows, rs()});
    if (!mtp_direct(rows)) mtp_push(st, R(0, sl.hfin), rows, rs());
  }
  if (mode == Logits::kAll) {
    if (st.mtp_on) head_logits_rows();  // hfin is there already
    else head_all_rows();
  } else if (mode == Logits::kLast) {
    const int64_t t = rows - 1;
    if (!st.mtp_on)
      hc_mean_norm(R(t, cur_off), c.hc_mult, c.hidden_size, dw.norm, c.rms_norm_eps, R(t, sl.hfin), stream);
    dc::gemv(dw.lm_head, R(t, sl.hfin), R(t, sl.logits), stream);
    DS4_CUDA_CHECK(cudaMemcpyAsync(logits_host->p, R(t, sl.logits), size_t(V) * sizeof(float), cudaMemcpyDeviceToHost,
                                   stream));
  }
  enqueue_advance(pos, rows);
  mark(nullptr);  // the end of the last section
}

// Every row's final HC mean + norm (hfin), lm_head, logits to pinned rows 0 .. rows - 1 (a
// decode batch in candidates mode: their candidates, batch_cand).
void Glm5CudaModel::Impl::head_all_rows() {
  hc_mean_norm(R(0, cur_off), c.hc_mult, c.hidden_size, dw.norm, c.rms_norm_eps, R(0, sl.hfin), stream,
               Rows{rows, rs()});
  head_logits_rows();
}

void Glm5CudaModel::Impl::head_logits_rows() {
  const int64_t V = c.vocab_size;
  mgemv(dw.lm_head, sl.hfin, sl.logits);
  enqueue_logits_rows(R(0, sl.logits), size_t(rs()), rows, V, logits_host->p, batch_cand.active(), stream);
}

void Glm5CudaModel::Impl::run_chunk(CudaState& st, int64_t n, Logits mode) {
  fresh_graphs(st);
  rows = n;
  // A prefill chunk (more rows than a verify) launches directly, on tensor cores from gemm_rows.
  const bool prefill = n > opt.chunk_rows;
  tc = prefill && mm && opt.gemm_rows > 0 && n >= opt.gemm_rows;
  // A captured verify also copies into st.cap (its own graph; dropped when st.cap grows).
  const int64_t key = n * 3 + (mode == Logits::kAll ? 2 : mode == Logits::kLast ? 1 : 0) + (capturing ? kCaptureKey : 0);
  try {
    cudaGraphExec_t direct = nullptr;  // never captured
    replay(prefill ? direct : st.chunk_graph[key], prefill, [&] { enqueue_chunk(st, mode); });
  } catch (...) {
    tc = false;
    throw;
  }
  tc = false;
}

ChunkProfile Glm5CudaModel::profile_chunk(ModelState& state, std::span<const int32_t> tokens) {
  auto* st = dynamic_cast<CudaState*>(&state);
  Impl& m = *impl_;
  const int64_t n = int64_t(tokens.size());
  // A verify-sized chunk (<= chunk_rows), or a prefill chunk (<= prefill_rows; not with the MTP
  // head on: its pairs would need mtp_chunk_pairs after the chunk) on the path forward() would
  // take (tensor cores from gemm_rows).
  const bool prefill = n > m.opt.chunk_rows;
  const int64_t most = st && !st->mtp_on && m.opt.prefill_rows > m.opt.chunk_rows
                           ? std::min<int64_t>(m.opt.prefill_rows, m.cl.rows) : m.opt.chunk_rows;
  if (!st || n < 1 || n > std::max<int64_t>(most, m.opt.chunk_rows) || m.opt.chunk_rows < 2 ||
      st->pos + n > m.info.max_context)
    throw InputError("glm5 cuda profile_chunk: needs a CUDA state, 1.." + std::to_string(most) +
                     " tokens (chunk_rows > 1) and room in the context");
  for (int64_t t = 0; t < n; ++t) m.input_row(tokens[size_t(t)], t);
  m.mtp_before_forward(*st, n);
  Impl::Marks marks;
  m.rows = n;
  m.marks = &marks;
  m.tc = prefill && m.mm && m.opt.gemm_rows > 0 && n >= m.opt.gemm_rows;  // as run_chunk
  // A prefill chunk enqueues thousands of launches (cuBLAS calls among them): a longer hold.
  hold_kernel<<<1, 1, 0, m.stream>>>(int64_t(prefill ? 300 : 20) * 1000 * 1000);
  DS4_CUDA_CHECK_LAUNCH();
  try {
    m.enqueue_chunk(*st, prefill ? Logits::kLast : Logits::kAll);
  } catch (...) {
    m.marks = nullptr;
    m.tc = false;
    throw;
  }
  m.marks = nullptr;
  m.tc = false;
  DS4_CUDA_CHECK(cudaStreamSynchronize(m.stream));
  m.mtp_after_forward(*st, tokens, st->pos);
  st->pos += n;
  ChunkProfile p;
  marks.each([&](const char* name, double ms) {
    p.total_ms += ms;
    auto it = std::find_if(p.sections.begin(), p.sections.end(), [&](const auto& s) { return s.first == name; });
    if (it == p.sections.end()) p.sections.emplace_back(name, ms);
    else it->second += ms;
  });
  return p;
}

}  // namespace ds4::glm5
