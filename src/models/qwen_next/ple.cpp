// PLE, per-layer n-gram embedding (HF Qwen4ExpTextPLELayer + Qwen4ExpTextNGramEmbedding;
// MTPLX keeps the table in an SSD sidecar). Hashed 2..n-gram rows are looked up, projected
// to one value and one key per residual stream; the stream activations gate the value
// (signed-sqrt of a scaled dot product through a sigmoid) and a dilated depthwise conv over
// time adds local context. The result is added to every stream before the layer.
#include <cmath>
#include <vector>

#include "backend/cpu/activation.h"
#include "backend/cpu/conv1d.h"
#include "backend/cpu/norm.h"
#include "core/error.h"
#include "models/qwen_next/layers.h"
#include "models/qwen_next/ple_hash.h"

namespace ds4::qwen_next {
namespace {

// emb {n, ple_dim}: table rows of every position's n-gram heads, concatenated.
void gather_embeddings(const Config& c, const PleWeights& w, LayerState& s, const int32_t* tokens, int64_t n,
                       float* emb) {
  const int64_t heads = (c.ngram - 1) * c.heads_per_ngram, ctx = c.ngram - 1;
  std::vector<int32_t> hist(s.ple_ctx);  // {ctx + n}: the previous tokens, then the new ones
  hist.insert(hist.end(), tokens, tokens + n);
  // {n, heads} row ids; the gathered rows {n * heads, hd} are exactly emb {n, ple_dim}.
  std::vector<int64_t> ids(size_t(n * heads));
  for (int64_t t = 0; t < n; ++t) ple_ngram_ids(c, w, hist.data() + t, ids.data() + t * heads);
  for (int64_t id : ids)
    if (id < 0 || id >= w.table->rows()) throw Error("PLE n-gram row " + std::to_string(id) + " out of range");
  w.table->gather(ids.data(), n * heads, emb);
  s.ple_ctx.assign(hist.end() - ctx, hist.end());
}

}  // namespace

void ple_forward(const Ctx& x, const PleWeights& w, LayerState& s, const int32_t* tokens, float* h, int64_t n) {
  const SeqRows one{&s, 0, n, tokens};
  ple_forward_seqs(x, w, std::span<const SeqRows>(&one, 1), h);
}

void ple_forward_seqs(const Ctx& x, const PleWeights& w, std::span<const SeqRows> seqs, float* h) {
  const Config& c = x.c;
  const int64_t W = c.wide(), d = c.hidden, n = total_rows(seqs);
  std::vector<float> emb(size_t(n * c.ple_dim)), key(size_t(n * W)), val(size_t(n * d)), gv(size_t(n * W)),
      gvn(size_t(n * W)), conv(size_t(n * W));
  for (int64_t r0 = 0; const SeqRows& q : seqs) {  // each sequence's own n-gram context
    if (q.s->cap.on) q.s->cap.ple_ctx0 = q.s->ple_ctx;
    gather_embeddings(c, w, *q.s, q.tokens, q.n, emb.data() + r0 * c.ple_dim);
    r0 += q.n;
  }
  matmul(w.key, emb.data(), n, key.data(), x.pool);    // {n, hc*d}
  matmul(w.value, emb.data(), n, val.data(), x.pool);  // {n, d}
  const float inv_sqrt_d = 1.0f / std::sqrt(float(d));
  std::vector<float> qn(static_cast<size_t>(W));
  for (int64_t t = 0; t < n; ++t) {
    float* kt = key.data() + t * W;
    cpu::rmsnorm_grouped_f32(kt, w.norm_key.data(), 1.0f, W, d, c.rms_eps, kt);
    cpu::rmsnorm_grouped_f32(h + t * W, w.norm_query.data(), 1.0f, W, d, c.rms_eps, qn.data());
    for (int64_t k = 0; k < c.hc; ++k) {
      float dot = 0;
      for (int64_t i = 0; i < d; ++i) dot += kt[k * d + i] * qn[size_t(k * d + i)];
      float g = dot * inv_sqrt_d;
      g = std::sqrt(std::max(std::fabs(g), 1e-6f)) * float((g > 0) - (g < 0));  // signed sqrt
      const float sg = cpu::sigmoid(g);
      for (int64_t i = 0; i < d; ++i) gv[size_t(t * W + k * d + i)] = sg * val[size_t(t * d + i)];
    }
    cpu::rmsnorm_grouped_f32(gv.data() + t * W, w.norm_conv.data(), 1.0f, W, d, c.rms_eps, gvn.data() + t * W);
  }
  for (int64_t r0 = 0; const SeqRows& q : seqs) {  // the dilated conv history is per sequence
    LayerState& s = *q.s;
    if (s.cap.on) {
      s.cap.ple_conv0 = s.ple_conv;
      s.cap.ple_in.assign(gvn.begin() + r0 * W, gvn.begin() + (r0 + q.n) * W);  // this sequence's rows
    }
    cpu::conv1d_causal_f32(
        {gvn.data() + r0 * W, q.n, W, w.conv.data(), c.ple_conv_k, c.ngram, s.ple_conv.data(), conv.data() + r0 * W});
    r0 += q.n;
  }
  for (int64_t i = 0; i < n * W; ++i) h[i] += gv[size_t(i)] + cpu::silu(conv[size_t(i)]);
}

}  // namespace ds4::qwen_next
