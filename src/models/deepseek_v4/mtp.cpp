#include "models/deepseek_v4/mtp.h"

#include <algorithm>
#include <string>

#include "backend/cpu/norm.h"
#include "core/error.h"

namespace ds4::deepseek_v4 {
namespace {

// prev {T, hc, H}, tok {T} -> rows {T, hc, H}: the embedding half is the same in every stream.
std::vector<float> head_rows(const Ctx& ctx, const Weights& w, const float* prev, const int32_t* tok, int64_t T) {
  const Config& c = ctx.c;
  const MtpWeights& m = *w.mtp;
  const int64_t H = c.hidden, n = c.hc;
  std::vector<float> e(static_cast<size_t>(T * H)), hn(static_cast<size_t>(T * n * H));
  for (int64_t t = 0; t < T; ++t) {
    dequantize_row(w.embed, tok[t], e.data() + t * H);
    cpu::rmsnorm_f32(e.data() + t * H, m.enorm.data(), 0.0f, H, c.rms_eps, e.data() + t * H);
  }
  for (int64_t r = 0; r < T * n; ++r) cpu::rmsnorm_f32(prev + r * H, m.hnorm.data(), 0.0f, H, c.rms_eps, hn.data() + r * H);
  const std::vector<float> ep = project(ctx, m.e_proj, e.data(), T, "mtp e_proj");
  std::vector<float> rows = project(ctx, m.h_proj, hn.data(), T * n, "mtp h_proj");  // per stream
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t i = 0; i < H; ++i) rows[size_t((t * n + j) * H + i)] += ep[size_t(t * H + i)];
  return rows;
}

void head_logits(const Ctx& ctx, const cpu::HcShape& hc, const Weights& w, const float* y, float* logits) {
  const int64_t H = ctx.c.hidden;
  std::vector<float> h(static_cast<size_t>(H));
  cpu::hc_head_f32(w.mtp->head_hc.view(), hc, y, 1, h.data(), ctx.pool);
  cpu::rmsnorm_f32(h.data(), w.mtp->norm.data(), 0.0f, H, ctx.c.rms_eps, h.data());
  product(ctx, w.lm_head, h.data(), 1, logits);
}

}  // namespace

void mtp_record(const Ctx& ctx, const cpu::HcShape& hc, const Weights& w, State& s, std::span<const int32_t> tokens,
                int64_t p0, const float* x) {
  const int64_t T = int64_t(tokens.size()), W = ctx.c.hc * ctx.c.hidden;
  if (!s.mtp_on || T == 0) return;
  std::vector<float> rows = head_rows(ctx, w, x, tokens.data(), T);
  decoder_layer(ctx, hc, w.mtp->block, ctx.c.layers, s.mtp, tokens.data(), T, p0, rows);
  s.mtp_last_y.assign(rows.end() - W, rows.end());
  if (s.cap_on) s.cap_mtp_y = std::move(rows);  // captured verify window: y of every row
}

void mtp_draft(const Ctx& ctx, const cpu::HcShape& hc, const Weights& w, State& s, int32_t next_token, int depth,
               std::vector<float>& logits, std::vector<int32_t>& drafts, const DraftPick* pick) {
  const Config& c = ctx.c;
  if (!s.mtp_on || s.mtp_last_y.empty()) throw InputError("deepseek_v4: MTP drafting needs the head enabled and a prefill");
  if (next_token < 0 || next_token >= c.vocab)
    throw InputError("deepseek_v4: draft token id " + std::to_string(next_token) + " outside [0, " +
                     std::to_string(c.vocab) + ")");
  if (depth < 0) throw InputError("deepseek_v4: negative draft depth " + std::to_string(depth));
  const int64_t V = c.vocab;
  const LayerState saved = s.mtp;  // the window is at most (sliding_window - 1) rows
  logits.assign(size_t(depth + 1) * size_t(V), 0.0f);
  drafts.clear();
  head_logits(ctx, hc, w, s.mtp_last_y.data(), logits.data());
  std::vector<float> y = s.mtp_last_y;
  int32_t tok = next_token;
  for (int k = 1; k <= depth; ++k) {
    std::vector<float> rows = head_rows(ctx, w, y.data(), &tok, 1);
    decoder_layer(ctx, hc, w.mtp->block, c.layers, s.mtp, &tok, 1, s.pos + k - 1, rows);
    float* lg = logits.data() + size_t(k) * size_t(V);
    head_logits(ctx, hc, w, rows.data(), lg);
    tok = pick ? (*pick)(std::span<const float>(lg, size_t(V))) : int32_t(std::max_element(lg, lg + V) - lg);
    drafts.push_back(tok);
    y.swap(rows);
  }
  s.mtp = saved;
}

}  // namespace ds4::deepseek_v4
