#pragma once
// MTPLX's DSpark block drafter for DeepSeek V4 on CPU (mtplx/models/deepseek_v4_dspark.py;
// torch reference tools/reference/deepseek_v4/dspark_mtplx_ref.py; docs/reference-differences.md):
//   main_q   = main_norm(main_proj(cat[HC mean of the tap layers at q]))   per consumed q
//   ring     = per stage the last `window` rows kv_norm(kv(main_q)), rope'd at q
//   block    = [primary, noise x 4] at positions p .. p + 4 (p = consumed count), 3 stages
//              whose attention sees the ring and all five block rows (no causal mask)
//   neural   = lm_head(norm(hc_head(x)));  draft_r = argmax(neural_r + markov_w2(markov_w1[prev_r]))
//   conf_r   = sigmoid(proj . [norm'd hidden_r, markov_w1[prev_r]])
#include <cstdint>
#include <vector>

#include "models/deepseek_v4/layers.h"

namespace ds4::deepseek_v4 {

// taps {T, n_taps * hidden}: the HC means of the tap layers for tokens at p0..; appends
// their K/V rows to every stage's ring (keeps the last `window`).
void dspark_record(const Ctx& ctx, const Weights& w, State& s, const float* taps, int64_t T, int64_t p0);

struct DsparkDraft {
  std::vector<float> logits;      // {5, vocab}: neural + Markov bias of the row's predecessor
  std::vector<int32_t> drafts;    // {5}: argmax per row, for positions p + 1 .. p + 5
  std::vector<float> confidence;  // {5}
};

// One K5 pass after the state consumed p tokens; `primary` is the target's token for p.
// Leaves `s` unchanged.
void dspark_draft(const Ctx& ctx, const cpu::HcShape& hc, const Weights& w, const State& s, int32_t primary,
                  DsparkDraft& out);

}  // namespace ds4::deepseek_v4
