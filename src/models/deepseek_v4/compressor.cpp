// KV compression (HF DeepseekV4HCACompressor / DeepseekV4CSACompressor / DeepseekV4Indexer;
// ds4.c compressor_decode_one, indexer_allowed_decode_one).
#include <algorithm>
#include <cmath>

#include "backend/cpu/norm.h"
#include "backend/cpu/quant_sim.h"
#include "backend/cpu/rope.h"
#include "backend/cpu/topk.h"
#include "core/error.h"
#include "core/simd.h"
#include "core/thread_pool.h"
#include "models/deepseek_v4/layers.h"

namespace ds4::deepseek_v4 {
namespace {

// Pools the closed window in `s.pend_*` (plus the previous window's Ca half for CSA) into
// one entry: per feature a softmax over the slots' gates weights the slots' kv.
void emit_entry(const Ctx& ctx, const CompressorWeights& w, int64_t ratio, bool overlap, CompressorState& s,
                int64_t window_start) {
  const int64_t dim = w.dim, width = w.width;
  const bool has_prev = overlap && !s.prev_kv.empty();
  std::vector<float> pooled(static_cast<size_t>(dim));
  std::vector<float> g, v;
  for (int64_t j = 0; j < dim; ++j) {
    g.clear();
    v.clear();
    if (has_prev)  // previous window's Ca slots come first (HF new_kv[:, :, :ratio])
      for (int64_t r = 0; r < ratio; ++r) g.push_back(s.prev_gate[size_t(r * dim + j)]), v.push_back(s.prev_kv[size_t(r * dim + j)]);
    const int64_t off = overlap ? dim : 0;  // CSA: this window's Cb half
    for (int64_t r = 0; r < ratio; ++r)
      g.push_back(s.pend_gate[size_t(r * width + off + j)]), v.push_back(s.pend_kv[size_t(r * width + off + j)]);
    const float m = *std::max_element(g.begin(), g.end());
    float sum = 0;
    for (float& e : g) sum += (e = std::exp(e - m));
    float acc = 0;
    for (size_t i = 0; i < g.size(); ++i) acc += v[i] * (g[i] / sum);
    pooled[size_t(j)] = acc;
  }
  std::vector<float> entry(static_cast<size_t>(dim));
  cpu::rmsnorm_f32(pooled.data(), w.norm.data(), 0.0f, dim, ctx.c.rms_eps, entry.data());
  // rope on the tail at the window's first position (HF: i * ratio + first_window_position)
  cpu::rope_f32(entry.data() + (dim - ctx.c.rope_dim), 1, dim, ctx.c.rope_dim, window_start,
                ctx.inv_freq_compress.data(), cpu::RopeStyle::kInterleaved);
  if (w.indexer) ds4_indexer_storage(ctx.c, entry.data(), dim);
  else ds4_kv_storage(ctx.c, entry.data(), dim);
  s.entries.append(entry.data(), 1);
}

// The lane bookkeeping of one closed window once its entry exists: count it, keep its Ca
// half (CSA) for the next window, empty the open window.
void close_window(int64_t ratio, bool overlap, int64_t dim, int64_t width, CompressorState& s) {
  ++s.n_entries;
  if (overlap) {  // keep this window's Ca half for the next window
    s.prev_kv.assign(size_t(ratio * dim), 0.0f);
    s.prev_gate.assign(size_t(ratio * dim), 0.0f);
    for (int64_t r = 0; r < ratio; ++r)
      for (int64_t j = 0; j < dim; ++j) {
        s.prev_kv[size_t(r * dim + j)] = s.pend_kv[size_t(r * width + j)];
        s.prev_gate[size_t(r * dim + j)] = s.pend_gate[size_t(r * width + j)];
      }
  }
  s.pend_kv.clear();
  s.pend_gate.clear();
}

// Appends rows [0, T) (kv, gate with the position bias; {T, width}) at positions p0.. to the
// open window; a closed window is pooled into an entry when `ctx` is given, else (captured
// commit: the entry already exists) only closed.
void append_rows(const Ctx* ctx, const CompressorWeights& w, int64_t ratio, bool overlap, CompressorState& s,
                 const std::vector<float>& kv, const std::vector<float>& gate, int64_t T, int64_t p0) {
  const int64_t width = w.width;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = p0 + t, slot = pos % ratio;
    DS4_CHECK(int64_t(s.pend_kv.size()) == slot * width, "compressor: open window out of step with position");
    s.pend_kv.insert(s.pend_kv.end(), kv.begin() + t * width, kv.begin() + (t + 1) * width);
    s.pend_gate.insert(s.pend_gate.end(), gate.begin() + t * width, gate.begin() + (t + 1) * width);
    if (slot != ratio - 1) continue;
    if (ctx) emit_entry(*ctx, w, ratio, overlap, s, pos + 1 - ratio);
    close_window(ratio, overlap, w.dim, width, s);
  }
}

}  // namespace

void ds4_kv_storage(const Config& c, float* row, int64_t dim) {
  const int64_t nope = dim - c.rope_dim;
  if (c.ds4_numerics && nope > 0 && nope % 64 == 0) cpu::fp8_e4m3_roundtrip_f32(row, nope, 64);
}

void ds4_indexer_storage(const Config& c, float* row, int64_t dim) {
  if (!c.ds4_numerics || dim != 128) return;
  cpu::hadamard_f32(row, dim);
  cpu::fp4_e2m1_roundtrip_f32(row, dim, 32);
}

void product(const Ctx& ctx, const WeightMatrix& w, const float* x, int64_t n, float* y) {
  product(ctx.rounding, ctx.c.act_quant, w, x, n, y, ctx.pool);
}

std::vector<float> project(const Ctx& ctx, const WeightMatrix& w, const float* x, int64_t n, const char* what) {
  std::vector<float> y(static_cast<size_t>(n * w.rows));
  if (n > 0) product(ctx, w, x, n, y.data());
  (void)what;
  return y;
}

void compressor_push(const Ctx& ctx, const CompressorWeights& w, int64_t ratio, bool overlap,
                     CompressorState& s, const float* x, int64_t T, int64_t p0, LaneCapture* cap) {
  const int64_t width = w.width;
  const std::vector<float> kv = project(ctx, w.kv, x, T, "compressor kv");  // {T, width}
  std::vector<float> gate = project(ctx, w.gate, x, T, "compressor gate");  // {T, width}
  for (int64_t t = 0; t < T; ++t) {
    const int64_t slot = (p0 + t) % ratio;
    for (int64_t j = 0; j < width; ++j) gate[size_t(t * width + j)] += w.ape[size_t(slot * width + j)];
  }
  if (cap) {
    cap->before = CompressorState{s.pend_kv, s.pend_gate, s.prev_kv, s.prev_gate, {}, s.n_entries};
    cap->kv = kv;
    cap->gate = gate;
  }
  append_rows(&ctx, w, ratio, overlap, s, kv, gate, T, p0);
}

void compressor_commit(const CompressorWeights& w, int64_t ratio, bool overlap, CompressorState& s,
                       const LaneCapture& cap, int64_t keep, int64_t p0) {
  PagedRows entries = std::move(s.entries);
  s = cap.before;
  append_rows(nullptr, w, ratio, overlap, s, cap.kv, cap.gate, keep, p0);
  entries.truncate(s.n_entries);
  s.entries = std::move(entries);
}

std::vector<std::vector<int32_t>> indexer_select(const Ctx& ctx, const LayerWeights& w, int64_t ratio,
                                                 const CompressorState& index, const float* qr,
                                                 const float* x, int64_t T, int64_t p0) {
  const Config& c = ctx.c;
  const int64_t nh = c.index_heads, d = c.index_dim;
  std::vector<float> q = project(ctx, w.index_q_b, qr, T, "indexer q");  // {T, nh, d}
  const std::vector<float> hw = project(ctx, w.index_proj, x, T, "indexer weights");  // {T, nh}
  std::vector<std::vector<int32_t>> sel(static_cast<size_t>(T));
  const float score_scale = 1.0f / std::sqrt(float(d)), head_scale = 1.0f / std::sqrt(float(nh));
  parallel_for(ctx.pool, T, [&](int64_t b, int64_t e) {
    std::vector<float> scores;
    for (int64_t t = b; t < e; ++t) {
      const int64_t pos = p0 + t;
      const int64_t visible = std::min((pos + 1) / ratio, index.n_entries);  // windows closed by pos
      float* qt = q.data() + t * nh * d;
      cpu::rope_f32(qt + (d - c.rope_dim), nh, d, c.rope_dim, pos, ctx.inv_freq_compress.data(),
                    cpu::RopeStyle::kInterleaved);
      for (int64_t h = 0; h < nh; ++h) ds4_indexer_storage(c, qt + h * d, d);
      scores.assign(size_t(visible), 0.0f);
      for (int64_t k = 0; k < visible; ++k) {
        const float* kk = index.entries.row(k);
        float s = 0;
        for (int64_t h = 0; h < nh; ++h) {
          const float dot = dot_f32(qt + h * d, kk, d);
          s += std::max(dot, 0.0f) * score_scale * (hw[size_t(t * nh + h)] * head_scale);
        }
        scores[size_t(k)] = s;
      }
      cpu::topk_f32(scores.data(), visible, std::min<int64_t>(c.index_topk, visible), sel[size_t(t)]);
    }
  });
  return sel;
}

}  // namespace ds4::deepseek_v4
