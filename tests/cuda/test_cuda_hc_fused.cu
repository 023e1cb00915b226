// The fused mHC kernels (backend/cuda hc_fused.cu) against the unfused ops they replace
// (gemv_batched of fn's column blocks + hc_pre_f32 / hc_head_f32, hc_post_f32):
//   - the same outputs within a rounding tolerance (the sums run in another order);
//   - bit for bit where the model relies on it: hc_post folded in = hc_post_f32 then the fused
//     hc_pre (the decode step folds, the chunk rows may not), the MoE combination folded in = its
//     sum as block_out, row t of a multi-row launch (one launch below 64 rows, products + tail
//     from there) = a one-row launch on row t (decode step = chunk row), the counters back at zero;
//     the cluster form (a thread block cluster per row, below 64 rows) = the single-launch form
//     with its last block's tail, every buffer and the Q8_0 copy, and taken where expected
//     (DeepSeek's and GLM's shapes, a portable 8-block cluster, a 2-block one);
//   - fn layouts it does not take are refused (hc_fused_supported, InputError);
//   - the split (Sinkhorn: pre, post, comb) and the collapse against the CPU's
//     (cpu::hc_split_sinkhorn_f32) for n_hc 1 .. 8: the register form (n <= 5) and the shared one.
// Plain executable: prints ok / FAIL per check, exits 1 on a failure.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/hyper_connections.h"
#include "backend/cuda/check.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/gemv_act.h"
#include "backend/cuda/hyper_connections.h"
#include "backend/cuda/memory.h"
#include "core/error.h"
#include "core/half.h"
#include "core/weight.h"
#include "test_common.h"

using namespace ds4;
using ds4::cuda_test::check;

namespace {

namespace dc = ds4::cuda;

struct Dev {
  dc::DeviceBuffer b;
  explicit Dev(size_t floats) : b(floats * 4, "test_cuda_hc_fused") {
    DS4_CUDA_CHECK(cudaMemset(b.get(), 0xff, b.bytes()));  // NaN until written
  }
  float* f() const { return b.as<float>(); }
  void put(const std::vector<float>& v, size_t at = 0) const {
    DS4_CUDA_CHECK(cudaMemcpy(f() + at, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  }
  std::vector<float> get(size_t at, size_t n) const {
    std::vector<float> v(n);
    DS4_CUDA_CHECK(cudaMemcpy(v.data(), f() + at, n * 4, cudaMemcpyDeviceToHost));
    return v;
  }
};

std::vector<float> rnd(std::mt19937& g, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// Relative max difference: max |a - b| / max(1, max |b|).
float rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float scale = 1.f;
  for (float v : b) scale = std::max(scale, std::fabs(v));
  return ds4::cuda_test::max_diff(a.data(), b.data(), a.size()) / scale;
}

// fn {m, n * hidden} in `t`, stored as `splits` column blocks {m, cols} back to back.
struct Fn {
  dc::DeviceBuffer buf;
  dc::HcFn fn;
  WeightMatrix block;  // column block 0 (gemv_batched steps split_stride to the next)
};

Fn make_fn(std::mt19937& g, DType t, int64_t m, int64_t splits, int64_t cols) {
  const std::vector<float> v = rnd(g, size_t(m * splits * cols), -0.05f, 0.05f);
  const size_t wb = t == DType::F32 ? 4 : 2;
  std::vector<uint8_t> bytes(v.size() * wb);
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::F32) std::memcpy(&bytes[i * 4], &v[i], 4);
    else {
      const uint16_t h = t == DType::F16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  Fn f{dc::DeviceBuffer(bytes.size(), "test fn"), {}, {}};
  DS4_CUDA_CHECK(cudaMemcpy(f.buf.get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  f.fn = dc::HcFn{f.buf.get(), t, m, cols, splits, size_t(m * cols) * wb};
  f.block = WeightMatrix{t, m, cols, f.buf.get()};
  return f;
}

// One row's buffers at `row * stride` floats: streams x, y (hc_post's out), block_out,
// collapsed, post, comb, partials.
struct RowLayout {
  int64_t x, y, b, col, head, post, comb, part, stride;
};
RowLayout row_layout(int64_t n, int64_t H, int64_t splits) {
  RowLayout L{};
  int64_t at = 0;
  auto take = [&](int64_t f) {
    const int64_t o = at;
    at += (f + 63) / 64 * 64;
    return o;
  };
  L.x = take(n * H), L.y = take(n * H), L.b = take(H), L.col = take(H), L.head = take(H), L.post = take(n),
  L.comb = take(n * n);
  L.part = take(splits * ((2 + n) * n + 1));
  L.stride = at;
  return L;
}

void test_case(DType t, int64_t n, int64_t H, int64_t splits, int rows, bool expect_cluster = false) {
  std::mt19937 g(1234 + unsigned(H) + unsigned(t) * 7);
  const int64_t m = (2 + n) * n, cols = n * H / splits;
  const std::string name = std::string(t == DType::F32 ? "F32" : t == DType::F16 ? "F16" : "BF16") + " n=" +
                           std::to_string(n) + " hidden=" + std::to_string(H) + " splits=" + std::to_string(splits);
  Fn pre_fn = make_fn(g, t, m, splits, cols), head_fn = make_fn(g, t, n, splits, cols);
  dc::HcDims d;
  d.n_hc = n, d.hidden = H, d.mix_splits = splits;
  const RowLayout L = row_layout(n, H, splits);
  Dev buf{static_cast<size_t>(L.stride * rows)}, ref{static_cast<size_t>(L.stride * rows)};
  Dev w{static_cast<size_t>(4 * m + 3 + H)};
  // weights: scale {3}, base {m}, out_norm {H}; the head's scale {1}, base {n}
  const float *scale = w.f(), *base = w.f() + 3, *norm_u = w.f() + 3 + m, *hscale = norm_u + H, *hbase = hscale + 1;
  w.put(rnd(g, 3, 0.5f, 1.5f));
  w.put(rnd(g, size_t(m), -1.f, 1.f), 3);
  w.put(rnd(g, size_t(H), 0.5f, 1.5f), size_t(3 + m));
  w.put(rnd(g, 1, 0.5f, 1.5f), size_t(3 + m + H));
  w.put(rnd(g, size_t(n), -1.f, 1.f), size_t(4 + m + H));
  // The norm 16-byte aligned, as the model's (w's copy, `norm_u`, is not: section 1 keeps it, the
  // fused collapse's generic loop; the others take the register collapse and the cluster form).
  Dev nrm{static_cast<size_t>(H)};
  DS4_CUDA_CHECK(cudaMemcpy(nrm.f(), norm_u, size_t(H) * 4, cudaMemcpyDeviceToDevice));
  const float* norm = nrm.f();
  for (int r = 0; r < rows; ++r) {  // streams, block out, the previous split's post and comb
    const size_t o = size_t(r * L.stride);
    buf.put(rnd(g, size_t(n * H), -2.f, 2.f), o + L.x);
    buf.put(rnd(g, size_t(H), -2.f, 2.f), o + L.b);
    buf.put(rnd(g, size_t(n), 0.2f, 1.8f), o + L.post);
    buf.put(rnd(g, size_t(n * n), 0.f, 0.5f), o + L.comb);
  }
  DS4_CUDA_CHECK(cudaMemcpy(ref.f(), buf.f(), ref.b.bytes(), cudaMemcpyDeviceToDevice));
  dc::DeviceBuffer counters(size_t(rows) * 4, "test counters");
  DS4_CUDA_CHECK(cudaMemset(counters.get(), 0, counters.bytes()));
  check(dc::hc_fused_supported(pre_fn.fn, d, false) && dc::hc_fused_supported(head_fn.fn, d, true),
        name + ": supported");
  const dc::HcRows one{}, all{rows, L.stride};
  auto R = [&](const Dev& b, int r, int64_t off) { return b.f() + r * L.stride + off; };
  auto sc = [&](const Dev& b, int r) { return dc::HcFusedScratch{R(b, r, L.part), counters.as<unsigned>() + r}; };
  auto rows_sc = [&](const Dev& b) { return dc::HcFusedScratch{R(b, 0, L.part), counters.as<unsigned>()}; };

  // 1. unfused reference on row 0: gemv of the column blocks + hc_pre_f32
  dc::gemv_batched(pre_fn.block, R(ref, 0, L.x), R(ref, 0, L.part),
                   dc::GemvBatch{int(splits), nullptr, pre_fn.fn.split_stride, 0, cols, m}, nullptr);
  dc::hc_pre_f32(R(ref, 0, L.part), scale, base, d, R(ref, 0, L.x), norm_u, R(ref, 0, L.col), R(ref, 0, L.post),
                 R(ref, 0, L.comb), nullptr);
  // fused, one row, on a copy of row 0's streams
  Dev f1{static_cast<size_t>(L.stride)};
  DS4_CUDA_CHECK(cudaMemcpy(f1.f(), buf.f(), size_t(L.stride) * 4, cudaMemcpyDeviceToDevice));
  dc::hc_pre_fused(pre_fn.fn, scale, base, d, R(f1, 0, L.x), nullptr, norm_u, R(f1, 0, L.col), R(f1, 0, L.post),
                   R(f1, 0, L.comb), sc(f1, 0), one, nullptr);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const float dcol = rel_diff(f1.get(L.col, size_t(H)), ref.get(L.col, size_t(H)));
  const float dpost = rel_diff(f1.get(L.post, size_t(n)), ref.get(L.post, size_t(n)));
  const float dcomb = rel_diff(f1.get(L.comb, size_t(n * n)), ref.get(L.comb, size_t(n * n)));
  check(dcol < 1e-4f && dpost < 1e-5f && dcomb < 1e-5f,
        name + ": hc_pre_fused vs gemv + hc_pre_f32 (collapsed " + std::to_string(dcol) + ", post " +
            std::to_string(dpost) + ", comb " + std::to_string(dcomb) + ")");
  check(same(f1.get(L.x, size_t(n * H)), ref.get(L.x, size_t(n * H))), name + ": the streams stay unwritten");

  // 2. hc_post folded in == hc_post_f32 then hc_pre_fused, bit for bit (row 0 of buf, into y)
  Dev a{static_cast<size_t>(L.stride)}, b{static_cast<size_t>(L.stride)};
  DS4_CUDA_CHECK(cudaMemcpy(a.f(), buf.f(), size_t(L.stride) * 4, cudaMemcpyDeviceToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(b.f(), buf.f(), size_t(L.stride) * 4, cudaMemcpyDeviceToDevice));
  dc::hc_post_f32(d, R(a, 0, L.b), R(a, 0, L.x), R(a, 0, L.post), R(a, 0, L.comb), R(a, 0, L.y), nullptr);
  dc::hc_pre_fused(pre_fn.fn, scale, base, d, R(a, 0, L.y), nullptr, norm, R(a, 0, L.col), R(a, 0, L.post),
                   R(a, 0, L.comb), sc(a, 0), one, nullptr);
  const dc::HcPostIn pin{R(b, 0, L.b), R(b, 0, L.x), R(b, 0, L.post), R(b, 0, L.comb)};
  dc::hc_pre_fused(pre_fn.fn, scale, base, d, R(b, 0, L.y), &pin, norm, R(b, 0, L.col), R(b, 0, L.post),
                   R(b, 0, L.comb), sc(b, 0), one, nullptr);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  check(same(a.get(0, size_t(L.stride)), b.get(0, size_t(L.stride))),
        name + ": hc_post folded in = hc_post_f32 + hc_pre_fused (every buffer, bit for bit)");

  // 2b. the MoE form (HcPostIn::experts): block_out = sum_j w[j] y[j] + sh computed in the
  // prologue = the same sum on the host with fma in order (moe_combine's formula), bit for bit
  {
    const int64_t K = 6;
    const std::vector<float> ey = rnd(g, size_t(K * H), -2.f, 2.f), wts = rnd(g, size_t(K), 0.f, 1.f),
                             sh = rnd(g, size_t(H), -1.f, 1.f);
    std::vector<float> bo(static_cast<size_t>(H));
    for (int64_t i = 0; i < H; ++i) {
      float r = 0.f;
      for (int64_t j = 0; j < K; ++j) r = std::fma(wts[size_t(j)], ey[size_t(j * H + i)], r);
      bo[size_t(i)] = r + sh[size_t(i)];
    }
    Dev e{static_cast<size_t>(K * H + K + H)}, c1{static_cast<size_t>(L.stride)}, c2{static_cast<size_t>(L.stride)};
    e.put(ey), e.put(wts, size_t(K * H)), e.put(sh, size_t(K * H + K));
    DS4_CUDA_CHECK(cudaMemcpy(c1.f(), buf.f(), size_t(L.stride) * 4, cudaMemcpyDeviceToDevice));
    DS4_CUDA_CHECK(cudaMemcpy(c2.f(), buf.f(), size_t(L.stride) * 4, cudaMemcpyDeviceToDevice));
    c1.put(bo, size_t(L.b));
    const dc::HcPostIn p1{R(c1, 0, L.b), R(c1, 0, L.x), R(c1, 0, L.post), R(c1, 0, L.comb)};
    const dc::HcPostIn p2{nullptr, R(c2, 0, L.x), R(c2, 0, L.post), R(c2, 0, L.comb), e.f(), e.f() + K * H,
                          e.f() + K * H + K, K};
    dc::hc_pre_fused(pre_fn.fn, scale, base, d, R(c1, 0, L.y), &p1, norm, R(c1, 0, L.col), R(c1, 0, L.post),
                     R(c1, 0, L.comb), sc(c1, 0), one, nullptr);
    dc::hc_pre_fused(pre_fn.fn, scale, base, d, R(c2, 0, L.y), &p2, norm, R(c2, 0, L.col), R(c2, 0, L.post),
                     R(c2, 0, L.comb), sc(c2, 0), one, nullptr);
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
    check(same(c1.get(L.y, size_t(n * H)), c2.get(L.y, size_t(n * H))) &&
              same(c1.get(L.col, size_t(L.stride - L.col)), c2.get(L.col, size_t(L.stride - L.col))),
          name + ": the MoE combination folded in = its fma sum as block_out (streams, split, collapse)");
  }

  // 2c. the collapsed row quantized by the fused kernel (HcFusedScratch::q8_0, the decode step's
  // act_quant input of the next product) = quantize_act of the row it writes, byte for byte, and
  // every f32 buffer as without it (hc_post folded in, as layer_step calls it)
  if (dc::hc_fused_quant_supported(d)) {
    const size_t qb = dc::act_q8_row_bytes(ActBlock::kQ8_0, H);
    Dev c3{static_cast<size_t>(L.stride)}, c4{static_cast<size_t>(L.stride)}, q3{qb / 4}, q4{qb / 4};
    DS4_CUDA_CHECK(cudaMemcpy(c3.f(), buf.f(), size_t(L.stride) * 4, cudaMemcpyDeviceToDevice));
    DS4_CUDA_CHECK(cudaMemcpy(c4.f(), buf.f(), size_t(L.stride) * 4, cudaMemcpyDeviceToDevice));
    DS4_CUDA_CHECK(cudaMemset(q3.f(), 0x5a, qb));
    DS4_CUDA_CHECK(cudaMemset(q4.f(), 0x5a, qb));
    const dc::DeviceActQ8 a3 = dc::act_q8_carve(q3.f(), ActBlock::kQ8_0, H, 1), a4 = dc::act_q8_carve(q4.f(), ActBlock::kQ8_0, H, 1);
    const dc::HcPostIn p3{R(c3, 0, L.b), R(c3, 0, L.x), R(c3, 0, L.post), R(c3, 0, L.comb)};
    const dc::HcPostIn p4{R(c4, 0, L.b), R(c4, 0, L.x), R(c4, 0, L.post), R(c4, 0, L.comb)};
    dc::HcFusedScratch s3 = sc(c3, 0);
    s3.q8_0 = a3.q, s3.q8_0_d = a3.d;
    dc::hc_pre_fused(pre_fn.fn, scale, base, d, R(c3, 0, L.y), &p3, nrm.f(), R(c3, 0, L.col), R(c3, 0, L.post),
                     R(c3, 0, L.comb), s3, one, nullptr);
    dc::hc_pre_fused(pre_fn.fn, scale, base, d, R(c4, 0, L.y), &p4, nrm.f(), R(c4, 0, L.col), R(c4, 0, L.post),
                     R(c4, 0, L.comb), sc(c4, 0), one, nullptr);
    dc::quantize_act(R(c4, 0, L.col), H, 1, a4, nullptr);
    DS4_CUDA_CHECK(cudaDeviceSynchronize());
    check(same(c3.get(0, size_t(L.stride)), c4.get(0, size_t(L.stride))) &&
              same(q3.get(0, qb / 4), q4.get(0, qb / 4)),
          name + ": the collapse's Q8_0 copy = quantize_act of the collapsed row (bytes), f32 buffers unchanged");
  }

  // 3. rows: row r of one launch == a one-row launch on row r (with hc_post folded in)
  Dev rb{static_cast<size_t>(L.stride * rows)}, sb{static_cast<size_t>(L.stride * rows)};
  DS4_CUDA_CHECK(cudaMemcpy(rb.f(), buf.f(), rb.b.bytes(), cudaMemcpyDeviceToDevice));
  DS4_CUDA_CHECK(cudaMemcpy(sb.f(), buf.f(), sb.b.bytes(), cudaMemcpyDeviceToDevice));
  const dc::HcPostIn rin{R(rb, 0, L.b), R(rb, 0, L.x), R(rb, 0, L.post), R(rb, 0, L.comb)};
  dc::hc_pre_fused(pre_fn.fn, scale, base, d, R(rb, 0, L.y), &rin, norm, R(rb, 0, L.col), R(rb, 0, L.post),
                   R(rb, 0, L.comb), rows_sc(rb), all, nullptr);
  for (int r = 0; r < rows; ++r) {
    const dc::HcPostIn sin{R(sb, r, L.b), R(sb, r, L.x), R(sb, r, L.post), R(sb, r, L.comb)};
    dc::hc_pre_fused(pre_fn.fn, scale, base, d, R(sb, r, L.y), &sin, norm, R(sb, r, L.col), R(sb, r, L.post),
                     R(sb, r, L.comb), sc(sb, r), one, nullptr);
  }
  // the heads of every row, both ways, from the streams just written
  dc::hc_head_fused(head_fn.fn, hscale, hbase, d, R(rb, 0, L.y), nullptr, norm, R(rb, 0, L.head), rows_sc(rb), all,
                    nullptr);
  for (int r = 0; r < rows; ++r)
    dc::hc_head_fused(head_fn.fn, hscale, hbase, d, R(sb, r, L.y), nullptr, norm, R(sb, r, L.head), sc(sb, r), one,
                      nullptr);
  // (not the partials: the cluster form keeps them in shared memory, the others in this scratch)
  for (int r = 0; r < rows; ++r)
    for (const Dev* b : {&rb, &sb}) DS4_CUDA_CHECK(cudaMemset(R(*b, r, L.part), 0, size_t(L.stride - L.part) * 4));
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  check(same(rb.get(0, size_t(L.stride * rows)), sb.get(0, size_t(L.stride * rows))),
        name + ": " + std::to_string(rows) + " rows in one launch = one launch per row (hc_pre with hc_post, head)");
  std::vector<unsigned> cnt(static_cast<size_t>(rows));
  DS4_CUDA_CHECK(cudaMemcpy(cnt.data(), counters.get(), cnt.size() * 4, cudaMemcpyDeviceToHost));
  bool zero = true;
  for (unsigned c : cnt) zero = zero && c == 0;
  check(zero, name + ": the arrival counters are back at zero");

  // 3b. the cluster form (decode and rows below 64: hc_fused_cluster_form) = the single-launch
  // form with its last block's tail, every buffer but the partials bit for bit (hc_post folded
  // in, then the head into its own rows), and the Q8_0 copy of one row's collapse likewise
  if (rows < 64) {
    const bool form = dc::hc_fused_cluster_form(pre_fn.fn, d, false, R(buf, 0, L.y), R(buf, 0, L.col), norm, all) &&
                      dc::hc_fused_cluster_form(head_fn.fn, d, true, R(buf, 0, L.y), R(buf, 0, L.head), norm, all);
    if (expect_cluster) check(form, name + ": the cluster form is taken (hc_pre and the head)");
    Dev cb{static_cast<size_t>(L.stride * rows)}, lb{static_cast<size_t>(L.stride * rows)};
    const size_t qb = dc::hc_fused_quant_supported(d) ? dc::act_q8_row_bytes(ActBlock::kQ8_0, H) : 4;
    Dev qc{qb / 4}, ql{qb / 4};
    for (bool cluster : {true, false}) {
      Dev& o = cluster ? cb : lb;
      Dev& q = cluster ? qc : ql;
      DS4_CUDA_CHECK(cudaMemcpy(o.f(), buf.f(), o.b.bytes(), cudaMemcpyDeviceToDevice));
      DS4_CUDA_CHECK(cudaMemset(q.f(), 0x5a, qb));
      dc::hc_fused_set_cluster(cluster);
      const dc::HcPostIn cin{R(o, 0, L.b), R(o, 0, L.x), R(o, 0, L.post), R(o, 0, L.comb)};
      dc::hc_pre_fused(pre_fn.fn, scale, base, d, R(o, 0, L.y), &cin, nrm.f(), R(o, 0, L.col), R(o, 0, L.post),
                       R(o, 0, L.comb), rows_sc(o), all, nullptr);
      dc::hc_head_fused(head_fn.fn, hscale, hbase, d, R(o, 0, L.y), nullptr, nrm.f(), R(o, 0, L.head), rows_sc(o), all,
                        nullptr);
      if (dc::hc_fused_quant_supported(d)) {  // row 0 again, its collapse quantized
        dc::HcFusedScratch s1 = sc(o, 0);
        const dc::DeviceActQ8 aq = dc::act_q8_carve(q.f(), ActBlock::kQ8_0, H, 1);
        s1.q8_0 = aq.q, s1.q8_0_d = aq.d;
        dc::hc_pre_fused(pre_fn.fn, scale, base, d, R(o, 0, L.x), nullptr, nrm.f(), R(o, 0, L.b), R(o, 0, L.post),
                         R(o, 0, L.comb), s1, one, nullptr);
      }
      // the partials: the single-launch form's scratch in global memory, the cluster form's in
      // shared memory (never written here), so not compared
      for (int r = 0; r < rows; ++r) DS4_CUDA_CHECK(cudaMemset(R(o, r, L.part), 0, size_t(L.stride - L.part) * 4));
      DS4_CUDA_CHECK(cudaDeviceSynchronize());
    }
    dc::hc_fused_set_cluster(true);
    check(same(cb.get(0, size_t(L.stride * rows)), lb.get(0, size_t(L.stride * rows))) &&
              same(qc.get(0, qb / 4), ql.get(0, qb / 4)),
          name + ": the cluster form (" + (form ? "taken" : "not taken") +
              ") = the single-launch form (every buffer, the Q8_0 copy, bit for bit)");
  }

  // 4. the head vs gemv + hc_head_f32 (row 0 of ref's streams)
  Dev hf{static_cast<size_t>(L.stride)}, hu{static_cast<size_t>(H)};
  DS4_CUDA_CHECK(cudaMemcpy(hf.f(), ref.f(), size_t(L.stride) * 4, cudaMemcpyDeviceToDevice));
  dc::gemv_batched(head_fn.block, R(ref, 0, L.x), R(ref, 0, L.part),
                   dc::GemvBatch{int(splits), nullptr, head_fn.fn.split_stride, 0, cols, n}, nullptr);
  dc::hc_head_f32(R(ref, 0, L.part), hscale, hbase, d, R(ref, 0, L.x), norm, hu.f(), nullptr);
  dc::hc_head_fused(head_fn.fn, hscale, hbase, d, R(hf, 0, L.x), nullptr, norm, R(hf, 0, L.col), sc(hf, 0), one,
                    nullptr);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const float dh = rel_diff(hf.get(L.col, size_t(H)), hu.get(0, size_t(H)));
  check(dh < 1e-4f, name + ": hc_head_fused vs gemv + hc_head_f32 (" + std::to_string(dh) + ")");
}

// 5. The GPU's split and collapse (hc_pre_f32: the kernel hc_pre_fused's tail shares) against the CPU's
// on the same normalized mix, n_hc 1 .. 8 (n <= 5: Sinkhorn in registers, gathers by shuffles; above:
// the shared-memory form). The two run the same operations in the same order; only the flat norm
// factor's sum order differs, so the bound is a few float roundings through 20 iterations.
void test_split_vs_cpu(int64_t n) {
  const int64_t H = 64, m = (2 + n) * n;
  std::mt19937 g(77 + unsigned(n));
  const std::vector<float> mix_raw = rnd(g, size_t(m), -2.f, 2.f), x = rnd(g, size_t(n * H), -1.f, 1.f),
                           scale = rnd(g, 3, 0.5f, 1.5f), base = rnd(g, size_t(m), -1.f, 1.f);
  Dev dm{size_t(m)}, dx{size_t(n * H)}, ds{3}, db{size_t(m)}, out{size_t(H + n + n * n)};
  dm.put(mix_raw), dx.put(x), ds.put(scale), db.put(base);
  dc::HcDims d;
  d.n_hc = n, d.hidden = H, d.mix_splits = 1;
  dc::hc_pre_f32(dm.f(), ds.f(), db.f(), d, dx.f(), nullptr, out.f(), out.f() + H, out.f() + H + n, nullptr);
  DS4_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> got = out.get(0, size_t(H + n + n * n));
  float ss = 0.f;
  for (float v : x) ss += v * v;
  const float rn = 1.f / std::sqrt(ss / float(n * H) + d.norm_eps);
  std::vector<float> mix(static_cast<size_t>(m)), pre(static_cast<size_t>(n)), post(static_cast<size_t>(n)),
      comb(static_cast<size_t>(n * n)), col(static_cast<size_t>(H), 0.f);
  for (int64_t i = 0; i < m; ++i) mix[size_t(i)] = mix_raw[size_t(i)] * rn;
  cpu::HcShape cs;
  cs.n_hc = n, cs.hidden = H, cs.sinkhorn_iters = d.sinkhorn_iters, cs.hc_eps = d.hc_eps, cs.norm_eps = d.norm_eps;
  cpu::hc_split_sinkhorn_f32(mix.data(), scale.data(), base.data(), cs, pre.data(), post.data(), comb.data());
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < H; ++i) col[size_t(i)] += pre[size_t(j)] * x[size_t(j * H + i)];
  float worst = 0.f;
  auto cmp = [&](const float* a, const std::vector<float>& b) {
    for (size_t i = 0; i < b.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]) / std::max(1.f, std::fabs(b[i])));
  };
  cmp(got.data(), col), cmp(got.data() + H, post), cmp(got.data() + H + n, comb);
  check(worst < 1e-5f, "n_hc " + std::to_string(n) + ": split + collapse vs the CPU's (max relative diff " +
                           std::to_string(worst) + ")");
}

void test_refusals() {
  dc::HcDims d;
  d.n_hc = 4, d.hidden = 64;
  static float dummy[64] __attribute__((aligned(16)));
  dc::HcFn ok{dummy, DType::F16, 24, 64, 4, 24 * 64 * 2};
  check(dc::hc_fused_supported(ok, d, false), "refusals: the baseline layout is taken");
  dc::HcFn q = ok;
  q.type = DType::Q8_0;
  dc::HcFn odd = ok;
  odd.cols = 60, odd.splits = 4;  // 4 * 60 != 256
  dc::HcFn head_rows = ok;        // 24 rows for a head (n = 4 rows)
  check(!dc::hc_fused_supported(q, d, false) && !dc::hc_fused_supported(odd, d, false) &&
            !dc::hc_fused_supported(head_rows, d, true),
        "refusals: Q8_0 fn, columns not covering n * hidden, a head with hc_pre's rows");
  bool threw = false;
  try {
    dc::hc_pre_fused(q, dummy, dummy, d, dummy, nullptr, nullptr, dummy, dummy, dummy,
                     dc::HcFusedScratch{dummy, reinterpret_cast<unsigned*>(dummy)}, dc::HcRows{}, nullptr);
  } catch (const InputError&) {
    threw = true;
  }
  check(threw, "refusals: hc_pre_fused throws InputError on a layout it does not take");
  {  // quantizing the collapse of several rows (decode only) is refused
    dc::HcDims d2;
    d2.n_hc = 4, d2.hidden = 128, d2.mix_splits = 1;
    bool threw2 = false;
    try {
      const dc::HcFn f{dummy, DType::F16, 24, 128, 4, 24 * 128 * 2};  // (checked on the host: nothing runs)
      dc::HcFusedScratch s{dummy, reinterpret_cast<unsigned*>(dummy)};
      s.q8_0 = reinterpret_cast<int8_t*>(dummy), s.q8_0_d = dummy;
      dc::hc_pre_fused(f, dummy, dummy, d2, dummy, nullptr, nullptr, dummy, dummy, dummy, s, dc::HcRows{2, 4096},
                       nullptr);
    } catch (const InputError&) {
      threw2 = true;
    }
    check(threw2, "refusals: hc_pre_fused refuses to quantize the collapse of 2 rows (InputError)");
  }
}

}  // namespace

int main() {
  dc::hc_fused_set_cluster(true);  // (whatever DS4_HC_CLUSTER or the default say: section 3b compares both forms)
  test_refusals();
  test_case(DType::F16, 4, 4096, 16, 5, true);  // DeepSeek V4 Flash: fn 24 x 16384 F16 in 16 blocks (a cluster)
  test_case(DType::F16, 4, 4096, 16, 70);  // a prefill chunk: the two-launch form (4 rows per block, 2 left over)
  test_case(DType::F32, 4, 4096, 16, 1, true);  // GLM 5.x Flash (F32 fn): a decode step
  test_case(DType::F32, 4, 4096, 16, 64);       // ... and the two-launch form's first row count
  test_case(DType::BF16, 4, 1024, 8, 3, true);  // a portable cluster size (8 blocks)
  test_case(DType::F16, 4, 512, 4, 3, true);    // 4 blocks
  test_case(DType::F32, 4, 6144, 16, 2, true);  // 3 groups of 32 float4 columns per block
  test_case(DType::F16, 6, 2048, 16, 3, true);  // n = 6: Sinkhorn's shared-memory form in the cluster
  test_case(DType::F32, 4, 64, 4, 3);     // the tiny test model's shape (F32 from safetensors)
  test_case(DType::BF16, 4, 256, 8, 2);
  test_case(DType::F16, 3, 512, 2, 4, true);  // n = 3: 15 rows (a cluster of 2)
  for (int64_t n : {1, 2, 3, 4, 5, 6, 8}) test_split_vs_cpu(n);
  std::printf("%s\n", ds4::cuda_test::g_fail ? "FAILED" : "all ok");
  return ds4::cuda_test::g_fail ? 1 : 0;
}
