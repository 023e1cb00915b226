#pragma once
// Captured-prefix commit of GLM 5.x (speculative decoding; models/draft_head.h): the batched
// verify window runs once on the state while every KDA layer records its per-row state;
// keeping the first `keep` rows then costs copies, never a second forward (spec_commit.cpp).
#include <cstdint>
#include <span>

#include "models/glm5/config.h"
#include "models/glm5/state.h"

namespace ds4::glm5 {

// Before / after the verify forward of `tokens` on `st` (abort: the forward threw).
void capture_begin(State& st);
void capture_end(State& st, std::span<const int32_t> tokens);
void capture_abort(State& st);

// Turns `st` into the state after the first `keep` rows of its captured window (1..n).
void commit_captured_prefix(const Config& c, State& st, int64_t keep);

}  // namespace ds4::glm5
