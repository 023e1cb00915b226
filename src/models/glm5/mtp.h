#pragma once
// GLM 5.x integrated MTP draft head on CPU (reference: tools/reference/glm5/mtp_ref.py;
// provenance and our own choices: docs/reference-differences.md, GLM "MTP").
//   row(h, t) = eh_proj([enorm(embed(t)), hnorm(h)])          {hidden}
//   y         = decoder layer over the head's history rows, input expanded to hc streams
//   pre       = HC mean of y; logits = lm_head(rms_norm(pre, shared_head.norm))
// History row i pairs the trunk's normed output at position i with token i+1; draft k+1
// appends row(pre of draft k, draft k). The head's layer keeps its own positions 0, 1, ...
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "models/glm5/config.h"
#include "models/glm5/state.h"
#include "models/glm5/weights.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::glm5 {

// Makes `st` keep the head's history from the next forward on. Throws InputError when the
// checkpoint has no MTP layer or the state already consumed tokens.
void mtp_enable(const Config& c, const Weights& w, State& st);

// Called by forward() after the trunk consumed `tokens` with normed outputs hidden {n, H}:
// queues the rows whose next token is now known.
void mtp_record(const Config& c, State& st, std::span<const int32_t> tokens, const float* hidden);

// Chain of `depth` drafts after the state's last token, given the trunk's next token: each
// the argmax of its logits row, or `pick(row)` when given (exact speculative sampling).
// logits {depth, vocab}. Consumes queued rows into the head's history; the drafts themselves
// leave no trace in `st`.
using DraftPick = std::function<int32_t(std::span<const float>)>;
void mtp_draft(const Config& c, const Weights& w, State& st, int32_t next_token, int depth,
               std::vector<float>& logits, std::vector<int32_t>& drafts, ThreadPool* pool,
               const DraftPick* pick = nullptr);

}  // namespace ds4::glm5
