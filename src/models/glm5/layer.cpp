#include "models/glm5/layer.h"

#include "backend/cpu/hyper_connections.h"
#include "backend/cpu/norm.h"
#include "models/glm5/kda.h"
#include "models/glm5/mla.h"
#include "models/glm5/moe.h"

namespace ds4::glm5 {

void decoder_layer(const LayerWeights& L, const Config& c, KdaState* kda, MlaState* mla, int64_t pos, int64_t n,
                   std::vector<float>& x, std::vector<float>& tmp, Selection& sel, ThreadPool* pool) {
  const LayerSeq one{kda, mla, &sel, pos, n};
  decoder_layer_seqs(L, c, std::span<const LayerSeq>(&one, 1), x, tmp, pool);
}

void decoder_layer_seqs(const LayerWeights& L, const Config& c, std::span<const LayerSeq> seqs, std::vector<float>& x,
                        std::vector<float>& tmp, ThreadPool* pool) {
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  int64_t n = 0;
  for (const LayerSeq& s : seqs) n += s.n;
  std::vector<float> post(size_t(n * hc)), comb(size_t(n * hc * hc)), in(size_t(n * H)), y(size_t(n * H));
  // Attention half: collapse streams, norm, mix, expand.
  cpu::hc_pre_f32(L.attn_hc.w, L.attn_hc.shape, x.data(), n, in.data(), post.data(), comb.data(), pool);
  for (int64_t t = 0; t < n; ++t)
    cpu::rmsnorm_f32(in.data() + t * H, L.input_norm.data(), 0.0f, H, c.rms_norm_eps, in.data() + t * H);
  if (L.kind == LayerKind::kLinear) {
    std::vector<KdaSeq> k;
    for (const LayerSeq& s : seqs) k.push_back({s.kda, s.n});
    kda_forward_seqs(L.kda, c, in.data(), k, y.data(), pool);
  } else {
    std::vector<MlaSeq> m;
    for (const LayerSeq& s : seqs) m.push_back({s.mla, s.sel, s.pos, s.n});
    mla_forward_seqs(L.mla, c, in.data(), m, y.data(), pool);
  }
  cpu::hc_post_f32(L.attn_hc.shape, y.data(), x.data(), post.data(), comb.data(), n, tmp.data());
  x.swap(tmp);
  // Feed-forward half.
  cpu::hc_pre_f32(L.ffn_hc.w, L.ffn_hc.shape, x.data(), n, in.data(), post.data(), comb.data(), pool);
  for (int64_t t = 0; t < n; ++t)
    cpu::rmsnorm_f32(in.data() + t * H, L.post_norm.data(), 0.0f, H, c.rms_norm_eps, in.data() + t * H);
  if (L.sparse_mlp) moe_forward(L.moe, c, in.data(), n, y.data(), pool);
  else mlp_forward(L.mlp, c.swiglu_limit, in.data(), n, y.data(), pool);
  cpu::hc_post_f32(L.ffn_hc.shape, y.data(), x.data(), post.data(), comb.data(), n, tmp.data());
  x.swap(tmp);
}

void hc_mean(const Config& c, const float* x, int64_t n, const float* norm, float* out) {
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  for (int64_t t = 0; t < n; ++t) {
    float* ht = out + t * H;
    for (int64_t d = 0; d < H; ++d) ht[d] = 0.0f;
    for (int64_t s = 0; s < hc; ++s)
      for (int64_t d = 0; d < H; ++d) ht[d] += x[(t * hc + s) * H + d];
    for (int64_t d = 0; d < H; ++d) ht[d] /= float(hc);
    if (norm) cpu::rmsnorm_f32(ht, norm, 0.0f, H, c.rms_norm_eps, ht);
  }
}

}  // namespace ds4::glm5
