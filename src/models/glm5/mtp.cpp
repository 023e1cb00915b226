#include "models/glm5/mtp.h"

#include <algorithm>
#include <string>

#include "backend/cpu/norm.h"
#include "core/error.h"
#include "models/glm5/kda.h"
#include "models/glm5/layer.h"

namespace ds4::glm5 {
namespace {

// vLLM Glm4MoeMultiTokenPredictorLayer.forward: eh_proj(cat[enorm(embed(t)), hnorm(h)]).
// prev {n, H}, next {n} -> rows {n, hc, H} (the row repeated in every stream, like the
// trunk's embedding).
void head_rows(const Config& c, const Weights& w, const float* prev, const int32_t* next, int64_t n,
               std::vector<float>& rows, ThreadPool* pool) {
  const int64_t H = c.hidden_size, hc = c.hc_mult;
  const MtpWeights& m = *w.mtp;
  std::vector<float> cat(size_t(n * 2 * H)), x(size_t(n * H));
  for (int64_t t = 0; t < n; ++t) {
    float* e = cat.data() + t * 2 * H;  // [enorm(embed), hnorm(hidden)]
    dequantize_row(w.embed, next[t], e);
    cpu::rmsnorm_f32(e, m.enorm.data(), 0.0f, H, c.rms_norm_eps, e);
    cpu::rmsnorm_f32(prev + t * H, m.hnorm.data(), 0.0f, H, c.rms_norm_eps, e + H);
  }
  matmul(m.eh_proj, cat.data(), n, x.data(), pool);
  rows.resize(size_t(n * hc * H));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t s = 0; s < hc; ++s) std::copy_n(x.data() + t * H, H, rows.data() + (t * hc + s) * H);
}

// The head's layer over n rows at its positions mtp_pos.. (streams in place).
void head_layer(const Config& c, const Weights& w, State& st, int64_t n, std::vector<float>& x, ThreadPool* pool) {
  std::vector<float> tmp(x.size());
  Selection sel;
  decoder_layer(w.mtp->layer, c, &st.mtp_kda, &st.mtp_mla, st.mtp_pos, n, x, tmp, sel, pool);
  st.mtp_pos += n;
}

void catch_up(const Config& c, const Weights& w, State& st, ThreadPool* pool) {
  const int64_t n = int64_t(st.pending_next.size());
  if (n == 0) return;
  std::vector<float> x;
  head_rows(c, w, st.pending_hidden.data(), st.pending_next.data(), n, x, pool);
  head_layer(c, w, st, n, x, pool);
  st.pending_hidden.clear();
  st.pending_next.clear();
}

}  // namespace

void mtp_enable(const Config& c, const Weights& w, State& st) {
  if (!w.mtp)
    throw InputError("glm5: this checkpoint has no MTP layer (layers." + std::to_string(c.num_hidden_layers) +
                     ".eh_proj.weight)");
  if (st.pos != 0) throw InputError("glm5: enable the MTP head before the first forward");
  st.mtp_on = true;
  if (w.mtp->layer.kind == LayerKind::kLinear) kda_init_state(c, st.mtp_kda);
}

void mtp_record(const Config& c, State& st, std::span<const int32_t> tokens, const float* hidden) {
  const int64_t n = int64_t(tokens.size()), H = c.hidden_size;
  if (!st.mtp_on || n == 0) return;
  if (!st.last_hidden.empty()) {  // the previous call's last row now knows its next token
    st.pending_hidden.insert(st.pending_hidden.end(), st.last_hidden.begin(), st.last_hidden.end());
    st.pending_next.push_back(tokens[0]);
  }
  st.pending_hidden.insert(st.pending_hidden.end(), hidden, hidden + (n - 1) * H);
  st.pending_next.insert(st.pending_next.end(), tokens.begin() + 1, tokens.end());
  st.last_hidden.assign(hidden + (n - 1) * H, hidden + n * H);
}

void mtp_draft(const Config& c, const Weights& w, State& st, int32_t next_token, int depth,
               std::vector<float>& logits, std::vector<int32_t>& drafts, ThreadPool* pool, const DraftPick* pick) {
  if (!st.mtp_on || st.last_hidden.empty())
    throw InputError("glm5: MTP drafting needs the head enabled before a prefill");
  if (next_token < 0 || next_token >= c.vocab_size)
    throw InputError("glm5: draft token id " + std::to_string(next_token) + " outside vocab_size " +
                     std::to_string(c.vocab_size));
  if (depth < 0) throw InputError("glm5: negative draft depth " + std::to_string(depth));
  catch_up(c, w, st, pool);
  const int64_t H = c.hidden_size, V = c.vocab_size;
  // Draft rows must not stay in the committed history: the MLA caches are append-only
  // (trim back to these sizes), a KDA state is small and fixed (copy it).
  const MlaState& ms = st.mtp_mla;
  const int64_t nl = ms.latent.rows(), nk = ms.idx_keys.rows(), ng = ms.idx_gates.rows(), np = ms.pool_keys.rows();
  const KdaState kda_saved = st.mtp_kda;
  const int64_t pos_saved = st.mtp_pos;
  std::vector<float> prev = st.last_hidden, pre(static_cast<size_t>(H)), normed(static_cast<size_t>(H)), x;
  int32_t tok = next_token;
  logits.assign(size_t(depth) * size_t(V), 0.0f);
  drafts.clear();
  for (int k = 0; k < depth; ++k) {
    head_rows(c, w, prev.data(), &tok, 1, x, pool);
    head_layer(c, w, st, 1, x, pool);
    hc_mean(c, x.data(), 1, nullptr, pre.data());
    std::copy(pre.begin(), pre.end(), normed.begin());
    cpu::rmsnorm_f32(normed.data(), w.mtp->shared_norm.data(), 0.0f, H, c.rms_norm_eps, normed.data());
    float* lg = logits.data() + size_t(k) * size_t(V);
    matvec(w.lm_head, normed.data(), lg, pool);
    tok = pick ? (*pick)(std::span<const float>(lg, size_t(V))) : int32_t(std::max_element(lg, lg + V) - lg);
    drafts.push_back(tok);
    prev.swap(pre);
  }
  st.mtp_mla.latent.truncate(nl);
  st.mtp_mla.idx_keys.truncate(nk);
  st.mtp_mla.idx_gates.truncate(ng);
  st.mtp_mla.pool_keys.truncate(np);
  st.mtp_kda = kda_saved;
  st.mtp_pos = pos_saved;
}

}  // namespace ds4::glm5
