#pragma once
// Captured-prefix commit of DeepSeek V4 (speculative decoding; models/draft_head.h): the
// batched verify window runs once on the state while every layer records its window, lane
// and head rows; keeping the first `keep` rows then costs copies, never a second forward.
#include <cstdint>
#include <span>

#include "models/deepseek_v4/state.h"
#include "models/deepseek_v4/weights.h"

namespace ds4::deepseek_v4 {

// Before / after the verify forward of `tokens` on `s` (abort: the forward threw).
void capture_begin(State& s);
void capture_end(State& s, std::span<const int32_t> tokens);
void capture_abort(State& s);

// Turns `s` into the state after the first `keep` rows of its captured window (1..n).
// `c` is the model's config with its head layers appended (with_mtp_layer / with_dspark_layers).
void commit_captured_prefix(const Config& c, const Weights& w, State& s, int64_t keep);

}  // namespace ds4::deepseek_v4
