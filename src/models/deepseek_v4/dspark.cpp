#include "models/deepseek_v4/dspark.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/norm.h"
#include "backend/cpu/rope.h"
#include "core/error.h"
#include "core/simd.h"
#include "core/thread_pool.h"

namespace ds4::deepseek_v4 {
namespace {

constexpr int64_t kBlock = 5;  // MTPLX DSPARK_BLOCK_SIZE

// kv_norm(kv(x)) rope'd at p0 + t: x {T, hidden} -> {T, head_dim}.
std::vector<float> kv_rows(const Ctx& ctx, const LayerWeights& w, const float* x, int64_t T, int64_t p0) {
  const Config& c = ctx.c;
  const int64_t hd = c.head_dim, nope = hd - c.rope_dim;
  std::vector<float> kv = project(ctx, w.kv, x, T, "dspark kv");
  for (int64_t t = 0; t < T; ++t) {
    float* kt = kv.data() + t * hd;
    cpu::rmsnorm_f32(kt, w.kv_norm.data(), 0.0f, hd, c.rms_eps, kt);
    cpu::rope_f32(kt + nope, 1, hd, c.rope_dim, p0 + t, ctx.inv_freq_main.data(), cpu::RopeStyle::kInterleaved);
  }
  return kv;
}

// K5 attention (MTPLX _run_dspark_k5_nvfp4_mla, route 5): x {5, hidden} normed block rows at
// p0..p0+4; keys = ring {n_ring, hd} then the block's own rows, all visible, plus the sink.
void k5_attention(const Ctx& ctx, const LayerWeights& w, const std::vector<float>& ring, int64_t n_ring,
                  const float* x, int64_t p0, float* out) {
  const Config& c = ctx.c;
  const int64_t hd = c.head_dim, nope = hd - c.rope_dim, T = kBlock;
  std::vector<float> qr = project(ctx, w.q_a, x, T, "dspark q_a");
  for (int64_t t = 0; t < T; ++t)
    cpu::rmsnorm_f32(qr.data() + t * c.q_lora, w.q_a_norm.data(), 0.0f, c.q_lora, c.rms_eps, qr.data() + t * c.q_lora);
  std::vector<float> q = project(ctx, w.q_b, qr.data(), T, "dspark q_b");  // {5, heads, hd}
  for (int64_t t = 0; t < T; ++t) {
    float* qt = q.data() + t * c.heads * hd;
    for (int64_t h = 0; h < c.heads; ++h) cpu::rmsnorm_f32(qt + h * hd, nullptr, 1.0f, hd, c.rms_eps, qt + h * hd);
    cpu::rope_f32(qt + nope, c.heads, hd, c.rope_dim, p0 + t, ctx.inv_freq_main.data(), cpu::RopeStyle::kInterleaved);
  }
  std::vector<float> keys(ring.begin(), ring.begin() + n_ring * hd);
  const std::vector<float> own = kv_rows(ctx, w, x, T, p0);
  keys.insert(keys.end(), own.begin(), own.end());
  const int64_t nk = n_ring + T;
  const float scale = 1.0f / std::sqrt(float(hd));
  std::vector<float> heads(static_cast<size_t>(T * c.heads * hd), 0.0f), sc(static_cast<size_t>(nk));
  for (int64_t r = 0; r < T * c.heads; ++r) {
    const float* qv = q.data() + r * hd;
    const float sink = w.sinks[size_t(r % c.heads)];
    float m = sink;
    for (int64_t k = 0; k < nk; ++k) m = std::max(m, sc[size_t(k)] = dot_f32(qv, keys.data() + k * hd, hd) * scale);
    float denom = std::exp(sink - m);
    for (float& v : sc) denom += (v = std::exp(v - m));
    float* o = heads.data() + r * hd;
    for (int64_t k = 0; k < nk; ++k)
      for (int64_t i = 0; i < hd; ++i) o[i] += sc[size_t(k)] / denom * keys[size_t(k * hd + i)];
  }
  for (int64_t t = 0; t < T; ++t)  // K == V: rotate the output's rope tail back
    cpu::rope_f32(heads.data() + t * c.heads * hd + nope, c.heads, hd, c.rope_dim, -(p0 + t),
                  ctx.inv_freq_main.data(), cpu::RopeStyle::kInterleaved);
  grouped_output(ctx, w, heads.data(), T, out);
}

// DeepseekV4DSparkStage: decoder_layer with the K5 attention. x {5, hc, hidden} in/out.
void stage(const Ctx& ctx, const cpu::HcShape& hc, const LayerWeights& w, int64_t layer,
           const std::vector<float>& ring, int64_t n_ring, const int32_t* ids, int64_t p0, std::vector<float>& x) {
  const Config& c = ctx.c;
  const int64_t H = c.hidden, n = c.hc, T = kBlock;
  std::vector<float> col(size_t(T * H)), post(size_t(T * n)), comb(size_t(T * n * n)), y(size_t(T * H)), next(x.size());
  cpu::hc_pre_f32(w.attn_hc.view(), hc, x.data(), T, col.data(), post.data(), comb.data(), ctx.pool);
  for (int64_t t = 0; t < T; ++t) cpu::rmsnorm_f32(col.data() + t * H, w.attn_norm.data(), 0.0f, H, c.rms_eps, col.data() + t * H);
  k5_attention(ctx, w, ring, n_ring, col.data(), p0, y.data());
  cpu::hc_post_f32(hc, y.data(), x.data(), post.data(), comb.data(), T, next.data());
  cpu::hc_pre_f32(w.ffn_hc.view(), hc, next.data(), T, col.data(), post.data(), comb.data(), ctx.pool);
  for (int64_t t = 0; t < T; ++t) cpu::rmsnorm_f32(col.data() + t * H, w.ffn_norm.data(), 0.0f, H, c.rms_eps, col.data() + t * H);
  moe_forward(ctx, w, layer, ids, col.data(), T, y.data());
  cpu::hc_post_f32(hc, y.data(), next.data(), post.data(), comb.data(), T, x.data());
}

}  // namespace

void dspark_record(const Ctx& ctx, const Weights& w, State& s, const float* taps, int64_t T, int64_t p0) {
  const Config& c = ctx.c;
  if (!s.dspark_on || T == 0) return;
  const DsparkWeights& d = *w.dspark;
  const int64_t H = c.hidden, hd = c.head_dim;
  std::vector<float> main = project(ctx, d.main_proj, taps, T, "dspark main_proj");  // {T, H}
  for (int64_t t = 0; t < T; ++t) cpu::rmsnorm_f32(main.data() + t * H, d.main_norm.data(), 0.0f, H, c.rms_eps, main.data() + t * H);
  s.dspark_ring.resize(d.stages.size());
  if (s.cap_on) s.cap_ring_rows.resize(d.stages.size());
  const int64_t total = s.dspark_n + T, keep = std::min<int64_t>(total, c.window);
  for (size_t st = 0; st < d.stages.size(); ++st) {
    std::vector<float>& ring = s.dspark_ring[st];
    const std::vector<float> kv = kv_rows(ctx, d.stages[st], main.data(), T, p0);
    if (s.cap_on) s.cap_ring_rows[st] = kv;  // captured verify window (spec_commit.cpp)
    ring.insert(ring.end(), kv.begin(), kv.end());
    ring.erase(ring.begin(), ring.end() - keep * hd);
  }
  s.dspark_n = keep;
}

void dspark_draft(const Ctx& ctx, const cpu::HcShape& hc, const Weights& w, const State& s, int32_t primary,
                  DsparkDraft& out) {
  const Config& c = ctx.c;
  if (!s.dspark_on || s.dspark_n == 0 || s.pos == 0)
    throw InputError("deepseek_v4: DSpark drafting needs the drafter enabled and at least one consumed token");
  if (primary < 0 || primary >= c.vocab)
    throw InputError("deepseek_v4: draft token id " + std::to_string(primary) + " outside [0, " + std::to_string(c.vocab) + ")");
  const DsparkWeights& d = *w.dspark;
  const int64_t H = c.hidden, n = c.hc, V = c.vocab, R = d.rank;
  int32_t ids[kBlock] = {primary};
  std::fill(ids + 1, ids + kBlock, int32_t(c.dspark_noise));
  std::vector<float> x(size_t(kBlock * n * H));  // every HC stream starts as the embedding
  for (int64_t t = 0; t < kBlock; ++t) {
    dequantize_row(w.embed, ids[t], x.data() + t * n * H);
    for (int64_t j = 1; j < n; ++j) std::copy_n(x.data() + t * n * H, H, x.data() + (t * n + j) * H);
  }
  for (size_t st = 0; st < d.stages.size(); ++st)
    stage(ctx, hc, d.stages[st], c.layers + int64_t(st), s.dspark_ring[st], s.dspark_n, ids, s.pos, x);
  std::vector<float> h(size_t(kBlock * H));
  cpu::hc_head_f32(d.head_hc.view(), hc, x.data(), kBlock, h.data(), ctx.pool);
  for (int64_t t = 0; t < kBlock; ++t) cpu::rmsnorm_f32(h.data() + t * H, d.norm.data(), 0.0f, H, c.rms_eps, h.data() + t * H);
  out.logits.resize(size_t(kBlock * V));
  product(ctx, w.lm_head, h.data(), kBlock, out.logits.data());
  out.drafts.clear();
  out.confidence.clear();
  std::vector<float> emb(static_cast<size_t>(R)), bias(static_cast<size_t>(V));
  int32_t prev = primary;
  for (int64_t r = 0; r < kBlock; ++r) {  // _run_greedy_future_tokens_k5: sequential Markov chain
    dequantize_row(d.markov_w1, prev, emb.data());
    product(ctx, d.markov_w2, emb.data(), 1, bias.data());
    float* lg = out.logits.data() + r * V;
    for (int64_t v = 0; v < V; ++v) lg[v] += bias[size_t(v)];
    const float z = dot_f32(d.conf_proj.data(), h.data() + r * H, H) + dot_f32(d.conf_proj.data() + H, emb.data(), R);
    out.confidence.push_back(1.0f / (1.0f + std::exp(-z)));
    prev = int32_t(std::max_element(lg, lg + V) - lg);
    out.drafts.push_back(prev);
  }
}

}  // namespace ds4::deepseek_v4
