// DeepSeek V4 attention (HF DeepseekV4Attention; ds4.c layer_attention_* / rope_tail_*):
// q LoRA -> per-head unweighted RMSNorm -> rope on the head tail; one shared KV head
// (K == V) with its own norm and rope; keys = the sliding window of raw rows plus, on
// compressed layers, the compressed entries (all causally closed ones for HCA, the
// indexer's top-k for CSA); a learned per-head sink joins the softmax denominator; the
// output's rope tail is rotated back (position -p) and projected by grouped o LoRA.
#include <algorithm>
#include <cmath>

#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "core/error.h"
#include "core/simd.h"
#include "core/thread_pool.h"
#include "models/capture_rows.h"
#include "models/deepseek_v4/layers.h"

namespace ds4::deepseek_v4 {
namespace {

struct KeySet {
  const float* raw = nullptr;  // {n_raw, head_dim}: window rows then this chunk's rows
  int64_t n_raw_before = 0;    // rows that precede position p0
  const PagedRows* comp = nullptr; // {n_comp, head_dim}
  const std::vector<std::vector<int32_t>>* sel = nullptr;  // CSA: per-query allowed entries
  int64_t ratio = 0;
};

// One (query, head): softmax over [window keys, chosen compressed keys, sink].
void attend(const Ctx& ctx, const KeySet& ks, const float* q, float sink, int64_t t, int64_t p0, float* o,
            std::vector<float>& sc, std::vector<const float*>& rows) {
  const Config& c = ctx.c;
  const int64_t hd = c.head_dim, pos = p0 + t;
  rows.clear();
  const int64_t hi = ks.n_raw_before + t;  // this query's own row
  const int64_t lo = std::max<int64_t>(0, hi - c.window + 1);
  for (int64_t j = lo; j <= hi; ++j) rows.push_back(ks.raw + j * hd);
  if (ks.ratio > 0) {
    if (ks.sel) {
      for (int32_t k : (*ks.sel)[size_t(t)]) rows.push_back(ks.comp->row(k));
    } else {
      const int64_t visible = (pos + 1) / ks.ratio;
      for (int64_t k = 0; k < visible; ++k) rows.push_back(ks.comp->row(k));
    }
  }
  // The CUDA tensor-core chunk (cuda/attention_tc.cu) runs both products with TF32 operands:
  // q, the key / value rows and the softmax weights rounded (ctx.rounding: its emulation).
  std::vector<float> rounded;
  const bool tf32 = ctx.rounding != nullptr;
  auto round = [&](float v) { return tf32 ? round_operand(v, Operands::kTf32, ctx.rounding->truncate) : v; };
  if (tf32) {
    rounded.resize(size_t(int64_t(rows.size() + 1) * hd));
    for (int64_t i = 0; i < hd; ++i) rounded[size_t(i)] = round(q[i]);
    q = rounded.data();
    for (size_t r = 0; r < rows.size(); ++r) {
      float* k = rounded.data() + int64_t(r + 1) * hd;
      for (int64_t i = 0; i < hd; ++i) k[i] = round(rows[r][i]);
      rows[r] = k;
    }
  }
  const float scale = 1.0f / std::sqrt(float(hd));
  sc.resize(rows.size());
  float m = sink;
  for (size_t r = 0; r < rows.size(); ++r) {
    sc[r] = dot_f32(q, rows[r], hd) * scale;
    m = std::max(m, sc[r]);
  }
  float denom = std::exp(sink - m);
  for (float& s : sc) denom += (s = std::exp(s - m));
  std::fill(o, o + hd, 0.0f);
  for (size_t r = 0; r < rows.size(); ++r) {
    const float p = round(sc[r]) / denom;
    for (int64_t i = 0; i < hd; ++i) o[i] += p * rows[r][i];
  }
}

}  // namespace

// Grouped output projection: group g's heads {heads/g * hd} -> o_lora via rows
// [g * o_lora, (g+1) * o_lora) of o_a, then all groups {g * o_lora} -> hidden via o_b.
void grouped_output(const Ctx& ctx, const LayerWeights& w, const float* heads, int64_t T, float* out) {
  const Config& c = ctx.c;
  const int64_t G = c.o_groups, in = c.heads * c.head_dim / G, full = c.heads * c.head_dim;
  std::vector<float> low(static_cast<size_t>(T * G * c.o_lora)), xg(static_cast<size_t>(T * in)), yg(static_cast<size_t>(T * c.o_lora));
  for (int64_t g = 0; g < G; ++g) {
    WeightMatrix wg = w.o_a;
    wg.rows = c.o_lora;
    wg.data = static_cast<const uint8_t*>(w.o_a.data) + g * c.o_lora * w.o_a.row_stride_bytes();
    for (int64_t t = 0; t < T; ++t) std::copy_n(heads + t * full + g * in, in, xg.data() + t * in);
    product(ctx, wg, xg.data(), T, yg.data());
    for (int64_t t = 0; t < T; ++t) std::copy_n(yg.data() + t * c.o_lora, c.o_lora, low.data() + (t * G + g) * c.o_lora);
  }
  product(ctx, w.o_b, low.data(), T, out);
}

void attention_forward(const Ctx& ctx, const LayerWeights& w, int64_t layer, LayerState& s, const float* x,
                       int64_t T, int64_t p0, float* out) {
  const SeqRows one{&s, p0, T};
  attention_forward_seqs(ctx, w, layer, std::span<const SeqRows>(&one, 1), x, out);
}

void attention_forward_seqs(const Ctx& ctx, const LayerWeights& w, int64_t layer, std::span<const SeqRows> seqs,
                            const float* x, float* out) {
  const Config& c = ctx.c;
  const int64_t hd = c.head_dim, nope = hd - c.rope_dim, ratio = c.ratio(layer), H = c.hidden;
  const std::vector<float>& inv = ratio > 0 ? ctx.inv_freq_compress : ctx.inv_freq_main;
  int64_t n = 0;
  for (const SeqRows& sq : seqs) n += sq.T;
  // Row r of the pass: its position.
  std::vector<int64_t> pos_of;
  for (const SeqRows& sq : seqs)
    for (int64_t t = 0; t < sq.T; ++t) pos_of.push_back(sq.p0 + t);
  // q LoRA: qr {n, q_lora} (the indexer reads it too), q {n, heads, hd}
  std::vector<float> qr = project(ctx, w.q_a, x, n, "q_a");
  for (int64_t t = 0; t < n; ++t)
    cpu::rmsnorm_f32(qr.data() + t * c.q_lora, w.q_a_norm.data(), 0.0f, c.q_lora, c.rms_eps, qr.data() + t * c.q_lora);
  std::vector<float> q = project(ctx, w.q_b, qr.data(), n, "q_b");
  // kv {n, hd}: the single shared head, used as key and value
  std::vector<float> kv = project(ctx, w.kv, x, n, "kv");
  for (int64_t t = 0; t < n; ++t) {
    const int64_t p = pos_of[size_t(t)];
    float* qt = q.data() + t * c.heads * hd;
    for (int64_t h = 0; h < c.heads; ++h) cpu::rmsnorm_f32(qt + h * hd, nullptr, 1.0f, hd, c.rms_eps, qt + h * hd);
    cpu::rope_f32(qt + nope, c.heads, hd, c.rope_dim, p, inv.data(), cpu::RopeStyle::kInterleaved);
    float* kt = kv.data() + t * hd;
    cpu::rmsnorm_f32(kt, w.kv_norm.data(), 0.0f, hd, c.rms_eps, kt);
    cpu::rope_f32(kt + nope, 1, hd, c.rope_dim, p, inv.data(), cpu::RopeStyle::kInterleaved);
    ds4_kv_storage(c, kt, hd);
  }
  std::vector<float> heads(static_cast<size_t>(n * c.heads * hd));
  for (int64_t r0 = 0; const SeqRows& sq : seqs) {  // keys, compressors and attention per sequence
    LayerState& s = *sq.s;
    const int64_t T = sq.T, p0 = sq.p0;
    const float* xs = x + r0 * H;
    // raw rows visible to this chunk: the kept window, then the new rows {n_before + T, hd}
    std::vector<float> raw(s.window);
    raw.insert(raw.end(), kv.begin() + r0 * hd, kv.begin() + (r0 + T) * hd);
    KeySet ks{raw.data(), s.n_window, nullptr, nullptr, ratio};
    std::vector<std::vector<int32_t>> sel;
    if (ratio > 0) {
      const bool csa = w.has_indexer;
      compressor_push(ctx, w.comp, ratio, csa, s.comp, xs, T, p0, s.cap.on ? &s.cap.comp : nullptr);
      if (csa) {
        compressor_push(ctx, w.index, ratio, true, s.index, xs, T, p0, s.cap.on ? &s.cap.index : nullptr);
        sel = indexer_select(ctx, w, ratio, s.index, qr.data() + r0 * c.q_lora, xs, T, p0);
        ks.sel = &sel;
      }
      ks.comp = &s.comp.entries;
    }
    float* hs = heads.data() + r0 * c.heads * hd;
    const float* qs = q.data() + r0 * c.heads * hd;
    parallel_for(ctx.pool, T * c.heads, [&](int64_t b, int64_t e) {
      std::vector<float> sc;
      std::vector<const float*> rows;
      for (int64_t r = b; r < e; ++r) {
        const int64_t t = r / c.heads, h = r % c.heads;
        attend(ctx, ks, qs + r * hd, w.sinks[size_t(h)], t, p0, hs + r * hd, sc, rows);
      }
    });
    // K == V carried rope on its tail; rotate the output back at the query position.
    for (int64_t t = 0; t < T; ++t)
      cpu::rope_f32(hs + t * c.heads * hd + nope, c.heads, hd, c.rope_dim, -(p0 + t), inv.data(),
                    cpu::RopeStyle::kInterleaved);
    if (s.cap.on) {  // a captured verify window: what attention_commit needs
      s.cap.window0 = s.window;
      s.cap.n_window0 = s.n_window;
      s.cap.rows.assign(kv.begin() + r0 * hd, kv.begin() + (r0 + T) * hd);  // this sequence's rows
    }
    // keep the last (window - 1) raw rows: with the next token they make a full window
    const int64_t total = s.n_window + T, keep = std::min<int64_t>(total, c.window - 1);
    s.window.assign(raw.end() - keep * hd, raw.end());
    s.n_window = keep;
    r0 += T;
  }
  grouped_output(ctx, w, heads.data(), n, out);
}

void attention_commit(const Config& c, const LayerWeights& w, int64_t layer, LayerState& s, int64_t keep, int64_t p0) {
  const int64_t hd = c.head_dim, ratio = c.ratio(layer);
  const int64_t rows = std::min<int64_t>(s.cap.n_window0 + keep, c.window - 1);
  tail_rows(s.cap.window0, s.cap.rows, keep, hd, rows, s.window);
  s.n_window = rows;
  if (ratio > 0) {
    const bool csa = w.has_indexer;
    compressor_commit(w.comp, ratio, csa, s.comp, s.cap.comp, keep, p0);
    if (csa) compressor_commit(w.index, ratio, true, s.index, s.cap.index, keep, p0);
  }
  s.cap = LayerCapture{};
}

}  // namespace ds4::deepseek_v4
