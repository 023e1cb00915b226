#pragma once
// antirez/ds4's MTP draft head for DeepSeek V4 on CPU (ds4.c metal_graph_eval_mtp_draft_from_hc;
// torch reference tools/reference/deepseek_v4/dspark_ref.py; docs/reference-differences.md):
//   row(prev_hc, t) = e_proj(rms_norm(embed(t), enorm)) + h_proj(rms_norm(prev_hc[s], hnorm))
//   y = the head's layer (sliding window, top-k MoE) at the token's position
//   logits = lm_head(rms_norm(hc_head_mtp(y), norm))
// Every consumed position q gets a history row (trunk final HC at q, t_q); its y of the last
// one predicts the target's next token. Draft k >= 1 = row(y of the previous row, token).
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "models/deepseek_v4/layers.h"

namespace ds4::deepseek_v4 {

// ctx.c must be with_mtp_layer(config) (the head's layer is index config.layers).
// x {T, hc, hidden}: the trunk's final HC states of `tokens` at positions p0.. Appends
// their rows to the head's window and keeps y of the last one.
void mtp_record(const Ctx& ctx, const cpu::HcShape& hc, const Weights& w, State& s, std::span<const int32_t> tokens,
                int64_t p0, const float* x);

// logits {depth + 1, vocab}: row 0 from the last consumed token's y (ds4 accepts a chain
// only if its argmax equals next_token), row k the k-th draft after next_token; drafts
// {depth} greedy, or `pick(row k)` when given (exact speculative sampling). Leaves `s`
// unchanged.
using DraftPick = std::function<int32_t(std::span<const float>)>;
void mtp_draft(const Ctx& ctx, const cpu::HcShape& hc, const Weights& w, State& s, int32_t next_token, int depth,
               std::vector<float>& logits, std::vector<int32_t>& drafts, const DraftPick* pick = nullptr);

}  // namespace ds4::deepseek_v4
